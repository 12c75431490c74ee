"""SHL101 legacy-mesh-context."""

from __future__ import annotations

from shardlint.rules.base import Edit, Fix, Rule, example, register
from shardlint.semantics.mesh_values import is_mesh


@register
class LegacyMeshContext(Rule):
    code = "SHL101"
    name = "legacy-mesh-context"
    severity = "error"
    summary = "`with mesh:` no longer activates Flax constraints (flax >= 0.12.2); use `jax.set_mesh(mesh)`."
    what = """
Flags a `with` statement that enters a `jax.sharding.Mesh` object directly (`with mesh:`,
`with nn.logical_axis_rules(rules), mesh:`, `with Mesh(devices, names):`). The mesh must be
resolved to a `Mesh(...)`, `jax.make_mesh(...)` or `AbstractMesh(...)` binding, or to a parameter
annotated as a `Mesh`; a variable that merely happens to be called `mesh` is not flagged.
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
Safe: `jax.set_mesh(mesh)` sets both the concrete and the abstract mesh, so everything the
legacy context did still happens, and Flax constraints start to apply.
"""
    versions = "Error with flax >= 0.12.2 when the project uses Flax partitioning; a deprecation warning with jax >= 0.10.1 otherwise."
    VALID = [
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
    ]
    INVALID = [
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
    ]

    def check(self):
        versions = self.ctx.versions
        flax_noop = versions.at_least("flax", "0.12.2")
        deprecated = versions.at_least("jax", "0.10.1")
        if not (flax_noop or deprecated):
            return
        uses_flax_constraints = flax_noop and self.facts.uses_flax
        items = [w for w in self.facts.with_items if w.kind == "legacy_mesh"]
        # A mesh from a helper, `self.mesh`, a parameter: the value-flow layer decides.
        items += [w for w in self.facts.other_withs
                  if is_mesh(self.facts, self.project, w.expr, w.scope)]
        for item in sorted(items, key=lambda w: (w.expr.lineno, w.expr.col_offset)):
            text = self.text(item.expr)
            if flax_noop and uses_flax_constraints:
                msg = (f"`with {text}:` does not activate Flax constraints since flax 0.12.2: "
                       f"under it every logical constraint and partitioned parameter is a "
                       f"no-op; use `with jax.set_mesh({text}):`")
                severity = "error"
            else:
                msg = (f"`with {text}:` is deprecated since jax 0.10.1 and does not set the "
                       f"abstract mesh Flax reads; use `with jax.set_mesh({text}):`")
                severity = "warning"
            yield self.finding(item.expr, msg, severity=severity, fix=self._fix(item.expr, text),
                               tags=("deprecated",))

    def _fix(self, expr, text: str) -> Fix | None:
        jax_name = next((local for local, q in self.facts.imports.names.items() if q == "jax"), None)
        set_mesh = next((local for local, q in self.facts.imports.names.items()
                         if q in ("jax.set_mesh", "jax.sharding.set_mesh")), None)
        call = f"{jax_name}.set_mesh" if jax_name else set_mesh
        if call is None:
            return None
        return Fix(f"Replace `{text}` with `{call}({text})`", "safe",
                   (Edit(self.span(expr), f"{call}({text})"),))
