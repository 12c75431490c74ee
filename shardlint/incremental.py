"""Reparse only the top-level statements an edit touched; keep the syntax tree of the rest.

The language server parses the same file on every keystroke. ``ast.parse`` of a 2,000-line file
costs ~25 ms, most of it building Python objects for lines that did not change. A module is a
sequence of top-level statements, and between two of them the tokenizer is back at column 0 with
no open bracket or string. So the lines from the first line of statement *i* up to the line
before statement *i+1* (its *region*) can be parsed on their own; if the regions an edit touched
still parse on their own, the new tree is the old statements before them, the new statements,
and the old statements after them, with their line numbers moved by the lines the edit added.

Every doubt falls back to a full parse: no previous tree, ``\\r`` line breaks, a region that no
longer parses alone (an unclosed bracket or string, a dedent or indent that joins it to a
neighbour), or a ``from __future__`` import in it. A syntax error is only reported from a parse
that starts where a statement starts and runs to the end of the file (the whole text; the
edited top-level statement on, ``_from_region``; the edited block on, under stand-in headers,
``_nested_error``), so its message and position are exactly those of ``ast.parse``. After an
error the last version that parsed stays the base, so the edit that repairs it is incremental.

The old tree's nodes are reused in the new tree (and moved in place when lines shift): callers
must treat a tree handed out earlier as gone once they parse again.
"""

from __future__ import annotations

import ast
import bisect
import copy
import re

from shardlint.syntax import first_line, nodes, parse


_CHUNK = 4096


def _common_prefix(a: str, b: str) -> int:
    """Length of the common prefix: chunk by chunk up to the first that differs (each slice
    compare in C; a keystroke's text is copied once up to the edit, not log n times whole),
    then by binary search within it."""
    n = min(len(a), len(b))
    lo = 0
    while lo < n:
        hi = min(lo + _CHUNK, n)
        if a[lo:hi] != b[lo:hi]:
            break
        lo = hi
    else:
        return n
    hi = min(lo + _CHUNK, n)  # invariant: a[:lo] == b[:lo], the chunk up to hi differs
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo if a[lo] != b[lo] else lo + 1


def _common_suffix(a: str, b: str, limit: int) -> int:
    """Length of the common suffix, at most ``limit`` (as _common_prefix, from the end)."""
    n = min(len(a), len(b), limit)
    la, lb = len(a), len(b)
    lo = 0
    while lo < n:
        hi = min(lo + _CHUNK, n)
        if a[la - hi:la - lo] != b[lb - hi:lb - lo]:
            break
        lo = hi
    else:
        return n
    hi = min(lo + _CHUNK, n)  # a's last lo equal b's, not its last hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[la - mid:la - lo] == b[lb - mid:lb - lo]:
            lo = mid
        else:
            hi = mid
    return lo if a[la - lo - 1] != b[lb - lo - 1] else lo + 1


# Clauses that continue the compound statement before them (`if` ... `else:`, `except(E):`).
_CONTINUATION = re.compile(r"(?:else|elif|except|finally)\b")


def _starts_alone(lines: list[str], start_line: int) -> bool:
    """Whether the text from ``start_line`` (1-based) begins a statement that cannot join the
    one before it: its first line of code starts at column 0 and is not an ``else``/``elif``/
    ``except``/``finally`` clause. (An indented first line continues the block before it, as
    when the header of a class is deleted and its methods become the previous function's.)"""
    for line in lines[start_line - 1:]:
        code = line.strip()
        if not code or code.startswith("#"):
            continue
        if line[0] in " \t\f":
            return False
        return _CONTINUATION.match(code) is None
    return True


def _mixed_indent(lines: list[str]) -> bool:
    """A tab or form feed in the indentation of one of ``lines``."""
    for line in lines:
        indent = line[:len(line) - len(line.lstrip(" \t\f"))]
        if "\t" in indent or "\f" in indent:
            return True
    return False


def _same(old: list[ast.stmt], new: list[ast.stmt]) -> bool:
    """Whether ``new`` are ``old`` parsed again: the same nodes at the same positions (an edit
    of a comment, or of blank space between tokens that moves none)."""
    return len(old) == len(new) and all(
        ast.dump(a, include_attributes=True) == ast.dump(b, include_attributes=True)
        for a, b in zip(old, new))


