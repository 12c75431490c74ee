"""What a model expression is: a Linen module instance, an NNX module class, a TrainState.

``model`` in ``model.init(...)`` is a Linen module when it is bound (once, visibly) to a call of
a project class deriving from ``flax.linen.Module``, of a ``flax.linen`` layer (``nn.Dense``), or
of a lifted class (``nn.vmap(MLP, ...)``). An optax transformation (``tx.init``) or a parameter
of unknown type is not.
"""

from __future__ import annotations

import ast

from shardlint.semantics.api import Role
from shardlint.semantics.facts import FileFacts, Scope
from shardlint.semantics.names import dotted
from shardlint.semantics.project import LINEN_MODULE, NNX_MODULE, ProjectIndex, project_cached

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
                   scope: Scope) -> str | None:
    """The class of a Linen module instance expression: ``MLP()``, or ``model`` bound to one."""
    if isinstance(expr, ast.Name):
        value = facts.value_of(expr.id, scope)
        if not isinstance(value, ast.Call):
            return None
        expr = value
    if isinstance(expr, ast.Call):
        return linen_class(facts, project, expr.func, scope)
    return None


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
