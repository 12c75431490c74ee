"""Start a language server over stdio and shake hands: initialize, initialized, shutdown, exit.

    python scripts/lsp_hello.py [--expect-version V] -- COMMAND...

Prints the server's ``serverInfo`` as JSON and exits 0 when the session went through (and the
version is V, if given); 1 otherwise. Only the standard library: it runs under any Python, next to
a shardlint installed anywhere (the wheel round trip, scripts/wheel_roundtrip.sh, uses it).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

TIMEOUT_S = 60.0


def send(stream: IO[bytes], message: dict[str, Any]) -> None:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
    stream.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    stream.flush()


def receive(stream: IO[bytes]) -> dict[str, Any]:
    """One message; its headers end with an empty line, Content-Length says how long it is."""
    length = None
    while True:
        line = stream.readline()
        if not line:
            raise EOFError("the server closed its stdout")
        line = line.strip()
        if not line:
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value)
    if length is None:
        raise ValueError("a message without a Content-Length header")
    return json.loads(stream.read(length))


def reply_to(stream_in: IO[bytes], stream_out: IO[bytes], want_id: int) -> dict[str, Any]:
    """Read until the response to ``want_id``; a request from the server gets a null result."""
    while True:
        msg = receive(stream_out)
        if "id" in msg and "method" in msg:
            send(stream_in, {"id": msg["id"], "result": None})
        elif msg.get("id") == want_id:
            return msg


def handshake(command: list[str], root: Path) -> tuple[dict[str, Any], int]:
    """(serverInfo, the server's exit code) of one session with ``command``."""
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=root)
    timer = threading.Timer(TIMEOUT_S, proc.kill)
    timer.start()
    try:
        assert proc.stdin is not None and proc.stdout is not None
        send(proc.stdin, {"id": 1, "method": "initialize", "params": {
            "processId": None, "rootUri": root.resolve().as_uri(), "capabilities": {}}})
        init = reply_to(proc.stdin, proc.stdout, 1)
        if "error" in init:
            raise RuntimeError(f"initialize failed: {init['error']}")
        send(proc.stdin, {"method": "initialized", "params": {}})
        send(proc.stdin, {"id": 2, "method": "shutdown"})
        down = reply_to(proc.stdin, proc.stdout, 2)
        if "error" in down:
            raise RuntimeError(f"shutdown failed: {down['error']}")
        send(proc.stdin, {"method": "exit"})
        proc.stdin.close()
        code = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return init["result"].get("serverInfo") or {}, code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect-version", help="fail unless serverInfo.version is this")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the workspace folder")
    parser.add_argument("command", nargs="+", help="the server's command line (after --)")
    args = parser.parse_args(argv)
    info, code = handshake(args.command, args.root)
    print(json.dumps(info))
    if code != 0:
        print(f"lsp_hello: the server exited with {code} after `exit`", file=sys.stderr)
        return 1
    if args.expect_version is not None and info.get("version") != args.expect_version:
        print(f"lsp_hello: serverInfo {info}, expected version {args.expect_version}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