def _positioned(stmt: ast.stmt) -> list[ast.AST]:
    """The nodes under ``stmt`` that carry line numbers."""
    return [n for n in nodes(stmt) if "lineno" in type(n)._attributes]


def _shift(stmts: list[ast.stmt], delta: int, known: dict[ast.stmt, list[ast.AST]]) -> None:
    """Move every node under ``stmts`` down by ``delta`` lines, in place (~5 ms for the second
    half of a 2,000-line file, where parsing those lines again costs ~12 ms; about half that
    once ``known`` holds the statements' nodes from an earlier shift)."""
    for stmt in stmts:
        positioned = known.get(stmt)
        if positioned is None:
            positioned = known[stmt] = _positioned(stmt)
        for node in positioned:  # (a parsed node always has both)
            node.lineno += delta  # type: ignore[attr-defined]
            node.end_lineno += delta  # type: ignore[attr-defined]


def _edited_statement(block: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef, first: int,
                      old_last: int, delta: int, end_line: int | None
                      ) -> tuple[int, int, int | None] | None:
    """The statement of ``block``'s body whose region holds the whole edit (old lines
    ``first``..``old_last``): its index, its first line and its region's last line in the new
    text (the block's last statement: ``end_line``). None when the edit is in the header (the
    decorators, the signature), spans two statements, or the body has one statement."""
    body = block.body
    if len(body) < 2:
        return None
    starts = [first_line(m) for m in body]
    k = bisect.bisect_right(starts, first) - 1
    if k < 0:
        return None  # the header, or before the first statement
    k = bisect.bisect_left(starts, starts[k])
    if k + 1 < len(body) and old_last >= starts[k + 1]:
        return None  # the edit spans two statements, or statements share a line
    start = starts[k]
    if start < 2 or start <= block.lineno:
        return None
    return k, start, starts[k + 1] - 1 + delta if k + 1 < len(body) else end_line


