"""Values inside one function body: where a local name's value comes from, what the function returns.

Works on the ``ast`` of one :class:`Scope` (``scope.node``), or of a lambda, without descending
into nested functions, classes or lambdas. It answers two questions the donation and init rules
ask:

* which parameters a returned value is an *updated* version of (``state.apply_gradients(...)``,
  ``optax.apply_updates(params, ...)``, the state half of ``tx.update(...)``, ``.replace(...)``,
  ``jax.tree.map`` arithmetic, ``nnx.state``/``nnx.split`` of a module) -- :meth:`LocalFlow.updated_params`;
* whether a value is returned as part of the result -- :meth:`LocalFlow.returns_structure_of` --
  or reaches it by any computation -- :meth:`LocalFlow.flows_to_return`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from shardlint.semantics.facts import FileFacts, Scope

_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)

SAME = "same"  # the parameter's value itself (or an alias of it)
PART = "part"  # a field or leaf of it
UPDATED = "updated"  # a new value of the same structure, built from it by a state update
_RANK = {PART: 0, SAME: 1, UPDATED: 2}

TREE_MAP = ("jax.tree.map", "jax.tree_util.tree_map")
NNX_STATE = ("flax.nnx.state", "flax.nnx.graph.state", "flax.nnx.split", "flax.nnx.graph.split")
NNX_MERGE = ("flax.nnx.merge", "flax.nnx.graph.merge")
APPLY_UPDATES = ("optax.apply_updates", "optax._src.update.apply_updates")


def own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node of a body, without entering nested functions, classes or lambdas."""
    todo = list(ast.iter_child_nodes(node)) if isinstance(node, (*_NESTED, ast.Module)) else [node]
    while todo:
        n = todo.pop()
        yield n
        if not isinstance(n, _NESTED):
            todo.extend(ast.iter_child_nodes(n))


def positional_params(fn: ast.AST) -> list[str]:
    args = fn.args  # type: ignore[attr-defined]
    return [a.arg for a in [*args.posonlyargs, *args.args]]


@dataclass(frozen=True)
class Assigned:
    """``name = value`` (``index``: the position when unpacked, ``a, (b, c) = v`` -> c: (1, 1))."""

    value: ast.expr | None  # None: a value shardlint cannot see (loop target, ``+=``, ``with as``)
    index: tuple[int, ...]
    node: ast.AST


@dataclass(frozen=True)
class Origin:
    """What a value is, relative to one parameter of the function."""

    param: str
    kind: str  # SAME | PART | UPDATED
    evidence: ast.AST | None = None  # the update expression, for UPDATED


