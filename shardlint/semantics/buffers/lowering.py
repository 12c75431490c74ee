"""Jit sites whose callable is only lowered to be inspected, never run.

``jax.jit(step).lower(*args).compile().cost_analysis()``, ``.lower(...).as_text()``: the step is
compiled ahead of time to read its cost, its memory or its program text, and nothing executes
it. :func:`inspected_only` answers whether every use of a jit site's callable is of that kind.
It follows the callable when it is used in place (``jax.jit(f).lower(...)``) or bound once to a
local name of a function (``step = jax.jit(f)``; ``compiled = step.lower(x).compile()``), where
every use is visible; a name bound at module or class level may be called from elsewhere, so it
is never judged inspected-only.
"""

from __future__ import annotations

import ast

from shardlint.semantics.file.facts import FileFacts, JitSite, Scope

# jitted.lower(...) -> Lowered; jitted.trace(...) -> Traced; .lower() / .compile() go on.
_STAGES = frozenset({"lower", "trace", "compile"})
# What a Traced, Lowered or Compiled object tells without running anything.
_INSPECTIONS = frozenset({
    "cost_analysis", "memory_analysis", "as_text", "compiler_ir", "jaxpr", "out_info",
    "in_avals", "args_info", "input_shardings", "output_shardings", "input_formats",
    "output_formats", "in_tree", "out_tree",
})
_MAX_DEPTH = 6


def inspected_only(facts: FileFacts, site: JitSite) -> bool:
    """Every use of the callable ``site`` produces is a lowering whose result is only inspected
    (cost, memory, text), and there is at least one such use: the compiled step never runs."""
    in_place = site.form == "call" or (site.form == "partial" and site.target is not None)
    if in_place and site.bound_name is None:
        # Used in place (`jax.jit(f).lower(x)`): that expression is its only use.
        return _inspected(facts, site.scope, _parents(facts, site.scope), site.node, 0)
    name = site.bound_name
    if name is None:
        return False
    if in_place:
        owner = site.scope
    else:
        owner = site.function.parent if site.function is not None else None
    if owner is None or owner.kind != "function" or len(owner.bindings.get(name, [])) != 1:
        return False
    return _name_inspected(facts, owner, name, 0)


def _name_inspected(facts: FileFacts, owner: Scope, name: str, depth: int) -> bool:
    """Every load of ``name`` in ``owner`` (nested functions included) is inspected only."""
    parents = _parents(facts, owner)
    uses = [n for n in parents if isinstance(n, ast.Name) and n.id == name
            and isinstance(n.ctx, ast.Load)]
    return bool(uses) and all(_inspected(facts, owner, parents, u, depth) for u in uses)


def _inspected(facts: FileFacts, owner: Scope, parents: dict[ast.AST, ast.AST],
               node: ast.expr, depth: int) -> bool:
    """``node`` (a jitted callable or one of its stages) is only lowered and inspected."""
    if depth > _MAX_DEPTH:
        return False
    parent = parents.get(node)
    if isinstance(parent, ast.Attribute) and parent.value is node:
        if parent.attr in _INSPECTIONS:
            return True
        call = parents.get(parent)
        if parent.attr in _STAGES and isinstance(call, ast.Call) and call.func is parent:
            return _inspected(facts, owner, parents, call, depth + 1)
        return False
    if isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1 \
            and isinstance(parent.targets[0], ast.Name):
        # `compiled = step.lower(x).compile()`: followed when the stage itself is not the
        # callable (a bound callable's own binding is where the uses were gathered from).
        target = parent.targets[0].id
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr in _STAGES and len(owner.bindings.get(target, [])) == 1 \
            and _name_inspected(facts, owner, target, depth + 1)
    return False


def _parents(facts: FileFacts, owner: Scope) -> dict[ast.AST, ast.AST]:
    """Child -> parent for the nodes of a scope (computed once per scope)."""
    cache = facts.derived.setdefault("lowering_parents", {})
    found = cache.get(id(owner))  # type: ignore[union-attr]
    if found is None:
        found = {}
        for node in ast.walk(owner.node):
            for child in ast.iter_child_nodes(node):
                found[child] = node
        cache[id(owner)] = found  # type: ignore[index]
    return found
