"""Per-call results of analyses, carried to the next build of the same file.

The language server analyses the same file on every keystroke, and most keystrokes land inside
one function body. The facts replay (``replay.py``) already hands back the very same ``CallSite``
and ``Scope`` objects for the top-level statements an edit did not touch. An analysis that maps
each statement (or each call) to a result which depends only on

- the statement's own nodes and local scopes, and
- the module's *environment* as seen through the names the statement mentions: the import map,
  the module-level bindings of those names and the meshes bound to them,

can therefore reuse last build's result for a statement it has seen, unless one of the names it
mentions is bound differently now. A binding is compared by identity for values (a module
constant statement visited again has new nodes) and by shape for ``def``/``class`` (name,
arguments, decorators, bases; never the body, so typing in a function body keeps the results of
every other statement). A name whose value mentions a changed name has changed too (a statement
may follow ``AXES = (EMBED, "mlp")`` to ``EMBED``). A changed import map changes everything.

What such a result must not do: depend on the body of a function or class of *another*
statement, on a module-level name the statement does not mention (other than through a binding
that mentions it), or on the project index. Line numbers in a result go stale when the parser
shifts a kept statement; store nodes, or the line a result was made at (see ``summary.py``).

Outside the language server (no previous build) every result is computed, as before.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from shardlint.syntax import nodes as walk_nodes

if TYPE_CHECKING:
    from shardlint.semantics.facts import CallSite, FileFacts

T = TypeVar("T")
_MISSING = object()
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(eq=False)
class Reuse:
    """The per-item results of one build, and those of the previous build it may reuse."""

    imports: tuple
    names: dict[str, tuple]  # module-level name -> what its bindings are (see the docstring)
    statements: list  # the StatementLog of each top-level statement, in order (replay.py)
    shapes: dict[ast.stmt, tuple] = field(default_factory=dict)  # def/class node -> its shape
    mentioned: dict[ast.AST, frozenset[str]] = field(default_factory=dict)  # by a binding value
    results: dict[str, dict] = field(default_factory=dict)  # analysis -> {item: result}
    carried: dict[str, dict] = field(default_factory=dict)  # the previous build's
    # Module-level names bound differently than in the previous build (with the names whose
    # values mention them); None: everything changed (no previous build, other imports).
    changed: frozenset[str] | None = None
    # The lines of the edit since the previous build, as the incremental parser saw it
    # (first, last, lines added); None: not known (summary.py then reuses no class member).
    edited: tuple[int, int, int] | None = None

    def valid(self, log) -> bool:
        """Whether the previous build's results for a statement still hold."""
        changed = self.changed
        if not changed:
            return changed is not None
        names = log.mentions
        if names is None:
            names = log.mentions = mentions(log.node)
        return names.isdisjoint(changed)


def mentions(node: ast.AST | None) -> frozenset[str]:
    """The names a statement or expression mentions (``jax`` for ``jax.jit``)."""
    if node is None:
        return frozenset()
    return frozenset(n.id for n in walk_nodes(node) if type(n) is ast.Name)


def _dump(x) -> object:
    if x is None:
        return None
    if isinstance(x, list):
        return tuple(ast.dump(e) for e in x)
    return ast.dump(x)


def _shape(node: ast.stmt) -> tuple:
    """What other statements may read of a ``def``/``class``: everything but its body."""
    if isinstance(node, ast.ClassDef):
        return ("class", node.name, _dump(node.bases), _dump(node.keywords),
                _dump(node.decorator_list))
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    return (type(node).__name__, node.name, _dump(node.args), _dump(node.returns),
            _dump(node.decorator_list))


