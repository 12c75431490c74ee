"""SHL101 legacy-mesh-context."""

from __future__ import annotations

import ast

from shardlint.rules.base import Edit, Fix, Rule, example, register
from shardlint.semantics.api import Role
from shardlint.semantics.facts import RULES
from shardlint.semantics.mesh_values import is_mesh
from shardlint.semantics.summary import reference


@register
class LegacyMeshContext(Rule):
    code = "SHL101"
    name = "legacy-mesh-context"
    severity = "error"
    summary = "`with mesh:` no longer activates Flax constraints (flax >= 0.12.2); use `jax.set_mesh(mesh)`."
    what = """
Flags a `with` statement that enters a `jax.sharding.Mesh` object directly (`with mesh:`,
`with nn.logical_axis_rules(rules), mesh:`, `with Mesh(devices, names):`, `with self.mesh:`).
The value must be known to be a mesh through the value-flow layer: built by `Mesh(...)`,
`jax.make_mesh(...)` or `AbstractMesh(...)`, returned by a project function that returns one
(any file; a `-> Mesh` annotation counts), a parameter annotated `Mesh` (or `Mesh | None`) or one
every caller in the project passes a mesh to, an attribute of `self` that the class only sets
from a mesh, or a name the same function also hands to `NamedSharding`/`jax.set_mesh`/
`shard_map`. A variable that merely happens to be called `mesh` is not flagged.

Severity says what happens. **Error** (flax >= 0.12.2) when a Linen logical constraint or a
logically partitioned parameter is traced under the `with` -- the model initialised or applied
there, or a function called there, reaches one: each is then a no-op. **Warning** otherwise: the
statement is only deprecated (jax 0.10.1), and `pjit` and `lax.with_sharding_constraint` with a
bare `PartitionSpec` still read it. A legacy mesh entered next to `jax.set_mesh(mesh)` in the
same `with` (`with jax.set_mesh(m), m:`) only sets the legacy resource environment for code that
reads it: a warning without a fix.
"""
    why = """
Since flax 0.12.2 Flax decides whether a mesh is defined from `jax.sharding.get_abstract_mesh()`
only, which the legacy `with mesh:` does not set. Under it every `with_logical_constraint`,
`with_logical_partitioning` and `Partitioned` unbox returns its input unchanged: the whole model
lands on device 0, even though the code looks sharded. jax itself deprecated `Mesh.__enter__` in
0.10.1. (The old advice `with nn.logical_axis_rules(rules), mesh:` is exactly this pitfall.)
"""
    use_instead = """
```python
with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    params = jax.jit(model.init, out_shardings=shardings)(key, x)
```
"""
    fix_safety = """
Safe when nothing in the project reads the legacy resource environment: `jax.set_mesh(mesh)`
sets the concrete and the abstract mesh, so `jax.jit`, Flax, `pjit` and `with_sharding_constraint`
all see it. Unsafe when some module reads `pxla.thread_resources` (a helper that shards inputs from
`thread_resources.env.physical_mesh`, a `shard_map` wrapper): `jax.set_mesh` does not set that
environment, so such code silently loses its mesh after the fix. No fix next to `jax.set_mesh`.
"""
    versions = ("Error with flax >= 0.12.2 when a Linen logical constraint or partitioned "
                "parameter runs under it; a deprecation warning with jax >= 0.10.1 otherwise.")
    VALID = [
        example("""
            import jax
            mesh = jax.make_mesh((4,), ("data",))
            with jax.set_mesh(mesh):
                y = jax.jit(lambda x: x * 2)(jax.numpy.ones(4))
        """, title="the mesh entered with jax.set_mesh"),
        example("""
            import jax
            mesh = jax.make_mesh((2,), ("data",))
            with jax.set_mesh(mesh):
                pass
        """),
        example("""
            import jax
            import trimesh
            mesh = trimesh.load("bunny.obj")   # not a JAX mesh
            with mesh:
                pass
        """),
        example("""
            import jax
            from jax.sharding import Mesh
            mesh = Mesh(jax.devices(), ("data",))
            with mesh:   # fine before jax 0.10.1 and flax 0.12.2
                pass
        """, jax="0.9.0", flax="0.12.1"),
        example("""
            import jax
            def run(mesh):   # unknown type: shardlint does not guess
                with mesh:
                    pass
        """),
        example({
            "scene.py": """
                def make():
                    return open("scene.obj")   # a file, not a mesh
            """,
            "train.py": """
                import jax
                from scene import make

                mesh = make()
                with mesh:
                    pass
            """,
        }, title="a module-level name from a helper that returns no mesh"),
    ]
    INVALID = [
        example("""
            import jax
            import flax.linen as nn

            class MLP(nn.Module):
                @nn.compact
                def __call__(self, x):
                    init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
                    return nn.Dense(512, kernel_init=init)(x)

            mesh = jax.make_mesh((8,), ("data",))
            with nn.logical_axis_rules((("embed", None), ("mlp", "data"))), mesh:  # expect: SHL101
                variables = MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))
        """, title="an error: the model's partitioned params are no-ops under it"),
        example("""
            import jax
            import flax.linen as nn
            from jax.experimental import mesh_utils
            from jax.sharding import Mesh
            mesh = Mesh(mesh_utils.create_device_mesh((2, 1)), ("model", "data"))
            with nn.logical_axis_rules((("batch", "data"),)), mesh:  # expect: SHL101
                pass
        """),
        example("""
            import jax
            mesh = jax.make_mesh((4,), ("data",))
            with mesh:  # expect: SHL101
                pass
        """),
        example("""
            import jax
            from jax.sharding import Mesh

            def train(mesh: Mesh):
                with mesh:  # expect: SHL101
                    pass
        """),
        example("""
            import jax
            from jax import sharding as shd
            with shd.Mesh(jax.devices(), ("x",)):  # expect: SHL101
                pass
        """),
        example({
            "meshes.py": """
                import jax

                def make():
                    return jax.make_mesh((1,), ("data",))
            """,
            "train.py": """
                import jax
                from meshes import make

                mesh = make()
                if __name__ == "__main__":
                    with mesh:  # expect: SHL101
                        jax.jit(lambda x: x)(1)
            """,
        }, title="a module-level mesh from a helper in another file"),
    ]

    def check(self):
        versions = self.ctx.versions
        flax_noop = versions.at_least("flax", "0.12.2")
        deprecated = versions.at_least("jax", "0.10.1")
        if not (flax_noop or deprecated):
            return
        items = [w for w in self.facts.with_items if w.kind == "legacy_mesh"]
        # A mesh from a helper, `self.mesh`, a parameter: the value-flow layer decides.
        items += [w for w in self.facts.other_withs
                  if is_mesh(self.facts, self.project, w.expr, w.scope)]
        for item in sorted(items, key=lambda w: (w.expr.lineno, w.expr.col_offset)):
            text = self.text(item.expr)
            beside = self._set_mesh_beside(item)
            silenced = self._silenced(item) if flax_noop and beside is None else None
            if beside is not None:
                msg = (f"`{text}` next to `{self.text(beside)}` only sets the legacy resource "
                       f"environment (`pxla.thread_resources`), which `with mesh:` is deprecated "
                       f"for since jax 0.10.1; the mesh jax and Flax read is already set: keep it "
                       f"only while something reads that environment")
                severity, fix = "warning", None
            elif silenced is not None:
                msg = (f"`with {text}:` does not activate Flax constraints since flax 0.12.2, and "
                       f"{silenced} runs under it: every logical constraint and logically "
                       f"partitioned parameter there is a no-op (the values stay unsharded); use "
                       f"`with jax.set_mesh({text}):`")
                severity, fix = "error", self._fix(item, text)
            else:
                msg = (f"`with {text}:` is deprecated since jax 0.10.1: it sets only the legacy "
                       f"resource environment, which `pjit` and `with_sharding_constraint` still "
                       f"read but `jax.jit` and Flax do not (since flax 0.12.2); use "
                       f"`with jax.set_mesh({text}):`")
                severity, fix = "warning", self._fix(item, text)
            yield self.finding(item.expr, msg, severity=severity, fix=fix, tags=("deprecated",))

    def _set_mesh_beside(self, item):
        """The ``jax.set_mesh(...)`` item of the same ``with`` (``with jax.set_mesh(m), m:``)."""
        for other in self.facts.with_items:
            if other.stmt is item.stmt and other.kind == "mesh":
                return other.expr
        return None

    def _silenced(self, item) -> str | None:
        """What runs under the ``with`` that a legacy mesh leaves unsharded: a Linen logical
        constraint or logically partitioned parameter, directly or through the model or
        function called there (None when nothing does: then it is only deprecated)."""
        stmt = item.stmt
        first = stmt.body[0].lineno if stmt.body else stmt.lineno
        last = stmt.end_lineno or stmt.lineno
        module = self.facts.module
        for e in self.project.entries(module):
            if e.scope == item.scope.qualname and first <= e.line <= last:
                model = self.project.resolve(e.model, module)
                if model is not None and self.project.needs(model) & RULES:
                    return f"`{model.partition(':')[2]}`"
        for c in self.facts.calls:
            if c.scope is not item.scope or not (first <= c.node.lineno <= last):
                continue
            if c.api is not None and c.api.role in _LOGICAL:
                return f"`{self.text(c.node.func)}`"
            if c.api is None and isinstance(c.node.func, (ast.Name, ast.Attribute)):
                ref = reference(self.facts, c.node.func, c.scope)
                key = self.project.resolve(ref, module) if ref is not None else None
                if key is not None and self.project.needs(key) & RULES:
                    return f"`{self.text(c.node.func)}`"
        return None

    def _fix(self, item, text: str) -> Fix | None:
        expr = item.expr
        jax_name = next((local for local, q in self.facts.imports.names.items() if q == "jax"), None)
        set_mesh = next((local for local, q in self.facts.imports.names.items()
                         if q in ("jax.set_mesh", "jax.sharding.set_mesh")), None)
        call = f"{jax_name}.set_mesh" if jax_name else set_mesh
        if call is None:
            return None
        # `jax.set_mesh` does not set the legacy environment: code that reads it would lose it
        # (the project's own, or a library called under the `with` that shardlint cannot read).
        safety = "unsafe" if self.project.reads_legacy_env or self._calls_a_library(item) \
            else "safe"
        return Fix(f"Replace `{text}` with `{call}({text})`", safety,
                   (Edit(self.span(expr), f"{call}({text})"),))

    def _calls_a_library(self, item) -> bool:
        """A call under the ``with`` of a package shardlint cannot read (``es.get_corrected_
        named_sharding``): it may read the legacy environment the ``with`` sets."""
        stmt = item.stmt
        first = stmt.body[0].lineno if stmt.body else stmt.lineno
        last = stmt.end_lineno or stmt.lineno
        for c in self.facts.calls:
            if c.scope is not item.scope or not (first <= c.node.lineno <= last):
                continue
            q = c.qualified
            if q is not None and q.partition(".")[0] not in _READABLE:
                ref = reference(self.facts, c.node.func, c.scope) \
                    if isinstance(c.node.func, (ast.Name, ast.Attribute)) else None
                if ref is None or self.project.resolve(ref, self.facts.module) is None:
                    return True
        return False


_LOGICAL = (Role.LOGICAL_CONSTRAINT, Role.LOGICAL_PARTITIONING)
# Packages whose calls are known not to read the legacy environment (jax's own readers are the
# APIs that honour `with mesh:` on purpose: pjit, with_sharding_constraint).
_READABLE = frozenset({"jax", "flax", "optax", "numpy", "math", "functools", "itertools",
                       "collections", "logging", "builtins", "typing", "dataclasses"})
