"""The language server, over real stdio, fed random sessions: it never dies, answers every
well-formed request, and after each session still gives a fresh document correct diagnostics.

A session is ``initialize`` and then random messages: documents opened, changed (ranges past
the end, inverted, splitting a surrogate pair, stale versions, whole-text changes), saved and
closed (also ones never opened, and ``untitled:`` ones), hovers and code actions anywhere
(negative positions too), pull diagnostics the client never asked for, configuration changes
and configuration answers of wrong types, unknown methods, cancellations of unknown requests,
watched-file events, commands with wrong arguments, and malformed JSON-RPC (bodies that are
not JSON, not objects, not UTF-8; ids, methods and params of wrong types). Then a document
with a known pitfall is opened and its published diagnostics must be what the engine finds,
``shutdown`` must be answered and ``exit`` must end the process with status 0.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT, Tally, scaled
from inputs import SNIPPETS, mutate

from shardlint.config import Config
from shardlint.engine import Engine
from shardlint.rules.base import all_rules

pytestmark = [pytest.mark.fuzz, pytest.mark.slow]

TIMEOUT = 30.0
# Codes a well-formed request may be answered with: cancelled, content modified.
BENIGN = {-32800, -32801}

KNOWN = """\
import jax
import flax.linen as nn
from jax.sharding import Mesh

mesh = Mesh(jax.devices(), ("data",))
with nn.logical_axis_rules((("batch", "data"),)), mesh:
    y = nn.with_logical_constraint(jax.numpy.ones((8,)), ("batch",))
