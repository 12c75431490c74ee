"""SHL202 mesh-axis-mismatch."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from shardlint.rules.base import Finding, Rule, example, register
from shardlint.semantics.catalog.api import Role
from shardlint.semantics.file.facts import CallSite, MeshBinding
from shardlint.semantics.sharding.partitioning import (
    context_mesh,
    logical_names_with_rules,
    logical_specs,
    mesh_of,
    paired_meshes,
    rules_rhs,
    rules_table_nodes,
    spec_entries,
    unknown_mesh_source,
)


@register
class MeshAxisMismatch(Rule):
    code = "SHL202"
    name = "mesh-axis-mismatch"
    severity = "error"
    summary = "A PartitionSpec or rule names a mesh axis the mesh does not have, or one axis twice."
    what = """
Checks the string entries of `PartitionSpec(...)` / `P(...)` / `jax.P(...)` (including tuples of
axes inside them) and the right-hand sides of logical axis rules tables against the axis names of
the meshes the project builds with literal names (`Mesh(devices, ("data", "model"))`,
`jax.make_mesh(shape, names)`, `AbstractMesh(sizes, names)`):

* a spec inside `NamedSharding(mesh, P(...))` (or in a call that passes `mesh=`, such as
  `jax.shard_map`) is compared with that mesh only, so a file with a training and an evaluation
  mesh is judged spec by spec; a mesh made by a helper shardlint cannot see into (a library
  function) silences the check for its specs;
* a spec written inside `with jax.set_mesh(mesh):` is compared with that mesh;
* any other spec, and every rule, is compared with the axis names of all meshes of the project,
  and only when all of them are known: literal, read from the configuration by key
  (`Mesh(devices, config.mesh_axes)`: every `mesh_axes` list the project's YAML files and config
  builders write), or copied from another mesh (`Mesh(m.devices, m.axis_names)`); a parameter
  annotated `Mesh` counts only when every call of its function in the project passes a mesh
  (otherwise the caller may be outside the project, with axes of its own). Judged against axes
  read from configuration files, a finding is a warning, not an error: a run may override them.
  A test's, benchmark's or example's (`*_test.py`, `*_benchmarks.py`, `tests/` ...) specs and
  rules are compared only with the meshes that can be in context where it runs: its own and
  those of the library modules it imports (directly or through others), not a benchmark's or a
  launcher's it never runs.

It also flags a mesh axis used twice in one spec (`P("data", "data")`). `None`,
`P.UNCONSTRAINED` and entries that are not literals are skipped. Specs handed to logical-name APIs
(`nn.with_logical_constraint(x, P("batch", "embed"))`, NNX `out_sharding=`) hold logical names and
are left to SHL201; so are names that a rules table maps.
"""
    why = """
jax checks axis names only when the spec meets the mesh: `ValueError: Resource axis: modle of
P('modle',) is not found in mesh: ('data', 'model')`, or `DuplicateSpecError` for an axis used
twice. With logical rules the error surfaces only when a constraint or
`nn.logical_to_mesh_sharding` evaluates the bad rule: after the model is built, often on the
cluster. A linter catches the typo while you type it.
"""
    use_instead = """
