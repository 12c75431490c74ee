"""Values inside one function body: where a local name's value comes from, what the function returns.

Works on one :class:`Scope` (what the facts pass collected of its body: assignments, returns,
dropped calls, stores), or on the ``ast`` of a lambda, without descending into nested functions,
classes or lambdas. It answers the questions the donation and init rules ask:

* which parameters a returned value is an *updated* version of (``state.apply_gradients(...)``,
  ``optax.apply_updates(params, ...)``, the state half of ``tx.update(...)``, ``.replace(...)``,
  ``._replace(...)``, ``x.at[i].set(v)``, ``lax.dynamic_update_slice(cache, ...)``, a record
  rebuilt field by field from the same fields of a parameter, ``jax.tree.map`` arithmetic,
  ``nnx.state``/``nnx.split`` of a module, a parameter written where it is and handed back:
  ``cache.k[i] = v; return cache``) -- :meth:`LocalFlow.updated_params`;
* whether a value is returned as part of the result -- :meth:`LocalFlow.returns_structure_of` --
  or reaches it by any computation -- :meth:`LocalFlow.flows_to_return`.

A part of a value is named by an *index*: tuple positions (ints) and dict keys or record fields
(strs, at most two deep): ``f(s)[1]`` is ``(1,)``, ``f(s)["state"].params`` ``("state",
"params")``.

Given a ``callee`` resolver, a call of a project function is kept as a :class:`CallTerm` (which
of our parameters it is handed, and which part of its result is used) instead of being dropped:
the value-flow layer (``valueflow.py``) resolves those against the callee's own summary, in any
file of the project.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from shardlint.semantics.catalog.names import EXTERNAL_PACKAGES, dotted
from shardlint.semantics.file.facts import Assigned, FileFacts, Scope
from shardlint.syntax import _FIELDS, code_fields
from shardlint.syntax import nodes as walk_nodes

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

SAME = "same"  # the parameter's value itself (or an alias of it)
PART = "part"  # a field or leaf of it
UPDATED = "updated"  # a new value of the same structure, built from it by a state update
# An item of a tuple parameter (`params, opt_state = state`): an update of it is an update of
# that parameter, but the item itself is not the parameter (`return state[0]` returns part of it).
ITEM = "item"
# A leaf-wise map of it (`jax.tree.map(unbox, x)`, one tree): its structure with new leaves, not
# an update by itself -- but a map of an update is still that update.
MAPPED = "mapped"
_RANK = {PART: 0, ITEM: 0.5, MAPPED: 0.75, SAME: 1, UPDATED: 2}

TREE_MAP = ("jax.tree.map", "jax.tree_util.tree_map")
NNX_STATE = ("flax.nnx.state", "flax.nnx.graph.state", "flax.nnx.split", "flax.nnx.graph.split")
NNX_MERGE = ("flax.nnx.merge", "flax.nnx.graph.merge")
APPLY_UPDATES = ("optax.apply_updates", "optax._src.update.apply_updates")
# A new array of the same shape with some entries written: the cache of a decode step.
UPDATE_SLICE = ("jax.lax.dynamic_update_slice", "jax.lax.dynamic_update_slice_in_dim",
                "jax.lax.dynamic_update_index_in_dim", "jax.lax.scatter", "jax.lax.scatter_add")
DATACLASS_REPLACE = ("dataclasses.replace", "flax.struct.replace")
# Calls that hand their first argument back resharded or unchanged (the value is the same).
PASS_THROUGH = ("jax.lax.with_sharding_constraint", "flax.linen.with_logical_constraint",
                "flax.linen.spmd.with_logical_constraint", "jax.device_put",
                "flax.linen.partitioning.with_sharding_constraint",
                "jax.experimental.pjit.with_sharding_constraint")
# Leaf functions that fold a second tree into the first (`jax.tree.map(jnp.add, acc, g)`).
ACCUMULATE = frozenset({"jax.numpy.add", "jax.numpy.subtract", "jax.numpy.multiply",
                        "jax.lax.add", "jax.lax.sub", "jax.lax.mul", "operator.add",
                        "operator.sub", "operator.mul", "numpy.add"})
# Loops whose result (item 0 for scan) is their carry: where the initial value is passed.
SCAN = "jax.lax.scan"
LOOP_CARRY = {"jax.lax.fori_loop": (3, "init_val"), "jax.lax.while_loop": (2, "init_val"),
              SCAN: (1, "init")}
# Calls whose result is what one of their branch functions returns (`lax.cond(p, f, g, *xs)`:
# where the branches are, positionally and by keyword; the operands follow them).
BRANCHES = {"jax.lax.cond": ((1, "true_fun"), (2, "false_fun")), "jax.lax.switch": ((1, "branches"),)}
# `x.at[i].set(v)` and its siblings: a copy of x with entries written.
_AT_METHODS = frozenset({"set", "add", "multiply", "mul", "divide", "power", "min", "max", "apply"})


def own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node of a body, without entering nested functions, classes or lambdas (nor the
    decorators of ``node`` itself: they run in the enclosing scope), nor the shared context and
    operator singletons (``ctx``, ``op``, ``ops``: no code below them). Depth first, the last
    child first (callers keep the first match: the order is part of the answer)."""
    if isinstance(node, (*_NESTED, ast.Module)):
        todo = [n for name in node._fields if name != "decorator_list"
                for n in _children(getattr(node, name, None))]
    else:
        todo = [node]
    pop, push, AST, nested, fields_of = todo.pop, todo.append, ast.AST, _NESTED_TYPES, _FIELDS
    while todo:
        n = pop()
        yield n
        tp = type(n)
        if tp in nested:
            continue
        fields = fields_of.get(tp)
        for name in fields if fields is not None else code_fields(tp):
            value = getattr(n, name, None)
            if type(value) is list:
                for child in value:
                    if isinstance(child, AST):
                        push(child)
            elif isinstance(value, AST):
                push(value)


_NESTED_TYPES = frozenset(_NESTED)


def _children(value) -> list[ast.AST]:
    if isinstance(value, ast.AST):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, ast.AST)]
    return []


def positional_params(fn: ast.AST) -> list[str]:
    args = fn.args  # type: ignore[attr-defined]
    return [a.arg for a in [*args.posonlyargs, *args.args]]


@dataclass(frozen=True)
class Origin:
    """What a value is, relative to one parameter of the function."""

    param: str
    kind: str  # SAME | PART | ITEM | UPDATED
    evidence: ast.AST | None = None  # the update expression, for UPDATED


