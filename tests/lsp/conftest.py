"""An editor that drives the real server over stdio (pytest-lsp), as VS Code or Neovim would.

The client capabilities are the ones those editors really send (recorded in ``clients/``). The
``Editor`` keeps its own copy of each document, applies the server's edits to it itself, and
talks positions in the negotiated encoding, computed here independently of the server's code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from lsprotocol import types
from lsprotocol.converters import get_converter
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SEED = REPO / "examples" / "seed_ensemble"
CLIENTS = ("vscode", "neovim")
SERVER = [sys.executable, "-m", "shardlint", "server"]
TIMEOUT = 20.0


def client_capabilities(name: str, encodings: list[str] | None = None) -> types.ClientCapabilities:
    data = json.loads((HERE / "clients" / f"{name}.json").read_text(encoding="utf-8"))
    caps = data["capabilities"]
    if encodings is not None:
        caps.setdefault("general", {})["positionEncodings"] = encodings
    return get_converter().structure(caps, types.ClientCapabilities)


# ---- positions, computed independently of the server -----------------------------------------------
def units(s: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(s.encode("utf-8"))
    if encoding == "utf-16":
        return len(s.encode("utf-16-le")) // 2
    return len(s)


def position_at(text: str, index: int, encoding: str = "utf-16") -> types.Position:
    line = text.count("\n", 0, index)
    start = text.rfind("\n", 0, index) + 1
    return types.Position(line, units(text[start:index], encoding))


def position_of(text: str, needle: str, encoding: str = "utf-16", nth: int = 0) -> types.Position:
    """LSP position of the ``nth`` occurrence of ``needle`` (text with ``\\n`` line breaks)."""
    return position_at(text, find(text, needle, nth), encoding)


def find(text: str, needle: str, nth: int = 0) -> int:
    at = -1
    for _ in range(nth + 1):
        at = text.index(needle, at + 1)
    return at


def index_of(text: str, pos: types.Position, encoding: str) -> int:
    lines = text.split("\n")
    if pos.line >= len(lines):
        return len(text)
    start = sum(len(x) + 1 for x in lines[: pos.line])
    line = lines[pos.line]
    for i in range(len(line) + 1):
        if units(line[:i], encoding) >= pos.character:
            return start + i
    return start + len(line)


def apply_edits(text: str, edits, encoding: str) -> str:
    spans = sorted(((index_of(text, e.range.start, encoding), index_of(text, e.range.end, encoding),
                     e.new_text) for e in edits), reverse=True)
    for a, b, new in spans:
        text = text[:a] + new + text[b:]
    return text


# ---- the client --------------------------------------------------------------------------------------
def make_client() -> LanguageClient:
    client = LanguageClient(converter_factory=default_converter)
    client.published = []  # every publishDiagnostics, in order
    client.refreshes = 0

    def on_publish(c: LanguageClient, params: types.PublishDiagnosticsParams) -> None:
        c.published.append(params)
        c.diagnostics[params.uri] = params.diagnostics

    def on_refresh(c: LanguageClient, params: None) -> None:
        c.refreshes += 1

    def on_register(c: LanguageClient, params: types.RegistrationParams) -> None:
        c.registrations = list(params.registrations)

    features = dict(DEFAULT_CLIENT_FEATURES)
    features[types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS] = on_publish
    features[types.WORKSPACE_DIAGNOSTIC_REFRESH] = on_refresh
    features[types.CLIENT_REGISTER_CAPABILITY] = on_register
    register_lsp_features(client, features)
    return client


class Editor:
    """What a user does in an editor, as LSP messages."""

    def __init__(self, client: LanguageClient, name: str):
        self.client = client
        self.name = name
        self.texts: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.encoding = "utf-16"
        self.caps: types.ClientCapabilities | None = None
        self.result: types.InitializeResult | None = None

    @property
    def pull(self) -> bool:
        return self.caps is not None and self.caps.text_document.diagnostic is not None

    async def start(self, root: Path, options=None, encodings: list[str] | None = None) -> None:
        self.caps = client_capabilities(self.name, encodings)
        self.result = await self.client.initialize_session(types.InitializeParams(
            capabilities=self.caps, root_uri=root.as_uri(), initialization_options=options,
            workspace_folders=[types.WorkspaceFolder(root.as_uri(), root.name)]))
        self.encoding = str(self.result.capabilities.position_encoding or "utf-16")

    async def stop(self) -> None:
        if self.caps is not None:
            await asyncio.wait_for(self.client.shutdown_session(), TIMEOUT)
        await self.client.stop()

    # ---- documents ----------------------------------------------------------------------------------
    def open(self, path: Path, text: str | None = None) -> str:
        uri = path.as_uri()
        self.texts[uri] = path.read_text(encoding="utf-8") if text is None else text
        self.versions[uri] = 1
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri, "python", 1, self.texts[uri])))
        return uri

    def replace(self, uri: str, old: str, new: str, nth: int = 0) -> None:
        """Type over an occurrence of ``old`` with ``new`` (an incremental change)."""
        text = self.texts[uri]
        at = find(text, old, nth)
        rng = types.Range(position_at(text, at, self.encoding),
                          position_at(text, at + len(old), self.encoding))
        self.edit(uri, [types.TextEdit(rng, new)])

    def edit(self, uri: str, edits) -> None:
        """Apply text edits (e.g. from the server) and send them as one didChange."""
        text = self.texts[uri]
        ordered = sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character),
                         reverse=True)  # back to front: each change leaves the earlier ranges valid
        self.texts[uri] = apply_edits(text, edits, self.encoding)
        self.versions[uri] += 1
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(self.versions[uri], uri),
            [types.TextDocumentContentChangePartial(e.range, e.new_text) for e in ordered]))

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(types.DidCloseTextDocumentParams(
            types.TextDocumentIdentifier(uri)))

    def apply(self, edit: types.WorkspaceEdit) -> None:
        if edit.document_changes:
            for change in edit.document_changes:
                assert change.text_document.version == self.versions[change.text_document.uri]
                self.edit(change.text_document.uri, change.edits)
        for uri, edits in (edit.changes or {}).items():
            self.edit(uri, edits)

    # ---- diagnostics --------------------------------------------------------------------------------
    async def diagnostics(self, uri: str, timeout: float = TIMEOUT) -> list[types.Diagnostic]:
        """The diagnostics for the current text: pulled, or the push for the current version."""
        if self.pull:
            report = await asyncio.wait_for(self.client.text_document_diagnostic_async(
                types.DocumentDiagnosticParams(types.TextDocumentIdentifier(uri))), timeout)
            return list(report.items)
        version = self.versions.get(uri)
        await self.wait_push(lambda p: p.uri == uri and p.version == version, timeout=timeout)
        last = [p for p in self.client.published if p.uri == uri and p.version == version][-1]
        return list(last.diagnostics)

    async def wait_push(self, match, since: int = 0,
                        timeout: float = TIMEOUT) -> types.PublishDiagnosticsParams:
        async def poll():
            while True:
                for p in self.client.published[since:]:
                    if match(p):
                        return p
                await asyncio.sleep(0.01)
        return await asyncio.wait_for(poll(), timeout)

    async def refreshed(self, uri: str, predicate, mark: tuple[int, int]) -> list[types.Diagnostic]:
        """After a change elsewhere: the refresh request (pull) or the new push for ``uri``."""
        refreshes, published = mark
        if self.pull:
            async def wait():
                while self.client.refreshes <= refreshes:
                    await asyncio.sleep(0.01)
            await asyncio.wait_for(wait(), TIMEOUT)
            diags = await self.diagnostics(uri)
            assert predicate(diags)
            return diags
        got = await self.wait_push(lambda p: p.uri == uri and predicate(list(p.diagnostics)),
                                   since=published)
        return list(got.diagnostics)

    def mark(self) -> tuple[int, int]:
        return self.client.refreshes, len(self.client.published)

    # ---- requests -----------------------------------------------------------------------------------
    async def code_actions(self, uri: str, rng: types.Range, only=None) -> list[types.CodeAction]:
        got = await asyncio.wait_for(self.client.text_document_code_action_async(
            types.CodeActionParams(types.TextDocumentIdentifier(uri), rng,
                                   types.CodeActionContext(diagnostics=[], only=only))), TIMEOUT)
        return list(got or [])

    async def hover(self, uri: str, pos: types.Position) -> types.Hover | None:
        return await asyncio.wait_for(self.client.text_document_hover_async(
            types.HoverParams(types.TextDocumentIdentifier(uri), pos)), TIMEOUT)


def codes_lines(diags) -> set[tuple[str, int]]:
    return {(str(d.code), d.range.start.line + 1) for d in diags}


def server_env(user_cache: Path) -> dict[str, str]:
    """The server's environment, with the user cache directory (where a session in an untrusted
    workspace keeps its cache) in ``user_cache`` rather than the real home's."""
    return dict(os.environ, XDG_CACHE_HOME=str(user_cache), LOCALAPPDATA=str(user_cache))


