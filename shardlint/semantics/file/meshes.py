"""Meshes as written: the type of their axes, their shapes, where their devices come from.

File-level answers from :class:`FileFacts` alone (the module summary records each mesh's axis
kind from here; project-wide questions live in ``semantics.usage``).

* :func:`axis_kind`: ``Auto``/``Explicit`` axes as written, or the constructor's default;
  :func:`resolve_kind` turns the default into what the project's jax does
  (``jax.make_mesh`` defaults to Explicit axes since jax 0.9.0; ``Mesh(...)`` stays Auto).
* :func:`constructions`: every mesh or device-mesh call with its shape and devices arguments.
* :func:`reaches`: whether a call of some API flows into an expression (through names).
* :func:`int_value` / :func:`literal_shape`: integers and shapes written as literals.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from shardlint.semantics.catalog import api
from shardlint.semantics.catalog.api import Role
from shardlint.semantics.file.bindings import follow
from shardlint.semantics.file.facts import FileFacts, MeshBinding, Scope

AUTO = "auto"
EXPLICIT = "explicit"
DEFAULT = "default"  # no axis_types: the constructor's default (version dependent)
MIXED = "mixed"
UNKNOWN = "unknown"

MAKE_MESH = "jax.make_mesh"
MESH = "jax.sharding.Mesh"
ABSTRACT_MESH = "jax.sharding.AbstractMesh"
CREATE_DEVICE_MESH = "jax.experimental.mesh_utils.create_device_mesh"
CREATE_HYBRID_MESH = "jax.experimental.mesh_utils.create_hybrid_device_mesh"
AXIS_TYPE = "jax.sharding.AxisType"
# jax 0.9.0 (commit 89401bd): `jax.make_mesh` without axis_types makes Explicit axes.
EXPLICIT_DEFAULT_FROM = "0.9.0"


# ---- axis types --------------------------------------------------------------------------------------
def axis_types_node(call: ast.Call) -> ast.expr | None:
    """The ``axis_types`` argument of ``Mesh``/``make_mesh``/``AbstractMesh`` (third positional)."""
    for kw in call.keywords:
        if kw.arg == "axis_types":
            return kw.value
    return call.args[2] if len(call.args) > 2 and not any(
        isinstance(a, ast.Starred) for a in call.args[:3]) else None


def axis_type_names(facts: FileFacts, node: ast.expr | None, scope: Scope) -> list[str] | None:
    """``(AxisType.Auto, AxisType.Explicit)`` -> ["Auto", "Explicit"]; ``(X,) * n`` -> ["X"]."""
    node, scope = follow(facts, node, scope)
    if node is None:
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        for side in (node.left, node.right):
            inner = axis_type_names(facts, side, scope)
            if inner is not None:
                return inner
        return None
    if isinstance(node, (ast.Tuple, ast.List)):
        out: list[str] = []
        for elt in node.elts:
            one = axis_type_names(facts, elt, scope)
            if one is None or len(one) != 1:
                return None
            out.extend(one)
        return out
    if isinstance(node, ast.Attribute):
        q = facts.qualify(node.value)
        if q is not None and api.canonical(q) == AXIS_TYPE:
            return [node.attr]
    return None


def axis_kind(facts: FileFacts, mesh: MeshBinding) -> str:
    """AUTO / EXPLICIT / MIXED as written, DEFAULT when not given, UNKNOWN when not literal."""
    if mesh.call is None:
        return UNKNOWN
    node = axis_types_node(mesh.call)
    if node is None:
        return DEFAULT if mesh.api_name in (MAKE_MESH, ABSTRACT_MESH) else AUTO
    names = axis_type_names(facts, node, mesh.scope)
    if not names:
        return UNKNOWN
    if all(n == "Explicit" for n in names):
        return EXPLICIT
    if all(n == "Auto" for n in names):
        return AUTO
    return MIXED


def resolve_kind(kind: str, explicit_default: bool) -> str:
    if kind == DEFAULT:
        return EXPLICIT if explicit_default else AUTO
    return kind


# ---- constructions -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Construction:
    """A call that makes a mesh or the device array of one."""

    call: ast.Call
    api_name: str
    scope: Scope
    shape: ast.expr | None  # the literal-or-not mesh shape argument
    devices: ast.expr | None  # the devices argument (Mesh: the device array)
    stmt: ast.stmt


def _arg(call: ast.Call, index: int, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if any(isinstance(a, ast.Starred) for a in call.args[: index + 1]):
        return None
    return call.args[index] if index < len(call.args) else None


def constructions(facts: FileFacts) -> Iterator[Construction]:
    for c in facts.calls:
        if c.api is None or c.api.role not in (Role.MESH, Role.DEVICE_MESH):
            continue
        name, n = c.api.name, c.node
        if name == MESH:
            yield Construction(n, name, c.scope, None, _arg(n, 0, "devices"), c.stmt)
        elif name == MAKE_MESH:
            yield Construction(n, name, c.scope, _arg(n, 0, "axis_shapes"), _arg(n, 99, "devices"),
                               c.stmt)
        elif name == CREATE_DEVICE_MESH:
            yield Construction(n, name, c.scope, _arg(n, 0, "mesh_shape"), _arg(n, 1, "devices"),
                               c.stmt)
        elif name == CREATE_HYBRID_MESH:
            # The per-granule shape is sized by local devices on purpose: only devices count.
            yield Construction(n, name, c.scope, None, _arg(n, 2, "devices"), c.stmt)


def reaches(facts: FileFacts, node: ast.expr | None, scope: Scope,
            hit: Callable[[ast.AST, Scope], bool],
            stop: Callable[[ast.Call], bool] = lambda c: False, depth: int = 0) -> ast.AST | None:
    """A sub-expression of ``node`` that ``hit`` accepts, following names to the values they
    certainly hold; the arguments of ``stop`` calls are not entered (a nested mesh construction
    is judged on its own), nor are lambdas."""
    if node is None or depth > 6:
        return None
    todo: list[ast.AST] = [node]
    while todo:
        n = todo.pop()
        if hit(n, scope):
            return n
        if isinstance(n, ast.Call) and stop(n):
            continue
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            value, vscope = follow(facts, n, scope)
            if value is not None and value is not n:
                found = reaches(facts, value, vscope, hit, stop, depth + 1)
                if found is not None:
                    return found
            continue
        if isinstance(n, ast.Lambda):
            continue
        todo.extend(ast.iter_child_nodes(n))
    return None


def calls_api(facts: FileFacts, *names: str) -> Callable[[ast.AST, Scope], bool]:
    """A ``hit`` for :func:`reaches`: a call of one of these APIs (canonical names)."""
    wanted = frozenset(names)

    def hit(node: ast.AST, scope: Scope) -> bool:
        if not isinstance(node, ast.Call) or not isinstance(node.func, (ast.Name, ast.Attribute)):
            return False
        known = facts.resolve(node.func)
        return known is not None and known.name in wanted

    return hit


def is_construction(facts: FileFacts) -> Callable[[ast.Call], bool]:
    """A ``stop`` for :func:`reaches`: a mesh or device-mesh call."""
    def stop(call: ast.Call) -> bool:
        known = facts.resolve(call.func) if isinstance(call.func, (ast.Name, ast.Attribute)) \
            else None
        return known is not None and known.role in (Role.MESH, Role.DEVICE_MESH)

    return stop


# ---- literal integers and shapes ---------------------------------------------------------------------
def int_value(facts: FileFacts, node: ast.expr | None, scope: Scope, depth: int = 0) -> int | None:
    """An integer written with literals, names bound to them and ``+ - * // **``."""
    if node is None or depth > 8:
        return None
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, int) and not isinstance(node.value, bool) \
            else None
    if isinstance(node, ast.Name):
        value, vscope = follow(facts, node, scope)
        return int_value(facts, value, vscope, depth + 1) if value is not None else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = int_value(facts, node.operand, scope, depth + 1)
        return -v if v is not None else None
    if isinstance(node, ast.BinOp):
        a = int_value(facts, node.left, scope, depth + 1)
        b = int_value(facts, node.right, scope, depth + 1)
        if a is None or b is None:
            return None
        op = node.op
        if isinstance(op, ast.Add):
            return a + b
        if isinstance(op, ast.Sub):
            return a - b
        if isinstance(op, ast.Mult):
            return a * b
        if isinstance(op, ast.FloorDiv) and b:
            return a // b
        if isinstance(op, ast.Pow) and 0 <= b <= 64:
            return a ** b
    return None


def literal_shape(facts: FileFacts, node: ast.expr | None, scope: Scope) -> tuple[int, ...] | None:
    """``(4, 2)``, ``[8]``, ``SHAPE`` bound to one, or a bare ``1024``; None if any entry is not
    a literal integer."""
    value, vscope = follow(facts, node, scope) if isinstance(node, ast.Name) else (node, scope)
    if value is None:
        return None
    if isinstance(value, (ast.Tuple, ast.List)):
        out = []
        for elt in value.elts:
            if isinstance(elt, ast.Starred):
                return None
            v = int_value(facts, elt, vscope)
            if v is None:
                return None
            out.append(v)
        return tuple(out)
    v = int_value(facts, value, vscope)
    return (v,) if v is not None else None
