"""SHL303 optimizer-state-unsharded."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from shardlint.rules._versions import out_shardings_note, set_mesh_note
from shardlint.rules.base import Finding, Rule, example, register
from shardlint.semantics.file.dataflow import LocalFlow
from shardlint.semantics.file.execution import compiled_function
from shardlint.semantics.file.facts import JitSite, Scope
from shardlint.semantics.file.jit_sites import unplaced_jit_sites
from shardlint.semantics.file.meshes import EXPLICIT_DEFAULT_FROM
from shardlint.semantics.flow.models import project_uses_mesh
from shardlint.semantics.sharding.placement import optax_transform, places_outputs
from shardlint.semantics.sharding.usage import only_auto_meshes

# Keywords that place the outputs (`out_axis_resources`: pjit before jax 0.4.x).


@register
class OptimizerStateUnsharded(Rule):
    code = "SHL303"
    name = "optimizer-state-unsharded"
    severity = "warning"
    summary = "`jax.jit(tx.init)` without `out_shardings`: the optimizer state is not sharded like the parameters."
    what = """
Flags, in a project that builds meshes and only meshes with Auto axes, a jit site without
`out_shardings` (`jax.jit`, `pjit`, `nnx.jit`, decorator or call form) that compiles the `init`
of an optax transformation: `jax.jit(tx.init)`, `jax.jit(lambda p: tx.init(p))`, or a function
whose only job is `return tx.init(params)`. `tx` must resolve to an optax transformation: a
name bound to `optax.adam(...)`, `optax.chain(...)`, `optax.inject_hyperparams(optax.adamw)(...)`
and so on, or a parameter annotated `optax.GradientTransformation`.

Not flagged: eager `tx.init(params)`, which keeps the parameters' sharding; `nnx.Optimizer`,
whose state follows the Variables' sharding metadata; functions that also build parameters or a
`TrainState` (SHL302 reports those); functions that place their outputs themselves
(`with_sharding_constraint`, `device_put(x, sharding)`); `jax.eval_shape(tx.init, ...)`;
projects with an Explicit mesh (there the state is sharded under `jax.set_mesh`, and without it
jax raises) and projects with no mesh at all.
"""
    why = """
Optax builds its state with `zeros_like(params)`. Eagerly that keeps each parameter's sharding,
but inside `jit` on an Auto mesh the zeros do not depend on the parameters' data, so they do not
inherit their sharding: the state lands on device 0, or as a full copy on every device under
`jax.set_mesh`. Reproduced on 8 devices with params of 1 MiB per device: eager `tx.init` gives
2 MiB per device, `jax.jit(tx.init)` 16 MiB on device 0 alone, the same under `jax.set_mesh`
16 MiB on each of the 8 devices, and with `out_shardings` 2 MiB. Adam keeps two moments per
parameter, so this is often the largest buffer of the run; and a donated train step can then
reuse only the parameters' buffers (SHL403).
"""
    use_instead = """
