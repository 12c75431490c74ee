"""Inline suppressions. Codes are required; prefixes are allowed.

``# shardlint: ignore[SHL401]`` or ``# noqa: SHL401`` on a finding's first or last line, and
``# shardlint: file-ignore[SHL2]`` anywhere in the file.

Only a comment counts (not the same text in a string), and telling them apart takes Python's
tokenizer: ~30 ms for a 5,000-line file, on every keystroke of a file that holds one
suppression. Given the file's syntax tree, only the statements that hold a candidate are
tokenized, each on its own (a statement starts a logical line: the tokenizer is then in no
string, at any depth), the innermost one that holds it in a large class or function, and what
they hold is kept by their text from call to call. The language server asks later, for a code
action or a hover, when the tree has moved on: each analysis notes which statement holds each
line it may be asked about (``statement_spans``), and the same statements are tokenized then.
"""

from __future__ import annotations

import ast
import bisect
import io
import re
import tokenize
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from shardlint.source import SourceText, without_surrogates
from shardlint.syntax import first_line

_LINE = re.compile(r"#\s*shardlint\s*:\s*ignore\s*\[([^\]]*)\]", re.I)
_FILE = re.compile(r"#\s*shardlint\s*:\s*file-ignore\s*\[([^\]]*)\]", re.I)
_NOQA = re.compile(r"#\s*noqa\s*:\s*((?:SHL\d{0,3}[\s,]*)+)", re.I)
_CODE = re.compile(r"SHL\d{0,3}", re.I)
# What each of the three starts with, in one scan of the text (most files have none of them).
_ANY = re.compile(r"#\s*(?:shardlint\s*:\s*(?:file-)?ignore\s*\[|noqa\s*:)", re.I)


@dataclass
class Suppressions:
    lines: dict[int, tuple[str, ...]] = field(default_factory=dict)
    file: tuple[str, ...] = ()
    # Where each suppression comment sits, for hovers and "unused suppression" reports.
    comments: list[tuple[int, int, int, str]] = field(default_factory=list)  # line, start, end, kind

    def suppresses(self, code: str, line: int, end_line: int | None = None) -> bool:
        if any(code.startswith(p) for p in self.file):
            return True
        for ln in {line, end_line or line}:
            if any(code.startswith(p) for p in self.lines.get(ln, ())):
                return True
        return False


def _codes(text: str) -> tuple[str, ...]:
    return tuple(c.upper() for c in _CODE.findall(text))


def parse(text: str, tree: ast.Module | None = None,
          wanted: Collection[int] | None = None,
          spans: dict[int, tuple[int, int] | None] | None = None) -> Suppressions:
    """The suppressions of ``text``. ``tree``: its syntax tree, when it parses (see the module's
    doc); or ``spans``, what :func:`statement_spans` found in it for the lines asked (the
    whole file is tokenized where a line is not there). ``wanted``: only the line
    suppressions on these lines are needed (and every file-wide one); ``comments`` then lists
    only those."""
    out = Suppressions()
    found = _ANY.search(text)
    if found is None:
        return out  # tokenizing costs more than parsing: only do it when a comment may match
    comments = None
    if tree is not None or wanted is not None or spans is not None:
        candidates = _candidates(text, found, wanted)
        if not candidates:
            return out
        if tree is not None and "\r" not in text:
            lines = text.split("\n")
            comments = _region_comments(lines, _spans_in(tree, lines, candidates), candidates)
        elif spans is not None:
            comments = _region_comments(text.split("\n"), spans, candidates)
    if comments is None:
        comments = _comments(text)
    for line, col, comment in comments:
        for regex, kind in ((_FILE, "file"), (_LINE, "line"), (_NOQA, "noqa")):
            m = regex.search(comment)
            if m is None:
                continue
            codes = _codes(m.group(1))
            if not codes:
                continue
            if kind == "file":
                out.file += codes
            else:
                out.lines[line] = out.lines.get(line, ()) + codes
            out.comments.append((line, col + m.start(), col + m.end(), kind))
            break
    return out


def _candidates(text: str, first: re.Match, wanted: Collection[int] | None) -> list[int]:
    """The lines (1-based, ascending) of the comments that may be suppressions: those of
    ``wanted`` and any that may be file-wide."""
    out: list[int] = []
    line, pos = 1, 0
    m: re.Match | None = first
    while m is not None:
        line += text.count("\n", pos, m.start())
        pos = m.start()
        if wanted is None or line in wanted or "file-" in m.group(0).lower():
            if not out or out[-1] != line:
                out.append(line)
        m = _ANY.search(text, m.end())
    return out