class IncrementalParser:
    """Parses successive versions of one file, reusing what did not change."""

    def __init__(self) -> None:
        self._text: str | None = None
        self._tree: ast.Module | None = None
        self._lines: list[str] | None = None  # _text.split("\n"), when a call made it
        # ``(text, text.split("\n"))`` of the last call's text, parsed or not, when it made
        # them: a caller that needs the lines takes them rather than splitting again.
        self.last_lines: tuple[str, list[str]] | None = None
        self._starts: list[int] = []  # first line of each top-level statement of _tree
        self._positioned: dict[ast.stmt, list[ast.AST]] = {}  # of statements shifted before
        self.reparsed = 0  # statements parsed by the last call (for tests and benchmarks)
        self.full = True  # whether the last call parsed the whole text
        # Whether the last call handed back the previous tree itself: the text is the same, or
        # the edit changed only comments or blank space and moved no node (a caller may keep
        # what it derived from that tree; positions in it still hold).
        self.same_tree = False
        # The lines the last call's edit spans in the new text (first, last, 1-based) and how
        # many lines it added: text outside them is the previous version's, ``delta`` lines
        # further down after them. None after a full parse.
        self.changed: tuple[int, int, int] | None = None
        # What a caller derived from the last tree and wants back with the next one (the engine
        # keeps its per-statement facts here: ``semantics.replay``).
        self.memo: object = None
        # What a caller made of the last tree as a whole, for a call that hands it back
        # (``same_tree``): the engine keeps the file's facts and summary here.
        self.kept: object = None
        self._new: str = ""  # the text being parsed (for _nested_error)
        self._span: int | None = None  # the last line of its edited top-level region (or None)
        self._tried = False  # whether _nested_error ran for this edit

    def tree_of(self, text: str) -> ast.Module | None:
        """The tree of the last call, when its text was ``text`` itself and parsed (the next
        call may shift its positions in place: use it before then)."""
        return self._tree if self._text is text else None

    def parse(self, text: str, filename: str) -> ast.Module:
        """The tree of ``text``; raises ``SyntaxError``/``ValueError`` as ``ast.parse`` does."""
        self.changed = None
        self.last_lines = None
        previous = self._tree
        tree = self._incremental(text, filename)
        if tree is None:
            # On an error the last version that parsed stays the base for the next edit.
            self.changed = None
            self.full, self.reparsed = True, 0
            tree = parse(text, filename)
            self.reparsed = len(tree.body)
        self.same_tree = tree is previous
        if self.same_tree:
            self.changed = (0, -1, 0)
        self._text, self._tree = text, tree
        got = self.last_lines
        self._lines = got[1] if got is not None and got[0] is text else None
        self._starts = [first_line(s) for s in tree.body]
        known = self._positioned
        if known:  # forget the statements that are gone
            self._positioned = {s: p for s in tree.body if (p := known.get(s)) is not None}
        return tree

    def _incremental(self, text: str, filename: str) -> ast.Module | None:
        old, tree = self._text, self._tree
        self._new, self._tried = text, False
        if old is None or tree is None or not tree.body or "\r" in text or "\r" in old:
            return None
        if old == text:
            self.full, self.reparsed, self.changed = False, 0, (0, -1, 0)
            if self._lines is not None:
                self.last_lines = (text, self._lines)
            return tree
        p = _common_prefix(old, text)
        s = _common_suffix(old, text, min(len(old), len(text)) - p)
        # Lines (1-based) of the changed text in the old and the new version.
        first = old.count("\n", 0, p) + 1
        old_last = old.count("\n", 0, len(old) - s) + 1
        delta = text.count("\n", p, len(text) - s) - old.count("\n", p, len(old) - s)
        starts = self._starts
        # Regions i..j hold the changed old lines; region 0 starts at line 1.
        i = max(bisect.bisect_right(starts, first) - 1, 0)
        i = bisect.bisect_left(starts, starts[i])  # statements sharing a line (``a = 1; b = 2``)
        j = max(bisect.bisect_right(starts, old_last) - 1, i)
        after = tree.body[j + 1:]
        start_line = 1 if i == 0 else starts[i]
        end_line = starts[j + 1] - 1 + delta if j + 1 < len(starts) else None  # new text, inclusive
        lines = self._split(text, p, s, first, old_last)
        self.last_lines = (text, lines)
        self._span = end_line
        if i == j and isinstance(tree.body[i], ast.ClassDef):
            cls = self._in_class(tree.body[i], first, old_last, delta, lines, end_line, filename)
            if cls is tree.body[i]:
                return tree  # (the edit moved nothing: see ``same_tree``)
            if cls is not None:
                if delta:
                    _shift(after, delta, self._positioned)
                self.changed = (first, text.count("\n", 0, len(text) - s) + 1, delta)
                return ast.Module(body=[*tree.body[:i], cls, *after], type_ignores=[])
        chunk = "\n".join(lines[start_line - 1:end_line])
        if "__future__" in chunk:
            return None
        try:
            # (blank lines before the region give its nodes their line numbers: cheaper than
            # renumbering a class of thousands of nodes afterwards)
            part = parse("\n" * (start_line - 1) + chunk, filename)
        except (SyntaxError, ValueError):
            # A region's own error can differ from the file's (CPython places "invalid syntax"
            # at the furthest token its parser reached, which depends on the text after the
            # region): the text from the region to the end decides.
            if not _starts_alone(lines, start_line):
                return None  # (it may join the statement before it: the full parse decides)
            return self._from_region(tree, i, start_line, lines, text, s, filename)
        self.full, self.reparsed = False, len(part.body)
        if not delta and _same(tree.body[i:j + 1], part.body):
            return tree
        if delta:
            _shift(after, delta, self._positioned)
        self.changed = (first, text.count("\n", 0, len(text) - s) + 1, delta)
        return ast.Module(body=[*tree.body[:i], *part.body, *after], type_ignores=[])

    def _split(self, text: str, p: int, s: int, first: int, old_last: int) -> list[str]:
        """``text.split("\n")``, made from the last version's lines where it has them: the
        lines before ``first`` and after ``old_last`` are the same strings (``p``, ``s``: the
        lengths of the common prefix and suffix), only the edited lines are split again (a
        keystroke in a 5,000-line file: ~1 ms less)."""
        old = self._lines
        if old is None:
            return text.split("\n")
        a = text.rfind("\n", 0, p) + 1  # (where line ``first`` starts, in both versions)
        b = text.find("\n", len(text) - s)  # (where the last edited line ends)
        lines = [*old[:first - 1], *text[a:b if b >= 0 else len(text)].split("\n"),
                 *old[old_last:]]
        if len(lines) != text.count("\n") + 1:  # (cannot happen: the whole split decides)
            return text.split("\n")
        return lines

    def _in_class(self, cls: ast.ClassDef, first: int, old_last: int, delta: int,
                  lines: list[str], end_line: int | None, filename: str) -> ast.ClassDef | None:
        """The class with only the member statements the edit touched parsed again, when the
        edit lies inside one member's region (a method of a class of thousands of lines). The
        region is parsed under a stand-in ``class _:`` line just above it, its lines keeping
        their own indentation (so every position is exact and no string changes); anything
        that would not give the tree a full parse gives returns None (the caller parses the
        whole class)."""
        body = cls.body
        found = _edited_statement(cls, first, old_last, delta, end_line)
        if found is None:
            return None
        k, start, end = found
        members = self._in_body(body[k], first, old_last, delta, lines, end, filename,
                                outer=(cls.col_offset, body[k].col_offset))
        if members is None:  # (not inside one statement of a method's body)
            members = self._block(body, start, end, lines, filename, "class _:",
                                  (cls.col_offset,))
            if members is not None and not delta and _same(body[k:k + 1], members):
                members = [body[k]]
        if members is None:
            return None
        self.full = False
        if len(members) == 1 and members[0] is body[k]:
            return cls
        rest = body[k + 1:]
        if delta:
            _shift(rest, delta, self._positioned)
        new = copy.copy(cls)  # a new statement object: what was derived from the old one goes
        new.body = [*body[:k], *members, *rest]
        last = new.body[-1]
        new.end_lineno, new.end_col_offset = last.end_lineno, last.end_col_offset
        self.full = False
        return new

    def _block(self, body: list[ast.stmt], start: int, end: int | None, lines: list[str],
               filename: str, header: str, outer: tuple[int, ...]) -> list[ast.stmt] | None:
        """The statements of lines ``start``..``end`` (the new text's, 1-based, inclusive),
        parsed under a stand-in ``header`` line just above them with their own indentation
        (every position exact, no string changed), when they are all indented as ``body``'s
        statements are: else None (the caller parses more). ``outer``: the columns of the
        headers of the blocks around them, outermost first (for ``_nested_error``)."""
        chunk = "\n".join(lines[start - 1:end])
        if _mixed_indent(lines[start - 1:end]):
            # Whether a tab in an indentation is consistent depends on the enclosing blocks'
            # indentation, which the stand-in header does not have (`TabError`).
            return None
        try:
            part = parse("\n" * (start - 2) + header + "\n" + chunk, filename)
        except (SyntaxError, ValueError):
            if not self._tried:  # (the innermost region that fails comes first)
                self._tried = True
                self._nested_error(start, end, body[0].col_offset, outer, lines, filename)
            return None  # (it may join the statements after it: the caller parses more)
        if len(part.body) != 1:
            return None  # a line dedented out of the block: a statement of its own
        inner = part.body[0]
        found = inner.body if isinstance(inner, (ast.ClassDef, ast.If)) else None
        if not found or getattr(inner, "orelse", None) or any(
                m.col_offset != body[0].col_offset for m in found):
            return None  # indented unlike the statements beside it: the full parse decides
        self.reparsed = len(found)
        return found

    def _in_body(self, fn: ast.stmt, first: int, old_last: int, delta: int, lines: list[str],
                 end_line: int | None, filename: str, depth: int = 0,
                 outer: tuple[int, ...] = ()) -> list[ast.stmt] | None:
        """``[fn]`` with only the statement of its body the edit touched parsed again (one of
        the hundreds of statements of a long method, or of a function nested in it, any
        depth), when the edit lies inside that statement's region: the lines from its first
        one up to the next statement of the body (the function's last: up to ``end_line``).
        The region is parsed under a stand-in ``if 1:`` (``ast.parse`` accepts ``return``,
        ``yield`` and ``await`` there as it does in the function: it only parses)."""
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or depth > 16:
            return None
        body = fn.body
        found = _edited_statement(fn, first, old_last, delta, end_line)
        if found is None:
            return None
        k, start, end = found
        stmts = self._in_body(body[k], first, old_last, delta, lines, end, filename, depth + 1,
                              (*outer, body[k].col_offset))
        if stmts is None:
            stmts = self._block(body, start, end, lines, filename, "if 1:", outer)
            if stmts is not None and not delta and _same(body[k:k + 1], stmts):
                stmts = [body[k]]
        if stmts is None:
            return None
        if len(stmts) == 1 and stmts[0] is body[k]:
            return [fn]
        rest = body[k + 1:]
        if delta:
            _shift(rest, delta, self._positioned)
        new = copy.copy(fn)  # (a new object: what was derived from the old one goes)
        new.body = [*body[:k], *stmts, *rest]
        last = new.body[-1]
        new.end_lineno, new.end_col_offset = last.end_lineno, last.end_col_offset
        return [new]

    def _nested_error(self, start: int, end: int | None, col: int, outer: tuple[int, ...],
                      lines: list[str], filename: str) -> None:
        """Raise the file's syntax error when the edited block region (lines ``start`` to
        ``end``, its statements at column ``col``, inside blocks whose headers are at the
        columns ``outer``) does not parse alone, without parsing the text before it again (most
        of a module that is one large class).

        The text from the region on is parsed under stand-in ``with 1:`` headers at the columns
        of the blocks around it: its tokens are the file's, and the tokenizer starts them with
        the same indentation stack, at the start of a statement (the text before is unchanged
        and parsed), so the parser fails where and how the whole file's parse does. First only
        to the end of the edited top-level statement: when that parses, or fails only at its
        end (the region joined the statements after it: a decorator put back above a method),
        the file may well parse, and the caller goes on as if this had not been tried; an error
        before that end is confirmed by the text to the end of the file (CPython's parser
        makes a second pass to word its error, and on a generic one tokenizes the rest of the
        text for a tokenizer error, which comes first), and raised. (Where the statement's end
        is nearer the file's end than its start, straight to the end of the file.)

        Not tried where the doubt is too large: a tab or form feed in the file (the tokenizer
        checks tabs against the enclosing blocks' own indentation), a first line not at the
        block's column or continuing the statement before it (``else:``), a null byte; nor when
        the region holds no code (its statement commented out: the block around it parses
        without it)."""
        text = self._new
        if "\t" in text or "\f" in text or "\0" in text or "barry_as_FLUFL" in text \
                or len(outer) >= start:
            return
        for i in range(start - 1, len(lines)):
            line = lines[i]
            code = line.lstrip(" ")
            if not code or code.startswith("#"):
                continue
            if (end is not None and i >= end) or len(line) - len(code) != col \
                    or _CONTINUATION.match(code):
                return
            break
        else:
            return  # (no code from the region to the end: nothing of the region is left)
        # (the blocks around are a class and functions, which take no `else:`/`except:`: nor
        # does `with`, where an `if 1:` took a dedented `else:` the file rejects)
        head = "\n" * (start - 1 - len(outer)) + "".join(" " * c + "with 1:\n" for c in outer)
        span = self._span
        if span is not None and len(lines) - span > span - start:  # (else the end is near)
            try:
                parse(head + "\n".join(lines[start - 1:span]), filename)
            except SyntaxError as exc:
                if exc.lineno is None or exc.lineno >= span:
                    return
            except ValueError:
                return
            else:
                return
        try:
            parse(head + "\n".join(lines[start - 1:]), filename)
        except ValueError:
            return
        # (a SyntaxError goes to the caller: ``parse`` keeps the last version that parsed)

    def _from_region(self, tree: ast.Module, i: int, start_line: int, lines: list[str],
                     text: str, s: int, filename: str) -> ast.Module:
        """The tree when the edited region does not parse alone but starts a statement of its
        own (``_starts_alone``): the text from its first line to the end parsed as a whole. The
        statements before it are complete and nothing in it can join them, so the file parses
        exactly when this does, and fails with the same error (the parser reaches no further
        than the first token of the region while it reads the statements before it). Raises
        that SyntaxError, as a full parse would."""
        part = parse("\n" * (start_line - 1) + "\n".join(lines[start_line - 1:]), filename)
        self.full, self.reparsed = False, len(part.body)
        self.changed = None  # (every statement from the region on is a new object)
        return ast.Module(body=[*tree.body[:i], *part.body], type_ignores=[])
