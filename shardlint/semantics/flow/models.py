"""What a model expression is: a Linen module instance, an NNX module class, a TrainState.

``model`` in ``model.init(...)`` is a Linen module when it is bound (once, visibly) to a call of
a project class deriving from ``flax.linen.Module``, of a ``flax.linen`` layer (``nn.Dense``), or
of a lifted class (``nn.vmap(MLP, ...)``). An optax transformation (``tx.init``) or a parameter
of unknown type is not.
"""

from __future__ import annotations

import ast

from shardlint.semantics.catalog.api import LINEN_MODULE, NNX_MODULE, Role
from shardlint.semantics.catalog.names import dotted
from shardlint.semantics.file.facts import FileFacts, Scope
from shardlint.semantics.flow.project import ProjectIndex, project_cached

TRAIN_STATE = "flax.training.train_state.TrainState"
# flax.linen classes that are not layers.
_LINEN_NOT_LAYERS = frozenset({"Module", "Partitioned", "LogicallyPartitioned", "Variable",
                               "Scope", "FrozenDict", "Sequential"})
# NNX layers with parameters (built-ins a project constructs directly).
_NNX_LAYERS = frozenset({"Linear", "LinearGeneral", "Einsum", "Conv", "ConvTranspose", "Embed",
                         "LayerNorm", "RMSNorm", "BatchNorm", "GroupNorm", "MultiHeadAttention",
                         "LSTMCell", "GRUCell", "OptimizedLSTMCell"})


def class_ref(facts: FileFacts, node: ast.expr, scope: Scope) -> str | None:
    """``"module:Qual"`` for a class of this file, ``"ext:dotted"`` for an imported one."""
    parts = dotted(node)
    if parts is None:
        return None
    found = scope.lookup(parts[0])
    if found is not None:
        owner, values = found
        if len(parts) == 1 and values:
            v = values[-1]
            if isinstance(v, ast.ClassDef):
                qual = f"{owner.qualname}.{parts[0]}" if owner.qualname else parts[0]
                return f"{facts.module}:{qual}"
            if owner.kind == "module" and len(values) == 1:
                return f"{facts.module}:{parts[0]}"  # an alias: `Ensemble = nn.vmap(MLP, ...)`
        return None
    q = facts.qualify(node)
    return f"ext:{q}" if q else None


