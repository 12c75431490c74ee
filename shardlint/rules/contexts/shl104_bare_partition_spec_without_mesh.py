"""SHL104 bare-partition-spec-without-mesh."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from shardlint.rules._context import GUARDED_LIBRARY
from shardlint.rules.base import Finding, Rule, example, register
from shardlint.semantics.catalog.api import SET_MESH_ADDED, Role
from shardlint.semantics.file.execution import compiled_function
from shardlint.semantics.file.facts import CallSite, JitSite
from shardlint.semantics.file.jit_sites import LINEN_JIT, calls_of, jit_keywords
from shardlint.semantics.flow.project import ProjectIndex
from shardlint.semantics.sharding.mesh_context import (
    MISSING,
    PROVIDED,
    UNKNOWN,
    MeshAt,
    callers_lacking,
    combine,
    mesh_at,
)
from shardlint.semantics.sharding.placement import bare_specs
from shardlint.semantics.sharding.usage import has_mesh, plain_context
from shardlint.source import Span

PJIT = "jax.experimental.pjit.pjit"
_JIT_SPEC_KEYWORDS = ("in_shardings", "out_shardings", "in_axis_resources", "out_axis_resources")
# The API, the argument holding the sharding (position, keyword), and whether a legacy
# `with mesh:` satisfies it: never for `device_put` and `reshard` (run: a bare spec under only
# `with mesh:` raises on jax 0.4.30 -- which takes no PartitionSpec there at all -- 0.6.2, 0.8.1,
# 0.10.2 and 0.12), nor for `jax.jit` (0.4.7's and 0.4.34's sources raise for one; 0.6-0.7 read
# only the concrete mesh `use_mesh` / `jax.set_mesh` set).
_PLACERS = {
    "jax.lax.with_sharding_constraint": (1, "shardings", True),
    "jax.device_put": (1, "device", False),
    "jax.sharding.reshard": (1, "out_shardings", False),
}


# jaxopt's distributed example: the legacy environment set globally, then a jit of bare specs
# (`{jit}`): pjit reads that mesh, `jax.jit` does not (an example, and a test of both).
GLOBAL_LEGACY_ENV = """
import jax
import numpy as np
from jax.experimental.pjit import pjit
from jax.sharding import Mesh, PartitionSpec

def setup_data_parallel_mesh():
    mesh = Mesh(np.asarray(jax.devices(), dtype=object), ["data"])
    jax.experimental.maps.thread_resources.env = (
        jax.experimental.maps.ResourceEnv(physical_mesh=mesh, loops=()))

def main(batches):
    setup_data_parallel_mesh()
    step = {jit}(lambda b: b * 2, in_shardings=(PartitionSpec("data"),), out_shardings=None)
    for b in batches:
        step(b)

if __name__ == "__main__":
    main([np.ones((8, 4))])
"""


@register
class BarePartitionSpecWithoutMesh(Rule):
    code = "SHL104"
    name = "bare-partition-spec-without-mesh"
    severity = "error"
    summary = "A bare `PartitionSpec` is used where no mesh is in context: jax raises at the call."
    what = """
Flags a `PartitionSpec` (`P(...)`, `jax.P(...)`, or the specs `nn.logical_to_mesh(...)` /
`nn.get_partition_spec(...)` return, written in place, inside a tuple or dict, or through a name
bound to them) that is handed to

* `jax.jit` / `pjit` / `nnx.jit` as `in_shardings` / `out_shardings` (judged where the jitted
  function is called or lowered, since that is when jax reads them),
* `jax.lax.with_sharding_constraint(x, spec)`, `jax.device_put(x, spec)` or
  `jax.sharding.reshard(x, spec)`,

when no mesh is in context there: no `with jax.set_mesh(mesh):` around the call, around every
caller in the project, or anywhere as a global `jax.set_mesh(mesh)` statement. A legacy
`with mesh:` counts for `with_sharding_constraint` and `pjit`, which still honour it, but not for
`jax.jit`, `device_put` or `reshard`; so does the legacy environment set globally
(`maps.thread_resources.env = maps.ResourceEnv(physical_mesh=mesh, loops=())`, old jax code).

The finding is an error where the call certainly runs without a mesh (module-level code, or a
function whose every caller in the project lacks one). Inside a function whose callers are not
in the project it is an info, and only when the project never enters a mesh anywhere. Sites in
methods (model code) are left to SHL103, which judges them where the model runs.

