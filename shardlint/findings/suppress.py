"""Inline suppressions. Codes are required; prefixes are allowed.

``# shardlint: ignore[SHL401]`` or ``# noqa: SHL401`` on a finding's first or last line, and
``# shardlint: file-ignore[SHL2]`` anywhere in the file.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

from shardlint.source import without_surrogates

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


def parse(text: str) -> Suppressions:
    out = Suppressions()
    if not _ANY.search(text):
        return out  # tokenizing costs more than parsing: only do it when a comment may match
    for line, col, comment in _comments(text):
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


def _comments(text: str) -> list[tuple[int, int, str]]:
    """(line, utf-8 column, text) of each comment; a line scan when the text does not tokenize."""
    text = without_surrogates(text)  # (positions unchanged; see source.py)
    found = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                col = len(tok.line[: tok.start[1]].encode("utf-8"))
                found.append((tok.start[0], col, tok.string))
        return found
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    found = []
    for i, line in enumerate(text.splitlines(), start=1):
        idx = line.find("#")
        if idx >= 0:
            found.append((i, len(line[:idx].encode("utf-8")), line[idx:]))
    return found