class LocalFlow:
    """Assignments and returns of one function (or lambda) body."""

    def __init__(self, facts: FileFacts, scope: Scope | None, node: ast.AST | None = None):
        self.facts = facts
        self.scope = scope
        self.node = node if node is not None else scope.node  # type: ignore[union-attr]
        fn = self.node
        self.params: list[str] = positional_params(fn) if isinstance(fn, (*_NESTED[:2], ast.Lambda)) \
            else []
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = fn.args
            self.all_params = set(self.params) | {x.arg for x in a.kwonlyargs}
        else:
            self.all_params = set()
        self.assigned: dict[str, list[Assigned]] = {}
        self.returns: list[ast.expr] = []
        self.expr_calls: list[ast.Call] = []  # calls whose result is dropped: `opt.update(g)`
        if isinstance(fn, ast.Lambda):
            self.returns.append(fn.body)
        else:
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
    def trace(self, expr: ast.expr, index: tuple[int, ...] = (),
              _seen: frozenset = frozenset()) -> dict[str, Origin]:
        """The parameters ``expr`` (projected on ``index``) is, is part of, or is an update of."""
        if len(_seen) > 40:
            return {}
        out: dict[str, Origin] = {}
        if isinstance(expr, ast.Name):
            if expr.id in self.all_params and not index:
                out[expr.id] = Origin(expr.id, SAME)  # its value on entry
            seen_key = (expr.id, index)
            if seen_key in _seen:
                return out
            seen = _seen | {seen_key}
            for a in self.assigned.get(expr.id, []):
                if a.value is not None:
                    _merge(out, self.trace(a.value, (*a.index, *index), seen))
            return out
        if isinstance(expr, (ast.Tuple, ast.List)):
            if index:
                i = index[0]
                if i < len(expr.elts) and not any(isinstance(e, ast.Starred) for e in expr.elts):
                    return self.trace(expr.elts[i], index[1:], _seen)
                return {}
            for e in expr.elts:
                _merge(out, self.trace(e.value if isinstance(e, ast.Starred) else e, (), _seen))
            return out
        if isinstance(expr, ast.Dict):
            for v in expr.values:
                _merge(out, self.trace(v, (), _seen))
            return out
        if isinstance(expr, ast.IfExp):
            out = self.trace(expr.body, index, _seen)
            _merge(out, self.trace(expr.orelse, index, _seen))
            return out
        if isinstance(expr, ast.Subscript):
            key = expr.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, int) and \
                    isinstance(expr.value, (ast.Call, ast.Tuple, ast.Name)):
                projected = self.trace(expr.value, (key.value, *index), _seen)
                if projected:
                    return projected
            return _as_part(self.trace(expr.value, (), _seen))
        if isinstance(expr, ast.Attribute):
            return _as_part(self.trace(expr.value, (), _seen))
        if isinstance(expr, ast.Call):
            return self._trace_call(expr, index, _seen)
        return {}

    def _trace_call(self, call: ast.Call, index: tuple[int, ...], seen: frozenset) -> dict[str, Origin]:
        func = call.func
        q = self.facts.qualify(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
        if isinstance(func, ast.Attribute) and q is None:
            if func.attr in ("apply_gradients", "replace") and not index:
                return _updated(self.trace(func.value, (), seen), call)
            if func.attr == "update" and index[:1] == (1,) and len(call.args) >= 2:
                # optax: `updates, new_opt_state = tx.update(grads, opt_state, params)`
                return _updated(self.trace(call.args[1], (), seen), call)
            return {}
        if q is None:
            return {}
        if q in APPLY_UPDATES and call.args and not index:
            return _updated(self.trace(call.args[0], (), seen), call)
        if q in TREE_MAP and len(call.args) >= 2 and not index:
            # `jax.tree.map(lambda p, g: p - lr * g, params, grads)`: `params` is updated.
            i = _updated_leaf(call.args[0])
            if i is not None and 1 + i < len(call.args):
                return _updated(self.trace(call.args[1 + i], (), seen), call)
            return {}
        if q in NNX_STATE and call.args:
            if q.endswith("split") and index[:1] == (0,):
                return {}  # the graphdef holds no arrays
            return _updated(self.trace(call.args[0], (), seen), call)
        if q in NNX_MERGE:
            out: dict[str, Origin] = {}
            for s in call.args[1:]:
                _merge(out, {k: Origin(k, SAME) for k, o in self.trace(s, (), seen).items()
                             if o.kind in (SAME, UPDATED)})
            return out
        return {}

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
            for call in self.expr_calls:
                f = call.func
                if isinstance(f, ast.Attribute) and f.attr == "update" and call.args:
                    owners = [p for p, o in self.trace(f.value).items() if o.kind == SAME]
                    if not owners:
                        continue
                    for p in owners:
                        _merge(out, {p: Origin(p, UPDATED, call)})
                    for a in call.args:
                        for p, o in self.trace(a).items():
                            if o.kind == SAME:
                                _merge(out, {p: Origin(p, UPDATED, call)})
        return out

    def flows_to_return(self, param: str) -> bool:
        """Whether the parameter's value reaches a returned value by any computation."""
        return any(isinstance(n, ast.Name) and n.id == param for n in self._return_closure())

    def returned_as_is(self, param: str) -> bool:
        """Some return hands the parameter back unchanged (``return x``): an identity or a
        reshard, not a computation on it."""
        return any(o.kind == SAME for r in self.returns for p, o in self.trace(r).items()
                   if p == param)

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


def _updated(origins: dict[str, Origin], evidence: ast.AST) -> dict[str, Origin]:
    return {k: Origin(k, UPDATED, o.evidence if o.kind == UPDATED else evidence)
            for k, o in origins.items() if o.kind in (SAME, UPDATED)}


def _updated_leaf(fn: ast.expr) -> int | None:
    """``lambda p, g: p - lr * g`` -> 0: which tree a leaf-wise update starts from (the leftmost
    operand of arithmetic that also uses another tree's leaf). None for one-tree maps
    (``lambda t: t / c`` computes a new value, the old one is usually still needed),
    ``jnp.zeros_like``, reductions, calls."""
    if not isinstance(fn, ast.Lambda) or not isinstance(fn.body, ast.BinOp):
        return None
    names = [a.arg for a in fn.args.posonlyargs + fn.args.args]
    left: ast.expr = fn.body
    while isinstance(left, ast.BinOp):
        left = left.left
    if not isinstance(left, ast.Name) or left.id not in names:
        return None
    used = {n.id for n in ast.walk(fn.body) if isinstance(n, ast.Name)}
    if not (used & set(names)) - {left.id}:
        return None
    return names.index(left.id)