@dataclass(frozen=True)
class Callee:
    """A project function a call runs, as the value-flow layer names it (see valueflow.py)."""

    ref: str  # "module:qual" or "ext:dotted.name"
    bound: int = 0  # positional arguments a ``functools.partial`` bound before the call's own
    via_attr: bool = False  # called as ``obj.method(...)``: the callee's ``self`` is implicit


@dataclass(eq=False)
class CallTerm:
    """The result of a call of a project function (at ``index`` of it), with what each of its
    arguments is relative to our parameters; resolved against the callee's summary later."""

    callee: Callee
    index: tuple[int, ...]
    args: list[tuple[int | str, dict[str, Origin]]]  # position as written, or keyword name
    node: ast.Call
    # arguments that are themselves results of project calls (`unbox(step(state)[0])`)
    nested: list[tuple[int | str, list[CallTerm]]] = field(default_factory=list)
    # the update this result goes through before it is returned
    # (`dataclasses.replace(self.update_with(out), ...)`): what it hands back as it came is
    # updated there
    updated: ast.AST | None = None


@dataclass
class Terms:
    origins: dict[str, Origin] = field(default_factory=dict)
    calls: list[CallTerm] = field(default_factory=list)

    def merge(self, other: Terms) -> None:
        _merge(self.origins, other.origins)
        if other.calls:
            have = {(id(c.node), c.index) for c in self.calls}
            for c in other.calls:
                if (id(c.node), c.index) not in have:
                    have.add((id(c.node), c.index))
                    self.calls.append(c)


_EMPTY = Terms()
# How deep a value is picked apart by entry or field (`out["state"].params`): `cfg = cfg.model`
# rebinding a name to a field of itself must not build ever longer paths.
_MAX_FIELDS = 2


