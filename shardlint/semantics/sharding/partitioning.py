"""Partitioning metadata: axis-name specs, the meshes they meet, rules tables, what code boxes.

The SHL2xx rules ask about the *names* in sharding annotations (logical names, mesh axis names).
This module answers from :class:`FileFacts` and the :class:`ProjectIndex`; it adds no state to
either. Lifted transforms (``nn.vmap``, ``nnx.scan``) live in ``semantics.lifts``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass

from shardlint.semantics.catalog.api import Role
from shardlint.semantics.file.axis_names import param_default, stricter
from shardlint.semantics.file.facts import CallSite, FileFacts, MeshBinding, Opaque, Scope
from shardlint.semantics.file.reuse import each_call
from shardlint.semantics.flow.project import ProjectIndex, project_cached
from shardlint.semantics.flow.summary import reference
from shardlint.syntax import nodes as walk_nodes

# Initializer wrappers and boxes whose variables carry partition names: a lifted transform
# that stacks them must be told the name of the new axis.
LINEN_BOXES = frozenset({
    "flax.linen.with_logical_partitioning", "flax.linen.LogicallyPartitioned",
    "flax.linen.with_partitioning", "flax.linen.Partitioned",
})
LINEN_LOGICAL_BOXES = frozenset({
    "flax.linen.with_logical_partitioning", "flax.linen.LogicallyPartitioned",
})
# NNX annotations (``nnx.Param``/``nnx.Variable`` count only with ``out_sharding=``: the index
# records a site for them only then).
NNX_ANNOTATIONS = frozenset({"flax.nnx.with_partitioning", "flax.nnx.Param", "flax.nnx.Variable"})

_MAX_DEREF = 8


# ---- names and symbols ---------------------------------------------------------------------------
def symbol_ref(facts: FileFacts, node: ast.expr, scope: Scope) -> str | None:
    """The index reference (``module:Qual`` / ``ext:dotted``) of a Name or Attribute."""
    # The summariser owns the one definition of a reference; reuse it rather than repeat it.
    return reference(facts, node, scope)


def deref(facts: FileFacts | None, node: ast.expr | None, scope: Scope) -> tuple[ast.expr | None, Scope]:
    """Follow names bound exactly once to their value; returns the value and its binding scope."""
    for _ in range(_MAX_DEREF):
        if not isinstance(node, ast.Name):
            break
        found = scope.lookup(node.id)
        if found is None:
            break
        owner, values = found
        if len(values) != 1 or not isinstance(values[0], ast.expr) or isinstance(values[0], Opaque):
            return None, scope
        node, scope = values[0], owner
    return node, scope


@project_cached
def reached_apis(project: ProjectIndex, ref: str, from_module: str | None = None) -> frozenset[str]:
    """Canonical names of the constraint/partitioning APIs a project symbol's code reaches.

    Follows what the index follows for constraint needs: references, project base classes and
    module-level aliases (``Block = nn.remat(_Block)``). Empty when ``ref`` is not a project symbol.
    """
    out: set[str] = set()
    for key in project.reachable(ref, from_module):
        sym = project.symbol(key)
        if sym is not None:
            out.update(site.api for site in sym.sites)
    return frozenset(out)


# ---- axis-name specs -----------------------------------------------------------------------------
@dataclass(frozen=True)
class AxisEntry:
    """One top-level entry of a literal spec: a name, None, a tuple of names, or unknown."""

    node: ast.expr  # the entry as written (after following names bound once)
    names: tuple[tuple[str, ast.expr], ...]  # the string literals in it, with their nodes
    nested: bool  # a tuple of names sharding one dimension over several axes


def spec_entries(facts: FileFacts, node: ast.expr | None, scope: Scope,
                 allow_string: bool = False) -> list[AxisEntry] | None:
    """The entries of a literal spec: ``("a", None)``, ``["a"]``, ``P("a", ("b", "c"))``.

    Names bound once (``AXES = ("embed", "mlp")``, ``EMBED = "embed"``) are followed, and string
    nodes point at the literal where it is written. A bare string is one entry only when
    ``allow_string`` (a Linen ``names`` argument must be a tuple). None when not a literal.
    """
    node, scope = deref(facts, node, scope)
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [AxisEntry(node, ((node.value, node),), False)] if allow_string else None
    if isinstance(node, (ast.Tuple, ast.List)):
        elts = node.elts
    elif isinstance(node, ast.Call) and is_partition_spec(facts, node):
        if node.keywords:
            return None
        elts = node.args
    else:
        return None
    out: list[AxisEntry] = []
    for elt in elts:
        if isinstance(elt, ast.Starred):
            continue  # unknown entries; the literal ones around them are still what they are
        value, vscope = deref(facts, elt, scope)
        if value is None:
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            out.append(AxisEntry(value, ((value.value, value),), False))
        elif isinstance(value, (ast.Tuple, ast.List)):
            names = []
            for inner in value.elts:
                iv, _ = deref(facts, inner, vscope)
                if isinstance(iv, ast.Constant) and isinstance(iv.value, str):
                    names.append((iv.value, iv))
            out.append(AxisEntry(value, tuple(names), True))
        else:
            out.append(AxisEntry(value, (), False))
    return out


def is_self_attribute(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)


def self_attribute_values(node: ast.expr, scope: Scope, default_used: DefaultUsed | None = None
                          ) -> list[tuple[ast.expr, Scope]]:
    """``self.kernel_axes`` read in a method (or a function nested in one): every value the
    class's methods assign to that attribute (``self.kernel_axes = ("embed", "mlp")``; one
    side of ``self.a, self.b = x, y``), each with the method it is assigned in. Empty for
    anything else, and for an assignment shardlint cannot split (``self.a, self.b = f()``).
    A class-body default of the attribute counts as one of its values, and so does the default
    of a method's parameter it is set from, where ``default_used(method, parameter)`` says
    some call leaves that parameter out (without it: always)."""
    assert isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
    method: Scope | None = scope
    while method is not None and method.kind == "function" and method.enclosing_class is None:
        method = method.parent
    if method is None or method.kind != "function" or not method.params \
            or node.value.id != method.params[0]:
        return []
    cls = method.enclosing_class
    assert cls is not None
    # a class-body default (a Linen/dataclass field, `kernel_axes: tuple = ("embed", "mlp")`)
    out: list[tuple[ast.expr, Scope]] = [
        (v, cls) for v in cls.bindings.get(node.attr, ()) if isinstance(v, ast.expr)
        and not isinstance(v, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    for m in cls.children.values():
        if m.kind != "function" or not m.params:
            continue
        me = m.params[0]
        for target, stmt in m.stores:
            if not (isinstance(target, ast.Attribute) and target.attr == node.attr
                    and isinstance(target.value, ast.Name) and target.value.id == me):
                continue
            for value, vscope in _assigned_parts(target, stmt, m):
                out.append((value, vscope))
                # `self.axes = axes` of a parameter never rebound: its default is one of the
                # values (`def __init__(self, axes=(BATCH, LENGTH))`, evaluated in the class body)
                if isinstance(value, ast.Name) and value.id in m.params and vscope is m \
                        and len(m.bindings.get(value.id, ())) == 1:
                    default = param_default(m.node, value.id)
                    if default is not None and (default_used is None
                                                or default_used(m, value.id)):
                        out.append((default, cls))
    return out


_MAX_VALUES = 4  # locals and attributes followed from a names argument to the values it holds
# Whether some call of a method leaves a parameter out, so that its default is used.
DefaultUsed = Callable[[Scope, str], bool]


def axis_values(node: ast.expr, scope: Scope, default_used: DefaultUsed | None = None,
                depth: int = 0) -> list[tuple[ast.expr, Scope]]:
    """The values a names argument may hold, each with its scope: every value of an attribute
    of ``self`` (:func:`self_attribute_values`), and of a local name of the function, also one
    bound on several branches (``if train: axes = self.train_axes`` / ``else: axes =
    self.decode_axes``); anything else as it is (a name bound once at module level is followed
    by :func:`spec_entries`)."""
    if depth < _MAX_VALUES:
        if is_self_attribute(node):
            return [v for value, vscope in self_attribute_values(node, scope, default_used)
                    for v in axis_values(value, vscope, default_used, depth + 1)]
        if isinstance(node, ast.Name):
            found = scope.lookup(node.id)
            if found is not None and found[0].kind == "function" and node.id not in found[0].params:
                owner, values = found
                return [v for value in values if isinstance(value, ast.expr)
                        and not isinstance(value, Opaque)
                        for v in axis_values(value, owner, default_used, depth + 1)]
    return [(node, scope)]


def _assigned_parts(target: ast.expr, stmt: ast.stmt, scope: Scope
                    ) -> list[tuple[ast.expr, Scope]]:
    """The values ``stmt`` (in ``scope``) assigns to ``target``: all of it, or its item when
    both sides are tuples of one length, or when the right side calls a function of this file
    whose every return is such a tuple (``self.wi, self.wo = kernel_axes()``); none for
    augmented assignments and values it cannot split."""
    if isinstance(stmt, ast.AnnAssign):
        return [(stmt.value, scope)] if stmt.value is not None else []
    if not isinstance(stmt, ast.Assign):
        return []
    for t in stmt.targets:
        if t is target:
            return [(stmt.value, scope)]
        if not (isinstance(t, (ast.Tuple, ast.List)) and target in t.elts):
            continue
        i = t.elts.index(target)
        if isinstance(stmt.value, (ast.Tuple, ast.List)):
            return [(stmt.value.elts[i], scope)] if len(t.elts) == len(stmt.value.elts) else []
        return [(r.elts[i], fn) for r, fn in _returned_tuples(stmt.value, scope, len(t.elts))]
    return []


def _returned_tuples(value: ast.expr, scope: Scope, n: int) -> list[tuple[ast.Tuple | ast.List, Scope]]:
    """The tuples a call of a function of this file returns (``kernel_axes()``, a module-level
    or enclosing ``def``), each with the function's scope, when every one of its returns is a
    tuple or list of ``n`` items; empty otherwise (one return that is not: the split is unknown)."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return []
    found = scope.lookup(value.func.id)
    if found is None:
        return []
    owner, values = found
    fn = owner.children.get(value.func.id)
    if len(values) != 1 or fn is None or fn.kind != "function" or fn.node is not values[0] \
            or not fn.returns:
        return []
    out: list[tuple[ast.Tuple | ast.List, Scope]] = []
    for r in fn.returns:
        node, rscope = deref(None, r, fn)  # (reads no facts)
        if not isinstance(node, (ast.Tuple, ast.List)) or len(node.elts) != n:
            return []
        out.append((node, rscope))
    return out