```python
opt_state = tx.init(params)                                  # eager: follows the params
# or, jitted, with the shardings spelled out:
abstract = jax.eval_shape(tx.init, params)
opt_shardings = jax.tree.map(lambda a: a.sharding, ...)      # or nn.get_sharding on a boxed state
opt_state = jax.jit(tx.init, out_shardings=opt_shardings)(params)
```
"""
    fix_safety = "No automatic fix: the right `out_shardings` depend on the parameters' layout."
    versions = (f"All versions with Auto meshes: `jax.sharding.Mesh(...)`, or `jax.make_mesh` "
                f"with Auto axes (its default before jax {EXPLICIT_DEFAULT_FROM}).")
    VALID = [
        example("""
            import jax
            import numpy as np
            import optax
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

            mesh = Mesh(np.array(jax.devices()), ("model",))
            params = {"w": jax.device_put(np.ones((2048, 1024)), NamedSharding(mesh, P("model")))}
            tx = optax.adam(1e-3)
            opt_state = tx.init(params)          # eager: zeros_like keeps the sharding
        """, title="eager tx.init"),
        example("""
            import jax
            import numpy as np
            import optax
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

            mesh = Mesh(np.array(jax.devices()), ("model",))
            tx = optax.adamw(1e-3)
            params = {"w": jax.device_put(np.ones((2048, 1024)), NamedSharding(mesh, P("model")))}
            shardings = jax.tree.map(lambda _: NamedSharding(mesh, P()), jax.eval_shape(tx.init, params))
            opt_state = jax.jit(tx.init, out_shardings=shardings)(params)
        """, title="out_shardings given"),
        example("""
            import jax
            import optax
            from flax import nnx

            mesh = jax.make_mesh((8,), ("model",), axis_types=(jax.sharding.AxisType.Auto,))
            with jax.set_mesh(mesh):
                model = nnx.Linear(1024, 1024, rngs=nnx.Rngs(0))
                optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
        """, title="nnx.Optimizer follows the Variables' metadata"),
        example("""
            import jax
            import optax

            mesh = jax.make_mesh((8,), ("model",))      # Explicit axes (jax >= 0.9)
            tx = optax.adam(1e-3)

            def init_opt(params):
                with jax.set_mesh(mesh):
                    return jax.jit(tx.init)(params)     # sharded like the params in Explicit mode
        """, title="an Explicit mesh"),
        example("""
            import jax
            import optax

            tx = optax.sgd(0.1, momentum=0.9)
            opt_state = jax.jit(tx.init)({"w": jax.numpy.zeros((16, 16))})   # no mesh anywhere
        """, title="a single-device project"),
    ]
    INVALID = [
        example("""
            import jax
            import numpy as np
            import optax
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

            mesh = Mesh(np.array(jax.devices()), ("model",))
            params = {"w": jax.device_put(np.ones((2048, 1024)), NamedSharding(mesh, P("model")))}
            tx = optax.adam(1e-3)
            opt_state = jax.jit(tx.init)(params)  # expect: SHL303
        """),
        example("""
            import jax
            import optax as ox
            from jax.sharding import AxisType

            mesh = jax.make_mesh((8,), ("model",), axis_types=(AxisType.Auto,))
            tx = ox.chain(ox.clip_by_global_norm(1.0), ox.adamw(3e-4))
            with jax.set_mesh(mesh):
                init_opt = jax.jit(lambda p: tx.init(p))  # expect: SHL303
        """, title="a lambda, under jax.set_mesh: a full copy on every device"),
        example("""
            import functools
            import jax
            import optax
            from jax.experimental import mesh_utils
            from jax.sharding import Mesh

            mesh = Mesh(mesh_utils.create_device_mesh((8,)), ("data",))

            @functools.partial(jax.jit, donate_argnums=())  # expect: SHL303
            def init_opt_state(params, tx: optax.GradientTransformation):
                return tx.init(params)
        """, title="a decorated wrapper; tx annotated"),
        example({
            "mesh.py": """
                import jax
                from jax.sharding import Mesh

                MESH = Mesh(jax.devices(), ("data",))
            """,
            "train.py": """
                import jax
                import jax.experimental.pjit
                import optax

                schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-3, 100, 10_000)
                tx = optax.inject_hyperparams(optax.adamw)(learning_rate=schedule)
                init = jax.experimental.pjit.pjit(tx.init)  # expect: SHL303
            """,
        }, title="pjit, inject_hyperparams, mesh in another file"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        return bool(facts.jit_sites) and any(
            q == "optax" or q.startswith("optax.") for q in facts.imports.names.values())

    def check(self) -> Iterator[Finding]:
        explicit_default = self.ctx.versions.at_least("jax", EXPLICIT_DEFAULT_FROM)
        if not project_uses_mesh(self.project) or \
                not only_auto_meshes(self.project, explicit_default):
            return
        for site in unplaced_jit_sites(self.facts):
            what = self._compiles_optax_init(site)
            if what is not None:
                yield self.finding(site.node, self._message(what))

    def _compiles_optax_init(self, site: JitSite) -> str | None:
        t = site.target
        if isinstance(t, ast.Attribute) and t.attr == "init" and \
                optax_transform(self.facts, t.value, site.scope):
            return f"`{self.text(t)}`"
        if isinstance(t, ast.Lambda) and self._is_init_call(t.body, site.scope):
            return "this lambda returning `tx.init(...)`"
        fn = compiled_function(self.facts, site)
        if fn is None or isinstance(t, ast.Lambda):
            return None
        flow = LocalFlow(self.facts, fn)
        if not flow.returns or places_outputs(self.facts, fn.node):
            return None
        if all(self._is_init_call(r, fn) for r in flow.returns):
            return f"`{fn.name}`, which returns `tx.init(...)`,"
        return None

    def _is_init_call(self, node: ast.expr, scope: Scope) -> bool:
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr == "init" and optax_transform(self.facts, node.func.value, scope)

    def _message(self, what: str) -> str:
        v = self.ctx.versions
        return (f"{what} is jitted without `out_shardings`: inside jit the optimizer state's "
                f"`zeros_like` does not inherit the parameters' sharding on an Auto mesh, so it "
                f"lands on device 0, or as a full copy on every device under `jax.set_mesh`"
                f"{set_mesh_note(v)}; call `tx.init(params)` eagerly or pass `out_shardings=`"
                f"{out_shardings_note(v)}")
