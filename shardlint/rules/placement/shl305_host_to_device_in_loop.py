"""SHL305 host-to-device-in-loop."""

from __future__ import annotations

from shardlint.rules._versions import out_shardings_note
from shardlint.rules.base import Rule, example, register
from shardlint.semantics.buffers.transfers import ARRAY_CONVERTERS, loop_transfers
from shardlint.semantics.flow.models import project_uses_mesh
from shardlint.semantics.sharding.mesh_context import lexical_contexts


@register
class HostToDeviceInLoop(Rule):
    code = "SHL305"
    name = "host-to-device-in-loop"
    severity = "warning"
    summary = "A loop copies each batch to one device unsharded, then the jitted step reshards it."
    what = """
In a project that builds or enters a mesh, flags, inside the body of a `for`/`while` loop that
runs eagerly, a conversion that places a value on the default device without a sharding --
`jnp.asarray(x)`, `jnp.array(x)` (no `device=`/`out_sharding=`), `jax.device_put(x)` (no
target), `jax.tree.map(jnp.asarray, batch)` -- whose result is passed to a call of a jitted
function in the same loop: directly (`step(state, jnp.asarray(batch))`) or through a name
assigned in between (`x = jnp.asarray(batch); state = step(state, x)`). The jitted function may
be defined in this file or imported from another project file where it is jitted at top level.

Not flagged: code of a program that never shards (a conversion script, a one-device benchmark, a
pmap example: neither it nor what it imports builds or enters a mesh or rules; for a test, a
benchmark or an example, its own files); `jax.device_put(x, sharding)`, `jnp.asarray(x,
device=sharding)`,
`jax.make_array_from_process_local_data(...)`; NumPy arrays passed straight to the jitted call;
literals and scalars (`jnp.asarray(0.1)`, `jnp.array(step)` of an `int(...)`); values that are
already device arrays (results of `jax`/`jnp` calls or of jitted calls, arithmetic on them,
their methods such as `.astype(...)` and `.at[i].set(...)`, the result of a function of the file
whose every return is one of those, or the matching part of the tuple such a function returns:
`latents, ids = make_inputs(...)`); conversions inside a
jitted function; loops whose converted value never reaches a jitted call (logging, metrics);
projects with no mesh, where one device is the right place.
"""
    why = """
`jnp.asarray(batch)` copies the whole batch to device 0, uncommitted; the jitted step then has
to move it again into the shards its `in_shardings` (or the mesh) ask for. Every step pays a
second transfer, and device 0 briefly holds the entire global batch -- on a GPU a full-batch copy
to GPU 0 followed by a device-to-device scatter. Measured on CPU with 8 simulated devices:
6.0 ms per step with `jnp.asarray(batch)`, 5.0 ms with `jax.device_put(batch, sharding)` and
4.1 ms passing the NumPy batch straight to the jit with `in_shardings`. (A *committed*
single-device array with a different `in_shardings` is a loud `ValueError` instead.) Under
`jax.set_mesh(mesh)` the conversion is worse: `jnp.asarray(batch)` is committed *replicated*
over the mesh (measured, jax 0.12: `NamedSharding(mesh, P())` on every device), so each step
copies the whole batch to every device and the step receives it unsplit. SHL304 leaves these
sites to this rule, so a large batch converted in a loop is reported once.
"""
    use_instead = """
```python
data_sharding = NamedSharding(mesh, P("data"))
for batch in loader:
    batch = jax.device_put(batch, data_sharding)        # straight into the shards
    # multi-host: jax.make_array_from_process_local_data(data_sharding, local_batch)
    state, metrics = train_step(state, batch)
```
"""
    fix_safety = "No automatic fix: which sharding the batch should have is the project's choice."
    versions = "All versions of jax."
    VALID = [
        example({
            "lib/parallel.py": """
                import jax

                def make_mesh():
                    return jax.make_mesh((8,), ("data",))
            """,
            "benchmarks/bench_step.py": """
                import jax
                import jax.numpy as jnp
                import numpy as np

                @jax.jit
                def step(state, batch):
                    return state + batch.mean()

                def main():
                    state = jnp.zeros(())
                    for _ in range(100):
                        state = step(state, jnp.asarray(np.ones((256, 1024), np.float32)))
                    return state
            """,
        }, title="a benchmark on one device: the project shards elsewhere, this program never"),
        example("""
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P

            mesh = jax.make_mesh((8,), ("data",))
            sharding = NamedSharding(mesh, P("data"))

            @jax.jit
            def train_step(state, batch):
                return state + batch.mean()

            def train(state, loader):
                for batch in loader:
                    state = train_step(state, jax.device_put(batch, sharding))
                return state
        """, title="placed with its sharding"),
        example("""
            import jax
            import jax.numpy as jnp

            @jax.jit
            def train_step(state, batch):
                return state + batch.mean()

            def train(state, loader):
                for batch in loader:
                    state = train_step(state, jnp.asarray(batch))
                return state
        """, title="no mesh anywhere: one device is the right place"),
        example("""
            import jax
            import jax.numpy as jnp
            from jax.sharding import NamedSharding, PartitionSpec as P

            mesh = jax.make_mesh((8,), ("data",))
            step = jax.jit(lambda s, b, lr: s - lr * b.mean(),
                           in_shardings=(None, NamedSharding(mesh, P("data")), None))

            def train(state, loader, schedule):
                losses = []
                for i, batch in enumerate(loader):
                    lr = jnp.asarray(0.1)                      # a literal scalar
                    state = step(state, batch, lr)             # NumPy batch goes straight in
                    losses.append(jnp.asarray(state))          # not fed to the step
                return state, losses
        """, title="NumPy straight into in_shardings; scalars; metrics"),
        example("""
            import jax
            import jax.numpy as jnp

            mesh = jax.make_mesh((8,), ("data",))

            @jax.jit
            def train_step(state, batch):
                for i in range(4):                              # traced: no host copy
                    state = state + jnp.asarray(batch[i]).mean()
                return state
        """, title="a Python loop inside the jitted function"),
        example("""
            import jax
            import jax.numpy as jnp

            mesh = jax.make_mesh((8,), ("data",))

            @jax.jit
            def train_step(state, batch):
                return state + batch.mean()

            def train(state, key, n):
                for _ in range(n):
                    key, sub = jax.random.split(key)
                    noise = jax.random.normal(sub, (8, 128))
                    state = train_step(state, jnp.asarray(noise))   # already on a device
                return state
        """, title="a value that is already a device array"),
        example("""
            import jax
            import jax.numpy as jnp
            from jax.sharding import NamedSharding, PartitionSpec as P

            mesh = jax.make_mesh((8,), ("data",))
            sharding = NamedSharding(mesh, P("data"))

            @jax.jit
            def train_step(state, batch):
                return state + batch.mean()

            def shard(batch):
                return jax.device_put(batch, sharding)

            def normalize(batch):
                return jnp.asarray(batch, device=sharding) / 255.0

            def train(state, loader):
                for raw in loader:
                    x = shard(raw)
                    state = train_step(state, jax.device_put(x))       # placed already: a no-op
                    state = train_step(state, jnp.asarray(normalize(raw)))
                return state
        """, title="the result of a helper that places it with its sharding"),
        example("""
            import jax
            import jax.numpy as jnp
            from jax.sharding import NamedSharding, PartitionSpec as P

            mesh = jax.make_mesh((8,), ("data",))

            @jax.jit
            def denoise(latents, ids):
                return latents + ids.sum()

            def position_ids(h, w):
                ids = jnp.zeros((h, w, 2))
                ids = ids.at[..., 1].set(jnp.arange(w)[None, :])
                return ids.reshape(h * w, 2).astype(jnp.bfloat16)

            def make_inputs(key, h, w):
                latents = jax.random.normal(key, (4, h * w, 16))
                return latents, jnp.tile(position_ids(h, w), (4, 1, 1))

            def sweep(key, sizes):
                for h, w in sizes:
                    latents, ids = make_inputs(key, h, w)
                    latents = jax.device_put(latents, NamedSharding(mesh, P("data")))
                    ids = jax.device_put(ids)            # already a device array: a no-op
                    latents = denoise(latents, ids)
        """, title="a device array unpacked from a helper's tuple"),
    ]
    INVALID = [
        example("""
            import jax
            import jax.numpy as jnp
            import numpy as np

            mesh = jax.make_mesh((8,), ("data",))

            @jax.jit
            def denoise(latents, ids):
                return latents + ids.sum()

            def make_inputs(key, h, w):
                latents = jax.random.normal(key, (4, h * w, 16))
                return latents, np.zeros((4, h * w, 2), np.float32)   # ids stay on the host

            def sweep(key, sizes):
                for h, w in sizes:
                    latents, ids = make_inputs(key, h, w)
                    ids = jax.device_put(ids)  # expect: SHL305
                    latents = denoise(latents, ids)
        """, title="a host array unpacked from a helper's tuple"),
        example("""
            import jax
            import jax.numpy as jnp
            from jax.sharding import NamedSharding, PartitionSpec as P

            mesh = jax.make_mesh((8,), ("data",))

            @jax.jit
            def train_step(state, batch):
                return state + batch.mean()

            def train(state, loader):
                for batch in loader:
                    state = train_step(state, jnp.asarray(batch))  # expect: SHL305
                return state
        """, title="converted inline"),
        example("""
            import jax
            import jax.numpy as jnp
            import numpy as np
            from jax.sharding import Mesh

            mesh = Mesh(np.array(jax.devices()), ("data",))
            step = jax.jit(lambda s, x, y: s + (x - y).sum())

            def train(state, dataset):
                it = iter(dataset)
                while True:
                    images, labels = next(it)
                    x, y = jax.device_put(images), jnp.array(labels)  # expect: SHL305
                    state = step(state, x, y)
        """, title="through names, in a while loop"),
        example("""
            import jax
            import jax.numpy as jnp

            mesh = jax.make_mesh((8,), ("data",))

            @jax.jit
            def train_step(state, batch):
                return state + batch["x"].mean()

            for raw in loader:
                batch = jax.tree.map(jnp.asarray, raw)  # expect: SHL305
                state = train_step(state, batch)
        """, title="tree-mapped at module level"),
        example({
            "steps.py": """
                import jax
                from functools import partial

                @partial(jax.jit, donate_argnums=0)
                def train_step(state, batch):
                    return state + batch["x"].mean()
            """,
            "train.py": """
                import jax
                import jax.numpy as jnp
                from steps import train_step

                mesh = jax.make_mesh((8,), ("data",))

                def main(state, loader):
                    for raw in loader:
                        batch = {"x": jnp.array(raw["x"])}  # expect: SHL305
                        state = train_step(state, batch)
                    return state
            """,
        }, title="the jitted step is imported from another file"),
        example("""
            import jax
            import jax.numpy as jnp

            @jax.jit
            def train_step(state, batch):
                return state + batch.mean()

            def train(state, loader):
                mesh = jax.make_mesh((8,), ("data",))
                with jax.set_mesh(mesh):
                    for batch in loader:
                        state = train_step(state, jnp.asarray(batch))  # expect: SHL305
                return state
        """, title="under jax.set_mesh: a full copy on every device, every step"),
        example("""
            import jax

            mesh = jax.make_mesh((8,), ("data",))

            @jax.jit
            def train_step(state, batch):
                return state + batch.mean()

            def images(record):
                return record["image"]                          # still the host array

            def train(state, loader):
                for record in loader:
                    state = train_step(state, jax.device_put(images(record)))  # expect: SHL305
                return state
        """, title="the result of a helper that hands back the host array"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        return any(q.startswith(("jax.numpy.", "jax.device_put", "jax.tree"))
                   for q in facts.called_names()) \
            and any(c.in_loop is not None for c in facts.calls)

    def check(self):
        if not project_uses_mesh(self.project):
            return
        for t in loop_transfers(self.facts, self.project):
            if self.project.runs_on_one_device(self.facts.module, t.convert.scope.qualname):
                continue  # a program that never shards: one device is the design
            conv = self.text(t.convert.node)
            if len(conv) > 48:
                conv = conv[:45] + "..."
            via = f" (as `{t.via}`)" if t.via else ""
            c = t.convert
            replicated = c.api is not None and c.api.name in ARRAY_CONVERTERS \
                and "mesh" in lexical_contexts(self.facts, c.node, c.scope)
            if replicated:  # measured: under jax.set_mesh, jnp.asarray gives P() on the mesh
                what = (f"`{conv}` copies the whole value to every device on every iteration "
                        f"(`jax.set_mesh` replicates it); `{t.callee}`{via} gets it replicated, "
                        f"not split across the mesh")
            else:
                what = (f"`{conv}` copies the whole value to one device, unsharded, on every "
                        f"iteration; `{t.callee}`{via} then has to reshard it across the mesh: a "
                        f"second transfer per step and the full batch on device 0")
            yield self.finding(
                c.node,
                f"{what}; use `jax.device_put(x, sharding)` or pass the NumPy array straight to "
                f"a jit with `in_shardings`{out_shardings_note(self.ctx.versions, 'in_shardings')}",
                related=[self.related(t.jit_call, "fed to this jitted call")])