```python
mesh = jax.make_mesh((2, 4), ("data", "model"))
sharding = NamedSharding(mesh, P("data", "model"))
rules = (("batch", "data"), ("mlp", "model"))
```
"""
    fix_safety = "No automatic fix: the intended axis is a guess."
    versions = "All jax versions with `jax.sharding` meshes."
    VALID = [
        example("""
            import jax
            from jax.sharding import Mesh, PartitionSpec as P

            def constrain(x):
                return jax.lax.with_sharding_constraint(x, P("batch"))

            def run(x, mesh: Mesh):  # called from outside the project: the caller's axes
                with jax.set_mesh(mesh):
                    return constrain(x)

            test_mesh = jax.make_mesh((1,), ("data",))
        """, title="a mesh handed in by callers outside the project: its axes are unknown"),
        example("""
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P

            mesh = jax.make_mesh((2, 4), ("data", "model"))
            a = NamedSharding(mesh, P("data", "model"))
            b = NamedSharding(mesh, jax.P(("data", "model"), None))
            c = NamedSharding(mesh, P(None, P.UNCONSTRAINED))
        """),
        example("""
            import jax
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

            train_mesh = Mesh(jax.devices(), ("data",))
            eval_mesh = Mesh(jax.devices(), ("replica",))
            eval_sharding = NamedSharding(eval_mesh, P("replica"))
        """, title="several meshes: each spec is judged against its own mesh"),
        example("""
            import jax
            from jax.sharding import Mesh, PartitionSpec as P

            def build(config):
                return Mesh(jax.devices(), config.mesh_axes)

            spec = P("fsdp", "tensor")
        """, title="a mesh whose axis names are not literal: any name may be right"),
        example("""
            import jax
            import flax.linen as nn
            from jax.sharding import PartitionSpec as P

            mesh = jax.make_mesh((8,), ("data",))
            RULES = (("batch", "data"), ("embed", None))

            class Block(nn.Module):
                @nn.compact
                def __call__(self, x):
                    return nn.with_logical_constraint(x, P("batch", "embed"))
        """, title="a PartitionSpec of logical names (SHL201 checks those)"),
        example("""
            import jax
            import mesh_helpers
            from jax.sharding import NamedSharding, PartitionSpec as P

            test_mesh = jax.make_mesh((1,), ("data",))
            mesh = mesh_helpers.create_mesh("v5e-256")   # axis names unknown to shardlint
            weights = NamedSharding(mesh, P("fsdp", "tensor"))
        """, title="a mesh from a library helper"),
        example({
            "train.py": """
                import jax
                mesh = jax.make_mesh((2, 4), ("data", "model"))
            """,
            "model.py": """
                import jax
                from jax.sharding import PartitionSpec

                def constrain(x):
                    return jax.lax.with_sharding_constraint(x, PartitionSpec("data", "model"))
            """,
        }, title="cross-file: the mesh is built in train.py"),
        example({
            "layers/embed.py": """
                import flax.linen as nn

                class Embed(nn.Module):
                    @nn.compact
                    def __call__(self, ids):
                        table = self.param("table", nn.with_logical_partitioning(
                            nn.initializers.normal(), ("vocab", "embed")), (32, 8))
                        return table[ids]
            """,
            "layers/embed_test.py": """
                import jax
                import flax.linen as nn
                from layers.embed import Embed

                RULES = (("vocab", "data"), ("embed", None))   # no mesh this test runs has 'data'

                def test_init():
                    with nn.logical_axis_rules(RULES):         # rules only: never a mesh
                        Embed().init(jax.random.key(0), jax.numpy.zeros((2,), int))
            """,
            "layers/attention_benchmarks.py": """
                import jax

                def bench():
                    with jax.set_mesh(jax.make_mesh((1,), ("model",))):
                        pass
            """,
            "launch.py": """
                import jax

                def main():
                    with jax.set_mesh(jax.make_mesh((1,), ("model",))):
                        pass
            """,
        }, title="a library test's rules table: the benchmark's and the launcher's meshes are "
                 "never in context where it runs"),
    ]
    INVALID = [
        example({
            "layers/embed.py": """
                import flax.linen as nn

                class Embed(nn.Module):
                    @nn.compact
                    def __call__(self, ids):
                        table = self.param("table", nn.with_logical_partitioning(
                            nn.initializers.normal(), ("vocab", "embed")), (32, 8))
                        return table[ids]
            """,
            "layers/embed_test.py": """
                import jax
                import flax.linen as nn
                from layers.embed import Embed

                RULES = (("vocab", "data"), ("embed", None))  # expect: SHL202

                def test_init():
                    mesh = jax.make_mesh((1,), ("model",))
                    with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
                        Embed().init(jax.random.key(0), jax.numpy.zeros((2,), int))
            """,
        }, title="a test's rules table against the test's own mesh"),
        example({
            "layers/embed_test.py": """
                import jax
                import flax.linen as nn
                from layers.sharding import run_sharded

                RULES = (("vocab", "data"), ("embed", None))  # expect: SHL202

                def test_init():
                    with nn.logical_axis_rules(RULES):
                        run_sharded()
            """,
            "layers/sharding.py": """
                import jax

                def run_sharded():
                    with jax.set_mesh(jax.make_mesh((1,), ("model",))):
                        pass
            """,
        }, title="a test's rules table against the mesh a library module it imports enters"),
        example({
            "train.py": """
                import jax
                from jax.sharding import Mesh, PartitionSpec as P

                def constrain(x):
                    return jax.lax.with_sharding_constraint(x, P("batch"))  # expect: SHL202

                def run(x, mesh: Mesh):
                    with jax.set_mesh(mesh):
                        return constrain(x)

                def main(config, x):
                    return run(x, Mesh(jax.devices(), config.mesh_axes))
            """,
            "configs/base.yml": """
                mesh_axes: ['data', 'model']
            """,
        }, title="meshes named by the configuration's `mesh_axes`, handed to a helper"),
        example("""
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P

            mesh = jax.make_mesh((2, 4), ("data", "model"))
            sharding = NamedSharding(mesh, P("modle"))  # expect: SHL202
        """),
        example("""
            import jax
            import flax.linen as nn

            mesh = jax.make_mesh((2, 4), ("data", "model"))
            rules = (("batch", "data"), ("mlp", "tensor"))  # expect: SHL202
            with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
                pass
        """, title="a rule maps to an axis the mesh lacks"),
        example("""
            import jax

            mesh = jax.make_mesh((2, 4), ("data", "model"))
            spec = jax.P("data", None, "data")  # expect: SHL202
        """, title="the same mesh axis twice"),
        example({
            "train.py": """
                import jax
                mesh = jax.make_mesh((2, 4), ("data", "model"))
            """,
            "model.py": """
                import jax
                from jax.sharding import PartitionSpec

                def constrain(x):
                    return jax.lax.with_sharding_constraint(x, PartitionSpec("batch", "model"))  # expect: SHL202
            """,
        }, title="cross-file: 'batch' is no axis of the project's mesh"),
        example("""
            import jax
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

            train_mesh = Mesh(jax.devices(), ("data",))
            eval_mesh = Mesh(jax.devices(), ("replica",))
            eval_sharding = NamedSharding(eval_mesh, P("data"))  # expect: SHL202
        """, title="several meshes: 'data' exists, but not in the mesh this spec is paired with"),
        example({
            "config.py": """
                import jax
                RULES = (("batch", "data"), ("heads", "tensor"))  # expect: SHL202
            """,
            "train.py": """
                import jax
                import flax.linen as nn
                from config import RULES

                mesh = jax.make_mesh((2, 4), ("data", "model"))
                with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
                    pass
            """,
        }, title="cross-file: a rules table imported from config.py"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        summary = project.summaries.get(facts.module)
        return Role.PARTITION_SPEC in facts.roles or bool(facts.rule_tables) or \
            bool(summary is not None and summary.constants)

    def check(self) -> Iterator[Finding]:
        # (a test's, a benchmark's or an example's meshes judge that program only)
        # (a test's, a benchmark's or an example's meshes judge that program only, with those
        # of the library modules it imports: the meshes that can be in context where it runs)
        project_axes, complete = self.project.mesh_axes(
            False, self.project.judging(self.facts.module), True)
        union = project_axes if complete and project_axes else None
        logical, trusted = logical_names_with_rules(self.project, self.facts.module)
        # With a rules table shardlint cannot read, any unpaired name may be a logical one.
        unseen_rules = self.project.rules_provider and not trusted
        paired = paired_meshes(self.facts)
        logical_calls = logical_specs(self.facts)
        for c in self.facts.calls_with_role(Role.PARTITION_SPEC):
            entries = spec_entries(self.facts, c.node, c.scope)
            if entries is None:
                continue
            yield from self._duplicates(entries)
            if c.node in logical_calls:
                continue
            target = self._target(c, paired, union)
            if target is None:
                continue
            axes, label, is_paired = target
            for entry in entries:
                for name, node in entry.names:
                    if name in axes:
                        continue
                    if not is_paired and (unseen_rules or name in logical):
                        continue
                    if axes is union and self._configured():
                        # (axes read from configuration files, which a run may override)
                        yield self.finding(node, self._message(name, axes, label) +
                                           self._unless(), severity="warning")
                    else:
                        yield self.finding(node, self._message(name, axes, label))
        if union is not None:
            yield from self._rules(union)

    def _target(self, c: CallSite, paired, union) -> tuple[set[str], str, bool] | None:
        """The axis names a spec is judged against, a label for them, and whether the spec is
        paired with a mesh (then none of its names can be logical)."""
        if c.node in paired:
            axes: set[str] = set()
            labels = []
            for expr, scope in paired[c.node]:
                mesh = mesh_of(self.facts, expr, scope)
                if mesh is None:
                    if unknown_mesh_source(self.facts, self.project, expr, scope) or union is None:
                        return None
                    return union, "any mesh of the project", True
                if mesh.axis_names is None:
                    return None
                axes.update(mesh.axis_names)
                labels.append(self._mesh_label(mesh))
            return axes, " / ".join(dict.fromkeys(labels)), True
        mesh = context_mesh(self.facts, c.node, c.scope)
        if mesh is not None:
            if mesh.axis_names is None:
                return None
            return set(mesh.axis_names), self._mesh_label(mesh) + " (the mesh in context)", False
        if union is None:
            return None
        return union, "any mesh of the project", False

    def _mesh_label(self, mesh: MeshBinding) -> str:
        return f"mesh `{mesh.name}`" if mesh.name else "the mesh"

    def _configured(self) -> bool:
        """Some mesh of the project takes its axis names from the configuration."""
        return bool(self.project.mesh_axis_keys())

    def _unless(self) -> str:
        keys = ", ".join(f"`{k}`" for k in self.project.mesh_axis_keys())
        return (f" (the project's meshes include those named by every {keys} list its "
                f"configuration files write; a run that overrides {keys} may differ)")

    def _message(self, name: str, axes: set[str], label: str) -> str:
        close = difflib.get_close_matches(name, sorted(axes), n=1, cutoff=0.75)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        have = ", ".join(f"'{a}'" for a in sorted(axes))
        return (f"'{name}' is not an axis of {label} ({have}){hint}: jax raises `ValueError: "
                f"Resource axis: {name} ... is not found in mesh` when this spec is used")

    def _duplicates(self, entries) -> Iterator[Finding]:
        seen: set[str] = set()
        for entry in entries:
            for name, node in entry.names:
                if name in seen:
                    yield self.finding(node, (
                        f"'{name}' appears more than once in this PartitionSpec: a mesh axis can "
                        f"shard only one dimension, and jax raises `DuplicateSpecError` when the "
                        f"spec is used"))
                seen.add(name)

    def _rules(self, union: set[str]) -> Iterator[Finding]:
        have = ", ".join(f"'{a}'" for a in sorted(union))
        for table, scope in rules_table_nodes(self.facts, self.project):
            for name, node in rules_rhs(self.facts, table, scope):
                if name in union:
                    continue
                close = difflib.get_close_matches(name, sorted(union), n=1, cutoff=0.75)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                msg = (f"this rule maps to mesh axis '{name}', which no mesh of the project has "
                       f"({have}){hint}: the `ValueError: Resource axis: {name} ... is not found "
                       f"in mesh` surfaces only when a constraint or `logical_to_mesh_sharding` "
                       f"uses the rule, after the model is built")
                if self._configured():
                    yield self.finding(node, msg + self._unless(), severity="warning")
                else:
                    yield self.finding(node, msg)