def is_partition_spec(facts: FileFacts, node: ast.Call) -> bool:
    known = facts.resolve(node.func)
    return known is not None and known.role == Role.PARTITION_SPEC


def literal_dict(facts: FileFacts, node: ast.expr | None,
                 scope: Scope) -> list[tuple[ast.expr, ast.expr]] | None:
    """Key/value pairs of a dict literal (or ``dict(k=v)``), following a name bound once.

    None when it is not a literal or when it unpacks another mapping (``**extra``).
    """
    node, _ = deref(facts, node, scope)
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            return None
        return [(k, v) for k, v in zip(node.keys, node.values) if k is not None]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" \
            and not node.args and all(kw.arg for kw in node.keywords):
        return [(ast.Constant(kw.arg), kw.value) for kw in node.keywords]
    return None


def is_partition_name_key(facts: FileFacts, key: ast.expr) -> bool:
    """``nn.PARTITION_NAME``, ``nnx.PARTITION_NAME`` or the string ``"partition_name"``."""
    if isinstance(key, ast.Constant):
        return key.value == "partition_name"
    known = facts.resolve(key)
    return known is not None and known.role == Role.PARTITION_NAME


# ---- meshes around a PartitionSpec ----------------------------------------------------------------
def paired_meshes(facts: FileFacts) -> dict[ast.Call, list[tuple[ast.expr, Scope]]]:
    """``P(...)`` calls used in ``NamedSharding(mesh, P(...))`` (directly or through a name bound
    once), with the mesh expressions they are paired with."""
    out: dict[ast.Call, list[tuple[ast.expr, Scope]]] = {}
    for c, pairs in each_call(facts, "paired_meshes", lambda c: _paired(facts, c),
                                 local=True):
        for spec, mesh in pairs:
            out.setdefault(spec, []).append((mesh, c.scope))
    return out


