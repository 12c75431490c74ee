"""The value a name holds at a point of the code: the assignment that certainly ran last.

``Scope.bindings`` knows every value a name is ever given; a name rebound in the same function
(``abstract = nn.unbox(abstract)``) has two. :func:`value_at` answers for one use: in the use's
own scope it takes the last assignment before the use that *dominates* it (it sits in the same
statement list as the use or as one of the statements around it, so it ran on every path to
the use); a name of an enclosing scope counts only when it is bound exactly once there.
Anything else (a parameter, a loop target, ``+=``, a branch that may not have run) is unknown.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from shardlint.semantics.file.facts import FileFacts, Opaque, Scope

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_MAX_DEPTH = 8


@dataclass(frozen=True)
class Assignment:
    stmt: ast.stmt
    value: ast.expr | None  # None: a value shardlint cannot see (loop target, `+=`, unpacking)


@dataclass
class _ScopeIndex:
    """Per scope, built once: each statement's parent statement list, and who binds what."""

    lists: dict[int, tuple[list[ast.stmt], int, ast.AST]]  # id(stmt) -> (list, index, owner)
    assigned: dict[str, list[Assignment]]


def _index(facts: FileFacts, scope: Scope) -> _ScopeIndex:
    key = f"bindings:{id(scope.node)}"
    found = facts.derived.get(key)
    if isinstance(found, _ScopeIndex):
        return found
    lists: dict[int, tuple[list[ast.stmt], int, ast.AST]] = {}
    assigned: dict[str, list[Assignment]] = {}
    # (the facts saw every `:=` of a function's body: a function without one needs no walk of
    # each statement's expressions for them)
    walrus = scope.kind != "function" or any(
        type(a.node) is ast.NamedExpr for values in scope.assigned.values() for a in values)
    todo: list[ast.AST] = [scope.node]
    while todo:
        node = todo.pop()
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, name, None)
            if not isinstance(block, list):
                continue
            for i, s in enumerate(block):
                if isinstance(s, ast.stmt):
                    lists[id(s)] = (block, i, node)
                    _record(s, assigned, walrus)
                if isinstance(s, (ast.stmt, ast.excepthandler, ast.match_case)) \
                        and not isinstance(s, _NESTED):
                    todo.append(s)
    out = _ScopeIndex(lists, assigned)
    facts.derived[key] = out
    return out


def _record(stmt: ast.stmt, assigned: dict[str, list[Assignment]], walrus: bool = True) -> None:
    def target(t: ast.expr, value: ast.expr | None) -> None:
        if isinstance(t, ast.Name):
            assigned.setdefault(t.id, []).append(Assignment(stmt, value))
        elif isinstance(t, (ast.Tuple, ast.List)):
            same = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(t.elts) \
                and not any(isinstance(e, ast.Starred) for e in t.elts)
            for i, e in enumerate(t.elts):
                target(e.value if isinstance(e, ast.Starred) else e,
                       value.elts[i] if same else None)  # type: ignore[union-attr]
        elif isinstance(t, ast.Starred):
            target(t.value, None)

    if isinstance(stmt, ast.Assign):
        for t in stmt.targets:
            target(t, stmt.value)
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        target(stmt.target, stmt.value)
    elif isinstance(stmt, (ast.AugAssign, ast.For, ast.AsyncFor)):
        target(stmt.target, None)
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        for item in stmt.items:
            if item.optional_vars is not None:
                target(item.optional_vars, None)
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        for alias in stmt.names:
            assigned.setdefault(alias.asname or alias.name.split(".", 1)[0], []).append(
                Assignment(stmt, None))
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        assigned.setdefault(stmt.name, []).append(Assignment(stmt, None))
    # Walrus targets in the statement's own expressions bind too (rare: unknown values). Nested
    # statements are recorded on their own, and nested scopes bind in their own scope.
    if not walrus or isinstance(stmt, _NESTED):
        return
    todo = [c for c in ast.iter_child_nodes(stmt) if not isinstance(c, ast.stmt)
            and not isinstance(c, (ast.excepthandler, ast.match_case))]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.NamedExpr):
            assigned.setdefault(n.target.id, []).append(Assignment(stmt, None))
        elif not isinstance(n, (ast.Lambda, ast.stmt)):
            todo.extend(ast.iter_child_nodes(n))