def _binding_mentions(node: ast.AST) -> frozenset[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        parts: list = [*node.decorator_list, node.args, node.returns]
    elif isinstance(node, ast.ClassDef):
        parts = [*node.decorator_list, *node.bases, *node.keywords]
    else:
        return mentions(node)
    return frozenset().union(*(mentions(p) for p in parts))


def start(facts: FileFacts, statements: list, previous: Reuse | None) -> Reuse:
    """The reuse state of a build whose facts are complete: ``statements``, the log of each
    top-level statement (their calls, in order, are the file's); ``previous`` from the last
    build."""
    old_shapes = previous.shapes if previous is not None else {}
    shapes: dict[ast.stmt, tuple] = {}
    root = facts.module_scope
    names: dict[str, tuple] = {}
    for name, values in root.bindings.items():
        key: list[object] = []
        for v in values:
            if isinstance(v, _DEFS):
                s = old_shapes.get(v) or _shape(v)
                shapes[v] = s
                key.append(s)
            else:
                key.append(v)  # compared by identity
        names[name] = tuple(key)
    for m in facts.meshes:
        if m.scope is root and m.name is not None:
            names[m.name] = (*names.get(m.name, ()), m)
    imports = (tuple(facts.imports.names.items()), facts.imports.star)
    reuse = Reuse(imports, names, statements, shapes)
    if previous is None or previous.imports != imports:
        return reuse
    reuse.carried = previous.results
    old = previous.names
    if old == names:
        reuse.changed = frozenset()
        reuse.mentioned = previous.mentioned
        return reuse
    changed = {n for n in names.keys() | old.keys() if names.get(n) != old.get(n)}
    # A name bound to a value that mentions a changed name reads differently too.
    known = previous.mentioned
    mentioned: dict[ast.AST, frozenset[str]] = {}
    readers: dict[str, set[str]] = {}
    for name, values in root.bindings.items():
        for v in values:
            used = known.get(v)
            if used is None:
                used = _binding_mentions(v)
            mentioned[v] = used
            for u in used:
                readers.setdefault(u, set()).add(name)
    todo = list(changed)
    while todo:
        for reader in readers.get(todo.pop(), ()):
            if reader not in changed:
                changed.add(reader)
                todo.append(reader)
    reuse.changed = frozenset(changed)
    reuse.mentioned = mentioned
    return reuse


@dataclass(eq=False)
class WholeFile:
    """The file as one statement, where no build came before (the command line): what
    :func:`each_statement` hands ``fn`` there."""

    calls: list
    scopes: list  # (qualname, Scope) of every function and class
    node: ast.stmt | None = None


def each_statement(facts: FileFacts, name: str, fn: Callable[[Any], T],
                   refresh: Callable[[Any, T], T] | None = None) -> list[T]:
    """``fn`` of each top-level statement, in order, reusing the previous build's result for a
    statement the facts replayed (it brings back the very same calls and scopes).

    ``fn`` gets the statement's ``StatementLog`` (``calls``, ``scopes`` and ``node`` are what it
    may read of it; see the module docstring for the rest), or a :class:`WholeFile` outside the
    language server. ``refresh(log, result)`` gives a carried result for the statement as it is
    now (one that holds line numbers, when the parser moved the statement).
    """
    reuse: Reuse | None = facts.reuse  # type: ignore[assignment]
    if reuse is None:
        scopes = [(q, s) for q, s in facts.scopes.items() if q]
        return [fn(WholeFile(facts.calls, scopes))]
    current = reuse.results.get(name)
    old = current if current is not None else reuse.carried.get(name, {})
    new: dict = {}
    out: list[T] = []
    get = old.get
    for log in reuse.statements:
        r = get(log, _MISSING)
        if r is _MISSING or (current is None and not reuse.valid(log)):
            r = fn(log)
        elif refresh is not None:
            r = refresh(log, r)
        new[log] = r
        out.append(r)
    reuse.results[name] = new
    return out


def each_call(facts: FileFacts, name: str,
              fn: Callable[[CallSite], T | None]) -> list[tuple[CallSite, T]]:
    """``(c, fn(c))`` for the file's calls, in order, where ``fn(c)`` is something (not None,
    not empty); reused per top-level statement (see :func:`each_statement`)."""
    if facts.reuse is None:
        return [(c, r) for c in facts.calls if (r := fn(c))]
    out: list[tuple[CallSite, T]] = []
    for part in each_statement(facts, "calls:" + name,
                               lambda log: [(c, r) for c in log.calls if (r := fn(c))]):
        if part:
            out.extend(part)
    return out
