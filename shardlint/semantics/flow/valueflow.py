"""The value-flow layer: what each function does with its arguments, across calls and files.

Per function, once per module, a summary (:func:`function_flow`, stored in the module summary
and cached with it; no ``ast`` nodes):

* ``ret``: what the function returns, as a whole (``""``) and per position of a returned tuple
  (``"0"``, ``"1"``...): *terms* saying which parameter it is, as is (``same``) or as an updated
  version of it (``updated``: ``state.apply_gradients(...)``, a cache written with
  ``.at[].set``...), or which project function's result it is, with what that call was handed;
* ``mut``: the parameters it changes in place (NNX: ``optimizer.update(model, grads)``,
  ``nnx.update(model, state)``), directly or through a call;
* ``fn``: the callable it returns, where it returns one (a nested function, ``partial(f, ...)``,
  a parameter, ``jax.jit(f, **kw)``: a project-defined jit wrapper).

Terms are JSON lists:

* ``["p", param, kind, pos, text]``: the parameter itself (kind ``same``) or an update of it
  (``updated``, with where -- ``pos`` is ``[line, col, end_line, end_col]`` -- and how);
* ``["c", ref, bound, via_attr, index, args, pos, text]``: item ``index`` of the result of
  calling ``ref`` (``"module:qual"`` or ``"ext:dotted.name"``, resolved through the project
  index) at ``pos``; ``args`` are ``[key, param, kind, pos, text]``: the call passes our
  ``param`` (or an update of it) as its positional argument ``key`` (an int, counted after the
  ``bound`` arguments of a ``functools.partial``) or as keyword ``key``; ``via_attr``: called
  as ``self.method(...)``, so the callee's ``self`` is not among the positions. A ninth
  element ``[pos, text]``: the result goes through an update there before it is returned
  (``dataclasses.replace(self.update_with(out), ...)``), so what the callee hands back as it
  came is updated.

:class:`FlowIndex` joins them across the project, lazily, with a depth bound and cycles cut:
"which parameters of this function does its result (at this position) hold an updated version
of, and through which chain of calls". A callee outside the project is unknown: it adds
nothing, never "no update".
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from shardlint.semantics.catalog.api import LINEN_MODULE, NNX_MODULE, Role
from shardlint.semantics.catalog.names import call_arg, dotted, literal
from shardlint.semantics.file.config_tables import is_table, table_entries, table_key
from shardlint.semantics.file.dataflow import (
    MAPPED,
    SAME,
    UPDATED,
    Callee,
    LocalFlow,
    Origin,
    Terms,
    positional_params,
)
from shardlint.semantics.file.facts import FileFacts, Scope, accessor



class ProjectIndex(Protocol):
    """What the value flow asks of the project index (``project.ProjectIndex``, which is built
    on this module: the flow names only the questions it asks, so the import points one way)."""

    summaries: dict[str, Any]  # module -> summary.ModuleSummary

    def resolve(self, ref: str, from_module: str | None = None) -> str | None: ...

    def symbol(self, ref: str) -> Any: ...

    def is_subclass(self, ref: str, base: str, from_module: str | None = None) -> bool: ...

    def base_classes(self, key: str, bases: list[str] | None = None) -> list[str]: ...

    def class_chain(self, key: str) -> list[str]: ...

    def inherited(self, ref: str, from_module: str | None = None) -> str | None: ...

    def config_tables(self, key: str, hops: int = 0) -> list: ...

    def config_asked(self, key: str) -> bool: ...

MAX_DEPTH = 10
# A rules table travels further than a mesh: a partitioner's attribute, handed to a wrapper
# class, set from a constructor parameter a subclass forwards, defaulting to a builder that
# extends another builder's table (each hop memoised: ``FlowIndex._table_memo``).
TABLE_DEPTH = 32
_CLASS_HOPS = 24  # calls and parameters followed to find the classes a value may be
_TEXT = 48  # evidence text kept per term (the message shows it)
_MAX_SLOTS = 8


# ---- per function (in the module summary) -----------------------------------------------------------
RefFn = Callable[[ast.expr, Scope], "str | None"]


def _text(node: ast.AST | None) -> str:
    """A short form of an expression for messages: ``state.apply_gradients(...)``."""
    if node is None:
        return ""
    if isinstance(node, ast.Call):
        head = dotted(node.func)
        if head is not None:
            return f"{'.'.join(head)}(...)"
        if isinstance(node.func, ast.Attribute):  # `cache.at[i].set(v)`
            inner = _text(node.func.value)
            return f"{inner}.{node.func.attr}(...)" if inner else ""
    if isinstance(node, ast.Dict):  # a record rebuilt field by field: its keys say enough
        keys = [repr(k.value) for k in node.keys if isinstance(k, ast.Constant)]
        text = "{" + ", ".join(f"{k}: ..." for k in keys) + "}"
        return text if len(text) <= _TEXT else "{" + ", ".join(
            f"{k}: ..." for k in keys[:2]) + ", ...}"
    try:
        text = " ".join(ast.unparse(node).split())
    except Exception:  # noqa: BLE001 - unparse of a synthetic node
        return ""
    return text if len(text) <= _TEXT else text[: _TEXT - 3] + "..."


def _pos(node: ast.AST | None) -> list[int] | None:
    if node is None or not hasattr(node, "lineno"):
        return None
    line = node.lineno  # type: ignore[attr-defined]
    return [line, node.col_offset, node.end_lineno or line, node.end_col_offset or 0]  # type: ignore[attr-defined]


def _origin_term(o: Origin) -> list:
    if o.kind == UPDATED:
        return ["p", o.param, o.kind, _pos(o.evidence), _text(o.evidence)]
    return ["p", o.param, o.kind, None, ""]


def terms_json(terms: Terms) -> list[list]:
    out: list[list] = [_origin_term(o) for o in terms.origins.values()
                       if o.kind in (SAME, UPDATED, MAPPED)]
    for c in terms.calls:
        args = [[key, *_origin_term(o)[1:]] for key, origins in c.args for o in origins.values()
                if o.kind in (SAME, UPDATED)]
        # (an argument that is another project call's result: ``[key, "#call", its terms]``)
        args += [[key, "#call", inner] for key, calls in c.nested
                 if (inner := terms_json(Terms(calls=calls)))]
        if args:
            out.append(["c", c.callee.ref, c.callee.bound, c.callee.via_attr, list(c.index), args,
                        _pos(c.node), _text(c.node)])
            if c.updated is not None:
                out[-1].append([_pos(c.updated), _text(c.updated)])
    return out


class Resolver:
    """Names the project function a call runs, for one function body (see :class:`Callee`)."""

    def __init__(self, facts: FileFacts, scope: Scope, ref: RefFn):
        self.facts = facts
        self.scope = scope
        self.ref = ref

    def __call__(self, call: ast.Call) -> Callee | None:
        func = call.func
        bound = 0
        if isinstance(func, ast.Call) and self._is_partial(func) and func.args:
            bound = len(func.args) - 1
            func = func.args[0]
        elif isinstance(func, ast.Name):
            # `step = partial(train_step, model)` in this function, then `step(state, batch)`
            values = self.scope.assigned.get(func.id)
            if values is not None:
                if len(values) != 1 or values[0].index or not isinstance(values[0].value, ast.Call):
                    return None
                value = values[0].value
                if not (self._is_partial(value) and value.args):
                    return None
                bound = len(value.args) - 1
                func = value.args[0]
        if not isinstance(func, (ast.Name, ast.Attribute)):
            return None
        if self.facts.resolve(func) is not None:
            return None  # a known API: dataflow.py reads it
        if isinstance(func, ast.Attribute):
            made = self._instance_of(func.value)
            if made is not None:  # `Updater(lr).apply(state, g)`: the class's method
                return Callee(f"{made}.{func.attr}", bound, True)
        ref = self.ref(func, self.scope)
        if ref is None:
            return None
        via_attr = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id in ("self", "cls")
        return Callee(ref, bound, via_attr)

    def _instance_of(self, value: ast.expr) -> str | None:
        """The class (a reference) an object a method is called on was built from here: a
        call of a project class, written in place or bound once to a local name
        (``updater = Updater(lr)``). A call of something else names no method: unknown."""
        if isinstance(value, ast.Name):
            values = self.scope.assigned.get(value.id)
            if value.id in self.scope.params and (values is None or all(
                    isinstance(a.value, ast.Call) and isinstance(a.value.func, ast.Attribute)
                    and isinstance(a.value.func.value, ast.Name)
                    and a.value.func.value.id == value.id for a in values)):
                # (an annotated parameter, or one rebound only from its own methods' results:
                # `state, norms = state.apply_gradients_and_norms(g)`)
                return self._annotated_class(value.id)
            if values is None or len(values) != 1 or values[0].index:
                return None
            value = values[0].value  # type: ignore[assignment]
        if not isinstance(value, ast.Call) or not isinstance(value.func, (ast.Name, ast.Attribute)):
            return None
        if self.facts.resolve(value.func) is not None:
            return None
        ref = self.ref(value.func, self.scope)
        name = ref.rpartition(":")[2].rpartition(".")[2] if ref else ""
        return ref if name[:1].isupper() else None  # (a class, by the convention of its name)

    def _annotated_class(self, param: str) -> str | None:
        """The project class a parameter is annotated with (``acc: GradientAccumulator``),
        whose methods a call on it runs (a subclass may override them: the annotation is what
        the code says)."""
        ann = self.scope.annotations.get(param)
        if not isinstance(ann, (ast.Name, ast.Attribute)) or self.facts.resolve(ann) is not None:
            return None
        ref = self.ref(ann, self.scope.parent or self.facts.module_scope)
        name = ref.rpartition(":")[2].rpartition(".")[2] if ref else ""
        return ref if name[:1].isupper() else None

    def _is_partial(self, call: ast.Call) -> bool:
        known = self.facts.resolve(call.func) if isinstance(call.func, (ast.Name, ast.Attribute)) \
            else None
        return known is not None and known.role == Role.PARTIAL


def _is_method(scope: Scope) -> bool:
    if scope.enclosing_class is None:
        return False
    for d in scope.decorators:
        if isinstance(d, ast.Name) and d.id == "staticmethod":
            return False
    return True


def function_flow(facts: FileFacts, scope: Scope, ref: RefFn,
                  calls: list[ast.Call] | None = None, mesh_calls=()) -> dict | None:
    """The flow summary of one function. ``calls``: the calls in its body that may change an
    argument in place (NNX code), for ``mut``; ``mesh_calls``: its calls of APIs that take a
    mesh (``MESH_ARGUMENTS``), for ``meshp``."""
    fn = scope.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    params = positional_params(fn)
    kwonly = [a.arg for a in fn.args.kwonlyargs]
    method = 1 if _is_method(scope) and params else 0
    out: dict = {"params": params}  # (no keyword-only parameters, not a method: left out)
    if kwonly:
        out["kwonly"] = kwonly
    if method:
        out["method"] = method
        if accessor(fn) == 1:
            out["prop"] = 1  # (a property: `obj.mesh` is what it returns)
        elif any(isinstance(d, ast.Name) and d.id == "classmethod" for d in fn.decorator_list):
            out["cm"] = 1  # (its first parameter is the class it is called on)
    defaults = _defaults(facts, scope, fn)
    if defaults:
        out["defaults"] = defaults
    meshp = mesh_params(facts, scope, mesh_calls)
    if meshp:
        out["meshp"] = meshp
    pann = _mesh_class_refs(facts, scope, ref, meshp)
    if pann:
        out["pann"] = pann
    forwarded = _forwarded_donation(facts, scope, params[method:], kwonly)
    if forwarded:
        out["jfwd"] = forwarded
    elif _stub(fn):
        out["stub"] = 1
    if not (scope.returns or scope.expr_calls or calls or scope.stores):
        return out  # (its parameters, for what its callers pass)
    flow = LocalFlow(facts, scope, callee=Resolver(facts, scope, ref))
    ret: dict[str, list] = {}
    if flow.returns:
        whole = terms_json(flow.returned_terms())
        if whole:
            ret[""] = whole
        # (what each position of a tuple holds is part of what the whole holds)
        for i in range(min(_arity(flow), _MAX_SLOTS) if whole else 0):
            terms = terms_json(flow.returned_terms((i,)))
            if terms:
                ret[str(i)] = terms
        for name in _fields(flow) if whole else ():  # (a dict or record's fields: the same)
            terms = terms_json(flow.returned_terms((name,)))
            if terms:
                ret[slot(name)] = terms
    if ret:
        out["ret"] = ret
    if flow.returns and scope.parent is not None and scope.parent.kind == "module":
        # What a caller's loop rebind says of an argument (``x = f(x)`` in another module):
        # the parameters computed into the result (not handed back as they came), and the
        # parts of the result that are visibly of another shape (a resize, an index). Asked
        # of module-level functions only (`jax.jit(model.decode_step)`): walking every
        # method's returns back through its body cost a fifth of a cold run.
        rb = [p for p in params[method:] if flow.flows_to_return(p) and not flow.returned_as_is(p)]
        if rb:
            out["rb"] = rb
            shaped = [slot(i) for i in range(min(_arity(flow), _MAX_SLOTS))
                      if flow.reshaped((i,))]
            out["rs"] = ([""] if flow.reshaped() else []) + shaped
    mut = _mutations(flow, calls or [])
    if mut:
        out["mut"] = mut
    fns = _callables(facts, scope, flow, ref)
    if fns:
        out["fn"] = fns
    kinds = _returned_kinds(facts, scope, flow, ref, fn)
    if kinds:
        out["kind"] = kinds
    return out


_DONATE = ("donate_argnums", "donate_argnames")


def _forwarded_donation(facts: FileFacts, scope: Scope, params: list[str],
                        kwonly: list[str]) -> list[str]:
    """The parameters a jit wrapper hands on as its donation: this function compiles its first
    parameter (``jax.jit``, ``pjit``, ``pmap``) with ``donate_argnums=<its own parameter>``
    (``def partition(self, fn, ..., donate_argnums=()): pjitted = pjit(fn, ...,
    donate_argnums=donate_argnums)``): its callers choose what is donated, by keyword or by
    position."""
    if not params or not facts.jit_sites:
        return []
    by_scope = facts.derived.get("jit_sites_by_scope")
    if by_scope is None:  # (asked for every function: the file's sites grouped once)
        by_scope = {}
        for site in facts.jit_sites:
            by_scope.setdefault(site.scope, []).append(site)
        if facts.complete:
            facts.derived["jit_sites_by_scope"] = by_scope
    own = {*params, *kwonly}
    out: set[str] = set()
    for site in by_scope.get(scope, ()):  # type: ignore[union-attr]
        if site.form != "call" \
                or not (isinstance(site.target, ast.Name) and site.target.id == params[0]):
            continue
        for kw in _DONATE:
            v = site.keywords.get(kw)
            if isinstance(v, ast.Name) and v.id in own:
                out.add(v.id)
    return sorted(out)


def _stub(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A body that only documents or refuses (an abstract method): ``raise
    NotImplementedError``, ``...``, ``pass``, after a docstring."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    for stmt in body:
        if isinstance(stmt, ast.Pass) or isinstance(stmt, ast.Expr) and isinstance(
                stmt.value, ast.Constant) and stmt.value.value is Ellipsis:
            continue
        if isinstance(stmt, ast.Raise) and stmt.exc is not None and "NotImplementedError" in \
                ast.unparse(stmt.exc):
            continue
        return False
    return True


# ---- what kind of value: meshes -----------------------------------------------------------------
# Kind terms (JSON): ["mesh"] a mesh for certain, ["none"] None, ["other"] a known value that is
# no mesh (a literal, a known API's result), ["c", ref, bound, via_attr, index] what calling a
# project function returns, ["p", param] the function's parameter, ["a", name] an attribute of
# the enclosing class's instance (``self.mesh``). A value shardlint cannot place adds nothing.
_MESH_ROLES = (Role.MESH, Role.ABSTRACT_MESH)
# Kind terms worth keeping in a summary: those that may say "a mesh", "a rules table", "a
# class" or "an instance of one" (``["sym", ref]``: the class or function ``ref`` itself,
# named; ``["pc", param]``: what calling the parameter gives; ``["elts", terms]``: a list,
# tuple or dict whose items are such; ``["sub", terms]``: an item of such a value).
INTERESTING = frozenset({"mesh", "c", "p", "a", "table", "key", "sym", "pc", "elts", "sub"})


def interesting(terms: list[list]) -> bool:
    """Whether any of ``terms`` is worth keeping in a summary (``INTERESTING``; asked for the
    arguments of every project call: a plain loop)."""
    for t in terms:
        if t[0] in INTERESTING:
            return True
    return False
# The kinds a class or an instance can come through (``FlowIndex.classes``/``instances``).
_CLASS_KINDS = frozenset({"sym", "pc", "elts", "sub", "c", "p"})
# Linen transforms of a module class that give a module class with the same variables.
_CLASS_WRAPPERS = frozenset({Role.REMAT, Role.LINEN_LIFT})
# APIs whose argument (position, keyword) must be a mesh: a name handed there is one.
MESH_ARGUMENTS = {
    "jax.sharding.NamedSharding": (0, "mesh"),
    "jax.set_mesh": (0, "mesh"),
    "jax.sharding.use_mesh": (0, "mesh"),
    "jax.sharding.use_abstract_mesh": (0, "mesh"),
    "jax.shard_map": (None, "mesh"),
    "jax.experimental.shard_map.shard_map": (1, "mesh"),
    "flax.linen.logical_to_mesh_sharding": (1, "mesh"),
    "flax.linen.get_sharding": (1, "mesh"),
}


def mesh_params(facts: FileFacts, scope: Scope, calls) -> list[str]:
    """Parameters of a function that are meshes wherever it runs: annotated ``Mesh`` (or
    ``Mesh | None``), or handed in its body to an API that takes a mesh (``calls``: its calls of
    such APIs)."""
    out = [p for p in scope.params if (ann := scope.annotations.get(p)) is not None
           and _is_mesh_annotation(facts, ann, optional=True)]
    for c in calls:
        where = MESH_ARGUMENTS.get(c.api.name) if c.api is not None else None
        if where is None:
            continue
        arg = call_arg(c.node, where[0], where[1])
        if isinstance(arg, ast.Name) and arg.id in scope.params and arg.id not in out \
                and len(scope.assigned.get(arg.id, ())) == 0:
            out.append(arg.id)
    return out


def _mesh_class_refs(facts: FileFacts, scope: Scope, ref: RefFn, meshp: list[str]
                     ) -> dict[str, str]:
    """Parameters annotated with a name of the project that may stand for the mesh class
    (``mesh: partitioning.Mesh``; ``mesh: Mesh`` where ``Mesh = partitioning.Mesh``): the
    reference, which the project index follows (``FlowIndex.mesh_class``). Only names that end
    in ``Mesh`` are kept: a summary holds no reference for every annotated parameter."""
    out: dict[str, str] = {}
    for p in scope.params:
        ann = scope.annotations.get(p)
        if ann is None or p in meshp:
            continue
        ann = optional_of(ann) or ann
        parts = dotted(ann) if type(ann) in (ast.Name, ast.Attribute) else None
        if parts and parts[-1].endswith("Mesh"):
            r = ref(ann, scope.parent or scope)
            if r is not None:
                out[p] = r
    return out


def kind_terms(facts: FileFacts, scope: Scope, expr: ast.expr | None, ref: RefFn,
               flow: LocalFlow | None, index: tuple[int, ...] = (), depth: int = 0,
               assigned: dict | None = None, seen: frozenset = frozenset()) -> list[list]:
    """What kind of value ``expr`` (item ``index`` of it) is, as kind terms (``assigned``: the
    function's local names, when there is no ``flow``; ``seen``: the local names being read
    on the way here -- ``x = layer(x)`` does not say more about ``x`` by reading it again, and
    rereading it made a long rebinding chain cost exponential time)."""
    if expr is None or depth > 8:
        return []
    if flow is not None:
        assigned = flow.assigned
    # (the parameters' names: a set, or the scope's list -- a few names, no copy made)
    params = flow.all_params if flow is not None else scope.params
    tp = type(expr)  # (by exact type, the commonest first: parsed nodes are never subclasses)
    if tp is ast.Name:
        return _name_kinds(facts, scope, expr, ref, flow, index, depth, assigned, seen, params)
    if tp is ast.Constant:
        return [["none"]] if expr.value is None and not index else [["other"]]
    if tp is ast.Tuple or tp is ast.List:
        if index and type(index[0]) is int and index[0] < len(expr.elts) and not any(
                isinstance(e, ast.Starred) for e in expr.elts):
            return kind_terms(facts, scope, expr.elts[index[0]], ref, flow, index[1:], depth + 1,
                              assigned, seen)
        if not index:
            value = literal(expr, facts.consts_for(scope))
            if isinstance(value, (tuple, list)) and (not value or is_table(value)):
                return [["table", table_entries(value)]]
            return [["other"], *_items(facts, scope, expr.elts, ref, flow, depth, assigned, seen)]
        return []
    if tp is ast.Dict:  # (`{kind: [Block], ...}`: a table of classes)
        return _items(facts, scope, expr.values, ref, flow, depth, assigned, seen) \
            if not index else []
    if tp is ast.BinOp and type(expr.op) is ast.Add and not index:
        # `list(default_rules) + moe_rules`: the entries of both (a sum of literals is read
        # whole, by `literal`)
        value = literal(expr, facts.consts_for(scope))
        if is_table(value):
            return [["table", table_entries(value)]]
        both = [*kind_terms(facts, scope, expr.left, ref, flow, (), depth + 1, assigned, seen),
                *kind_terms(facts, scope, expr.right, ref, flow, (), depth + 1, assigned, seen)]
        return both if both and all(t[0] in _TABLE_KINDS for t in both) else []
    if tp is ast.IfExp:
        return [*kind_terms(facts, scope, expr.body, ref, flow, index, depth + 1, assigned, seen),
                *kind_terms(facts, scope, expr.orelse, ref, flow, index, depth + 1, assigned,
                            seen)]
    if (tp is ast.ListComp or tp is ast.GeneratorExp) and not index:
        inner = _rewritten(expr)
        if inner is not None:  # `[tuple(r) for r in cfg["logical_axis_rules"]]`: what `x` is
            return kind_terms(facts, scope, inner, ref, flow, (), depth + 1, assigned, seen)
        return []
    if tp is ast.Call and index and type(index[0]) is str:
        # a field of a record built or copied here: `dataclasses.replace(cfg, mesh=mesh).mesh`,
        # `Config(mesh=mesh).mesh` -- what the keyword holds (a call without it: unknown)
        value = next((k.value for k in expr.keywords if k.arg == index[0]), None)
        if value is None:  # `dataclasses.replace(cfg, other=...)`, `cfg.replace(...)`: kept
            value = _replaced(facts, expr)
            if value is None:
                # `GenerateSD(config).mesh`: what the project class (or the nearest base class)
                # sets on `self` (FlowIndex.terms_mesh)
                c = Resolver(facts, scope, ref)(expr) if len(index) == 1 else None
                return [["c", c.ref, c.bound, c.via_attr, list(index)]] if c is not None else []
            return kind_terms(facts, scope, value, ref, flow, index, depth + 1, assigned, seen)
        return kind_terms(facts, scope, value, ref, flow, index[1:], depth + 1, assigned, seen)
    if tp is ast.Call:
        inner = _sequence_of(expr) if not index else None
        if inner is not None:  # `list(x)`, `tuple(x)`, `map(tuple, x)`: what `x` is
            return kind_terms(facts, scope, inner, ref, flow, (), depth + 1, assigned, seen)
        if index:
            c = Resolver(facts, scope, ref)(expr)
            return [["c", c.ref, c.bound, c.via_attr, list(index)]] if c is not None else []
        key = table_key(expr)
        if key is not None:
            return [["key", key]]  # `getattr(config, "logical_axis_rules", ())`
        known = facts.resolve(expr.func) if isinstance(expr.func, (ast.Name, ast.Attribute)) \
            else None
        if known is not None and known.role in _CLASS_WRAPPERS and expr.args \
                and known.name.startswith("flax.linen."):
            # `nn.remat(Block, ...)`, `nn.scan(Block, ...)`: a Linen class made of `Block`,
            # with its variables (what it stacks or rematerialises does not change which)
            inner = [t for t in kind_terms(facts, scope, expr.args[0], ref, flow, (), depth + 1,
                                           assigned, seen) if t[0] in _CLASS_KINDS]
            return inner or [["other"]]
        if known is not None:
            return [["mesh"]] if known.role in _MESH_ROLES else [["other"]]
        c = Resolver(facts, scope, ref)(expr)
        if c is None:
            # `stage_factory(rngs)`, `layer_cls(config)`: a factory or class the function is
            # handed (its own parameter, or an enclosing function's)
            name = expr.func.id if isinstance(expr.func, ast.Name) else None
            if name is not None and (name in params or (assigned is None or name not in assigned)
                                     and _closure_param(scope, name)):
                return [["pc", name]]
            return []
        # (what its first argument is: a project function of a rules table is taken to keep
        # that table's logical names; see FlowIndex.tables)
        first = kind_terms(facts, scope, expr.args[0], ref, flow, (), depth + 1, assigned, seen) \
            if expr.args and not isinstance(expr.args[0], ast.Starred) else []
        # (and the classes it names, when it names only classes: `with_remat([Block])` gives
        # what the function makes of these, not of every caller's -- FlowIndex.classes)
        classes = [t for t in first if t[0] in _NAMED_CLASS_KINDS]
        if classes and not _names_classes_only(classes):
            classes = []
        first = [t for t in first if t[0] in ("table", "key", "p", "a", "c")]
        if classes:
            return [["c", c.ref, c.bound, c.via_attr, [], first, classes]]
        return [["c", c.ref, c.bound, c.via_attr, [], first]] if first else \
            [["c", c.ref, c.bound, c.via_attr, []]]
    if tp is ast.Attribute and not index and type(expr.value) is ast.Name \
            and expr.value.id == "self":
        return [["a", expr.attr], ["key", expr.attr]]
    if tp is ast.Attribute and type(expr.value) is ast.Name and expr.value.id == "self" \
            and len(index) == 1 and type(index[0]) is str:
        return [["a", f"{expr.attr}.{index[0]}"]]  # `self.cfg.mesh` (see method_attributes)
    if not index and tp is ast.Attribute and expr.attr[:1].isupper():
        r = ref(expr, scope)  # `layers.Block`
        if r is not None:
            return [["sym", r]]
    if tp is ast.Attribute and not index and not expr.attr[:1].isupper() and (
            type(expr.value) is ast.Name and expr.value.id != "self"
            or type(expr.value) is ast.Attribute and type(expr.value.value) is ast.Name
            and expr.value.value.id == "self"):
        # a field of a record held in a name or a `self` attribute: `cfg.mesh`, where
        # `cfg = dataclasses.replace(cfg, mesh=mesh)` (and a configuration key, below)
        field = kind_terms(facts, scope, expr.value, ref, flow, (expr.attr,), depth + 1,
                           assigned, seen)
        key = table_key(expr)
        if field:
            return [*field, ["key", key]] if key is not None else field
    if not index and (tp is ast.Attribute or tp is ast.Subscript):
        key = table_key(expr)
        if key is not None:
            return [["key", key]]  # `config.logical_axis_rules`, `cfg["logical_axis_rules"]`
    if not index and tp is ast.Subscript:  # `blocks[0]`, `layer_map[kind]`
        inner = [t for t in kind_terms(facts, scope, expr.value, ref, flow, (), depth + 1,
                                       assigned, seen) if t[0] in _CLASS_KINDS]
        return [["sub", inner]] if inner else []
    return []


_SEQUENCE_TYPES = frozenset({"list", "tuple"})


def _sequence_of(call: ast.Call) -> ast.expr | None:
    """The sequence a call copies item by item, keeping its entries: ``list(x)``, ``tuple(x)``,
    ``map(tuple, x)``, ``list(map(list, x))`` -> ``x`` (the entries of a rules table read from
    YAML are lists; these make them tuples and keep their names)."""
    f = call.func
    if not isinstance(f, ast.Name) or call.keywords:
        return None
    if f.id in _SEQUENCE_TYPES and len(call.args) == 1:
        arg = call.args[0]
        if isinstance(arg, ast.Call):
            return _sequence_of(arg) or arg
        if isinstance(arg, (ast.ListComp, ast.GeneratorExp)):
            return _rewritten(arg) or None
        return arg
    if f.id == "map" and len(call.args) == 2 and isinstance(call.args[0], ast.Name) \
            and call.args[0].id in _SEQUENCE_TYPES:
        return call.args[1]
    return None


def _rewritten(comp: ast.ListComp | ast.GeneratorExp) -> ast.expr | None:
    """``[tuple(r) for r in x]``, ``(list(r) for r in x)``, ``[(k, v) for k, v in x]``,
    ``[r for r in x]``: the entries of ``x``, each kept whole -> ``x``."""
    if len(comp.generators) != 1 or comp.generators[0].ifs or comp.generators[0].is_async:
        return None
    gen = comp.generators[0]
    elt, target = comp.elt, gen.target
    if isinstance(target, ast.Name) and _entry_kept(elt, target.id):
        return gen.iter
    if isinstance(elt, ast.Call) and isinstance(elt.func, ast.Name) \
            and elt.func.id in _SEQUENCE_TYPES and len(elt.args) == 1 and not elt.keywords:
        elt = elt.args[0]
    if isinstance(target, ast.Tuple) and isinstance(elt, ast.Tuple) \
            and len(target.elts) == len(elt.elts) \
            and all(isinstance(a, ast.Name) and isinstance(b, ast.Name) and a.id == b.id
                    for a, b in zip(target.elts, elt.elts)):
        return gen.iter
    if isinstance(target, ast.Tuple) and isinstance(elt, ast.Tuple) \
            and len(target.elts) == len(elt.elts) == 2 \
            and isinstance(target.elts[0], ast.Name) and isinstance(elt.elts[0], ast.Name) \
            and target.elts[0].id == elt.elts[0].id:
        # `((k, ("replica", "data") if k == "batch" else v) for k, v in rules)`: the mesh
        # side rewritten, the logical names kept (all that is read of a table's terms)
        return gen.iter
    return None


def _entry_kept(elt: ast.expr, name: str) -> bool:
    """Whether ``elt`` is the loop's entry ``name`` kept whole: ``r``, ``tuple(r)``,
    ``list(r)``, or a choice between such (``tuple(r) if isinstance(r, list) else r``)."""
    if type(elt) is ast.IfExp:
        return _entry_kept(elt.body, name) and _entry_kept(elt.orelse, name)
    if type(elt) is ast.Call and type(elt.func) is ast.Name and elt.func.id in _SEQUENCE_TYPES \
            and len(elt.args) == 1 and not elt.keywords:
        elt = elt.args[0]
    return type(elt) is ast.Name and elt.id == name


def _name_kinds(facts: FileFacts, scope: Scope, expr: ast.Name, ref: RefFn,
                flow: LocalFlow | None, index: tuple[int, ...], depth: int,
                assigned: dict | None, seen: frozenset, params) -> list[list]:
    """``kind_terms`` of a name: a mesh, a parameter, what its assignments hold, a closure's
    or the module's binding, a class or function named."""
    if not index and facts.mesh_for(expr, scope) is not None:
        return [["mesh"]]
    values = assigned.get(expr.id) if assigned is not None else None
    out: list[list] = []
    if expr.id in params and not index and scope.kind == "function":
        ann = scope.annotations.get(expr.id)
        if ann is not None and _is_mesh_annotation(facts, ann, optional=True):
            out = [["mesh"], ["none"]]  # (`Mesh | None`: a mesh wherever used as one)
        else:
            out = [["p", expr.id]]
    elif expr.id in params and len(index) == 1 and type(index[0]) is str \
            and scope.kind == "function" and not assigned_to(assigned, expr.id):
        # a field of a parameter typed with a record class of this module (`cfg: Config`,
        # `mesh: Mesh | None` in it): a mesh wherever used as one
        ann = _field_annotation(facts, scope, scope.annotations.get(expr.id), index[0])
        if ann is not None and _is_mesh_annotation(facts, ann, optional=True):
            return [["mesh"], ["none"]]
    if values:
        key = (id(scope), expr.id)
        if key in seen:
            return out
        inner = seen | {key}
        for a in values:
            if a.value is None:
                # `for layer in layers:` -- an item of the sequence (classes only); any other
                # value shardlint cannot see makes the name unknown
                items = _loop_items(facts, scope, a, expr.id, ref, flow, depth, assigned, inner) \
                    if not index else []
                if not items:
                    return []
                out.extend(items)
                continue
            out.extend(kind_terms(facts, scope, a.value, ref, flow, (*a.index, *index),
                                  depth + 1, assigned, inner))
        if not index and scope.kind == "function":
            out.extend(_appended(facts, scope, expr.id, ref, flow, depth, assigned, inner))
            if any(t[0] == "table" for t in out):
                out.extend(_grown(facts, scope, expr.id, ref, flow, depth, assigned, inner))
        return out
    if out:
        return out
    field = len(index) == 1 and type(index[0]) is str
    found = scope.lookup(expr.id) if not index or field else None
    if found is not None and field:
        # a field of a record bound at module level (or in an enclosing function): what the
        # bindings that write that field say (`cfg = dataclasses.replace(cfg, mesh=mesh)`)
        owner, values = found
        key = (id(owner), expr.id)
        if key in seen:
            return []
        out = []
        for v in values:
            if isinstance(v, ast.Call) and any(k.arg == index[0] for k in v.keywords):
                out.extend(kind_terms(facts, owner, v, ref, None, index, depth + 1,
                                      owner.assigned if owner.kind == "function" else None,
                                      seen | {key}))
        return out
    if found is not None:
        owner, values = found
        if owner is not scope and owner.kind == "function":
            # a closure reads the enclosing function's binding
            return kind_terms(facts, owner, expr, ref, None, (), depth + 1,
                              owner.assigned, seen)
        key = (id(owner), expr.id)
        # a module-level name bound once (`mesh = make_mesh()`), read at module level or in
        # a function
        if owner.kind == "module" and len(values) == 1 and isinstance(values[0], ast.expr) \
                and type(values[0]).__name__ != "Opaque" and key not in seen:
            return kind_terms(facts, owner, values[0], ref, None, (), depth + 1,
                              seen=seen | {key})
    if not index and (expr.id[:1].isupper() or found is not None and found[1] and isinstance(
            found[1][-1], (ast.FunctionDef, ast.AsyncFunctionDef))
            or found is None and expr.id in facts.imports.names):
        # (a class by its name, defined here or imported: `Block`; a function defined
        # here, handed on as a factory: `make_stage`)
        r = ref(expr, scope)
        if r is not None:
            return [["sym", r]]
    return []


