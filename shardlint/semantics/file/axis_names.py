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
    # (a spec made from the rules in force: a name with no rule maps to None, replicated)
    "flax.linen.logical_to_mesh_axes": (0, "array_dim_names"),
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


def forwarded_rules(c: CallSite) -> str | None:
    """The parameter a Linen annotation call takes its ``rules=`` from, when it is one of the
    enclosing function's, never rebound, that defaults to None (``def to_spec(names,
    rules=None): return nn.logical_to_mesh_axes(names, rules=rules)``): the rules in force
    unless a caller passes a table."""
    api = c.api
    if api is None or api.name not in LINEN_NAMES:
        return None
    node = c.kwarg("rules")
    scope = c.scope
    if not isinstance(node, ast.Name) or scope.kind != "function" \
            or node.id not in scope.params or len(scope.bindings.get(node.id, ())) != 1:
        return None
    default = param_default(scope.node, node.id)
    return node.id if isinstance(default, ast.Constant) and default.value is None else None


def param_default(fn: ast.AST, name: str) -> ast.expr | None:
    """The default value of parameter ``name`` of a ``def`` (None when it has none)."""
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    for arg, default in zip(positional[len(positional) - len(a.defaults):], a.defaults):
        if arg.arg == name:
            return default
    for arg, kw_default in zip(a.kwonlyargs, a.kw_defaults):
        if arg.arg == name:
            return kw_default
    return None


def stricter(a: str | None, b: str) -> str:
    """A name handed to Linen as well as to NNX must have a rule: Linen's kind wins."""
    return LINEN if LINEN in (a, b) else b


def exported_name_params(facts: FileFacts) -> tuple[dict[str, dict[str, str]],
                                                      dict[str, dict[str, list]],
                                                      dict[str, dict[str, list[str]]]]:
    """``({function qualname: {param: kind}}, {class qualname: {attr: [kind, field,
    position]}}, {function qualname: {param: [rules param, ...]}})``: the parameters a
    function hands as they are to an annotation call's names, the attributes of ``self`` a
    method hands (``field``: the class body declares it, a Linen or dataclass field set by the
    constructor's keyword; ``position``: its place among the annotated fields, -1 if none), and
    for a parameter handed to a call whose ``rules=`` is another parameter defaulting to None
    (:func:`forwarded_rules`), that parameter: the names meet the rules in force only where a
    caller leaves it out."""
    params: dict[str, dict[str, str]] = {}
    attrs: dict[str, dict[str, list]] = {}
    unless: dict[str, dict[str, list[str]]] = {}
    for c in facts.calls:
        api = c.api
        if api is None or not (api.name in LINEN_NAMES or api.role in (
                Role.NNX_PARTITIONING, Role.NNX_PARAM)):
            continue
        found = names_argument(c)
        rules_param = None
        if found is None:
            rules_param = forwarded_rules(c)
            if rules_param is None:
                continue
            pos, kw = LINEN_NAMES[api.name]  # type: ignore[union-attr]
            found = (c.arg(pos, kw) if pos is not None else c.kwarg(kw)), LINEN
        if found[0] is None:
            continue
        node, kind = found
        scope = c.scope
        if scope.kind != "function" or not scope.params:
            continue
        if isinstance(node, ast.Name) and node.id in scope.params \
                and len(scope.bindings.get(node.id, ())) == 1:  # (never rebound)
            row = params.setdefault(scope.qualname, {})
            conds = unless.setdefault(scope.qualname, {})
            if rules_param is None:  # (one call that takes the rules in force is enough)
                conds.pop(node.id, None)
            elif node.id not in row or node.id in conds:
                if rules_param not in conds.setdefault(node.id, []):
                    conds[node.id].append(rules_param)
            row[node.id] = stricter(row.get(node.id), kind)
        elif rules_param is None and isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == scope.params[0] and scope.enclosing_class is not None:
            cls = scope.enclosing_class
            row2 = attrs.setdefault(cls.qualname, {})
            prev = row2.get(node.attr)
            row2[node.attr] = [stricter(prev[0] if prev else None, kind),
                               node.attr in cls.annotations or node.attr in cls.bindings,
                               _field_position(cls, node.attr)]
    return params, attrs, {q: row for q, row in unless.items() if row}


def _field_position(cls, attr: str) -> int:
    """Where a dataclass-style field of the class body comes among its fields (the position a
    constructor call passes it at, when no base class adds fields before it); -1 if none."""
    fields = [name for name, ann in cls.annotations.items() if not _class_var(ann)]
    return fields.index(attr) if attr in fields else -1


def _class_var(ann: ast.expr) -> bool:
    node = ann.value if isinstance(ann, ast.Subscript) else ann
    return (isinstance(node, ast.Name) and node.id == "ClassVar") or (
        isinstance(node, ast.Attribute) and node.attr == "ClassVar")