def _always_run(body: list[ast.stmt]):
    """The statements of a block that run whenever it runs up to them: its own, and those of
    the ``with`` blocks in it (not of branches, loops or ``try`` bodies)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            yield from _always_run(stmt.body)


class LocalFlow:
    """Assignments and returns of one function (or lambda) body."""

    def __init__(self, facts: FileFacts, scope: Scope | None, node: ast.AST | None = None,
                 callee: Callable[[ast.Call], Callee | None] | None = None,
                 enclosing: LocalFlow | None = None):
        self.facts = facts
        self.scope = scope
        # The flow of the function this one is nested in, when it runs as a branch of it
        # (`lax.cond`): the names it reads from there are traced there.
        self.enclosing = enclosing
        self._branches: dict[int, LocalFlow | None] = {}
        self._tracing: set[tuple[int, tuple[int, ...]]] = set()
        self.node = node if node is not None else scope.node  # type: ignore[union-attr]
        self.callee = callee
        self._memo: dict[tuple[int, tuple[int, ...]], Terms] = {}
        fn = self.node
        self.params: list[str] = positional_params(fn) if isinstance(
            fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else []
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = fn.args
            self.all_params = set(self.params) | {x.arg for x in a.kwonlyargs}
        else:
            self.all_params = set()
        self.assigned: dict[str, list[Assigned]]
        self.returns: list[ast.expr]
        self.expr_calls: list[ast.Call]  # calls whose result is dropped: `opt.update(g)`
        if isinstance(fn, ast.Lambda):
            self.assigned, self.returns, self.expr_calls = {}, [fn.body], []
        elif scope is not None and scope.kind == "function" and fn is scope.node:
            # Collected by the facts pass (visitor.py): no walk of the body here.
            self.assigned, self.returns, self.expr_calls = \
                scope.assigned, scope.returns, scope.expr_calls
        else:
            self.assigned, self.returns, self.expr_calls = {}, [], []
            self._collect()

    # ---- collection ------------------------------------------------------------------------------
    def _collect(self) -> None:
        for n in own_nodes(self.node):
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    self._target(t, n.value, (), n)
            elif isinstance(n, ast.AnnAssign) and n.value is not None:
                self._target(n.target, n.value, (), n)
            elif isinstance(n, ast.AugAssign):
                self._target(n.target, None, (), n)
            elif isinstance(n, ast.NamedExpr):
                self._target(n.target, n.value, (), n)
            elif isinstance(n, (ast.For, ast.AsyncFor)):
                self._target(n.target, None, (), n)
            elif isinstance(n, ast.withitem) and n.optional_vars is not None:
                self._target(n.optional_vars, None, (), n)
            elif isinstance(n, ast.Return) and n.value is not None:
                self.returns.append(n.value)
            elif isinstance(n, ast.Expr) and isinstance(n.value, ast.Call):
                self.expr_calls.append(n.value)

    def _target(self, t: ast.expr, value: ast.expr | None, index: tuple[int, ...],
                node: ast.AST) -> None:
        if isinstance(t, ast.Name):
            self.assigned.setdefault(t.id, []).append(Assigned(value, index, node))
        elif isinstance(t, (ast.Tuple, ast.List)):
            starred = False
            for i, elt in enumerate(t.elts):
                if isinstance(elt, ast.Starred):
                    starred = True
                    self._target(elt.value, None, (), node)
                else:
                    # After a starred target the positions count from the end: unknown.
                    self._target(elt, None if starred else value, (*index, i), node)
        elif isinstance(t, ast.Starred):
            self._target(t.value, None, (), node)

    # ---- what a value is -------------------------------------------------------------------------
    def trace(self, expr: ast.expr, index: tuple[int, ...] = ()) -> dict[str, Origin]:
        """The parameters ``expr`` (projected on ``index``) is, is part of, or is an update of."""
        return dict(self.trace_terms(expr, index).origins)

    def trace_terms(self, expr: ast.expr, index: tuple[int, ...] = (),
                    _seen: frozenset = frozenset()) -> Terms:
        """:meth:`trace`, with the calls of project functions the value comes from.

        Each (expression, index) is traced once per body: a value reached again (``x = f(x)``
        chains, a name read by many calls) costs a lookup, not another walk. A value traced
        while a cycle was cut keeps what was found without the cycle.
        """
        key = (id(expr), index)
        found = self._memo.get(key)
        if found is not None:
            return found
        if len(_seen) > 40 or key in self._tracing:
            # (a value reached again while it is traced: a cycle, cut; a parameter rebound by
            # the call it is handed to, `x, cache = f(x, cache)`, is at least what came in)
            if type(expr) is ast.Name and not index and expr.id in self.all_params:  # type: ignore[attr-defined]
                return Terms({expr.id: Origin(expr.id, SAME)})  # type: ignore[attr-defined]
            return Terms()
        self._tracing.add(key)
        try:
            found = self._trace(expr, index, _seen)
        finally:
            self._tracing.discard(key)
        self._memo[key] = found
        return found

    def _trace(self, expr: ast.expr, index: tuple[int, ...], _seen: frozenset) -> Terms:
        # (Results are shared through the memo: never changed once returned.)
        tp = type(expr)
        if tp is ast.Name:
            name = expr.id  # type: ignore[attr-defined]
            param = name in self.all_params and not index
            seen_key = (name, index)
            assigned = self.assigned.get(name)
            if not assigned or seen_key in _seen:
                if param and assigned and self._rebound_before(name, expr):
                    # (read again while its value is traced, after a statement every path runs
                    # rebound it: `x = embed(x)` then `x = f(x)` hands `f` the embedding, what
                    # the earlier bindings hold -- not the parameter. Where what they hold is
                    # not known, `x = x * sigma`, it is taken for the parameter, as before:
                    # "not known" does not veto)
                    before = self._bound_before(name, expr, index, _seen)
                    if before.origins or before.calls:
                        return before
                if param:
                    written = self.written_in_place(name)
                    if written is not None:  # `cache.k[i] = new; return cache`: an update
                        return Terms({name: Origin(name, UPDATED, written)})
                    return Terms({name: Origin(name, SAME)})
                if index and not assigned and name in self.all_params:
                    return Terms({name: Origin(name, ITEM)})
                if self.enclosing is not None and not assigned and name not in self.all_params:
                    return self.enclosing.trace_terms(expr, index, _seen)  # a closure read
                return _EMPTY
            seen = _seen | {seen_key}
            parts = []
            for a in assigned:
                if a.value is None:
                    continue
                t = self.trace_terms(a.value, (*a.index, *index), seen)
                if t.origins or t.calls:
                    parts.append(t)
                elif param and self._rebinds_from_opaque_call(name, a.value):
                    parts.append(Terms({name: Origin(name, UPDATED, a.value)}))
            if not param and len(parts) == 1:
                return parts[0]
            # (a parameter read where every path has rebound it is no longer what came in: "not
            # known" from the new value must not read as "handed back unchanged")
            out = Terms({name: Origin(name, SAME)}) if param and \
                not self._rebound_before(name, expr) else Terms()
            for t in parts:
                out.merge(t)
            return out
        if tp is ast.Call:
            return self._trace_call(expr, index, _seen)  # type: ignore[arg-type]
        if tp is ast.Attribute:
            value = expr.value  # type: ignore[attr-defined]
            if len(index) < _MAX_FIELDS and (type(value) is ast.Call or type(value) is ast.Name
                                             and value.id in self.assigned):
                # a field of a record a call builds: `apply(state, g).state`, `out.state`
                projected = self.trace_terms(value, (expr.attr, *index), _seen)  # type: ignore[attr-defined]
                if projected.origins or projected.calls:
                    return projected
            inner = self.trace_terms(value, (), _seen).origins
            return Terms(_as_part(inner)) if inner else _EMPTY
        if tp is ast.Subscript:
            key = expr.slice  # type: ignore[attr-defined]
            value = expr.value  # type: ignore[attr-defined]
            if isinstance(key, ast.Constant) and (type(key.value) is int or type(key.value) is str
                                                  and len(index) < _MAX_FIELDS) and \
                    isinstance(value, (ast.Call, ast.Tuple, ast.Name, ast.Dict)):
                # an item of a tuple, or an entry of a dict (`apply(state, g)["state"]`)
                projected = self.trace_terms(value, (key.value, *index), _seen)
                if projected.origins or projected.calls:
                    return projected
            inner = self.trace_terms(value, (), _seen).origins
            return Terms(_as_part(inner)) if inner else _EMPTY
        if tp is ast.Tuple or tp is ast.List:
            elts = expr.elts  # type: ignore[attr-defined]
            if index:
                i = index[0]
                if type(i) is int and i < len(elts) and \
                        not any(isinstance(e, ast.Starred) for e in elts):
                    return self.trace_terms(elts[i], index[1:], _seen)
                return _EMPTY
            out = Terms()
            for e in elts:
                out.merge(self.trace_terms(e.value if isinstance(e, ast.Starred) else e, (),
                                           _seen))
            return out
        if tp is ast.Dict:
            if index and type(index[0]) is str:  # one entry: the value under that key
                value = _entry(expr.keys, expr.values, index[0])  # type: ignore[attr-defined]
                return self.trace_terms(value, index[1:], _seen) if value is not None \
                    else _EMPTY
            out = Terms()
            for v in expr.values:  # type: ignore[attr-defined]
                out.merge(self.trace_terms(v, (), _seen))
            rebuilt = self._rebuilt(list(zip(expr.keys, expr.values)), expr)  # type: ignore[attr-defined]
            if rebuilt:
                _merge(out.origins, rebuilt)
            return out
        if tp is ast.IfExp:
            out = Terms()
            out.merge(self.trace_terms(expr.body, index, _seen))  # type: ignore[attr-defined]
            out.merge(self.trace_terms(expr.orelse, index, _seen))  # type: ignore[attr-defined]
            return out
        return _EMPTY

    def _bound_before(self, name: str, read: ast.expr, index: tuple[int, ...],
                      _seen: frozenset) -> Terms:
        """What the last statement every path runs that binds ``name`` before ``read`` holds
        (its value there, give or take a binding in a branch after it)."""
        fn = self.node
        line = getattr(read, "lineno", 0)
        always = {id(s) for s in _always_run(fn.body)} \
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) else set()
        last = max((a for a in self.assigned.get(name, ()) if a.value is not None
                    and id(a.node) in always and getattr(a.node, "end_lineno", line) < line),
                   key=lambda a: getattr(a.node, "end_lineno", 0), default=None)
        return self.trace_terms(last.value, (*last.index, *index), _seen) \
            if last is not None else Terms()

    def _rebound_before(self, name: str, read: ast.expr) -> bool:
        """Whether a statement of the body's top level (or of a ``with`` there), which every
        path runs, rebinds ``name`` before ``read`` (``logits, cache = attend(x, cache)``, then
        ``return logits, cache``)."""
        fn = self.node
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        line = getattr(read, "lineno", 0)
        always = {id(s) for s in _always_run(fn.body)}
        return any(id(a.node) in always and getattr(a.node, "end_lineno", line) < line
                   for a in self.assigned.get(name, ()))

    def written_in_place(self, name: str) -> ast.stmt | None:
        """The first statement of the body that writes a field or an item of the parameter
        ``name`` where it is (``cache.k[idx] = v``, ``state["step"] = s``, ``x.value += 1``): a
        parameter handed back after that is an updated version of what came in."""
        found = self.__dict__.get("_written")
        if found is None:
            found = {}
            stores = self.scope.stores if self.scope is not None \
                and self.node is self.scope.node else ()
            for target, stmt in stores:
                root = target
                while type(root) is ast.Attribute or type(root) is ast.Subscript:
                    root = root.value  # type: ignore[attr-defined]
                if type(root) is not ast.Name or root is target:
                    continue
                # An update, not a replacement: a slot written inside a container the parameter
                # holds (`cache.k[idx] = v`: the other slots are kept), or a value computed from
                # the parameter (`state["step"] = state["step"] + 1`, `x.n += 1`). A field set to
                # a value of its own (`meta.length = length`) replaces it.
                inner = type(target) is ast.Subscript and target.value is not root  # type: ignore[attr-defined]
                value = getattr(stmt, "value", None)
                reads = type(stmt) is ast.AugAssign or value is not None and any(
                    type(n) is ast.Name and n.id == root.id for n in walk_nodes(value))  # type: ignore[attr-defined]
                if inner or reads:
                    found.setdefault(root.id, stmt)  # type: ignore[attr-defined]
            self.__dict__["_written"] = found
        return found.get(name) if name not in self.assigned else None

    def _rebinds_from_opaque_call(self, name: str, value: ast.expr) -> bool:
        """``decode_state = self.engine.step(params, decode_state)`` (or ``tok, decode_state =
        ...``): a parameter handed to a call shardlint cannot see into -- a method of an object,
        not a jax/numpy function -- and rebound to its result is taken to be updated by it."""
        if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Attribute):
            return False
        if not any(isinstance(a, ast.Name) and a.id == name
                   for a in [*value.args, *(k.value for k in value.keywords)]):
            return False
        q = self.facts.qualify(value.func)
        return q is None

    def _trace_call(self, call: ast.Call, index: tuple[int, ...], seen: frozenset) -> Terms:
        func = call.func

        def origins(e: ast.expr) -> dict[str, Origin]:
            return self.trace_terms(e, (), seen).origins

        def updated(e: ast.expr) -> Terms:
            # an update of `e`: of the parameters it holds, and of what the project calls it
            # is the result of hand back
            traced = self.trace_terms(e, (), seen)
            return Terms(_updated(traced.origins, call),
                         [replace(c, updated=call) for c in traced.calls])

        q = self.facts.qualify(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
        if index and type(index[0]) is str and (q == "dict" or q is None and _constructor(func)):
            # a field of a record built here: `Out(state=new, loss=l).state`, `dict(state=new)`,
            # `Out(new, l).state` (a named tuple or a record class of this module)
            keys, values = self._record(call)
            value = _entry(keys, values, index[0])
            if value is not None:
                return self.trace_terms(value, index[1:], seen)
        if isinstance(func, ast.Attribute) and q is None:
            attr = func.attr
            if attr in ("apply_gradients", "replace", "_replace") and not index:
                return updated(func.value)
            if attr == "update" and index[:1] == (1,) and len(call.args) >= 2:
                # optax: `updates, new_opt_state = tx.update(grads, opt_state, params)`
                return Terms(_updated(origins(call.args[1]), call))
            if attr in _AT_METHODS and not index and _at_subscript(func.value):
                # `cache.at[idx].set(new)`: a copy of the cache with entries written
                return Terms(_updated(origins(func.value.value.value), call))  # type: ignore[attr-defined]
            return self._project_call(call, index, seen)
        if q is None:
            return self._project_call(call, index, seen)
        if q in APPLY_UPDATES and call.args and not index:
            return updated(call.args[0])
        if q in UPDATE_SLICE and call.args and not index:
            return updated(call.args[0])
        if q in DATACLASS_REPLACE and call.args and not index:
            return updated(call.args[0])
        carry = LOOP_CARRY.get(q)
        if carry is not None and (q != SCAN or not index or index[:1] == (0,)):
            # The loop's carry has the structure and shapes of its initial value: an item of
            # the result is that item of it (`while_loop(c, body, Carry(step=0, state=s)).state`).
            position, keyword = carry
            init = next((k.value for k in call.keywords if k.arg == keyword), None)
            if init is None and len(call.args) > position:
                init = call.args[position]
            part = index[1:] if q == SCAN and index else index
            return Terms(_updated(self.trace_terms(init, part, seen).origins, call, items=False)) \
                if init is not None else _EMPTY
        if q in PASS_THROUGH and call.args:
            return self.trace_terms(call.args[0], index, seen)
        if q in BRANCHES:
            return self._branch_results(call, q, index, seen)
        if q in TREE_MAP and len(call.args) >= 2 and not index:
            # `jax.tree.map(lambda p, g: p - lr * g, params, grads)`: `params` is updated;
            # `jax.tree.map(jnp.add, acc_grads, grads)`: an accumulator.
            f = call.args[0]
            i = 0 if len(call.args) >= 3 and isinstance(f, (ast.Name, ast.Attribute)) \
                and self.facts.qualify(f) in ACCUMULATE else _updated_leaf(f)
            if i is not None and 1 + i < len(call.args):
                return Terms(_updated(origins(call.args[1 + i]), call))
            if len(call.args) == 2 and _keeps_shapes(self.facts, f):  # one tree, leaves mapped
                return Terms({p: o if o.kind == UPDATED else Origin(p, MAPPED)
                              for p, o in origins(call.args[1]).items()
                              if o.kind in (SAME, UPDATED, MAPPED)})
            kept = self._leaf_handed_back(f, len(call.args) - 1)
            if kept is not None:
                # `jax.tree.map(_merge, shardings, x)` where `_merge(s, x_)` hands `x_` back
                # (as it came, or constrained): a map of that tree
                return Terms({p: o if o.kind == UPDATED else Origin(p, MAPPED)
                              for p, o in origins(call.args[1 + kept]).items()
                              if o.kind in (SAME, UPDATED, MAPPED)})
            return Terms()
        if q in NNX_STATE and call.args:
            if q.endswith("split") and index[:1] == (0,):
                return Terms()  # the graphdef holds no arrays
            return Terms(_updated(origins(call.args[0]), call))
        if q in NNX_MERGE:
            out: dict[str, Origin] = {}
            for s in call.args[1:]:
                _merge(out, {k: Origin(k, SAME) for k, o in origins(s).items()
                             if o.kind in (SAME, UPDATED)})
            return Terms(out)
        if q == "dict" and call.keywords and not call.args and not index:
            return Terms(self._rebuilt([(ast.Constant(k.arg), k.value) for k in call.keywords
                                        if k.arg is not None], call))
        if q.partition(".")[0] in EXTERNAL_PACKAGES:
            return _EMPTY  # jnp.concatenate(...), np.asarray(...): not a project function
        return self._project_call(call, index, seen)

    def _record(self, call: ast.Call) -> tuple[list[ast.expr | None], list[ast.expr]]:
        """The (keys, values) a record constructor call writes: its keywords, and its positional
        arguments under the field names of the class when this module defines it."""
        keys: list[ast.expr | None] = [ast.Constant(k.arg) if k.arg is not None else None
                                       for k in call.keywords]
        values = [k.value for k in call.keywords]
        if call.args and not any(isinstance(a, ast.Starred) for a in call.args):
            fields = _record_class_fields(self.scope, call.func)
            if fields is not None and len(call.args) <= len(fields):
                keys += [ast.Constant(f) for f in fields[:len(call.args)]]
                values += call.args
        return keys, values

    def record_fields(self, expr: ast.expr) -> list[str]:
        """The string keys or fields a dict display, ``dict(...)`` or a record constructor call
        writes (``{"state": s, "loss": l}``, ``Out(state=s, loss=l)``, ``Out(s, l)``): the slots
        of a result its callers may pick one of."""
        if isinstance(expr, ast.Dict):
            return [k.value for k in expr.keys
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        if isinstance(expr, ast.Call) and isinstance(expr.func, (ast.Name, ast.Attribute)) and (
                _constructor(expr.func) or isinstance(expr.func, ast.Name)
                and expr.func.id == "dict"):
            keys, _ = self._record(expr)
            return [k.value for k in keys if isinstance(k, ast.Constant)]
        return []

    def _branch_results(self, call: ast.Call, q: str, index: tuple[int, ...],
                        seen: frozenset) -> Terms:
        """What ``lax.cond``/``lax.switch`` returns: what any of its branches returns. A
        branch is a function nested here (its reads of this function's names are traced here)
        or a lambda; what it returns of its own parameters is what the operands are. A branch
        shardlint cannot see makes the result unknown."""
        spots = BRANCHES[q]
        fns: list[ast.expr] = []
        for position, keyword in spots:
            arg = next((k.value for k in call.keywords if k.arg == keyword), None)
            if arg is None and len(call.args) > position:
                arg = call.args[position]
            if arg is None:
                return _EMPTY
            fns.extend(arg.elts if isinstance(arg, (ast.List, ast.Tuple)) else [arg])
        start = max(p for p, _ in spots) + 1
        operands = [a for a in call.args[start:] if not isinstance(a, ast.Starred)]
        if any(isinstance(a, ast.Starred) for a in call.args[start:]):
            return _EMPTY
        operand = next((k.value for k in call.keywords if k.arg == "operand"), None)
        if operand is not None:  # (the old single-operand spelling)
            operands = [operand]
        out = Terms()
        for fn in fns:
            flow = self._branch(fn)
            if flow is None or len(seen) > 40:
                return _EMPTY
            found = Terms()
            # (with what is being traced so far: a branch that reads back the name this call
            # is bound to, `x = lax.cond(p, lambda _: f(x), ...)`, cuts the cycle there)
            for r in flow.returns:
                found.merge(flow.trace_terms(r, index, seen | {("#branch", id(fn))}))
            # the branch's own parameters are the operands, in order
            bound = {p: (self.trace_terms(operands[i], (), seen).origins
                         if i < len(operands) else {}) for i, p in enumerate(flow.params)}
            origins: dict[str, Origin] = {}
            for name, o in found.origins.items():
                if name not in flow.all_params:
                    _merge(origins, {name: o})  # (read from here: already ours)
                    continue
                for outer, ours in bound.get(name, {}).items():
                    kind = UPDATED if o.kind == UPDATED else ours.kind if o.kind == SAME \
                        else o.kind
                    _merge(origins, {outer: Origin(outer, kind, o.evidence or ours.evidence)})
            calls = [c for c in found.calls if all(
                name not in flow.all_params for _, traced in c.args for name in traced)]
            out.merge(Terms(origins, calls))
        return out

    def _leaf_handed_back(self, fn: ast.expr, trees: int) -> int | None:
        """Which of its first ``trees`` parameters a leaf function of this body (a lambda, a
        function nested here) hands back, as it came or through a pass-through, when it hands
        back exactly one of them and nothing of its own making: ``def _merge(s, x): return x
        if s is None else jax.lax.with_sharding_constraint(x, s)``."""
        flow = self._branch(fn)
        if flow is None or not flow.returns:
            return None
        params = flow.params[:trees]
        found = {p for p, o in flow.returned_terms().origins.items()
                 if p in params and o.kind in (SAME, MAPPED)}
        return params.index(found.pop()) if len(found) == 1 else None

    def _branch(self, fn: ast.expr) -> LocalFlow | None:
        """The flow of a branch function: a lambda, or a function nested in this one."""
        key = id(fn)
        if key in self._branches:
            return self._branches[key]
        flow = None
        if isinstance(fn, ast.Lambda):
            flow = LocalFlow(self.facts, self.scope, fn, self.callee, enclosing=self)
        elif isinstance(fn, ast.Name) and self.scope is not None and fn.id not in self.assigned:
            nested = self.scope.children.get(fn.id) if hasattr(self.scope, "children") else None
            if nested is not None and nested.kind == "function":
                flow = LocalFlow(self.facts, nested, callee=self.callee, enclosing=self)
        self._branches[key] = flow
        return flow

    def _project_call(self, call: ast.Call, index: tuple[int, ...], seen: frozenset) -> Terms:
        """A call this module cannot see into: a :class:`CallTerm` when it runs a project
        function (or a record rebuilt by a constructor: ``State(step=s.step + 1, ...)``)."""
        out = Terms()
        if call.keywords and not index and _constructor(call.func):
            rebuilt = self._rebuilt([(ast.Constant(k.arg), k.value) for k in call.keywords
                                     if k.arg is not None], call)
            if rebuilt:
                out.origins.update(rebuilt)
        if self.callee is None:
            return out
        callee = self.callee(call)
        if callee is None:
            return out
        args: list[tuple[int | str, dict[str, Origin]]] = []
        nested: list[tuple[int | str, list[CallTerm]]] = []
        given = [*((i, a) for i, a in enumerate(call.args)),
                 *((kw.arg, kw.value) for kw in call.keywords if kw.arg is not None)]
        receiver = call.func.value if callee.via_attr and isinstance(call.func, ast.Attribute) \
            else None
        if type(receiver) is ast.Name and receiver.id in self.all_params and \
                receiver.id != "cls":
            # (`state.apply_gradients_and_norms(g)` on a parameter of a known class, or
            # `self.update_with(out)` in a method of the state's own class: the method's `self`
            # is `state`, or this method's `self`)
            given.append(("self", receiver))
        for key, a in given:
            if isinstance(a, ast.Starred):
                break
            traced = self.trace_terms(a, (), seen)
            if traced.origins:
                args.append((key, traced.origins))
            if traced.calls:  # (as well: a name rebound in a branch to a project call's result)
                nested.append((key, traced.calls))
        if args or nested:
            out.calls.append(CallTerm(callee, index, args, call, nested))
        return out

    def _rebuilt(self, fields: list[tuple[ast.expr | None, ast.expr]],
                 node: ast.AST) -> dict[str, Origin]:
        """A record built field by field, where two or more fields are computed from the same
        fields of one parameter (``{"pos": state["pos"] + 1, "cache": f(state["cache"]), ...}``,
        ``DecodeState(pos=state.pos + 1, cache=...)``): an updated version of that parameter."""
        keyed = [(k.value, v) for k, v in fields
                 if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        if len(keyed) < 2 or not self.all_params:
            return {}
        # First a short look at each field (most records read no parameter field at all), then
        # a longer one at the fields that found nothing.
        first = [self._field_reads(v, k, 40) for k, v in keyed]
        if not any(first):
            return {}
        matched: dict[str, int] = {}
        computed: set[str] = set()
        for (key, value), reads in zip(keyed, first):
            if not reads:
                reads = self._field_reads(value, key, 300)
            for p, direct in reads:
                matched[p] = matched.get(p, 0) + 1
                if not direct:
                    computed.add(p)
        return {p: Origin(p, UPDATED, node) for p, n in matched.items() if n >= 2 and p in computed}

    def _field_reads(self, value: ast.expr, key: str, budget: int) -> list[tuple[str, bool]]:
        """The parameters whose field ``key`` (``p[key]``, ``p.key``) ``value`` is computed from
        (through the values of the local names it reads, within ``budget`` nodes), and whether
        it is that field itself."""
        direct = _field_of(value, key)
        if direct is not None and direct in self.all_params and self._unbound(direct):
            return [(direct, True)]
        found: set[str] = set()
        seen: set[str] = set()
        computed = False
        todo: list[ast.AST] = [value]
        while todo and budget > 0:
            nodes = walk_nodes(todo.pop())
            budget -= len(nodes)
            for n in nodes:
                p = _field_of(n, key)  # type: ignore[arg-type]
                if p is not None and p in self.all_params and self._unbound(p):
                    found.add(p)
                elif type(n) is ast.Name and n.id not in seen:  # type: ignore[attr-defined]
                    seen.add(n.id)  # type: ignore[attr-defined]
                    todo.extend(a.value for a in self.assigned.get(n.id, ())  # type: ignore[attr-defined]
                                if a.value is not None)
                elif isinstance(n, _COMPUTING):
                    computed = True
        # Entries only picked out of the field and packed again (`{"id": batch["label"]["id"],
        # ...}`) are a selection of it, not a new value computed from it.
        return [(p, not computed) for p in sorted(found)]

    def _unbound(self, param: str) -> bool:
        """The parameter's fields still read what came in: it is not rebound, or rebound only
        to a record rebuilt from those fields (``state = {"params": p, "opt": o}`` after
        ``p, o = state["params"], state["opt"]``, read before it)."""
        values = self.assigned.get(param)
        return not values or all(type(a.value) is ast.Dict and not a.index for a in values)

    def returned_terms(self, index: tuple[int, ...] = ()) -> Terms:
        """What the function returns (at ``index`` of its result), over every return."""
        out = Terms()
        for r in self.returns:
            out.merge(self.trace_terms(r, index))
        return out

    def updated_params(self, in_place: bool = False) -> dict[str, Origin]:
        """Parameters a returned value is an updated version of, with the evidence.

        ``in_place``: also count NNX objects updated where they are (``optimizer.update(model,
        grads)`` under ``nnx.jit``, which writes the new state back into the arguments).
        """
        out: dict[str, Origin] = {}
        for r in self.returns:
            for p, o in self.trace(r).items():
                if o.kind == UPDATED:
                    _merge(out, {p: o})
        if in_place:
            for p, o in self.mutated_params().items():
                _merge(out, {p: o})
        return out

    def mutated_params(self) -> dict[str, Origin]:
        """NNX objects the body updates where they are: ``optimizer.update(model, grads)``
        (the optimizer and the model, not the gradients; ``optimizer.update(grads)`` of older
        flax: the optimizer, which holds the model), ``nnx.update(model, state)``, and a
        variable reached from a parameter written (``c.count.value = ...``, ``v[...] = ...``,
        ``v.value += ...``, ``v.set_value(...)``)."""
        out: dict[str, Origin] = {}
        for call in self.expr_calls:
            f = call.func
            if isinstance(f, ast.Attribute) and f.attr == "update" and call.args \
                    and self.facts.qualify(f) is None:
                owners = [p for p, o in self.trace(f.value).items() if o.kind == SAME]
                if not owners:
                    continue
                for p in owners:
                    _merge(out, {p: Origin(p, UPDATED, call)})
                if len(call.args) >= 2:  # (the model; the gradients are only read)
                    for p, o in self.trace(call.args[0]).items():
                        if o.kind == SAME:
                            _merge(out, {p: Origin(p, UPDATED, call)})
            elif call.args and self.facts.qualify(f) == "flax.nnx.update":
                for p, o in self.trace(call.args[0]).items():
                    if o.kind == SAME:
                        _merge(out, {p: Origin(p, UPDATED, call)})
            elif isinstance(f, ast.Attribute) and f.attr == "set_value" and call.args:
                p = self._own_root(f.value)
                if p is not None:
                    _merge(out, {p: Origin(p, UPDATED, call)})
        for target, stmt in self.scope.stores if self.scope is not None \
                and self.node is self.scope.node else ():
            written = type(target) is ast.Attribute and target.attr == "value" or \
                type(target) is ast.Subscript and type(target.slice) is ast.Constant \
                and target.slice.value is Ellipsis
            p = self._own_root(target.value) if written else None
            if p is not None:
                _merge(out, {p: Origin(p, UPDATED, stmt)})
        return out

    def _own_root(self, expr: ast.expr) -> str | None:
        """The parameter (not rebound here) an attribute or item chain starts from."""
        while type(expr) is ast.Attribute or type(expr) is ast.Subscript:
            expr = expr.value  # type: ignore[attr-defined]
        if type(expr) is ast.Name and expr.id in self.all_params and expr.id not in self.assigned:
            return expr.id  # type: ignore[attr-defined]
        return None

    def flows_to_return(self, param: str) -> bool:
        """Whether the parameter's value reaches a returned value by any computation."""
        names = self.__dict__.get("_closure_names")
        if names is None:  # (asked for every parameter of every function: walked once)
            names = self.__dict__["_closure_names"] = {
                n.id for n in self._return_closure() if type(n) is ast.Name}  # type: ignore[attr-defined]
        return param in names

    def returned_as_is(self, param: str) -> bool:
        """Some return hands the parameter back unchanged (``return x``): an identity or a
        reshard, not a computation on it."""
        return any(o.kind == SAME for r in self.returns for p, o in self.trace(r).items()
                   if p == param)

    def reshaped(self, index: tuple[int, ...] = ()) -> bool:
        """Every return (at ``index`` of it) is visibly of another shape than what went in: a
        resize, a reshape, a reduction, an index (``jax.image.resize(x, shape)``, ``x[0]``,
        ``x.sum(-1)``). A loop that rebinds such a result is not updating a state in place:
        the old buffer could not hold the new value anyway."""
        return bool(self.returns) and all(self._reshaped(r, index, 0) for r in self.returns)

    def _reshaped(self, expr: ast.expr, index: tuple[int, ...], depth: int) -> bool:
        if depth > 8:
            return False
        if isinstance(expr, (ast.Tuple, ast.List)):
            if not index or index[0] >= len(expr.elts) \
                    or any(isinstance(e, ast.Starred) for e in expr.elts):
                return False
            return self._reshaped(expr.elts[index[0]], index[1:], depth + 1)
        if index:
            return False
        if isinstance(expr, ast.Name):
            assigned = self.assigned.get(expr.id)
            return bool(assigned) and expr.id not in self.all_params and all(
                a.value is not None and self._reshaped(a.value, a.index, depth + 1)
                for a in assigned)
        if isinstance(expr, ast.Subscript):
            return not _at_subscript(expr)  # `x[0]`, `x[:, :k]`: a part, of another shape
        if not isinstance(expr, ast.Call) or not isinstance(expr.func, (ast.Name, ast.Attribute)):
            return False
        q = self.facts.qualify(expr.func)
        if q is not None:
            return q in RESHAPING_CALLS or (q.rsplit(".", 1)[-1] in _RESHAPING
                                            and q.partition(".")[0] in ("jax", "numpy"))
        return isinstance(expr.func, ast.Attribute) and expr.func.attr in _RESHAPING

    def returns_structure_of(self, node: ast.AST, through) -> bool:
        """Whether the value of ``node`` is returned as (part of) the result's structure: through
        names, containers, subscripts and the calls ``through(call)`` accepts, not through
        arbitrary computation (``sum(x.size for x in leaves(v))`` is not ``v``)."""
        seen: set[str] = set()
        todo: list[ast.expr] = list(self.returns)
        while todo:
            e = todo.pop()
            if e is node:
                return True
            if isinstance(e, ast.Name):
                if e.id not in seen:
                    seen.add(e.id)
                    todo.extend(a.value for a in self.assigned.get(e.id, []) if a.value is not None)
            elif isinstance(e, (ast.Tuple, ast.List, ast.Set)):
                todo.extend(x.value if isinstance(x, ast.Starred) else x for x in e.elts)
            elif isinstance(e, ast.Dict):
                todo.extend(e.values)
            elif isinstance(e, (ast.Subscript, ast.Attribute, ast.Starred)):
                todo.append(e.value)
            elif isinstance(e, ast.IfExp):
                todo.extend((e.body, e.orelse))
            elif isinstance(e, ast.Call) and through(e):
                todo.extend(a.value if isinstance(a, ast.Starred) else a for a in e.args)
                todo.extend(k.value for k in e.keywords)
        return False

    def _return_closure(self) -> list[ast.AST]:
        out: list[ast.AST] = []
        seen_names: set[str] = set()
        todo: list[ast.AST] = list(self.returns)
        while todo:
            expr = todo.pop()
            for n in [expr, *own_nodes(expr)]:
                out.append(n)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) \
                        and n.id not in seen_names:
                    seen_names.add(n.id)
                    todo.extend(a.value for a in self.assigned.get(n.id, []) if a.value is not None)
        return out