def assigned_to(assigned: dict | None, name: str) -> bool:
    return bool(assigned and assigned.get(name))


def _replaced(facts: FileFacts, call: ast.Call) -> ast.expr | None:
    """The record a copy is made of, its other fields kept: ``x`` of ``dataclasses.replace(x,
    ...)`` or ``x.replace(...)`` (a flax struct, a NamedTuple's ``_replace``)."""
    func = call.func
    if isinstance(func, (ast.Name, ast.Attribute)) and call.args \
            and facts.qualify(func) == "dataclasses.replace":
        return call.args[0]
    if isinstance(func, ast.Attribute) and func.attr in ("replace", "_replace") and not call.args \
            and facts.qualify(func) is None:
        return func.value
    return None


def _field_annotation(facts: FileFacts, scope: Scope, ann: ast.expr | None,
                      field: str) -> ast.expr | None:
    """The annotation of ``field`` in the record class a parameter is annotated with, when this
    module defines the class (``cfg: Config`` and ``class Config: mesh: Mesh | None = None``)."""
    if not isinstance(ann, ast.Name):
        return None
    found = scope.lookup(ann.id)
    cls = found[0].children.get(ann.id) if found is not None else None
    return cls.annotations.get(field) if cls is not None and cls.kind == "class" else None


def _closure_param(scope: Scope, name: str) -> bool:
    """Whether ``name``, read in ``scope``, is a parameter of an enclosing function."""
    found = scope.lookup(name)
    return found is not None and found[0] is not scope and found[0].kind == "function" \
        and name in found[0].params


