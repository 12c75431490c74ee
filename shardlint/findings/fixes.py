"""Turning fixes into text: apply the edits of selected findings to a file's text.

Edits carry (line, UTF-8 column) spans. Edits of several findings compose as long as they do not
overlap; an overlapping edit is skipped (the next run picks it up). A suppressed finding never
reaches here, so a fix never touches a suppressed line.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from shardlint.rules.base import Edit, Finding, Fix

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


def resolve(fix: Fix | None, text: str) -> tuple[Edit, ...]:
    """The edits of a fix, building those of a recipe against the file's ``text`` (remembered
    for the same text: a client may ask for the same code action again)."""
    if fix is None:
        return ()
    if fix.edits or fix.recipe is None:
        return fix.edits
    key = (fix.recipe, hash(text), len(text))
    found = _BUILT.get(key)
    if found is None:
        kind, *args = fix.recipe
        built = wrap_in_with(text, *args) if kind == "wrap_in_with" else None
        found = (built,) if built is not None else ()
        if len(_BUILT) > 64:
            _BUILT.clear()
        _BUILT[key] = found
    return found


_BUILT: dict[tuple, tuple[Edit, ...]] = {}


def fixable(f: Finding, unsafe: bool) -> bool:
    """Whether ``f`` has a fix to apply at this level (a recipe counts: it is built when
    applied, and skipped then if it cannot be)."""
    if f.fix is None or not (f.fix.edits or f.fix.recipe is not None):
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
        edits = resolve(f.fix, text)
        if not edits:
            continue
        spans = [(offset(e.span.line, e.span.col), offset(e.span.end_line, e.span.end_col), e)
                 for e in edits]
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


def wrap_in_with(text: str, line: int, context: str) -> Edit | None:
    """An edit that wraps the simple statement holding ``line`` in ``with <context>:`` (None when
    libcst cannot build one: no libcst, or code nested past Python's recursion limit)."""
    try:
        return _wrap_in_with(text, line, context)
    except RecursionError:
        return None


def _wrap_in_with(text: str, line: int, context: str) -> Edit | None:
    """An edit that wraps the simple statement holding ``line`` in ``with <context>:``.

    Restructuring code is libcst's job: it keeps comments, formatting and multi-line strings
    intact and indents the body correctly at any depth. Only the changed lines are replaced.
    """
    try:
        import libcst as cst
        from libcst.metadata import MetadataWrapper, PositionProvider
    except ImportError:  # a bundled server without libcst's compiled parser: no fix, same finding
        return None

    from shardlint.source import Span

    try:
        wrapper = MetadataWrapper(cst.parse_module(text))
        context_expr = cst.parse_expression(context)
    except cst.ParserSyntaxError:
        return None
    positions = wrapper.resolve(PositionProvider)
    target: list[cst.SimpleStatementLine] = []
    for node, pos in positions.items():
        if isinstance(node, cst.SimpleStatementLine) and pos.start.line <= line <= pos.end.line:
            target.append(node)
    if len(target) != 1:
        return None
    statement = target[0]

    class Wrap(cst.CSTTransformer):
        def leave_SimpleStatementLine(self, original, updated):
            if original is not statement:
                return updated
            body = cst.IndentedBlock(body=[updated.with_changes(leading_lines=[])])
            return cst.With(items=[cst.WithItem(item=context_expr)], body=body,
                            leading_lines=updated.leading_lines)

    new = wrapper.module.visit(Wrap()).code
    old_lines = text.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    start = 0
    while start < min(len(old_lines), len(new_lines)) and old_lines[start] == new_lines[start]:
        start += 1
    end_old, end_new = len(old_lines), len(new_lines)
    while end_old > start and end_new > start and old_lines[end_old - 1] == new_lines[end_new - 1]:
        end_old -= 1
        end_new -= 1
    replaced = "".join(new_lines[start:end_new])
    # Replace whole lines: from the start of the first changed line to the start of the next.
    return Edit(Span(start + 1, 0, end_old + 1, 0), replaced)
