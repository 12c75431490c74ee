"""Repeated layers -- scans over stacked layers, loops that build many submodules -- and whether
a rematerialisation (``nn.remat``, ``nnx.remat``, ``jax.checkpoint``) is on their path.

:func:`layer_stacks` finds, in one file:

* ``nn.scan(Block, variable_axes={"params": 0}, ...)``: Linen layers with stacked parameters
  (a scan that broadcasts its parameters is a recurrence over time, not layers);
* ``nnx.scan`` applied to a function that calls one of its parameters (``layer(x)``: the
  scanned-over argument is a module);
* ``jax.lax.scan(body, carry, stacked)`` whose body hands its per-step slice to ``.apply(...)``
  or ``nnx.merge(...)`` (per-layer parameters);
* in the methods of a Linen or NNX module class, a ``for`` loop or list comprehension over
  ``range(n)`` that constructs a module on each step.

Each comes with the literal number of layers when known. Remat counts as present when the
scanned or built target is wrapped in a remat (directly, or through a name bound to one), when
the scanned function is decorated with one, or when the module class holding the loop, or the
class being repeated, uses one anywhere in its body. For everything but ``nn.scan`` (whose
remat goes on the target at the call) a remat -- or a ``checkpoint_name`` tag -- anywhere in
the file or the project counts too: callers elsewhere often checkpoint whole blocks.

:func:`project_differentiates` says whether any file of the project takes gradients.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from shardlint.semantics.catalog.api import LINEN_MODULE, NNX_MODULE, Role, names_with_role
from shardlint.semantics.file.dataflow import own_nodes
from shardlint.semantics.file.facts import FileFacts, Scope
from shardlint.semantics.flow.models import class_ref, linen_class, nnx_class
from shardlint.semantics.flow.project import ProjectIndex, project_cached
from shardlint.semantics.sharding.lifts import lifts

GRADIENTS = frozenset({"jax.grad", "jax.value_and_grad", "jax.vjp", "flax.nnx.grad",
                       "flax.nnx.value_and_grad"})
# `checkpoint_name(x, "...")` tags values for a remat policy: remat is set up somewhere.
CHECKPOINT_NAME = "jax.ad_checkpoint.checkpoint_name"
_REMAT_APIS = names_with_role(Role.REMAT) | {CHECKPOINT_NAME}
# `range(self.num_layers)`, `range(cfg.depth)`: a count that names layers.
_LAYER_COUNT = re.compile(r"(^|_)(layers?|depth|blocks?)$")


@project_cached
def project_differentiates(project: ProjectIndex) -> bool:
    return any(GRADIENTS.intersection(s.apis) for s in project.summaries.values())


@project_cached
def project_uses_remat(project: ProjectIndex) -> bool:
    return any(_REMAT_APIS.intersection(s.apis) for s in project.summaries.values())


def file_uses_remat(facts: FileFacts) -> bool:
    found = facts.derived.get("uses_remat")
    if found is None:
        found = facts.derived["uses_remat"] = Role.REMAT in facts.roles or \
            any(c.qualified == CHECKPOINT_NAME for c in facts.calls)
    return found  # type: ignore[return-value]


@dataclass
class LayerStack:
    node: ast.AST  # where to report: the scan, the loop or the comprehension
    kind: str  # "nn.scan" | "nnx.scan" | "lax.scan" | "loop"
    target: ast.expr | None  # the scanned class (nn.scan), for a fix
    what: str  # the repeated thing, as written
    count: int | None  # the number of layers, when literal
    count_named: bool  # the count is a name that says "layers" (`num_layers`)
    remat: bool
    scope: Scope


def _is_remat(facts: FileFacts, node: ast.AST | None) -> bool:
    if isinstance(node, ast.Call):
        node = node.func
    if not isinstance(node, (ast.Name, ast.Attribute)):
        return False
    known = facts.resolve(node)
    return known is not None and known.role == Role.REMAT


def _wrapped_in_remat(facts: FileFacts, expr: ast.expr | None, scope: Scope,
                      depth: int = 0) -> bool:
    """``nn.remat(Block)``, or a name bound to one (``Block = nn.remat(_Block)``)."""
    if expr is None or depth > 4:
        return False
    if isinstance(expr, ast.Call):
        if _is_remat(facts, expr.func):
            return True
        # `partial(nn.remat, ...)(Block)` / `nn.remat(policy=...)(Block)`
        return isinstance(expr.func, ast.Call) and (
            _is_remat(facts, expr.func.func) or any(_is_remat(facts, a) for a in expr.func.args))
    if isinstance(expr, ast.Name):
        value = facts.value_of(expr.id, scope)
        if isinstance(value, ast.expr) and value is not expr:
            return _wrapped_in_remat(facts, value, scope, depth + 1)
    return False


def _body_uses_remat(facts: FileFacts, node: ast.AST) -> bool:
    """A remat call or decorator anywhere in a class or function body."""
    for n in ast.walk(node):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if any(_is_remat(facts, d) for d in n.decorator_list):
                return True
        elif isinstance(n, ast.Call) and (_is_remat(facts, n.func) or (
                isinstance(n.func, (ast.Name, ast.Attribute))
                and facts.qualify(n.func) == CHECKPOINT_NAME)):
            return True
    return False


def _local_class(facts: FileFacts, expr: ast.expr | None, scope: Scope) -> ast.ClassDef | None:
    if isinstance(expr, ast.Name):
        value = facts.value_of(expr.id, scope)
        if isinstance(value, ast.ClassDef):
            return value
    return None


def _literal_int(facts: FileFacts, node: ast.expr | None, scope: Scope) -> int | None:
    value = facts.literal(node, scope) if node is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _named_count(node: ast.expr | None) -> bool:
    if isinstance(node, ast.Attribute):
        return bool(_LAYER_COUNT.search(node.attr))
    if isinstance(node, ast.Name):
        return bool(_LAYER_COUNT.search(node.id))
    return False


def layer_stacks(facts: FileFacts, project: ProjectIndex) -> list[LayerStack]:
    out: list[LayerStack] = []
    out.extend(_flax_scans(facts))
    out.extend(_lax_scans(facts))
    out.extend(_loops(facts, project))
    # Loops, nnx.scan and lax.scan bodies are often wrapped in a remat by their caller, in
    # another function or file (MaxText and EasyDeL wrap whole blocks): any remat in the file
    # or the project counts for them. `nn.scan(Block)` takes its remat at the call itself.
    elsewhere: bool | None = None
    for s in out:
        if s.kind != "nn.scan" and not s.remat:
            if elsewhere is None:
                elsewhere = file_uses_remat(facts) or project_uses_remat(project)
            s.remat = elsewhere
    return out


# ---- scans ---------------------------------------------------------------------------------------
def _flax_scans(facts: FileFacts) -> list[LayerStack]:
    out: list[LayerStack] = []
    for lift in lifts(facts, Role.LINEN_LIFT, Role.NNX_LIFT):
        length = lift.keywords.get("length")
        count = _literal_int(facts, length, lift.scope)
        if lift.api.name == "flax.linen.scan":
            axes = lift.keywords.get("variable_axes")
            value = facts.literal(axes, lift.scope) if axes is not None else None
            if not (isinstance(axes, ast.Dict) and any(
                    isinstance(k, ast.Constant) and k.value == "params"
                    and not (isinstance(v, ast.Constant) and v.value is None)
                    for k, v in zip(axes.keys, axes.values))) and not (
                    isinstance(value, dict) and value.get("params") is not None):
                continue  # parameters broadcast: a recurrence over time, not stacked layers
            target = lift.target
            remat = _wrapped_in_remat(facts, target, lift.scope)
            cls = _local_class(facts, target, lift.scope)
            if cls is not None and _body_uses_remat(facts, cls):
                remat = True
            what = ast.unparse(target) if target is not None else "the scanned module"
            out.append(LayerStack(lift.node, "nn.scan", target, what, count, _named_count(length),
                                  remat, lift.scope))
        elif lift.api.name == "flax.nnx.scan":
            fn = lift.function
            node = fn.node if fn is not None else lift.target
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if not _calls_a_parameter(node):
                continue
            remat = (fn is not None and any(_is_remat(facts, d) for d in fn.decorators)) \
                or _body_uses_remat(facts, node) \
                or _wrapped_in_remat(facts, lift.target, lift.scope)
            what = fn.name if fn is not None else "the scanned function"
            out.append(LayerStack(lift.node, "nnx.scan", None, what, count, _named_count(length),
                                  remat, lift.scope))
    return out


def _calls_a_parameter(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> bool:
    params = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args]}
    body = fn.body if isinstance(fn.body, list) else [fn.body]
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in params:
                return True
    return False


def _lax_scans(facts: FileFacts) -> list[LayerStack]:
    out: list[LayerStack] = []
    for c in facts.calls_of("jax.lax.scan"):
        body = c.arg(0, "f")
        remat = _wrapped_in_remat(facts, body, c.scope)
        fn: ast.AST | None = body if isinstance(body, ast.Lambda) else None
        if isinstance(body, ast.Name):
            value = facts.value_of(body.id, c.scope)
            if isinstance(value, (ast.FunctionDef, ast.AsyncFunctionDef)):
                fn = value
                remat = remat or any(_is_remat(facts, d) for d in value.decorator_list)
        if fn is None:
            continue
        args = fn.args  # type: ignore[attr-defined]
        params = [a.arg for a in [*args.posonlyargs, *args.args]]
        if len(params) < 2 or not _feeds_layer(facts, fn, params[1]):
            continue
        remat = remat or _body_uses_remat(facts, fn)
        count = _literal_int(facts, c.kwarg("length"), c.scope)
        what = body.id if isinstance(body, ast.Name) else "the scan body"
        out.append(LayerStack(c.node, "lax.scan", None, what, count,
                              _named_count(c.kwarg("length")), remat, c.scope))
    return out


def _feeds_layer(facts: FileFacts, fn: ast.AST, param: str) -> bool:
    """The per-step slice is a layer's parameters, run forward: ``.apply(..., slice, ...)``,
    or a module merged from it and called (``nnx.merge(graphdef, slice)(h)``). A body that only
    builds layers from it (initialisation) is not a forward pass."""
    nodes = list(own_nodes(fn)) if not isinstance(fn, ast.Lambda) else list(ast.walk(fn.body))

    def uses(node: ast.AST) -> bool:
        return any(isinstance(x, ast.Name) and x.id == param for x in ast.walk(node))

    def is_merge(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)) \
            and facts.qualify(node.func) in ("flax.nnx.merge", "flax.nnx.graph.merge") \
            and uses(node)

    merged: set[str] = set()
    for n in nodes:
        if isinstance(n, ast.Assign) and is_merge(n.value):
            merged.update(t.id for t in n.targets if isinstance(t, ast.Name))
    for n in nodes:
        if not isinstance(n, ast.Call):
            continue
        if isinstance(n.func, ast.Attribute) and n.func.attr == "apply" and \
                any(uses(a) for a in [*n.args, *(k.value for k in n.keywords)]):
            return True
        if is_merge(n.func) or (isinstance(n.func, ast.Name) and n.func.id in merged):
            return True
    return False


# ---- loops that build submodules -----------------------------------------------------------------
def _module_class(facts: FileFacts, project: ProjectIndex, scope: Scope) -> Scope | None:
    """The Linen/NNX module class whose method holds ``scope``."""
    s: Scope | None = scope
    while s is not None and s.kind != "class":
        s = s.parent
    if s is None or s.parent is None:
        return None
    ref = class_ref(facts, ast.Name(id=s.name), s.parent)
    if ref is None:
        return None
    if project.is_subclass(ref, LINEN_MODULE, facts.module) or \
            project.is_subclass(ref, NNX_MODULE, facts.module):
        return s
    return None


def _range_count(facts: FileFacts, it: ast.expr, scope: Scope) -> tuple[int | None, bool] | None:
    """``range(n)`` / ``range(a, b)``: (literal count or None, the count names layers)."""
    if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
            and scope.lookup("range") is None and 1 <= len(it.args) <= 2):
        return None
    if len(it.args) == 1:
        return _literal_int(facts, it.args[0], scope), _named_count(it.args[0])
    a, b = (_literal_int(facts, x, scope) for x in it.args)
    return (b - a if a is not None and b is not None else None), _named_count(it.args[1])


def _comprehension_of(stmt: ast.stmt, node: ast.AST,
                      memo: dict) -> ast.ListComp | ast.GeneratorExp | None:
    """The one-generator comprehension whose element holds ``node``, when it is the value of
    ``stmt`` or an argument of it: ``self.layers = [Block() for _ in range(n)]``,
    ``nnx.List([...])``, ``nn.Sequential([...])``."""
    found = memo.get(id(stmt))
    if found is None:
        found = memo[id(stmt)] = {}
        value = getattr(stmt, "value", None)
        options = [value, *(value.args if isinstance(value, ast.Call) else [])]
        for n in options:
            if isinstance(n, (ast.ListComp, ast.GeneratorExp)) and len(n.generators) == 1:
                for x in ast.walk(n.elt):
                    found.setdefault(id(x), n)
    return found.get(id(node))


def _loops(facts: FileFacts, project: ProjectIndex) -> list[LayerStack]:
    out: list[LayerStack] = []
    seen: set[int] = set()
    classes: dict[int, Scope | None] = {}
    comprehensions: dict[int, dict] = {}
    for c in facts.calls:
        scope = c.scope
        if scope.kind != "function" or c.abstract or c.api is not None \
                or not isinstance(c.node.func, (ast.Name, ast.Attribute, ast.Call)):
            continue
        key = id(scope)
        if key not in classes:
            classes[key] = _module_class(facts, project, scope)
        owner = classes[key]
        if owner is None:
            continue
        loop: ast.AST | None = None
        counted = None
        if isinstance(c.in_loop, ast.For):
            counted = _range_count(facts, c.in_loop.iter, scope)
            loop = c.in_loop
        if counted is None:
            comp = _comprehension_of(c.stmt, c.node, comprehensions)
            if comp is not None:
                counted = _range_count(facts, comp.generators[0].iter, scope)
                loop = comp
        if counted is None or loop is None or id(loop) in seen:
            continue
        func = c.node.func
        built = linen_class(facts, project, func, scope) or nnx_class(facts, project, func, scope)
        if built is None:
            continue
        seen.add(id(loop))
        count, named = counted
        remat = _wrapped_in_remat(facts, func, scope)
        if not remat and file_uses_remat(facts):  # else no body of this file has one
            cls = _local_class(facts, func if isinstance(func, ast.Name) else None, scope)
            remat = _body_uses_remat(facts, owner.node) or \
                (cls is not None and _body_uses_remat(facts, cls))
        out.append(LayerStack(loop, "loop", None, built, count, named, remat, scope))
    return out