@pytest.fixture(scope="session")
def user_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("user-cache")


async def _editor(name: str, command: list[str] = SERVER, env: dict[str, str] | None = None):
    client = await ClientServerConfig(server_command=command, client_factory=make_client,
                                      server_env=env).start()
    ed = Editor(client, name)
    try:
        yield ed
    finally:
        with contextlib.suppress(Exception):  # a server a test broke on purpose
            await ed.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def _servers(tmp_path_factory, user_cache):
    """One server per client kind for the whole session: starting one costs about a second.

    Each test opens files of its own project folder; the server keeps one engine per project.
    Tests that change server-wide settings start their own server (``fresh``).
    """
    started, gens = {}, []
    root = tmp_path_factory.mktemp("workspace")

    async def get(name: str) -> Editor:
        if name not in started:
            gen = _editor(name, env=server_env(user_cache))
            ed = await gen.__anext__()
            await ed.start(root)
            started[name], _ = ed, gens.append(gen)
        return started[name]

    yield get
    for gen in gens:
        with contextlib.suppress(StopAsyncIteration):
            await gen.__anext__()


@pytest_asyncio.fixture(params=CLIENTS, loop_scope="session")
async def editor(request, _servers):
    """The shared server as seen from VS Code or Neovim; the test's documents close after it."""
    ed = await _servers(request.param)
    before = set(ed.texts)
    yield ed
    for uri in set(ed.texts) - before:
        ed.close(uri)
        del ed.texts[uri], ed.versions[uri]


@pytest_asyncio.fixture(loop_scope="session")
async def fresh(user_cache):
    """Start a server of one's own: ``async with fresh("vscode") as ed`` (``env``: the server's
    whole environment, by default this one with the user cache directory in ``user_cache``)."""
    gens = []

    @contextlib.asynccontextmanager
    async def start(name: str, command: list[str] = SERVER, env: dict[str, str] | None = None):
        gen = _editor(name, command, env if env is not None else server_env(user_cache))
        gens.append(gen)
        yield await gen.__anext__()

    yield start
    for gen in gens:
        with contextlib.suppress(StopAsyncIteration):
            await gen.__anext__()


@pytest.fixture
def seed_project(project):
    """A fresh project holding the seed ensemble example files."""
    def make(*names: str, pyproject: str | None = None) -> Path:
        return project({n: (SEED / n).read_text(encoding="utf-8") for n in names}, pyproject)
    return make