def _paired(facts: FileFacts, c: CallSite) -> tuple[tuple[ast.Call, ast.expr], ...]:
    """(spec, mesh expression) pairs one call makes (see :func:`paired_meshes`)."""
    if c.api is not None and c.api.role == Role.NAMED_SHARDING:
        mesh = c.arg(0, "mesh")
        spec, _ = deref(facts, c.arg(1, "spec"), c.scope)
        if mesh is not None and isinstance(spec, ast.Call) and is_partition_spec(facts, spec):
            return ((spec, mesh),)
        return ()
    # `jax.shard_map(f, mesh=mesh, in_specs=P("x"), out_specs=P("x"))` and the like.
    mesh = c.kwarg("mesh")
    if mesh is None:
        return ()
    out = []
    for a in [*c.node.args, *(kw.value for kw in c.node.keywords if kw.arg != "mesh")]:
        value, _ = deref(facts, a, c.scope)
        for n in walk_nodes(value) if value is not None else ():
            if isinstance(n, ast.Call) and is_partition_spec(facts, n):
                out.append((n, mesh))
    return tuple(out)


_LOGICAL_SPEC_APIS = frozenset({"flax.linen.logical_to_mesh", "flax.linen.logical_to_mesh_sharding"})
_LOGICAL_SPEC_ROLES = (Role.LOGICAL_CONSTRAINT, Role.LOGICAL_PARTITIONING, Role.NNX_PARTITIONING,
                       Role.NNX_PARAM)