A constraint the code around it guards (`if nn.get_logical_axis_rules():`, `if not
jax.sharding.get_abstract_mesh().empty:`, a `..._mesh_defined()` check) or enters its contexts
for (`with nn.logical_axis_rules(...):` inside the function) needs nothing from its callers: a
library that applies its constraints only where its caller brings them. So does code past an
early return (or raise) unless a mesh is there: `if not global_mesh_defined(): return x`, where
the test asks for the mesh itself (`pxla.thread_resources.env.physical_mesh.empty`,
`jax.sharding.get_abstract_mesh().empty`) or calls a function of the file whose body asks.
"""
    why = """
A `PartitionSpec` names mesh axes but not the mesh; jax takes the mesh from the context and
raises when there is none: `RuntimeError: jit requires a non-empty mesh in context if you are
passing PartitionSpecs to out_shardings` (reproduced, also under a legacy `with mesh:`), the
same for `with_sharding_constraint` and `pjit` without a mesh, and `ValueError: Please set a mesh
via jax.set_mesh if a PartitionSpec is passed to device_put`. The classic case is
`nn.logical_to_mesh(...)`, which returns PartitionSpecs, passed as `out_shardings` where
`nn.logical_to_mesh_sharding(...)` (NamedShardings) was meant. The error comes late: after the
model was built, often on the cluster.
"""
    use_instead = """