_NAMED_CLASS_KINDS = frozenset({"sym", "elts", "sub"})


def _names_classes_only(terms: list[list]) -> bool:
    """Kind terms that name classes and nothing the caller's own context decides (no
    parameter, attribute or call): ``[Block]``, ``Block``, ``(A, B)[0]``."""
    return all(t[0] == "sym" or t[0] in ("elts", "sub") and _names_classes_only(t[1])
               for t in terms)


def _loop_items(facts: FileFacts, scope: Scope, a, name: str, ref: RefFn,
                flow: LocalFlow | None, depth: int, assigned: dict | None,
                seen: frozenset) -> list[list]:
    """``[["sub", terms]]`` for the target of ``for name in seq:`` when ``seq`` may hold
    classes (``for block in blocks: nn.remat(block)``), else nothing."""
    loop = a.node
    if type(loop) is not ast.For or type(loop.target) is not ast.Name or loop.target.id != name:
        return []
    inner = [t for t in kind_terms(facts, scope, loop.iter, ref, flow, (), depth + 1, assigned,
                                   seen) if t[0] in _CLASS_KINDS]
    return [["sub", inner]] if inner else []


def _appended(facts: FileFacts, scope: Scope, name: str, ref: RefFn, flow: LocalFlow | None,
              depth: int, assigned: dict | None, seen: frozenset) -> list[list]:
    """``[["elts", terms]]`` for the classes a function appends to a list it holds by name
    (``layers = []`` ... ``layers.append(nn.remat(block))``), else nothing."""
    calls = flow.expr_calls if flow is not None else scope.expr_calls
    items = [c.args[0] for c in calls if type(c.func) is ast.Attribute and c.func.attr == "append"
             and type(c.func.value) is ast.Name and c.func.value.id == name and len(c.args) == 1]
    return _items(facts, scope, items, ref, flow, depth, assigned, seen) if items else []


# The kinds a rules table can be made of (``FlowIndex.tables`` reads each).
_TABLE_KINDS = frozenset({"table", "key", "p", "a", "c", "none", "gin_macro"})


def _grown(facts: FileFacts, scope: Scope, name: str, ref: RefFn, flow: LocalFlow | None,
           depth: int, assigned: dict | None, seen: frozenset) -> list[list]:
    """Kind terms of what a function adds to a rules table it holds by name: the tables it
    ``extend``s it with, and each entry it ``append``s -- a literal one, or ``(name, axes)``
    in a loop ``for name, mesh_axes in table:`` (that table's logical names, the mesh side
    rewritten). ``[["other"]]`` for anything else added: the table is then not known."""
    calls = flow.expr_calls if flow is not None else scope.expr_calls
    out: list[list] = []
    for c in calls:
        f = c.func
        if type(f) is not ast.Attribute or type(f.value) is not ast.Name or f.value.id != name \
                or f.attr not in ("extend", "append") or len(c.args) != 1 or c.keywords:
            continue
        arg = c.args[0]
        if f.attr == "append":
            entry = literal(arg, facts.consts_for(scope))
            if is_table([entry]):
                out.append(["table", table_entries([entry])])
                continue
            arg = _loop_table(scope, arg, assigned)
            if arg is None:
                out.append(["other"])
                continue
        terms = kind_terms(facts, scope, arg, ref, flow, (), depth + 1, assigned, seen)
        out.extend(terms if terms and all(t[0] in _TABLE_KINDS for t in terms) else [["other"]])
    return out


def _loop_table(scope: Scope, entry: ast.expr, assigned: dict | None) -> ast.expr | None:
    """The table a loop reads an appended entry's logical name from: ``(name, axes)`` where
    ``name`` is bound only by ``for name, ... in table:`` -> ``table``."""
    if type(entry) is not ast.Tuple or len(entry.elts) != 2 or type(entry.elts[0]) is not ast.Name:
        return None
    first = entry.elts[0].id
    values = (assigned or {}).get(first) or []
    loops = {id(a.node): a.node for a in values}
    if not values or any(a.value is not None or type(a.node) is not ast.For for a in values) \
            or len(loops) != 1:
        return None
    loop = next(iter(loops.values()))
    target = loop.target
    if type(target) is not ast.Tuple or len(target.elts) != 2 \
            or type(target.elts[0]) is not ast.Name or target.elts[0].id != first:
        return None
    return loop.iter


