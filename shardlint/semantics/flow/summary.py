"""What one module contributes to the ProjectIndex, in a form that is cheap to cache.

A summary holds no ``ast`` nodes: symbols with the constraint needs of their own bodies and what
they reference, calls between project symbols with the contexts around them, entries (where a
model is initialised or applied), context providers, rule tables and mesh axis names.
References are ``"module:qualname"`` for symbols of this module and ``"ext:dotted.name"`` for
imported names, which the index resolves against the other modules.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from shardlint.semantics.catalog import runnable
from shardlint.semantics.catalog.api import Role, lookup
from shardlint.semantics.catalog.names import EXTERNAL_PACKAGES, dotted
from shardlint.semantics.file.axis_names import exported_name_params
from shardlint.semantics.file.config_flags import exported_flags
from shardlint.semantics.file.config_tables import python_tables, table_key
from shardlint.semantics.file.execution import execution_of
from shardlint.semantics.file.facts import ALL, MESH, RULES, CallSite, FileFacts, Scope
from shardlint.semantics.file.jit_sites import (
    PJIT,
    bound_once,
    exported_donations,
    exported_jitted,
    is_sharded,
    sharded_jit_params,
    specs_may_be_bare,
    wrapped_callable,
)
from shardlint.semantics.file.meshes import axis_kind
from shardlint.semantics.file.moves import newer_calls
from shardlint.semantics.file.reuse import Chunk, each_statement, mentions
from shardlint.semantics.flow.liveness import shared_parts, use_after
from shardlint.semantics.flow.valueflow import (
    MESH_ARGUMENTS,
    class_attributes,
    function_flow,
    interesting,
    kind_terms,
    map_positions,
    method_attributes,
    optional_of,
)
from shardlint.semantics.flow.valueflow import shift as shift_flow
from shardlint.syntax import first_line
from shardlint.syntax import nodes as walk_nodes

_MISSING = object()

# Bump when what a summary records changes: cached summaries of another format are dropped.
FORMAT = 30
ENTRY_METHODS = ("init", "init_with_output", "apply")
# An entry's model held by a value (Entry.model): a parameter (`#param:<function>#<name>`) or an
# attribute of `self` (`#attr:<class>#<name>`); no module is named so
HANDED = "#"
_WRAPPERS = frozenset({Role.JIT, Role.PARTIAL, Role.LINEN_LIFT, Role.NNX_LIFT, Role.REMAT})
_MESH_LIKE = frozenset({"Mesh", "make_mesh", "AbstractMesh"})
_RULES_LIKE = frozenset({"logical_axis_rules", "axis_rules", "set_logical_axis_rules",
                         "set_axis_rules"})
_BOX_ROLES = frozenset({Role.LOGICAL_PARTITIONING, Role.MESH_PARTITIONING})
_NEEDS = {
    Role.LOGICAL_CONSTRAINT: RULES | MESH,
    Role.LOGICAL_PARTITIONING: RULES | MESH,
    Role.MESH_PARTITIONING: MESH,
    Role.NNX_PARTITIONING: MESH,
}


@dataclass
class Site:
    """Where a constraint or partitioning call sits (for related locations in findings)."""

    line: int
    col: int
    end_line: int
    end_col: int
    needs: int
    api: str
    # "none": the names handed are a literal of only None (`(None, None)`): nothing to shard.
    spec: str = ""


@dataclass
class Symbol:
    # "function" | "class" | "alias" (a wrapper: calling it calls what it wraps, e.g.
    # `step = jax.jit(train_step)`, `Ensemble = nn.vmap(MLP)`) | "value" (any other binding)
    kind: str
    needs: int = 0
    refs: list[str] = field(default_factory=list)
    bases: list[str] = field(default_factory=list)
    sites: list[Site] = field(default_factory=list)
    line: int = 0
    flow: dict | None = None  # functions: what it does with its arguments (valueflow.py)


@dataclass
class CallEdge:
    caller: str  # qualname of the calling scope ("" = module level)
    target: str  # reference
    ctx: int
    line: int
    col: int
    # What kind of value each argument is, where that can matter (valueflow.kind_terms), by
    # position ("0") or keyword; with "self" when called as `self.method(...)`.
    args: dict[str, list] | None = None


@dataclass
class Entry:
    """A place where a model runs: ``model.init``/``apply`` or an NNX constructor."""

    # reference to the model symbol; ``#param:...``/``#attr:...`` for a model held by a
    # parameter or an attribute of ``self`` (HANDED; ``ProjectIndex.handed_classes``)
    model: str
    kind: str  # "init" | "apply" | "nnx"
    scope: str
    ctx: int
    line: int
    col: int
    end_line: int
    end_col: int


@dataclass
class ModuleSummary:
    module: str
    path: str
    symbols: dict[str, Symbol] = field(default_factory=dict)
    calls: list[CallEdge] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    legacy_env: bool = False  # reads pxla.thread_resources (what `with mesh:` sets)
    # the functions (qualnames; "" for module-level code) that read pxla.thread_resources, and
    # those that call a pjit that may be given bare PartitionSpecs (jit_sites.specs_may_be_bare;
    # SHL101 names what a call under `with mesh:` reaches)
    legacy_readers: list[str] = field(default_factory=list)
    pjit_callers: list[str] = field(default_factory=list)
    # the functions (qualnames; "" for module-level code) that call `nnx.eval_shape` (SHL101:
    # where a model is built with it under a `with mesh:`)
    eval_shape_users: list[str] = field(default_factory=list)
    rules_setter: bool = False  # nn.set_logical_axis_rules(...) somewhere
    mesh_setter: bool = False  # jax.set_mesh(m) as a statement somewhere
    # `maps.thread_resources.env = ResourceEnv(physical_mesh=m, ...)`: a global legacy mesh,
    # what `pjit` and `with_sharding_constraint` read (jax < 0.4.31 code; not `jax.jit`)
    legacy_mesh_setter: bool = False
    rules_provider: bool = False  # any rules context, setter or rules= argument
    mesh_provider: bool = False
    mesh_context: bool = False  # enters or sets a mesh by jax.set_mesh / use_mesh (or a wrapper)
    legacy_mesh: bool = False  # enters a mesh by a legacy `with mesh:` (or may: a helper's)
    rule_tables: list[list | None] = field(default_factory=list)
    rule_table_refs: list[str] = field(default_factory=list)  # tables imported from elsewhere
    mesh_axes: list[list[str] | None] = field(default_factory=list)  # meshes it builds
    mesh_axis_keys: list[str] = field(default_factory=list)  # meshes of `config.mesh_axes`
    mesh_params: list[list[str]] = field(default_factory=list)  # [function, parameter] Mesh
    # parameters / `self` attributes handed to an annotation call as its names (axis_names.py)
    name_params: dict[str, dict[str, str]] = field(default_factory=dict)
    name_attrs: dict[str, dict[str, list]] = field(default_factory=dict)
    # a name parameter's rules parameters (defaulting to None): handed on as names only
    # where a caller leaves them out
    name_unless: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    # module-level names bound once to a short string (`EMBED = "embed"`)
    strings: dict[str, str] = field(default_factory=dict)
    constants: dict[str, list] = field(default_factory=dict)  # literal rules tables by name
    # module-level callables that donate: name -> [positions, keyword names, "donate_argnums=0"]
    donating: dict[str, list] = field(default_factory=dict)
    apis: list[str] = field(default_factory=list)  # canonical names of the known APIs called
    mesh_kinds: list[str] = field(default_factory=list)  # axis kind of each mesh built (meshes.py)
    jitted: list[str] = field(default_factory=list)  # module-level compiled callables (jitted.py)
    # Calls that rebind an argument and still read its old value afterwards (`old = state;
    # state = step(state, b); old.step`): [callee, [positions as "0", or keywords]], the callee
    # as ``jit_sites.remote_names`` spells it. A donation of those would break this caller.
    kept: list[list] = field(default_factory=list)
    # module-level names bound once to what may be a mesh (`MESH = Mesh(...)`, `MESH =
    # make_mesh(cfg)`), with their kind terms: what another module's `from m import MESH` is
    value_kinds: dict[str, list] = field(default_factory=dict)
    # module-level names of the mesh class (`Mesh = jax.sharding.Mesh`, `from jax.sharding
    # import Mesh`): what another module's `x: partitioning.Mesh` annotation names
    mesh_types: list[str] = field(default_factory=list)
    flags: dict[str, list] = field(default_factory=dict)  # config flags set (config_flags.py)
    # names imported from other modules of the project (a re-export: `from .fn import step`)
    imports: dict[str, str] = field(default_factory=dict)
    # rules tables written in configuration, by key (config_tables.py): {"key", "line", "entries"}
    config_tables: list[dict] = field(default_factory=list)
    # a gin file's calls of configurables ([target, line, kind terms of what it binds]), its
    # macros' kind terms, imports and includes (config_tables.read_gin): callers for the value flow
    gin: dict = field(default_factory=dict)
    rule_table_keys: list[str] = field(default_factory=list)  # tables read by key: `cfg.rules`
    rule_table_terms: list[list] = field(default_factory=list)  # [where, kind terms]: valueflow
    # `with x:` items of no known context whose value may be a mesh: [where, kind terms, the
    # model entries and the call edges in its body, by their places in `entries` and `calls`]
    with_mesh_terms: list[list] = field(default_factory=list)
    # the jax / flax modules its module-level imports load in every case that only some
    # releases have: [module, first release, last release]; and the modules outside jax, flax
    # and known packages they load (flow/runs.py: the releases the project's modules run at)
    runs: list[list] = field(default_factory=list)
    loads: list[str] = field(default_factory=list)
    # `functools.partial(f, ..., mesh=m)`: [caller, target, kind terms of what it binds, as
    # `CallEdge.args`]: the arguments every later call of the partial passes (valueflow's
    # "every caller passes a mesh"; not a call: it says nothing of the contexts f runs under)
    partials: list[list] = field(default_factory=list)
    # [function key, parameter, line, col, end line, end col of the jit]: a parameter handed
    # as it came to a call of a jit with in/out shardings (jit_sites.sharded_jit_params; SHL502
    # follows keys there)
    sharded_jit_params: list[list] = field(default_factory=list)
    # [function key, line, col, end line, end col of the jit]: a project function compiled by a
    # jit with in/out shardings (SHL502: what it reaches is traced for a sharded program)
    sharded_jits: list[list] = field(default_factory=list)
    # [function reference, jit API, line, col, end line, end col of the jit]: a function of
    # another module that a jit here compiles (`jax.jit(steps.train_step)`, through a
    # `functools.partial` too): it runs traced (SHL101 says where `jax.set_mesh` goes)
    jit_targets: list[list] = field(default_factory=list)
    # [caller, method reference]: a call of a method on a local object the caller (or a
    # function around it) built from a project class (`env = LogWrapper(base); ...
    # env.step(...)`): "<class reference>.<method>". Not call edges: read only by
    # ``ProjectIndex.called_only_traced`` (a jitted method whose every call is traced)
    method_calls: list[list[str]] = field(default_factory=list)
    # the callers (qualnames) of ``calls`` and ``method_calls`` that run traced in this module
    # (decorated with a jit or another transform, handed to one, or nested in one: a donation
    # asked of what they call is ignored)
    traced: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        """The summary as JSON data (what ``from_json`` reads back): fields left at their
        defaults are left out, and symbols, sites, call edges and entries are lists in their
        fields' order, not objects (the corpus' summaries: 18 MB instead of 21.5, a fifth
        faster to encode and to decode). Made by hand: ``asdict`` deep-copies every nested
        list of the flow summaries, the largest part (nothing changes a summary once made, so
        those are shared)."""
        out = {k: v for k, v in vars(self).items() if v or k in _ALWAYS}
        if self.symbols:
            out["symbols"] = {
                k: [v.kind, v.needs, v.refs, v.bases,
                    [[x.line, x.col, x.end_line, x.end_col, x.needs, x.api, x.spec]
                     for x in v.sites], v.line, v.flow]
                for k, v in self.symbols.items()}
        if self.calls:
            out["calls"] = [[c.caller, c.target, c.ctx, c.line, c.col, c.args]
                            for c in self.calls]
        if self.entries:
            out["entries"] = [[e.model, e.kind, e.scope, e.ctx, e.line, e.col, e.end_line,
                               e.end_col] for e in self.entries]
        return out

    @classmethod
    def from_json(cls, data: dict) -> ModuleSummary:
        s = cls(module=data["module"], path=data["path"])
        for key, value in data.items():
            if key not in _LAID_OUT:
                setattr(s, key, value)
        s.symbols = {k: Symbol(v[0], v[1], v[2], v[3], [Site(*x) for x in v[4]], v[5], v[6])
                     for k, v in data.get("symbols", {}).items()}
        s.calls = [CallEdge(*c) for c in data.get("calls", ())]
        s.entries = [Entry(*e) for e in data.get("entries", ())]
        return s


NNX_EVAL_SHAPE = "flax.nnx.eval_shape"

# (what ModuleSummary.to_json always writes; and what from_json reads by hand)
_ALWAYS = ("module", "path")
_LAID_OUT = frozenset({"module", "path", "symbols", "calls", "entries"})


_NAMES_ARGS = ("names", "sharding", "out_sharding", "sharding_names", "logical_axes")
# The arguments whose kind terms a call edge keeps (``_Summariser._arg_kinds``).
_KIND_ARGS = frozenset({ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Tuple, ast.List})


def _all_none_names(facts: FileFacts, c: CallSite) -> bool:
    """The partition names a boxing call is handed are a literal of only None."""
    node = next((k.value for k in c.node.keywords if k.arg in _NAMES_ARGS), None)
    if node is None and len(c.node.args) > 1 and c.api is not None and \
            c.api.name.endswith("partitioning"):
        node = c.node.args[1]  # with_partitioning(init, names) / with_logical_partitioning
    if node is None:
        return False
    value = facts.literal(node, c.scope)
    return isinstance(value, (tuple, list)) and bool(value) and all(v is None for v in value)


def without_positions(data: dict) -> dict:
    """A summary's JSON (``ModuleSummary.to_json``) with every line and column zeroed: what the
    summary says, whatever moved. Two summaries of a file that differ only where its code sits
    (a line added above) are equal here; the positions are only ever shown, in messages and
    related locations (see ``Cache.project_token``)."""
    zero = lambda p: [0, 0, 0, 0]  # noqa: E731
    out = dict(data)
    if "symbols" in data:  # [kind, needs, refs, bases, sites, line, flow]
        out["symbols"] = {
            k: [*v[:4], [[0, 0, 0, 0, *x[4:]] for x in v[4]], 0,
                map_positions(v[6], zero) if v[6] else v[6]]
            for k, v in data["symbols"].items()}
    if "calls" in data:  # [caller, target, ctx, line, col, args]
        out["calls"] = [[*c[:3], 0, 0, *c[5:]] for c in data["calls"]]
    if "entries" in data:  # [model, kind, scope, ctx, line, col, end_line, end_col]
        out["entries"] = [[*e[:4], 0, 0, 0, 0] for e in data["entries"]]
    if "config_tables" in data:
        out["config_tables"] = [{**t, "line": 0} if "line" in t else t
                                for t in data["config_tables"]]
    if "sharded_jit_params" in data:
        out["sharded_jit_params"] = [[*p[:2], 0, 0, 0, 0] for p in data["sharded_jit_params"]]
    if "sharded_jits" in data:
        out["sharded_jits"] = [[p[0], 0, 0, 0, 0] for p in data["sharded_jits"]]
    if "jit_targets" in data:
        out["jit_targets"] = [[*p[:2], 0, 0, 0, 0] for p in data["jit_targets"]]
    out.pop("path", None)
    return out


def site_needs(facts: FileFacts, c: CallSite) -> int:
    """What context a constraint call needs at trace time from its callers, after its own
    ``rules=``/``mesh=`` and the contexts the code around it enters or tests for."""
    if c.api is None:
        return 0
    needs = _NEEDS.get(c.api.role, 0)
    if c.api.role == Role.NNX_PARAM:
        needs = MESH if c.has_kwarg("out_sharding", "sharding", "sharding_names") else 0
    if c.api.role == Role.SHARDING_CONSTRAINT:
        # With a NamedSharding the mesh travels with the value; a bare spec needs a context mesh.
        spec = c.arg(1, "shardings")
        needs = MESH if spec is not None and _is_bare_spec(facts, spec, c.scope) else 0
    if c.has_kwarg("rules"):
        needs &= ~RULES
    if c.has_kwarg("mesh"):
        needs &= ~MESH
    # What the code around it enters or asks for itself (`with nn.logical_axis_rules(...):`,
    # `if nn.get_logical_axis_rules():`) is not needed from its callers.
    return needs & ~c.ctx


def _is_bare_spec(facts: FileFacts, node: ast.expr, scope: Scope) -> bool:
    if isinstance(node, ast.Name):
        value = facts.value_of(node.id, scope)
        if value is None:
            return False
        node = value
    if isinstance(node, ast.Call):
        known = facts.resolve(node.func)
        return known is not None and known.role == Role.PARTITION_SPEC
    return False


_RULES_SETTER, _RULES_PROVIDER, _MESH_PROVIDER, _MESH_SETTER = 1, 2, 4, 8


@dataclass(eq=False)
class _Fragment:
    """What one piece of code adds to the summary: a top-level statement, or a part of one
    visited again (reuse.py's *Parts*). Reused while that code is, so never changed once made
    (a part's fragment is complete once the parts inside it are in)."""

    line: int  # the statement's first line when made (see _at)
    symbols: dict[str, Symbol] = field(default_factory=dict)
    edges: list[CallEdge] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)
    provides: int = 0  # _RULES_SETTER | ...
    unknown: list[str] = field(default_factory=list)  # "mesh" / "rules" shardlint cannot read
    apis: set[str] = field(default_factory=set)
    # (config_tables.python_tables' three groups; lines: see _at)
    config_tables: tuple[list[dict], list[dict], list[dict]] = field(
        default_factory=lambda: ([], [], []))
    # Constraint sites of calls in a function defined outside the part (a body statement's,
    # in the function around it): (its qualname, the site), for the fragment around it.
    outer: list[tuple[str, Site]] = field(default_factory=list)
    partials: list[list] = field(default_factory=list)  # (ModuleSummary.partials: no positions)


def _at(log, frag: _Fragment) -> _Fragment:
    """The fragment of a statement the parser may have moved (by the same number of lines)."""
    if log.node is None or log.node.lineno == frag.line:
        return frag
    d = log.node.lineno - frag.line
    return _Fragment(
        log.node.lineno,
        {q: _shift_symbol(sym, d) for q, sym in frag.symbols.items()},
        [CallEdge(e.caller, e.target, e.ctx, e.line + d, e.col, e.args) for e in frag.edges],
        [Entry(e.model, e.kind, e.scope, e.ctx, e.line + d, e.col, e.end_line + d, e.end_col)
         for e in frag.entries],
        frag.provides, frag.unknown, frag.apis,
        tuple([{**t, "line": t["line"] + d} for t in group]  # type: ignore[arg-type]
              for group in frag.config_tables),
        [(q, _shift_site(x, d)) for q, x in frag.outer], frag.partials)


def _shift_site(x: Site, d: int) -> Site:
    return Site(x.line + d, x.col, x.end_line + d, x.end_col, x.needs, x.api, x.spec)


def _shift_symbol(sym: Symbol, d: int) -> Symbol:
    return Symbol(sym.kind, sym.needs, sym.refs, sym.bases, [_shift_site(x, d) for x in sym.sites],
                  sym.line + d, shift_flow(sym.flow, d) if sym.flow is not None else None)


def _is_super(node: ast.expr) -> bool:
    return type(node) is ast.Call and type(node.func) is ast.Name \
        and node.func.id == "super"  # type: ignore[attr-defined]


def _super_target(module: str, func: ast.expr, scope) -> str | None:
    """``super:<module>:<Class>.<method>`` for ``super().<method>(...)`` in a method of
    ``Class``: the value-flow layer finds which base class's method that is
    (``FlowIndex._callers_of``; other readers of call edges resolve no such target)."""
    if type(func) is not ast.Attribute or not _is_super(func.value):
        return None
    cls = scope.enclosing_class if scope.kind == "function" else None
    return f"super:{module}:{cls.qualname}.{func.attr}" if cls is not None else None


def _of_self(expr: ast.expr, scope) -> bool:
    """``self.<attr>`` read in a method (or a function nested in one)."""
    return type(expr) is ast.Attribute and type(expr.value) is ast.Name \
        and expr.value.id == "self" and scope.kind == "function"


def _hands_a_name(call: ast.Call, names: list[str]) -> bool:
    """Whether a call is handed one of ``names`` (a plain name argument or keyword value)."""
    for a in call.args:
        if type(a) is ast.Name and a.id in names:
            return True
    for kw in call.keywords:
        if type(kw.value) is ast.Name and kw.value.id in names:
            return True
    return False


def _near(node: ast.AST, edited: tuple[int, int, int]) -> bool:
    """Whether the edit (``Reuse.edited``: its first and last lines now) lies in or next to
    ``node`` (a function: its decorators too)."""
    first, last, _ = edited
    start = first_line(node)
    end = node.end_lineno or node.lineno  # type: ignore[attr-defined]
    return not (end < first - 1 or start > max(first, last) + 1)


def _moved(flow: dict | None, edited: tuple[int, int, int] | None) -> dict | None:
    """A function's flow of the previous build with its positions where they are now: those
    after the edit moved by the lines it added; None when a position lies in the edited lines
    (or the edit is not known)."""
    if flow is None or edited is None:
        return None
    first, last, delta = edited
    if "ret" not in flow and "mut" not in flow:
        return flow
    old_last = last - delta
    inside = False

    def move(p: list[int]) -> list[int]:
        nonlocal inside
        if first <= p[0] <= old_last or first <= p[2] <= old_last:
            inside = True
        return [p[0] + delta if p[0] > old_last else p[0], p[1],
                p[2] + delta if p[2] > old_last else p[2], p[3]]

    out = map_positions(flow, move)
    return None if inside else out if delta else flow


def _merge(frag: _Fragment, sub: _Fragment) -> None:
    """A part's fragment into the fragment of the statement around it, in order: what a
    fragment of the whole statement would hold (a function defined again keeps the last
    definition, with the sites of both; a site of a function defined outside the part goes to
    its symbol)."""
    symbols = frag.symbols
    for qual, sym in sub.symbols.items():
        prev = symbols.get(qual)
        if prev is not None:
            sym = replace(sym, needs=prev.needs | sym.needs, sites=prev.sites + sym.sites)
        symbols[qual] = sym
    for qual, site in sub.outer:
        target = symbols.get(qual)
        if target is None:
            frag.outer.append((qual, site))
        else:  # (made in this build, with the part that defines that function)
            target.needs |= site.needs
            target.sites.append(site)
    frag.edges.extend(sub.edges)
    frag.entries.extend(sub.entries)
    frag.partials.extend(sub.partials)
    frag.provides |= sub.provides
    frag.unknown.extend(sub.unknown)
    frag.apis |= sub.apis
    for mine, theirs in zip(frag.config_tables, sub.config_tables):
        mine.extend(theirs)


# The getters of the mesh `jax.set_mesh` sets: a function that reads the legacy resource
# environment and falls back to one of these (TransformerEngine's `_get_mesh`: the legacy
# `physical_mesh` if set, else `jax.sharding.get_abstract_mesh()`) already works under it.
_CURRENT_MESH_GETTERS = ("get_abstract_mesh", "get_concrete_mesh")


def _sets_legacy_env(f: FileFacts) -> bool:
    """An assignment of the legacy resource environment itself, `thread_resources.env = ...`
    (jaxopt's `setup_data_parallel_mesh`: `maps.thread_resources.env =
    maps.ResourceEnv(physical_mesh=mesh, loops=())`), anywhere in the file."""
    for node in walk_nodes(f.tree):
        if type(node) is ast.Assign:
            for t in node.targets:
                if type(t) is ast.Attribute and t.attr == "env" and \
                        type(t.value) in (ast.Attribute, ast.Name):
                    q = f.qualify(t.value)
                    if q is not None and q.startswith("jax.") and \
                            q.endswith(".thread_resources"):
                        return True
    return False


def _legacy_readers(f: FileFacts) -> list[str]:
    """The functions (qualnames; "" for module-level code) that read ``thread_resources``
    (``pxla.thread_resources.env.physical_mesh``), of a file that reads it: each read belongs
    to the innermost function whose lines hold it. A module-level name bound to it
    (``_RESOURCES = pxla.thread_resources``) is read where that name is. A function that also
    asks for the mesh ``jax.set_mesh`` sets (``jax.sharding.get_abstract_mesh()``,
    ``get_mesh()``) reads both, and is not counted: replacing ``with mesh:`` keeps it working."""
    functions = []
    todo = [f.module_scope]
    while todo:
        scope = todo.pop()
        todo.extend(scope.children.values())
        if scope.kind == "function":
            node = scope.node
            functions.append((node.lineno, node.end_lineno or node.lineno, scope.qualname))
    aliases: set[str] = set()
    bindings: set[int] = set()  # (the reads that only bind an alias)
    for stmt in f.tree.body:
        if type(stmt) is ast.Assign and type(stmt.value) is ast.Attribute \
                and stmt.value.attr == "thread_resources" \
                and all(type(t) is ast.Name for t in stmt.targets):
            aliases.update(t.id for t in stmt.targets)  # type: ignore[attr-defined]
            bindings.add(id(stmt.value))
    reads: set[str] = set()
    current: set[str] = set()  # (the functions that also read the mesh `jax.set_mesh` sets)
    for node in walk_nodes(f.tree):
        tp = type(node)
        if tp is ast.Attribute and node.attr == "thread_resources" and id(node) not in bindings \
                or tp is ast.Name and node.id in aliases and type(node.ctx) is ast.Load:
            line = node.lineno
        elif tp is ast.Call and _current_mesh_getter(f, node.func):
            current.add(_innermost(functions, node.lineno))
            continue
        else:
            continue
        reads.add(_innermost(functions, line))
    return sorted(q for q in reads if not q or q not in current)


def _innermost(functions: list[tuple[int, int, str]], line: int) -> str:
    inner = [(last - first, q) for first, last, q in functions if first <= line <= last]
    return min(inner)[1] if inner else ""


def _current_mesh_getter(f: FileFacts, func: ast.expr) -> bool:
    """A call of jax's getter of the mesh ``jax.set_mesh`` sets."""
    name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name \
        else None  # type: ignore[attr-defined]
    if name not in (*_CURRENT_MESH_GETTERS, "get_mesh"):
        return False
    q = f.qualify(func) or ""
    return q.startswith("jax.") and (name != "get_mesh" or q == "jax.sharding.get_mesh")


class _Summariser:
    def __init__(self, facts: FileFacts):
        self.f = facts
        self.out = ModuleSummary(facts.module, facts.path)
        self._name_kinds: dict[tuple[Scope, str], list] = {}  # see _arg_kinds
        self._names: dict[tuple[Scope, str], str | None] = {}  # see ref_name
        self._links: dict[Scope, set[str]] = {}  # see _linked
        self._methods: dict[int, tuple[list, dict[Scope, list[str]]]] = {}  # see _method_refs
        self.nnx = any(q == "flax.nnx" or q.startswith("flax.nnx.")
                       for q in facts.imports.names.values())

    def ref(self, node: ast.expr, scope: Scope) -> str | None:
        """A reference for a Name/Attribute: a symbol of this module or an imported name."""
        if type(node) is ast.Name:
            return self.ref_name(node.id, scope, node)
        parts = dotted(node)
        if parts is None:
            return None
        if parts[0] == "self" and len(parts) == 2:
            cls = scope.enclosing_class
            if cls is None and scope.parent is not None:
                cls = scope.parent.enclosing_class  # a lambda or nested def inside a method
            return f"{self.f.module}:{cls.qualname}.{parts[1]}" if cls else None
        found = scope.lookup(parts[0])
        if found is not None:
            owner, values = found
            if len(parts) == 1 and values:
                v = values[-1]
                if isinstance(v, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    qual = f"{owner.qualname}.{parts[0]}" if owner.qualname else parts[0]
                    return f"{self.f.module}:{qual}"
                if owner.kind == "module" and len(values) == 1:
                    return f"{self.f.module}:{parts[0]}"
            return None
        q = self.f.imports.qualify_parts(parts)
        return f"ext:{q}" if q and q.split(".", 1)[0] not in EXTERNAL_PACKAGES else None

    def ref_name(self, name: str, scope: Scope, node: ast.expr | None = None) -> str | None:
        """:meth:`ref` for a plain name (the common case, kept fast: the same name read in the
        same scope is looked up once)."""
        key = (scope, name)
        memo = self._names
        if key in memo:
            return memo[key]
        found = memo[key] = self._ref_name(name, scope)
        return found

    def _ref_name(self, name: str, scope: Scope) -> str | None:
        found = scope.lookup(name)
        if found is not None:
            owner, values = found
            if values:
                v = values[-1]
                if isinstance(v, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    qual = f"{owner.qualname}.{name}" if owner.qualname else name
                    return f"{self.f.module}:{qual}"
                if owner.kind == "module" and len(values) == 1:
                    return f"{self.f.module}:{name}"
            return None
        q = self.f.imports.names.get(name)
        return f"ext:{q}" if q and q.split(".", 1)[0] not in EXTERNAL_PACKAGES else None

    def build(self) -> ModuleSummary:
        f, out = self.f, self.out
        # Made per top-level statement and, in the language server, reused for the statements
        # an edit did not touch (reuse.py); the summary is assembled here.
        provides = 0
        unknown: list[str] = []
        apis: set[str] = set()
        tables: tuple[list[dict], list[dict], list[dict]] = ([], [], [])
        for frag in each_statement(f, "summary", self._fragment, refresh=_at):
            for qual, sym in frag.symbols.items():
                prev = out.symbols.get(qual)
                if prev is not None:
                    # Defined again by a later statement: the last definition is the symbol, as
                    # at run time; the constraint sites of every definition count.
                    sym = replace(sym, needs=prev.needs | sym.needs, sites=prev.sites + sym.sites)
                out.symbols[qual] = sym
            out.calls.extend(frag.edges)
            out.entries.extend(frag.entries)
            out.partials.extend(frag.partials)
            provides |= frag.provides
            unknown.extend(frag.unknown)
            apis |= frag.apis
            for mine, theirs in zip(tables, frag.config_tables):
                mine.extend(theirs)
        out.config_tables = [t for group in tables for t in group]  # (in the order one pass
        # over the whole file finds them: python_tables)
        # Module-level aliases: `Ensemble = nn.vmap(MLP, ...)`, `step = jax.jit(train_step)`.
        aliases = [(name, values[0]) for name, values in f.module_scope.bindings.items()
                   if len(values) == 1 and name not in out.symbols
                   and isinstance(values[0], (ast.Call, ast.Name, ast.Attribute))]
        for name, v in aliases:
            kind, refs = self._alias(name, v)
            out.symbols[name] = Symbol(kind, refs=refs, line=getattr(v, "lineno", 0),
                                       flow=self._instance(v) if kind == "value" else None)
        self._jit_entries()
        self._providers(provides, unknown)
        out.donating = exported_donations(f)
        out.apis = sorted(apis)
        out.mesh_kinds = [axis_kind(f, m) for m in f.meshes if m.call is not None]
        out.jitted = exported_jitted(f)
        out.method_calls = self._method_calls()
        out.traced = self._traced_callers(out)
        out.kept = self._kept()
        out.value_kinds = self._value_kinds()
        out.mesh_types = self._mesh_types()
        out.name_params, out.name_attrs, out.name_unless = exported_name_params(f)
        out.flags = exported_flags(f)
        out.legacy_env = Role.LEGACY_ENV in f.roles
        if out.legacy_env:
            out.legacy_readers = _legacy_readers(f)
            out.legacy_mesh_setter = _sets_legacy_env(f)
            if out.legacy_mesh_setter:  # (a legacy mesh it provides, as `with mesh:` does)
                out.mesh_provider = out.legacy_mesh = True
        out.eval_shape_users = sorted({c.scope.qualname for c in f.calls
                                       if c.api is not None and c.api.name == NNX_EVAL_SHAPE})
        out.pjit_callers = sorted({site.scope.qualname for site in f.jit_sites
                                   if site.api_name == PJIT and specs_may_be_bare(f, site)})
        out.imports = {name: q for name, q in f.imports.names.items()
                       if q.partition(".")[0] not in EXTERNAL_PACKAGES}
        out.runs = [[m, first, last] for m, _, first, last in
                    (*runnable.spans(f.tree), *newer_calls(f))]
        out.loads = sorted({m for m, _ in runnable.loads(f.tree, f.imports)})
        return out

    def _method_calls(self) -> list[list[str]]:
        """``ModuleSummary.method_calls``: ``x.m(...)``, or ``x.m`` handed to a call
        (``jax.vmap(env.step, ...)``), where ``x`` is an object built from a project class
        (CapWords, not a known API) by the caller, once, or by a function around it (its last
        binding there: what a closure reads once the function has run on). Only where the
        call is no call edge already."""
        out: dict[tuple[str, str], None] = {}  # (in the order found, each once)
        for c in self.f.calls:
            if not c.scope.qualname:
                continue
            func = c.node.func
            if c.api is None and type(func) is ast.Attribute:
                self._method_call(c.scope, func, out)
            for a in c.node.args:
                if type(a) is ast.Attribute:
                    self._method_call(c.scope, a, out)
        return [list(item) for item in out]

    def _method_call(self, scope: Scope, node: ast.Attribute,
                     out: dict[tuple[str, str], None]) -> None:
        if type(node.value) is not ast.Name or self.ref(node, scope) is not None:
            return
        found = scope.lookup(node.value.id)
        if found is None or found[0].kind != "function" or not found[1] \
                or found[0] is scope and len(found[1]) != 1:
            return
        made = found[1][-1]
        if type(made) is not ast.Call or type(made.func) not in (ast.Name, ast.Attribute) \
                or self.f.resolve(made.func) is not None:
            return
        cls = self.ref(made.func, found[0])
        last = cls.rpartition(":")[2].rpartition(".")[2] if cls else ""
        if cls is None or not last.lstrip("_")[:1].isupper():
            return
        out[(scope.qualname, f"{cls}.{node.attr}")] = None

    def _traced_callers(self, out: ModuleSummary) -> list[str]:
        """``ModuleSummary.traced``: of the callers of the module's edges and method calls."""
        callers = {e.caller for e in out.calls if e.caller} | {c for c, _ in out.method_calls}
        if not callers:
            return []
        execution, scopes = execution_of(self.f), self.f.scopes
        return sorted(q for q in callers if q in scopes and execution.scope_traced(scopes[q]))

    KEPT = "summary:kept"

    def _kept(self) -> list[list]:
        """``ModuleSummary.kept``: the liveness walk is asked only of the arguments a call's
        own assignment rebinds (`state = step(state, batch)`, `state, m = step(state)`), and
        only where the callee is named (see ``_callee``). In the language server, a call in a
        function the edit did not touch (nor a function around it) keeps the previous build's
        answer while no module-level name is bound differently: the walk reads that function's
        body, the names it sees through the functions around it and the module's. (A function
        nested in the edited one keeps its calls' answers unless a name it mentions is bound
        differently there: typing into a 600-line method with 40 nested functions.)"""
        out: list[list] = []
        reuse = self.f.reuse
        old = None
        new: dict | None = None
        holds: dict[Scope, bool] = {}
        if reuse is not None:
            new = {}
            if reuse.changed == frozenset() and reuse.edited is not None:  # type: ignore[attr-defined]
                old = reuse.carried.get(self.KEPT)  # type: ignore[attr-defined]
            reuse.results[self.KEPT] = new  # type: ignore[attr-defined]
        for c in self.f.calls:
            stmt = c.stmt
            if c.api is not None or type(stmt) is not ast.Assign or stmt.value is not c.node:
                continue
            if old is not None:
                found = old.get(c.node, _MISSING)
                if found is not _MISSING and self._kept_holds(c.scope, holds):
                    new[c.node] = found  # type: ignore[index]
                    if found is not None:
                        out.append(found)
                    continue
            found = self._kept_at(c, stmt)
            if new is not None:
                new[c.node] = found
            if found is not None:
                out.append(found)
        return out

    NAMES = "summary:names"

    def _kept_holds(self, scope: Scope, memo: dict[Scope, bool]) -> bool:
        """Whether the last build's ``_kept_at`` answers for the calls of ``scope`` hold (see
        ``_kept``): a function the edit is not in or next to, around which no function binds
        differently a name it mentions (module-level code: never). Once per scope and build."""
        found = memo.get(scope)
        if found is None:
            reuse = self.f.reuse
            found = scope.kind == "function" and not _near(scope.node, reuse.edited)  # type: ignore[union-attr]
            s = scope.parent
            names = None
            while found and s is not None and s.kind == "function":
                local = reuse.local_changed(s)  # type: ignore[union-attr]
                if local:
                    if names is None:
                        names = self._names_of(scope.node)
                    found = local.isdisjoint(names)
                s = s.parent
            memo[scope] = found
        return found

    def _names_of(self, node: ast.AST) -> frozenset[str]:
        """The names a function mentions, kept from build to build by its node (the parser
        gives a function that holds an edit a new one)."""
        reuse = self.f.reuse
        store = reuse.results.setdefault(self.NAMES, {})  # type: ignore[union-attr]
        names = store.get(node)
        if names is None:
            names = reuse.carried.get(self.NAMES, {}).get(node)  # type: ignore[union-attr]
            if names is None:
                names = mentions(node)
            store[node] = names
        return names

    def _kept_at(self, c: CallSite, stmt: ast.Assign) -> list | None:
        rebound = {t.id for target in stmt.targets for t in
                   (target.elts if type(target) in (ast.Tuple, ast.List) else (target,))
                   if type(t) is ast.Name}
        named: list[tuple[str, ast.expr]] = []
        for i, a in enumerate(c.node.args):
            if type(a) is ast.Starred:
                break
            named.append((str(i), a))
        named += [(kw.arg, kw.value) for kw in c.node.keywords if kw.arg is not None]
        named = [(k, a) for k, a in named if type(a) is ast.Name and a.id in rebound]
        if named:  # (the old value of a name the call rebinds is read only through an
            # alias: a name assigned from it, or it from one -- the walk only where one is)
            linked = self._linked(c.scope)
            named = [(k, a) for k, a in named if linked is None or a.id in linked]
        callee = self._callee(c) if named else None
        if callee is None:
            return None
        keys = [k for k, a in named if use_after(self.f, c, a) is not None]
        return [callee, keys] if keys else None

    def _value_kinds(self) -> dict[str, list]:
        """``ModuleSummary.value_kinds``: module-level names bound once to a call whose kind
        terms may say a mesh."""
        f = self.f
        scope = f.module_scope
        out: dict[str, list] = {}
        for name, values in scope.bindings.items():
            if len(values) != 1 or type(values[0]) is not ast.Call:
                continue
            terms = kind_terms(f, scope, values[0], self.ref, None)
            if any(t[0] in ("mesh", "c") for t in terms):
                out[name] = terms
        return out

    def _mesh_types(self) -> list[str]:
        """``ModuleSummary.mesh_types``: module-level names bound once to the mesh class, or
        imported as it."""
        f = self.f
        out = [name for name, values in f.module_scope.bindings.items()
               if len(values) == 1 and type(values[0]) in (ast.Name, ast.Attribute)
               and (known := f.resolve(values[0])) is not None and known.role is Role.MESH]
        out += [name for name, q in f.imports.names.items()
                if (known := lookup(q)) is not None and known.role is Role.MESH
                and name not in out]
        return sorted(out)

    def _linked(self, scope: Scope) -> set[str] | None:
        """The names of a function body that an assignment links to another name's value
        (``old = state``, ``s = state.params``, ``d = {"p": params}``, both sides): the only
        ones whose old value a later read may reach (``liveness._aliases``); None at module
        level (not collected)."""
        if scope.kind != "function":
            return None
        memo = self._links
        found = memo.get(scope)
        if found is None:
            found = memo[scope] = set()
            for name, values in scope.assigned.items():
                for a in values:
                    v = a.value
                    if v is not None and a.index and type(v) is ast.Tuple \
                            and a.index[0] < len(v.elts):
                        v = v.elts[a.index[0]]
                    elif a.index:
                        continue
                    roots = {source[0] for _, source in shared_parts(v)} if v is not None \
                        else set()
                    if roots - {name}:
                        found.add(name)
                        found |= roots
        return found

    def _callee(self, c: CallSite) -> str | None:
        """A called callable as ``jit_sites.remote_names`` spells it: a reference, ``ref()``
        for what a local name bound once holds from a call of ``ref``, ``ref().attr`` for the
        attribute of an instance (``Trainer().step``, ``t = Trainer()`` ... ``t.step``)."""
        func = c.node.func
        direct = self.ref(func, c.scope)
        if direct is not None:
            return direct
        value: ast.expr | None = func
        if type(func) is ast.Name:
            value = bound_once(c.scope, func.id)
        if type(value) is ast.Call:
            r = self.ref(value.func, c.scope)
            return f"{r}()" if r is not None else None
        if type(value) is ast.Attribute:
            made = value.value
            if type(made) is ast.Name:
                made = bound_once(c.scope, made.id)
            if type(made) is ast.Call:
                r = self.ref(made.func, c.scope)
                return f"{r}().{value.attr}" if r is not None else None
        return None

    def _fragment(self, part) -> _Fragment:
        """What one top-level statement adds: the symbols of its functions and classes with
        their constraint sites, and what its calls add (``part``: see reuse.each_statement).

        In the language server a class is one statement of thousands of lines: a statement
        the facts visited again is made from its parts, and the part of a member or of a body
        statement that the facts replayed keeps its fragment unless a name it mentions is bound
        differently (``Reuse.part_valid``): typing into one statement of a method makes that
        statement's fragment again, and the method's own symbol."""
        reuse = self.f.reuse
        if getattr(part, "parts", None) is not None and reuse is not None and part in reuse.fresh:
            return self._assembled(part)
        return self._made(part, part.calls, part)

    PARTS = "summary:parts"
    ATTRS = "summary:attrs"

    def _assembled(self, log) -> _Fragment:
        """The fragment of a log visited again, from its parts (see ``_fragment``)."""
        reuse = self.f.reuse
        carried = reuse.carried.get(self.PARTS, {}) if reuse.changed is not None else {}
        store = reuse.results.setdefault(self.PARTS, {})
        frag = _Fragment(log.node.lineno if log.node is not None else 0)
        for p in log.parts:
            if type(p) is Chunk:
                sub = self._made(p, log.calls, log)
            else:
                old = carried.get(p)
                if old is not None and reuse.part_valid(p):
                    sub = _at(p, old)
                elif p.parts is not None and p in reuse.fresh and carried:
                    sub = self._assembled(p)  # (visited again: made from its parts)
                else:
                    sub = self._made(p, p.calls, p)
                store[p] = sub
            _merge(frag, sub)
        return frag

    def _made(self, part, calls: list[CallSite], log=None) -> _Fragment:
        """What a piece of code adds, made from its scopes and calls (``calls``: those of the
        code its functions are in, whose calls they flow through; ``log``: the log it is part
        of, whose members' attributes a class reuses)."""
        frag = _Fragment(part.node.lineno if part.node is not None else 0)
        symbols = frag.symbols
        by_scope: dict[Scope, list[ast.Call]] | None = None
        mesh_calls: dict[Scope, list[CallSite]] | None = None
        methods: dict[Scope, list[str]] | None = None
        for qual, scope in part.scopes:  # a redefinition in the statement keeps the last one
            if scope.kind == "function" and methods is None:
                methods = self._method_refs(calls)
            refs, bases = self._scope_refs(scope, methods)
            if scope.kind == "function":
                if mesh_calls is None:
                    by_scope, mesh_calls = self._by_scope(calls)
                flow = self._flow(scope, by_scope.get(scope) if by_scope is not None else None,
                                  mesh_calls.get(scope, ()))
            else:
                attrs = class_attributes(self.f, scope, self.ref, self._of_method(log))
                flow = {"attrs": attrs} if attrs else None
            symbols[qual] = Symbol(scope.kind, refs=refs, bases=bases,
                                   line=getattr(scope.node, "lineno", 0), flow=flow)
        apis = frag.apis
        for c in part.calls:
            if c.api is not None:
                apis.add(c.api.name)
            self._make_call(c, frag)
        frag.config_tables = python_tables(self.f, part.scopes, part.calls)
        return frag

    FLOW = "summary:flow"

    def _flow(self, scope: Scope, calls: list[ast.Call] | None, mesh_calls) -> dict | None:
        """``function_flow`` of a function; in the language server, of a function visited again
        (typing into one statement of a 600-line method), the previous build's with its
        positions moved, when nothing it reads changed: the same header, the same values
        returned, calls dropped, stores and calls it follows (the same nodes: the parser keeps
        an untouched statement's), and no name bound differently that its other statements
        read (``Reuse.flow_holds``)."""
        reuse = self.f.reuse
        if reuse is None:
            return function_flow(self.f, scope, self.ref, calls, mesh_calls)
        node = scope.node
        # (of ``calls``, the flow reads those handed a parameter, ``_mutations``: typing
        # ``h = f(a)`` makes a call of no parameter, a new one at every keystroke)
        params = scope.params
        handed = [c for c in calls if _hands_a_name(c, params)] if calls else ()
        key = (node.args, node.returns, *node.decorator_list, None, *scope.returns, None,
               *scope.expr_calls, None, *(x for store in scope.stores for x in store), None,
               calls is None, bool(calls), *handed, None, *mesh_calls)
        old = reuse.carried.get(self.FLOW, {}).get(scope)
        flow = None
        if old is not None and len(old[0]) == len(key) \
                and all(a is b for a, b in zip(old[0], key)) and reuse.flow_holds(scope):
            flow = _moved(old[1], reuse.edited)
        if flow is None:
            flow = function_flow(self.f, scope, self.ref, calls, mesh_calls)
        reuse.results.setdefault(self.FLOW, {})[scope] = (key, flow)
        return flow

    def _by_scope(self, calls: list[CallSite]
                  ) -> tuple[dict[Scope, list[ast.Call]] | None, dict[Scope, list[CallSite]]]:
        """Per scope: the calls that may change an NNX argument in place (valueflow.py; None
        outside NNX code) and those that hand on a mesh."""
        by_scope: dict[Scope, list[ast.Call]] | None = None
        if self.nnx:
            by_scope = {}
            for c in calls:
                if c.api is None:
                    by_scope.setdefault(c.scope, []).append(c.node)
        mesh_calls: dict[Scope, list[CallSite]] = {}
        for c in calls:
            if c.api is not None and c.api.name in MESH_ARGUMENTS:
                mesh_calls.setdefault(c.scope, []).append(c)
        return by_scope, mesh_calls

    def _of_method(self, log):
        """``class_attributes``' ``of_method`` for a class statement visited again: a method
        whose member the facts replayed, and whose part still holds, sets what it set."""
        reuse = self.f.reuse
        if log is None or reuse is None or not log.parts:
            return None
        members = {p.scopes[0][1]: p for p in log.parts
                   if type(p) is not Chunk and p.scopes and p.scopes[0][1].kind == "function"}
        carried = reuse.carried.get(self.ATTRS, {}) if reuse.changed is not None else {}
        store = reuse.results.setdefault(self.ATTRS, {})

        def of_method(method: Scope) -> dict[str, list]:
            member = members.get(method)
            found = carried.get(member) if member is not None else None
            if found is None or not reuse.part_valid(member):
                found = method_attributes(self.f, method, self.ref)
            if member is not None:
                store[member] = found
            return found
        return of_method

    def _scope_refs(self, scope: Scope, methods: dict[Scope, list[str]] | None = None
                    ) -> tuple[list[str], list[str]]:
        """References and bases of a function or class symbol (``methods``: ``_method_refs``
        of calls that hold all of a function's own)."""
        module = self.f.module
        refs = []
        for name in sorted(scope.references):
            r = self.ref_name(name, scope) if "." not in name else self._attribute_ref(name, scope)
            if r and r not in refs:
                refs.append(r)
        cls = scope if scope.kind == "class" else None
        for name in sorted(scope.self_calls):
            owner = cls or scope.enclosing_class
            if owner is not None:
                refs.append(f"{module}:{owner.qualname}.{name}")
        if scope.kind == "class":
            refs.extend(f"{module}:{c.qualname}" for c in scope.children.values())
        elif scope.kind == "function":
            refs.extend((methods if methods is not None else self._method_refs(self.f.calls))
                        .get(scope, ()))
        return refs, list(scope.bases)

    def _method_refs(self, calls: list[CallSite]) -> dict[Scope, list[str]]:
        """``meth:<class>#<name>`` for each call ``x.name(...)`` of a function whose ``x`` is a
        parameter annotated with a class (its own or an enclosing function's: ``model:
        FlaxPreTrainedModel``, ``Optional[...]``, ``... | None``). The class is ``ext:`` and
        its dotted name where imported, or this module's ``mod:Qual``. The index follows it to
        the methods of that name of the project's subclasses of the class
        (``ProjectIndex.traced_under_sharded_jits``: class-hierarchy edges, kept apart from the references
        other closures follow). Of ``calls`` (a piece of code's: a keystroke asks about the
        edited method's, not every call of the file), once per list."""
        made = self._methods.get(id(calls))
        if made is not None and made[0] is calls:
            return made[1]
        out: dict[Scope, list[str]] = {}
        for c in calls:
            func = c.node.func
            if c.api is not None or type(func) is not ast.Attribute \
                    or type(func.value) is not ast.Name:
                continue
            found = c.scope.lookup(func.value.id)
            if found is None or found[0].kind != "function":
                continue
            owner = found[0]
            ann = owner.annotations.get(func.value.id) if func.value.id in owner.params \
                else None
            cls = self._annotated_class(ann, owner) if ann is not None else None
            if cls is not None:
                ref = f"meth:{cls}#{func.attr}"
                refs = out.setdefault(c.scope, [])
                if ref not in refs:
                    refs.append(ref)
        self._methods[id(calls)] = (calls, out)
        return out

    def _annotated_class(self, ann: ast.expr, scope: Scope) -> str | None:
        ann = optional_of(ann) or ann
        parts = dotted(ann)
        if parts is None or parts[0] in ("self", "cls"):
            return None
        found = scope.lookup(parts[0])
        if found is not None:
            values = found[1]
            if len(parts) == 1 and values and isinstance(values[-1], ast.ClassDef):
                owner = found[0]
                return f"{self.f.module}:{owner.qualname + '.' if owner.qualname else ''}" \
                       f"{parts[0]}"
            return None
        q = self.f.imports.qualify_parts(parts)
        return q if q and q.split(".", 1)[0] not in ("typing", "builtins") else None

    def _jit_targets(self) -> list[list]:
        """:attr:`ModuleSummary.jit_targets` of this module: what its jit sites compile of
        other modules (its own functions' it reads from the file itself)."""
        out: list[list] = []
        f = self.f
        for site in f.jit_sites:
            if site.function is not None:
                continue  # (a decorated function is this module's)
            t = wrapped_callable(f, site.target, site.scope)
            if t is None:
                continue
            ref = self.ref(t, site.scope)
            if ref is None or ref.startswith(f"{f.module}:"):
                continue
            n = site.node
            entry = [ref, site.api_name, n.lineno, n.col_offset, n.end_lineno or n.lineno,
                     n.end_col_offset or 0]
            if entry not in out:
                out.append(entry)
        return out

    def _sharded_jits(self) -> list[list]:
        """:attr:`ModuleSummary.sharded_jits` of this module."""
        out: list[list] = []
        for site in self.f.jit_sites:
            if not is_sharded(self.f, site):
                continue
            if site.function is not None:
                key = f"{self.f.module}:{site.function.qualname}"
            elif isinstance(site.target, (ast.Name, ast.Attribute)):
                key = self.ref(site.target, site.scope)
            else:
                key = None
            n = site.node
            entry = [key, n.lineno, n.col_offset, n.end_lineno or n.lineno, n.end_col_offset or 0]
            if key is not None and entry not in out:
                out.append(entry)
        return out

    def _attribute_ref(self, name: str, scope: Scope) -> str | None:
        """``attr:ext:pkg.layers.Dense`` for ``layers.Dense`` read in a body (``from pkg import
        layers``): a reference the index follows for what a symbol's code reaches
        (``ProjectIndex.reachable``) but not, yet, for the contexts it needs -- through a
        module's attributes those reach factories whose closures run under contexts of their
        own, which the needs do not model (docs/analysis.md)."""
        parts = name.split(".")
        found = scope.lookup(parts[0])
        if found is not None:  # (a local of that name, not the import)
            return self._member_ref(parts[0], parts[1], scope, found) if len(parts) == 2 \
                else None
        q = self.f.imports.qualify_parts(parts)
        return f"attr:ext:{q}" if q and q.split(".", 1)[0] not in EXTERNAL_PACKAGES else None

    def _member_ref(self, head: str, attr: str, scope: Scope, found) -> str | None:
        """What ``head.attr`` read in a body references, ``head`` a name of this module
        (``visitor._chain``): where ``head`` is a class of it that defines ``attr`` as a
        function or class (a classmethod aside: it builds the class as a rule), that member
        (``mod:Trainer.tokenize``); else what ``head`` references (the class: an inherited
        member, a class attribute; a module-level value)."""
        owner, values = found
        if values and type(values[-1]) is ast.ClassDef:
            cls = owner.children.get(head)
            member = cls.children.get(attr) if cls is not None and cls.node is values[-1] \
                else None
            if member is not None and (member.kind == "class" or not any(
                    type(d) is ast.Name and d.id == "classmethod" for d in member.decorators)):
                return f"{self.f.module}:{member.qualname}"
        return self.ref_name(head, scope)

    def _alias(self, name: str, v: ast.expr) -> tuple[str, list[str]]:
        refs = set()
        for n in walk_nodes(v):
            if isinstance(n, (ast.Name, ast.Attribute)):
                r = self.ref(n, self.f.module_scope)
                if r and r != f"{self.f.module}:{name}":
                    refs.add(r)
        return self._alias_kind(v), sorted(refs)

    def _is_def(self, name: str, scope: Scope) -> bool:
        found = scope.lookup(name)
        return found is not None and bool(found[1]) and isinstance(
            found[1][-1], (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))

    def _instance(self, value: ast.expr) -> dict | None:
        """``{"instance": ref}`` for a module-level object built by a call of a project class
        (``sharding = _ShardingAPI()``), whose methods a call ``sharding.m(x)`` in another
        module runs (valueflow: its ``self`` is the object); None for any other value."""
        if not isinstance(value, ast.Call) or not isinstance(value.func, (ast.Name, ast.Attribute)) \
                or self.f.resolve(value.func) is not None:
            return None
        ref = self.ref(value.func, self.f.module_scope)
        last = ref.rpartition(":")[2].rpartition(".")[2] if ref else ""
        return {"instance": ref} if last.lstrip("_")[:1].isupper() else None

    def _alias_kind(self, value: ast.expr) -> str:
        if isinstance(value, (ast.Name, ast.Attribute)):
            return "alias"
        if isinstance(value, ast.Call):
            known = self.f.resolve(value.func) if isinstance(value.func, (ast.Name, ast.Attribute)) \
                else None
            if known is not None and known.role in _WRAPPERS:
                return "alias"
            q = self.f.qualify(value.func) if isinstance(value.func, (ast.Name, ast.Attribute)) \
                else None
            if q in ("jax.vmap", "jax.pmap", "jax.named_call", "jax.grad", "jax.value_and_grad"):
                return "alias"
        return "value"

    def _make_call(self, c: CallSite, frag: _Fragment) -> None:
        f = self.f
        edges, entries = frag.edges, frag.entries
        needs = site_needs(f, c)
        n = c.node
        # (a box made with its own `mesh=`/`rules=` needs no context, but it is still a box:
        # a lift that stacks it must name the new axis -- kept, with no needs)
        if (needs or c.api is not None and c.api.role in _BOX_ROLES) and c.scope.qualname:
            site = Site(n.lineno, n.col_offset, n.end_lineno or n.lineno, n.end_col_offset or 0,
                        needs, c.api.name if c.api else "",
                        "none" if _all_none_names(f, c) else "")
            sym = frag.symbols.get(c.scope.qualname)
            if sym is not None:
                sym.needs |= needs
                sym.sites.append(site)
            else:  # (a body statement's call, in the function around it)
                frag.outer.append((c.scope.qualname, site))
        func = n.func
        if c.api is not None and c.api.role == Role.EVAL_SHAPE:
            # `jax.eval_shape(init_state, ...)` traces on shapes: whatever it runs needs no
            # context, so this "call" provides all of them.
            for a in n.args[:1]:
                r = self.ref(a, c.scope) if isinstance(a, (ast.Name, ast.Attribute)) else None
                if r is not None:
                    edges.append(CallEdge(c.scope.qualname, r, ALL, a.lineno, a.col_offset))
        if c.api is not None and c.api.role == Role.PARTIAL and n.args and \
                isinstance(n.args[0], (ast.Name, ast.Attribute)):
            bound_to = self.ref(n.args[0], c.scope)
            if bound_to is not None:
                kinds = self._arg_kinds(c, shift=1)
                if kinds is not None:
                    kinds["#n"] = 99  # (the later call passes the rest: not known here)
                    kinds.pop("#kw", None)
                    # (what it binds, whatever the values: positions and keywords)
                    kinds["#b"] = [len(n.args) - 1, [k.arg for k in n.keywords if k.arg]]
                    frag.partials.append([c.scope.qualname, bound_to, kinds])
        target = None
        if c.api is None:
            target = self.ref(func, c.scope) or _super_target(f.module, func, c.scope)
            if target is not None:
                edges.append(CallEdge(c.scope.qualname, target, c.ctx, n.lineno, n.col_offset,
                                      self._arg_kinds(c)))
            else:
                # A call of a `functools.partial` (in place, or bound once to a local name): a
                # call of the function it wraps, with what the partial bound and what is passed
                partial = self._partial_called(func, c.scope)
                bound_to = self.ref(partial.args[0], c.scope) if partial is not None else None
                if bound_to is not None:
                    whole = ast.Call(partial.args[0], [*partial.args[1:], *n.args],  # type: ignore[union-attr]
                                     [*partial.keywords, *n.keywords])  # type: ignore[union-attr]
                    edges.append(CallEdge(c.scope.qualname, bound_to, c.ctx, n.lineno,
                                          n.col_offset, self._arg_kinds(c, node=whole)))
            # A function handed to another call (`app.run(main)`) runs under this call's context.
            if c.scope.kind == "module":
                for a in n.args:
                    if isinstance(a, ast.Name) and self._is_def(a.id, c.scope):
                        r = self.ref(a, c.scope)
                        if r and r.startswith(f"{f.module}:"):
                            edges.append(CallEdge("", r, c.ctx, a.lineno, a.col_offset))
        if not c.abstract:
            # Entries: model.init(...) / model.apply(...) / NNX constructors.
            if isinstance(func, ast.Attribute) and func.attr in ENTRY_METHODS:
                model = self._model_ref(func.value, c.scope) or self._handed(func.value, c.scope)
                if model is not None:
                    entries.append(self._entry(model, "apply" if func.attr == "apply" else "init",
                                               c, n))
            # NNX modules are classes: a local ClassDef, or an imported CapWords name (`target`,
            # the callee's reference, from above). A module handed a mesh
            # (`Transformer(config, mesh, rngs=...)`) partitions with it and needs no context mesh.
            elif c.api is None and target is not None \
                    and target.replace(":", ".").rpartition(".")[2][:1].isupper() \
                    and not self._passes_mesh(c):
                entries.append(self._entry(target, "nnx", c, n))
        provides, unknown = self._provides(c)
        frag.provides |= provides
        if unknown:
            frag.unknown.append(unknown)

    def _partial_called(self, func: ast.expr, scope: Scope) -> ast.Call | None:
        """The ``functools.partial(f, ...)`` call a call's function is: written in place, or
        a local name of the function bound to it once."""
        if isinstance(func, ast.Name):
            func = bound_once(scope, func.id)  # type: ignore[assignment]
        if not isinstance(func, ast.Call) or not func.args or \
                not isinstance(func.args[0], (ast.Name, ast.Attribute)) or \
                not isinstance(func.func, (ast.Name, ast.Attribute)):
            return None
        known = self.f.resolve(func.func)
        return func if known is not None and known.role == Role.PARTIAL else None

    def _arg_kinds(self, c: CallSite, shift: int = 0,
                   node: ast.Call | None = None) -> dict[str, list] | None:
        """Kind terms of the arguments that may be meshes (names, ``self.x``, calls), for the
        value-flow layer's "every caller passes a mesh"; ``shift``: positional arguments that
        are not the callee's (``partial(f, a)``: ``a`` is f's first); ``node``: the call as
        the callee sees it, where that is not the call written."""
        n = node if node is not None else c.node
        if shift:  # (the partial's target, called with what follows it)
            n = ast.Call(n.args[0], n.args[shift:], n.keywords)
        out: dict[str, list] = {}
        scope = c.scope
        assigned = scope.assigned if scope.kind == "function" else None
        starred = False
        # (one pass, no pairs made: a call of a project function is the commonest call there is)
        for i, a in enumerate(n.args):
            tp = type(a)
            if tp is ast.Starred:
                starred = True  # (what follows lands at positions not known)
                break
            if tp in _KIND_ARGS:
                terms = self._kinds_of(scope, a, tp, assigned)
                if terms and interesting(terms):
                    out[str(i)] = list(terms)
            elif tp is ast.Constant and a.value is None:  # type: ignore[attr-defined]
                out[str(i)] = [["none"]]  # (`rules=None`: the callee's default table)
        kwargs = False
        for k in n.keywords:
            if k.arg is None:
                kwargs = True
            elif not starred and type(k.value) in _KIND_ARGS:
                terms = self._kinds_of(scope, k.value, type(k.value), assigned)
                if terms and interesting(terms):
                    out[k.arg] = list(terms)
            elif not starred and type(k.value) is ast.Constant and k.value.value is None:
                out[k.arg] = [["none"]]
        if not out and (starred or kwargs):
            return None  # (nothing known of what it passes)
        # (a call that passes nothing worth a kind still says which parameters it leaves
        # out: their defaults are used -- `PjitPartitioner(num_partitions=1)`)
        # (`**kwargs`, `*args`: anything may be passed)
        out["#n"] = 99 if starred or kwargs else len(n.args)
        passed = [k.arg for k in n.keywords if k.arg is not None and k.arg not in out] \
            if not starred else []
        if passed:  # (the other keywords it passes: a default left unused)
            out["#kw"] = passed  # type: ignore[assignment]
        func = n.func
        if type(func) is ast.Attribute and (type(func.value) is ast.Name and func.value.id in (
                "self", "cls") or _is_super(func.value)):  # type: ignore[attr-defined]
            out["self"] = [["implicit"]]
        return out

    def _kinds_of(self, scope: Scope, a: ast.expr, tp: type, assigned) -> list[list]:
        """``kind_terms`` of one argument ``a`` (of type ``tp``) of a call in ``scope``."""
        if tp is ast.Name:
            # (what a name is does not depend on where in its function it is read: the
            # same name handed to many calls is traced once)
            memo = (scope, a.id)  # type: ignore[attr-defined]
            terms = self._name_kinds.get(memo)
            if terms is None:
                terms = self._name_kinds[memo] = kind_terms(
                    self.f, scope, a, self.ref, None, assigned=assigned)
            return terms
        return kind_terms(self.f, scope, a, self.ref, None, assigned=assigned)

    def _provides(self, c: CallSite) -> tuple[int, str | None]:
        """The contexts a call provides (``_RULES_SETTER``...), and whether it makes a mesh or
        a rules table shardlint cannot read ("mesh" / "rules")."""
        provides = 0
        if c.api is not None:
            role = c.api.role
            if role == Role.RULES_SETTER:
                provides |= _RULES_SETTER | _RULES_PROVIDER
            elif role == Role.RULES_CONTEXT:
                provides |= _RULES_PROVIDER
            elif role == Role.MESH_CONTEXT:
                provides |= _MESH_PROVIDER
                if c.api.name == "jax.set_mesh" and isinstance(c.stmt, ast.Expr) \
                        and c.stmt.value is c.node:
                    provides |= _MESH_SETTER
            if c.has_kwarg("rules"):
                provides |= _RULES_PROVIDER
            return provides, None
        # A mesh or rules call that does not resolve (star import, re-export shardlint does not
        # know) still makes a mesh / a table: its names are unknown, so the sets are incomplete.
        func = c.node.func
        last = func.attr if type(func) is ast.Attribute else \
            func.id if type(func) is ast.Name else None  # type: ignore[attr-defined]
        if last not in _MESH_LIKE and last not in _RULES_LIKE:
            return provides, None  # (cheap test first: most calls are neither)
        parts = dotted(func)
        if parts and parts[-1] in _MESH_LIKE:
            return provides, "mesh"
        if parts and parts[-1] in _RULES_LIKE:
            return provides, "rules"
        return provides, None

    def _passes_mesh(self, c: CallSite) -> bool:
        for kw in c.node.keywords:
            if kw.arg is not None and "mesh" in kw.arg.lower():
                return True
        for a in [*c.node.args, *(kw.value for kw in c.node.keywords)]:
            parts = dotted(a)
            if parts is not None and "mesh" in parts[-1].lower():
                return True
            if self.f.mesh_for(a, c.scope) is not None:
                return True
        return False

    @staticmethod
    def _entry(model: str, kind: str, c: CallSite, node: ast.AST) -> Entry:
        return Entry(
            model, kind, c.scope.qualname, c.ctx, node.lineno, node.col_offset,  # type: ignore[attr-defined]
            node.end_lineno or node.lineno, node.end_col_offset or 0)  # type: ignore[attr-defined]

    def _model_ref(self, node: ast.expr, scope: Scope) -> str | None:
        """The class a model expression is an instance of: `model` bound to `MLP(...)`."""
        if isinstance(node, ast.Name):
            value = self.f.value_of(node.id, scope)
            if not isinstance(value, ast.Call):
                return None
            node = value
        if isinstance(node, ast.Call):
            return self.ref(node.func, scope) if isinstance(node.func, (ast.Name, ast.Attribute)) \
                else self._lift_ref(node.func, scope)
        return None

    @staticmethod
    def _handed(node: ast.expr, scope: Scope) -> str | None:
        """``#param:<function>#<name>`` for a model that is a parameter of the function (its
        own, or one it is nested in), ``#attr:<class>#<name>`` for one kept on ``self`` in a
        method: the value flow says which classes callers hand there, or the class's methods
        store there (``ProjectIndex.handed_classes``)."""
        parts = dotted(node) if type(node) is ast.Attribute else \
            [node.id] if type(node) is ast.Name else None  # type: ignore[attr-defined]
        if parts is None or len(parts) > 4:
            return None
        if parts[0] == "self" and len(parts) > 1:
            cls = scope.enclosing_class
            return f"#attr:{cls.qualname}#{'.'.join(parts[1:])}" if cls is not None else None
        found = scope.lookup(parts[0])
        if found is None or found[0].kind != "function" or parts[0] not in found[0].params:
            return None
        # (`pipeline.flux.apply(...)`: what the classes handed in keep in `flux`)
        return f"#param:{found[0].qualname}#{'.'.join(parts)}"

    def _lift_ref(self, node: ast.expr, scope: Scope) -> str | None:
        """`nn.vmap(MLP, ...)()`: the lifted class."""
        if isinstance(node, ast.Call):
            known = self.f.resolve(node.func)
            if known is not None and known.role in (Role.LINEN_LIFT, Role.REMAT) and node.args:
                return self._model_ref(ast.Call(func=node.args[0], args=[], keywords=[]), scope) \
                    if isinstance(node.args[0], (ast.Name, ast.Attribute)) else None
        return None

    def _jit_entries(self) -> None:
        """`init_fn = jax.jit(model.init)`: the model runs where `init_fn` is called."""
        f = self.f
        for site in f.jit_sites:
            t = site.target
            if not (isinstance(t, ast.Attribute) and t.attr in ENTRY_METHODS):
                continue
            model = self._model_ref(t.value, site.scope)
            if model is None:
                continue
            kind = "apply" if t.attr == "apply" else "init"
            if kind == "init" and site.has("out_shardings", "out_axis_resources"):
                # The parameters are placed by out_shardings whatever the constraints inside
                # do (a bare PartitionSpec there is SHL104's business).
                continue
            call = f.call_at(site.node) if isinstance(site.node, ast.Call) else None
            if site.bound_name is None:
                if call is not None and not call.abstract:
                    self.out.entries.append(self._entry(model, kind, call, site.node))
                continue
            for c in f.calls:
                if isinstance(c.node.func, ast.Name) and c.node.func.id == site.bound_name \
                        and not c.abstract and c.scope.lookup(site.bound_name) is not None \
                        and c.scope.lookup(site.bound_name)[0] is site.scope:  # type: ignore[index]
                    self.out.entries.append(self._entry(model, kind, c, c.node))

    def _providers(self, provides: int, unknown: list[str]) -> None:
        f, out = self.f, self.out
        out.rules_setter = bool(provides & _RULES_SETTER)
        out.rules_provider = bool(provides & _RULES_PROVIDER)
        out.mesh_provider = bool(provides & _MESH_PROVIDER)
        out.mesh_setter = bool(provides & _MESH_SETTER)
        out.mesh_context = bool(provides & (_MESH_PROVIDER | _MESH_SETTER))
        if any(w.kind == "legacy_mesh" for w in f.with_items):
            out.mesh_provider = out.legacy_mesh = True
        for w in f.other_withs:  # `with mesh:` of a mesh from a helper: the layer decides
            s = w.scope
            terms = kind_terms(f, s, w.expr, self.ref, None,
                               assigned=s.assigned if s.kind == "function" else None)
            if terms and any(t[0] in ("mesh", "c", "p", "a", "sym") for t in terms):
                # (the model entries in its body, by their place in `entries`: not lines, so
                # that a summary moved by a line added above it is the same summary)
                stmt = w.stmt
                first = stmt.body[0].lineno if stmt.body else stmt.lineno
                last = stmt.end_lineno or stmt.lineno
                inside = [i for i, e in enumerate(out.entries)
                          if e.scope == s.qualname and first <= e.line <= last]
                calls = [i for i, e in enumerate(out.calls)
                         if e.caller == s.qualname and first <= e.line <= last]
                out.with_mesh_terms.append([f"{f.module}:{s.qualname}", terms, inside, calls])
                out.legacy_mesh = True
        for t in f.rule_tables:
            if t.entries is not None:
                out.rule_tables.append([list(e) for e in t.entries])
            elif t.local:
                continue  # one call's own table: not what the project's contexts provide
            else:
                q = f.qualify(t.expr) if isinstance(t.expr, (ast.Name, ast.Attribute)) else None
                # (`self._rules` in a method: what the class assigns it, a key only if not)
                key = table_key(t.expr) if not _of_self(t.expr, t.scope) else None
                if q is not None:
                    out.rule_table_refs.append(q)
                elif key is not None:  # `nn.logical_axis_rules(config.logical_axis_rules)`
                    out.rule_table_keys.append(key)
                else:
                    # A name, a parameter, a helper's result: the value-flow layer decides.
                    s = t.scope
                    terms = kind_terms(f, s, t.expr, self.ref, None,
                                       assigned=s.assigned if s.kind == "function" else None)
                    if terms:
                        out.rule_table_terms.append([f"{f.module}:{s.qualname}", terms])
                    else:
                        out.rule_tables.append(None)
        for m in f.meshes:
            if m.copied:
                continue  # the axes of another mesh
            if m.call is None:  # a parameter annotated Mesh: new axes unless every caller
                out.mesh_params.append([f"{f.module}:{m.scope.qualname}", m.name])  # has one
                continue
            if m.axis_names is not None:
                out.mesh_axes.append(list(m.axis_names))
            elif m.axis_key is not None:  # `Mesh(devices, config.mesh_axes)`
                out.mesh_axis_keys.append(m.axis_key)
            else:
                out.mesh_axes.append(None)
        if f.jit_sites:
            out.sharded_jit_params = sharded_jit_params(f)
            out.sharded_jits = self._sharded_jits()
            out.jit_targets = self._jit_targets()
        for kind in unknown:  # a mesh or rules call shardlint cannot read (see _provides)
            (out.mesh_axes if kind == "mesh" else out.rule_tables).append(None)
        consts = f.module_constants()
        for name, value in consts.items():
            if isinstance(value, ast.Constant) and isinstance(value.value, str) \
                    and len(value.value) <= 64 and value.value.isprintable() \
                    and " " not in value.value:  # (what may be an axis name)
                out.strings[name] = value.value
            lit = f.literal(value, f.module_scope)
            if isinstance(lit, (tuple, list)) and lit and all(
                isinstance(e, (tuple, list)) and len(e) == 2 and isinstance(e[0], str) for e in lit
            ):
                out.constants[name] = [list(e) for e in lit]


def summarise(facts: FileFacts) -> ModuleSummary:
    summary = _Summariser(facts).build()
    # (what the summary asked most often, remembered on the facts; a batch holds the facts of
    # many files until their rules run, and the rules ask rarely)
    facts.derived.pop("mesh_annotations", None)
    return summary


def reference(facts: FileFacts, node: ast.expr, scope: Scope) -> str | None:
    """How the project index names what ``node`` refers to in ``scope``: ``"module:qual"`` for a
    symbol of this module, ``"ext:dotted.name"`` for an imported one (None: a local value, or a
    name of a package outside the project)."""
    found = facts.derived.get("summariser")
    if found is None:
        found = facts.derived["summariser"] = _Summariser(facts)
    return found.ref(node, scope)  # type: ignore[attr-defined]
