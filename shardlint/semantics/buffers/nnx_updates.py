"""In-place updates of NNX objects passed to a function, and whether the function returns them.

NNX modules, optimizers and variables are mutable Python objects that ``jax.jit`` flattens into
arrays and rebuilds inside the trace: a change made there to such an argument is made on the
rebuilt copy. Only ``nnx.jit`` writes it back to the caller's object; under plain ``jax.jit``
the change survives only through the return value.

:class:`NnxArguments` answers, for one function body:

* which parameters hold NNX objects -- annotated with an ``nnx`` type or a project
  ``nnx.Module`` subclass, handed to an ``nnx`` graph API (``nnx.grad(f)(model)``,
  ``nnx.state(model)``, ``nnx.update(model, ...)``), or the receiver of an optimizer update
  ``optimizer.update(model, grads)``;
* which of them the body changes in place (:class:`Mutation`): ``optimizer.update(model,
  grads)`` (both), ``nnx.update(model, state)``, ``v.value = ...``, ``v[...] = ...``,
  ``v.value += ...`` on a variable reached from a parameter, and ``model.attr = ...`` on an NNX
  parameter;
* whether a parameter is part of what the function returns (as itself, a part of it, or a state
  taken from it: ``return model, loss``, ``return nnx.state(model)``).

Only parameters used under their own name count (not ones rebound in the body): an object
built inside the function (``nnx.merge(graphdef, state)``, ``MLP(rngs=...)``) is not the
caller's.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from shardlint.semantics.file.dataflow import LocalFlow, own_nodes
from shardlint.semantics.file.facts import FileFacts, Scope
from shardlint.semantics.file.reuse import each_call
from shardlint.semantics.flow.models import nnx_class

# nnx APIs that take a graph node (a module, optimizer, variable) as their first argument.
_GRAPH_APIS = frozenset({"flax.nnx.state", "flax.nnx.split", "flax.nnx.update", "flax.nnx.graphdef",
                         "flax.nnx.pop", "flax.nnx.iter_graph", "flax.nnx.clone",
                         "flax.nnx.variables", "flax.nnx.split_state"})
_GRAD_APIS = frozenset({"flax.nnx.grad", "flax.nnx.value_and_grad"})
# nnx types a parameter annotation may name: objects with state that changes in place.
_NNX_TYPES = frozenset({"Module", "Optimizer", "ModelAndOptimizer", "Variable", "Param",
                        "BatchStat", "Cache", "Intermediate", "Rngs"})


def file_uses_nnx(facts: FileFacts) -> bool:
    return any(q == "flax.nnx" or q.startswith("flax.nnx.") for q in facts.imports.names.values()) \
        or any(q.startswith("flax.nnx.") for q in facts.called_names())


def uses_hijax(facts: FileFacts) -> bool:
    """Hijax / ref Variables (``flax_hijax_variable``, ``nnx.var_defaults(hijax=True)``,
    ``Variable(..., hijax=True)``) carry updates through ``jax.jit``: shardlint stays silent.
    (Per call, reused per part of the file in the language server.)"""
    return bool(each_call(facts, "hijax", _hijax_call, local=True))


def _hijax_call(c) -> bool:
    q = c.qualified or ""
    if "hijax" in q or q.endswith("var_defaults"):
        return True
    if any(kw.arg in ("hijax", "ref") for kw in c.node.keywords):
        return True
    first = c.node.args[0] if c.node.args else None
    return isinstance(first, ast.Constant) and first.value == "flax_hijax_variable"


@dataclass
class Mutation:
    param: str  # the parameter whose object changes
    node: ast.AST  # the statement or call that changes it
    how: str  # "update" | "nnx.update" | "variable" | "attribute"


class NnxArguments:
    """NNX parameters of one function and the in-place changes its body makes to them."""

    def __init__(self, facts: FileFacts, project, scope: Scope, flow: LocalFlow | None = None):
        self.facts = facts
        self.project = project
        self.scope = scope
        self.node = scope.node
        self.flow = flow or LocalFlow(facts, scope)
        self.params = [p for p in self.flow.params if p not in self.flow.assigned]
        self.nnx: set[str] = set()
        self.mutations: list[Mutation] = []
        self._analyse()

    # ---- analysis --------------------------------------------------------------------------------
    def _root_param(self, expr: ast.expr) -> str | None:
        while isinstance(expr, (ast.Attribute, ast.Subscript)):
            expr = expr.value
        if isinstance(expr, ast.Name) and expr.id in self.params:
            return expr.id
        return None

    def _annotated_nnx(self, param: str) -> bool:
        ann = self.scope.annotations.get(param)
        if ann is None:
            return False
        q = self.facts.qualify(ann) if isinstance(ann, (ast.Name, ast.Attribute)) else None
        if q is not None and q.startswith("flax.nnx.") and q.rsplit(".", 1)[-1] in _NNX_TYPES:
            return True
        parent = self.scope.parent or self.facts.module_scope
        return nnx_class(self.facts, self.project, ann, parent) is not None

    def _analyse(self) -> None:
        f = self.facts
        params = set(self.params)
        self.nnx = {p for p in self.params if self._annotated_nnx(p)}
        updates: list[tuple[ast.Call, str]] = []
        for n in own_nodes(self.node):
            if isinstance(n, ast.Call):
                q = f.qualify(n.func) if isinstance(n.func, (ast.Name, ast.Attribute)) else None
                if q in _GRAPH_APIS and n.args:
                    p = self._root_param(n.args[0])
                    if p is not None and isinstance(n.args[0], ast.Name):
                        self.nnx.add(p)
                elif isinstance(n.func, ast.Call) and n.args:
                    # nnx.grad(loss_fn)(model) / nnx.value_and_grad(loss_fn, ...)(model, ...)
                    inner = n.func.func
                    qi = f.qualify(inner) if isinstance(inner, (ast.Name, ast.Attribute)) else None
                    if qi in _GRAD_APIS and isinstance(n.args[0], ast.Name) \
                            and n.args[0].id in params:
                        self.nnx.add(n.args[0].id)
            elif isinstance(n, ast.Expr) and isinstance(n.value, ast.Call):
                call = n.value
                func = call.func
                q = f.qualify(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
                if q == "flax.nnx.update" and call.args:
                    p = self._root_param(call.args[0])
                    if p is not None:
                        self.nnx.add(p)
                        self.mutations.append(Mutation(p, call, "nnx.update"))
                elif isinstance(func, ast.Attribute) and func.attr == "update" \
                        and isinstance(func.value, ast.Name) and func.value.id in params \
                        and not call.keywords:
                    updates.append((call, func.value.id))
            elif isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    self._assignment(t, n)
        # `optimizer.update(model, grads)` (flax >= 0.11) changes the optimizer and the model;
        # with one argument (`optimizer.update(grads)`, older flax) only on a known NNX object,
        # since `d.update(other)` is a dict's.
        for call, receiver in updates:
            if len(call.args) == 2 or (len(call.args) == 1 and receiver in self.nnx):
                self.nnx.add(receiver)
                self.mutations.append(Mutation(receiver, call, "update"))
                if len(call.args) == 2 and isinstance(call.args[0], ast.Name) \
                        and call.args[0].id in params:
                    self.nnx.add(call.args[0].id)
                    self.mutations.append(Mutation(call.args[0].id, call, "update"))
        # Attribute assignment on a parameter is an NNX change only once the parameter is
        # known to be an NNX object.
        self.mutations = [m for m in self.mutations if m.how != "attribute" or m.param in self.nnx]

    def _assignment(self, target: ast.expr, stmt: ast.stmt) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                self._assignment(e.value if isinstance(e, ast.Starred) else e, stmt)
            return
        p = self._root_param(target)
        if p is None or isinstance(target, ast.Name):
            return
        variable = (isinstance(target, ast.Attribute) and target.attr == "value") or \
            (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
             and target.slice.value is Ellipsis)
        if variable:
            self.mutations.append(Mutation(p, stmt, "variable"))
        elif isinstance(target, ast.Attribute):
            self.mutations.append(Mutation(p, stmt, "attribute"))

    # ---- queries ---------------------------------------------------------------------------------
    def returned(self, param: str) -> bool:
        """The parameter's object, a part of it or a state taken from it is returned -- or it is
        handed to a call written in the return statement (``return Output(model=model)``,
        ``return pack(model, loss)``), which may put it in the result."""
        if any(param in self.flow.trace(r) for r in self.flow.returns):
            return True
        for r in self.flow.returns:
            for n in ast.walk(r):
                if isinstance(n, ast.Call) and any(
                        isinstance(a, ast.Name) and a.id == param
                        for a in [*(x.value if isinstance(x, ast.Starred) else x for x in n.args),
                                  *(k.value for k in n.keywords)]):
                    return True
        return False

    def first_mutations(self) -> list[Mutation]:
        """The first in-place change of each parameter, in source order."""
        seen: set[str] = set()
        out = []
        for m in sorted(self.mutations, key=lambda m: (getattr(m.node, "lineno", 0),
                                                       getattr(m.node, "col_offset", 0))):
            if m.param not in seen:
                seen.add(m.param)
                out.append(m)
        return out
