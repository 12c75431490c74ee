"""SHL105 constraints-on-explicit-mesh."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from shardlint.rules.base import Edit, Finding, Fix, Related, Rule, example, register
from shardlint.semantics.file.facts import MeshBinding
from shardlint.semantics.file.meshes import (
    DEFAULT,
    EXPLICIT,
    EXPLICIT_DEFAULT_FROM,
    MAKE_MESH,
    MESH,
    axis_kind,
    axis_types_node,
    literal_shape,
)
from shardlint.semantics.flow.project import ProjectIndex
from shardlint.semantics.sharding.usage import (
    LINEN_PARTITIONING,
    SHARDING_CONSTRAINT,
    mesh_kinds,
    program_calls,
    project_calls,
)
from shardlint.source import Span

AXIS_TYPE = "jax.sharding.AxisType"
# Explicit-sharding APIs: a project using them chose Explicit axes on purpose.
_EXPLICIT_MODE = ("jax.sharding.reshard", "jax.sharding.auto_axes", "jax.sharding.explicit_axes")


@register
class ConstraintsOnExplicitMesh(Rule):
    code = "SHL105"
    name = "constraints-on-explicit-mesh"
    severity = "warning"
    summary = "A mesh with Explicit axes in a project whose Linen partitioning or constraints need Auto axes."
    what = """
Flags, in a project that uses Flax Linen partitioning (`nn.with_logical_partitioning`,
`nn.with_partitioning`, `nn.with_logical_constraint`, `nn.Partitioned`, ...) or
`jax.lax.with_sharding_constraint`:

* `jax.make_mesh(shape, names)` without `axis_types` when the project runs jax >= 0.9.0, where
  that default became Explicit axes;
* `jax.make_mesh(...)` or `Mesh(...)` whose `axis_types` are all `AxisType.Explicit`, when it
  is the project's only kind of mesh.

Not flagged: meshes with Auto (or mixed) axes, `Mesh(devices, names)` (still Auto by default),
`jax.make_mesh` without `axis_types` on jax < 0.9.0, projects with no constraints; a mesh
written Explicit beside Auto meshes or in a project that uses Explicit-mode APIs
(`jax.sharding.reshard`, `auto_axes`, `explicit_axes`): a deliberate special-purpose mesh; and
projects that use `with_sharding_constraint` together with those APIs but no Linen partitioning
(Explicit sharding chosen on purpose, constraints used as checks); a mesh of one device
(`jax.make_mesh((1, 1), ...)`: every sharding already holds there, nothing can assert); a mesh
of a test, a benchmark or an example whose own files use no constraint (it is judged by its
program, not by the library beside it).
"""
    why = """