def _merge(into: dict[str, Origin], more: dict[str, Origin]) -> None:
    for k, o in more.items():
        if k not in into or _RANK[o.kind] > _RANK[into[k].kind]:
            into[k] = o


def _as_part(origins: dict[str, Origin]) -> dict[str, Origin]:
    return {k: Origin(k, PART) for k in origins}


def _updated(origins: dict[str, Origin], evidence: ast.AST,
             items: bool = True) -> dict[str, Origin]:
    """An update of these values; ``items``: an update of an item of a tuple parameter updates
    the parameter (not for a loop carry, which has the structure of the item only)."""
    kinds = (SAME, UPDATED, ITEM) if items else (SAME, UPDATED)
    return {k: Origin(k, UPDATED, o.evidence if o.kind == UPDATED else evidence)
            for k, o in origins.items() if o.kind in kinds}


def _entry(keys: list, values: list, key: str) -> ast.expr | None:
    """The value written under the string ``key`` in a dict display or a call's keywords
    (None: not there, or a ``**`` spread that may hold it)."""
    found = None
    for k, v in zip(keys, values):
        if k is None:
            found = None  # (`{**base, ...}`: what it holds is not known here)
        elif isinstance(k, ast.Constant) and k.value == key:
            found = v
    return found


_NAMEDTUPLE = ("namedtuple", "NamedTuple")


