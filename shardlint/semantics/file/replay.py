"""Facts of a file's unchanged statements, replayed instead of visited again.

The language server builds the facts of the same file on every keystroke, and the incremental
parser hands back the very same node objects for the statements an edit did not touch. Visiting a
statement is a function of the statement and of what it reads of the state the statements before
it left: the import map, and -- through three lookups -- the bindings, scopes and meshes around
it. So the builder records, per statement, those reads with what they returned, and what the
visit wrote (records appended, bindings, scopes, references, roles). In the next build a
statement whose node is the same and whose reads still return the same things is replayed from
its record; any other statement is visited (and recorded) again. A read that the statement's own
earlier writes answered fails the check and costs a visit, never a wrong replay.

Three granularities, one discipline (a log per statement, ``_Log``):

- a top-level statement (``StatementLog``), written into the module scope;
- a member of a top-level class (``MemberLog``): a class of thousands of lines is one top-level
  statement, and an edit inside one method should not visit the others again;
- a statement of a function's body (``BodyLog``): a method of a thousand lines is one member,
  and an edit inside one of its statements should not visit the others (nor the functions
  nested in them) again.

The scope a log writes into is reused by the next build (the module's, a top-level class's, a
function's whose body statements are replayed), emptied and filled again in statement order, so
what the replayed records point at stays valid. While a statement is recorded, every log around
it (its member's, its top-level statement's, the body statements' of the functions it is nested
in) is open (``FactsBuilder.active``): reads, scopes and roles go to all of them, so a log that
is replayed later brings back the reads of everything inside it.

A log that was recorded also knows its *parts* in order: the logs of the members or body
statements inside it (recorded or replayed) and, between them, its own calls and scopes
(``Chunk``: a method's decorators, a class's bases). An analysis whose result for a piece of
code depends only on that code and the names it mentions reuses its results per part
(``reuse.each_statement``): typing into a method of a class of thousands of lines asks again
about the edited statement, not about the class.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Protocol

from shardlint.semantics.file.facts import (
    Assigned,
    CallSite,
    JitSite,
    MeshBinding,
    Reference,
    Scope,
    WithItem,
)
from shardlint.semantics.file.reuse import Chunk, Reuse



class FactsBuilder(Protocol):
    """What the replay uses of the one pass that builds a file's facts (``visitor.FactsBuilder``,
    which imports this module: the replay names only the parts it drives)."""

    facts: Any  # facts.FileFacts
    root: Any  # ast.Module
    scope: Scope
    log: StatementLog | None
    member_log: MemberLog | None
    active: list
    fresh: set

    def visit(self, node: ast.AST) -> None: ...

    def imports_snapshot(self) -> dict[str, str]: ...

    def imports_are(self, before: dict[str, str]) -> bool: ...

    def imports_changed(self) -> None: ...

    def function_named_from(self, target: ast.Name, scope: Scope) -> Scope | None: ...

    def query_function(self, name: str, depth: int) -> tuple[int, bool]: ...


@dataclass(eq=False, kw_only=True)
class _Log:
    """What visiting one statement read and wrote into the facts (what the three kinds share)."""

    imports_before: dict[str, str]
    star_before: bool
    node: ast.stmt | None = None  # the statement (moved in place when the parser shifts it)
    mentions: frozenset[str] | None = None  # the names it mentions (reuse.py), when asked
    reads: list[tuple[str, Any, Any, Any]] = field(default_factory=list)  # kind, a, b, result
    calls: list[CallSite] = field(default_factory=list)
    jit_sites: list[JitSite] = field(default_factory=list)
    meshes: list[MeshBinding] = field(default_factory=list)
    with_items: list[WithItem] = field(default_factory=list)
    other_withs: list[WithItem] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)
    scopes: list[tuple[str, Scope]] = field(default_factory=list)  # facts.scopes assignments
    roles: set = field(default_factory=set)
    uses_jax: bool = False
    uses_flax: bool = False
    # What it added to the import map (an import, also one in a function: the map is the
    # module's), and whether it made it star.
    imports_changes: list[tuple[str, str]] = field(default_factory=list)
    star_after: bool = False
    # The logs of the function body statements inside this statement (any depth), carried to
    # the next build with it: an edit there later finds them (FactsMemo.bodies).
    nested: dict[ast.stmt, BodyLog] = field(default_factory=dict)
    # Where each log directly inside it began and ended while it was recorded: (calls, scopes
    # before, calls, scopes after, the log); made into ``parts`` when it is closed.
    marks: list[tuple[int, int, int, int, _Log]] = field(default_factory=list)
    parts: list[_Log | Chunk] | None = None  # None: no log inside it (it is one part)


@dataclass(eq=False, kw_only=True)
class StatementLog(_Log):
    """A top-level statement."""

    children: list[tuple[str, Scope]] = field(default_factory=list)  # module scope's children
    bindings: list[tuple[str, ast.expr]] = field(default_factory=list)  # module-level binds
    root_references: set[str] = field(default_factory=set)
    root_self_calls: set[str] = field(default_factory=set)


@dataclass(eq=False, kw_only=True)
class MemberLog(_Log):
    """A member of a top-level class (a method, a class attribute). The class's Scope object is
    reused by the next build (as the module's is)."""

    owner: Scope  # the class scope it was visited in
    bindings: list[tuple[str, Any]] = field(default_factory=list)  # into the class scope
    annotations: list[tuple[str, Any]] = field(default_factory=list)
    children: list[tuple[str, Scope]] = field(default_factory=list)
    class_references: set[str] = field(default_factory=set)
    class_self_calls: set[str] = field(default_factory=set)


@dataclass(eq=False, kw_only=True)
class BodyLog(_Log):
    """A statement of a function's body, and what it wrote into the function's scope (in
    order: a fresh visit appends in statement order, and so does the replay)."""

    owner: Scope  # the function scope it was visited in
    bindings: list[tuple[str, Any]] = field(default_factory=list)
    assigned: list[tuple[str, Assigned]] = field(default_factory=list)
    stores: list[tuple[ast.expr, ast.stmt]] = field(default_factory=list)
    returns: list[ast.expr] = field(default_factory=list)
    expr_calls: list[ast.Call] = field(default_factory=list)
    scope_references: set[str] = field(default_factory=set)
    scope_self_calls: set[str] = field(default_factory=set)
    children: list[tuple[str, Scope]] = field(default_factory=list)
    # The names it binds and those its bound values mention (reuse.py, when asked).
    binds: tuple[frozenset[str], frozenset[str]] | None = None
    # The contexts it was visited under (a guard's early return above it sets them).
    ctx: int = 0


@dataclass(eq=False)
class FactsMemo:
    """The statement logs of one build of one file, for the next build of that file."""

    key: tuple  # (module, is_package, wrappers): a memo of another configuration is not used
    root: Scope
    statements: dict[ast.stmt, StatementLog] = field(default_factory=dict)
    reuse: Reuse | None = None  # per-call results of the analyses (reuse.py)
    # The members of top-level classes (by node: the incremental parser keeps the node of an
    # untouched method), for a class statement visited again.
    members: dict[ast.stmt, MemberLog] = field(default_factory=dict)
    # The statements of function bodies (by node), for a function visited again.
    bodies: dict[ast.stmt, BodyLog] = field(default_factory=dict)


def reset(root: Scope, tree: ast.Module) -> Scope:
    root.node = tree
    root.bindings = {}
    root.references = set()
    root.self_calls = set()
    root.children = {}
    return root


def reset_function(scope: Scope, node: ast.AST) -> Scope:
    """A function's scope object emptied for its next visit (its replayed body statements
    point at it)."""
    scope.node = node
    scope.params, scope.annotations, scope.bindings = [], {}, {}
    scope.bases, scope.decorators = [], []
    scope.references, scope.self_calls, scope.children = set(), set(), {}
    scope.assigned, scope.returns, scope.expr_calls, scope.stores = {}, [], [], []
    return scope


def _open(b: FactsBuilder, log: _Log) -> tuple[int, ...]:
    b.active.append(log)
    return _lengths(b.facts)


def _close(b: FactsBuilder, log: _Log, lengths: tuple[int, ...]) -> None:
    b.active.pop()
    f = b.facts
    _take(f, log, lengths)
    before = log.imports_before
    if b.imports_snapshot() is not before:  # (only an import makes a new snapshot)
        log.imports_changes = [(k, v) for k, v in f.imports.names.items() if before.get(k) != v]
        log.star_after = f.imports.star and not log.star_before
    if log.marks:
        _parts(b.facts.calls, log, lengths[0])
        b.fresh.add(log)


def _parts(calls: list[CallSite], log: _Log, start: int) -> None:
    """A recorded log's parts (see the module docstring) from its marks."""
    parts: list[_Log | Chunk] = []
    c, s = start, 0
    for c0, s0, c1, s1, inner in log.marks:
        if c0 > c or s0 > s:
            parts.append(Chunk(calls[c:c0], log.scopes[s:s0]))
        parts.append(inner)
        c, s = c1, s1
    if len(calls) > c or len(log.scopes) > s:
        parts.append(Chunk(calls[c:], log.scopes[s:]))
    log.parts = parts
    log.marks = []


def mark(b: FactsBuilder, calls: int, scopes: int, inner: _Log) -> None:
    """A member's or body statement's log, begun when the facts had ``calls`` calls and the log
    around it ``scopes`` scopes, is done (recorded or replayed): one part of that log."""
    outer = b.active[-1]
    outer.marks.append((calls, scopes, len(b.facts.calls), len(outer.scopes), inner))


def record(b: FactsBuilder, stmt: ast.stmt) -> StatementLog:
    """Visit a top-level statement, logging its reads and writes."""
    f = b.facts
    log = StatementLog(imports_before=b.imports_snapshot(), star_before=f.imports.star,
                       node=stmt)
    lengths = _open(b, log)
    b.log = log
    try:
        b.visit(stmt)
    finally:
        b.log = None
        _close(b, log, lengths)
    return log


def still_valid(b: FactsBuilder, log: StatementLog) -> bool:
    """Whether visiting the statement now would read what it read when it was recorded."""
    return _reads_hold(b, log)


def _reads_hold(b: FactsBuilder, log: _Log) -> bool:
    """The import map and every logged lookup give now what they gave when ``log`` was made."""
    f = b.facts
    if f.imports.star != log.star_before or not b.imports_are(log.imports_before):
        return False
    for kind, x, scope, seen in log.reads:
        if kind == "function":
            if b.function_named_from(x, scope) is not seen:
                return False
        elif kind == "mesh":
            if f.mesh_for(x, scope) is not seen:
                return False
        elif kind == "guard":  # (what a function of the file asked in a test answers)
            if b.query_function(x, scope) != seen:
                return False
        elif f.axis_names(x, scope) != seen:
            return False
    return True


def _lengths(f) -> tuple[int, ...]:
    return (len(f.calls), len(f.jit_sites), len(f.meshes), len(f.with_items),
            len(f.references), len(f.other_withs))


def _take(f, log: _Log, lengths: tuple[int, ...]) -> None:
    """The records the visit appended to the facts since ``lengths``, into ``log``."""
    log.calls = f.calls[lengths[0]:]
    log.jit_sites = f.jit_sites[lengths[1]:]
    log.meshes = f.meshes[lengths[2]:]
    log.with_items = f.with_items[lengths[3]:]
    log.references = f.references[lengths[4]:]
    log.other_withs = f.other_withs[lengths[5]:]


def _put(b: FactsBuilder, log: _Log) -> None:
    """A log's records appended to the facts again (and its scopes named), in order; what it
    read and made goes into every log open around it, as a visit would have put it there."""
    f = b.facts
    f.calls.extend(log.calls)
    index = f._call_index
    for c in log.calls:
        index[c.node] = c
    f.jit_sites.extend(log.jit_sites)
    f.meshes.extend(log.meshes)
    f.with_items.extend(log.with_items)
    f.other_withs.extend(log.other_withs)
    f.references.extend(log.references)
    for qual, scope in log.scopes:
        f.scopes[qual] = scope
    f.roles.update(log.roles)
    if log.uses_jax:
        f.uses_jax = True
    if log.uses_flax:
        f.uses_flax = True
    if log.imports_changes or log.star_after:
        b.imports_changed()
        for name, q in log.imports_changes:
            f.imports.names[name] = q
        if log.star_after:
            f.imports.star = True
    for outer in b.active:
        outer.reads.extend(log.reads)
        outer.scopes.extend(log.scopes)
        outer.roles.update(log.roles)
        outer.uses_jax |= log.uses_jax
        outer.uses_flax |= log.uses_flax


def replay(b: FactsBuilder, log: StatementLog) -> None:
    root = b.root
    _put(b, log)
    for name, scope in log.children:
        root.children[name] = scope
    for name, value in log.bindings:
        root.bindings.setdefault(name, []).append(value)
    root.references.update(log.root_references)
    root.self_calls.update(log.root_self_calls)


def record_member(b: FactsBuilder, member: ast.stmt, owner: Scope) -> MemberLog:
    """Visit a member of a top-level class (``b.scope`` is ``owner``), logging what it read and
    wrote."""
    f = b.facts
    log = MemberLog(owner=owner, imports_before=b.imports_snapshot(), star_before=f.imports.star,
                    node=member)
    lengths = _open(b, log)
    sizes = {k: len(v) for k, v in owner.bindings.items()}
    annotations = set(owner.annotations)
    children = dict(owner.children)
    refs, calls = owner.references, owner.self_calls
    owner.references, owner.self_calls = set(), set()
    b.member_log = log
    try:
        b.visit(member)
    finally:
        b.member_log = None
        _close(b, log, lengths)
        log.class_references, log.class_self_calls = owner.references, owner.self_calls
        owner.references = refs | owner.references
        owner.self_calls = calls | owner.self_calls
    b.active[-1].nested.update(log.nested)
    log.bindings = [(k, v) for k, values in owner.bindings.items()
                    for v in values[sizes.get(k, 0):]]
    log.annotations = [(k, v) for k, v in owner.annotations.items() if k not in annotations]
    log.children = [(k, v) for k, v in owner.children.items() if children.get(k) is not v]
    return log


def member_still_valid(b: FactsBuilder, log: MemberLog, owner: Scope) -> bool:
    return log.owner is owner and getattr(log, "ctx", 0) == b.ctx and _reads_hold(b, log)


def replay_member(b: FactsBuilder, log: MemberLog) -> None:
    """Write a member's records again, into the facts and the class scope."""
    owner = log.owner
    _put(b, log)
    for name, value in log.bindings:
        owner.bindings.setdefault(name, []).append(value)
    for name, value in log.annotations:
        owner.annotations[name] = value
    for name, scope in log.children:
        owner.children[name] = scope
    owner.references |= log.class_references
    owner.self_calls |= log.class_self_calls
    b.active[-1].nested.update(log.nested)


def record_body(b: FactsBuilder, stmt: ast.stmt, owner: Scope) -> BodyLog:
    """Visit a statement of the body of the function whose scope is ``owner`` (``b.scope``),
    logging what it read and wrote."""
    f = b.facts
    log = BodyLog(owner=owner, imports_before=b.imports_snapshot(), star_before=f.imports.star,
                  node=stmt, ctx=b.ctx)
    lengths = _open(b, log)
    stores, returns, expr_calls = len(owner.stores), len(owner.returns), len(owner.expr_calls)
    refs, calls = owner.references, owner.self_calls
    owner.references, owner.self_calls = set(), set()
    try:
        b.visit(stmt)
    finally:
        _close(b, log, lengths)
        log.scope_references, log.scope_self_calls = owner.references, owner.self_calls
        refs |= owner.references
        calls |= owner.self_calls
        owner.references, owner.self_calls = refs, calls
    log.stores = owner.stores[stores:]
    log.returns = owner.returns[returns:]
    log.expr_calls = owner.expr_calls[expr_calls:]
    _nest(b, stmt, log)
    return log


def body_still_valid(b: FactsBuilder, log: BodyLog, owner: Scope) -> bool:
    return log.owner is owner and getattr(log, "ctx", 0) == b.ctx and _reads_hold(b, log)


def replay_body(b: FactsBuilder, stmt: ast.stmt, log: BodyLog) -> None:
    """Write a function body statement's records again, into the facts and the function's
    scope."""
    owner = log.owner
    _put(b, log)
    _append(owner.bindings, log.bindings)
    _append(owner.assigned, log.assigned)
    owner.stores.extend(log.stores)
    owner.returns.extend(log.returns)
    owner.expr_calls.extend(log.expr_calls)
    owner.references |= log.scope_references
    owner.self_calls |= log.scope_self_calls
    for name, scope in log.children:
        owner.children[name] = scope
    _nest(b, stmt, log)


def _append(lists: dict[str, list], pairs: list[tuple[str, Any]]) -> None:
    """Each ``(name, value)`` appended to the list ``lists`` holds for the name."""
    for name, value in pairs:
        values = lists.get(name)
        if values is None:
            lists[name] = [value]
        else:
            values.append(value)


def _nest(b: FactsBuilder, stmt: ast.stmt, log: BodyLog) -> None:
    """A body statement's log (and those inside it), into the log around it."""
    nested = b.active[-1].nested
    nested[stmt] = log
    if log.nested:
        nested.update(log.nested)
