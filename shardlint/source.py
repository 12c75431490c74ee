"""Source text with exact position maps.

Internally a position is (1-based line, 0-based UTF-8 byte column): what stdlib ``ast`` reports.
Faces convert: the CLI prints 1-based character (code point) columns, the language server the
negotiated LSP encoding (UTF-16 by default).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property


@dataclass(frozen=True)
class Span:
    """A range in a source: lines 1-based, columns 0-based UTF-8 byte offsets (as ``ast``)."""

    line: int
    col: int
    end_line: int
    end_col: int


_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (an editor can send one: JSON allows ``"\\ud800"``)
    replaced by U+FFFD. Both are one UTF-16 unit, one code point and three UTF-8 bytes (as
    ``surrogatepass`` encodes a surrogate), so every position stays where it was; only the
    replacement can be encoded to UTF-8."""
    if text.isascii():  # (a flag of the string: no scan)
        return text
    try:
        text.encode("utf-8")  # (a third of the regular expression's scan: it runs per keystroke)
    except UnicodeEncodeError:  # (only a lone surrogate fails)
        return _SURROGATE.sub("\ufffd", text)
    return text


@dataclass
class SourceText:
    path: str
    text: str

    @cached_property
    def _lines(self) -> list[str]:
        # Split only on the line breaks Python's tokenizer knows (\n, \r\n, \r): str.splitlines
        # also breaks on \x0c, \x1c, \u2028..., which would shift every later line. Computed on
        # first use: most files linted produce no finding and never need it.
        text = without_surrogates(self.text)
        if "\r" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        return text.split("\n")

    @property
    def lines(self) -> list[str]:
        return self._lines

    def take_lines(self, lines: list[str]) -> None:
        """``text.split("\n")``, made elsewhere (the incremental parser): kept as the lines
        where they are what ``_lines`` would make (no \r, no lone surrogate)."""
        if "_lines" not in self.__dict__ and "\r" not in self.text \
                and without_surrogates(self.text) is self.text:
            self.__dict__["_lines"] = lines

    def line_text(self, line: int) -> str:
        if 1 <= line <= len(self._lines):
            return self._lines[line - 1]
        return ""

    def char_col(self, line: int, utf8_col: int) -> int:
        """0-based code point column of a UTF-8 byte column."""
        text = self.line_text(line)
        if text.isascii():
            return utf8_col
        return len(text.encode("utf-8")[:utf8_col].decode("utf-8", errors="ignore"))

    def utf16_col(self, line: int, utf8_col: int) -> int:
        text = self.line_text(line)
        if text.isascii():
            return utf8_col
        prefix = text.encode("utf-8")[:utf8_col].decode("utf-8", errors="ignore")
        return len(prefix.encode("utf-16-le")) // 2

    def col_in(self, line: int, utf8_col: int, encoding: str) -> int:
        """Column in an LSP position encoding: ``utf-8``, ``utf-16`` or ``utf-32``."""
        if encoding == "utf-8":
            return utf8_col
        if encoding == "utf-32":
            return self.char_col(line, utf8_col)
        return self.utf16_col(line, utf8_col)

    def utf8_col_from(self, line: int, col: int, encoding: str) -> int:
        """Inverse of :meth:`col_in`: a column in ``encoding`` to a UTF-8 byte column."""
        text = self.line_text(line)
        if encoding == "utf-8" or text.isascii():
            return col
        if encoding == "utf-32":
            return len(text[:col].encode("utf-8"))
        units = 0
        for i, ch in enumerate(text):
            if units >= col:
                return len(text[:i].encode("utf-8"))
            units += 2 if ord(ch) > 0xFFFF else 1
        return len(text.encode("utf-8"))

    def offset(self, line: int, utf8_col: int) -> int:
        """Character offset into ``text`` (for slicing), from a (line, UTF-8 column) pair."""
        start = sum(len(x) + 1 for x in self._lines[: line - 1])
        return start + self.char_col(line, utf8_col)

    def segment(self, span: Span) -> str:
        if span.line == span.end_line:
            raw = self.line_text(span.line).encode("utf-8")[span.col : span.end_col]
            return raw.decode("utf-8", errors="replace")
        parts = [self.line_text(span.line).encode("utf-8")[span.col :].decode("utf-8", "replace")]
        for ln in range(span.line + 1, span.end_line):
            parts.append(self.line_text(ln))
        end = self.line_text(span.end_line).encode("utf-8")[: span.end_col]
        parts.append(end.decode("utf-8", "replace"))
        return "\n".join(parts)


def decode_source(data: bytes) -> str:
    """A Python file's text as Python reads it: UTF-8 (a BOM is kept, the parser accepts it),
    or the encoding its PEP 263 cookie declares (``# -*- coding: latin-1 -*-``). Raises
    UnicodeDecodeError for bytes that are neither (and SyntaxError for an unknown encoding)."""
    return decoded(data)[0]


def decoded(data: bytes) -> tuple[str, str]:
    """(text, encoding) of a Python file's bytes (see ``decode_source``)."""
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        import io
        import tokenize

        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        if encoding in ("utf-8", "utf-8-sig"):
            raise
        return data.decode(encoding), encoding
