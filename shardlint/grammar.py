"""Which newer Python a parse failure needs.

The engine parses with the grammar of the interpreter shardlint runs on (stdlib ``ast``). A
project may target a newer Python than that: shardlint on 3.11 reading a 3.12 project meets PEP
701 f-strings and PEP 695 ``type`` aliases, which its parser rejects. ``newer_syntax`` reads the
``SyntaxError`` and the text where it points and names the Python and the feature the code needs,
or ``None`` for a broken file (which stays an error). It judges from the source text and the
position (and, for f-strings, the message), not from one interpreter's wording, so it can be
tested on any Python by passing ``running``.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class NewerSyntax:
    version: tuple[int, int]  # the first Python whose grammar accepts the code
    feature: str  # e.g. "PEP 701 f-string"

    @property
    def python(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"


_TYPE_ALIAS = re.compile(r"\s*type\s+[A-Za-z_]\w*\s*(?P<open>[\[=])")
_GENERIC = re.compile(r"\s*(?:async\s+def|def|class)\s+[A-Za-z_]\w*\s*(?P<open>\[)")
_EXCEPT_STAR = re.compile(r"\s*except\s*\*")
_EXCEPT_BARE_TUPLE = re.compile(r"\s*except\b(?P<rest>[^:]*):")
_STAR_AFTER = re.compile(r"[\[,:]\s*$")  # x[*a], x[a, *b], *args: *Ts
_TEMPLATE_PREFIX = re.compile(r"(?<![\w.])(?:[tT][rR]?|[rR][tT])$")
_STRING_START = re.compile(r"(?<![\w.])([rRbBuUfFtT]{0,2})('''|\"\"\"|'|\")")
# Messages of Pythons before 3.12 that only PEP 701's f-strings get past when the f-string is
# otherwise sound (a field that closes the string with a quote, a backslash or a comment in it).
_FSTRING_MESSAGES = ("f-string", "unterminated string literal", "unterminated triple-quoted")


def newer_syntax(text: str, exc: SyntaxError,
                 running: tuple[int, int] | None = None) -> NewerSyntax | None:
    """The newer Python ``text`` needs where ``exc`` (from parsing it on ``running``) points."""
    running = running or (sys.version_info[0], sys.version_info[1])
    try:
        found = _classify(text, exc)
    except RecursionError:  # f-strings nested thousands deep: say nothing newer
        return None
    if found is None or found.version <= running:
        return None  # the running grammar has the feature: the file is broken
    return found


def _classify(text: str, exc: SyntaxError) -> NewerSyntax | None:
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")  # the tokenizer's lines (str.splitlines also breaks on \x0c)
    lineno = exc.lineno or 0
    if not 1 <= lineno <= len(lines):
        return None
    line = lines[lineno - 1]
    msg = exc.msg or ""
    m = _TYPE_ALIAS.match(line)
    if m:
        if m.group("open") == "[" and _has_default(line, m.end() - 1):
            return NewerSyntax((3, 13), "PEP 696 type parameter default")
        return NewerSyntax((3, 12), "PEP 695 type alias")
    m = _GENERIC.match(line)
    if m:
        if _has_default(line, m.end() - 1):
            return NewerSyntax((3, 13), "PEP 696 type parameter default")
        return NewerSyntax((3, 12), "PEP 695 generic")
    if _EXCEPT_STAR.match(line):
        return NewerSyntax((3, 11), "PEP 654 except*")
    m = _EXCEPT_BARE_TUPLE.match(line)
    if m and "parenthesized" in msg and " as " not in m.group("rest"):
        return NewerSyntax((3, 14), "PEP 758 except without parentheses")
    col = max((exc.offset or 1) - 1, 0)
    if msg == "invalid syntax" and line[col:col + 1] == "*" and _STAR_AFTER.search(line[:col]):
        return NewerSyntax((3, 11), "PEP 646 unpacking in a subscript or annotation")
    for at in (col, col - 1):  # at the quote, or at the prefix before it
        if 0 <= at < len(line) and line[at] in "'\"" and _TEMPLATE_PREFIX.search(line[:at]):
            return NewerSyntax((3, 14), "PEP 750 template string")
    if msg.startswith(_FSTRING_MESSAGES):
        if "cannot include a backslash" in msg or "cannot include '#'" in msg:
            return NewerSyntax((3, 12), "PEP 701 f-string")
        start = sum(len(x) + 1 for x in lines[:lineno - 1])
        if _pep701_fstring_on_line(text, start, start + len(line)):
            return NewerSyntax((3, 12), "PEP 701 f-string")
    return None


def _has_default(line: str, open_at: int) -> bool:
    """A ``=`` directly inside the type parameter list that opens at ``line[open_at]``."""
    depth = 0
    for ch in line[open_at:]:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                return False
        elif ch == "=" and depth == 1:
            return True
    return False


def _pep701_fstring_on_line(text: str, start: int, end: int) -> bool:
    """An f-string that begins on ``text[start:end]`` uses what PEP 701 allows: in a replacement
    field, a string in the enclosing quote, a backslash, a comment, or (in a one-quote f-string) a
    line break."""
    pos = start
    while pos < end:
        ch = text[pos]
        if ch == "#":
            return False
        m = _STRING_START.match(text, pos) if ch in "'\"rRbBuUfFtT" else None
        if m is None or (ch not in "'\"" and m.start(2) == pos):
            pos += 1
            continue
        prefix, quote = m.group(1).lower(), m.group(2)
        scan = _FString(text, "r" in prefix)
        if "f" in prefix:
            after = scan.fstring(m.end(), quote)
            if after is not None and scan.pep701:  # (and it closes by the rules of 3.12)
                return True
        else:
            after = scan.plain(m.end(), quote)
        if after is None:
            return False
        pos = after
    return False


class _FString:
    """A scanner of f-strings by the rules of Python 3.12; ``pep701`` is set when it meets
    something earlier Pythons reject."""

    LIMIT = 20_000

    def __init__(self, text: str, raw: bool):
        self.text, self.raw, self.pep701 = text, raw, False
        self.stop = 0

    def plain(self, pos: int, quote: str, raw: bool | None = None) -> int | None:
        text, raw = self.text, self.raw if raw is None else raw
        while pos < len(text):
            if text.startswith(quote, pos):
                return pos + len(quote)
            ch = text[pos]
            if ch == "\\" and not raw:
                pos += 2
                continue
            if ch == "\n" and len(quote) == 1:
                return None
            pos += 1
        return None

    def fstring(self, pos: int, quote: str, raw: bool | None = None) -> int | None:
        """The position after the closing quote of an f-string whose text starts at ``pos``."""
        text, raw = self.text, self.raw if raw is None else raw
        budget = pos + self.LIMIT
        while pos < len(text) and pos < budget:
            if text.startswith(quote, pos):
                return pos + len(quote)
            ch = text[pos]
            if ch == "\\" and not raw:
                pos += 2
            elif ch == "\n" and len(quote) == 1:
                return None
            elif text.startswith("{{", pos) or text.startswith("}}", pos):
                pos += 2
            elif ch == "{":
                pos = self.field(pos + 1, quote)
                if pos is None:
                    return None
            else:
                pos += 1
        return None

    def field(self, pos: int, quote: str) -> int | None:
        """The position after the ``}`` that closes a replacement field starting at ``pos``."""
        text = self.text
        depth = 0
        budget = pos + self.LIMIT
        while pos < len(text) and pos < budget:
            ch = text[pos]
            if ch in "([{":
                depth += 1
            elif ch in ")]" and depth:
                depth -= 1
            elif ch == "}":
                if depth == 0:
                    return pos + 1
                depth -= 1
            elif ch == "\\":
                self.pep701 = True
            elif ch == "#":
                self.pep701 = True
                nl = text.find("\n", pos)
                pos = len(text) if nl < 0 else nl
                continue
            elif ch == "\n" and len(quote) == 1:
                self.pep701 = True
            elif ch == ":" and depth == 0 and not text.startswith(":=", pos):
                return self.spec(pos + 1, quote)
            elif ch == "!" and depth == 0 and not text.startswith("!=", pos):
                pass  # a conversion: the spec or the closing brace follows
            else:
                m = _STRING_START.match(text, pos) if ch in "'\"rRbBuUfFtT" else None
                if m is not None and (ch in "'\"" or m.start(2) > pos):
                    inner, prefix = m.group(2), m.group(1).lower()
                    if inner[0] == quote[0] and (len(quote) == 1 or inner == quote):
                        self.pep701 = True  # before 3.12 this quote ended the outer string
                    raw = "r" in prefix
                    if "f" in prefix:
                        after = self.fstring(m.end(), inner, raw)
                    else:
                        after = self.plain(m.end(), inner, raw)
                    if after is None:
                        return None
                    pos = after
                    continue
            pos += 1
        return None

    def spec(self, pos: int, quote: str) -> int | None:
        """The format spec after ``:``: text with nested fields, up to the field's ``}``."""
        text = self.text
        while pos < len(text):
            if text.startswith(quote, pos):
                return None
            ch = text[pos]
            if ch == "{":
                pos = self.field(pos + 1, quote)
                if pos is None:
                    return None
                continue
            if ch == "}":
                return pos + 1
            if ch == "\\":
                pos += 2
                continue
            pos += 1
        return None
