"""What the connected client can do, read once from its capabilities at ``initialize``.

The server uses a feature only where the client declared it: pull diagnostics or push, refresh
requests (diagnostics, code lenses), progress, ``workspace/configuration``, file watchers,
versioned edits, markdown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lsprotocol import types
from pygls.capabilities import get_capability

from shardlint.lsp.convert import DiagnosticSupport

ENCODINGS = {"utf-8": "utf-8", "utf-16": "utf-16", "utf-32": "utf-32"}


@dataclass(frozen=True)
class ClientFeatures:
    encoding: str = "utf-16"
    pull: bool = False
    refresh: bool = False
    code_lens_refresh: bool = False
    progress: bool = False
    configuration: bool = False
    watch_files: bool = False
    document_changes: bool = False
    markdown: bool = False
    code_action_literals: bool = False
    diagnostics: DiagnosticSupport = field(default_factory=DiagnosticSupport)

    @classmethod
    def of(cls, caps: types.ClientCapabilities, encoding) -> ClientFeatures:
        def has(path: str) -> bool:
            return bool(get_capability(caps, path, False))

        pull = get_capability(caps, "text_document.diagnostic", None) is not None
        diag_caps = get_capability(caps, "text_document.diagnostic" if pull
                                   else "text_document.publish_diagnostics", None)
        hover_formats = get_capability(caps, "text_document.hover.content_format", None) or []
        return cls(
            encoding=ENCODINGS.get(str(getattr(encoding, "value", encoding)), "utf-16"),
            pull=pull,
            refresh=has("workspace.diagnostics.refresh_support"),
            code_lens_refresh=has("workspace.code_lens.refresh_support"),
            progress=has("window.work_done_progress"),
            configuration=has("workspace.configuration"),
            watch_files=has("workspace.did_change_watched_files.dynamic_registration"),
            document_changes=has("workspace.workspace_edit.document_changes"),
            markdown=types.MarkupKind.Markdown in hover_formats,
            code_action_literals=get_capability(
                caps, "text_document.code_action.code_action_literal_support", None) is not None,
            diagnostics=DiagnosticSupport.of(diag_caps),
        )
