"""Host-to-device copies made inside a loop whose result is fed to a compiled call.

A *conversion* is ``jnp.asarray(x)`` / ``jnp.array(x)`` without ``device=``/``out_sharding=``,
``jax.device_put(x)`` without a target, or ``jax.tree.map(jnp.asarray, batch)``: it places the
whole value on the default device, uncommitted. :func:`loop_transfers` finds the conversions in
the body of a ``for``/``while`` loop that runs eagerly (not under a trace) whose result reaches a
call of a compiled function in the same loop -- as (part of) an argument, or through names bound
by plain assignments in between (``batch = {"x": jnp.asarray(b)}; step(state, batch)``).

Not conversions: a literal (``jnp.asarray(0.1)``), arithmetic on loop counters
(``jnp.array(step + 1)`` in ``for step in range(n)``), a value that is already on a device (the
result of a ``jax``/``jnp`` call, of a compiled call, or of a function of this file whose every
return is one of those), a placement with a sharding.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from shardlint.semantics.buffers.jitted import jitted_calls
from shardlint.semantics.catalog.names import is_unknown, literal_or_unknown
from shardlint.semantics.file.dataflow import own_nodes
from shardlint.semantics.file.execution import execution_of, function_named
from shardlint.semantics.file.facts import CallSite, FileFacts, Opaque, Scope

if TYPE_CHECKING:
    from shardlint.semantics.flow.project import ProjectIndex

ARRAY_CONVERTERS = ("jax.numpy.asarray", "jax.numpy.array")
PUT = "jax.device_put"
TREE_MAPS = ("jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map")
_HOST_BUILTINS = frozenset({"float", "int", "bool", "len", "range"})


@dataclass
class LoopTransfer:
    convert: CallSite  # the conversion
    jit_call: ast.Call  # the compiled call it feeds
    callee: str  # the compiled callable as written
    via: str | None  # the local name that carries it, None when passed directly


def _conversion(facts: FileFacts, c: CallSite) -> ast.expr | None:
    """The value a call copies to the default device unsharded, or None."""
    q = c.qualified
    node = c.node
    if q in ARRAY_CONVERTERS:
        if not node.args or c.has_kwarg("device", "out_sharding"):
            return None
        return node.args[0]
    if q == PUT:
        if len(node.args) != 1 or c.has_kwarg("device"):
            return None
        return node.args[0]
    if q in TREE_MAPS and len(node.args) == 2 and not node.keywords:
        fn = node.args[0]
        fq = facts.qualify(fn) if isinstance(fn, (ast.Name, ast.Attribute)) else None
        if fq in ARRAY_CONVERTERS or fq == PUT:
            return node.args[1]
    return None


def _counters(facts: FileFacts, scope: Scope) -> set[str]:
    """Loop variables that only take small integers or literals: ``for step in range(n)``,
    ``for i, b in enumerate(...)`` (``i``), ``for c, v in zip(XS, YS)`` over literal tables."""
    out: set[str] = set()
    consts = facts.consts_for(scope)

    def literal(node: ast.expr) -> bool:
        return not is_unknown(literal_or_unknown(node, consts)) or (
            isinstance(node, ast.Set) and all(isinstance(e, ast.Constant) for e in node.elts))

    def names(target: ast.expr) -> list[str]:
        return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]

    for n in own_nodes(scope.node):
        if not isinstance(n, (ast.For, ast.AsyncFor)):
            continue
        it, target = n.iter, n.target
        if literal(it):
            out.update(names(target))
        elif isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and not it.keywords:
            fn = it.func.id
            if fn == "range" and isinstance(target, ast.Name):
                out.add(target.id)
            elif fn == "enumerate" and isinstance(target, ast.Tuple) and target.elts:
                out.update(names(target.elts[0]))
                if it.args and literal(it.args[0]):
                    out.update(names(target))
            elif fn == "zip" and it.args and all(literal(a) for a in it.args):
                out.update(names(target))
    return out


def _scalar_expression(expr: ast.expr, counters: set[str]) -> bool:
    """``step``, ``step + 10``, ``-i``: arithmetic on loop counters and constants."""
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Name):
        return expr.id in counters
    if isinstance(expr, ast.BinOp):
        return _scalar_expression(expr.left, counters) and _scalar_expression(expr.right, counters)
    if isinstance(expr, ast.UnaryOp):
        return _scalar_expression(expr.operand, counters)
    return False


_DEPTH = 8  # (a name, a helper it calls, the name that helper returns, ...)
# Methods of a device array that hand back host values; every other method (`astype`,
# `reshape`, `.at[i].set`) gives a device array.
_HOST_METHODS = frozenset({"tolist", "item", "tobytes", "copy_to_host_async", "__array__"})


def _on_device(facts: FileFacts, expr: ast.expr, scope: Scope, jitted: dict,
               depth: int = 0, assuming: frozenset = frozenset()) -> bool:
    """A literal, a host scalar, or a value already on a device: nothing worth a warning.
    ``assuming``: names (with the scope binding them) being judged further up, taken as on a
    device (``x = jnp.zeros(n); x = x.at[0].set(1)``: every other value of ``x`` decides)."""
    if not is_unknown(literal_or_unknown(expr, facts.consts_for(scope))):
        return True  # a literal: a scalar or a small table
    if depth == 0 and isinstance(expr, (ast.Name, ast.BinOp, ast.UnaryOp)):
        key = f"loop_counters:{scope.qualname}"
        counters = facts.derived.get(key)
        if counters is None:
            counters = facts.derived[key] = _counters(facts, scope)
        if _scalar_expression(expr, counters):  # type: ignore[arg-type]
            return True
    if isinstance(expr, ast.BinOp):
        # `jnp.asarray(b) * 2`: arithmetic with a device array is a device array (a literal
        # operand alone says nothing: `batch * 2` of a host batch stays on the host).
        return any(isinstance(side, ast.Call) and not (
            isinstance(side.func, ast.Name) and side.func.id in _HOST_BUILTINS)
            and _on_device(facts, side, scope, jitted, depth + 1, assuming)
            for side in (expr.left, expr.right))
    if isinstance(expr, ast.Call):
        if expr in jitted:
            return True
        func = expr.func
        if isinstance(func, ast.Name) and func.id in _HOST_BUILTINS \
                and scope.lookup(func.id) is None:
            return True
        q = facts.qualify(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
        if q is not None and q.split(".", 1)[0] == "jax":
            return True
        if q is None and isinstance(func, ast.Attribute) and func.attr not in _HOST_METHODS \
                and depth < _DEPTH:
            # A method of a device array (`jnp.zeros(n).astype(t)`, `x.at[i].set(v)`).
            base = func.value
            while isinstance(base, (ast.Subscript, ast.Attribute)) and (
                    isinstance(base, ast.Subscript) or base.attr == "at"):
                base = base.value
            if isinstance(base, (ast.Call, ast.Name)) and \
                    _on_device(facts, base, scope, jitted, depth + 1, assuming):
                return True
        # A helper of this file whose every return is on a device (`def shard(b): return
        # jax.device_put(b, sharding)`): converting its result again moves nothing.
        helper = function_named(facts, func, scope) if depth < _DEPTH else None
        return helper is not None and bool(helper.returns) and all(
            _on_device(facts, r, helper, jitted, depth + 1, assuming) for r in helper.returns)
    if isinstance(expr, ast.Name) and depth < _DEPTH:
        found = scope.lookup(expr.id)
        if found is None:
            return False
        owner, values = found
        key = (id(owner), expr.id)
        if key in assuming:
            return True
        assuming = assuming | {key}
        # `a, b = helper(...)`: the binding is opaque; the function's assignments say which
        # part of which call it is. Every opaque binding must be one of those.
        unpacked = [a for a in owner.assigned.get(expr.id, ())
                    if a.index and isinstance(a.value, ast.Call)]
        if sum(isinstance(v, Opaque) for v in values) != len(unpacked):
            return False
        return bool(values) and all(
            isinstance(v, ast.expr) and not isinstance(v, ast.Name) and (
                isinstance(v, Opaque)
                or _on_device(facts, v, owner, jitted, depth + 1, assuming)) for v in values) \
            and all(_part_on_device(facts, a.value, a.index, owner, jitted, depth + 1, assuming)
                    for a in unpacked)
    return False


def _part_on_device(facts: FileFacts, expr: ast.expr, index: tuple[int, ...], scope: Scope,
                    jitted: dict, depth: int, assuming: frozenset) -> bool:
    """Part ``index`` of the value of ``expr`` (``c`` of ``a, (b, c) = expr``: (1, 1)) is on a
    device: the element of a tuple a helper of this file returns, or any part of a value that is
    on a device as a whole."""
    if not index:
        return _on_device(facts, expr, scope, jitted, depth, assuming)
    if depth >= _DEPTH:
        return False
    if isinstance(expr, (ast.Tuple, ast.List)):
        i = index[0]
        if i >= len(expr.elts) or any(isinstance(e, ast.Starred) for e in expr.elts[:i + 1]):
            return False
        return _part_on_device(facts, expr.elts[i], index[1:], scope, jitted, depth, assuming)
    if isinstance(expr, ast.Call):
        helper = function_named(facts, expr.func, scope)
        if helper is not None:
            return bool(helper.returns) and all(
                _part_on_device(facts, r, index, helper, jitted, depth + 1, assuming)
                for r in helper.returns)
    return _on_device(facts, expr, scope, jitted, depth + 1, assuming)


def _contains(root: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(root))


def _names_loaded(root: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(root) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _bound_names(stmt: ast.stmt, node: ast.AST) -> list[str]:
    """The names an assignment binds to a value holding ``node`` (``x = f(node)``,
    ``x, y = node, other`` -> ["x"])."""
    if not isinstance(stmt, (ast.Assign, ast.AnnAssign)) or stmt.value is None:
        return []
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    out: list[str] = []
    for t in targets:
        if isinstance(t, ast.Name):
            if _contains(stmt.value, node):
                out.append(t.id)
        elif isinstance(t, (ast.Tuple, ast.List)) \
                and isinstance(stmt.value, (ast.Tuple, ast.List)) \
                and len(t.elts) == len(stmt.value.elts):
            for tt, vv in zip(t.elts, stmt.value.elts):
                if isinstance(tt, ast.Name) and _contains(vv, node):
                    out.append(tt.id)
    return out


def _within(loop: ast.AST, node: ast.AST) -> bool:
    start = (getattr(loop, "lineno", 0), getattr(loop, "col_offset", 0))
    end = (getattr(loop, "end_lineno", 0), getattr(loop, "end_col_offset", 0))
    pos = (getattr(node, "lineno", 0), getattr(node, "col_offset", 0))
    return start <= pos <= end


def loop_transfers(facts: FileFacts, project: ProjectIndex) -> list[LoopTransfer]:
    """Unsharded conversions in eager loops that feed a jitted call of the same loop (SHL305;
    SHL304 leaves these sites to it). Computed once per file."""
    found = facts.derived.get("loop_transfers")
    if found is None:
        found = facts.derived["loop_transfers"] = _loop_transfers(facts, project)
    return found  # type: ignore[return-value]


def _loop_transfers(facts: FileFacts, project: ProjectIndex) -> list[LoopTransfer]:
    candidates = [(c, v) for c in facts.calls if c.in_loop is not None and c.qualified is not None
                  and (v := _conversion(facts, c)) is not None]
    if not candidates:
        return []
    jitted = jitted_calls(facts, project)
    if not jitted:
        return []
    execution = execution_of(facts)
    calls = [c for c in facts.calls if c.node in jitted]
    out: list[LoopTransfer] = []
    for c, value in candidates:
        if execution.is_traced(c) or _on_device(facts, value, c.scope, jitted):
            continue
        loop = c.in_loop
        assert loop is not None
        found: LoopTransfer | None = None
        for j in calls:
            if j.scope is not c.scope or not _within(loop, j.node):
                continue
            if _contains(j.node, c.node) and j.node is not c.node:
                found = LoopTransfer(c, j.node, jitted[j.node], None)
                break
        if found is None:
            names = _bound_names(c.stmt, c.node)
            if names:
                after = (c.stmt.end_lineno or c.stmt.lineno, c.stmt.end_col_offset or 0)
                for j in calls:
                    if j.scope is not c.scope or not _within(loop, j.node):
                        continue
                    if (j.node.lineno, j.node.col_offset) < after:
                        continue
                    args = ast.Tuple(elts=[*j.node.args, *(k.value for k in j.node.keywords)])
                    hit = next((n for n in names if n in _names_loaded(args)), None)
                    if hit is not None:
                        found = LoopTransfer(c, j.node, jitted[j.node], hit)
                        break
        if found is not None:
            out.append(found)
    return out