"""


class Server:
    """``shardlint server`` on stdio, spoken to in raw frames (so that broken ones can be sent)."""

    def __init__(self, root: Path, env: dict[str, str], rng: random.Random):
        self.rng = rng
        self.proc = subprocess.Popen([sys.executable, "-m", "shardlint", "server"], cwd=root,
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.inbox: queue.Queue = queue.Queue()
        self.next_id = 1
        self.answers: dict[int, dict] = {}
        self.published: dict[str, list[dict]] = {}
        self.stderr: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _read(self) -> None:
        out = self.proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    self.inbox.put(None)
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii", "replace").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            body = out.read(length or 0)
            try:
                self.inbox.put(json.loads(body))
            except ValueError:
                self.inbox.put({"unparsable": body})

    def _drain_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)

    # ---- sending ------------------------------------------------------------------------------
    def raw(self, body: bytes) -> None:
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params) -> None:
        self.raw(json.dumps({"jsonrpc": "2.0", "method": method, "params": params}).encode())

    def request(self, method: str, params) -> int:
        rid = self.next_id
        self.next_id += 1
        self.raw(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                             "params": params}).encode())
        return rid

    # ---- receiving ----------------------------------------------------------------------------
    def pump(self, timeout: float) -> bool:
        """Handle one incoming message; False when none came within ``timeout``."""
        try:
            msg = self.inbox.get(timeout=timeout)
        except queue.Empty:
            return False
        if msg is None:
            raise ConnectionError("the server closed its output")
        if "method" in msg and "id" in msg:  # a request from the server: answer it
            self.raw(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                                 "result": self._answer(msg)}).encode())
        elif msg.get("method") == "textDocument/publishDiagnostics":
            p = msg.get("params") or {}
            self.published[p.get("uri")] = p.get("diagnostics", [])
        elif "id" in msg and isinstance(msg["id"], int):
            self.answers[msg["id"]] = msg
        return True

    def _answer(self, msg: dict):
        if msg["method"] == "workspace/configuration":
            items = (msg.get("params") or {}).get("items") or [{}]
            # Settings of wrong types, sometimes: a client's settings are user input.
            choices = [{}, None, 5, "x", [1], {"select": 5}, {"severity": {"SHL101": 3}},
                       {"debounceMs": "soon"}, {"memory": []}, {"trusted": "yes"},
                       {"select": ["SHL"], "ignore": [None]}]
            return [self.rng.choice(choices) for _ in items]
        return None

    def wait_answer(self, rid: int, timeout: float = TIMEOUT) -> dict:
        deadline = time.monotonic() + timeout
        while rid not in self.answers:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer to request {rid}")
            self.pump(0.2)
        return self.answers.pop(rid)

    def settle(self, seconds: float = 0.0) -> None:
        deadline = time.monotonic() + seconds
        while self.pump(max(0.01, deadline - time.monotonic())) or time.monotonic() < deadline:
            pass


def _texts() -> list[str]:
    out = [ex.source for rule in all_rules() for ex in rule.INVALID][::5]
    return out + ["x = '😀😀😀'\nimport jax\n", "", "\n\n\n",
                  "import jax\n" + "é" * 500 + "\n"]


def _units(s: str) -> int:
    """UTF-16 code units (a lone surrogate is one)."""
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def _position(rng: random.Random, text: str) -> dict:
    lines = text.split("\n")
    kind = rng.random()
    if kind < 0.6:
        line = rng.randrange(len(lines))
        return {"line": line, "character": rng.randint(0, _units(lines[line]))}
    if kind < 0.8:  # past the end
        return {"line": len(lines) + rng.randint(0, 50), "character": rng.randint(0, 500)}
    if kind < 0.9 and "😀" in text:  # inside a surrogate pair (UTF-16: the emoji is 2 units)
        index = text.index("😀")
        line = text.count("\n", 0, index)
        start = text.rfind("\n", 0, index) + 1
        return {"line": line, "character": _units(text[start:index]) + 1}
    return {"line": rng.randrange(len(lines)), "character": 10_000}


def _session(server: Server, root: Path, rng: random.Random, steps: int, tally: Tally) -> None:
    texts = _texts()
    uris = [(root / f"doc{i}.py").as_uri() for i in range(3)] + \
        [(root / "not_on_disk.py").as_uri(), "untitled:Untitled-1"]
    shadow: dict[str, str] = {}
    versions: dict[str, int] = {}
    pending: list[tuple[int, str]] = []  # well-formed requests, which must get a result
    for _ in range(steps):
        tally.tried()
        uri = rng.choice(uris)
        text = shadow.get(uri, rng.choice(texts))
        action = rng.randrange(16)
        if action <= 2:
            body = rng.choice(texts)
            if rng.random() < 0.5:
                body = mutate(rng, body)[0]
            versions[uri] = versions.get(uri, 0) + 1
            shadow[uri] = body
            server.notify("textDocument/didOpen", {"textDocument": {
                "uri": uri, "languageId": "python", "version": versions[uri], "text": body}})
        elif action <= 6:
            a, b = _position(rng, text), _position(rng, text)
            if rng.random() < 0.7 and (a["line"], a["character"]) > (b["line"], b["character"]):
                a, b = b, a  # (else left inverted)
            change = {"range": {"start": a, "end": b}, "text": rng.choice(SNIPPETS)} \
                if rng.random() < 0.85 else {"text": mutate(rng, text)[0]}
            versions[uri] = versions.get(uri, 0) + (1 if rng.random() < 0.9 else -1)
            server.notify("textDocument/didChange", {
                "textDocument": {"uri": uri, "version": versions[uri]},
                "contentChanges": [change]})
            shadow.pop(uri, None)  # (the server's text is what it made of the change)
        elif action == 7:
            server.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
        elif action == 8:
            server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
            shadow.pop(uri, None)
        elif action == 9:
            pos = _position(rng, text) if rng.random() < 0.9 else {"line": -1, "character": -5}
            rid = server.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                        "position": pos})
            if pos["line"] >= 0:
                pending.append((rid, "hover"))
        elif action == 10:
            a, b = sorted([_position(rng, text), _position(rng, text)],
                          key=lambda p: (p["line"], p["character"]))
            pending.append((server.request("textDocument/codeAction", {
                "textDocument": {"uri": uri}, "range": {"start": a, "end": b},
                "context": {"diagnostics": []}}), "codeAction"))
        elif action == 11:
            pending.append((server.request("textDocument/diagnostic",
                                           {"textDocument": {"uri": uri}}), "diagnostic"))
        elif action == 12:
            settings = rng.choice([None, {}, "x", [1, 2], {"shardlint": {"select": 5}},
                                   {"shardlint": {"severity": "all"}},
                                   {"shardlint": {"memory": {"devices": "many"}}},
                                   {"shardlint": {"select": ["SHL1"], "debounceMs": -3}}])
            server.notify("workspace/didChangeConfiguration", {"settings": settings})
        elif action == 13:
            server.notify("workspace/didChangeWatchedFiles", {"changes": [
                {"uri": rng.choice(uris), "type": rng.choice([1, 2, 3, 7])}]})
        elif action == 14:
            server.notify("$/cancelRequest", {"id": rng.randint(1, 10_000)})
            server.request(rng.choice(["shardlint/unknown", "textDocument/unknownThing"]), {})
            server.notify("$/unknownNotification", {"x": 1})
            server.request("workspace/executeCommand", {
                "command": rng.choice(["shardlint.server.cancelMemory", "nope"]),
                "arguments": rng.choice([[], [5], [{"uri": 3}], None])})
        else:
            server.raw(rng.choice([
                b"{not json", b"[]", b"42", b'"str"', b"null", b'{"jsonrpc":"2.0"}',
                b'{"jsonrpc":"2.0","id":{"a":1},"method":"textDocument/hover","params":{}}',
                b'{"jsonrpc":"2.0","id":7.5,"method":"textDocument/hover","params":[1,2]}',
                b'{"jsonrpc":"2.0","method":5,"params":{}}',
                b'{"jsonrpc":"1.0","id":99999,"method":"shutdownx"}',
                b'{"jsonrpc":"2.0","method":"textDocument/didOpen","params":{"textDocument":5}}',
                b'{"jsonrpc":"2.0","method":"textDocument/didChange","params":{"textDocument":'
                b'{"uri":"file:///x.py","version":"v"},"contentChanges":[{"range":7}]}}',
                b"\xff\xfe\x00garbage", b"{" * 5000, b"[" * 100_000,
            ]))
        server.settle(rng.choice([0.0, 0.0, 0.05]))
    for rid, what in pending:
        try:
            answer = server.wait_answer(rid)
        except TimeoutError:
            tally.fail(f"no answer to a well-formed {what} request")
            continue
        error = answer.get("error")
        if error is not None and error.get("code") not in BENIGN:
            tally.fail(f"{what} answered with an error: {error}")


_OUR_FRAME = re.compile(r'File "(?![^"]*site-packages)[^"]*[/\\]shardlint[/\\][^"]*\.py"')


def _our_tracebacks(log: str) -> list[str]:
    """Tracebacks in the server's log that pass through shardlint's own code and do not end in
    an error answer it chose (``JsonRpcInvalidParams`` and kin). pygls logging a message it
    could not read, with a traceback of its own, and going on is right."""
    out = []
    for block in log.split("Traceback (most recent call last):")[1:]:
        lines = block.splitlines()
        n = len(list(itertools.takewhile(lambda ln: ln.startswith((" ", "\t")) or not ln.strip(),
                                         lines)))
        last = lines[n] if n < len(lines) else ""
        body = "\n".join(lines[:n + 1])
        if _OUR_FRAME.search(body) and not last.startswith("pygls.exceptions.JsonRpc"):
            out.append(body)
    return out


def _expected(root: Path, text: str) -> set[tuple[str, int]]:
    engine = Engine(Config(root=root), use_cache=False)
    return {(f.code, f.span.line - 1) for f in engine.lint_text(root / "fresh.py", text)}


@pytest.mark.parametrize("session", range(scaled(6)))
def test_server_sessions(tmp_path, rng, tally, session):
    root = tmp_path / "ws"
    root.mkdir()
    for i, text in enumerate(_texts()[:3]):
        (root / f"doc{i}.py").write_text(text, encoding="utf-8")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    server = Server(root, env, rng)
    try:
        rid = server.request("initialize", {"processId": None, "rootUri": root.as_uri(),
                                            "capabilities": {}, "workspaceFolders": [
                                                {"uri": root.as_uri(), "name": "ws"}]})
        assert "result" in server.wait_answer(rid, 60)
        server.notify("initialized", {})
        _session(server, root, rng, scaled(60), tally)
        # A fresh document gets the diagnostics the engine finds.
        fresh = (root / "fresh.py").as_uri()
        server.notify("textDocument/didOpen", {"textDocument": {
            "uri": fresh, "languageId": "python", "version": 1, "text": KNOWN}})
        want = _expected(root, KNOWN)
        assert ("SHL101", 5) in want
        deadline = time.monotonic() + TIMEOUT
        got: set = set()
        while time.monotonic() < deadline:
            server.pump(0.2)
            diags = server.published.get(fresh)
            got = {(d.get("code"), d["range"]["start"]["line"]) for d in diags or []}
            if got == want:
                break
        if got != want:
            tally.fail(f"session {session}: fresh document: {sorted(got)} != {sorted(want)}")
        rid = server.request("shutdown", None)
        if "result" not in server.wait_answer(rid):
            tally.fail(f"session {session}: shutdown not answered with a result")
        server.notify("exit", None)
        code = server.proc.wait(timeout=TIMEOUT)
        if code != 0:
            tally.fail(f"session {session}: exit status {code}")
    except (ConnectionError, TimeoutError, BrokenPipeError) as exc:
        tally.fail(f"session {session}: {type(exc).__name__}: {exc}; stderr: "
                   + b"".join(server.stderr[-30:]).decode("utf-8", "replace"))
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()
    log = b"".join(server.stderr).decode("utf-8", "replace")
    for block in _our_tracebacks(log):
        tally.fail(f"session {session}: a handler raised:\n{block[-3000:]}")
    assert len(server.published) >= 2, "the session published (almost) no diagnostics"
    tally.check()
