"""Findings to LSP diagnostics; engine spans (1-based lines, UTF-8 columns) to LSP ranges.

Every range is computed on the exact text that was analysed, in the negotiated position encoding
(UTF-16 unless the client offered UTF-8 or UTF-32). Notebook findings map back to their cell.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass

from lsprotocol import types
from lsprotocol.converters import get_converter

from shardlint.lsp.documents import NotebookSource
from shardlint.report.sarif import rule_url
from shardlint.rules.base import Finding, get_rule
from shardlint.source import SourceText, Span

SOURCE = "shardlint"
_SEVERITY = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "info": types.DiagnosticSeverity.Information,
}
_TAGS = {"deprecated": types.DiagnosticTag.Deprecated,
         "unnecessary": types.DiagnosticTag.Unnecessary}
_CONVERTER = get_converter()


@dataclass(frozen=True)
class DiagnosticSupport:
    """What the client can show: fields it did not declare are left out."""

    code_description: bool = False
    related: bool = False
    tags: frozenset[int] = frozenset()

    @classmethod
    def of(cls, caps) -> DiagnosticSupport:
        if caps is None:
            return cls()
        tag_support = getattr(caps, "tag_support", None)
        return cls(bool(getattr(caps, "code_description_support", False)),
                   bool(getattr(caps, "related_information", False)),
                   frozenset(int(t) for t in (tag_support.value_set if tag_support else ())))


def position(source: SourceText, line: int, utf8_col: int, encoding: str) -> types.Position:
    """LSP position of a (1-based line, UTF-8 column); lines past the end clamp to the end."""
    n = len(source.lines)
    if line > n:
        last = source.line_text(n)
        return types.Position(n - 1, source.col_in(n, len(last.encode("utf-8")), encoding))
    line = max(line, 1)
    width = len(source.line_text(line).encode("utf-8"))
    return types.Position(line - 1, source.col_in(line, min(max(utf8_col, 0), width), encoding))


def to_range(source: SourceText, span: Span, encoding: str, line_shift: int = 0) -> types.Range:
    start = position(source, span.line, span.col, encoding)
    end = position(source, span.end_line, span.end_col, encoding)
    if (end.line, end.character) < (start.line, start.character):
        end = start
    return types.Range(types.Position(start.line - line_shift, start.character),
                       types.Position(end.line - line_shift, end.character))


def utf8_col(source: SourceText, line: int, col: int, encoding: str) -> int:
    """UTF-8 column of an LSP column on a 1-based line (clamped to the line)."""
    width = len(source.line_text(line).encode("utf-8"))
    return min(source.utf8_col_from(line, max(col, 0), encoding), width)


class Locator:
    """Turns (path, span) into (uri, range): the unit's own text, a notebook's cells, or a file."""

    def __init__(self, encoding: str, path: str, uri: str, source: SourceText,
                 cells: NotebookSource | None, lookup: Callable[[str], tuple[str, str] | None]):
        self.encoding = encoding
        self.path = path
        self.uri = uri
        self.source = source
        self.cells = cells
        self._lookup = lookup  # path -> (uri, text) of another file, open or on disk
        self._others: dict[str, tuple[str, SourceText] | None] = {}

    def locate(self, path: str, span: Span) -> tuple[str, types.Range] | None:
        if path == self.path or self._same_file(path):
            return self.locate_own(span)
        other = self._other(path)
        if other is None:
            return None
        return other[0], to_range(other[1], span, self.encoding)

    def locate_own(self, span: Span) -> tuple[str, types.Range] | None:
        if self.cells is None:
            return self.uri, to_range(self.source, span, self.encoding)
        first = self.cells.locate(min(span.line, len(self.source.lines)))
        if first is None:
            if not self.cells.cells:
                return None
            last = self.cells.cells[-1]  # e.g. "unexpected EOF" after the last line
            first = (last, max(last.count - 1, 0))
            span = Span(last.start + first[1], 0, last.start + first[1], 0)
        cell, _ = first
        end_in = self.cells.locate(span.end_line)
        if end_in is None or end_in[0].uri != cell.uri:
            end_line = cell.start + cell.count - 1
            span = Span(span.line, span.col, end_line, len(self.source.line_text(end_line).encode()))
        return cell.uri, to_range(self.source, span, self.encoding, line_shift=cell.start - 1)

    def _same_file(self, path: str) -> bool:
        """The index may name this file by its resolved path (a symlinked workspace)."""
        try:
            return os.path.realpath(path) == os.path.realpath(self.path)
        except (OSError, ValueError):
            return False

    def _other(self, path: str) -> tuple[str, SourceText] | None:
        if path not in self._others:
            found = self._lookup(path)
            self._others[path] = (found[0], SourceText(path, found[1])) if found else None
        return self._others[path]


def diagnostic(f: Finding, loc: Locator, support: DiagnosticSupport) -> tuple[str, types.Diagnostic] | None:
    where = loc.locate_own(f.span) if f.path == loc.path else loc.locate(f.path, f.span)
    if where is None:
        return None
    uri, rng = where
    d = types.Diagnostic(range=rng, message=f.message, severity=_SEVERITY.get(f.severity),
                         code=f.code, source=SOURCE)
    rule = get_rule(f.code)
    if support.code_description and rule is not None:
        d.code_description = types.CodeDescription(href=rule_url(rule))
    if support.related and f.related:
        infos = []
        for r in f.related:
            at = loc.locate(r.path, r.span)
            if at is not None:
                infos.append(types.DiagnosticRelatedInformation(types.Location(at[0], at[1]),
                                                                r.message))
        d.related_information = infos or None
    tags = [_TAGS[t] for t in f.tags if t in _TAGS and int(_TAGS[t]) in support.tags]
    d.tags = tags or None
    return uri, d


def fingerprint(diagnostics: list[types.Diagnostic]) -> str:
    """A result id that changes exactly when the diagnostics do."""
    data = json.dumps(_CONVERTER.unstructure(diagnostics), sort_keys=True)
    return hashlib.sha1(data.encode("utf-8")).hexdigest()[:16]