def _record_class_fields(scope: Scope | None, func: ast.expr) -> list[str] | None:
    """The fields, in order, of the record class ``func`` names when it is defined in this
    module: ``collections.namedtuple("Out", ["state", "loss"])`` (or ``"state loss"``), or a
    class body of annotated fields (``typing.NamedTuple``, a dataclass, a ``struct``)."""
    if not isinstance(func, ast.Name) or scope is None:
        return None
    found = scope.lookup(func.id)
    if found is None:
        return None
    where, values = found
    child = where.children.get(func.id)
    if child is not None and child.kind == "class":
        return [st.target.id for st in child.node.body  # type: ignore[attr-defined]
                if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)
                and st.value is None] or None
    if len(values) != 1 or not isinstance(values[0], ast.Call):
        return None
    call = values[0]
    name = call.func.attr if isinstance(call.func, ast.Attribute) else \
        call.func.id if isinstance(call.func, ast.Name) else ""
    if name not in _NAMEDTUPLE or len(call.args) < 2:
        return None
    spec = call.args[1]
    if isinstance(spec, ast.Constant) and isinstance(spec.value, str):
        return spec.value.replace(",", " ").split() or None
    if isinstance(spec, (ast.List, ast.Tuple)):
        names = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else
                 e.elts[0].value if isinstance(e, ast.Tuple) and e.elts and
                 isinstance(e.elts[0], ast.Constant) else None for e in spec.elts]
        return names if all(isinstance(n, str) for n in names) else None  # type: ignore[misc]
    return None


