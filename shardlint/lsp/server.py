"""``shardlint server``: the handlers. Each is a few lines over ``Session`` and the engine."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
import threading
from pathlib import Path

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from shardlint import __version__
from shardlint.lsp import actions, hover, memory_lens, settings, watch
from shardlint.lsp.client import ClientFeatures
from shardlint.lsp.convert import fingerprint
from shardlint.lsp.documents import uri_to_path
from shardlint.lsp.protocol import ShardlintProtocol
from shardlint.lsp.session import Session

log = logging.getLogger("shardlint.lsp")

NOTEBOOK_SYNC = types.NotebookDocumentSyncOptions(notebook_selector=[
    types.NotebookDocumentFilterWithNotebook(notebook="*",
                                             cells=[types.NotebookCellLanguage("python")])])


class ShardlintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("shardlint", __version__, protocol_cls=ShardlintProtocol,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         notebook_document_sync=NOTEBOOK_SYNC)
        self.session = Session(self)
        self.memory = memory_lens.MemoryLenses(self)
        self.background: set[asyncio.Task] = set()

    def spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self.background.add(task)
        task.add_done_callback(self.background.discard)


def build() -> ShardlintServer:
    server = ShardlintServer()
    s = server.session

    @server.feature(types.INITIALIZE)
    def initialize(ls: ShardlintServer, params: types.InitializeParams) -> None:
        s.features = ClientFeatures.of(params.capabilities, ls.workspace.position_encoding)
        if ls.workspace.root_path:
            s.fallback_root = Path(ls.workspace.root_path)
        _apply_settings(ls, settings.parse(params.initialization_options), wait=False)

    @server.feature(types.INITIALIZED)
    async def initialized(ls: ShardlintServer, params: types.InitializedParams) -> None:
        task = await watch.start(s)
        if task is not None:
            ls.background.add(task)
        if s.features.configuration:
            ls.spawn(_pull_settings(ls))
        for folder in _workspace_folders(ls):
            ls.spawn(s.index_folder(folder))

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: ShardlintServer, params: None) -> None:
        for task in list(ls.background):
            task.cancel()
        s.shutdown()
        ls.memory.shutdown()

    # ---- text documents -------------------------------------------------------------------------
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: ShardlintServer, params: types.DidOpenTextDocumentParams) -> None:
        doc = s.store.open_text(params.text_document)
        if not doc.is_python:
            s.store.close_text(doc.uri)
            return
        s.edited(doc, delay=0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: ShardlintServer, params: types.DidChangeTextDocumentParams) -> None:
        if s.store.change_text(params.text_document, params.content_changes, s.features.encoding):
            s.edited(s.store.unit(params.text_document.uri))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: ShardlintServer, params: types.DidSaveTextDocumentParams) -> None:
        s.edited(s.store.unit(params.text_document.uri), delay=0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: ShardlintServer, params: types.DidCloseTextDocumentParams) -> None:
        doc = s.store.close_text(params.text_document.uri)
        if doc is not None and doc.notebook is None:
            s.closed(doc, [doc.uri])

    # ---- notebooks --------------------------------------------------------------------------------
    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def nb_open(ls: ShardlintServer, params: types.DidOpenNotebookDocumentParams) -> None:
        s.edited(s.store.open_notebook(params), delay=0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def nb_change(ls: ShardlintServer, params: types.DidChangeNotebookDocumentParams) -> None:
        s.edited(s.store.change_notebook(params, s.features.encoding))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def nb_save(ls: ShardlintServer, params: types.DidSaveNotebookDocumentParams) -> None:
        s.edited(s.store.notebook(params.notebook_document.uri), delay=0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def nb_close(ls: ShardlintServer, params: types.DidCloseNotebookDocumentParams) -> None:
        nb = s.store.close_notebook(params)
        if nb is not None:
            s.closed(nb, [c.document for c in nb.cells])

    # ---- requests ---------------------------------------------------------------------------------
    @server.feature(types.TEXT_DOCUMENT_DIAGNOSTIC, types.DiagnosticOptions(
        identifier="shardlint", inter_file_dependencies=True, workspace_diagnostics=False))
    async def pull(ls: ShardlintServer, params: types.DocumentDiagnosticParams):
        uri = params.text_document.uri
        res = await _result(s, uri)
        items, result_id = s.shown(res, uri) if res is not None else ([], fingerprint([]))
        result_id = result_id or fingerprint(items)
        s.reported[uri] = result_id
        if params.previous_result_id == result_id:
            return types.RelatedUnchangedDocumentDiagnosticReport(result_id=result_id)
        return types.RelatedFullDocumentDiagnosticReport(items=items, result_id=result_id)

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, actions.FIX_ALL,
                           types.CodeActionKind.RefactorRewrite]))
    async def code_action(ls: ShardlintServer, params: types.CodeActionParams):
        if not s.features.code_action_literals:
            return None
        uri, only = params.text_document.uri, params.context.only
        res = await _result(s, uri)
        found = actions.code_actions(res, uri, params.range, only, s.features) \
            if res is not None else []
        if actions.wanted(types.CodeActionKind.RefactorRewrite, only):
            found += ls.memory.code_actions(uri, params.range)  # a `--fit` plan's table
        return found or None

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def on_hover(ls: ShardlintServer, params: types.HoverParams):
        table = ls.memory.hover(params.text_document.uri, params.position)
        if table is not None:
            return table
        res = await _result(s, params.text_document.uri)
        if res is None:
            return None
        texts = ls.memory.saving_texts()

        def saving(f):
            return texts.get((f.code, os.path.realpath(f.path), f.span.line, f.span.col))

        return hover.hover(res, params.text_document.uri, params.position, s.features.encoding,
                           s.features.markdown, saving if texts else None)

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    def code_lens(ls: ShardlintServer, params: types.CodeLensParams):
        return ls.memory.code_lenses(params.text_document.uri)

    @server.command(memory_lens.MEASURE)
    async def measure_memory(ls: ShardlintServer, *args):
        return await ls.memory.measure(*args)

    @server.command(memory_lens.CANCEL)
    def cancel_memory(ls: ShardlintServer, *args):
        return ls.memory.cancel(*args)

    # ---- workspace --------------------------------------------------------------------------------
    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: ShardlintServer,
                                       params: types.DidChangeConfigurationParams) -> None:
        raw = params.settings
        if not (isinstance(raw, dict) and raw) and s.features.configuration:
            await _pull_settings(ls)
        else:
            await _apply_settings(ls, settings.parse(raw))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    async def did_change_watched_files(ls: ShardlintServer,
                                       params: types.DidChangeWatchedFilesParams) -> None:
        await watch.files_changed(s, params)

    return server


async def _result(s: Session, uri: str):
    unit = s.store.unit(uri)
    if unit is None:
        return None
    try:
        return await s.analysed(unit)
    except LookupError:  # closed meanwhile
        return None


def _apply_settings(ls: ShardlintServer, parsed: settings.ClientSettings, wait: bool = True):
    s = ls.session
    ls.memory.configure(parsed.memory, refresh=wait)
    for problem in parsed.problems:
        s.show_messages([("warning", f"shardlint: settings: {problem}")])
    if parsed.debounce_ms is not None:
        s.debounce = parsed.debounce_ms / 1000
    # Where the caches go (untrusted: outside the workspace); queued before any index is built.
    s.worker.submit(s.analyzer.set_trusted, parsed.trusted)
    if not wait:  # during initialize: queued on the worker before any analysis
        s.worker.submit(s.analyzer.set_overrides, parsed.overrides)
        return None
    return s.config_changed(lambda: s.analyzer.set_overrides(parsed.overrides))


async def _pull_settings(ls: ShardlintServer) -> None:
    try:
        got = await asyncio.wait_for(ls.workspace_configuration_async(types.ConfigurationParams(
            items=[types.ConfigurationItem(section="shardlint")])), 10)
    except Exception as exc:  # noqa: BLE001  (an error answer or no answer: keep the settings)
        log.warning("workspace/configuration failed: %s", exc)
        return
    if got and isinstance(got[0], dict):
        await _apply_settings(ls, settings.parse(got[0]))


def _workspace_folders(ls: ShardlintServer) -> list[Path]:
    folders = [uri_to_path(f.uri) for f in ls.workspace.folders.values()]
    if not folders and ls.workspace.root_path:
        folders = [Path(ls.workspace.root_path)]
    return [f for f in folders if f is not None and f.is_dir()]


def run_stdio() -> None:
    """Serve over stdin/stdout; anything else printed goes to stderr, never into the protocol."""
    level = os.environ.get("SHARDLINT_LOG_LEVEL", "WARNING").upper()
    logging.basicConfig(stream=sys.stderr, level=getattr(logging, level, logging.WARNING),
                        format="shardlint-server %(levelname)s %(name)s: %(message)s")
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr
    server = build()
    if not (_own_pipe(stdin, stdout) and _serve_pipe(server, stdin, stdout)):
        server.start_io(stdin, stdout)


def _own_pipe(stdin, stdout) -> bool:
    """Whether stdin is a pipe or socket of its own: one the event loop can read without a
    thread (it is made non-blocking, which must not reach stdout: a terminal is one file for
    both)."""
    if os.name != "posix" or os.environ.get("SHARDLINT_THREAD_READER"):
        return False  # (Windows: pygls's reader; the variable: pygls's reader anywhere)
    try:
        fin, fout = os.fstat(stdin.fileno()), os.fstat(stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (stat.S_ISFIFO(fin.st_mode) or stat.S_ISSOCK(fin.st_mode)) and \
        (fin.st_dev, fin.st_ino) != (fout.st_dev, fout.st_ino)


class _PipeReader:
    """The client's messages, read by the event loop itself (pygls's stdio reader hands each
    header line and each body to a thread and back: six thread switches a message)."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.stream = stream

    async def readline(self) -> bytes:
        try:
            return await self.stream.readline()
        except ValueError:  # (a line longer than the limit, dropped: not a header)
            return b"?\r\n"

    async def readexactly(self, n: int) -> bytes:
        try:
            return await self.stream.readexactly(n)
        except asyncio.IncompleteReadError:  # (the client is gone)
            return b""


def _serve_pipe(server: ShardlintServer, stdin, stdout) -> bool:
    """Serve with the event loop reading stdin; False when this pygls lacks what it needs."""
    try:
        from pygls.io_ import StdoutWriter, run_async
    except ImportError:
        return False

    async def serve() -> None:
        stream = asyncio.StreamReader(limit=1 << 20)
        await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(stream), stdin)
        await run_async(stop_event=server._stop_event, reader=_PipeReader(stream),
                        protocol=server.protocol, logger=log,
                        error_handler=server.report_server_error)

    server._stop_event = threading.Event()
    server.protocol.set_writer(StdoutWriter(stdout))
    try:
        asyncio.run(serve())
    except BrokenPipeError:
        log.error("the client is gone; shutting down")
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.shutdown()
    return True
