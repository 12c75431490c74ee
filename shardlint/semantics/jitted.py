"""Calls of compiled callables: which calls of a file run a function under ``jax.jit``.

A callable is compiled when a jit site of this file produces it (``@jax.jit``,
``step = jax.jit(f)``, ``self.step = jax.jit(...)``, ``jax.jit(f)(x)``, pjit, ``nnx.jit``), or
when it is imported from a project module that exports one (``from steps import train_step``,
with ``train_step`` jitted at the top level of ``steps.py``: :func:`exported_jitted`, recorded
in the module's summary).
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from shardlint.semantics.donation import calls_of, project_callees
from shardlint.semantics.facts import CallSite, FileFacts

if TYPE_CHECKING:
    from shardlint.semantics.project import ProjectIndex


def exported_jitted(facts: FileFacts) -> list[str]:
    """Module-level names bound (once) to a compiled callable, for the project index."""
    out: set[str] = set()
    for site in facts.jit_sites:
        if site.scope is not facts.module_scope or site.api_name == "jax.pmap":
            continue
        decorated = site.form in ("decorator", "factory") or \
            (site.form == "partial" and site.target is None)
        if decorated:
            name = site.function.name if site.function is not None \
                and site.function.parent is facts.module_scope else None
        else:
            name = site.bound_name
        if name is not None and len(facts.module_scope.bindings.get(name, [])) == 1:
            out.add(name)
    return sorted(out)


def jitted_calls(facts: FileFacts, project: ProjectIndex) -> dict[ast.Call, str]:
    """Calls of compiled callables in this file -> the callee as written (for messages)."""
    key = "jitted_calls"
    found = facts.derived.get(key)
    if found is None:
        calls: dict[ast.Call, str] = {}
        for site in facts.jit_sites:
            for c in calls_of(facts, site):
                calls[c.node] = _callee(c)
        for c, summary, qual in project_callees(facts, project):
            if c.node not in calls and qual in summary.jitted:
                calls[c.node] = _callee(c)
        found = facts.derived[key] = calls
    return found  # type: ignore[return-value]


def _callee(c: CallSite) -> str:
    func = c.node.func
    return ast.unparse(func) if isinstance(func, (ast.Name, ast.Attribute)) else "the jitted call"