def _items(facts: FileFacts, scope: Scope, elts: list, ref: RefFn, flow: LocalFlow | None,
           depth: int, assigned: dict | None, seen: frozenset) -> list[list]:
    """``[["elts", terms]]`` for the items of a list, tuple or dict display that may be
    classes (``[Block, Other]``), else nothing."""
    inner: list[list] = []
    for e in elts:
        if e is None or isinstance(e, ast.Starred):
            continue
        for t in kind_terms(facts, scope, e, ref, flow, (), depth + 1, assigned, seen):
            if t[0] in _CLASS_KINDS and t not in inner:
                inner.append(t)
    return [["elts", inner]] if inner else []


def _returned_kinds(facts: FileFacts, scope: Scope, flow: LocalFlow, ref: RefFn,
                    fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, list]:
    """Kind terms of what the function returns: whole, and per position of a returned tuple
    (a ``-> Mesh`` annotation says it too)."""
    out: dict[str, list] = {}
    if fn.returns is not None and _is_mesh_annotation(facts, fn.returns):
        out[""] = [["mesh"]]
    if not flow.returns:
        return out
    whole = [t for r in flow.returns for t in kind_terms(facts, scope, r, ref, flow)]
    # (a property's "known to be no mesh" is kept: `obj.mesh` on an object of a class not
    # known is a mesh only where no class's `mesh` is something else, named_attribute_mesh)
    if whole and (not all(t == ["other"] for t in whole) or accessor(fn) == 1) \
            and "" not in out:
        out[""] = _unique_terms(whole)
    for i in range(min(_arity(flow), _MAX_SLOTS)):
        terms = [t for r in flow.returns for t in kind_terms(facts, scope, r, ref, flow, (i,))]
        if terms and not all(t == ["other"] for t in terms):
            out[str(i)] = _unique_terms(terms)
    return out


def _unique_terms(terms: list[list]) -> list[list]:
    out: list[list] = []
    for t in terms:
        if t not in out:
            out.append(t)
    return out


def _is_mesh_annotation(facts: FileFacts, ann: ast.expr, optional: bool = False) -> bool:
    """``Mesh``, ``jax.sharding.Mesh``, ``"Mesh"``; with ``optional`` also ``Mesh | None`` and
    ``Optional[Mesh]`` (once per annotation: a parameter's is asked at each of its reads)."""
    memo = facts.derived.get("mesh_annotations")
    if memo is None:
        memo = facts.derived["mesh_annotations"] = {}
    key = (ann, optional)
    found = memo.get(key)  # type: ignore[union-attr]
    if found is None:
        found = memo[key] = _mesh_annotation(facts, ann, optional)  # type: ignore[index]
    return found  # type: ignore[return-value]


def optional_of(ann: ast.expr) -> ast.expr | None:
    """``X`` of ``X | None``, ``None | X`` and ``Optional[X]``; None for any other annotation."""
    if type(ann) is ast.BinOp and type(ann.op) is ast.BitOr:
        left, right = ann.left, ann.right
        if type(right) is ast.Constant and right.value is None:
            return left
        return right if type(left) is ast.Constant and left.value is None else None
    if type(ann) is ast.Subscript and type(ann.value) in (ast.Name, ast.Attribute) \
            and (dotted(ann.value) or [""])[-1] == "Optional":
        return ann.slice
    return None


def _mesh_annotation(facts: FileFacts, ann: ast.expr, optional: bool) -> bool:
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            ann = ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return False
    if optional:
        inner = optional_of(ann)
        if inner is not None:
            return _is_mesh_annotation(facts, inner)
    if not isinstance(ann, (ast.Name, ast.Attribute)):
        return False
    known = facts.resolve(ann)
    return known is not None and known.role in _MESH_ROLES


def class_attributes(facts: FileFacts, cls: Scope, ref: RefFn,
                     of_method: Callable[[Scope], dict[str, list]] | None = None
                     ) -> dict[str, list]:
    """Kind terms of the attributes a class's methods set on ``self`` (``self.mesh = mesh``),
    and of its annotated fields (``mesh: Mesh``). ``of_method``: what one method sets
    (default :func:`method_attributes`; the summariser hands back a kept method's)."""
    out: dict[str, list] = {}
    for name, ann in cls.annotations.items():
        if _is_mesh_annotation(facts, ann):
            out.setdefault(name, []).append(["mesh"])
    for method in cls.children.values():
        if method.kind != "function" or not method.stores:
            continue
        found = of_method(method) if of_method is not None else \
            method_attributes(facts, method, ref)
        for name, terms in found.items():
            out.setdefault(name, []).extend(terms)
    # A field of a record kept on `self` (`self.cfg = replace(CFG, mesh=m)`, then `self.cfg.mesh`)
    # is what the keyword held only where every store of `self.cfg` passes that keyword: a
    # store of another value leaves the field unknown.
    for name in [k for k in out if "." in k and not k.endswith(".")]:
        stores = out.get(name.partition(".")[0] + ".", ())
        if any(name.partition(".")[2] not in t[1] for t in stores):
            out[name].append(["other"])
    return {k: _unique_terms(v) for k, v in out.items()
            if interesting(v)}


def method_attributes(facts: FileFacts, method: Scope, ref: RefFn) -> dict[str, list]:
    """Kind terms of what one method sets on ``self``, by attribute, in order; and, under
    ``"<attr>."``, one ``["fields", names]`` term per store: the keywords the value was built
    with (none for a value that is not a call), read by :func:`class_attributes`."""
    out: dict[str, list] = {}
    flow: LocalFlow | None = None
    for target, stmt in method.stores:
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                and target.value.id == "self"):
            continue
        value = getattr(stmt, "value", None)
        if isinstance(stmt, ast.AugAssign) or value is None or isinstance(
                getattr(stmt, "targets", [None])[0], (ast.Tuple, ast.List)):
            out.setdefault(f"{target.attr}.", []).append(["fields", []])
            continue  # (a value shardlint cannot see: it adds nothing)
        out.setdefault(f"{target.attr}.", []).append(
            ["fields", sorted({k.arg for k in value.keywords if k.arg is not None})
             if isinstance(value, ast.Call) else []])
        if flow is None:
            flow = LocalFlow(facts, method)
        terms = kind_terms(facts, method, value, ref, flow)
        out.setdefault(target.attr, []).extend(
            [*t, method.name] if t[0] == "p" else t for t in terms)
        if isinstance(value, ast.Call):  # `self.cfg = replace(CFG, mesh=m)`: "cfg.mesh" too
            for kw in value.keywords:
                # (a field handed a name or an attribute, `mesh=self.mesh`: what a mesh or a
                # table kept in a record is; computed keywords of every layer built in a
                # `setup` are not worth their cost)
                if kw.arg is not None and not kw.arg.startswith("_") \
                        and type(kw.value) in (ast.Name, ast.Attribute):
                    more = kind_terms(facts, method, kw.value, ref, flow)
                    if more:
                        out.setdefault(f"{target.attr}.{kw.arg}", []).extend(
                            [*t, method.name] if t[0] == "p" else t for t in more)
    if REGISTER_MODULES in method.self_calls:
        # `self.register_modules(flux=flux, vae=vae)`: a diffusers-style pipeline sets each
        # keyword as an attribute (`setattr(self, name, module)`, diffusers' DiffusionPipeline
        # and maxdiffusion's FlaxDiffusionPipeline)
        for c in facts.calls:
            func = c.node.func
            if c.scope is not method or type(func) is not ast.Attribute \
                    or func.attr != REGISTER_MODULES or type(func.value) is not ast.Name \
                    or func.value.id != "self":
                continue
            if flow is None:
                flow = LocalFlow(facts, method)
            for kw in c.node.keywords:
                if kw.arg is not None:
                    terms = kind_terms(facts, method, kw.value, ref, flow)
                    out.setdefault(kw.arg, []).extend(
                        [*t, method.name] if t[0] == "p" else t for t in terms)
    return out


REGISTER_MODULES = "register_modules"