def logical_specs(facts: FileFacts) -> set[ast.Call]:
    """``P(...)`` calls handed to an API that reads logical names (or, in NNX, either kind)."""
    out: set[ast.Call] = set()
    for _, specs in each_call(facts, "logical_specs", lambda c: _logical_specs(facts, c),
                               local=True):
        out.update(specs)
    return out


def _logical_specs(facts: FileFacts, c: CallSite) -> tuple[ast.Call, ...]:
    if c.api is None or not (c.api.role in _LOGICAL_SPEC_ROLES or c.api.name in _LOGICAL_SPEC_APIS):
        return ()
    out = []
    for a in [*c.node.args, *(kw.value for kw in c.node.keywords)]:
        value, _ = deref(facts, a, c.scope)
        for n in walk_nodes(value) if value is not None else ():
            if isinstance(n, ast.Call) and is_partition_spec(facts, n):
                out.append(n)
    return tuple(out)


def mesh_of(facts: FileFacts, node: ast.expr, scope: Scope) -> MeshBinding | None:
    mesh = facts.mesh_for(node, scope)
    if mesh is None:
        value, vscope = deref(facts, node, scope)
        if value is not None and value is not node:
            mesh = facts.mesh_for(value, vscope)
    return mesh


def context_mesh(facts: FileFacts, node: ast.AST, scope: Scope) -> MeshBinding | None:
    """The mesh of the innermost ``with jax.set_mesh(m):`` (or legacy ``with m:``) in the same
    scope lexically around ``node``, when shardlint knows which mesh it is."""
    line = getattr(node, "lineno", 0)
    best: tuple[int, MeshBinding | None] | None = None
    for item in facts.with_items:
        if item.scope is not scope or item.kind not in ("mesh", "legacy_mesh"):
            continue
        stmt = item.stmt
        body_start = stmt.body[0].lineno if stmt.body else stmt.lineno
        if not (body_start <= line <= (stmt.end_lineno or stmt.lineno)):
            continue
        if item.kind == "legacy_mesh":
            mesh = item.mesh
        else:
            call = item.expr
            arg = call.args[0] if isinstance(call, ast.Call) and call.args else None
            mesh = mesh_of(facts, arg, scope) if arg is not None else None
        if best is None or stmt.lineno > best[0]:
            best = (stmt.lineno, mesh)
    return best[1] if best else None


def unknown_mesh_source(facts: FileFacts, project: ProjectIndex, node: ast.expr,
                        scope: Scope) -> bool:
    """A mesh made by a call shardlint cannot see into (a library helper): its axis names may be
    anything, so the project's other meshes say nothing about it."""
    value, vscope = deref(facts, node, scope)
    if not isinstance(value, ast.Call):
        return False
    known = facts.resolve(value.func)
    if known is not None:
        return known.role not in (Role.MESH, Role.ABSTRACT_MESH)
    if not isinstance(value.func, (ast.Name, ast.Attribute)):
        return True
    ref = symbol_ref(facts, value.func, vscope)
    return ref is None or project.resolve(ref, facts.module) is None


