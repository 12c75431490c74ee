"""Calls of compiled callables: which calls of a file run a function under ``jax.jit``.

A callable is compiled when a jit site of this file produces it (``@jax.jit``,
``step = jax.jit(f)``, ``self.step = jax.jit(...)``, ``jax.jit(f)(x)``, pjit, ``nnx.jit``), or
when it is imported from a project module that exports one (``from steps import train_step``,
with ``train_step`` jitted at the top level of ``steps.py``: ``jit_sites.exported_jitted``,
recorded in the module's summary).
"""

from __future__ import annotations

import ast

from shardlint.semantics.file.facts import CallSite, FileFacts
from shardlint.semantics.file.jit_sites import calls_of

from shardlint.semantics.flow.project import ProjectIndex, project_callees


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
