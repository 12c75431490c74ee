"""The analysis of one unit (a text document or a notebook) at one revision.

A ``Result`` holds the findings, the exact text they were computed on, and the diagnostics per
document uri (a notebook has one entry per Python cell). Code actions and hovers are answered
from it, so they always agree with the diagnostics the client shows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types
from pygls.uris import from_fs_path

from shardlint.lsp.analyzer import Analyzer
from shardlint.lsp.convert import DiagnosticSupport, Locator, diagnostic, fingerprint
from shardlint.lsp.documents import NotebookSource
from shardlint.rules.base import Finding
from shardlint.source import SourceText


@dataclass(frozen=True)
class View:
    """The lines of the analysed source that one document uri shows (all of them, or a cell)."""

    uri: str
    first: int  # 1-based, inclusive, in the analysed source
    last: int

    @property
    def shift(self) -> int:
        return self.first - 1

    def holds(self, line: int, end_line: int | None = None) -> bool:
        return self.first <= line <= self.last and self.first <= (end_line or line) <= self.last


@dataclass
class Result:
    key: str
    revision: int
    generation: int
    path: str
    source: SourceText
    cells: NotebookSource | None
    findings: list[Finding]
    diagnostics: dict[str, list[tuple[Finding, types.Diagnostic]]]
    fingerprints: dict[str, str]
    versions: dict[str, int | None]
    index_changed: bool = False
    root: Path | None = None
    errors: list[str] = field(default_factory=list)
    messages: list[tuple[str, str]] = field(default_factory=list)
    # The statement that holds each line of a finding or of a possible suppression comment,
    # from the analysis's tree (None: not known; see suppress.statement_spans).
    spans: dict[int, tuple[int, int] | None] | None = field(default=None, repr=False,
                                                            compare=False)
    # What code actions and hovers derive from the text, once per result (actions.py).
    derived: dict = field(default_factory=dict, repr=False, compare=False)

    def view(self, uri: str) -> View | None:
        if self.cells is None:
            if uri not in self.versions:
                return None
            return View(uri, 1, max(len(self.source.lines), 1))
        for cell in self.cells.cells:
            if cell.uri == uri:
                return View(uri, cell.start, cell.start + max(cell.count, 1) - 1)
        return None

    def first_view(self) -> View | None:
        """The view where a file-wide comment goes: the document, or the first Python cell."""
        if self.cells is None:
            return self.view(next(iter(self.versions)))
        return self.view(self.cells.cells[0].uri) if self.cells.cells else None

    def items(self, uri: str) -> list[tuple[Finding, types.Diagnostic]]:
        return self.diagnostics.get(uri, [])


def analyse(analyzer: Analyzer, *, key: str, revision: int, path: Path, text: str,
            cells: NotebookSource | None, uri: str, versions: dict[str, int | None],
            others: dict[str, tuple[str, str]], encoding: str,
            support: DiagnosticSupport) -> Result:
    """Lint and convert; runs on the worker thread."""
    outcome = analyzer.lint(path, text)
    spath = str(path)
    source = outcome.source if outcome.source is not None and outcome.source.text is text \
        else SourceText(spath, text)

    def lookup(other: str) -> tuple[str, str] | None:
        if other in others:
            return others[other]
        try:
            return from_fs_path(other) or Path(other).as_uri(), Path(other).read_text("utf-8")
        except (OSError, UnicodeDecodeError, ValueError):
            return None

    loc = Locator(encoding, spath, uri, source, cells, lookup)
    grouped: dict[str, list[tuple[Finding, types.Diagnostic]]] = {u: [] for u in versions}
    for f in outcome.findings:
        converted = diagnostic(f, loc, support)
        if converted is not None and converted[0] in grouped:
            grouped[converted[0]].append((f, converted[1]))
    prints = {u: fingerprint([d for _, d in items]) for u, items in grouped.items()}
    return Result(key, revision, outcome.generation, spath, source, cells, outcome.findings,
                  grouped, prints, versions, outcome.index_changed, outcome.root,
                  outcome.errors, analyzer.drain_messages(),
                  spans=outcome.spans if source is outcome.source else None)
