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

**Parts.** A top-level class is one statement of thousands of lines, and most keystrokes land in
one statement of one of its methods. An analysis that declares itself *local* (its result for a
piece of code depends on that code, on the import map and on the values of the names it
mentions, looked up through the scopes around it: nothing of a sibling method, nothing of the
function's other statements but through names) reuses its results per part of a statement that
was visited again (``replay.py``: a member of a class, a statement of a function's body). A part
the facts replayed keeps its results unless a name it mentions is bound differently in the
module, in any function around it (compared as for the module: the same values, a ``def`` by
its shape) or a value of a name there mentions one that is; or the class around it binds
anything differently. Anything else is asked again.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from shardlint.syntax import nodes as walk_nodes


# What this module reads of a file's facts. ``facts.py`` (which defines ``FileFacts`` and
# ``CallSite``) imports this module, so this module names only the parts it reads, not the
# classes: the dependency points one way.
class CallSite(Protocol):
    node: ast.Call


class FileFacts(Protocol):
    imports: Any  # names.ImportMap
    meshes: list
    module_scope: Any  # facts.Scope
    scopes: dict[str, Any]
    calls: list[Any]  # [facts.CallSite]
    reuse: object | None

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
    # Class and function scopes the facts visited again in this build (their objects reused),
    # with what they bound in the previous one; and what the parts test made of them.
    revisited: dict = field(default_factory=dict)
    # The logs with parts that the facts recorded in this build (a statement visited again):
    # the ones worth asking part by part (a replayed log that has no results of its own is
    # asked whole).
    fresh: set = field(default_factory=set)
    old: Reuse | None = None  # (the previous build's, while this one starts: its shapes)
    _local: dict = field(default_factory=dict)  # function scope -> names bound differently
    _text_local: dict = field(default_factory=dict)  # ... where a value of the same text is same
    _classes: dict = field(default_factory=dict)  # class scope -> bound differently at all
    _parts: dict = field(default_factory=dict)  # part -> whether its results hold
    def valid(self, log) -> bool:
        """Whether the previous build's results for a statement still hold."""
        changed = self.changed
        if not changed:
            return changed is not None
        return _mentioned(log).isdisjoint(changed)

    def part_valid(self, log) -> bool:
        """Whether the previous build's results for a part (a member's or a body statement's
        log that the facts replayed) still hold: see the module docstring. (Once per part and
        build: every local analysis asks.)"""
        found = self._parts.get(log)
        if found is None:
            found = self._parts[log] = self._part_valid(log)
        return found

    def _part_valid(self, log) -> bool:
        changed = self.changed
        if changed is None:
            return False
        # (what the part mentions only where some name is bound differently: a method's
        # member is thousands of nodes, and typing in one statement changes no other name)
        names = None
        if changed:
            names = _mentioned(log)
            if not names.isdisjoint(changed):
                return False
        s = log.owner
        while s is not None and s.kind == "function":
            local = self._local_changed(s)
            if local:
                if names is None:
                    names = _mentioned(log)
                if not names.isdisjoint(local):
                    return False
            s = s.parent
        return s is None or s.kind != "class" or not self._class_changed(s)

    def local_changed(self, scope) -> frozenset[str]:
        """The names a function scope visited again binds differently than in the previous
        build, with those whose values mention one, here or in a function around it (empty
        for a function not visited again)."""
        return self._local_changed(scope)

    def _local_changed(self, scope, text: bool = False) -> frozenset[str]:
        """The names a function scope visited again binds differently than in the previous
        build, and those whose values mention one (or a name bound differently in a function
        around it). ``text``: a value of the same text counts as the same (a statement the
        parser parsed again with the one typed next to it), wherever it is now."""
        memo = self._text_local if text else self._local
        found = memo.get(scope)
        if found is not None:
            return found
        before = self.revisited.get(scope)
        if before is None:  # (not visited again: all it binds was replayed)
            found = memo[scope] = frozenset()
            return found
        old_bindings, old_assigned, logs, _ = before
        bindings, assigned = scope.bindings, scope.assigned
        changed = {n for n in old_bindings.keys() | bindings.keys()
                   if not self._same(old_bindings.get(n, ()), bindings.get(n, ()), text)}
        same_assigned = _same_text if text else _identical
        changed.update(n for n in old_assigned.keys() | assigned.keys()
                       if not same_assigned(old_assigned.get(n, ()), assigned.get(n, ())))
        outer: set[str] = set()
        s = scope.parent
        while s is not None and s.kind == "function":
            outer |= self._local_changed(s, text)
            s = s.parent
        # (a name this scope binds hides the outer one of that name)
        outer.difference_update(bindings.keys(), assigned.keys())
        # Names bound by a statement whose bound values mention a changed name are changed (all
        # those it binds: `a, b = x, y` reads as one), until nothing more changes. (The
        # parameters, bound by the `def`, mention nothing.)
        if changed or outer:
            seen = changed | outer
            statements = [_binds(log) for log in logs]
            grew = True
            while grew:
                grew = False
                for names, mentioned in statements:
                    if not mentioned.isdisjoint(seen) and not names <= seen:
                        seen |= names
                        grew = True
            changed = seen
        found = memo[scope] = frozenset(changed)
        return found

    def flow_holds(self, scope) -> bool:
        """Whether what a function visited again reads through its names is as in the previous
        build: no name it binds differently (``_local_changed``) is a parameter, or read by
        its header or by any of its statements but those visited again (which bound them). Its
        flow summary then differs only where the statements visited again are, if anything
        there is read (the caller compares what they return, drop and store)."""
        before = self.revisited.get(scope)
        if before is None or self.changed != frozenset():
            return False
        changed = self._local_changed(scope, text=True)
        if not changed:
            return True
        if not changed.isdisjoint(scope.params) \
                or not changed.isdisjoint(_binding_mentions(scope.node)):
            return False
        _, _, logs, recorded = before
        for log in logs:
            if log in recorded:
                continue
            if not _mentioned(log).isdisjoint(changed):
                return False
        return True

    def _class_changed(self, scope) -> bool:
        """Whether a class visited again binds, annotates or defines anything differently."""
        found = self._classes.get(scope)
        if found is None:
            before = self.revisited.get(scope)
            if before is None:
                found = False
            else:
                old_bindings, old_annotations, old_children = before
                found = old_children != set(scope.children) or any(
                    not self._same(old_bindings.get(n, ()), scope.bindings.get(n, ()))
                    for n in old_bindings.keys() | scope.bindings.keys()) or any(
                    old_annotations.get(n) is not scope.annotations.get(n)
                    for n in old_annotations.keys() | scope.annotations.keys())
            self._classes[scope] = found
        return found

    def _same(self, old, new, text: bool = False) -> bool:
        """Two lists of values bound to a name: the same nodes, a ``def`` or ``class`` by its
        shape (its body is its own); with ``text``, any other value by its text."""
        if len(old) != len(new):
            return False
        for a, b in zip(old, new):
            if a is b:
                continue
            if isinstance(a, _DEFS) and isinstance(b, _DEFS):
                if self._shape(a) != self._shape(b):
                    return False
            elif not (text and type(a) is type(b) and ast.dump(a) == ast.dump(b)):
                return False
        return True

    def _shape(self, node: ast.stmt) -> tuple:
        found = self.shapes.get(node)
        if found is None:
            found = self.old.shapes.get(node) if self.old is not None else None
            self.shapes[node] = found = found or _shape(node)
        return found


def _binds(log) -> tuple[frozenset[str], frozenset[str]]:
    """The names a body statement binds in its function, and the names its bound values
    mention (once per log: a replayed log is the same object)."""
    found = log.binds
    if found is None:
        names: set[str] = set()
        mentioned: set[str] = set()
        for name, value in log.bindings:
            names.add(name)
            mentioned |= _binding_mentions(value)
        for name, a in log.assigned:
            names.add(name)
            if a.value is not None:
                mentioned |= _binding_mentions(a.value)
        found = log.binds = (frozenset(names), frozenset(mentioned))
    return found


def _identical(old, new) -> bool:
    return len(old) == len(new) and all(a is b for a, b in zip(old, new))


def _same_text(old, new) -> bool:
    """Two lists of a name's assignments (``Assigned``): the same, or of the same text."""
    if len(old) != len(new):
        return False
    for a, b in zip(old, new):
        if a is b:
            continue
        if a.index != b.index or type(a.node) is not type(b.node) or (a.value is None) != (
                b.value is None) or (a.value is not None and ast.dump(a.value) != ast.dump(b.value)):
            return False
    return True


def _mentioned(log) -> frozenset[str]:
    """:func:`mentions` of a log's statement, kept on the log."""
    names = log.mentions
    if names is None:
        names = log.mentions = mentions(log.node)
    return names


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


def start(facts: FileFacts, statements: list, previous: Reuse | None,
          revisited: dict | None = None, fresh: set | None = None) -> Reuse:
    """The reuse state of a build whose facts are complete: ``statements``, the log of each
    top-level statement (their calls, in order, are the file's); ``previous`` from the last
    build; ``revisited``: the scopes visited again, with what they bound before."""
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
    reuse = Reuse(imports, names, statements, shapes, revisited=revisited or {},
                  fresh=fresh or set())
    if previous is None or previous.imports != imports:
        return reuse
    previous.old, previous.carried = None, {}  # (the build before it is not needed again)
    reuse.old = previous
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
class Chunk:
    """The calls and scopes of a statement visited again that lie between the logs inside it
    (``replay.py``): a method's decorators, a class's bases. A part of its own, never reused:
    it is made again whenever the statement around it is."""

    calls: list[CallSite]
    scopes: list[tuple[str, Any]]
    node: ast.stmt | None = None


@dataclass(eq=False)
class WholeFile:
    """The file as one statement, where no build came before (the command line): what
    :func:`each_statement` hands ``fn`` there."""

    calls: list
    scopes: list  # (qualname, Scope) of every function and class
    node: ast.stmt | None = None


def each_statement(facts: FileFacts, name: str, fn: Callable[[Any], T],
                   refresh: Callable[[Any, T], T] | None = None, local: bool = False) -> list[T]:
    """``fn`` of each top-level statement, in order, reusing the previous build's result for a
    statement the facts replayed (it brings back the very same calls and scopes).

    ``fn`` gets the statement's ``StatementLog`` (``calls``, ``scopes`` and ``node`` are what it
    may read of it; see the module docstring for the rest), or a :class:`WholeFile` outside the
    language server. ``refresh(log, result)`` gives a carried result for the statement as it is
    now (one that holds line numbers, when the parser moved the statement).

    ``local``: ``fn`` is a local analysis (see *Parts* in the module docstring; ``node`` may be
    None then), and a statement visited again is asked about part by part; the results are
    those of the parts, in order.
    """
    reuse: Reuse | None = facts.reuse  # type: ignore[assignment]
    if reuse is None:
        scopes = [(q, s) for q, s in facts.scopes.items() if q]
        return [fn(WholeFile(facts.calls, scopes))]
    if local:
        return _each_part(reuse, name, fn)
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


def _each_part(reuse: Reuse, name: str, fn: Callable[[Any], T]) -> list[T]:
    """:func:`each_statement` of a local analysis: per part of a statement visited again."""
    current = reuse.results.get(name)
    if current is not None:  # (asked again in the same build: every statement is there)
        out: list[T] = []
        for log in reuse.statements:
            out.extend(current[log])
        return out
    old = reuse.carried.get(name, {})
    new: dict = {}
    reuse.results[name] = new

    def results(log, top: bool) -> list[T]:
        found = old.get(log)
        if found is not None and (reuse.valid(log) if top else reuse.part_valid(log)):
            new[log] = found
            return found
        parts = log.parts
        # Part by part: a statement visited again, when there is something to reuse (a top-level
        # one: its members are worth keeping apart for the next build, even the first time).
        if parts is None or log not in reuse.fresh or not (top or old):
            made = [fn(log)]
        else:
            made = []
            for p in parts:
                if type(p) is Chunk:
                    made.append(fn(p))
                else:
                    made.extend(results(p, False))
        new[log] = made
        return made

    out = []
    for log in reuse.statements:
        out.extend(results(log, True))
    return out


def each_call(facts: FileFacts, name: str, fn: Callable[[CallSite], T | None],
              local: bool = False) -> list[tuple[CallSite, T]]:
    """``(c, fn(c))`` for the file's calls, in order, where ``fn(c)`` is something (not None,
    not empty); reused per top-level statement (see :func:`each_statement`), or per part of one
    where ``fn`` is ``local``."""
    if facts.reuse is None:
        return [(c, r) for c in facts.calls if (r := fn(c))]
    out: list[tuple[CallSite, T]] = []
    for part in each_statement(facts, "calls:" + name,
                               lambda log: [(c, r) for c in log.calls if (r := fn(c))],
                               local=local):
        if part:
            out.extend(part)
    return out