def _constructor(func: ast.expr) -> bool:
    """``DecodeState(...)``, ``TrainState.create(...)``: a call that builds a record."""
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) \
        else ""
    return name.lstrip("_")[:1].isupper() or name == "create"  # (`_StepState(...)` too)


def _at_subscript(node: ast.expr) -> bool:
    """``x.at[...]``."""
    return isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
        and node.value.attr == "at"


def _field_of(node: ast.expr, key: str) -> str | None:
    """``p[key]`` / ``p.key`` -> "p"."""
    tp = type(node)
    if tp is ast.Subscript:
        s = node.slice  # type: ignore[attr-defined]
        if type(s) is ast.Constant and s.value == key and type(node.value) is ast.Name:  # type: ignore[attr-defined]
            return node.value.id  # type: ignore[attr-defined]
    elif tp is ast.Attribute and node.attr == key and type(node.value) is ast.Name:  # type: ignore[attr-defined]
        return node.value.id  # type: ignore[attr-defined]
    return None


# Nodes that compute a new value (not only pick parts out of one and pack them again).
_COMPUTING = (ast.Call, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp)


# Leaf functions whose result has another shape than the leaf (a reduction, an index).
_RESHAPING = frozenset({"sum", "mean", "max", "min", "prod", "any", "all", "argmax", "argmin",
                        "norm", "ravel", "flatten", "reshape", "squeeze", "item", "size",
                        "shape", "ndim", "tolist"})


