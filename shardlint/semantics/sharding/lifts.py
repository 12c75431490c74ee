"""Lifted transforms: where ``nn.vmap``/``nn.scan``/``nnx.vmap``/``nnx.scan`` stack what.

A transform is applied as a call (``nn.vmap(Block, ...)``), a decorator (``@nnx.vmap(...)``,
bare ``@nnx.vmap``) or through ``functools.partial``; :func:`lifts` finds them all in one file,
with their keywords and what they lift.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from shardlint.semantics.catalog import api
from shardlint.semantics.catalog.api import Role
from shardlint.semantics.file.axis_names import NNX_SHARDING_KWARGS
from shardlint.semantics.file.facts import CallSite, FileFacts, Opaque, Scope
from shardlint.semantics.file.reuse import each_statement
from shardlint.semantics.sharding.partitioning import deref, symbol_ref
from shardlint.syntax import nodes as walk_nodes

_MAX_UNWRAP = 8


@dataclass(eq=False)
class Lift:
    """One use of a lifted transform (``nn.vmap``/``nn.scan``/``nnx.vmap``/``nnx.scan``)."""

    api: api.Api
    node: ast.expr  # where to report: the transform as spelled (``nn.vmap``, ``partial(...)``)
    keywords: dict[str, ast.expr]
    opaque_kwargs: bool  # ``**kwargs`` passed: any keyword may be set
    target: ast.expr | None  # what is lifted, when given as an expression
    function: Scope | None  # what is lifted, when it is a decorated function of this file
    scope: Scope  # where the transform is applied


def lifts(facts: FileFacts, *roles: Role) -> list[Lift]:
    """Every place in the file where a lifted transform of ``roles`` is applied to a target.

    Forms: ``nn.vmap(Target, ...)``, ``@nnx.vmap(...)``/``@nnx.vmap`` on a function,
    ``@functools.partial(nn.scan, ...)`` on a method, ``partial(nnx.vmap, ...)(f)``.
    """
    decorated = _decorator_owners(facts)
    out: list[Lift] = []
    for c in facts.calls_with_role(*roles, Role.PARTIAL):
        assert c.api is not None
        if c.api.role in roles:
            lift = _direct_lift(facts, c, decorated)
        elif c.api.role == Role.PARTIAL and c.node.args:
            inner = facts.resolve(c.node.args[0])
            lift = _partial_lift(facts, c, inner, decorated) \
                if inner is not None and inner.role in roles else None
        else:
            lift = None
        if lift is not None:
            out.append(lift)
    # A bare `@nnx.vmap` decorator is a reference, not a call.
    final = set(decorated.values())  # (a function defined again: the last definition counts)
    for bare in each_statement(facts, "bare_decorators", lambda log: _bare_decorators(facts, log),
                               local=True):
        for node, fn, known in bare:
            if known.role in roles and fn in final:
                out.append(Lift(known, node, {}, False, None, fn, fn.parent or fn))
    return out


def _bare_decorators(facts: FileFacts, statement) -> list[tuple[ast.expr, Scope, api.Api]]:
    """The known APIs a statement's functions are decorated with by name (``@nnx.vmap``)."""
    out: list[tuple[ast.expr, Scope, api.Api]] = []
    for _, fn in statement.scopes:
        if fn.kind != "function":
            continue
        for d in fn.decorators:
            if isinstance(d, (ast.Name, ast.Attribute)):
                known = facts.resolve(d)
                if known is not None:
                    out.append((d, fn, known))
    return out


def _keywords(call: ast.Call) -> tuple[dict[str, ast.expr], bool]:
    kws = {kw.arg: kw.value for kw in call.keywords if kw.arg}
    return kws, any(kw.arg is None for kw in call.keywords)


def _direct_lift(facts: FileFacts, c: CallSite, decorated: dict[ast.expr, Scope]) -> Lift | None:
    kws, opaque = _keywords(c.node)
    assert c.api is not None
    if c.node.args:
        target = c.node.args[0]
        if isinstance(target, ast.Starred):
            return None
        return Lift(c.api, c.node.func, kws, opaque, target, None, c.scope)
    if "target" in kws:
        return Lift(c.api, c.node.func, kws, opaque, kws.pop("target"), None, c.scope)
    fn = decorated.get(c.node)  # `@nnx.vmap(in_axes=0)`: a decorator factory
    if fn is not None:
        return Lift(c.api, c.node.func, kws, opaque, None, fn, c.scope)
    return None


def _partial_lift(facts: FileFacts, c: CallSite, inner: api.Api,
                  decorated: dict[ast.expr, Scope]) -> Lift | None:
    kws, opaque = _keywords(c.node)
    fn = decorated.get(c.node)
    if fn is not None:
        return Lift(inner, c.node, kws, opaque, None, fn, c.scope)
    if len(c.node.args) > 1:  # partial(nn.vmap, Target, ...)
        return Lift(inner, c.node, kws, opaque, c.node.args[1], None, c.scope)
    for outer in facts.calls:  # partial(nn.vmap, ...)(Target)
        if outer.node.func is c.node and outer.node.args:
            return Lift(inner, c.node, kws, opaque, outer.node.args[0], None, c.scope)
    return None


