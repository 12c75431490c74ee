"""SHL304 single-device-placement."""

from __future__ import annotations

from collections.abc import Iterator

from shardlint.rules.base import Finding, Rule, example, register
from shardlint.semantics.buffers.transfers import loop_transfers
from shardlint.semantics.catalog.api import Role
from shardlint.semantics.file.execution import execution_of
from shardlint.semantics.file.facts import CallSite
from shardlint.semantics.flow.models import project_uses_mesh
from shardlint.semantics.sharding.mesh_context import lexical_contexts
from shardlint.semantics.sharding.placement import (
    JNP_CONVERTERS,
    JNP_CREATORS,
    MIB,
    converted_size,
    creation_size,
    host_array_size,
    mib,
    model_state,
    single_device,
)

THRESHOLD = 64 * MIB
DEVICE_PUT = "jax.device_put"
_PLACING = ("device", "out_sharding")


@register
class SingleDevicePlacement(Rule):
    code = "SHL304"
    name = "single-device-placement"
    severity = "warning"
    summary = "A large array or the model state is placed on one device (or copied to all) in a sharded project."
    what = """
Flags, in a project that uses a mesh and in code that certainly runs eagerly (module level, or a
function module-level code calls), placements that ignore the mesh:

* `jax.device_put(x)` with no sharding, where `x` is a host array of at least 64 MiB made with a
  literal shape (`np.zeros((8192, 8192))`);
* `jax.device_put(x, jax.devices()[i])` (or `jax.local_devices()[i]`, or a name bound to one)
  where `x` is model state (Linen `model.init(...)` variables, a `TrainState`, optax
  `tx.init(...)` state, `nnx.state(...)`) or such a large array;
* `jnp.zeros/ones/full/empty(shape)` with a literal shape of at least 64 MiB, and
  `jnp.asarray/array(np_array)` of such a host array, with no `device=` or `out_sharding=`.

Sizes count the dtype (`float32` when none is given, the smallest dtype when it cannot be read).
Not flagged: code of a program that never shards (a conversion script, a one-device benchmark, a
pmap example: neither it nor what it imports builds or enters a mesh or rules; for a test, a
benchmark or an example, its own files); smaller or unknown sizes, placements with a `Sharding`,
device lists of a named
backend (`jax.devices("cpu")`: host offload on purpose), code inside `jit` or `eval_shape`,
functions whose execution shardlint cannot see, and projects without a mesh.
"""
    why = """
Without a sharding an eager array has to live somewhere whole. Reproduced: with no mesh
`jax.device_put(x)`, `jnp.asarray(x)` and `jnp.zeros(...)` all land on device 0 as a
`SingleDeviceSharding`; under `jax.set_mesh` (Auto or Explicit) eager `jnp.zeros` and
`jnp.asarray` are fully replicated, a complete copy on every device, while `device_put(x)` still
goes to device 0. A large embedding table or the restored model state then needs the memory of
the whole array on one device, or N times it across the mesh, before anything reshards it; and
`jax.device_put(state, jax.devices()[0])` moves already-sharded state back onto one device.
"""
    use_instead = """
```python
table = jax.device_put(np.load("emb.npy"), NamedSharding(mesh, P("vocab", None)))
zeros = jnp.zeros((32768, 4096), device=NamedSharding(mesh, P("data")))   # Auto mesh
zeros = jnp.zeros((32768, 4096), out_sharding=P("data"))                  # Explicit, under set_mesh
# or create it inside jax.jit(..., out_shardings=...)
```
"""
    fix_safety = "No automatic fix: the sharding to use is a design decision."
    versions = "All versions (`out_sharding=` on array constructors needs an Explicit mesh)."
    VALID = [
        example({
            "lib/parallel.py": """
                import jax

                def make_mesh():
                    return jax.make_mesh((8,), ("data",))
            """,
            "tools/convert_checkpoint.py": """
                import jax.numpy as jnp

                def convert(weights):
                    return {k: jnp.asarray(v) for k, v in weights.items()}

                if __name__ == "__main__":
                    big = jnp.zeros((8192, 8192))
                    print(convert({"w": big}))
            """,
        }, title="a conversion script that never shards: one device is its design"),
        example("""
            import jax
            import jax.numpy as jnp

            mesh = jax.make_mesh((8,), ("data",))
            x = jnp.ones((8, 1024))                       # 32 KiB: not worth a finding
            bias = jnp.zeros(4096)
        """, title="small arrays"),
        example("""
            import jax
            import jax.numpy as jnp
            import numpy as np
            from jax.sharding import NamedSharding, PartitionSpec as P

            mesh = jax.make_mesh((8,), ("data",))
            table = jnp.zeros((262144, 1024), device=NamedSharding(mesh, P("data")))
            host = jax.device_put(np.zeros((262144, 1024), np.float32), NamedSharding(mesh, P("data")))
            cpu = jax.device_put(np.zeros((262144, 1024)), jax.devices("cpu")[0])   # host offload
        """, title="placed with a sharding, or on the host on purpose"),
        example("""
            import jax
            import jax.numpy as jnp
            from jax.sharding import NamedSharding, PartitionSpec as P

            mesh = jax.make_mesh((8,), ("data",))

            @jax.jit
            def make_table():
                return jnp.zeros((262144, 1024))          # traced: placed by the jit's outputs

            table = jax.jit(make_table, out_shardings=NamedSharding(mesh, P("data")))()
        """, title="created inside jit"),
        example("""
            import jax
            import jax.numpy as jnp

            table = jnp.zeros((262144, 1024))             # one device, and that is all there is
        """, title="a project without a mesh"),
        example("""
            import jax
            import jax.numpy as jnp

            mesh = jax.make_mesh((8,), ("data",))

            def make(shape):
                return jnp.zeros(shape)                   # size unknown: not guessed
        """, title="a size shardlint cannot know"),
        example("""
            import jax
            import numpy as np
            from jax.sharding import NamedSharding, PartitionSpec as P

            mesh = jax.make_mesh((8,), ("data",))
            step = jax.jit(lambda t: t.sum(), in_shardings=NamedSharding(mesh, P("data")))
            total = step(np.ones((65536, 1024), np.float32))   # NumPy goes straight into the shards
        """, title="a host array handed to a jit with in_shardings"),
        example("""
            import jax
            import jax.numpy as jnp
            import numpy as np

            mesh = jax.make_mesh((8,), ("data",))
            step = jax.jit(lambda s, x: s + x.sum())

            def train(state, n):
                for _ in range(n):
                    x = jnp.asarray(np.zeros((8192, 4096), np.float32))   # SHL305's: fed to the step
                    state = step(state, x)
                return state

            if __name__ == "__main__":
                train(0.0, 10)
        """, title="a conversion in a loop that feeds a jitted step (SHL305 reports it)"),
    ]
    INVALID = [
        example("""
            import jax
            import jax.numpy as jnp

            mesh = jax.make_mesh((8,), ("data",))
            table = jnp.zeros((32768, 1024))  # expect: SHL304
        """, title="128 MiB on device 0"),
        example("""
            import jax
            import numpy as np

            mesh = jax.make_mesh((8,), ("data",))
            weights = np.ones((8192, 8192), dtype=np.float32)
            w = jax.device_put(weights)  # expect: SHL304
        """, title="device_put without a sharding"),
        example("""
            import jax
            import flax.linen as nn
            from jax.sharding import Mesh

            mesh = Mesh(jax.devices(), ("data",))
            model = nn.Dense(4096)
            variables = jax.jit(model.init)(jax.random.key(0), jax.numpy.ones((8, 4096)))
            variables = jax.device_put(variables, jax.devices()[0])  # expect: SHL304
        """, title="model state moved onto one device"),
        example("""
            import jax
            import jax.numpy as xp
            import numpy as onp

            VOCAB, DIM = 262144, 512

            def main():
                mesh = jax.make_mesh((8,), ("data",))
                with jax.set_mesh(mesh):
                    table = xp.asarray(onp.empty((VOCAB, DIM), dtype=onp.float16))  # expect: SHL304
                    ones = xp.full((VOCAB, DIM), 1.0, dtype=xp.bfloat16)  # expect: SHL304

            if __name__ == "__main__":
                main()
        """, title="under jax.set_mesh: a full copy on every device"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        return facts.uses_jax and Role.OTHER in facts.roles

    def check(self) -> Iterator[Finding]:
        names = JNP_CREATORS | JNP_CONVERTERS | {DEVICE_PUT}
        candidates = [c for c in self.facts.calls if c.api is not None and c.api.name in names]
        if not candidates or not project_uses_mesh(self.project):
            return
        execution = execution_of(self.facts)
        in_loops = {t.convert.node for t in loop_transfers(self.facts, self.project)}
        for c in candidates:
            if not execution.runs_eagerly(c) or c.node in in_loops:
                continue  # a conversion feeding a jitted step in a loop is SHL305's
            if self.project.runs_on_one_device(self.facts.module, c.scope.qualname):
                continue  # a program that never shards: one device is the design
            msg = self._device_put(c) if c.api.name == DEVICE_PUT else self._jnp(c)  # type: ignore[union-attr]
            if msg is not None:
                yield self.finding(c.node, msg)

    def _device_put(self, c: CallSite) -> str | None:
        x = c.arg(0, "x")
        device = c.arg(1, "device")
        if device is None:
            if c.node.keywords or len(c.node.args) != 1:
                return None
            size = host_array_size(self.facts, x, c.scope, c.node)
            if size is None or size[0] < THRESHOLD:
                return None
            return (f"`jax.device_put` with no sharding puts this {_bytes(size)} host array on "
                    f"device 0 alone, even under `jax.set_mesh`; pass a `NamedSharding`")
        if single_device(self.facts, device, c.scope) is None:
            return None
        what = model_state(self.facts, self.project, x, c.scope)
        if what is None:
            size = host_array_size(self.facts, x, c.scope, c.node)
            if size is None or size[0] < THRESHOLD:
                return None
            what = f"this {_bytes(size)} array"
        return (f"`jax.device_put` onto `{self.text(device)}` puts {what} whole on one device, "
                f"undoing any sharding it had; pass a `NamedSharding` over the mesh")

    def _jnp(self, c: CallSite) -> str | None:
        if c.has_kwarg(*_PLACING):
            return None
        if c.api.name in JNP_CREATORS:  # type: ignore[union-attr]
            size = creation_size(self.facts, c.node, c.scope)
        else:
            size = converted_size(self.facts, c.node, c.scope)
        if size is None or size[0] < THRESHOLD:
            return None
        short = f"{self.text(c.node.func)}(...)"
        if "mesh" in lexical_contexts(self.facts, c.node, c.scope):
            return (f"`{short}` without `device=` or `out_sharding=` makes {_bytes(size)} that "
                    f"`jax.set_mesh` replicates: a full copy on every device; create it with a "
                    f"sharding")
        return (f"`{short}` without `device=` or `out_sharding=` puts {_bytes(size)} on device 0 "
                f"alone; create it with a sharding (`device=NamedSharding(mesh, spec)`)")


def _bytes(size: tuple[int, bool]) -> str:
    n, exact = size
    return mib(n) if exact else f"at least {mib(n)}"
