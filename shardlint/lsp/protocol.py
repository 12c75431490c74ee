"""pygls's protocol without its own copy of open documents.

pygls keeps documents as lists of ``str.splitlines`` lines, which break on more characters than
LSP's line breaks; the server keeps them itself (``documents.DocumentStore``). The overrides
below only hand the sync notifications to the server's handlers, so a document is stored once.

``workspace/executeCommand`` is awaited in the request's own task: pygls runs a command in a task
of its own, which ``$/cancelRequest`` never reaches, and a memory measurement must be cancellable.
"""

from __future__ import annotations

import inspect

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import _prepare_command_arguments, lsp_method


class ShardlintProtocol(LanguageServerProtocol):
    def _to_handler(self, method: str, params):
        handler = self.fm.features.get(method)
        if handler is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams):
        yield from self._to_handler(types.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams):
        yield from self._to_handler(types.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams):
        yield from self._to_handler(types.TEXT_DOCUMENT_DID_CLOSE, params)

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def lsp_notebook_document__did_open(self, params: types.DidOpenNotebookDocumentParams):
        yield from self._to_handler(types.NOTEBOOK_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def lsp_notebook_document__did_change(self, params: types.DidChangeNotebookDocumentParams):
        yield from self._to_handler(types.NOTEBOOK_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def lsp_notebook_document__did_close(self, params: types.DidCloseNotebookDocumentParams):
        yield from self._to_handler(types.NOTEBOOK_DOCUMENT_DID_CLOSE, params)

    @lsp_method(types.WORKSPACE_EXECUTE_COMMAND)
    async def lsp_workspace__execute_command(  # type: ignore[override]
        self, params: types.ExecuteCommandParams
    ):
        handler = self.fm.commands.get(params.command)
        if handler is None:
            raise JsonRpcInvalidParams.of(ValueError(f"no command {params.command!r}"))
        try:
            args, kwargs = _prepare_command_arguments(handler, params, self._converter)
        except Exception as exc:
            raise JsonRpcInvalidParams.of(exc) from exc
        result = handler(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result