def _decorator_owners(facts: FileFacts) -> dict[ast.expr, Scope]:
    out: dict[ast.expr, Scope] = {}
    for s in facts.scopes.values():
        if s.kind == "function":
            for d in s.decorators:
                out[d] = s
    return out


def stacking_factories(facts: FileFacts) -> set[str]:
    """Qualnames of the functions of this file decorated with ``nnx.vmap``/``nnx.scan``
    (``@nnx.vmap(in_axes=0) def create_blocks(rngs): return Block(rngs)``): factories of
    stacked layers, built to be called by a model or a caller that brings the mesh."""
    found = facts.derived.get("stacking_factories")
    if found is None:
        found = facts.derived["stacking_factories"] = {
            lift.function.qualname for lift in lifts(facts, Role.NNX_LIFT)
            if lift.function is not None}
    return found  # type: ignore[return-value]


def lifted_ref(facts: FileFacts, lift: Lift) -> str | None:
    """The index reference of what a lift stacks: a class, a function, a decorated method."""
    if lift.function is not None:
        return f"{facts.module}:{lift.function.qualname}"
    target = unwrapped(facts, lift.target)
    if isinstance(target, (ast.Name, ast.Attribute)):
        return symbol_ref(facts, target, lift.scope)
    return None


def unwrapped(facts: FileFacts, target: ast.expr | None) -> ast.expr | None:
    """A lift's target seen through the wrappers that keep the class: ``nn.remat(Block)``,
    another lift of it (``nn.vmap(nn.remat(Block), ...)``)."""
    for _ in range(_MAX_UNWRAP):
        if isinstance(target, ast.Call) and target.args:
            known = facts.resolve(target.func)
            if known is not None and known.role in (Role.REMAT, Role.LINEN_LIFT):
                target = target.args[0]
                continue
        break
    return target


def returned_calls(facts: FileFacts, fn: Scope | ast.Lambda) -> list[ast.Call]:
    """Calls whose result a function (or lambda) returns: ``return Block(rngs)``,
    ``return a, b``, or ``block = Block(rngs); return block``."""
    if isinstance(fn, ast.Lambda):
        return _calls_in_value(facts, fn.body, None)
    node = fn.node
    out: list[ast.Call] = []
    todo = list(getattr(node, "body", []))
    while todo:
        stmt = todo.pop()
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # a nested definition returns for itself
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            out.extend(_calls_in_value(facts, stmt.value, fn))
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                todo.append(child)
            elif isinstance(child, ast.ExceptHandler):
                todo.extend(child.body)
    return out


def _calls_in_value(facts: FileFacts, node: ast.expr, scope: Scope | None) -> list[ast.Call]:
    if isinstance(node, ast.Name) and scope is not None:
        value, vscope = deref(facts, node, scope)
        return _calls_in_value(facts, value, None) if value is not None and value is not node \
            and vscope is scope else []
    if isinstance(node, ast.Call):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [c for e in node.elts for c in _calls_in_value(facts, e, scope)]
    if isinstance(node, ast.Dict):
        return [c for v in node.values for c in _calls_in_value(facts, v, scope)]
    return []


def annotation_calls(facts: FileFacts, node: ast.Call, scope: Scope) -> list[CallSite]:
    """NNX sharding annotations among a call's arguments (following names bound once):
    ``nnx.Linear(..., kernel_init=nnx.with_partitioning(init, (None, "model")))``."""
    out: list[CallSite] = []
    for a in [*node.args, *(kw.value for kw in node.keywords)]:
        value, _ = deref(facts, a, scope)
        for n in walk_nodes(value) if value is not None else ():
            c = facts.call_at(n) if isinstance(n, ast.Call) else None
            if c is not None and is_nnx_annotation(c):
                out.append(c)
    return out


def is_nnx_annotation(c: CallSite) -> bool:
    if c.api is None:
        return False
    return c.api.role == Role.NNX_PARTITIONING or (
        c.api.role == Role.NNX_PARAM and c.has_kwarg(*NNX_SHARDING_KWARGS))


def local_classes(facts: FileFacts, project, name: ast.expr, scope: Scope) -> list[str] | None:
    """The project classes (resolved keys) a local name is bound to, looking through
    ``nn.remat`` and other lifts of a class (``Block = nn.remat(Wrapper) if remat else
    Wrapper``, or set in both branches of an ``if``); None when a binding is not a class
    shardlint can name (a parameter, a value it cannot see)."""
    found = isinstance(name, ast.Name) and scope.lookup(name.id)
    if not found:
        return None
    owner, values = found
    out: list[str] = []
    todo = list(values)
    while todo:
        value = unwrapped(facts, todo.pop())
        if isinstance(value, ast.IfExp):
            todo += [value.body, value.orelse]
            continue
        if isinstance(value, ast.Name) and value.id == name.id:
            continue  # (`Block = remat(Block, ...)`: what it was)
        if not isinstance(value, (ast.Name, ast.Attribute)) or isinstance(value, Opaque):
            return None
        ref = symbol_ref(facts, value, owner)
        key = project.resolve(ref, facts.module) if ref else None
        if key is None:
            return None
        out.append(key)
    return sorted(set(out))