# ---- rules tables --------------------------------------------------------------------------------
def _rules_shaped(table: object) -> bool:
    return isinstance(table, (list, tuple)) and bool(table) and all(
        isinstance(e, (list, tuple)) and len(e) == 2 and isinstance(e[0], str)
        and (e[1] is None or isinstance(e[1], str)
             or (isinstance(e[1], (list, tuple)) and all(isinstance(x, str) for x in e[1])))
        for e in table
    )


@project_cached
def logical_names_with_rules(project: ProjectIndex, module: str | None = None
                             ) -> tuple[set[str], bool]:
    """Left-hand names of every rules table of the project, and whether that set can be trusted.

    Trusted means: at least one table is used and every table used is a literal shardlint reads.
    For a ``module``, the tables of other tests, benchmarks and examples do not count (they
    judge those programs: :meth:`ProjectIndex.judging`).
    Module constants shaped like a rules table count too, because they may reach Flax through a
    helper shardlint does not know (that only ever adds names, never a finding).
    """
    tables, complete = project.rule_tables(project.judging(module))
    names = {str(e[0]) for t in tables for e in t if e} | _constant_table_names(project)
    return names, bool(tables) and complete


@project_cached
def _constant_table_names(project: ProjectIndex) -> frozenset[str]:
    """Left-hand names of the module constants of the project shaped like a rules table (asked
    once per project, not once per file)."""
    return frozenset(str(e[0]) for s in project.summaries.values()
                     for table in s.constants.values() if _rules_shaped(table) for e in table)


def rules_table_nodes(facts: FileFacts, project: ProjectIndex) -> list[tuple[ast.expr, Scope]]:
    """Literal rules tables written in this file: those used here and module constants that
    another module imports as a rules table (``from config import RULES``)."""
    out: list[tuple[ast.expr, Scope]] = []
    seen: set[int] = set()
    for t in facts.rule_tables:
        if t.entries is None:
            continue
        node, scope = deref(facts, t.expr, t.scope)
        if isinstance(node, (ast.Tuple, ast.List)) and id(node) not in seen:
            seen.add(id(node))
            out.append((node, scope))
    used = _imported_tables(project)
    for name, values in facts.module_scope.bindings.items():
        if len(values) != 1 or not isinstance(values[0], (ast.Tuple, ast.List)):
            continue
        node = values[0]
        if id(node) in seen or not _rules_shaped(facts.literal(node, facts.module_scope)):
            continue
        if f"{facts.module}.{name}" in used:
            seen.add(id(node))
            out.append((node, facts.module_scope))
    return out


@project_cached
def _imported_tables(project: ProjectIndex) -> set[str]:
    """Dotted names of module constants used as rules tables, with script-style spellings
    (``from config import RULES`` in ``pkg/train.py`` may mean ``pkg.config.RULES``)."""
    out: set[str] = set()
    for s in project.summaries.values():
        pkg = s.module.split(".")[:-1]
        for ref in s.rule_table_refs:
            out.add(ref)
            out.update(".".join(pkg[:i] + [ref]) for i in range(1, len(pkg) + 1))
    return out


def rules_rhs(facts: FileFacts, table: ast.expr, scope: Scope) -> list[tuple[str, ast.expr]]:
    """Mesh axis names on the right of each rule of a literal table, with their nodes."""
    out: list[tuple[str, ast.expr]] = []
    for elt in table.elts:  # type: ignore[attr-defined]
        entry, escope = deref(facts, elt, scope)
        if not isinstance(entry, (ast.Tuple, ast.List)) or len(entry.elts) != 2:
            continue
        rhs, rscope = deref(facts, entry.elts[1], escope)
        targets = rhs.elts if isinstance(rhs, (ast.Tuple, ast.List)) else [rhs]
        for t in targets:
            value, _ = deref(facts, t, rscope)
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.append((value.value, value))
    return out


