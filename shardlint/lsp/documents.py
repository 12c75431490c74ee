"""Open text documents and notebooks, kept by the server itself with LSP line semantics.

pygls's own store splits lines with ``str.splitlines``, which also breaks on form feeds, ``\\x1c``
to ``\\x1e``, ``\\x85``, ``\\u2028`` and ``\\u2029``; LSP (and Python's tokenizer) break only on
``\\n``, ``\\r\\n`` and ``\\r``, so an incremental edit after such a character would land on the
wrong line. Here a document is a plain string and every position is converted with the
negotiated encoding.

A *unit* is what the engine analyses: a text document, or a notebook with all its Python cells.
Each unit has a ``revision`` that grows on every change, so stale work can be recognised.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.uris import to_fs_path

_EOL = re.compile(r"\r\n|\r|\n")
# Cell magics whose body is still Python; any other ``%%magic`` cell (bash, html...) is left out.
_PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug"}


def split_lines(text: str) -> list[str]:
    """Lines without their line breaks, as LSP and Python's tokenizer count them."""
    return _EOL.split(text)


def code_units(s: str, encoding: str) -> int:
    if encoding == "utf-8":
        return len(s.encode("utf-8", "surrogatepass"))
    if encoding == "utf-32" or s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


def char_index(line: str, col: int, encoding: str) -> int:
    """Code point index in ``line`` of a column in ``encoding`` code units (clamped)."""
    if col <= 0:
        return 0
    if encoding == "utf-32" or line.isascii():
        return min(col, len(line))
    n = 0
    for i, ch in enumerate(line):
        if n >= col:
            return i
        cp = ord(ch)
        if encoding == "utf-8":
            n += 1 if cp < 0x80 else 2 if cp < 0x800 else 3 if cp < 0x10000 else 4
        else:
            n += 2 if cp > 0xFFFF else 1
    return len(line)


def offset_at(text: str, line: int, col: int, encoding: str) -> int:
    """String index of an LSP position; positions past a line's end or the text clamp."""
    if line < 0:
        return 0
    if "\r" not in text:  # (the common case, in C: ~30x faster at line 1,000 than the loop)
        parts = text.split("\n", line + 1)
        if len(parts) <= line:
            return len(text)
        return sum(map(len, parts[:line])) + line + char_index(parts[line], col, encoding)
    start = 0
    for _ in range(line):
        m = _EOL.search(text, start)
        if m is None:
            return len(text)
        start = m.end()
    m = _EOL.search(text, start)
    end = m.start() if m else len(text)
    return start + char_index(text[start:end], col, encoding)


class LineIndex:
    """Where the lines of a document's text start, found as far as an edit asked and kept
    across edits for the lines before each edit: a keystroke finds its line without splitting
    the text before it (on line 4,800 of a 5,000-line file that split was most of applying the
    change). For a text without ``\r`` (the caller's test)."""

    def __init__(self) -> None:
        self.text: str | None = None  # the text the starts below are of
        self.starts: list[int] = [0]  # offsets of the first lines' starts, a prefix

    def line_start(self, text: str, line: int) -> int | None:
        """The offset where ``line`` (0-based) starts, or None past the last line."""
        if text is not self.text:
            self.text, self.starts = text, [0]
        starts = self.starts
        find = text.find
        while len(starts) <= line:
            nl = find("\n", starts[-1])
            if nl < 0:
                return None
            starts.append(nl + 1)
        return starts[line]

    def edited(self, before: str, after: str, line: int) -> None:
        """``after`` is ``before`` with an edit that starts on ``line``: the lines up to it
        start where they did (when the starts known are ``before``'s, and neither text has a
        ``\r``, where LSP lines are not ``\n`` lines)."""
        if self.text is not before or "\r" in after:
            self.text, self.starts = None, [0]
            return
        if len(self.starts) > line + 1:
            del self.starts[line + 1:]
        self.text = after