On a mesh whose axes are all Explicit, `with_sharding_constraint` no longer moves data: it
asserts that the value already has that sharding. Linen lowers every logical constraint and
every partitioned parameter to it, so a model that worked on an Auto mesh now fails with
`AssertionError: with_sharding_constraint acts as an assert when all axes of mesh are of type
Explicit. The array sharding: P(None, None) did not match the sharding provided: P(None,
'model'). Please use jax.sharding.reshard` (reproduced, also with `out_shardings` given). Since
jax 0.9.0 this is what `jax.make_mesh((4, 2), ("model", "data"))` builds; guides written before
(the Flax NNX GSPMD guide among them) still call it an "auto-mode mesh". Raw constraints in NNX
code, as in that guide, pass while the value already has the constrained sharding and assert as
soon as it does not (reproduced on jax 0.12: a replicated batch fed to the guide's model).
"""
    use_instead = """
```python
from jax.sharding import AxisType

mesh = jax.make_mesh((4, 2), ("model", "data"), axis_types=(AxisType.Auto,) * 2)
# or Mesh(mesh_utils.create_device_mesh((4, 2)), ("model", "data")), Auto by default;
# or stay Explicit and use jax.sharding.reshard / out_sharding= instead of constraints.
```
"""
    fix_safety = """
Unsafe: adding `axis_types=(AxisType.Auto,) * n` to `jax.make_mesh` restores the semantics the
constraints were written for (they move data again instead of asserting), but it changes how
every computation on that mesh is typed and sharded, which code written for Explicit axes may
rely on. The fix spells `AxisType` with the names the file already imports (`AxisType`,
`jax.sharding.AxisType`, an alias of `jax.sharding`) and adds `from jax.sharding import
AxisType` when there is none. A mesh written with Explicit axes gets the same edit as a
display-only suggestion: it was chosen on purpose.
"""
    versions = "`jax.make_mesh` defaults to Explicit axes from jax 0.9.0 (0.8.1-0.8.2 warned); an explicit `AxisType.Explicit` mesh is flagged on any version."
    VALID = [
        example({
            "model.py": """
                import flax.linen as nn

                class MLP(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        return nn.with_logical_constraint(nn.Dense(8)(x), ("batch", "mlp"))
            """,
            "tests/attention_test.py": """
                import jax

                def test_forward():
                    mesh = jax.make_mesh((1, 1, 1, 1), ("data", "fsdp", "tensor", "expert"))
                    with jax.set_mesh(mesh):
                        pass
            """,
            "examples/nnx_gemma/train.py": """
                import jax
                from flax import nnx

                mesh = jax.make_mesh((2, 4), ("data", "model"))   # Explicit on purpose: NNX
                w = nnx.Param(jax.numpy.zeros((8, 8)), out_sharding=("data", "model"))
            """,
        }, title="a one-device test mesh; an example whose own code uses no Linen constraint",
           jax="0.10.2"),
        example("""
            import jax
            import flax.linen as nn
            from jax.sharding import AxisType

            mesh = jax.make_mesh((4, 2), ("model", "data"), axis_types=(AxisType.Auto,) * 2)
            init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        """),
        example("""
            import jax
            import flax.linen as nn
            from jax.experimental import mesh_utils
            from jax.sharding import Mesh

            mesh = Mesh(mesh_utils.create_device_mesh((4, 2)), ("model", "data"))  # Auto
            init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        """, title="jax.sharding.Mesh is Auto by default"),
        example("""
            import jax
            from flax import nnx

            mesh = jax.make_mesh((4, 2), ("model", "data"))   # Explicit, and nothing constrains
            with jax.set_mesh(mesh):
                layer = nnx.Linear(8, 8, rngs=nnx.Rngs(0),
                                   kernel_init=nnx.with_partitioning(nnx.initializers.lecun_normal(),
                                                                     (None, "model")))
        """, title="NNX eager sharding reshards on an Explicit mesh"),
        example("""
            import jax
            import flax.linen as nn

            mesh = jax.make_mesh((8,), ("data",))     # Auto by default before jax 0.9.0
            y = nn.with_logical_constraint(jax.numpy.ones(8), ("batch",))
        """, jax="0.8.0"),
        example("""
            import jax
            from jax.sharding import PartitionSpec as P

            mesh = jax.make_mesh((8,), ("data",))     # Explicit on purpose

            @jax.jit
            def step(x):
                y = jax.sharding.reshard(x, P("data"))
                return jax.lax.with_sharding_constraint(y * 2, P("data"))   # a check
        """, title="Explicit sharding used on purpose"),
        example("""
            import jax
            import flax.linen as nn
            from jax.sharding import AxisType, Mesh

            mesh = Mesh(jax.devices(), ("data",))
            # Explicit on purpose: eval_shape propagates layouts only across Explicit axes.
            probe = Mesh(mesh.devices, mesh.axis_names, axis_types=(AxisType.Explicit,))
            init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        """, title="an Explicit stand-in beside the Auto mesh"),
    ]
    INVALID = [
        example("""
            import jax
            import flax.linen as nn

            mesh = jax.make_mesh((4, 2), ("model", "data"))  # expect: SHL105
            init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        """),
        example({
            "model.py": """
                import jax

                def forward(x):
                    return jax.lax.with_sharding_constraint(x, jax.P("data", None))
            """,
            "train.py": """
                from jax import make_mesh

                MESH = make_mesh((8,), ("data",))  # expect: SHL105
            """,
        }, title="the constraint in another file; make_mesh imported by name"),
        example("""
            import jax
            import numpy as np
            from flax import linen as ln
            from jax.sharding import AxisType, Mesh

            devices = np.array(jax.devices()).reshape(4, 2)
            mesh = Mesh(devices, ("model", "data"), axis_types=(AxisType.Explicit,) * 2)  # expect: SHL105
            init = ln.with_partitioning(ln.initializers.lecun_normal(), (None, "model"))
        """, title="an explicitly Explicit Mesh"),
        example("""
            import jax
            from jax import sharding as shd
            from flax import nnx

            mesh = jax.make_mesh(  # expect: SHL105
                (2, 4),
                ("data", "model"),
            )

            class Block(nnx.Module):
                def __call__(self, x):
                    return jax.lax.with_sharding_constraint(x, shd.PartitionSpec("data", None))
        """, title="the Flax NNX GSPMD guide pattern: raw constraints in NNX code"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        return bool(facts.meshes)

    def check(self) -> Iterator[Finding]:
        p = self.project
        # (a test's, a benchmark's or an example's mesh is judged by what that program calls)
        linen = program_calls(p, self.facts.module, *LINEN_PARTITIONING)
        if not linen and (not program_calls(p, self.facts.module, SHARDING_CONSTRAINT) or
                          project_calls(p, *_EXPLICIT_MODE)):
            return
        explicit_default = self.ctx.versions.at_least("jax", EXPLICIT_DEFAULT_FROM)
        # A mesh written Explicit beside Auto meshes, or in a project using Explicit-mode APIs,
        # is a deliberate special-purpose mesh (a propagation stand-in, an expert mesh).
        chosen = project_calls(p, *_EXPLICIT_MODE) or \
            bool(mesh_kinds(p, explicit_default) - {EXPLICIT})
        uses = "Linen partitioning" if linen else "`jax.lax.with_sharding_constraint`"
        # Linen creates every partitioned value unsharded and then constrains it: it always
        # asserts. A raw constraint asserts when it would have to move data.
        fails = "the Linen constraints fail" if linen else \
            "every constraint that would move data fails"
        for m in self.facts.meshes:
            if m.call is None or m.api_name not in (MAKE_MESH, MESH):
                continue
            if self._one_device(m):
                continue  # one device: every constraint already holds, nothing can assert
            kind = axis_kind(self.facts, m)
            if kind == DEFAULT and m.api_name == MAKE_MESH and explicit_default:
                what = (f"`{self.text(m.call.func)}` without `axis_types` makes Explicit axes "
                        f"since jax {EXPLICIT_DEFAULT_FROM}")
                fix = self._fix(m, "unsafe")
            elif kind == EXPLICIT and not chosen:
                what = "This mesh has Explicit axes"
                fix = self._fix(m, "display-only")
            else:
                continue
            msg = (f"{what}, and the project uses {uses}: on an all-Explicit mesh "
                   f"`with_sharding_constraint` asserts instead of resharding (\"acts as an "
                   f"assert when all axes of mesh are of type Explicit\"), so {fails}; give it "
                   f"`axis_types=(AxisType.Auto,) * n`")
            yield self.finding(m.call, msg, fix=fix, related=self._related(p, linen))

    def _one_device(self, m: MeshBinding) -> bool:
        """``jax.make_mesh((1, 1, 1), names)``: a literal shape of ones."""
        if m.api_name != MAKE_MESH or m.call is None:
            return False
        node = m.call.args[0] if m.call.args else next(
            (k.value for k in m.call.keywords if k.arg == "axis_shapes"), None)
        shape = literal_shape(self.facts, node, m.scope) if node is not None else None
        return shape is not None and all(n == 1 for n in shape)

    def _related(self, p: ProjectIndex, linen: bool) -> tuple[Related, ...]:
        wanted = set(LINEN_PARTITIONING) if linen else {SHARDING_CONSTRAINT}
        for s in p.summaries.values():
            for sym in s.symbols.values():
                for site in sym.sites:
                    if site.api in wanted and site.needs:
                        span = Span(site.line, site.col, site.end_line, site.end_col)
                        return (Related(s.path, span, "this constraint needs Auto axes"),)
        return ()

    # ---- fix ---------------------------------------------------------------------------------------
    def _fix(self, m: MeshBinding, applicability: str) -> Fix | None:
        call = m.call
        assert call is not None
        n = self._axis_count(m)
        spelled = self._axis_type_spelling()
        if n is None or spelled is None:
            return None
        prefix, import_edit = spelled
        value = f"({prefix}.Auto,)" + (f" * {n}" if n != "1" else "")
        edits: list[Edit] = []
        existing = axis_types_node(call)
        if existing is not None:
            edits.append(Edit(self.span(existing), value))
        else:
            last = max([*call.args, *(k.value for k in call.keywords)],
                       key=lambda a: (a.end_lineno or 0, a.end_col_offset or 0), default=None)
            if last is None:
                return None
            end = self.span(last)
            edits.append(Edit(Span(end.end_line, end.end_col, end.end_line, end.end_col),
                              f", axis_types={value}"))
        if import_edit is not None:
            if applicability == "display-only":
                return None  # the name it would use does not exist in this file
            edits.insert(0, import_edit)
        return Fix(f"Give the mesh Auto axes: `axis_types={value}`", applicability, tuple(edits))

    def _axis_count(self, m: MeshBinding) -> str | None:
        if m.axis_names is not None:
            return str(len(m.axis_names))
        call = m.call
        assert call is not None
        if m.api_name == MAKE_MESH and call.args:
            shape = literal_shape(self.facts, call.args[0], m.scope)
            if shape is not None:
                return str(len(shape))
        names = call.args[1] if len(call.args) > 1 else next(
            (k.value for k in call.keywords if k.arg == "axis_names"), None)
        if isinstance(names, ast.Name):
            return f"len({names.id})"
        return None

    def _axis_type_spelling(self) -> tuple[str, Edit | None] | None:
        """How this file can name `AxisType` at module level, or the import to add."""
        local = self._module_names()
        for name, q in local.items():
            if q == AXIS_TYPE:
                return name, None
        for name, q in local.items():
            if q == "jax.sharding":
                return f"{name}.AxisType", None
        for name, q in local.items():
            if q == "jax":
                return f"{name}.sharding.AxisType", None
        if "AxisType" in self.facts.imports.names or "AxisType" in self.facts.module_scope.bindings:
            return None
        last = max((s for s in self.facts.tree.body if isinstance(s, (ast.Import, ast.ImportFrom))),
                   key=lambda s: s.lineno, default=None)
        if last is None:
            return None
        line = "from jax.sharding import AxisType"
        end = last.end_lineno or last.lineno
        if end < len(self.ctx.source.lines) and self.ctx.source.line_text(end + 1) is not None:
            return "AxisType", Edit(Span(end + 1, 0, end + 1, 0), line + "\n")
        tail = self.span(last)
        return "AxisType", Edit(Span(tail.end_line, tail.end_col, tail.end_line, tail.end_col),
                                "\n" + line)

    def _module_names(self) -> dict[str, str]:
        """Names bound by top-level imports (and module-level aliases) to what they denote."""
        out: dict[str, str] = {}
        names = self.facts.imports.names
        for s in self.facts.tree.body:
            if isinstance(s, (ast.Import, ast.ImportFrom)):
                for alias in s.names:
                    local = alias.asname or alias.name.split(".", 1)[0]
                    if local in names:
                        out[local] = names[local]
            elif isinstance(s, ast.Assign) and len(s.targets) == 1 and \
                    isinstance(s.targets[0], ast.Name) and s.targets[0].id in names:
                out[s.targets[0].id] = names[s.targets[0].id]
        return out
