"""Records of what one file means: scopes, calls, contexts, jit sites, meshes, rule tables.

Built by one pass over the ``ast`` (``semantics.visitor``). Rules query these records through
:class:`FileFacts`; they never walk import tables themselves.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from shardlint.semantics.catalog import api
from shardlint.semantics.catalog.api import Role
from shardlint.semantics.catalog.names import ImportMap, call_arg, literal, string_tuple
from shardlint.semantics.file.reuse import each_statement


class Opaque(ast.expr):
    """Stands for a value shardlint cannot see (a parameter, a loop target, tuple unpacking)."""

    _fields = ()


OPAQUE = Opaque()


@dataclass(frozen=True)
class Assigned:
    """``name = value`` (``index``: the position when unpacked, ``a, (b, c) = v`` -> c: (1, 1))."""

    value: ast.expr | None  # None: a value shardlint cannot see (loop target, ``+=``, ``with as``)
    index: tuple[int, ...]
    node: ast.AST


# Context flags: what a piece of code runs under.
RULES = 1
MESH = 2
# The mesh is one `jax.jit`, `device_put` and Flax read (`jax.set_mesh`, `use_mesh`, a test of
# the abstract mesh), not only the legacy resource environment a `with mesh:` sets (MESH alone).
MESH_SET = 4
ALL = RULES | MESH | MESH_SET


_GETTERS = frozenset({"property", "cached_property"})


def accessor(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """1 for a property's getter (``@property``, ``@functools.cached_property``,
    ``@mesh.getter``), 2 for its setter or deleter (``@mesh.setter``), else 0."""
    for d in fn.decorator_list:
        if type(d) is ast.Name and d.id in _GETTERS:
            return 1
        if type(d) is ast.Attribute:
            if d.attr == "setter" or d.attr == "deleter":
                return 2
            if d.attr in _GETTERS or d.attr == "getter":
                return 1
    return 0


@dataclass(eq=False)
class Scope:
    """A module, class or function body (lambdas belong to the scope they appear in)."""

    qualname: str  # "" for the module, "MLP.__call__", "main.step"
    kind: str  # "module" | "class" | "function"
    node: ast.AST
    parent: Scope | None
    params: list[str] = field(default_factory=list)
    annotations: dict[str, ast.expr] = field(default_factory=dict)
    bindings: dict[str, list[ast.expr]] = field(default_factory=dict)
    bases: list[str] = field(default_factory=list)  # classes: qualified base names
    decorators: list[ast.expr] = field(default_factory=list)
    references: set[str] = field(default_factory=set)  # plain names loaded in the body
    self_calls: set[str] = field(default_factory=set)  # methods called through `self.x(...)`
    children: dict[str, Scope] = field(default_factory=dict)
    # Functions: what the value-flow analysis reads (dataflow.LocalFlow), collected by the one
    # pass so that no analysis walks the body again: local names with the values assigned to
    # them, the returned values, calls whose result is dropped (`opt.update(g)`) and stores into
    # attributes or items (`model.count.value = 1`, `cache[...] = x`).
    assigned: dict[str, list[Assigned]] = field(default_factory=dict)
    returns: list[ast.expr] = field(default_factory=list)
    expr_calls: list[ast.Call] = field(default_factory=list)
    stores: list[tuple[ast.expr, ast.stmt]] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"Scope({self.kind} {self.qualname or '<module>'})"

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def enclosing_class(self) -> Scope | None:
        s = self.parent
        if self.kind == "function" and s is not None and s.kind == "class":
            return s
        return None

    def lookup(self, name: str) -> tuple[Scope, list[ast.expr]] | None:
        """The nearest scope (outwards, skipping class bodies as Python does) that binds ``name``."""
        s: Scope | None = self
        first = True
        while s is not None:
            if (first or s.kind != "class") and name in s.bindings:
                return s, s.bindings[name]
            first = False
            s = s.parent
        return None


@dataclass(eq=False)
class CallSite:
    node: ast.Call
    scope: Scope
    ctx: int  # lexical context flags (rules/mesh) from enclosing `with` items in this scope
    qualified: str | None  # dotted name of the callee when it is an imported name
    api: api.Api | None
    in_loop: ast.AST | None  # innermost for/while of this scope around the call
    stmt: ast.stmt  # the statement holding the call
    abstract: bool = False  # inside jax.eval_shape(...): traced on shapes, nothing runs
    # The name the callee's dotted chain starts with (`np` of `np.sum(x)`); None when the
    # callee is no dotted name (`f(x)(y)`, `fns[0](x)`).
    root: str | None = None

    @property
    def role(self) -> Role | None:  # (`api` here would be the field)
        return self.api.role if self.api else None

    def kwarg(self, name: str) -> ast.expr | None:
        for kw in self.node.keywords:
            if kw.arg == name:
                return kw.value
        return None

    def has_kwarg(self, *names: str) -> bool:
        return any(kw.arg in names for kw in self.node.keywords)

    def arg(self, index: int, name: str | None = None) -> ast.expr | None:
        return call_arg(self.node, index, name)


@dataclass(eq=False)
class WithItem:
    """One item of a ``with`` statement that shardlint recognised as a context."""

    kind: str  # "rules" | "mesh" | "legacy_mesh"
    expr: ast.expr
    stmt: ast.With | ast.AsyncWith
    scope: Scope
    mesh: MeshBinding | None = None  # for legacy_mesh: the mesh it resolved to


@dataclass(eq=False)
class MeshBinding:
    name: str | None  # the variable it is bound to (None: constructed inline)
    call: ast.Call | None  # the constructing call (None: a parameter annotated Mesh)
    api_name: str  # canonical constructor
    axis_names: tuple[str, ...] | None  # None when not a literal
    axis_types_given: bool
    scope: Scope
    node: ast.AST
    # not literal names, but read from configuration by key: `Mesh(devices, config.mesh_axes)`
    axis_key: str | None = None
    copied: bool = False  # the names of another mesh: `Mesh(m.devices, m.axis_names)`


@dataclass(eq=False)
class RulesTable:
    """A logical-axis rules table: where it is used and, when literal, its entries."""

    expr: ast.expr
    entries: tuple[tuple[str, object], ...] | None  # None: not a literal shardlint can read
    scope: Scope
    # (logical name, node of the string) for each left-hand side, to point findings at.
    lhs_nodes: tuple[tuple[str, ast.expr], ...] = ()
    rhs_nodes: tuple[tuple[str, ast.expr], ...] = ()
    # Handed to one call as its own `rules=` (a box, a conversion): it applies to that call's
    # names only, not to the code that runs under a context.
    local: bool = False


@dataclass(eq=False)
class JitSite:
    """A place where a function is compiled: decorator, call, functools.partial, pjit, nnx.jit."""

    node: ast.expr  # the decorator expression or the jit call
    api_name: str  # canonical jit API
    form: str  # "decorator" | "factory" | "partial" | "call"
    keywords: dict[str, ast.expr]
    target: ast.expr | None  # what is compiled (call form); None for decorators
    function: Scope | None  # the compiled function when it is defined in this file
    bound_name: str | None  # `step = jax.jit(f)` -> "step"; decorator -> the function's name
    scope: Scope  # where the jit happens

    def has(self, *names: str) -> bool:
        return any(n in self.keywords for n in names)


@dataclass(eq=False)
class Reference:
    """An attribute reference such as ``jax.tree_map`` or a ``from x import y`` of a known API."""

    node: ast.AST
    qualified: str
    api: api.Api
    scope: Scope


@dataclass
class FileFacts:
    path: str
    module: str
    tree: ast.Module
    imports: ImportMap
    module_scope: Scope
    scopes: dict[str, Scope] = field(default_factory=dict)
    calls: list[CallSite] = field(default_factory=list)
    with_items: list[WithItem] = field(default_factory=list)
    # `with` items shardlint did not recognise as a context (`with self.mesh:`): SHL101 asks
    # the value-flow layer whether they are meshes.
    other_withs: list[WithItem] = field(default_factory=list)
    meshes: list[MeshBinding] = field(default_factory=list)
    rule_tables: list[RulesTable] = field(default_factory=list)
    jit_sites: list[JitSite] = field(default_factory=list)
    references: list[Reference] = field(default_factory=list)
    uses_flax: bool = False
    uses_jax: bool = False
    _call_index: dict[ast.Call, CallSite] = field(default_factory=dict, repr=False)
    roles: set[api.Role] = field(default_factory=set)  # roles of every API called in the file
    # Analyses derived from these facts, computed once per file for all rules that need them.
    derived: dict[str, object] = field(default_factory=dict, repr=False)
    complete: bool = False  # set when the pass is over: derived caches are safe from then on
    # Per-call results carried from the previous build of this file (reuse.py); None outside
    # the language server.
    reuse: object | None = field(default=None, repr=False)
    _qualified: dict[ast.AST, str | None] = field(default_factory=dict, repr=False)

    # ---- queries rules use -------------------------------------------------------------------
    def calls_with_role(self, *roles: api.Role) -> Iterator[CallSite]:
        statements = getattr(self.reuse, "statements", None)
        if statements is None:
            return (c for c in self.calls if c.api is not None and c.api.role in roles)
        # In the language server: only the top-level statements that call such an API.
        return (c for log in statements if not log.roles.isdisjoint(roles) for c in log.calls
                if c.api is not None and c.api.role in roles)

    def called_names(self) -> set[str]:
        """The dotted names of the imported callees (``CallSite.qualified``) of the file."""
        found = self.derived.get("called_names")
        if found is None:
            found = self.derived["called_names"] = set().union(*each_statement(
                self, "called_names", lambda log: {c.qualified for c in log.calls if c.qualified},
                local=True))
        return found  # type: ignore[return-value]

    def calls_of(self, *names: str) -> Iterator[CallSite]:
        return (c for c in self.calls if c.api is not None and c.api.name in names)

    def call_at(self, node: ast.Call) -> CallSite | None:
        return self._call_index.get(node)

    def resolve(self, node: ast.expr | None) -> api.Api | None:
        q = self.qualify(node)
        return api.lookup(q) if q else None

    def qualify(self, node: ast.expr | None) -> str | None:
        """The dotted name ``node`` refers to through the file's imports; remembered per node
        once the pass is over (rules ask again for the same callees)."""
        if node is None:
            return None
        if not self.complete:
            return self.imports.qualify(node)
        memo = self._qualified
        if node in memo:
            return memo[node]
        q = memo[node] = self.imports.qualify(node)
        return q

    def module_constants(self) -> dict[str, ast.expr]:
        return {k: v[-1] for k, v in self.module_scope.bindings.items() if len(v) == 1}

    def consts_for(self, scope: Scope) -> dict[str, ast.expr]:
        """Names bound exactly once, visible from ``scope`` (inner bindings shadow outer ones).

        Cached per scope once the facts are complete (rules ask for it at every call site).
        """
        if self.complete:
            cache = self.derived.setdefault("consts", {})
            found = cache.get(id(scope))  # type: ignore[union-attr]
            if found is None:
                found = cache[id(scope)] = ScopeConsts(scope)  # type: ignore[index]
            return found  # type: ignore[return-value]
        return self._consts_for(scope)

    def _consts_for(self, scope: Scope) -> dict[str, ast.expr]:
        return _snapshot(_chain(scope))

    def literal(self, node: ast.expr | None, scope: Scope):
        return literal(node, self.consts_for(scope))

    def axis_names(self, node: ast.expr | None, scope: Scope) -> tuple | None:
        return string_tuple(node, self.consts_for(scope))

    def value_of(self, name: str, scope: Scope) -> ast.expr | None:
        """The single value a name is bound to, seen from ``scope``; None when rebound or unknown."""
        found = scope.lookup(name)
        if found is None:
            return None
        _, values = found
        return values[0] if len(values) == 1 else None

    def mesh_for(self, node: ast.expr | None, scope: Scope) -> MeshBinding | None:
        """The mesh an expression evaluates to, when it is a name bound to a mesh or a mesh call."""
        if node is None or not self.meshes:  # (most files make no mesh)
            return None
        for m in self.meshes:
            if m.node is node or m.call is node:
                return m
        if isinstance(node, ast.Name):
            found = scope.lookup(node.id)
            if found is None:
                return None
            owner, _ = found
            for m in self.meshes:
                if m.name == node.id and m.scope is owner:
                    return m
        return None

    def symbol_at(self, line: int) -> str:
        """Qualified name of the innermost function or class whose body holds ``line``."""
        owners = self.derived.get("symbol_lines")
        if owners is None:
            # One entry per line (a table: rules ask for every finding and every jit site, and
            # a scan of all scopes per question is quadratic in a generated 50,000-line file).
            spans = sorted(
                (s.node.lineno, s.node.end_lineno or s.node.lineno, q)  # type: ignore[attr-defined]
                for q, s in self.scopes.items() if q)
            owners = [""] * (max((end for _, end, _ in spans), default=0) + 2)
            for start, end, qual in spans:  # later starts are nested deeper: they overwrite
                owners[start:end + 1] = [qual] * (end + 1 - start)
            self.derived["symbol_lines"] = owners
        return owners[line] if 0 <= line < len(owners) else ""  # type: ignore[index]

    def release(self) -> None:
        """Break the reference cycles of these facts once nothing reads them again (scopes and
        their parents, analyses cached in ``derived`` that point back here), so that a batch run
        frees each file's trees when its rules are done instead of leaving millions of objects
        for one collector pass at the end (measured: 1.6 s on the benchmark corpus)."""
        self.derived.clear()
        self.reuse = None
        for s in self.scopes.values():
            s.parent = None
            s.children = {}
        self.module_scope.children = {}

    def function_scopes(self) -> Iterator[Scope]:
        return (s for s in self.scopes.values() if s.kind == "function")


def _chain(scope: Scope | None) -> list[Scope]:
    """``scope`` and its parents, innermost first."""
    out = []
    while scope is not None:
        out.append(scope)
        scope = scope.parent
    return out


def _snapshot(chain: list[Scope]) -> dict[str, ast.expr]:
    out: dict[str, ast.expr] = {}
    for s in reversed(chain):
        for k, v in s.bindings.items():
            if len(v) == 1:
                out[k] = v[0]
            else:
                out.pop(k, None)
    return out


class ScopeConsts(Mapping):
    """The names bound exactly once that ``scope`` sees, looked up through its parents on
    demand: the innermost scope binding a name decides (once: its value; more: unknown). The
    same mapping as a copied dict, without copying every module name into every scope."""

    __slots__ = ("_chain", "_full")

    def __init__(self, scope: Scope):
        self._chain = _chain(scope)
        self._full: dict[str, ast.expr] | None = None

    def __getitem__(self, name: str) -> ast.expr:
        for s in self._chain:
            values = s.bindings.get(name)
            if values is not None:
                if len(values) == 1:
                    return values[0]
                break
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        for s in self._chain:
            values = s.bindings.get(name)  # type: ignore[call-overload]
            if values is not None:
                return len(values) == 1
        return False

    def get(self, name, default=None):
        for s in self._chain:
            values = s.bindings.get(name)
            if values is not None:
                return values[0] if len(values) == 1 else default
        return default

    def _all(self) -> dict[str, ast.expr]:
        if self._full is None:
            self._full = _snapshot(self._chain)
        return self._full

    def __iter__(self):
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())
