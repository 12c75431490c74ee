"""Turning fixes into text: apply the edits of selected findings to a file's text.

Edits carry (line, UTF-8 column) spans. Edits of several findings compose as long as they do not
overlap; an overlapping edit is skipped (the next run picks it up). A suppressed finding never
reaches here, so a fix never touches a suppressed line.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from shardlint.rules.base import Edit, Finding

APPLICABILITY = {"safe": 0, "unsafe": 1, "display-only": 2}


@dataclass
class FixResult:
    text: str
    applied: list[Finding]


def _offsets(text: str) -> list[int]:
    """Byte offset of the start of each line of ``text`` encoded as UTF-8 (1-based lines)."""
    starts = [0, 0]
    pos = 0
    for line in text.encode("utf-8", "surrogatepass").splitlines(keepends=True):
        pos += len(line)
        starts.append(pos)
    return starts


def fixable(f: Finding, unsafe: bool) -> bool:
    if f.fix is None or not f.fix.edits:
        return False
    level = APPLICABILITY.get(f.fix.applicability, 2)
    return level == 0 or (unsafe and level == 1)


def apply_fixes(text: str, findings: list[Finding], unsafe: bool = False) -> FixResult:
    data = text.encode("utf-8", "surrogatepass")
    starts = _offsets(text)

    def offset(line: int, col: int) -> int:
        if line >= len(starts):
            return len(data)
        return min(starts[line] + col, len(data))

    chosen: list[tuple[int, int, Edit, Finding]] = []
    taken: list[tuple[int, int]] = []
    applied: list[Finding] = []
    for f in sorted((f for f in findings if fixable(f, unsafe)), key=Finding.sort_key):
        spans = [(offset(e.span.line, e.span.col), offset(e.span.end_line, e.span.end_col), e)
                 for e in f.fix.edits]  # type: ignore[union-attr]
        if any(not (end <= a or start >= b) or (start == end == a == b)
               for start, end, _ in spans for a, b in taken):
            continue  # overlaps an edit already chosen
        for start, end, e in spans:
            chosen.append((start, end, e, f))
            taken.append((start, end))
        applied.append(f)
    for start, end, e, _ in sorted(chosen, key=lambda c: (c[0], c[1]), reverse=True):
        data = data[:start] + e.text.encode("utf-8") + data[end:]
    return FixResult(data.decode("utf-8", "surrogatepass"), applied)


def unified_diff(path: str, before: str, after: str) -> str:
    return "".join(difflib.unified_diff(before.splitlines(keepends=True),
                                        after.splitlines(keepends=True),
                                        fromfile=f"a/{path}", tofile=f"b/{path}"))
