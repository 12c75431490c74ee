"""In-house names that behave like known APIs: those a project declares (``[tool.shardlint]``
``jit-wrappers``, ``constraint-wrappers``, ``rules-contexts``, ``mesh-contexts``), and the jit
sites of wrappers it does not declare (:func:`jit_wrapper_sites`)."""

from __future__ import annotations

import ast
from collections.abc import Callable

from shardlint.semantics import api
from shardlint.semantics.facts import FileFacts, JitSite, Scope
from shardlint.semantics.names import dotted


class Wrappers:
    """In-house names configured to behave like known APIs (``[tool.shardlint]`` wrapper keys)."""

    def __init__(self, jit: tuple[str, ...] = (), constraint: tuple[str, ...] = (),
                 rules_context: tuple[str, ...] = (), mesh_context: tuple[str, ...] = ()):
        self.table: dict[str, api.Api] = {}
        for names, target in ((jit, "jax.jit"), (constraint, "flax.linen.with_logical_constraint"),
                              (rules_context, "flax.linen.logical_axis_rules"),
                              (mesh_context, "jax.set_mesh")):
            known = api.lookup(target)
            assert known is not None
            for n in names:
                self.table[n] = known


NO_WRAPPERS = Wrappers()


# Names of external callables that are not jit wrappers although they end in "jit" (equinox's
# filter_jit takes `donate=`, not `donate_argnums`).
_NOT_WRAPPERS = frozenset({"filter_jit"})


def named_like_a_jit(func: ast.expr) -> bool:
    """``ejit``, ``my_jit``, ``utils.cjit``: a callable shardlint cannot see, named like jax.jit."""
    last = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name \
        else None  # type: ignore[attr-defined]
    return last is not None and last.lower().endswith("jit") and last not in _NOT_WRAPPERS \
        and dotted(func) is not None


def jit_wrapper_sites(facts: FileFacts, is_wrapper: Callable[[ast.expr, Scope], bool]
                      ) -> list[JitSite]:
    """Jit sites of the wrappers ``is_wrapper`` accepts (a callee that is not a known API):
    ``@wrapper``, ``@wrapper(**kw)`` and ``wrapper(f, **kw)``, taken to mean ``jax.jit``."""
    out: list[JitSite] = []
    decorators: set[int] = set()
    for s in facts.function_scopes():
        parent = s.parent or facts.module_scope
        for d in s.decorators:
            call = d if isinstance(d, ast.Call) else None
            func = call.func if call is not None else d
            if (call is not None and call.args) or facts.resolve(func) is not None \
                    or not is_wrapper(func, parent):
                continue
            decorators.add(id(d))
            kws = {kw.arg: kw.value for kw in call.keywords if kw.arg} if call is not None else {}
            out.append(JitSite(d, "jax.jit", "factory" if call is not None else "decorator", kws,
                               None, s, s.name, parent))
    for c in facts.calls:
        n = c.node
        if c.api is not None or not n.args or id(n) in decorators \
                or isinstance(n.args[0], ast.Starred) or not is_wrapper(n.func, c.scope):
            continue
        stmt = c.stmt
        bound = stmt.targets[0].id if isinstance(stmt, ast.Assign) and stmt.value is n \
            and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) else None
        target = n.args[0]
        fn = _function_named(facts, target, c.scope)
        out.append(JitSite(n, "jax.jit", "call", {kw.arg: kw.value for kw in n.keywords if kw.arg},
                           target, fn, bound, c.scope))
    return out


def named_jit_sites(facts: FileFacts) -> list[JitSite]:
    """:func:`jit_wrapper_sites` of the wrappers known by their name alone (no project)."""
    found = facts.derived.get("named_jit_sites")
    if found is None:
        found = facts.derived["named_jit_sites"] = jit_wrapper_sites(
            facts, lambda func, scope: named_like_a_jit(func) and _unbound(func, scope))
    return found  # type: ignore[return-value]


def _unbound(func: ast.expr, scope: Scope) -> bool:
    """Not a local value (a module-level name or import)."""
    parts = dotted(func)
    if parts is None:
        return False
    found = scope.lookup(parts[0])
    return found is None or found[0].kind == "module"


def _function_named(facts: FileFacts, node: ast.expr, scope: Scope) -> Scope | None:
    if not isinstance(node, ast.Name):
        return None
    found = scope.lookup(node.id)
    if found is not None:
        owner, values = found
        if values and isinstance(values[-1], (ast.FunctionDef, ast.AsyncFunctionDef)):
            return facts.scopes.get(f"{owner.qualname}.{node.id}" if owner.qualname else node.id)
    return None
