"""The server's own stdio framing: the event loop reads a pipe or socket stdin itself (no thread
per message), and pygls's reader serves anything else. Raw bytes here, not a client library:
what a broken or departing client really sends."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile

import pytest

from shardlint.lsp.server import _own_pipe

SERVER = [sys.executable, "-m", "shardlint", "server"]


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_message(stream) -> dict:
    length = None
    while True:
        line = stream.readline()
        assert line, "the server closed its stdout"
        if line == b"\r\n" and length is not None:
            return json.loads(stream.read(length))
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])


def answer(stream, ident: int) -> dict:
    while True:
        message = read_message(stream)
        if message.get("id") == ident and "method" not in message:
            return message


INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"processId": None, "rootUri": None, "capabilities": {}}}
SHUTDOWN = {"jsonrpc": "2.0", "id": 2, "method": "shutdown"}
EXIT = {"jsonrpc": "2.0", "method": "exit"}


@pytest.fixture(params=["loop", "thread"])
def server(request, tmp_path):
    env = dict(os.environ, SHARDLINT_THREAD_READER="1" if request.param == "thread" else "")
    proc = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=tmp_path, env=env)
    proc.reader = request.param
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)
    proc.stdin.close()
    proc.stdout.close()
    proc.stderr.close()


def test_a_session_over_pipes_starts_answers_and_exits(server):
    server.stdin.write(frame(INIT))
    server.stdin.flush()
    assert "capabilities" in answer(server.stdout, 1)["result"]
    server.stdin.write(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
                       + frame(SHUTDOWN) + frame(EXIT))
    server.stdin.flush()
    assert answer(server.stdout, 2)["result"] is None
    assert server.wait(20) == 0
    assert b"Traceback" not in server.stderr.read()


def test_a_header_line_longer_than_any_is_skipped(server):
    """A line of 2 MiB without a break (no header): dropped, and the next message answered."""
    server.stdin.write(b"x" * (2 << 20) + b"\r\n" + frame(INIT))
    server.stdin.flush()
    assert "capabilities" in answer(server.stdout, 1)["result"]


def test_a_client_gone_in_the_middle_of_a_message_ends_the_server(server):
    server.stdin.write(frame(INIT))
    server.stdin.flush()
    answer(server.stdout, 1)
    server.stdin.write(b"Content-Length: 500\r\n\r\n{\"jsonrpc\":")
    server.stdin.close()
    assert server.wait(20) == 0
    if server.reader == "loop":  # (pygls's reader hands the cut body on: a logged JSON error)
        assert b"Traceback" not in server.stderr.read()


def test_only_a_pipe_or_socket_of_its_own_is_read_by_the_loop(tmp_path):
    r, spare_w = os.pipe()
    spare_r, w = os.pipe()  # (an editor's two pipes)
    os.close(spare_w)
    os.close(spare_r)
    a, b = socket.socketpair()
    with os.fdopen(r, "rb") as rf, os.fdopen(w, "wb") as wf, a, b, \
            tempfile.TemporaryFile(dir=tmp_path) as regular:
        assert _own_pipe(rf, wf) is (os.name == "posix")
        sock = a.makefile("rb"), a.makefile("wb")  # (one socket for both ends: a terminal's case)
        assert _own_pipe(*sock) is False
        assert _own_pipe(b.makefile("rb"), wf) is (os.name == "posix")
        assert _own_pipe(regular, wf) is False
        for f in sock:
            f.close()
