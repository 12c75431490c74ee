"""Where annotation calls take their axis names, and which parameters carry names to them.

Flax code rarely writes its logical names at the Flax call. It writes them where a project
layer is built (``DenseGeneral(features, kernel_axes=("embed", "mlp"))``) and the layer hands
them on: ``self.kernel_axes = kernel_axes`` ... ``nnx.Param(..., out_sharding=self.kernel_axes)``,
or a Linen field ``kernel_axes: tuple = ()`` read as ``self.kernel_axes``, or a helper's
parameter ``dense(x, axes)`` -> ``nn.with_logical_partitioning(init, axes)``.

:func:`exported_name_params` records, per module (in its summary), the parameters and the
``self`` attributes a function hands unchanged to an annotation call as its names; the project
side (``partitioning.name_params``) follows them through the project's calls, so a rule can
judge the literal a caller writes.
"""

from __future__ import annotations

import ast

from shardlint.semantics.catalog.api import Role
from shardlint.semantics.file.facts import CallSite, FileFacts

# Where each Linen API takes its logical names: (position, keyword); position None = keyword only.
LINEN_NAMES = {
    "flax.linen.with_logical_partitioning": (1, "names"),
    "flax.linen.LogicallyPartitioned": (1, "names"),
    "flax.linen.with_logical_constraint": (1, "logical_axis_resources"),
    "flax.linen.partitioning.param_with_axes": (None, "axes"),
}
# The keywords of NNX variables (`nnx.Param(v, out_sharding=...)`) that hold axis names.
NNX_SHARDING_KWARGS = ("out_sharding", "sharding", "sharding_names")

LINEN = "linen"  # logical names: each needs a rule
NNX = "nnx"  # NNX names: a rule, or an axis of the mesh


def names_argument(c: CallSite) -> tuple[ast.expr | None, str] | None:
    """The argument an annotation call takes its axis names from, and whose names they are
    (:data:`LINEN` or :data:`NNX`); None for other calls and for a call judged by its own
    table (``rules=``, ``sharding_rules=``)."""
    api = c.api
    if api is None:
        return None
    if api.name in LINEN_NAMES:
        if c.has_kwarg("rules"):
            return None
        pos, kw = LINEN_NAMES[api.name]
        return (c.arg(pos, kw) if pos is not None else c.kwarg(kw)), LINEN
    if api.role == Role.NNX_PARTITIONING:
        return (None if c.has_kwarg("sharding_rules") else c.arg(1, "sharding")), NNX
    if api.role == Role.NNX_PARAM:
        if c.has_kwarg("sharding_rules"):
            return None
        for kw in NNX_SHARDING_KWARGS:
            if c.kwarg(kw) is not None:
                return c.kwarg(kw), NNX
    return None


def stricter(a: str | None, b: str) -> str:
    """A name handed to Linen as well as to NNX must have a rule: Linen's kind wins."""
    return LINEN if LINEN in (a, b) else b


def exported_name_params(facts: FileFacts) -> tuple[dict[str, dict[str, str]],
                                                      dict[str, dict[str, list]]]:
    """``({function qualname: {param: kind}}, {class qualname: {attr: [kind, field,
    position]}})``: the parameters a function hands as they are to an annotation call's names,
    and the attributes of ``self`` a method hands (``field``: the class body declares it, a
    Linen or dataclass field set by the constructor's keyword; ``position``: its place among the
    annotated fields, -1 if none)."""
    params: dict[str, dict[str, str]] = {}
    attrs: dict[str, dict[str, list]] = {}
    for c in facts.calls:
        api = c.api
        if api is None or not (api.name in LINEN_NAMES or api.role in (
                Role.NNX_PARTITIONING, Role.NNX_PARAM)):
            continue
        found = names_argument(c)
        if found is None or found[0] is None:
            continue
        node, kind = found
        scope = c.scope
        if scope.kind != "function" or not scope.params:
            continue
        if isinstance(node, ast.Name) and node.id in scope.params \
                and len(scope.bindings.get(node.id, ())) == 1:  # (never rebound)
            row = params.setdefault(scope.qualname, {})
            row[node.id] = stricter(row.get(node.id), kind)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == scope.params[0] and scope.enclosing_class is not None:
            cls = scope.enclosing_class
            row2 = attrs.setdefault(cls.qualname, {})
            prev = row2.get(node.attr)
            row2[node.attr] = [stricter(prev[0] if prev else None, kind),
                               node.attr in cls.annotations or node.attr in cls.bindings,
                               _field_position(cls, node.attr)]
    return params, attrs


def _field_position(cls, attr: str) -> int:
    """Where a dataclass-style field of the class body comes among its fields (the position a
    constructor call passes it at, when no base class adds fields before it); -1 if none."""
    fields = [name for name, ann in cls.annotations.items() if not _class_var(ann)]
    return fields.index(attr) if attr in fields else -1


def _class_var(ann: ast.expr) -> bool:
    node = ann.value if isinstance(ann, ast.Subscript) else ann
    return (isinstance(node, ast.Name) and node.id == "ClassVar") or (
        isinstance(node, ast.Attribute) and node.attr == "ClassVar")
