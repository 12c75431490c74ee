"""Facts of a file's unchanged top-level statements, replayed instead of visited again.

The language server builds the facts of the same file on every keystroke, and the incremental
parser hands back the very same node objects for the statements an edit did not touch. Visiting a
top-level statement is a function of the statement and of what it reads of the state the
statements before it left: the import map, and -- through three lookups -- the module's bindings,
scopes and meshes. So the builder records, per statement, those reads with what they returned,
and what the visit wrote (records appended, module bindings, scopes, references, roles). In the
next build a statement whose node is the same and whose reads still return the same things is
replayed from its record; any other statement is visited (and recorded) again. A read that the
statement's own earlier writes answered fails the check and costs a visit, never a wrong replay.

The module scope object is reused across builds (the replayed records point at it) and rebuilt
from scratch each time.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shardlint.semantics.facts import CallSite, JitSite, MeshBinding, Reference, Scope, WithItem
from shardlint.semantics.reuse import Reuse

if TYPE_CHECKING:
    from shardlint.semantics.visitor import FactsBuilder


@dataclass(eq=False)
class StatementLog:
    """What visiting one top-level statement read and wrote."""

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
    children: list[tuple[str, Scope]] = field(default_factory=list)  # module scope's children
    bindings: list[tuple[str, ast.expr]] = field(default_factory=list)  # module-level binds
    root_references: set[str] = field(default_factory=set)
    root_self_calls: set[str] = field(default_factory=set)
    imports_changes: list[tuple[str, str]] = field(default_factory=list)
    star_after: bool = False
    roles: set = field(default_factory=set)
    uses_jax: bool = False
    uses_flax: bool = False


@dataclass(eq=False)
class MemberLog:
    """What visiting one member of a top-level class (a method, a class attribute) read and
    wrote: a class of thousands of lines is one top-level statement, and an edit inside one
    method should not visit the others again. The class's Scope object is reused by the next
    build (as the module's is), so what the member's records point at stays valid."""

    owner: Scope  # the class scope it was visited in
    imports_before: dict[str, str]
    star_before: bool
    reads: list[tuple[str, Any, Any, Any]] = field(default_factory=list)
    calls: list[CallSite] = field(default_factory=list)
    jit_sites: list[JitSite] = field(default_factory=list)
    meshes: list[MeshBinding] = field(default_factory=list)
    with_items: list[WithItem] = field(default_factory=list)
    other_withs: list[WithItem] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)
    scopes: list[tuple[str, Scope]] = field(default_factory=list)
    bindings: list[tuple[str, Any]] = field(default_factory=list)  # into the class scope
    annotations: list[tuple[str, Any]] = field(default_factory=list)
    children: list[tuple[str, Scope]] = field(default_factory=list)
    class_references: set[str] = field(default_factory=set)
    class_self_calls: set[str] = field(default_factory=set)
    roles: set = field(default_factory=set)
    uses_jax: bool = False
    uses_flax: bool = False


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


def reset(root: Scope, tree: ast.Module) -> Scope:
    root.node = tree
    root.bindings = {}
    root.references = set()
    root.self_calls = set()
    root.children = {}
    return root


def record(b: FactsBuilder, stmt: ast.stmt) -> StatementLog:
    """Visit a top-level statement, logging its reads and writes."""
    f = b.facts
    log = StatementLog(dict(f.imports.names), f.imports.star, stmt)
    lengths = _lengths(f)
    b.log = log
    try:
        b.visit(stmt)
    finally:
        b.log = None
    _take(f, log, lengths)
    before = log.imports_before
    log.imports_changes = [(k, v) for k, v in f.imports.names.items() if before.get(k) != v]
    log.star_after = f.imports.star and not log.star_before
    return log


def still_valid(b: FactsBuilder, log: StatementLog) -> bool:
    """Whether visiting the statement now would read what it read when it was recorded."""
    return _reads_hold(b, log)


def _reads_hold(b: FactsBuilder, log: StatementLog | MemberLog) -> bool:
    """The import map and every logged lookup give now what they gave when ``log`` was made."""
    f = b.facts
    if f.imports.star != log.star_before or f.imports.names != log.imports_before:
        return False
    for kind, x, scope, seen in log.reads:
        if kind == "function":
            if b.function_named_from(x, scope) is not seen:
                return False
        elif kind == "mesh":
            if f.mesh_for(x, scope) is not seen:
                return False
        elif f.axis_names(x, scope) != seen:
            return False
    return True


def _lengths(f) -> tuple[int, ...]:
    return (len(f.calls), len(f.jit_sites), len(f.meshes), len(f.with_items),
            len(f.references), len(f.other_withs))


def _take(f, log: StatementLog | MemberLog, lengths: tuple[int, ...]) -> None:
    """The records the visit appended to the facts since ``lengths``, into ``log``."""
    log.calls = f.calls[lengths[0]:]
    log.jit_sites = f.jit_sites[lengths[1]:]
    log.meshes = f.meshes[lengths[2]:]
    log.with_items = f.with_items[lengths[3]:]
    log.references = f.references[lengths[4]:]
    log.other_withs = f.other_withs[lengths[5]:]


def _put(f, log: StatementLog | MemberLog) -> None:
    """A log's records appended to the facts again (and its scopes named), in order."""
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


def replay(b: FactsBuilder, log: StatementLog) -> None:
    f, root = b.facts, b.root
    _put(f, log)
    for name, scope in log.children:
        root.children[name] = scope
    for name, value in log.bindings:
        root.bindings.setdefault(name, []).append(value)
    root.references.update(log.root_references)
    root.self_calls.update(log.root_self_calls)
    for name, q in log.imports_changes:
        f.imports.names[name] = q
    if log.star_after:
        f.imports.star = True


def record_member(b: FactsBuilder, member: ast.stmt, owner: Scope) -> MemberLog | None:
    """Visit a member of a top-level class (``b.scope`` is ``owner``), logging what it read and
    wrote; None when it cannot be replayed later (it changed the import map)."""
    f = b.facts
    log = MemberLog(owner, dict(f.imports.names), f.imports.star)
    lengths = _lengths(f)
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
        log.class_references, log.class_self_calls = owner.references, owner.self_calls
        owner.references = refs | owner.references
        owner.self_calls = calls | owner.self_calls
    _take(f, log, lengths)
    log.bindings = [(k, v) for k, values in owner.bindings.items()
                    for v in values[sizes.get(k, 0):]]
    log.annotations = [(k, v) for k, v in owner.annotations.items() if k not in annotations]
    log.children = [(k, v) for k, v in owner.children.items() if children.get(k) is not v]
    if f.imports.names != log.imports_before or f.imports.star != log.star_before:
        return None
    return log


def member_still_valid(b: FactsBuilder, log: MemberLog, owner: Scope) -> bool:
    return log.owner is owner and _reads_hold(b, log)


def replay_member(b: FactsBuilder, log: MemberLog) -> None:
    """Write a member's records again, into the facts, the class scope and the statement's
    log."""
    f, owner, outer = b.facts, log.owner, b.log
    _put(f, log)
    for name, value in log.bindings:
        owner.bindings.setdefault(name, []).append(value)
    for name, value in log.annotations:
        owner.annotations[name] = value
    for name, scope in log.children:
        owner.children[name] = scope
    owner.references |= log.class_references
    owner.self_calls |= log.class_self_calls
    if outer is not None:
        outer.reads.extend(log.reads)
        outer.scopes.extend(log.scopes)
        outer.roles.update(log.roles)
        outer.uses_jax |= log.uses_jax
        outer.uses_flax |= log.uses_flax