# ---- names handed to a project layer ---------------------------------------------------------------
_NAME_HOPS = 8  # calls followed from a caller's literal to the annotation call that takes it


def name_params(project: ProjectIndex, fn: str) -> dict[str, str]:
    """The parameters of the project function ``fn`` (``module:qual``) whose value reaches an
    annotation call's names unchanged, with whose names they are (``axis_names.LINEN``/``NNX``):
    handed there directly, kept on ``self`` and handed there by a method of the class, or handed
    on to another function's such parameter (any depth, any file)."""
    memo = project._memo.setdefault(("name_params",), {})
    return _name_params(project, fn, memo, set(), 0)[0]


_NAMES = tuple[dict[str, str], dict[str, set[str]]]


def _name_params(project: ProjectIndex, fn: str, memo: dict, active: set, depth: int
                 ) -> _NAMES:
    """:func:`name_params`, and for each parameter handed on only while some rules
    parameters are left out, those parameters (``unless``)."""
    found = memo.get(fn)
    if found is not None:
        return found
    if fn in active or depth > _NAME_HOPS:
        return {}, {}
    module, _, qual = fn.partition(":")
    s = project.summaries.get(module)
    if s is None:
        return {}, {}
    active.add(fn)
    out = dict(s.name_params.get(qual, {}))
    unless = {p: set(r) for p, r in s.name_unless.get(qual, {}).items()}
    cls, _, method = qual.rpartition(".")
    kept = s.name_attrs.get(cls) if cls else None
    if kept:  # `self.kernel_axes = kernel_axes` here, `out_sharding=self.kernel_axes` there
        _kept_params(project, f"{module}:{cls}", method, kept, out)
    for e in s.calls:
        if e.caller != qual or not e.args:
            continue
        passed = {k: t[1] for k, terms in e.args.items() if not k.startswith("#")
                  for t in terms if t[0] == "p" and len(t) == 2}
        if not passed:
            continue
        names, conds = _callee_names(project, e, module, memo, active, depth)
        for key, kind in names.items():
            param = passed.get(key)
            if param is None:
                continue
            mine = _rules_left_out(e.args, conds.get(key, set()))
            if mine is None:  # (this call passes its own table)
                continue
            if param in out and param not in unless:
                continue  # (already handed on whatever the rules)
            out[param] = stricter(out.get(param), kind)
            if mine:
                unless.setdefault(param, set()).update(mine)
            else:
                unless.pop(param, None)
    active.discard(fn)
    memo[fn] = (out, unless)
    return out, unless


def _rules_left_out(args: dict[str, list], conds: set[str]) -> set[str] | None:
    """Whether a call edge leaves the callee's rules parameters ``conds`` (their names and
    positions) at None: the caller's own parameters it hands them on from (the caller then
    takes the rules in force only while those are left out), or None when it passes a table."""
    mine: set[str] = set()
    for key in conds:
        for t in args.get(key, ()):
            if t[0] == "p" and len(t) == 2:
                mine.add(t[1])
            elif t[0] != "none":
                return None
    return mine


def _kept_params(project: ProjectIndex, cls: str, method: str, kept: dict[str, list],
                 out: dict[str, str]) -> None:
    """Into ``out``: the parameters of ``cls.method`` that the method stores in an attribute
    of ``self`` which the class hands on as names (``kept``: attr -> [kind, ...])."""
    sym = project.symbol(cls)
    attrs = (sym.flow or {}).get("attrs", {}) if sym is not None and sym.kind == "class" else {}
    for attr, (kind, *_) in kept.items():
        for t in attrs.get(attr, ()):
            if t[0] == "p" and len(t) > 2 and t[2] == method:
                out[t[1]] = stricter(out.get(t[1]), kind)