# a statement's text -> its comments and the lines ending in a string (see _scanned)
_REGIONS: dict[str, tuple[list[tuple[int, int, str]], list[int]] | None] = {}
_HELD = 0  # characters of the texts _REGIONS holds
_SPLIT = 40  # lines: a class or function larger than this is looked into for the statement


def candidate_lines(text: str) -> list[int]:
    """The lines (1-based, ascending) of every comment that may be a suppression."""
    found = _ANY.search(text)
    return _candidates(text, found, None) if found is not None else []


def statement_spans(text: str, tree: ast.Module, wanted: Iterable[int],
                    lines: list[str] | None = None) -> dict[int, tuple[int, int] | None]:
    """For each line of ``wanted``: the lines (first, last) of the statement of ``text`` (whose
    syntax tree is ``tree``) that holds it, to tokenize on its own (see the module's doc), or
    None where that cannot be done exactly. ``lines``: ``text.split("\\n")``, where the caller
    has it. A language server works these out with the tree of each analysis, and answers
    code actions and hovers later from them."""
    if "\r" in text:
        return dict.fromkeys(wanted)
    return _spans_in(tree, lines if lines is not None else text.split("\n"), wanted)


def _spans_in(tree: ast.Module, lines: list[str], wanted: Iterable[int]
              ) -> dict[int, tuple[int, int] | None]:
    starts: dict[int, list[int]] = {}  # (each body's first lines, worked out once for all)
    return {line: _region(tree.body, 1, len(lines), line, lines, starts) for line in wanted}


def uncommentable(text: str, wanted: Collection[int],
                  spans: dict[int, tuple[int, int] | None] | None = None) -> set[int]:
    """Those of the lines ``wanted`` whose end is inside a string or continued by a backslash:
    a comment cannot go there. With ``spans`` (:func:`statement_spans`), only the statements
    that hold them are tokenized; else the whole file."""
    lines = SourceText("", text).lines  # (as the tokenizer counts them: \r too)
    out = {line for line in wanted if 0 < line <= len(lines)
           and lines[line - 1].rstrip().endswith("\\")}
    inside = None
    if spans is not None and "\r" not in text:  # (then the lines are text.split("\n"))
        inside = set()
        for line in wanted:
            span = spans.get(line)
            scanned = _scanned(lines, span) if span is not None else None
            if scanned is None:
                inside = None
                break
            inside.update(span[0] - 1 + k for k in scanned[1])
    if inside is None:
        inside = _strings(text)
    return out | (inside & set(wanted))


def _region_comments(lines: list[str], spans: dict[int, tuple[int, int] | None],
                     lines_wanted: list[int]) -> list[tuple[int, int, str]] | None:
    """The comments of the statements that hold ``lines_wanted`` (``spans``: those
    statements), each statement tokenized on its own (None where that cannot be done
    exactly: the caller tokenizes the file)."""
    regions = set()
    for line in lines_wanted:
        region = spans.get(line)
        if region is None:
            return None
        regions.add(region)
    out: list[tuple[int, int, str]] = []
    for a, b in sorted(regions):
        found = _scanned(lines, (a, b))
        if found is None:
            return None
        out.extend((a - 1 + line, col, comment) for line, col, comment in found[0])
    return out


def _scanned(lines: list[str], span: tuple[int, int]
             ) -> tuple[list[tuple[int, int, str]], list[int]] | None:
    """What the tokenizer finds in the lines ``span`` of a statement, on their own: its
    comments and the lines whose end is inside a string (numbered from 1 at the span's
    first line); kept by their text. None where they do not tokenize."""
    global _HELD
    a, b = span
    chunk = "\n".join(lines[a - 1:b]) + "\n"
    found = _REGIONS.get(chunk, _MISSING)
    if found is _MISSING:
        if len(_REGIONS) > 512 or _HELD > 4_000_000:  # (keys are texts: kept small)
            _REGIONS.clear()
            _HELD = 0
        _HELD += len(chunk)
        try:
            found = _scan(chunk)
        except (tokenize.TokenError, IndentationError, SyntaxError):
            found = None
        _REGIONS[chunk] = found
    return found