def _pos(node: ast.AST) -> tuple[int, int]:
    decorators = getattr(node, "decorator_list", None)
    if decorators:  # a decorated definition starts at its first decorator
        return min((d.lineno, d.col_offset) for d in decorators)
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def _dominates(index: _ScopeIndex, stmt: ast.stmt, use_stmt: ast.stmt) -> bool:
    """``stmt`` sits before ``use_stmt`` (or a statement around it) in the same block."""
    where = index.lists.get(id(stmt))
    if where is None:
        return False
    block, i, _ = where
    current: ast.AST | None = use_stmt
    while current is not None:
        found = index.lists.get(id(current))
        if found is None:
            return False
        cblock, ci, owner = found
        if cblock is block:
            return i < ci
        current = owner if isinstance(owner, ast.stmt) else None
    return False


def statement_of(facts: FileFacts, scope: Scope, node: ast.AST) -> ast.stmt | None:
    """The innermost statement of ``scope``'s own body that holds ``node``."""
    index = _index(facts, scope)
    start = _pos(node)
    end = (getattr(node, "end_lineno", None) or start[0], getattr(node, "end_col_offset", None) or 0)
    best: ast.stmt | None = None
    for block, i, _ in index.lists.values():
        s = block[i]
        s_end = (s.end_lineno or s.lineno, s.end_col_offset or 0)
        if _pos(s) <= start and end <= s_end and (best is None or _pos(s) >= _pos(best)):
            best = s
    return best


def enclosing(facts: FileFacts, scope: Scope, stmt: ast.stmt) -> list[ast.stmt]:
    """The compound statements of ``scope`` around ``stmt``, innermost first."""
    index = _index(facts, scope)
    out: list[ast.stmt] = []
    current: ast.AST | None = stmt
    while current is not None:
        found = index.lists.get(id(current))
        if found is None:
            break
        owner = found[2]
        if not isinstance(owner, ast.stmt) or isinstance(owner, _NESTED):
            break
        out.append(owner)
        current = owner
    return out


def value_at(facts: FileFacts, name: str, scope: Scope,
             use: ast.AST, use_stmt: ast.stmt | None = None) -> tuple[ast.expr, Scope] | None:
    """The expression ``name`` certainly holds at ``use`` (in ``scope``), and its scope."""
    found = scope.lookup(name)
    if found is None:
        return None
    owner, values = found
    if owner is not scope:
        if len(values) == 1 and isinstance(values[0], ast.expr) and \
                not isinstance(values[0], Opaque):
            return values[0], owner
        return None
    index = _index(facts, scope)
    if use_stmt is None:
        use_stmt = statement_of(facts, scope, use)
        if use_stmt is None:
            return None
    here = _pos(use)
    before = [a for a in index.assigned.get(name, []) if _pos(a.stmt) < here
              and a.stmt is not use_stmt]
    if not before:
        return None
    last = max(before, key=lambda a: _pos(a.stmt))
    if last.value is None or not _dominates(index, last.stmt, use_stmt):
        return None
    return last.value, scope


def follow(facts: FileFacts, node: ast.expr | None, scope: Scope,
           use: ast.AST | None = None) -> tuple[ast.expr | None, Scope]:
    """Follow names to the values they certainly hold at ``use`` (default: where the name is).

    Returns ``(None, scope)`` when a name's value is unknown."""
    for _ in range(_MAX_DEPTH):
        if not isinstance(node, ast.Name):
            break
        found = value_at(facts, node.id, scope, use if use is not None else node)
        if found is None:
            return None, scope
        node, scope = found
        use = node  # the next name is read where this value is written
    return node, scope