# Calls whose result has another shape than their array argument (besides _RESHAPING's names).
RESHAPING_CALLS = frozenset({"jax.image.resize", "jax.image.scale_and_translate",
                             "jax.numpy.concatenate", "jax.numpy.stack", "jax.numpy.pad",
                             "jax.numpy.repeat", "jax.numpy.tile", "jax.numpy.expand_dims",
                             "jax.numpy.transpose", "jax.numpy.einsum", "jax.numpy.matmul",
                             "jax.numpy.dot", "jax.lax.dynamic_slice", "jax.lax.slice",
                             "jax.lax.all_gather"})


def _keeps_shapes(facts: FileFacts, fn: ast.expr) -> bool:
    """Whether a one-tree map's leaf function gives each leaf back with its shape, as far as
    the code shows (``x.unbox()``, ``x.astype(t)``, ``lambda x: x if ... else x.value``): not
    an index (``x[0]``), a reduction (``jnp.sum``, ``x.mean()``), a shape."""
    body = fn.body if isinstance(fn, ast.Lambda) else fn
    for n in ast.walk(body):
        if isinstance(n, ast.Subscript):
            return False
        name = n.attr if isinstance(n, ast.Attribute) else n.id if isinstance(n, ast.Name) \
            else None
        if name in _RESHAPING:
            return False
    return True