_MISSING: list = []


def _starts_its_line(stmt: ast.stmt, lines: list[str]) -> bool:
    """Whether only blank space comes before ``stmt`` (its first decorator) on its line: the
    tokenizer is then at the start of a logical line there, in no string or bracket."""
    decorators = getattr(stmt, "decorator_list", None)
    first = min(decorators, key=lambda d: (d.lineno, d.col_offset)) if decorators else stmt
    if first.lineno != first_line(stmt):
        return False
    # (the AST's columns are UTF-8 bytes; a decorator's own column is after its `@`)
    prefix = lines[first.lineno - 1].encode("utf-8")[:first.col_offset].strip()
    return prefix == b"" or (first is not stmt and prefix == b"@")


def _region(body: list[ast.stmt], start: int, end: int, line: int, lines: list[str],
            memo: dict[int, list[int]] | None = None) -> tuple[int, int] | None:
    """The lines (first, last) of the statement of ``body`` whose lines (up to the next
    statement's: its trailing comments are its) hold ``line``; ``start``..``end``: the lines
    ``body`` spans. Inside a large class or function, the member or body statement that
    holds it, at any depth. None where a statement does not start its line."""
    if not body:
        return start, end
    starts = memo.get(id(body)) if memo is not None else None
    if starts is None:
        starts = [first_line(s) for s in body]
        if memo is not None:
            memo[id(body)] = starts
    k = max(bisect.bisect_right(starts, line) - 1, 0)  # (the comments before the first
    # statement are its region's)
    k = bisect.bisect_left(starts, starts[k])  # (statements sharing a line go together)
    j = bisect.bisect_right(starts, starts[k]) - 1
    stmt = body[k]
    if k > 0 and not _starts_its_line(stmt, lines):
        return None
    first = start if k == 0 else starts[k]
    last = starts[j + 1] - 1 if j + 1 < len(starts) else end
    if k == j and last - first > _SPLIT and isinstance(
            stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and len(stmt.body) > 1:
        inner = first_line(stmt.body[0])
        if inner > stmt.lineno and _starts_its_line(stmt.body[0], lines):
            if line >= inner:
                return _region(stmt.body, inner, last, line, lines, memo)
            return first, inner - 1  # (the decorators and the header)
    return first, last


def _comments(text: str) -> list[tuple[int, int, str]]:
    """(line, utf-8 column, text) of each comment; a line scan when the text does not tokenize."""
    try:
        return _scan(text)[0]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    found = []
    for i, line in enumerate(without_surrogates(text).splitlines(), start=1):
        idx = line.find("#")
        if idx >= 0:
            found.append((i, len(line[:idx].encode("utf-8")), line[idx:]))
    return found


# (f-strings are tokens of their own from Python 3.12, t-strings from 3.14)
_STARTS = {getattr(tokenize, n) for n in ("FSTRING_START", "TSTRING_START") if hasattr(tokenize, n)}
_ENDS = {getattr(tokenize, n) for n in ("FSTRING_END", "TSTRING_END") if hasattr(tokenize, n)}


def _scan(text: str, into: set[int] | None = None) -> tuple[list[tuple[int, int, str]], list[int]]:
    """One pass of the tokenizer: (line, utf-8 column, text) of each comment, and the lines
    whose end is inside a string (``into`` gets them as they are found: what was found before
    a tokenizer error). Raises where the text does not tokenize."""
    text = without_surrogates(text)  # (positions unchanged; see source.py)
    comments = []
    inside: set[int] = into if into is not None else set()
    starts: list[int] = []
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        kind = tok.type
        if kind == tokenize.COMMENT:
            col = len(tok.line[: tok.start[1]].encode("utf-8"))
            comments.append((tok.start[0], col, tok.string))
        elif kind == tokenize.STRING:
            if tok.end[0] > tok.start[0]:
                inside.update(range(tok.start[0], tok.end[0]))
        elif kind in _STARTS:
            starts.append(tok.start[0])
        elif kind in _ENDS and starts:
            inside.update(range(starts.pop(), tok.end[0]))
    return comments, sorted(inside)


def _strings(text: str) -> set[int]:
    """The lines of the whole file whose end is inside a string (as far as it tokenizes)."""
    inside: set[int] = set()
    try:
        _scan(text, inside)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return inside