def _callee_names(project: ProjectIndex, e, module: str, memo: dict, active: set, depth: int
                  ) -> _NAMES:
    """What a call edge's arguments are for the callee, by the edge's keys (a position as
    ``"0"``, or a keyword): those whose value the callee hands on as names; and for each, the
    keys of the rules parameters that must be left out for it to meet the rules in force."""
    target = project.resolve(e.target, module)
    sym = project.symbol(target) if target is not None else None
    if sym is None:
        return {}, {}
    out: dict[str, str] = {}
    constructor = sym.kind == "class"
    extra: dict[str, str] = {}  # (a constructor: parameters of its `__init__` kept as names)
    if constructor:  # `Layer(kernel_axes=...)`: its `__init__`, or a Linen/dataclass field
        chain = project.class_chain(target)
        kept: dict[str, list] = {}  # what the class and its project bases name on `self`
        for cls in reversed(chain):
            tmod, _, tqual = cls.partition(":")
            kept.update(project.summaries[tmod].name_attrs.get(tqual, {}))
        runs = next((c for c in chain if project.symbol(f"{c}.__init__") is not None), None)
        if runs is None:
            for attr, (kind, is_field, *where) in kept.items():
                if is_field:
                    out[attr] = kind
                    # (a field's position counts when no project base class adds fields)
                    if len(chain) == 1 and where and where[0] >= 0:
                        out[str(where[0])] = kind
            return out, {}
        _kept_params(project, runs, "__init__", kept, extra)  # set from its parameters
        target = f"{runs}.__init__"
        sym = project.symbol(target)
    if sym is None or sym.kind != "function" or not sym.flow:
        return out, {}
    found, unless = _name_params(project, target, memo, active, depth + 1)
    names = dict(found)
    for param, kind in extra.items():
        names[param] = stricter(names.get(param), kind)
        unless = {p: r for p, r in unless.items() if p != param}
    if not names:
        return out, {}
    params = sym.flow.get("params", [])
    offset = sym.flow.get("method", 0) if constructor or "self" in (e.args or {}) else 0

    def keys(param: str) -> list[str]:
        i = params.index(param) if param in params else -1
        return [param, str(i - offset)] if i >= offset else [param]

    conds: dict[str, set[str]] = {}
    for param, kind in names.items():
        rules = {k for r in unless.get(param, ()) for k in keys(r)}
        for k in keys(param):
            out[k] = kind
            if rules:
                conds[k] = rules
    return out, conds


def call_names(project: ProjectIndex, facts: FileFacts, c: CallSite
               ) -> list[tuple[ast.expr, str]]:
    """The arguments of a call of a project function or class that reach an annotation call's
    names unchanged (``DenseGeneral(kernel_axes=("embed", "mlp"))``, also bound by
    ``functools.partial``), with whose names they are; nothing for a call of anything else
    (tested first: most calls are not of a carrier)."""
    callee = _carrier_callee(c, _carriers(project))
    if callee is None:
        return []
    func, positional = callee
    args = {str(i): a for i, a in enumerate(positional)}
    if any(isinstance(a, ast.Starred) for a in positional):
        args = {}
    args.update({k.arg: k.value for k in c.node.keywords if k.arg})
    every = dict(args)
    # (only a literal can be judged: most calls pass none, and are not resolved at all)
    args = {k: a for k, a in args.items() if _may_be_names(facts, a, c.scope)}
    if not args:
        return []
    ref = reference(facts, func, c.scope)
    if ref is None:
        return []
    key = "self" if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
        and func.value.id in ("self", "cls") else ""
    edge = _Edge(ref, {key: []} if key else {})
    memo = project._memo.setdefault(("name_params",), {})
    out = []
    names, conds = _callee_names(project, edge, facts.module, memo, set(), 0)
    for k, kind in names.items():
        a = args.get(k)
        # (a call that passes its own rules table is judged by it, not by the project's)
        if a is not None and not any(
                not (isinstance(r, ast.Constant) and r.value is None)
                for r in (every.get(key) for key in conds.get(k, ())) if r is not None):
            out.append((a, kind))
    return out


def _carrier_callee(c: CallSite, carriers: frozenset[str]) -> tuple[ast.expr, list] | None:
    """The callee a call runs and the positional arguments it gets (``partial(DenseGeneral,
    ...)``: DenseGeneral, and the rest), when its simple name is one of ``carriers``."""
    func, positional = c.node.func, c.node.args
    api = c.api
    if api is not None:
        if api.role != Role.PARTIAL or not positional:  # `partial(DenseGeneral, ...)`
            return None
        func, positional = positional[0], positional[1:]
    tp = type(func)
    name = func.id if tp is ast.Name else func.attr if tp is ast.Attribute else None  # type: ignore[attr-defined]
    return (func, positional) if name in carriers else None