def apply_change(text: str, change, encoding: str, lines: LineIndex | None = None) -> str:
    """``text`` with one LSP content change applied (``lines``: the document's line index,
    kept for the text this returns)."""
    if isinstance(change, types.TextDocumentContentChangePartial):
        r = change.range
        start, end = r.start, r.end
        if lines is not None and start.line >= 0 and "\r" not in text:
            pos = lines.line_start(text, start.line)
            if pos is None:
                a = len(text)
            else:
                nl = text.find("\n", pos)
                a = pos + char_index(text[pos:nl if nl >= 0 else len(text)], start.character,
                                     encoding)
        else:
            a = offset_at(text, start.line, start.character, encoding)
        if start.line <= end.line <= start.line + 8 and a < len(text) and "\r" not in text:
            # (a keystroke's range ends on the line it starts on, or just below: its end found
            # from its start, not by splitting the text before it a second time)
            b = _offset_below(text, a, start.line, end.line, end.character, encoding)
        else:
            b = offset_at(text, end.line, end.character, encoding)
        if b < a:
            a, b = b, a
        out = text[:a] + change.text + text[b:]
        if lines is not None:
            lines.edited(text, out, min(start.line, end.line))
        return out
    return change.text


def _offset_below(text: str, a: int, line: int, end_line: int, col: int, encoding: str) -> int:
    """``offset_at(text, end_line, col)`` from ``a``, the offset of a position on ``line``
    before the end of the text (a text without ``\r``)."""
    pos = text.rfind("\n", 0, a) + 1  # (the start of the line ``a`` is on)
    for _ in range(end_line - line):
        nl = text.find("\n", pos)
        if nl < 0:  # (past the last line: the end of the text)
            return len(text)
        pos = nl + 1
    nl = text.find("\n", pos)
    return pos + char_index(text[pos:nl if nl >= 0 else len(text)], col, encoding)


def uri_to_path(uri: str) -> Path | None:
    if urlparse(uri).scheme in ("", "file"):
        p = to_fs_path(uri)
        return Path(p) if p else None
    return None


@dataclass
class TextDoc:
    uri: str
    language_id: str
    version: int | None
    text: str
    path: Path | None
    notebook: str | None = None  # the notebook's uri when this is a cell
    revision: int = 0
    lines: LineIndex = field(default_factory=LineIndex, repr=False, compare=False)

    @property
    def is_python(self) -> bool:
        if self.language_id:
            return self.language_id == "python"
        return self.path is not None and self.path.suffix in (".py", ".pyi")


@dataclass
class CellSpan:
    """Where a cell's lines sit in the notebook's combined source (``start`` is 1-based)."""

    uri: str
    start: int
    count: int


@dataclass
class NotebookSource:
    text: str
    cells: list[CellSpan]

    def locate(self, line: int) -> tuple[CellSpan, int] | None:
        """(cell, 0-based line in that cell) of a 1-based line of the combined source."""
        for cell in self.cells:
            if cell.start <= line < cell.start + cell.count:
                return cell, line - cell.start
        return None

    def line_of(self, cell_uri: str, cell_line: int) -> int | None:
        """1-based line of the combined source for a 0-based line of a cell."""
        for cell in self.cells:
            if cell.uri == cell_uri:
                return cell.start + min(max(cell_line, 0), max(cell.count - 1, 0))
        return None


@dataclass
class Notebook:
    uri: str
    notebook_type: str
    version: int
    cells: list[types.NotebookCell]
    path: Path | None
    revision: int = 0

    def source(self, docs: dict[str, TextDoc]) -> NotebookSource:
        """Python code cells joined in order, so a mesh made in cell 1 counts in cell 5.

        IPython magics become blank lines (or ``pass`` where indented) so the rest parses; every
        line keeps its number and columns within its cell.
        """
        parts: list[str] = []
        spans: list[CellSpan] = []
        line = 1
        for cell in self.cells:
            doc = docs.get(cell.document)
            if doc is None or cell.kind != types.NotebookCellKind.Code or not doc.is_python:
                continue
            lines = split_lines(doc.text)
            spans.append(CellSpan(cell.document, line, len(lines)))
            parts.extend(_neutralise_magics(lines))
            line += len(lines)
        return NotebookSource("\n".join(parts) + "\n", spans)


def _neutralise_magics(lines: list[str]) -> list[str]:
    if lines and lines[0].startswith("%%"):
        name = lines[0][2:].split(maxsplit=1)[0] if lines[0][2:].strip() else ""
        if name not in _PYTHON_CELL_MAGICS:
            return [""] * len(lines)
    out = []
    for ln in lines:
        stripped = ln.lstrip()
        if stripped.startswith(("%", "!")):
            indent = ln[: len(ln) - len(stripped)]
            out.append(indent + "pass" if indent else "")
        else:
            out.append(ln)
    return out


