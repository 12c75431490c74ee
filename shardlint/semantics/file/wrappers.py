"""In-house names that behave like known APIs: those a project declares (``[tool.shardlint]``
``jit-wrappers``, ``constraint-wrappers``, ``rules-contexts``, ``mesh-contexts``), and the jit
sites of wrappers it does not declare (:func:`jit_wrapper_sites`)."""

from __future__ import annotations

import ast
from collections.abc import Callable

from shardlint.semantics.catalog import api
from shardlint.semantics.catalog.names import dotted
from shardlint.semantics.file.facts import FileFacts, JitSite, Scope
from shardlint.semantics.file.reuse import each_statement


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


def jit_name(last: str) -> bool:
    """``ejit``, ``my_jit``, ``cjit``: the name of a callable that behaves like jax.jit."""
    return last.lower().endswith("jit") and last not in _NOT_WRAPPERS


def _known(facts: FileFacts, func: ast.expr) -> bool:
    return facts.resolve(func) is not None


def jit_wrapper_sites(facts: FileFacts, names: frozenset[str],
                      is_wrapper: Callable[[ast.expr, Scope], bool]) -> list[JitSite]:
    """Jit sites of the wrappers ``is_wrapper`` accepts (a callee that is not a known API):
    ``@wrapper``, ``@wrapper(**kw)`` and ``wrapper(f, **kw)``, taken to mean ``jax.jit``. Only
    callees whose last name is like a jit's (:func:`jit_name`) or in ``names`` are asked (the
    candidates are grouped per top-level statement and reused across keystrokes)."""
    out: list[JitSite] = []
    for decorated, calls, jitlike in each_statement(facts, "wrapper_candidates", _candidates,
                                                          local=True):
        wanted = jitlike | (names & (decorated.keys() | calls.keys())) if names else jitlike
        if not wanted:
            continue
        for last, items in decorated.items():
            if last not in wanted:
                continue
            for s, d in items:
                call = d if isinstance(d, ast.Call) else None
                parent = s.parent or facts.module_scope
                if not is_wrapper(call.func if call is not None else d, parent):
                    continue
                kws = {kw.arg: kw.value for kw in call.keywords if kw.arg} if call else {}
                out.append(JitSite(d, "jax.jit", "factory" if call is not None else "decorator",
                                   kws, None, s, s.name, parent))
        for last, items in calls.items():
            if last not in wanted:
                continue
            for c in items:
                n = c.node
                if not is_wrapper(n.func, c.scope):
                    continue
                stmt = c.stmt
                bound = stmt.targets[0].id if isinstance(stmt, ast.Assign) and stmt.value is n \
                    and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) else None
                target = n.args[0]
                out.append(JitSite(n, "jax.jit", "call",
                                   {kw.arg: kw.value for kw in n.keywords if kw.arg}, target,
                                   _function_named(facts, target, c.scope), bound, c.scope))
    out.sort(key=lambda site: (site.node.lineno, site.node.col_offset))  # type: ignore[attr-defined]
    return out


def _candidates(part) -> tuple[dict[str, list], dict[str, list], frozenset[str]]:
    """Of one top-level statement: decorators that could be a wrapper's (``@w``, ``@w(**kw)``)
    and calls that could be (``w(f, ...)``, not a known API), by the callee's last name."""
    decorated: dict[str, list] = {}
    decorator_nodes: set[int] = set()
    for _, s in part.scopes:
        if s.kind != "function":
            continue
        for d in s.decorators:
            func = d.func if isinstance(d, ast.Call) and not d.args else d
            last = _last(func)
            if last is not None:
                decorated.setdefault(last, []).append((s, d))
                decorator_nodes.add(id(d))
    calls: dict[str, list] = {}
    for c in part.calls:
        n = c.node
        if c.api is not None or not n.args or isinstance(n.args[0], ast.Starred) \
                or id(n) in decorator_nodes:
            continue
        last = _last(n.func)
        if last is not None:
            calls.setdefault(last, []).append(c)
    jitlike = frozenset(n for n in (*decorated, *calls) if jit_name(n))
    return decorated, calls, jitlike


def _last(func: ast.expr) -> str | None:
    tp = type(func)
    return func.attr if tp is ast.Attribute else func.id if tp is ast.Name else None  # type: ignore[attr-defined]


def named_jit_sites(facts: FileFacts) -> list[JitSite]:
    """:func:`jit_wrapper_sites` of the wrappers known by their name alone (no project)."""
    found = facts.derived.get("named_jit_sites")
    if found is None:
        found = facts.derived["named_jit_sites"] = jit_wrapper_sites(
            facts, frozenset(), lambda func, scope: not _known(facts, func) and _unbound(func, scope)
            and dotted(func) is not None)
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
