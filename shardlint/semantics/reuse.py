"""Per-call results of analyses, carried to the next build of the same file.

The language server analyses the same file on every keystroke, and most keystrokes land inside
one function body. The facts replay (``replay.py``) already hands back the very same ``CallSite``
and ``Scope`` objects for the top-level statements an edit did not touch. An analysis that maps
each call (or scope) to a result which depends only on

- the call's own top-level statement (its nodes, its local scopes), and
- the module's *environment*: the import map, the module-level bindings and meshes,

can therefore reuse last build's result for a call it has seen, as long as the environment is
the same. :func:`environment` is that environment, compared by identity for values (a module
constant statement visited again has new nodes: every result is recomputed) and by shape for
``def``/``class`` bindings (name, arguments, decorators, bases; never the body, so typing in a
function body keeps the results of every other statement).

What such a result must not do: depend on the body of a function or class of *another*
statement, or on the project index. Line numbers in a result go stale when the parser shifts a
kept statement; store nodes, or the line a result was made at (see ``summary.py``).

Outside the language server (no previous build) every result is computed, as before.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from shardlint.semantics.facts import CallSite, FileFacts

T = TypeVar("T")
_MISSING = object()
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(eq=False)
class Reuse:
    """The per-item results of one build, and those of the previous build it may reuse."""

    signature: tuple
    statements: list  # the StatementLog of each top-level statement, in order (replay.py)
    shapes: dict[ast.stmt, tuple] = field(default_factory=dict)  # def/class node -> its shape
    results: dict[str, dict] = field(default_factory=dict)  # analysis -> {item: result}
    carried: dict[str, dict] = field(default_factory=dict)  # the previous build's, when valid


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


def start(facts: FileFacts, statements: list, previous: Reuse | None) -> Reuse:
    """The reuse state of a build whose facts are complete: ``statements``, the log of each
    top-level statement (their calls, in order, are the file's); ``previous`` from the last
    build."""
    old_shapes = previous.shapes if previous is not None else {}
    shapes: dict[ast.stmt, tuple] = {}
    root = facts.module_scope
    bindings = []
    for name, values in root.bindings.items():
        key = []
        for v in values:
            if isinstance(v, _DEFS):
                s = old_shapes.get(v) or _shape(v)
                shapes[v] = s
                key.append(s)
            else:
                key.append(v)  # compared by identity
        bindings.append((name, tuple(key)))
    signature = (tuple(facts.imports.names.items()), facts.imports.star, tuple(bindings),
                 tuple(m for m in facts.meshes if m.scope is root))
    reuse = Reuse(signature, statements, shapes)
    if previous is not None and previous.signature == signature:
        reuse.carried = previous.results
    return reuse


def each(facts: FileFacts, name: str, items: Iterable[Hashable], fn: Callable[..., T]) -> list[T]:
    """``[fn(item) for item in items]``, reusing the previous build's result for an item it had
    (see the module docstring for what ``fn`` may depend on)."""
    reuse: Reuse | None = facts.reuse  # type: ignore[assignment]
    if reuse is None:
        return [fn(i) for i in items]
    old = reuse.results.get(name)
    if old is None:
        old = reuse.carried.get(name, {})
    new: dict = {}
    out = []
    get = old.get
    for i in items:
        r = get(i, _MISSING)
        if r is _MISSING:
            r = fn(i)
        new[i] = r
        out.append(r)
    reuse.results[name] = new
    return out


@dataclass(eq=False)
class WholeFile:
    """The file as one statement, where no build came before (the command line): what
    :func:`each_statement` hands ``fn`` there."""

    calls: list
    scopes: list  # (qualname, Scope) of every function and class
    node: ast.stmt | None = None


def each_statement(facts: FileFacts, name: str, fn: Callable[[Any], T],
                   stale: Callable[[Any, T], bool] | None = None) -> list[T]:
    """``fn`` of each top-level statement, in order, reusing the previous build's result for a
    statement the facts replayed (it brings back the very same calls and scopes).

    ``fn`` gets the statement's ``StatementLog`` (``calls``, ``scopes`` and ``node`` are what it
    may read of it; see the module docstring for the rest), or a :class:`WholeFile` outside the
    language server. ``stale(log, result)`` says when a carried result must be made again (it
    holds line numbers and the parser moved the statement).
    """
    reuse: Reuse | None = facts.reuse  # type: ignore[assignment]
    if reuse is None:
        scopes = [(q, s) for q, s in facts.scopes.items() if q]
        return [fn(WholeFile(facts.calls, scopes))]
    old = reuse.results.get(name)
    if old is None:
        old = reuse.carried.get(name, {})
    new: dict = {}
    out: list[T] = []
    get = old.get
    for log in reuse.statements:
        r = get(log, _MISSING)
        if r is _MISSING or (stale is not None and stale(log, r)):
            r = fn(log)
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