@project_cached
def _carriers(project: ProjectIndex) -> frozenset[str]:
    """The simple names (``DenseGeneral``, ``dense``) of the project's functions and classes
    that may hand an argument on as axis names: a quick superset of what :func:`name_params`
    finds, so that a call of anything else is not resolved."""
    names: set[str] = set()

    def add(qual: str) -> bool:
        head, _, last = qual.rpartition(".")
        found = last == "__init__" and head
        new = {head.rpartition(".")[2] if found else last}
        if not new <= names:
            names.update(new)
            return True
        return False

    for s in project.summaries.values():
        for qual in s.name_params:
            add(qual)
        for cls in s.name_attrs:
            add(cls)
            add(f"{cls}.__init__")
    classes = [(qual, [b.rpartition(".")[2] for b in sym.bases])
               for s in project.summaries.values() for qual, sym in s.symbols.items()
               if sym.kind == "class" and sym.bases]
    # (caller, the callee's simple name) of each call that hands on one of its caller's own
    # parameters: the only calls that can make their caller one more carrier
    handing = [(e.caller, e.target.rpartition(".")[2].rpartition(":")[2])
               for s in project.summaries.values() for e in s.calls
               if e.args and e.caller and _hands_a_param(e.args)]
    for _ in range(_NAME_HOPS):  # a caller handing its own parameter on to one of them
        grown = False
        for qual, bases in classes:  # (a subclass runs its base's `__init__`)
            if any(b in names for b in bases):
                grown = add(qual) or grown
        for caller, callee in handing:
            if callee in names:
                grown = add(caller) or grown
        if not grown:
            break
    return frozenset(names)


def _hands_a_param(args: dict[str, list]) -> bool:
    """Whether a call edge's arguments (``CallEdge.args``) hand on a parameter of the caller
    (every edge with arguments of the project is asked: plain loops)."""
    for k, ts in args.items():
        if k[0] != "#":
            for t in ts:
                if t[0] == "p":
                    return True
    return False


def _may_be_names(facts: FileFacts, node: ast.expr, scope: Scope) -> bool:
    """A tuple or list with a string in it, written here or bound once to a name; or an
    attribute of ``self`` (whose values the class assigns); or a local name that holds one of
    these on some branch."""
    if isinstance(node, ast.Attribute):
        return isinstance(node.value, ast.Name) and node.value.id == "self"
    if isinstance(node, ast.Name):
        found = scope.lookup(node.id)
        if found is not None and found[0].kind == "function" and len(found[1]) > 1:
            return any(_may_be_names(facts, v, found[0]) for v in found[1]
                       if isinstance(v, ast.expr) and not isinstance(v, (ast.Name, Opaque)))
        node, _ = deref(facts, node, scope)
    return isinstance(node, (ast.Tuple, ast.List)) and any(
        isinstance(e, (ast.Constant, ast.Name)) and not (
            isinstance(e, ast.Constant) and not isinstance(e.value, str)) for e in node.elts)


def imported_string(project: ProjectIndex, facts: FileFacts, node: ast.expr,
                    scope: Scope) -> str | None:
    """The string a name imported from another module of the project is bound to there, once
    (``from pkg.common_types import LENGTH`` with ``LENGTH = "length"`` in ``common_types``);
    None for anything else."""
    if not isinstance(node, ast.Name):
        return None
    ref = reference(facts, node, scope)
    if ref is None or not ref.startswith("ext:"):
        return None
    mod, _, name = ref[4:].rpartition(".")
    pkg = facts.module.split(".")[:-1]
    for prefix in ["", *(".".join(pkg[:i]) + "." for i in range(len(pkg), 0, -1))]:
        s = project.summaries.get(prefix + mod)
        if s is not None:
            value = s.strings.get(name)
            if value is None and name in s.imports:  # (a re-export: `from .types import *`)
                target_mod, _, target = s.imports[name].rpartition(".")
                t = project.summaries.get(target_mod)
                value = t.strings.get(target) if t is not None else None
            return value
    return None


@dataclass
class _Edge:
    """A call seen from the calling file (what ``_callee_names`` reads of a summary's edge)."""

    target: str
    args: dict