def _defaults(facts: FileFacts, scope: Scope, fn: ast.FunctionDef | ast.AsyncFunctionDef
              ) -> dict[str, list]:
    """Kind terms of the parameters' default values that say something (``rules=None``)."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
    pairs += [(x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    out: dict[str, list] = {}
    parent = scope.parent or scope
    for arg, default in pairs:
        if type(default) is ast.Constant:  # (the commonest: only None says something)
            if default.value is None:
                out[arg.arg] = [["none"]]
        elif isinstance(default, (ast.Tuple, ast.List, ast.Attribute)):
            terms = kind_terms(facts, parent, default, lambda n, s: None, None)
            if terms and all(t[0] in ("none", "table", "key", "mesh") for t in terms):
                out[arg.arg] = terms
    return out


def slot(i: int | str) -> str:
    """The key of one part of a result in a summary: a tuple's position (``"0"``), or a dict
    entry's or record field's name (``".state"``)."""
    return str(i) if type(i) is int else "." + i  # type: ignore[operator]


def _fields(flow: LocalFlow) -> list[str]:
    """The keys of the dicts and the fields of the records a return statement builds (directly
    or through one local name), the first few."""
    out: list[str] = []
    for r in flow.returns:
        values = [r]
        if isinstance(r, ast.Name):
            values = [a.value for a in flow.assigned.get(r.id, ()) if a.value is not None
                      and not a.index]
        for v in values:
            out += [k for k in flow.record_fields(v) if k not in out]
    return out[:_MAX_SLOTS]


def _arity(flow: LocalFlow) -> int:
    """The longest tuple a return statement builds (directly or through one local name)."""
    n = 0
    for r in flow.returns:
        values = [r]
        if isinstance(r, ast.Name):
            values = [a.value for a in flow.assigned.get(r.id, ()) if a.value is not None
                      and not a.index]
        while values:
            v = values.pop()
            if isinstance(v, ast.IfExp):  # `(x, None) if full else (x, cache)`
                values += [v.body, v.orelse]
            elif isinstance(v, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in v.elts):
                n = max(n, len(v.elts))
    return n


def _mutations(flow: LocalFlow, calls: list[ast.Call]) -> list[list]:
    out = [_origin_term(o) for o in flow.mutated_params().values()]
    # A call that hands a parameter (the object itself) to a project function which may change
    # it in place (``loss = train_inner(model, optimizer, batch)``).
    callee = flow.callee
    if callee is None:
        return out
    own = {p for p in flow.all_params if p not in flow.assigned}
    for call in calls:
        args: list[list] = []
        f = call.func
        if type(f) is ast.Attribute and type(f.value) is ast.Name and f.value.id in own \
                and f.value.id not in ("self", "cls"):
            # `accumulator.add(grads)` on a parameter: the method may change its `self`
            args.append(["self", f.value.id, SAME, None, ""])
        for i, a in enumerate(call.args):
            if isinstance(a, ast.Starred):
                break
            if isinstance(a, ast.Name) and a.id in own:
                args.append([i, a.id, SAME, None, ""])
        for kw in call.keywords:
            v = kw.value
            if kw.arg is not None and isinstance(v, ast.Name) and v.id in own:
                args.append([kw.arg, v.id, SAME, None, ""])
        if not args:
            continue
        c = callee(call)
        if c is not None:
            out.append(["c", c.ref, c.bound, c.via_attr, [], args, _pos(call), _text(call)])
    return out


def _callables(facts: FileFacts, scope: Scope, flow: LocalFlow, ref: RefFn) -> dict[str, list]:
    """The callable each part of the result is, where it is one (see the module docstring)."""
    out: dict[str, list] = {}
    for r in flow.returns:
        slots: list[tuple[str, ast.expr]] = [("", r)]
        if isinstance(r, ast.Tuple):
            slots += [(str(i), e) for i, e in enumerate(r.elts[:_MAX_SLOTS])]
        for key, expr in slots:
            kind = callable_of(facts, scope, expr, ref, flow)
            if kind is not None and key not in out:
                out[key] = kind
    return out


def callable_of(facts: FileFacts, scope: Scope, expr: ast.expr, ref: RefFn,
                flow: LocalFlow | None = None, _depth: int = 0,
                _before: frozenset[str] = frozenset()) -> list | None:
    """What callable ``expr`` is: ``["fn", ref, bound, keywords]`` (a project function, with
    the arguments a ``partial`` bound), ``["param", name, bound, keywords]`` (a parameter of the
    function), ``["jit", callable, keywords, forwards]`` (``jax.jit`` of one: ``forwards`` when
    it passes ``**kwargs`` on). A ``"**"`` among the keywords: a ``partial`` also binds what
    callers pass to the function's own ``**kwargs`` (``partial(fn, **kwargs)``).

    ``_before``: parameters read as they came in, inside the one assignment that rebinds them
    (``fn = functools.partial(fn, **kwargs)``)."""
    if _depth > 4:
        return None
    if isinstance(expr, ast.Name) and flow is not None:
        values = flow.assigned.get(expr.id)
        if values and expr.id not in _before:
            if len(values) == 1 and values[0].value is not None and not values[0].index:
                before = _before | {expr.id} if expr.id in flow.all_params else _before
                return callable_of(facts, scope, values[0].value, ref, flow, _depth + 1, before)
            return None
        if expr.id in flow.all_params:
            return ["param", expr.id, 0, []]
    if isinstance(expr, (ast.Name, ast.Attribute)):
        if isinstance(expr, ast.Name) and flow is not None and expr.id in flow.all_params:
            return ["param", expr.id, 0, []]
        r = ref(expr, scope)
        return ["fn", r, 0, []] if r is not None else None
    if isinstance(expr, ast.Call) and expr.args:
        known = facts.resolve(expr.func) if isinstance(expr.func, (ast.Name, ast.Attribute)) \
            else None
        if known is None:
            return None
        inner = callable_of(facts, scope, expr.args[0], ref, flow, _depth + 1, _before)
        if inner is None:
            return None
        keywords = sorted(k.arg for k in expr.keywords if k.arg is not None)
        if known.role == Role.PARTIAL:
            spread = [k.value for k in expr.keywords if k.arg is None]
            if spread:
                # `partial(fn, **kwargs)` of the function's own `**kwargs`: its callers' keywords
                own = scope.node.args.kwarg if isinstance(
                    scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
                if len(spread) == 1 and own is not None and \
                        isinstance(spread[0], ast.Name) and spread[0].id == own.arg:
                    keywords.append("**")
            return [inner[0], inner[1], inner[2] + len(expr.args) - 1,
                    sorted({*inner[3], *keywords})] if inner[0] != "jit" else None
        if known.role == Role.JIT and known.name == "jax.jit" and len(expr.args) == 1:
            return ["jit", inner, keywords, any(k.arg is None for k in expr.keywords)]
    return None


def shift(flow: dict, d: int) -> dict:
    """The summary of a function the parser moved down by ``d`` lines."""
    return map_positions(flow, lambda p: [p[0] + d, p[1], p[2] + d, p[3]])


def map_positions(flow: dict, fn: Callable[[list[int]], list[int] | None]) -> dict:
    """The summary with every position ``[line, col, end_line, end_col]`` of its terms mapped
    by ``fn`` (the terms that hold positions: ``ret`` and ``mut``)."""
    def pos(p: list[int] | None) -> list[int] | None:
        return None if p is None else fn(p)

    def move(t: list) -> list:
        if t[0] == "p":
            return [t[0], t[1], t[2], pos(t[3]), t[4]]
        args = [[a[0], a[1], [move(x) for x in a[2]]] if a[1] == "#call"
                else [a[0], a[1], a[2], pos(a[3]), a[4]] for a in t[5]]
        if len(t) > 8:
            return [*t[:5], args, pos(t[6]), t[7], [pos(t[8][0]), t[8][1]]]
        return [*t[:5], args, pos(t[6]), t[7]]

    out = dict(flow)
    if "ret" in flow:
        out["ret"] = {k: [move(t) for t in v] for k, v in flow["ret"].items()}
    if "mut" in flow:
        out["mut"] = [move(t) for t in flow["mut"]]
    return out


# ---- across the project ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Link:
    """One step of a chain that proves an update: where, and what is written there."""

    path: str
    pos: tuple[int, int, int, int]  # line, col, end line, end col (UTF-8 columns)
    text: str


@dataclass(frozen=True)
class Flowing:
    """A parameter as (part of) a result: ``kind`` SAME, MAPPED (a leaf-wise map of it) or
    UPDATED, and the chain of calls down to the update (empty for the others)."""

    kind: str
    chain: tuple[Link, ...] = ()


def _link(path: str, pos: list[int] | None, text: str) -> Link:
    return Link(path, tuple(pos) if pos else (0, 0, 0, 0), text)  # type: ignore[arg-type]


class FlowIndex:
    """The function summaries of the project, joined lazily (see the module docstring)."""

    def __init__(self, project: ProjectIndex):
        self.project = project
        self._returns: dict[tuple[str, tuple[int, ...]], dict[str, Flowing]] = {}
        self._impls: dict[str, list[str]] | None = None  # method name -> implementations
        self._mutates: dict[str, dict[str, Flowing]] = {}
        self._kinds: dict[tuple, bool] = {}
        self._table_memo: dict[tuple, tuple[list, bool]] = {}
        self._classes: dict[tuple, frozenset[str]] = {}
        self._cuts = 0  # answers cut short so far (see _memo_classes)
        # (this walk's answers cut short, with the depth they were asked at: _memo_classes)
        self._classes_cut: dict[tuple, tuple[frozenset[str], int]] = {}
        self._class_hops = 0  # (hops of that walk still open)
        self._by_target: dict[str, list] | None = None
        self._by_partial: dict[str, list] | None = None
        self._gin_names: dict[str, list[str]] | None = None
        self._after: dict[str, set[str]] | None = None
        self._subclasses: dict[str, list[str]] | None = None
        self._sharded: dict[tuple[str, str], list] | None = None
        self._owners: dict[str, list[tuple[str, Any]]] | None = None
        self._active: set = set()

    def _memoised(self, store: dict, memo: tuple, too_deep: bool, compute: Callable[[], Any],
                  unknown: Any) -> Any:
        """``compute()``'s answer, once per ``memo`` key in ``store``; ``unknown`` for a key
        asked on the way to its own answer (a cycle) or asked too deep."""
        found = store.get(memo)
        if found is not None:
            return found
        if memo in self._active or too_deep:
            return unknown
        self._active.add(memo)
        try:
            found = compute()
        finally:
            self._active.discard(memo)
        store[memo] = found
        return found

    # ---- lookup -------------------------------------------------------------------------------
    def sharded_jit_params(self) -> dict[tuple[str, str], list]:
        """``(function key, parameter)`` -> ``[module, line, col, end_line, end_col]`` of the
        call of a jit with in/out shardings that what its callers pass there reaches: handed
        to it by the function itself (``summary.sharded_jit_params``), or to a project
        function's parameter that reaches one (any depth, across modules; the first found
        stands for them all)."""
        if self._sharded is not None:
            return self._sharded
        found: dict[tuple[str, str], list] = {}
        for mod, s in self.project.summaries.items():
            for fn, param, *at in s.sharded_jit_params:
                found.setdefault((fn, param), [mod, *at])
        if found:
            # (callee, its parameter) -> the (caller, its own parameter) pairs handed on there
            back: dict[tuple[str, str], list[tuple[str, str]]] = {}
            for mod, s in self.project.summaries.items():
                for e in s.calls:
                    if not e.args:
                        continue
                    target = self.function(e.target, mod)
                    if target is None:
                        continue
                    params = target[1].get("params") or []
                    offset = target[1].get("method", 0) if "self" in e.args else 0
                    caller = f"{mod}:{e.caller}"
                    for slot, terms in e.args.items():
                        if slot[:1] == "#" or slot == "self":
                            continue
                        name = slot if not slot.isdigit() else (
                            params[int(slot) + offset] if int(slot) + offset < len(params)
                            else None)
                        for t in terms:
                            if name is not None and t[0] == "p":
                                fn = caller if len(t) == 2 else \
                                    f"{caller.rpartition('.')[0]}.{t[2]}"
                                back.setdefault((target[0], name), []).append((fn, t[1]))
            todo = list(found)
            while todo:
                pair = todo.pop()
                for up in back.get(pair, ()):
                    if up not in found:
                        found[up] = found[pair]
                        todo.append(up)
        self._sharded = found
        return found

    def function(self, ref: str, from_module: str | None = None) -> tuple[str, dict] | None:
        """The resolved ``module:qual`` of a function reference and its summary (``{}`` when
        it has none); an alias (``step = jax.jit(train_step)``) stands for what it wraps."""
        key = self._resolve(ref, from_module)
        for _ in range(4):
            if key is None:
                return None
            sym = self.project.symbol(key)
            if sym is None:
                return None
            if sym.kind == "function":
                return key, sym.flow or {}
            if sym.kind != "alias" or len(sym.refs) != 1:
                return None
            key = self.project.resolve(sym.refs[0], key.partition(":")[0])
        return None

    def _on_an_object(self, ref: str, module: str, flow: dict) -> bool:
        """Whether ``ref`` names a method through a module-level object built from its class
        (``sharding.with_sharding_constraint``, ``sharding = _ShardingAPI()``): the call passes
        the method's ``self`` implicitly."""
        body = ref[4:] if ref.startswith("ext:") else ref.partition(":")[2]
        if not flow.get("method") or "." not in body:
            return False
        head = self.project.resolve(ref.rpartition(".")[0], module)
        sym = self.project.symbol(head) if head is not None else None
        return sym is not None and sym.kind == "value" and "instance" in (sym.flow or {})

    def path_of(self, key: str) -> str:
        s = self.project.summaries.get(key.partition(":")[0])
        return s.path if s is not None else ""

    # ---- queries ------------------------------------------------------------------------------
    def returns(self, key: str, index: tuple[int, ...] = (), depth: int = 0) -> dict[str, Flowing]:
        """Parameters of the function ``key`` (resolved) that its result at ``index`` holds."""
        def compute() -> dict[str, Flowing]:
            sym = self.project.symbol(key)
            flow = sym.flow if sym is not None else None
            if flow and flow.get("stub"):
                return self._implemented(key, flow, index, depth)
            return self._returned(flow.get("ret", {}), index, key.partition(":")[0],
                                  self.path_of(key), depth) if flow else {}
        return self._memoised(self._returns, (key, index), depth > MAX_DEPTH, compute, {})

    def _implemented(self, key: str, flow: dict, index: tuple[int, ...], depth: int
                     ) -> dict[str, Flowing]:
        """A method of a ``typing.Protocol`` that only documents itself (``def
        apply_gradient(self, grads) -> "TrainState": ...``): what every project class that
        implements a method of that name does with the arguments at the same positions
        (``return self.replace(...)``), where they all agree; implementations that refuse
        (``raise NotImplementedError``) aside. Any other class's stub says nothing."""
        module, _, qual = key.partition(":")
        owner = self.project.symbol(f"{module}:{qual.rpartition('.')[0]}") if "." in qual \
            else None
        if owner is None or owner.kind != "class" \
                or not any(b.rsplit(".", 1)[-1] == "Protocol" for b in owner.bases):
            return {}
        params = flow.get("params", [])
        protocol = f"{module}:{qual.rpartition('.')[0]}"
        wanted = self._methods_of(protocol)
        found: list[dict[str, Flowing]] = []
        for impl in self._implementations(qual.rpartition(".")[2]):
            cls = impl.rpartition(".")[0]
            missing = wanted - {m for c in self.project.class_chain(cls)
                                for m in self._methods_of(c)}
            if impl == key or len(missing) > max(1, len(wanted) // 5):
                # (a class that does not implement the Protocol: another kind of object; one
                # member may be a field where the Protocol has a property)
                continue
            impl_params = (self.project.symbol(impl).flow or {}).get("params", [])
            if len(impl_params) != len(params):
                return {}  # (another signature: not known to be the same method)
            below = self.returns(impl, index, depth + 1)
            found.append({params[impl_params.index(p)]: f for p, f in below.items()
                          if p in impl_params})
        if not found:
            return {}
        out: dict[str, Flowing] = {}
        for p, f in found[0].items():
            if all(p in other and other[p].kind == f.kind for other in found[1:]):
                out[p] = f
        return out

    def _methods_of(self, cls: str) -> frozenset[str]:
        """The names of the methods a project class defines itself."""
        module, _, qual = cls.partition(":")
        s = self.project.summaries.get(module)
        prefix = qual + "."
        return frozenset(q[len(prefix):] for q, sym in (s.symbols.items() if s else ())
                         if sym.kind == "function" and q.startswith(prefix)
                         and "." not in q[len(prefix):])

    def _implementations(self, name: str) -> list[str]:
        """The project's methods called ``name`` that do something (not stubs), by key."""
        table = self._impls
        if table is None:
            table = self._impls = {}
            for mod, s in self.project.summaries.items():
                for q, sym in s.symbols.items():
                    if sym.kind != "function" or "." not in q or (sym.flow or {}).get("stub"):
                        continue
                    owner = s.symbols.get(q.rpartition(".")[0])
                    if owner is not None and owner.kind == "class":
                        table.setdefault(q.rpartition(".")[2], []).append(f"{mod}:{q}")
        return table.get(name, [])

    def _returned(self, ret: dict[str, list], index: tuple[int, ...], module: str, path: str,
                  depth: int) -> dict[str, Flowing]:
        rest = index
        terms = ret.get("")
        if index and slot(index[0]) in ret:
            terms, rest = ret[slot(index[0])], index[1:]
        return self.resolve_terms(terms or [], rest, module, path, depth)

    def resolve_terms(self, terms: list[list], rest: tuple[int, ...], module: str, path: str,
                      depth: int = 0) -> dict[str, Flowing]:
        """What ``terms`` (of a function of ``module``, at ``path``), projected on ``rest``,
        say of that function's parameters."""
        out: dict[str, Flowing] = {}
        for t in terms:
            if t[0] == "p":
                if rest:
                    continue  # an item of a parameter (or of its update): only a part of it
                chain = (_link(path, t[3], t[4]),) if t[2] == UPDATED else ()
                _add(out, t[1], Flowing(t[2], chain))
                continue
            _, ref, bound, via_attr, idx, args, pos, text = t[:8]
            target = self.function(ref, module)
            if target is None:
                continue  # outside the project, or not a function: unknown
            callee, callee_flow = target
            via_attr = via_attr or self._on_an_object(ref, module, callee_flow)
            below = self.returns(callee, (*idx, *rest), depth + 1)
            if not below:
                continue
            here = _link(path, pos, text)
            after = _link(path, t[8][0], t[8][1]) if len(t) > 8 and not rest else None
            for a in args:
                if a[1] == "#call":  # handed another call's result: what that one holds
                    self._through_call(out, a, below, callee_flow, bound, via_attr, module,
                                       path, depth, here)
            for p, kind, ev, flowing in _bind(callee_flow, below, args, bound, via_attr):
                if kind in (SAME, MAPPED) and after is not None:
                    # handed back as it came, then updated here (`replace(self.f(x), ...)`)
                    _add(out, p, Flowing(UPDATED, (here, after)))
                elif kind in (SAME, MAPPED):
                    _add(out, p, Flowing(kind))
                elif ev is None:
                    _add(out, p, Flowing(UPDATED, (here, *flowing.chain)))
                else:  # the callee hands back what we updated before the call
                    _add(out, p, Flowing(UPDATED, (_link(path, ev[0], ev[1]),)))
        return out

    def _through_call(self, out: dict[str, Flowing], arg: list, below: dict[str, Flowing],
                      callee_flow: dict, bound: int, via_attr: bool, module: str, path: str,
                      depth: int, here: Link) -> None:
        """``unbox(step(state)[0])``: the callee returns (a map of) its parameter, and what
        it is handed is the result of another project call, which holds an update of our
        ``state``: so does this result."""
        params = callee_flow.get("params", [])
        offset = bound + (callee_flow.get("method", 0) if via_attr else 0)
        key = arg[0]
        q = key if isinstance(key, str) else (params[key + offset]
                                             if 0 <= key + offset < len(params) else None)
        flowing = below.get(q) if q is not None else None
        if flowing is None or depth > MAX_DEPTH:
            return
        for p, inner in self.resolve_terms(arg[2], (), module, path, depth + 1).items():
            if inner.kind == UPDATED and flowing.kind in (SAME, MAPPED):
                _add(out, p, Flowing(UPDATED, inner.chain))
            elif flowing.kind == UPDATED and inner.kind in (SAME, UPDATED):
                _add(out, p, Flowing(UPDATED, (here, *flowing.chain)))
            elif inner.kind == SAME and flowing.kind in (SAME, MAPPED):
                _add(out, p, Flowing(flowing.kind))

    # ---- kinds of values --------------------------------------------------------------------------
    def returns_linen(self, ref: str, from_module: str | None, depth: int = 0) -> str | None:
        """The Linen module class (its name) that calling ``ref`` gives an instance of: the
        class itself, or a project function every return of which is one (any depth)."""
        if depth > MAX_DEPTH:
            return None
        if ref.startswith("ext:flax.linen."):
            name = ref.rpartition(".")[2]
            return name if name[:1].isupper() else None
        key = self.project.resolve(ref, from_module)
        sym = self.project.symbol(key) if key is not None else None
        if key is None or sym is None:
            return None
        if sym.kind in ("class", "alias") and self.project.is_subclass(key, LINEN_MODULE) \
                and not self.project.is_subclass(key, NNX_MODULE):
            return key.partition(":")[2]
        if sym.kind != "function":
            return None
        memo = ("linen", key)
        if memo in self._active:
            return None
        self._active.add(memo)
        try:
            terms = (sym.flow or {}).get("kind", {}).get("", [])
            found = {self.returns_linen(t[1], key.partition(":")[0], depth + 1)
                     if t[0] == "c" and not t[4] else None for t in terms}
        finally:
            self._active.discard(memo)
        return found.pop() if len(found) == 1 and None not in found else None

    def returns_mesh(self, key: str, index: tuple[int, ...] = (), depth: int = 0) -> bool:
        """Whether the function ``key`` (resolved) returns a mesh (at ``index`` of its result):
        some return is one and none is known to be something else."""
        def compute() -> bool:
            sym = self.project.symbol(key)
            kinds = (sym.flow or {}).get("kind", {}) if sym is not None else {}
            terms = kinds.get(str(index[0]) if index else "")
            rest = index[1:] if index and str(index[0]) in kinds else index
            if terms is None and index:
                terms, rest = kinds.get(""), index
            return self.terms_mesh(terms or [], key, rest, depth) if not rest else False
        return self._memoised(self._kinds, ("mesh", key, index), depth > MAX_DEPTH, compute,
                              False)

    def terms_mesh(self, terms: list[list], key: str, rest: tuple[int, ...] = (),
                   depth: int = 0) -> bool:
        """Whether kind terms written in the function (or class member) ``key`` say a mesh."""
        mesh = other = False
        module = key.partition(":")[0]
        for t in terms:
            what = t[0]
            if what == "mesh":
                mesh = True
            elif what == "other":
                other = True
            elif what == "c":
                target = self.function(t[1], module)
                if target is not None and self.returns_mesh(target[0], tuple(t[4]), depth + 1):
                    mesh = True
                elif target is None and t[4] and type(t[4][0]) is str:
                    # a field of a project class's instance: a mesh where the class sets one,
                    # else not known (as a field its construction does not pass)
                    mesh = mesh or self._instance_attribute_mesh(t, module, depth)
                else:  # (`mesh if c else contextlib.nullcontext()`: not certainly a mesh)
                    other = True
            elif what == "a":
                if self.attribute_mesh(key, t[1], depth + 1):
                    mesh = True
            elif what == "sym" and depth <= MAX_DEPTH:
                # a module-level value of another module (`from meshes import MESH`)
                found = self.project.resolve(t[1], module)
                mod, _, name = (found or "").partition(":")
                s = self.project.summaries.get(mod) if name and "." not in name else None
                terms = s.value_kinds.get(name) if s is not None else None
                if terms and self.terms_mesh(terms, f"{mod}:", (), depth + 1):
                    mesh = True
            elif what == "p":
                # A parameter: a mesh when the function uses it as one (or its annotation
                # names the mesh class through the project), or every caller in the project
                # passes one.
                fn = key if len(t) == 2 else f"{key.rpartition('.')[0]}.{t[2]}"
                sym = self.project.symbol(fn)
                flow = (sym.flow or {}) if sym is not None else {}
                ann = flow.get("pann", {}).get(t[1])
                if t[1] in flow.get("meshp", ()) \
                        or ann is not None and self.mesh_class(ann, fn.partition(":")[0]) \
                        or self.param_mesh(fn, t[1], depth + 1):
                    mesh = True
        return mesh and not other

    def mesh_class(self, ref: str, module: str, hops: int = 0) -> bool:
        """Whether the project name ``ref`` (seen from ``module``) is the mesh class: a name
        a module binds to it or imports as it (``ModuleSummary.mesh_types``), or an alias of
        such a name (``Mesh = partitioning.Mesh``)."""
        key = self.project.resolve(ref, module)
        if key is None:
            return False
        mod, _, name = key.partition(":")
        s = self.project.summaries[mod]
        if name in s.mesh_types:
            return True
        sym = s.symbols.get(name)
        target = max(sym.refs, key=len, default=None) if sym is not None \
            and sym.kind == "alias" else None
        return target is not None and hops < 4 and self.mesh_class(target, mod, hops + 1)

    def _instance_attribute_mesh(self, t: list, module: str, depth: int) -> bool:
        """A ``c`` term of a project class's construction, read at one attribute
        (``GenerateSD(config).mesh``): whether that class, or the nearest base class that sets
        it, makes the attribute a mesh."""
        if len(t[4]) != 1 or type(t[4][0]) is not str:
            return False
        cls = self.project.resolve(t[1], module)
        sym = self.project.symbol(cls) if cls is not None else None
        return sym is not None and sym.kind == "class" \
            and self.attribute_mesh(f"{cls}.__init__", t[4][0], depth + 1)

    # ---- rules tables ------------------------------------------------------------------------------
    def tables(self, terms: list[list], key: str, depth: int = 0
               ) -> tuple[list[tuple[list, tuple | None]], bool]:
        """The rules tables kind terms written in ``key`` (a function, or a class member) can be:
        (entries, source) pairs -- source ``(path, config key, line)`` for a table read from the
        configuration -- and whether that is all of them. A table a project function computes
        from a known one (``rules_pp_as_dp(config.logical_axis_rules)``, which rewrites the mesh
        side) is taken to have that table's logical names."""
        out: list[tuple[list, tuple | None]] = []
        complete = bool(terms)
        module = module_of(key)
        held: set[str] = set()  # (`self.x`'s attributes the class's own assignments resolve)
        for t in terms:
            what = t[0]
            if what == "table":
                out.append((t[1], None))
            elif what == "key" and t[1] in held:
                continue  # (`self._rules`, set from what the class is handed: not a config key)
            elif what == "key" and self.project.config_asked(t[1]):
                continue  # (the key being worked out: its tables are the ones asked for)
            elif what == "key":
                found = self.project.config_tables(t[1])
                if not found or any(entries is None for _, _, entries in found):
                    complete = False
                out.extend((entries, (path, t[1], line)) for path, line, entries in found
                           if entries is not None)
            elif what == "none":
                continue
            elif what == "gin_macro":  # `%RULES`: what every gin file of the project binds it to
                bound = [(f"{m}:", s.gin["macros"][t[1]]) for m, s in self.project.summaries.items()
                         if t[1] in s.gin.get("macros", ())]
                complete = complete and bool(bound) and depth < TABLE_DEPTH
                for where, macro in bound if depth < TABLE_DEPTH else ():
                    more, ok = self.tables(macro, where, depth + 1)
                    out.extend(more)
                    complete = complete and ok
            elif what == "p":
                fn = key if len(t) == 2 else f"{key.rpartition('.')[0]}.{t[2]}"
                more, ok = self._param_tables(fn, t[1], depth + 1)
                out.extend(more)
                complete = complete and ok
            elif what == "a":
                more, ok = self._attribute_tables(key, t[1], depth + 1)
                if ok:
                    out.extend(more)
                    held.add(t[1])
                # (an attribute that holds no table: the `key` term beside it may be right)
            elif what == "c":
                target = self.function(t[1], module)
                more, ok = ([], False)
                if target is not None and depth < TABLE_DEPTH:
                    sym = self.project.symbol(target[0])
                    kinds = (sym.flow or {}).get("kind", {}) if sym is not None else {}
                    slot = str(t[4][0]) if t[4] else ""
                    if kinds.get(slot):
                        more, ok = self.tables(kinds[slot], target[0], depth + 1)
                if not ok and len(t) > 5:
                    more, ok = self.tables(t[5], key, depth + 1)  # derived from its argument
                out.extend(more)
                complete = complete and ok
            else:
                complete = False
        return out, complete

    def param_tables(self, fn: str, param: str) -> tuple[list[tuple[list, tuple | None]], bool]:
        """The tables every caller of ``fn`` hands it as ``param``, and whether that is all."""
        return self._param_tables(fn, param, 0)

    def param_tables_asked(self, fn: str, param: str) -> bool:
        """Whether the tables of ``fn``'s parameter ``param`` are being worked out (a caller
        hands it a configuration key whose tables include what ``fn`` stores: nothing new)."""
        return ("p", fn, param) in self._active

    def _param_tables(self, fn: str, param: str, depth: int):
        """The tables every caller of ``fn`` hands it as ``param`` (its default where a call
        leaves it out), and whether that is all of them: one answer per parameter, whoever
        asks (a parameter being asked about on the way to its own answer: not known)."""
        return self._memoised(self._table_memo, ("p", fn, param), depth > TABLE_DEPTH,
                              lambda: self._compute_param_tables(fn, param, depth), ([], False))

    def _compute_param_tables(self, fn: str, param: str, depth: int):
        sym = self.project.symbol(fn)
        flow = sym.flow if sym is not None else None
        callers = self._callers_of(fn) if flow else []
        if not flow or not callers or param not in flow.get("params", []):
            return [], False
        params, method = flow["params"], flow.get("method", 0)
        out: list = []
        for caller, args, constructor in callers:
            if args is None:
                return [], False
            offset = method if constructor or "self" in args else 0
            pos = params.index(param) - offset
            terms = args.get(param) or (args.get(str(pos)) if pos >= 0 else None)
            if terms is None and not _passes(args, param, pos):
                terms = flow.get("defaults", {}).get(param)  # not passed: its default
            if terms is None:
                return [], False
            more, ok = self.tables(terms, caller, depth + 1)
            if not ok:
                return [], False
            out.extend(more)
        return out, True

    def _attribute_tables(self, member: str, attr: str, depth: int):
        """The tables ``self.<attr>`` holds in the methods of the class of ``member``: what
        the class's methods assign it, or the nearest project base class's (a subclass that
        hands its table to ``super().__init__``)."""
        found = self._attribute_terms(member, attr)
        if found is None or depth > TABLE_DEPTH:
            return [], False
        return self.tables(found[1], f"{found[0]}.__attr__", depth + 1)

    def _attribute_terms(self, member: str, attr: str) -> tuple[str, list] | None:
        """(class key, kind terms) of what ``self.<attr>`` is assigned in the class of
        ``member`` (a ``module:Class.method`` key) or in the nearest of its project base
        classes that assigns it."""
        module, _, qual = member.partition(":")
        parts = qual.split(".")
        # (the nearest class around it: `self` in a function nested in a method is the
        # method's, `Loop.__init__._update` reads what `Loop` sets)
        cls = next((c for i in range(len(parts) - 1, 0, -1)
                    if (s := self.project.symbol(f"{module}:{(c := '.'.join(parts[:i]))}"))
                    is not None and s.kind == "class"), qual.rpartition(".")[0])
        for key in self.project.class_chain(f"{module}:{cls}") if cls else ():
            sym = self.project.symbol(key)
            attrs = (sym.flow or {}).get("attrs", {}) if sym is not None else {}
            if attr in attrs:
                return key, attrs[attr]
        return None

    def param_mesh(self, fn: str, param: str, depth: int = 0) -> bool:
        """Whether every call of the function ``fn`` in the project passes a mesh as
        ``param`` (a constructor call ``Model(config, mesh)`` counts for ``__init__``)."""
        return self._memoised(self._kinds, ("param", fn, param), depth > MAX_DEPTH,
                              lambda: self._param_mesh(fn, param, depth), False)

    def _param_mesh(self, fn: str, param: str, depth: int) -> bool:
        sym = self.project.symbol(fn)
        flow = sym.flow if sym is not None else None
        if not flow:
            return False
        params, method = flow.get("params", []), flow.get("method", 0)
        # (a `functools.partial` that binds the parameter counts as a caller: every later
        # call of it passes what it bound; one that leaves it to its calls does not: a call
        # of it seen is a call of ``fn``, and one not seen is no call of a partial shown)
        pos = params.index(param) if param in params else -1
        callers = self._callers_of(fn) + [
            p for p in self._partials_of(fn) if _binds(p[1], param, pos)]
        if not callers or (param not in params and param not in flow.get("kwonly", ())):
            return False
        for caller, args, constructor in callers:
            if args is None:
                return False
            offset = method if constructor or "self" in args else 0
            pos = params.index(param) - offset if param in params else -1  # (keyword-only)
            terms = args.get(param) or (args.get(str(pos)) if pos >= 0 else None)
            if terms is None or not self.terms_mesh(terms, caller, (), depth + 1):
                return False
        return True

    def _callers_of(self, fn: str) -> list[tuple[str, dict | None, bool]]:
        """(caller key, argument kinds, a constructor call) of each call of ``fn``."""
        index = self._by_target
        if index is None:
            index = self._by_target = {}
            for mod, s in self.project.summaries.items():
                for e in s.calls:
                    t = self.project.resolve(e.target, mod) \
                        if not e.target.startswith("super:") else self._super(e.target)
                    if t is not None:
                        index.setdefault(t, []).append((f"{mod}:{e.caller}", e.args, False))
                for target, _, args in s.gin.get("calls", ()):  # (a gin file's: config_tables.read_gin)
                    found = self._gin_targets(target, mod)
                    for t in found:  # (several a selector may be: each called with what not known)
                        index.setdefault(t, []).append((f"{mod}:", args if len(found) == 1
                                                        else None, False))
        out = list(index.get(fn, ()))
        if fn.endswith(".__init__"):
            # a constructor call of the class, or of a project subclass that inherits this
            # `__init__` (`NNXPipeline(...)` runs `PipelineBase.__init__`)
            for cls in self._inheriting(fn[: -len(".__init__")]):
                out += [(c, a, True) for c, a, _ in index.get(cls, ())]
        return out

    def _partials_of(self, fn: str) -> list[tuple[str, dict | None, bool]]:
        """(binding scope's key, what it binds, False) of each ``functools.partial`` of ``fn``
        in the project (``ModuleSummary.partials``)."""
        index = self._by_partial
        if index is None:
            index = self._by_partial = {}
            for mod, s in self.project.summaries.items():
                for caller, target, args in s.partials:
                    t = self.project.resolve(target, mod)
                    if t is not None:
                        index.setdefault(t, []).append((f"{mod}:{caller}", args, False))
        return list(index.get(fn, ()))

    def _resolve(self, ref: str, from_module: str | None) -> str | None:
        """``project.resolve``, and a gin selector (``gin:partitioning.Partitioner``, from a
        gin file's module): the one symbol :meth:`_gin_targets` finds, else None."""
        if not ref.startswith("gin:"):
            # (a method the class inherits, `self.load_checkpoint()` of a base's method: the
            # base's, where the class does not define it)
            return self.project.resolve(ref, from_module) or self.project.inherited(
                ref, from_module)
        found = self._gin_targets(ref, from_module or "")
        return found[0] if len(found) == 1 else None

    def _gin_targets(self, ref: str, module: str) -> list[str]:
        """The project symbols a gin file's call target may be: an ``ext:`` reference
        resolved; a selector no import of the file names, through the imports of the files it
        includes (nearest first), else every symbol whose dotted name ends with it, as gin
        matches configurables."""
        if not ref.startswith("gin:"):
            t = self.project.resolve(ref, module)
            return [t] if t is not None else []
        selector = ref[4:]
        parts = selector.split(".")
        for m in self._gin_included(module):
            imports = self.project.summaries[m].gin.get("imports", {})
            for i in range(len(parts) - 1, 0, -1):
                head = ".".join(parts[:i])
                if head in imports:
                    found = imports[head] and self.project.resolve(
                        f"ext:{imports[head]}.{'.'.join(parts[i:])}", module)
                    return [found] if found else []
        index = self._gin_names
        if index is None:
            index = self._gin_names = {}
            for mod, s in self.project.summaries.items():
                for qual in s.symbols:
                    index.setdefault(qual.rpartition(".")[2], []).append(f"{mod}:{qual}")
        return [k for k in index.get(parts[-1], ())
                if k.replace(":", ".").endswith(f".{selector}") or k.partition(":")[2] == selector]

    def _gin_included(self, module: str) -> list[str]:
        """A gin file's module and those of the files it includes, at any depth, nearest
        first (an include is a path from a search root, or from the including file's folder)."""
        out, todo = [], [module]
        while todo and len(out) < 64:
            m = todo.pop(0)
            s = self.project.summaries.get(m)
            if m in out or s is None:
                continue
            out.append(m)
            here = m[len("config:"):].rpartition("/")[0]
            for path in s.gin.get("includes", ()):
                path = path.lstrip("./")
                for candidate in (f"config:{path}", f"config:{here}/{path}" if here else None):
                    if candidate in self.project.summaries:
                        todo.append(candidate)
                        break
                else:
                    todo += sorted(k for k in self.project.summaries
                                   if k.startswith("config:") and k.endswith(f"/{path}"))[:1]
        return out

    def _super(self, target: str) -> str | None:
        """The method ``super().<method>`` calls in a method of a class (``super:mod:Cls.m``):
        the nearest project base class's that defines it."""
        cls, _, method = target[len("super:"):].rpartition(".")
        for base in self.project.class_chain(cls)[1:]:
            if self.project.symbol(f"{base}.{method}") is not None:
                return f"{base}.{method}"
        return None

    def default_used(self, fn: str, param: str) -> bool:
        """Whether the default of ``fn``'s parameter is used: some call of it in the project
        leaves the parameter out (a constructor call counts for ``__init__``), or no call is
        seen (it may be called from outside the project)."""
        sym = self.project.symbol(fn)
        flow = sym.flow if sym is not None else None
        callers = self._callers_of(fn)
        if not flow or not callers:
            return True
        params, method = flow.get("params", []), flow.get("method", 0)
        for _, args, constructor in callers:
            if args is None:
                return True
            if param in params:
                offset = method if constructor or "self" in args else 0
                if not _passes(args, param, params.index(param) - offset):
                    return True
            elif param not in args and param not in args.get("#kw", ()):  # (keyword-only)
                return True
        return False

    def read_after(self, callee: str) -> frozenset[str]:
        """The arguments (positions as "0", or keywords) that a call of ``callee`` somewhere in
        the project rebinds while still reading the old value (``ModuleSummary.kept``).
        ``callee``: a resolved key, with ``()`` for what a function returns or ``().attr`` for
        an instance's attribute (``jit_sites.remote_names``)."""
        index = self._after
        if index is None:
            index = self._after = {}
            for mod, s in self.project.summaries.items():
                for spec, keys in s.kept:
                    base, paren, rest = spec.partition("()")
                    t = self.project.resolve(base, mod)
                    if t is not None:
                        index.setdefault(f"{t}{paren}{rest}", set()).update(keys)
        return frozenset(index.get(callee, ()))

    def _inheriting(self, cls: str) -> list[str]:
        """``cls`` and its project subclasses, at any depth, that define no ``__init__``."""
        subs = self._subclasses
        if subs is None:
            subs = self._subclasses = {}
            for mod, s in self.project.summaries.items():
                for qual, sym in s.symbols.items():
                    if sym.kind != "class":
                        continue
                    for base in self.project.base_classes(f"{mod}:{qual}", sym.bases):
                        subs.setdefault(base, []).append(f"{mod}:{qual}")
        out, todo = [cls], [cls]
        while todo and len(out) < 256:
            for sub in subs.get(todo.pop(), ()):
                if sub not in out and self.project.symbol(f"{sub}.__init__") is None:
                    out.append(sub)
                    todo.append(sub)
        return out

    def attribute_mesh(self, member: str, attr: str, depth: int = 0) -> bool:
        """Whether ``self.<attr>`` is a mesh in the methods of the class of ``member`` (a
        ``module:Class.method`` key), or of one of its project base classes."""
        head, dot, field_ = attr.partition(".")
        if dot and "." not in field_ and depth <= MAX_DEPTH:
            # `self.cfg.mesh` where every store of `self.cfg` is a record built with `mesh=`
            # (`self.cfg = dataclasses.replace(CFG, mesh=self.mesh)`): what that keyword held
            found = self._attribute_terms(member, attr)
            if found is not None:
                return self.terms_mesh(found[1], f"{found[0]}.__attr__", (), depth + 1)
        if dot and "." not in field_:
            # `self.engine.mesh`: a field of the object `self.engine` holds, where that is an
            # instance the class builds of a project class (read at the field, as
            # `Engine(devices).mesh` is)
            built = self._attribute_terms(member, head)
            terms = [[*t[:4], [field_], *t[5:]] for t in built[1] if t[0] == "c" and not t[4]] \
                if built is not None else []
            if terms and len(terms) == len(built[1]):  # type: ignore[index]
                return depth <= MAX_DEPTH and \
                    self.terms_mesh(terms, f"{built[0]}.__attr__", (), depth + 1)  # type: ignore[index]
            # (an object of a class not known: `self.model.mesh`, where `model` is a property
            # over what `nnx.eval_shape` made -- what the project's classes make of `.mesh`)
            return self.named_attribute_mesh(field_, depth + 1)
        found = self._attribute_terms(member, attr)
        if found is not None and depth <= MAX_DEPTH and \
                self.terms_mesh(found[1], f"{found[0]}.__attr__", (), depth + 1):
            return True
        # a property of the class (`@property def mesh(self) -> Mesh: return
        # self._engine.mesh`): what its body returns, or its annotation says (a store
        # `self.mesh = ...` beside it goes to its setter)
        method = self._member_function(member, attr)
        return method is not None and depth <= MAX_DEPTH and \
            self.returns_mesh(method, (), depth + 1)

    def attribute_other(self, member: str, attr: str) -> bool:
        """Whether what the class of ``member`` stores in ``self.<attr>`` (``cfg.mesh``: a
        field of the record it keeps) may be a value known to be no mesh."""
        found = self._attribute_terms(member, attr)
        return found is not None and any(t[0] == "other" for t in found[1])

    def named_attribute_mesh(self, name: str, depth: int = 0) -> bool:
        """Whether ``obj.<name>``, on an object of a class shardlint cannot tell, is a mesh by
        what the project's classes make of that attribute: one of them makes it a mesh (a
        property annotated ``-> Mesh`` or returning one, a field annotated ``Mesh``, a
        ``self.<name>`` set from one) and none makes it a value known to be something else."""
        def compute() -> bool:
            mesh = False
            for cls, sym in self._attribute_owners().get(name, ()):
                if sym.kind == "class":  # (a field, or a store on `self`)
                    terms = sym.flow["attrs"][name]
                    says = self.terms_mesh(terms, f"{cls}.__attr__", (), depth + 1)
                else:  # (a property)
                    terms = sym.flow.get("kind", {}).get("", ())
                    says = self.returns_mesh(f"{cls}.{name}", (), depth + 1)
                if says:
                    mesh = True
                elif any(t[0] == "other" for t in terms):
                    return False
            return mesh
        return self._memoised(self._kinds, ("named", name), depth > MAX_DEPTH, compute, False)

    def _attribute_owners(self) -> dict[str, list[tuple[str, Any]]]:
        """Attribute name -> (class key, symbol) of each project class that sets it on
        ``self`` or declares it as a field (the class's symbol), or defines it as a property
        (the getter's symbol)."""
        if self._owners is None:
            self._owners = {}
            for mod, s in self.project.summaries.items():
                for qual, sym in s.symbols.items():
                    flow = sym.flow
                    if not flow:
                        continue
                    if sym.kind == "class":
                        for name in flow.get("attrs", ()):
                            if "." not in name:
                                self._owners.setdefault(name, []).append((f"{mod}:{qual}", sym))
                    elif flow.get("prop") == 1:
                        cls, _, name = qual.rpartition(".")
                        self._owners.setdefault(name, []).append((f"{mod}:{cls}", sym))
        return self._owners

    def _member_function(self, member: str, attr: str) -> str | None:
        """The key of the function ``attr`` of the class of ``member`` (a
        ``module:Class.method`` key), or of the nearest project base class that defines it."""
        module, _, qual = member.partition(":")
        cls = qual.rpartition(".")[0]
        for key in self.project.class_chain(f"{module}:{cls}") if cls else ():
            sym = self.project.symbol(f"{key}.{attr}")
            if sym is not None and sym.kind == "function":
                return f"{key}.{attr}"
        return None

    # ---- classes ------------------------------------------------------------------------------
    def classes(self, terms: list[list], key: str, depth: int = 0) -> frozenset[str]:
        """The project classes (resolved keys) a value with these kind terms, written in the
        function or member ``key``, may be: a class named there, one a project function
        returns, one a caller hands in as the parameter (any caller: each is a class the code
        may run with). A list, tuple or dict of classes, and an item of one, count as their
        classes (``layer_cls = blocks[0]``). So does a module-level value a call makes of a
        project class (``BlockLinen = to_linen_class(Block, ...)``): a class made at import."""
        out: set[str] = set()
        module = key.partition(":")[0]
        for t in terms:
            what = t[0]
            if what == "sym":
                found = self.project.resolve(t[1], module)
                sym = self.project.symbol(found) if found is not None else None
                if sym is not None and (sym.kind == "class" or self._made_class(found, sym)):
                    out.add(found)  # type: ignore[arg-type]
            elif what in ("elts", "sub"):
                out |= self.classes(t[1], key, depth)
            elif what == "c":
                target = self.function(t[1], module)
                if target is not None:
                    given = self._given_classes(target, t, depth) if len(t) > 6 else None
                    out |= given if given is not None else \
                        self._memo_classes(("ret", target[0]), depth)
            elif what == "p":
                fn = key if len(t) == 2 else f"{key.rpartition('.')[0]}.{t[2]}"
                out |= self._memo_classes(("param", fn, t[1]), depth)
            elif what == "a" and depth < _CLASS_HOPS:
                # `self.layers`, set in a method to a class or a list of them
                cls = key.partition(":")[2].rpartition(".")[0]
                owner = f"{module}:{cls}" if cls else ""
                sym = self.project.symbol(owner) if owner else None
                attrs = (sym.flow or {}).get("attrs", {}) if sym is not None \
                    and sym.kind == "class" else {}
                if t[1] in attrs:
                    out |= self.classes(attrs[t[1]], f"{owner}.__attr__", depth + 1)
        return frozenset(out)

    def _made_class(self, key: str, sym) -> bool:
        """A module-level value (not a function or class) whose definition refers to a
        project class: ``BlockLinen = to_linen_class(Block, ...)``."""
        if sym.kind != "value" or "." in key.partition(":")[2]:
            return False
        module = key.partition(":")[0]
        for r in sym.refs:
            found = self.project.resolve(r, module)
            other = self.project.symbol(found) if found is not None else None
            if other is not None and other.kind == "class":
                return True
        return False

    def _given_classes(self, target: tuple[str, dict], t: list, depth: int
                       ) -> frozenset[str] | None:
        """The classes a call returns when what it returns comes from its first parameter
        and the call names the classes it hands there (``with_remat([Block])[0]``): those,
        not every caller's. None when the function's result does not come from there."""
        key, flow = target
        params = flow.get("params") or []
        # (called as `self.f(...)`/`obj.f(...)`: past `self`; `t[2]`: arguments bound before)
        pos = (flow.get("method", 0) if t[3] else 0) + (t[2] or 0)
        if pos >= len(params) or depth >= _CLASS_HOPS:
            return None
        first = params[pos]
        sym = self.project.symbol(key)
        kinds = (sym.flow or {}).get("kind", {}) if sym is not None else {}
        terms = [x for slot in kinds.values() for x in slot]

        def bound(terms: list[list]) -> list[list] | None:
            out = []
            for x in terms:
                if x[0] == "p" and x[1] == first:
                    out.extend(t[6])
                elif x[0] in ("elts", "sub"):
                    inner = bound(x[1])
                    if inner is None:
                        return None
                    out.append([x[0], inner])
                elif x[0] in _CLASS_KINDS and x[0] != "sym":
                    return None  # (another parameter, a call: not only the given classes)
                else:
                    out.append(x)
            return out

        mapped = bound(terms)
        if mapped is None or mapped == terms:
            return None
        return self.classes(mapped, key, depth + 1)

    def instances(self, terms: list[list], key: str, depth: int = 0) -> frozenset[str]:
        """The project classes a value with these kind terms, written in ``key``, may be an
        instance of: what a project class's constructor or a project function returns, what
        calling a handed-in factory or class gives (``stage_factory(rngs)``), what callers
        hand in as the parameter; items of lists of them count."""
        out: set[str] = set()
        module = key.partition(":")[0]
        for t in terms:
            what = t[0]
            if what in ("elts", "sub"):
                out |= self.instances(t[1], key, depth)
            elif what == "c":
                found = self.project.resolve(t[1], module)
                sym = self.project.symbol(found) if found is not None else None
                if sym is not None and sym.kind == "class":
                    out.add(found)  # type: ignore[arg-type]
                else:
                    target = self.function(t[1], module)
                    if target is not None:
                        out |= self._memo_classes(("new", target[0]), depth)
                    made = self._alternative_constructor(t[1], module)
                    if made is not None:
                        out.add(made)
            elif what == "p":  # (of an attribute's terms: a parameter of the method named)
                fn = key if len(t) == 2 else f"{key.rpartition('.')[0]}.{t[2]}"
                out |= self._memo_classes(("param-new", fn, t[1]), depth)
            elif what == "pc":
                out |= self._memo_classes(("call", key, t[1]), depth)
        return frozenset(out)

    def _alternative_constructor(self, ref: str, module: str) -> str | None:
        """The project class ``C`` of a call ``C.from_config(...)`` of a classmethod, its own
        or inherited from a project base, that returns ``cls(...)``: an instance of ``C`` (the
        class it is called on, which a base's method does not know)."""
        head, dot, name = ref.rpartition(".")
        cls = self.project.resolve(head, module) if dot and head not in ("ext", "") else None
        sym = self.project.symbol(cls) if cls is not None else None
        if sym is None or sym.kind != "class":
            return None
        for c in self.project.class_chain(cls):
            m = self.project.symbol(f"{c}.{name}")
            if m is None:
                continue
            flow = (m.flow or {}) if m.kind == "function" else {}
            params = flow.get("params") or []
            if not flow.get("cm") or not params:
                return None
            receiver = params[0]
            made = any(x == ["pc", receiver] for slot in (flow.get("kind") or {}).values()
                       for x in _flat(slot))
            return cls if made else None
        return None

    def _called(self, terms: list[list], key: str, depth: int) -> frozenset[str]:
        """The instances calling a value with these terms gives: a class's, or those the
        function it is returns."""
        out: set[str] = set(self.classes(terms, key, depth))
        module = key.partition(":")[0]
        for t in terms:
            if t[0] == "sym":
                target = self.function(t[1], module)
                if target is not None:
                    out |= self._memo_classes(("new", target[0]), depth)
            elif t[0] == "p":  # handed on by the caller: what calling that one gives
                out |= self._memo_classes(("call", key, t[1]), depth)
            elif t[0] in ("elts", "sub"):
                out |= self._called(t[1], key, depth)
        return frozenset(out)

    def _memo_classes(self, memo: tuple, depth: int) -> frozenset[str]:
        """One hop (a function's returns, a parameter's callers), remembered unless its answer
        was cut short (a cycle, or past ``_CLASS_HOPS``: asked again from nearer, it may say
        more)."""
        found = self._classes.get(memo)
        if found is not None:
            return found
        cut = self._classes_cut.get(memo)
        if cut is not None and depth >= cut[1]:
            # (asked again in this walk, from as deep or deeper: it adds nothing the walk lacks)
            self._cuts += 1
            return cut[0]
        if memo in self._active or depth >= _CLASS_HOPS:
            self._cuts += 1
            return frozenset()
        cuts = self._cuts
        self._active.add(memo)
        self._class_hops += 1
        try:
            what = memo[0]
            if what in ("ret", "new"):  # the classes, or the instances, a function returns
                sym = self.project.symbol(memo[1])
                kinds = (sym.flow or {}).get("kind", {}) if sym is not None else {}
                terms = [t for slot in kinds.values() for t in slot]
                found = self.classes(terms, memo[1], depth + 1) if what == "ret" else \
                    self.instances(terms, memo[1], depth + 1)
            else:  # what callers hand in as the parameter: classes, instances, or called
                how = {"param": self.classes, "param-new": self.instances,
                       "call": self._called}[what]
                found = self._param_classes(memo[1], memo[2], depth + 1, how)
        finally:
            self._active.discard(memo)
            self._class_hops -= 1
        if self._cuts == cuts:
            self._classes[memo] = found
        elif self._class_hops:
            # Cut short, kept for the rest of this walk: what a hop cut at a cycle misses
            # is what the hops still open find, so the walk's answer stays whole, and each
            # hop is walked once per question (not once per path to it: exponential).
            self._classes_cut[memo] = (found, depth)
        else:  # (the walk is over: another question's open hops are others)
            self._classes_cut.clear()
        return found

    def _param_classes(self, fn: str, param: str, depth: int,
                       how: Callable[[list[list], str, int], frozenset[str]]) -> frozenset[str]:
        # The function the parameter is of: ``fn``, or one ``fn`` is nested in (a closure).
        while True:
            sym = self.project.symbol(fn)
            flow = (sym.flow or {}) if sym is not None and sym.kind == "function" else {}
            if param in flow.get("params", ()) or param in flow.get("kwonly", ()):
                break
            module, _, qual = fn.partition(":")
            if "." not in qual:
                return frozenset()
            fn = f"{module}:{qual.rpartition('.')[0]}"
        params, method = flow.get("params", []), flow.get("method", 0)
        out: set[str] = set()
        # (a `functools.partial` that binds the parameter hands it to every later call)
        for caller, args, constructor in self._callers_of(fn) + self._partials_of(fn):
            if not args:
                continue
            offset = method if constructor or "self" in args else 0
            pos = params.index(param) - offset if param in params else -1
            terms = args.get(param) or (args.get(str(pos)) if pos >= 0 else None)
            if terms:
                out |= how(terms, caller, depth + 1)
        return frozenset(out)

    def mutates(self, key: str, depth: int = 0) -> dict[str, Flowing]:
        """Parameters of the function ``key`` it changes in place, with the chain."""
        found = self._mutates.get(key)
        if found is not None:
            return found
        if ("mut", key) in self._active or depth > MAX_DEPTH:
            return {}
        self._active.add(("mut", key))
        try:
            found = self._compute_mutates(key, depth)
        finally:
            self._active.discard(("mut", key))
        self._mutates[key] = found
        return found

    def _compute_mutates(self, key: str, depth: int) -> dict[str, Flowing]:
        sym = self.project.symbol(key)
        flow = sym.flow if sym is not None else None
        if not flow or "mut" not in flow:
            return {}
        out: dict[str, Flowing] = {}
        module, path = key.partition(":")[0], self.path_of(key)
        for t in flow["mut"]:
            if t[0] == "p":
                _add(out, t[1], Flowing(UPDATED, (_link(path, t[3], t[4]),)))
                continue
            _, ref, bound, via_attr, _idx, args, pos, text = t[:8]
            target = self.function(ref, module)
            if target is None:
                continue
            callee, callee_flow = target
            via_attr = via_attr or self._on_an_object(ref, module, callee_flow)
            below = self.mutates(callee, depth + 1)
            if not below:
                continue
            here = _link(path, pos, text)
            for p, _kind, _ev, flowing in _bind(callee_flow, below, args, bound, via_attr):
                _add(out, p, Flowing(UPDATED, (here, *flowing.chain)))
        return out


def _binds(args: dict | None, param: str, pos: int) -> bool:
    """A ``functools.partial``'s arguments (``ModuleSummary.partials``) bind ``param``
    (at position ``pos``, -1: keyword-only), or may (what it binds not recorded)."""
    bound = args.get("#b") if args is not None else None
    if bound is None:
        return True
    return param in bound[1] or 0 <= pos < bound[0]


def _flat(terms: list[list]):
    """The terms, and those of the lists, tuples and items among them."""
    for t in terms:
        if t and t[0] in ("elts", "sub"):
            yield from _flat(t[1])
        else:
            yield t


def module_of(key: str) -> str:
    """The module of a ``module:qual`` key; a configuration file's module holds a colon of its
    own (``config:configs/run.gin:`` is the gin file's module level)."""
    return key.rpartition(":")[0] if key.startswith("config:") else key.partition(":")[0]


def _passes(args: dict, param: str, pos: int) -> bool:
    """Whether a call passes ``param``: only the arguments that may matter are recorded, so an
    argument is known missing only when no position as far as it and no keyword is there."""
    return param in args or args.get("#n", 0) > pos or param in args.get("#kw", ())


def _bind(callee_flow: dict, below: dict[str, Flowing], args: list, bound: int, via_attr: bool):
    """Our parameters behind the callee's: (our param, kind, (pos, text) of our own update
    when the callee hands it back as is, what the callee's parameter is in its result)."""
    params = callee_flow.get("params", [])
    offset = bound + (callee_flow.get("method", 0) if via_attr else 0)
    for q, flowing in below.items():
        pos = params.index(q) - offset if q in params else None
        for a in args:
            if not (a[0] == q or (pos is not None and pos >= 0 and a[0] == pos)):
                continue
            p, kind = a[1], a[2]
            if flowing.kind == UPDATED and kind in (SAME, UPDATED):
                yield p, UPDATED, None, flowing
            elif flowing.kind in (SAME, MAPPED) and kind == UPDATED:
                yield p, UPDATED, (a[3], a[4]), flowing  # (a map of our update: still it)
            elif flowing.kind == SAME and kind == SAME:
                yield p, SAME, None, flowing
            elif flowing.kind == MAPPED and kind == SAME:
                yield p, MAPPED, None, flowing


def _add(out: dict[str, Flowing], param: str, flowing: Flowing) -> None:
    prev = out.get(param)
    if prev is None or (prev.kind != UPDATED and flowing.kind == UPDATED) or (
            prev.kind == flowing.kind == UPDATED and len(flowing.chain) < len(prev.chain)):
        out[param] = flowing
