"""Is a mesh in context where a call runs? For APIs that resolve a bare ``PartitionSpec`` against
the context mesh (``jax.jit(..., out_shardings=P(...))``, ``lax.with_sharding_constraint``,
``jax.device_put``, ``jax.sharding.reshard``).

The answer is one of PROVIDED, MISSING (some path certainly runs the call without one) or
UNKNOWN (it runs where shardlint cannot see: in a lambda handed to a transform, in a method, in a
function no project code calls). A legacy ``with mesh:`` counts only for the APIs that still
honour it (``with_sharding_constraint`` and ``pjit``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from shardlint.semantics.file.bindings import enclosing
from shardlint.semantics.file.execution import execution_of
from shardlint.semantics.file.facts import MESH, MESH_SET, CallSite, FileFacts, Scope
from shardlint.semantics.flow.project import ProjectIndex
from shardlint.semantics.sharding.mesh_values import is_mesh
from shardlint.semantics.sharding.partitioning import symbol_ref
from shardlint.semantics.sharding.usage import has_mesh, plain_context

PROVIDED = "provided"
MISSING = "missing"
UNKNOWN = "unknown"


@dataclass
class MeshAt:
    state: str
    legacy: bool = False  # only a legacy `with mesh:` is around it
    where: list[CallSite] = field(default_factory=list)  # the calls that lack it
    callers: list[tuple[str, int]] = field(default_factory=list)  # (path, line) of callers lacking it


def lexical_contexts(facts: FileFacts, node: ast.AST, scope: Scope,
                     project: ProjectIndex | None = None) -> set[str]:
    """Kinds ("mesh", "legacy_mesh") of the ``with`` items of ``scope`` around ``node`` (with
    ``project``, also a legacy ``with mesh:`` of a mesh the value-flow layer knows)."""
    line = getattr(node, "lineno", 0)
    out: set[str] = set()

    def around(item) -> bool:
        stmt = item.stmt
        first = stmt.body[0].lineno if stmt.body else stmt.lineno
        return first <= line <= (stmt.end_lineno or stmt.lineno)

    for item in facts.with_items:
        if item.scope is scope and item.kind in ("mesh", "legacy_mesh") and around(item):
            out.add(item.kind)
    if project is not None:
        for item in facts.other_withs:
            if item.scope is scope and around(item) and \
                    is_mesh(facts, project, item.expr, item.scope):
                out.add("legacy_mesh")
    return out


def mesh_at(facts: FileFacts, project: ProjectIndex, call: CallSite, legacy_counts: bool) -> MeshAt:
    if call.ctx & MESH and "legacy_mesh" not in lexical_contexts(facts, call.node, call.scope):
        return MeshAt(PROVIDED)  # (entered around it, or asked for: `if not mesh.empty:`)
    kinds = lexical_contexts(facts, call.node, call.scope, project)
    if "mesh" in kinds or ("legacy_mesh" in kinds and legacy_counts):
        return MeshAt(PROVIDED)
    if project.setter_base(facts.module) & (MESH if legacy_counts else MESH_SET):
        # a global `jax.set_mesh(m)` in this program (order unknown), or a legacy
        # `thread_resources.env = ...`, which only the APIs that read the legacy mesh see
        return MeshAt(PROVIDED)
    legacy = "legacy_mesh" in kinds
    if _opaque_context(facts, project, call):
        return MeshAt(UNKNOWN, legacy)
    if execution_of(facts).in_traced_lambda(call.node):
        return MeshAt(UNKNOWN, legacy)  # runs where the transformed lambda is called
    scope = call.scope
    if scope.kind == "module":
        return MeshAt(MISSING, legacy, [call])
    if scope.kind != "function":
        return MeshAt(UNKNOWN, legacy)
    ctx = plain_context(project, facts.module, scope.qualname)
    if ctx is None:
        return MeshAt(UNKNOWN, legacy)
    if has_mesh(ctx, legacy_counts):
        return MeshAt(PROVIDED)
    return MeshAt(MISSING, legacy or has_mesh(ctx), [call],
                  callers_lacking(project, facts.module, scope.qualname, legacy_counts))


def _opaque_context(facts: FileFacts, project: ProjectIndex, call: CallSite) -> bool:
    """A ``with`` around the call that may enter a mesh shardlint does not recognise: a context
    manager of the project (``with use_mesh(cfg):``) or anything named like a mesh."""
    known = {id(w.expr) for w in facts.with_items}
    for stmt in enclosing(facts, call.scope, call.stmt):
        if not isinstance(stmt, (ast.With, ast.AsyncWith)):
            continue
        for item in stmt.items:
            expr = item.context_expr
            if id(expr) in known or is_mesh(facts, project, expr, call.scope):
                continue  # (a mesh it knows: a legacy one, which lexical_contexts counted)
            if "mesh" in ast.unparse(expr).lower():
                return True
            func = expr.func if isinstance(expr, ast.Call) else None
            if isinstance(func, (ast.Name, ast.Attribute)) and facts.resolve(func) is None:
                ref = symbol_ref(facts, func, call.scope)
                if ref is not None and project.resolve(ref, facts.module) is not None:
                    return True
    return False


def callers_lacking(project: ProjectIndex, module: str, qualname: str,
                    legacy_counts: bool = True) -> list[tuple[str, int]]:
    """Where the function (or the enclosing one whose callers decide) is called without a mesh
    (or, where ``legacy_counts`` is False, with only a legacy ``with mesh:``)."""
    parts = qualname.split(".")
    for i in range(len(parts), 0, -1):
        found = project.callers(module, ".".join(parts[:i]))
        if found:
            return [(path, line) for _, ctx, path, line in found
                    if not has_mesh(ctx, legacy_counts)]
    return []


def combine(results: list[MeshAt]) -> MeshAt:
    """Several calls of one callable: missing if any lacks it, provided if all have it."""
    if not results:
        return MeshAt(UNKNOWN)
    missing = [r for r in results if r.state == MISSING]
    if missing:
        return MeshAt(MISSING, all(r.legacy for r in missing),
                      [c for r in missing for c in r.where],
                      [c for r in missing for c in r.callers])
    if all(r.state == PROVIDED for r in results):
        return MeshAt(PROVIDED)
    return MeshAt(UNKNOWN, any(r.legacy for r in results))