def _written_leaf(body: ast.expr) -> str | None:
    """The name a leaf function writes entries of and returns: ``c.at[i].set(v)``,
    ``lax.dynamic_update_slice(c, v, idx)``."""
    if not isinstance(body, ast.Call):
        return None
    func = body.func
    if isinstance(func, ast.Attribute) and func.attr in _AT_METHODS and _at_subscript(func.value) \
            and isinstance(func.value.value.value, ast.Name):  # type: ignore[attr-defined]
        return func.value.value.value.id  # type: ignore[attr-defined]
    head = dotted(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
    if head and head[-1].startswith("dynamic_update_") and body.args \
            and isinstance(body.args[0], ast.Name):
        return body.args[0].id
    return None


def _updated_leaf(fn: ast.expr) -> int | None:
    """``lambda p, g: p - lr * g`` -> 0: which tree a leaf-wise update starts from (the leftmost
    operand of arithmetic that also uses another tree's leaf). None for one-tree maps
    (``lambda t: t / c`` computes a new value, the old one is usually still needed),
    ``jnp.zeros_like``, reductions, calls."""
    if not isinstance(fn, ast.Lambda):
        return None
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    written = _written_leaf(fn.body)  # `lambda c, n: c.at[i].set(n)`: each leaf written
    if written is not None:
        return names.index(written) if written in names else None
    if not isinstance(fn.body, ast.BinOp):
        return None
    left: ast.expr = fn.body
    while isinstance(left, ast.BinOp):
        left = left.left
    if not isinstance(left, ast.Name) or left.id not in names:
        return None
    used = {n.id for n in ast.walk(fn.body) if isinstance(n, ast.Name)}
    if not (used & set(names)) - {left.id}:
        return None
    return names.index(left.id)