class DocumentStore:
    """Every open text document and notebook; only the event loop thread touches it."""

    def __init__(self) -> None:
        self.docs: dict[str, TextDoc] = {}
        self.notebooks: dict[str, Notebook] = {}
        self._revisions = itertools.count(1)

    @staticmethod
    def key(uri: str) -> str:
        return unquote(uri)

    # ---- text documents ---------------------------------------------------------------------------
    def open_text(self, item: types.TextDocumentItem, notebook: str | None = None) -> TextDoc:
        doc = TextDoc(item.uri, item.language_id or "", item.version, item.text,
                      uri_to_path(item.uri), notebook, next(self._revisions))
        self.docs[self.key(item.uri)] = doc
        return doc

    def change_text(self, ident, changes, encoding: str) -> TextDoc | None:
        doc = self.docs.get(self.key(ident.uri))
        if doc is None:
            return None
        text = doc.text
        for change in changes:
            text = apply_change(text, change, encoding, doc.lines)
        doc.text = text
        doc.version = ident.version
        doc.revision = next(self._revisions)
        if doc.notebook is not None:
            nb = self.notebooks.get(self.key(doc.notebook))
            if nb is not None:
                nb.revision = next(self._revisions)
        return doc

    def close_text(self, uri: str) -> TextDoc | None:
        return self.docs.pop(self.key(uri), None)

    def text_doc(self, uri: str) -> TextDoc | None:
        return self.docs.get(self.key(uri))

    # ---- notebooks --------------------------------------------------------------------------------
    def open_notebook(self, params: types.DidOpenNotebookDocumentParams) -> Notebook:
        nbd = params.notebook_document
        nb = Notebook(nbd.uri, nbd.notebook_type, nbd.version, list(nbd.cells),
                      uri_to_path(nbd.uri), next(self._revisions))
        self.notebooks[self.key(nbd.uri)] = nb
        for item in params.cell_text_documents:
            self.open_text(item, notebook=nbd.uri)
        return nb

    def change_notebook(self, params: types.DidChangeNotebookDocumentParams,
                        encoding: str) -> Notebook | None:
        nb = self.notebooks.get(self.key(params.notebook_document.uri))
        if nb is None:
            return None
        nb.version = params.notebook_document.version
        nb.revision = next(self._revisions)
        cells = params.change.cells
        if cells is None:
            return nb
        by_uri = {c.document: c for c in nb.cells}
        for data in cells.data or []:
            cell = by_uri.get(data.document)
            if cell is not None:
                cell.kind = data.kind
        if cells.structure is not None:
            s = cells.structure
            nb.cells[s.array.start:s.array.start + s.array.delete_count] = list(s.array.cells or [])
            for item in s.did_open or []:
                self.open_text(item, notebook=nb.uri)
            for ident in s.did_close or []:
                self.close_text(ident.uri)
        for content in cells.text_content or []:
            self.change_text(content.document, content.changes, encoding)
        nb.revision = next(self._revisions)
        return nb

    def close_notebook(self, params: types.DidCloseNotebookDocumentParams) -> Notebook | None:
        nb = self.notebooks.pop(self.key(params.notebook_document.uri), None)
        for ident in params.cell_text_documents:
            self.close_text(ident.uri)
        if nb is not None:
            for cell in nb.cells:
                self.close_text(cell.document)
        return nb

    def notebook(self, uri: str) -> Notebook | None:
        return self.notebooks.get(self.key(uri))

    # ---- units ------------------------------------------------------------------------------------
    def unit(self, uri: str) -> TextDoc | Notebook | None:
        """The unit analysed for ``uri``: the document itself, or the notebook of a cell."""
        doc = self.docs.get(self.key(uri))
        if doc is not None and doc.notebook is not None:
            return self.notebooks.get(self.key(doc.notebook))
        if doc is not None:
            return doc
        return self.notebooks.get(self.key(uri))

    def by_key(self, key: str) -> TextDoc | Notebook | None:
        doc = self.docs.get(key)
        if doc is not None and doc.notebook is None:
            return doc
        return self.notebooks.get(key)

    def units(self) -> list[TextDoc | Notebook]:
        out: list[TextDoc | Notebook] = [d for d in self.docs.values() if d.notebook is None]
        out.extend(self.notebooks.values())
        return out

    def text_of_path(self, path: str) -> str | None:
        """Unsaved text of an open document by file path (for related locations)."""
        for doc in self.docs.values():
            if doc.path is not None and doc.notebook is None and str(doc.path) == path:
                return doc.text
        return None