def _flax_class(facts: FileFacts, node: ast.expr, package: str) -> str | None:
    q = facts.qualify(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
    if q is None or not q.startswith(package + "."):
        return None
    return q.rsplit(".", 1)[-1]


def linen_class(facts: FileFacts, project: ProjectIndex, node: ast.expr, scope: Scope) -> str | None:
    """The display name of a Linen module class expression (``MLP``, ``nn.Dense``), else None."""
    if isinstance(node, ast.Call):
        # `nn.vmap(MLP, ...)`, `nn.remat(Block)`: the lifted class.
        known = facts.resolve(node.func)
        if known is not None and known.role in (Role.LINEN_LIFT, Role.REMAT) and node.args:
            inner = linen_class(facts, project, node.args[0], scope)
            return inner
        return None
    name = _flax_class(facts, node, "flax.linen")
    if name is not None:
        ok = name[:1].isupper() and name not in _LINEN_NOT_LAYERS and facts.resolve(node) is None
        return ".".join(dotted(node) or [name]) if ok else None
    ref = class_ref(facts, node, scope)
    if ref is None:
        return None
    if project.is_subclass(ref, LINEN_MODULE, facts.module) and \
            not project.is_subclass(ref, NNX_MODULE, facts.module):
        return ".".join(dotted(node) or [])
    return None


def linen_instance(facts: FileFacts, project: ProjectIndex, expr: ast.expr,
                   scope: Scope, depth: int = 0) -> str | None:
    """The class of a Linen module instance expression: ``MLP()``, ``model`` bound to one (also
    unpacked: ``model, mesh = MLP(), make_mesh()``), ``Ensemble()`` of a lifted class bound in a
    function, or the result of a project function that returns one (``create_model(config)``,
    in this file or another)."""
    if depth > 6:
        return None
    if isinstance(expr, ast.Name):
        bound = _bound(facts, expr.id, scope)
        if bound is None:
            return None
        expr, scope = bound
    if not isinstance(expr, ast.Call):
        return None
    found = linen_class(facts, project, expr.func, scope)
    if found is not None:
        return found
    func = expr.func
    if isinstance(func, ast.Name):
        bound = _bound(facts, func.id, scope)
        if bound is not None and isinstance(bound[0], ast.Call):
            return linen_class(facts, project, bound[0], bound[1])  # `Ensemble = nn.vmap(MLP)`
        where = scope.lookup(func.id)
        if where is not None and len(where[1]) == 1 and \
                isinstance(where[1][0], (ast.FunctionDef, ast.AsyncFunctionDef)):
            owner = where[0]
            qual = f"{owner.qualname}.{func.id}" if owner.qualname else func.id
            callee = facts.scopes.get(qual)
            if callee is not None and callee.kind == "function":
                return _returned_class(facts, project, callee, depth)
            return None
    ref = class_ref(facts, func, scope) if isinstance(func, (ast.Name, ast.Attribute)) else None
    return project.flows.returns_linen(ref, facts.module) if ref is not None else None


def _bound(facts: FileFacts, name: str, scope: Scope) -> tuple[ast.expr, Scope] | None:
    """The one value ``name`` is bound to where ``scope`` reads it (an item of an unpacked
    tuple), and the scope it was written in."""
    where = scope.lookup(name)
    if where is None:
        return None
    owner, values = where
    assigned = owner.assigned.get(name) if owner.kind == "function" else None
    if assigned is not None:
        if len(assigned) != 1 or assigned[0].value is None:
            return None
        value: ast.expr = assigned[0].value
        for i in assigned[0].index:
            if not isinstance(value, (ast.Tuple, ast.List)) or i >= len(value.elts) or \
                    any(isinstance(e, ast.Starred) for e in value.elts):
                return None
            value = value.elts[i]
        return value, owner
    if len(values) != 1 or not isinstance(values[0], ast.expr):
        return None
    return values[0], owner


def _returned_class(facts: FileFacts, project: ProjectIndex, fn: Scope, depth: int) -> str | None:
    """The Linen class every return of a function of this file is an instance of."""
    found = {linen_instance(facts, project, r, fn, depth + 1) for r in fn.returns}
    return found.pop() if len(found) == 1 and None not in found else None


def nnx_class(facts: FileFacts, project: ProjectIndex, node: ast.expr, scope: Scope) -> str | None:
    """The display name of an NNX module class (a project subclass or an ``nnx`` layer)."""
    name = _flax_class(facts, node, "flax.nnx")
    if name is not None:
        return ".".join(dotted(node) or [name]) if name in _NNX_LAYERS else None
    ref = class_ref(facts, node, scope)
    if ref is not None and project.is_subclass(ref, NNX_MODULE, facts.module):
        return ".".join(dotted(node) or [])
    return None


def is_train_state_create(facts: FileFacts, project: ProjectIndex, call: ast.Call,
                          scope: Scope) -> bool:
    """``TrainState.create(...)`` of flax's TrainState or a project subclass of it."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "create"):
        return False
    known = facts.resolve(func.value)
    if known is not None and known.role == Role.TRAIN_STATE:
        return True
    ref = class_ref(facts, func.value, scope)
    return ref is not None and project.is_subclass(ref, TRAIN_STATE, facts.module)


@project_cached
def project_uses_mesh(project: ProjectIndex) -> bool:
    """Some file enters or sets a mesh, or builds one."""
    return project.mesh_provider or any(s.mesh_axes for s in project.summaries.values())


@project_cached
def project_uses_partitioning(project: ProjectIndex) -> bool:
    """Some file calls a constraint or partitioning API, or enters axis rules."""
    if project.rules_provider:
        return True
    return any(sym.needs for s in project.summaries.values() for sym in s.symbols.values())
