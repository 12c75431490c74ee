"""A stand-in language server that records what a client sends in ``initialize``.

Start it from an editor in place of ``shardlint server``; it writes
``{"clientInfo": ..., "capabilities": ...}`` to the file named by ``SHARDLINT_RECORD`` (the
client's own JSON, untouched), answers ``initialize`` and ``shutdown``, and ends on ``exit``.
This is how ``vscode.json`` and ``neovim.json`` beside it were made.
"""

from __future__ import annotations

import json
import os
import sys


def _read(stream) -> dict | None:
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(stream.read(length or 0))


def _write(stream, message: dict) -> None:
    body = json.dumps(message).encode("utf-8")
    stream.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    stream.flush()


def main() -> int:
    out = os.environ.get("SHARDLINT_RECORD", "client.json")
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while (msg := _read(stdin)) is not None:
        method = msg.get("method")
        if method == "initialize":
            params = msg.get("params") or {}
            with open(out, "w", encoding="utf-8") as fh:
                json.dump({"clientInfo": params.get("clientInfo"),
                           "capabilities": params.get("capabilities")}, fh, indent=2)
                fh.write("\n")
            _write(stdout, {"jsonrpc": "2.0", "id": msg["id"],
                            "result": {"capabilities": {"textDocumentSync": 1}}})
        elif method == "shutdown":
            _write(stdout, {"jsonrpc": "2.0", "id": msg["id"], "result": None})
        elif method == "exit":
            return 0
        elif "id" in msg and method is not None:
            _write(stdout, {"jsonrpc": "2.0", "id": msg["id"], "result": None})
    return 0


if __name__ == "__main__":
    sys.exit(main())