```python
shardings = nn.logical_to_mesh_sharding(specs, mesh, rules)     # NamedShardings carry the mesh
params = jax.jit(model.init, out_shardings=shardings)(key, x)
# or keep the PartitionSpecs and enter the mesh where the function runs:
with jax.set_mesh(mesh):
    params = jax.jit(model.init, out_shardings=nn.logical_to_mesh(specs, rules))(key, x)
```
"""
    fix_safety = "No automatic fix: whether to wrap the call in `jax.set_mesh` or to build NamedShardings is a design choice."
    versions = ("All versions: a bare PartitionSpec always needs a context mesh. A legacy "
                "`with mesh:` provides it to `pjit` and `with_sharding_constraint` only, at "
                "every release: never to `jax.jit`, `device_put` or `reshard`.")
    VALID = [
        example(GLOBAL_LEGACY_ENV.replace("{jit}", "pjit"), jax="0.4.30",
                title="pjit under a legacy resource environment set globally"),
        example(GUARDED_LIBRARY,
                title="a library that applies its constraints only where its caller brings the contexts"),
        example("""
            import jax
            from jax.sharding import PartitionSpec as P

            mesh = jax.make_mesh((8,), ("data",))
            step = jax.jit(lambda x: x * 2, in_shardings=P("data"), out_shardings=P("data"))
            with jax.set_mesh(mesh):
                y = step(jax.numpy.ones((8, 4)))      # the specs are read here, under the mesh
        """, title="jitted outside, called under jax.set_mesh"),
        example("""
            import jax
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

            mesh = Mesh(jax.devices(), ("data",))
            x = jax.device_put(jax.numpy.ones((8, 4)), NamedSharding(mesh, P("data")))
            y = jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P()))
        """, title="NamedShardings carry their mesh (eager with_sharding_constraint is fine)"),
        example("""
            import jax
            from jax.sharding import Mesh, PartitionSpec as P

            mesh = Mesh(jax.devices(), ("data",))
            with mesh:   # legacy, but with_sharding_constraint still honours it (SHL101 reports it)
                y = jax.jit(lambda x: jax.lax.with_sharding_constraint(x, P("data")))(jax.numpy.ones(8))
        """, title="with_sharding_constraint under a legacy `with mesh:`"),
        example("""
            import jax
            from jax.sharding import PartitionSpec as P

            def shard_batch(batch):      # a library helper: callers bring the mesh
                return jax.lax.with_sharding_constraint(batch, P("data"))
        """, title="a helper whose callers are outside the project"),
        example("""
            import jax
            from jax.sharding import PartitionSpec as P

            def train(batch):
                return jax.lax.with_sharding_constraint(batch, P("data"))

            jax.set_mesh(jax.make_mesh((8,), ("data",)))   # global mesh for the whole program
            train(jax.numpy.ones((8, 4)))
        """, title="a global jax.set_mesh statement"),
        example("""
            import jax
            import flax.linen as nn
            from jax.sharding import PartitionSpec as P

            class Member(nn.Module):
                @nn.compact
                def __call__(self, x):
                    y = nn.Dense(64)(x)
                    return jax.lax.with_sharding_constraint(y, P("data", None))

            Ensemble = nn.vmap(Member, variable_axes={"params": 0}, split_rngs={"params": True},
                               in_axes=None, axis_size=4)      # no spmd_axis_name: fine too
            with jax.set_mesh(jax.make_mesh((8,), ("data",))):
                variables = Ensemble().init(jax.random.key(0), jax.numpy.ones((8, 16)))
        """, title="a constraint inside nn.vmap, run under jax.set_mesh"),
        example("""
            import jax
            import flax.linen as nn
            from jax.sharding import PartitionSpec as P

            class Model(nn.Module):
                @nn.compact
                def __call__(self, x):
                    return jax.lax.with_sharding_constraint(nn.Dense(8)(x), P("data", None))

            mesh = jax.make_mesh((2,), ("data",))   # built, never entered
            variables = Model().init(jax.random.key(0), jax.numpy.ones((8, 4)))  # SHL103's
        """, title="a bare spec in model code run with no mesh: SHL103 reports where it runs"),
        example({
            "placement.py": """
                import jax
                from jax.sharding import PartitionSpec as P

                def place(x):
                    return jax.lax.with_sharding_constraint(x, P("data"))
            """,
            "train.py": """
                import jax
                from jax.sharding import Mesh
                from placement import place

                def main(x):
                    with Mesh(jax.devices(), ("data",)):   # with_sharding_constraint reads it
                        return jax.jit(place)(x)

                if __name__ == "__main__":
                    main(jax.numpy.ones((8, 4)))
            """,
        }, title="a helper's with_sharding_constraint under a legacy `with mesh:` in another "
                 "module (SHL101 reports the `with`)"),
        example("""
            import jax
            from jax.interpreters import pxla
            from jax.sharding import PartitionSpec as P

            def partitioning_active():
                env = pxla.thread_resources.env
                return env.physical_mesh.devices.shape != ()

            def shard_activations(x):
                if jax.devices()[0].platform == "cpu" or not partitioning_active():
                    return x                  # no mesh: leave it alone
                return jax.lax.with_sharding_constraint(x, P("data", None))

            y = shard_activations(jax.numpy.ones((8, 4)))   # a no-op here, without a mesh
        """, title="an early return unless a project function finds a mesh in context"),
        example("""
            import jax
            from jax.interpreters import pxla
            from jax.sharding import PartitionSpec as P

            def shard_batch(batch):
                if pxla.thread_resources.env.physical_mesh.empty:
                    return batch
                batch = jax.lax.with_sharding_constraint(batch, P("data"))
                return batch * 2

            out = shard_batch(jax.numpy.ones((8, 4)))
        """, title="an early return while the legacy mesh is empty, tested inline"),
        example("""
            import jax
            from jax.sharding import PartitionSpec as P

            def _mesh_ready():
                return not jax.sharding.get_abstract_mesh().empty

            def place(x):
                if not _mesh_ready():
                    raise ValueError("enter jax.set_mesh(mesh) first")
                return jax.device_put(x, P("data"))

            place(jax.numpy.ones((8, 4)))
        """, title="a raise unless the abstract mesh (asked through a helper) is set"),
    ]
    INVALID = [
        example("""
            import jax
            from jax.sharding import PartitionSpec as P

            def on_accelerator():
                return jax.devices()[0].platform != "cpu"

            def shard_activations(x):
                if not on_accelerator():
                    return x                  # asks for the platform, not for a mesh
                return jax.lax.with_sharding_constraint(x, P("data", None))  # expect: SHL104

            y = shard_activations(jax.numpy.ones((8, 4)))
        """, title="an early return that tests something other than the mesh"),
        example("""
            import jax
            import flax.linen as nn

            class MLP(nn.Module):
                @nn.compact
                def __call__(self, x):
                    return nn.Dense(16, kernel_init=nn.with_logical_partitioning(
                        nn.initializers.lecun_normal(), ("embed", "mlp")))(x)

            model, rules = MLP(), (("embed", None), ("mlp", "model"))
            key, x = jax.random.key(0), jax.numpy.ones((8, 4))
            abstract = jax.eval_shape(model.init, key, x)
            pspecs = nn.logical_to_mesh(nn.get_partition_spec(abstract), rules)
            params = jax.jit(model.init, out_shardings=pspecs)(key, x)  # expect: SHL104
        """, title="nn.logical_to_mesh returns PartitionSpecs, not shardings"),
        example("""
            import jax
            from jax.sharding import Mesh
            from jax.sharding import PartitionSpec as P

            mesh = Mesh(jax.devices(), ("data",))

            @jax.jit(in_shardings=P("data"))  # expect: SHL104
            def step(x):
                return x * 2

            with mesh:          # the legacy context does not count for jax.jit
                y = step(jax.numpy.ones((8, 4)))
        """, title="decorator factory, called under a legacy `with mesh:`"),
        example({
            "placement.py": """
                import jax
                from jax.sharding import PartitionSpec as P

                def place(x):
                    return jax.device_put(x, P("data"))  # expect: SHL104
            """,
            "train.py": """
                import jax
                from jax.sharding import Mesh
                from placement import place

                def main(x):
                    with Mesh(jax.devices(), ("data",)):   # legacy: device_put does not read it
                        return place(x)

                if __name__ == "__main__":
                    main(jax.numpy.ones((8, 4)))
            """,
        }, title="a helper's device_put, called under a legacy `with mesh:` in another module"),
        example("""
            import jax
            import numpy as np

            batch = jax.device_put(np.ones((8, 4)), jax.P("data"))  # expect: SHL104
        """, title="device_put with a bare spec"),
        example({
            "shard.py": """
                import jax
                from jax.sharding import PartitionSpec

                def constrain(x):
                    return jax.lax.with_sharding_constraint(x, PartitionSpec("data", None))  # expect: SHL104
            """,
            "train.py": """
                import jax
                from shard import constrain

                mesh = jax.make_mesh((8,), ("data",))
                y = jax.jit(constrain)(jax.numpy.ones((8, 4)))
                z = constrain(jax.numpy.ones((8, 4)))            # runs with no mesh
            """,
        }, title="a helper called from module code of another file"),
        example("""
            import functools
            import jax
            from jax.sharding import PartitionSpec as P

            SPECS = (P("data"), P())

            @functools.partial(jax.jit, in_shardings=SPECS)  # expect: SHL104
            def step(x, w):
                return x @ w

            def main():
                return step(jax.numpy.ones((8, 4)), jax.numpy.ones((4, 4)))

            if __name__ == "__main__":
                main()
        """, title="functools.partial, specs in a module constant, called from main()"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        return Role.PARTITION_SPEC in facts.roles or (Role.OTHER in facts.roles and facts.uses_flax)

    def check(self) -> Iterator[Finding]:
        for site in self.facts.jit_sites:
            if site.api_name == LINEN_JIT:
                continue
            yield from self._jit_site(site)
        for c in self.facts.calls:
            if c.api is None or c.api.name not in _PLACERS or c.abstract:
                continue
            if c.scope.kind == "function" and \
                    self.project.inside_module_class(self.facts.module, c.scope.qualname):
                continue  # model code: SHL103 judges it where the model runs
            index, keyword, legacy_ok = _PLACERS[c.api.name]
            value = c.arg(index, keyword)
            spec = bare_specs(self.facts, value, c.scope)
            if value is None or spec is None:
                continue
            at = mesh_at(self.facts, self.project, c, legacy_ok)
            short = c.api.name.rsplit(".", 1)[-1]
            yield from self._report(at, value, spec, f"`{short}`", legacy_ok)

    # ---- jit sites -------------------------------------------------------------------------------
    def _jit_site(self, site: JitSite) -> Iterator[Finding]:
        kws = jit_keywords(self.facts, site)
        if not kws:
            return
        found: list[tuple[str, ast.expr, ast.expr]] = []
        for k, v in kws.items():
            spec = bare_specs(self.facts, v, site.scope) if k in _JIT_SPEC_KEYWORDS else None
            if spec is not None:
                found.append((k, v, spec))
        if not found:
            return
        call = self.facts.call_at(site.node) if isinstance(site.node, ast.Call) else None
        if call is not None and call.abstract:
            return
        legacy_ok = site.api_name == PJIT
        uses = self._uses(site)
        if uses:
            at = combine([mesh_at(self.facts, self.project, u, legacy_ok) for u in uses])
        else:
            at = self._uncalled(site)
        keyword, value, spec = found[0]
        yield from self._report(at, value, spec, f"`{keyword}`", site.api_name == PJIT)

    def _uses(self, site: JitSite) -> list[CallSite]:
        """Where the jitted callable is called, lowered or traced (that is when specs are read)."""
        out = list(calls_of(self.facts, site))
        name = site.bound_name
        for c in self.facts.calls:
            f = c.node.func
            if isinstance(f, ast.Attribute) and f.attr in ("lower", "trace") and (
                    f.value is site.node or (isinstance(f.value, ast.Name) and f.value.id == name)):
                out.append(c)
        return out

    def _uncalled(self, site: JitSite) -> MeshAt:
        """A decorated function no code of this file calls: judge by its project callers."""
        fn = compiled_function(self.facts, site)
        if site.form == "call" or fn is None or fn.enclosing_class is not None:
            return MeshAt(UNKNOWN)
        ctx = plain_context(self.project, self.facts.module, fn.qualname)
        if ctx is None:
            return MeshAt(UNKNOWN)
        legacy_ok = site.api_name == PJIT
        if has_mesh(ctx, legacy_ok):
            return MeshAt(PROVIDED)
        return MeshAt(MISSING, has_mesh(ctx), callers=callers_lacking(
            self.project, self.facts.module, fn.qualname, legacy_ok))

    # ---- findings ---------------------------------------------------------------------------------
    def _report(self, at: MeshAt, value: ast.expr, spec: ast.expr,
                where: str, legacy_honoured: bool) -> Iterator[Finding]:
        """``legacy_honoured``: the API resolves a bare spec against a legacy `with mesh:`
        (`pjit`, `with_sharding_constraint`); the others (`jax.jit`, `device_put`, `reshard`)
        only against the mesh `jax.set_mesh` sets."""
        if at.state == PROVIDED:
            return
        what = self._what(spec)
        if at.state == MISSING:
            legacy = " (a legacy `with mesh:` does not count here)" if at.legacy else ""
            # (the words of jax >= 0.7.1's error; older releases say it otherwise: 0.4.34's
            # `jax.jit` "only supports `Sharding`s", pjit "requires a non-empty mesh")
            says = " \"requires a non-empty mesh in context\"" \
                if not self.ctx.versions.may_be_below("jax", SET_MESH_ADDED) else ""
            msg = (f"{what} passed to {where} with no mesh in context{legacy}: jax raises{says} "
                   f"when this runs; {self._enter(legacy_honoured)}")
            related = [self.related(c.node, "runs here without a mesh") for c in at.where[:3]
                       if c.node.lineno != value.lineno]
            related += [self.related(Span(line, 0, line, 0), "called here without a mesh", path)
                        for path, line in at.callers[:3]]
            yield self.finding(value, msg, related=related)
            return
        if self._no_mesh_entered():
            msg = (f"{what} passed to {where} needs a mesh in context wherever this runs, and "
                   f"nothing in the project enters one: {self._enter(legacy_honoured)}")
            yield self.finding(value, msg, severity="info")

    def _enter(self, legacy_honoured: bool) -> str:
        """What to do, at every jax the project's pins allow: enter `jax.set_mesh` (from 0.7.1),
        or before it the legacy `with mesh:` -- for the APIs that honour it; `jax.jit`,
        `device_put` and `reshard` resolve a bare spec only against the mesh `jax.set_mesh`
        sets (0.4.7 and 0.4.34's `jax.jit` raise for one under a legacy mesh: read from their
        sources), so where the pins allow an older jax, NamedShardings are what holds."""
        versions = self.ctx.versions
        if not versions.may_be_below("jax", SET_MESH_ADDED):
            return "enter `with jax.set_mesh(mesh):` around it or pass NamedShardings"
        if not legacy_honoured:
            return (f"pass NamedShardings (`jax.set_mesh`, whose mesh it reads, needs jax >= "
                    f"{SET_MESH_ADDED}, and {versions.allowed_by('jax')} allow jax "
                    f"{versions.oldest('jax')}; a legacy `with mesh:` does not count for it)")
        if not versions.at_least("jax", SET_MESH_ADDED):
            return "enter `with mesh:` around it or pass NamedShardings"
        return (f"enter `with jax.set_mesh(mesh):`, or `with mesh:` on the jax < "
                f"{SET_MESH_ADDED} {versions.allowed_by('jax')} allow (jax "
                f"{versions.oldest('jax')}), which has no `jax.set_mesh`, around it or pass "
                f"NamedShardings")

    def _what(self, spec: ast.expr) -> str:
        known = self.facts.resolve(spec.func) if isinstance(spec, ast.Call) and \
            isinstance(spec.func, (ast.Name, ast.Attribute)) else None
        if known is not None and known.role != Role.PARTITION_SPEC:
            return f"The PartitionSpecs returned by `{self.text(spec.func)}`"  # type: ignore[attr-defined]
        return f"A bare `{self.text(spec.func)}(...)`" if isinstance(spec, ast.Call) \
            else "A bare PartitionSpec"

    def _no_mesh_entered(self) -> bool:
        """The project builds a mesh but never enters one: the specs cannot resolve anywhere."""
        p: ProjectIndex = self.project
        return not p.mesh_provider and any(s.mesh_axes for s in p.summaries.values())
