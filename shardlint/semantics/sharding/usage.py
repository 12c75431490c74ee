"""What the project as a whole does: the APIs it calls anywhere, the kinds of its meshes, signs
that it runs as several processes, and the context a plain function is called under.

Answers come from the module summaries of every project file, memoised per index.
"""

from __future__ import annotations

from shardlint.semantics.file.facts import MESH, MESH_SET
from shardlint.semantics.file.meshes import AUTO, resolve_kind
from shardlint.semantics.flow.project import ProjectIndex, program_of, project_cached

# Linen partitioning whose boxes and constraints lower to `lax.with_sharding_constraint`.
LINEN_PARTITIONING = ("flax.linen.with_logical_constraint", "flax.linen.with_logical_partitioning",
                      "flax.linen.LogicallyPartitioned", "flax.linen.partitioning.param_with_axes",
                      "flax.linen.with_partitioning", "flax.linen.Partitioned")
SHARDING_CONSTRAINT = "jax.lax.with_sharding_constraint"
# Calls that only make sense when the program runs as several processes (hosts).
MULTI_PROCESS = ("jax.distributed.initialize", "jax.process_count", "jax.process_index",
                 "jax.make_array_from_process_local_data")


@project_cached
def project_calls(project: ProjectIndex, *names: str) -> bool:
    """Some file of the project calls one of these APIs (canonical names)."""
    wanted = set(names)
    return any(wanted.intersection(s.apis) for s in project.summaries.values())


def program_calls(project: ProjectIndex, module: str, *names: str) -> bool:
    """Some file of the program ``module`` belongs to calls one of these APIs: the whole
    project for the library or application itself, only the test's, benchmark's or example's
    own files for one of those (:func:`program_of`)."""
    program = program_of(module)
    if not program:
        return project_calls(project, *names)
    return bool(set(names) & _program_apis(project, program))


@project_cached
def _program_apis(project: ProjectIndex, program: str) -> frozenset[str]:
    """Every API the modules of one test, benchmark or example call."""
    return frozenset(a for s in project.programs().get(program, ()) for a in s.apis)


def multi_process(project: ProjectIndex) -> bool:
    return project_calls(project, *MULTI_PROCESS)


@project_cached
def mesh_kinds(project: ProjectIndex, explicit_default: bool) -> frozenset[str]:
    """The axis kinds of every mesh the project builds, defaults resolved for its jax."""
    return frozenset(resolve_kind(k, explicit_default)
                     for s in project.summaries.values() for k in s.mesh_kinds)


def only_auto_meshes(project: ProjectIndex, explicit_default: bool) -> bool:
    """The project builds meshes and every one of them has Auto axes."""
    kinds = mesh_kinds(project, explicit_default)
    return bool(kinds) and kinds == {AUTO}


@project_cached
def plain_context(project: ProjectIndex, module: str, qualname: str) -> int | None:
    """:meth:`ProjectIndex.context_of` for a function reached only from module-level code and
    other plain functions. None when unknown, or when some caller is a method or a class body:
    a method's context is taken from its class's constructor calls, which says nothing about
    where the method runs (that is what the model-entry rules SHL102/SHL103 judge)."""
    if _in_class(project, module, qualname):
        return None
    key = _with_callers(project, module, qualname)
    if key is None:
        return None
    seen: set[str] = set()
    todo = [key]
    while todo:
        k = todo.pop()
        if k in seen:
            continue
        seen.add(k)
        if len(seen) > 200:
            return None
        mod, _, qual = k.partition(":")
        for caller, _, _, _ in project.callers(mod, qual):
            cmod, _, cqual = caller.partition(":")
            if cqual == "":
                continue
            if _in_class(project, cmod, cqual):
                return None
            todo.append(caller)
    return project.context_of(module, qualname)


def _with_callers(project: ProjectIndex, module: str, qualname: str) -> str | None:
    """The scope whose callers decide (a nested function runs when its enclosing one does)."""
    parts = qualname.split(".")
    for i in range(len(parts), 0, -1):
        qual = ".".join(parts[:i])
        if project.callers(module, qual):
            return f"{module}:{qual}"
    return None


def _in_class(project: ProjectIndex, module: str, qualname: str) -> bool:
    s = project.summaries.get(module)
    if s is None:
        return True  # unknown: be careful
    parts = qualname.split(".")
    for i in range(1, len(parts) + 1):
        sym = s.symbols.get(".".join(parts[:i]))
        if sym is not None and sym.kind == "class":
            return True
    return False


def has_mesh(ctx: int | None, legacy_counts: bool = True) -> bool:
    """A mesh in the context ``ctx`` (on every path there); with ``legacy_counts`` False, one
    that ``jax.jit`` and ``device_put`` read: a legacy ``with mesh:`` alone does not count."""
    return ctx is not None and bool(ctx & (MESH if legacy_counts else MESH_SET))
