"""SHL306 closure-captured-array."""

from __future__ import annotations

from shardlint.rules.base import Rule, example, register
from shardlint.semantics.buffers.captures import Capture, captured_arrays
from shardlint.semantics.file.jit_sites import LINEN_JIT

# Below this many elements (1 MiB as float32) a captured constant costs nothing worth a warning.
SMALL_ELEMENTS = 1 << 18


@register
class ClosureCapturedArray(Rule):
    code = "SHL306"
    name = "closure-captured-array"
    severity = "warning"
    summary = "A jitted function reads a large array from its enclosing scope: it is baked in as a replicated constant."
    what = """
Flags a name that a jitted function (`@jax.jit`, `jax.jit(f)`, `jax.jit(lambda x: x @ W)`,
`partial(jax.jit, ...)`, `pjit`, `nnx.jit`) reads from outside itself -- module level or an
enclosing function -- when that name is bound to an array: a `jnp` constructor (`jnp.zeros`,
`jnp.asarray`, `jnp.arange`, ...), a NumPy array (`np.ones`, `np.load`, `np.random.rand`, ...),
`jax.device_put(...)` or a `jax.random` sample. The finding is on the first read inside the
function.

Not flagged: arrays whose literal shape is small (fewer than 262,144 elements, 1 MiB as
float32), also when built from other arrays of literal shape (`jnp.asarray(np.arange(64))`,
`jnp.tile`, `jnp.concatenate`, `jnp.broadcast_to`, `jnp.zeros_like`, `x[None, :]`) or sized by
one (`jnp.arange(ids.shape[1])` where `ids = jax.random.randint(key, (2, 16), 0, n)`), and literal tables (`MEAN = jnp.array([0.485, 0.456, 0.406])`); scalars and PRNG keys
(`jax.random.key(0)`); names read only for metadata (`W.shape`, `W.dtype`, `len(W)`); arrays
passed as arguments; names bound to anything else, or to a parameter of an enclosing function
(shardlint cannot see what they hold); `self.w` attributes.
"""
    why = """
`jit` turns every array it finds in a closure into a constant of the compiled program. The
constant ignores the array's sharding -- each device gets the full copy -- it cannot be donated,
and it is embedded again in every executable compiled from the function. Measured with 8
devices: a 64 MiB `W` closed over by `jax.jit(lambda x: x @ W)` needs 64 MiB of temporary memory
on every device, even when `W` itself was placed with `NamedSharding(mesh, P(None, "model"))`;
passed as an argument it costs 8 MiB per device. On one device the constant is a second copy
next to the array itself (16 MiB of temporaries for a 16 MiB array).
"""
    use_instead = """
```python
W = jax.device_put(big, NamedSharding(mesh, P(None, "model")))
f = jax.jit(lambda x, w: x @ w)        # take it as an argument...
y = f(x, W)                            # ...and pass it at the call
```
"""
    fix_safety = "No automatic fix: moving the array into the signature changes every call site."
    versions = "All versions of jax."
    VALID = [
        example("""
            import jax
            import jax.numpy as jnp

            W = jnp.ones((4096, 4096))
            f = jax.jit(lambda x, w: x @ w)
            y = f(jnp.ones((8, 4096)), W)
        """, title="passed as an argument"),
        example("""
            import jax
            import jax.numpy as jnp

            MEAN = jnp.array([0.485, 0.456, 0.406])
            EPS = 1e-6
            SCALE = jnp.float32(0.5)
            TABLE = jnp.zeros((16, 16))

            @jax.jit
            def normalize(x):
                return (x - MEAN) * SCALE / (TABLE.sum() + EPS)
        """, title="scalars, literal tables and small literal shapes"),
        example("""
            import jax
            import jax.numpy as jnp

            W = jnp.ones((4096, 4096))
            KEY = jax.random.key(0)

            @jax.jit
            def init(x):
                noise = jax.random.normal(KEY, x.shape)      # a key: two integers
                return x.reshape(W.shape[0], -1) + noise     # W's shape, not its data
        """, title="PRNG keys and metadata reads"),
        example("""
            import jax

            def make_step(table):
                @jax.jit
                def step(x):
                    return x @ table                           # a parameter of the factory
                return step
        """, title="bound to a parameter: not visible"),
        example("""
            import jax
            import jax.numpy as jnp

            W = jnp.ones((4096, 4096))

            @jax.jit
            def f(x, W):
                return x @ W                                   # the parameter shadows W
        """, title="a parameter with the same name"),
        example("""
            import jax
            import jax.numpy as jnp
            import numpy as np

            IDS = jnp.arange(64, dtype=jnp.int32)
            GRID = jnp.asarray(np.random.rand(8, 8))
            MASK = jnp.concatenate([jnp.zeros(32), jnp.ones(32)])
            TILED = jnp.tile(jnp.arange(8), 8)
            ROWS = jnp.broadcast_to(jnp.arange(8), (8, 8))

            @jax.jit
            def mix(x):
                return x + IDS + GRID + MASK + TILED + ROWS.ravel()
        """, title="64-element arrays built from other small arrays"),
        example("""
            import jax
            import jax.numpy as jnp

            def check_decode(model):
                ids = jax.random.randint(jax.random.key(0), (2, 16), 0, 100)
                pos = jnp.tile(jnp.arange(ids.shape[1])[None, :], (ids.shape[0], 1))

                @jax.jit
                def decode(params, tokens):
                    return model.apply(params, tokens, pos)
                return decode(model.params, ids)
        """, title="sized by the literal shape of another array (32 elements)"),
    ]
    INVALID = [
        example("""
            import jax
            import jax.numpy as jnp

            def check_decode(model):
                ids = jax.random.randint(jax.random.key(0), (64, 8192), 0, 100)
                pos = jnp.tile(jnp.arange(ids.shape[1])[None, :], (ids.shape[0], 1))

                @jax.jit
                def decode(params, tokens):
                    return model.apply(params, tokens, pos)  # expect: SHL306
                return decode(model.params, ids)
        """, title="the same, 524,288 elements"),
        example("""
            import jax
            import jax.numpy as jnp

            W = jnp.ones((4096, 4096))
            f = jax.jit(lambda x: x @ W)  # expect: SHL306
        """, title="a lambda closing over a 64 MiB constant"),
        example("""
            import jax
            import numpy as np
            from jax.sharding import NamedSharding, PartitionSpec as P

            mesh = jax.make_mesh((8,), ("model",))
            W = jax.device_put(np.load("emb.npy"), NamedSharding(mesh, P(None, "model")))

            @jax.jit
            def embed(tokens):
                return W[tokens]  # expect: SHL306
        """, title="a sharded array: the sharding is ignored"),
        example("""
            import functools
            import jax
            import numpy as onp

            def build(n):
                table = onp.random.randn(1024, 1024)

                @functools.partial(jax.jit, static_argnums=1)
                def lookup(idx, k):
                    return table[idx] * k  # expect: SHL306
                return lookup
        """, title="NumPy array in an enclosing function"),
        example("""
            import jax
            from flax import nnx

            noise = jax.random.normal(jax.random.key(0), (8192, 1024))

            @nnx.jit
            def forward(model, x):
                return model(x + noise)  # expect: SHL306
        """, title="a random sample under nnx.jit"),
        example("""
            import jax
            import jax.numpy as jnp

            positions = jnp.arange(num_tokens)    # size unknown

            @jax.jit
            def add_positions(x):
                return x + positions  # expect: SHL306
        """, title="a shape shardlint cannot read"),
        example("""
            import jax
            import jax.numpy as jnp
            import numpy as np

            TABLE = jnp.asarray(np.zeros((4096, 4096), np.float32))

            @jax.jit
            def lookup(ids):
                return TABLE[ids]  # expect: SHL306
        """, title="a 64 MiB NumPy array converted with jnp.asarray"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        return bool(facts.jit_sites)

    def check(self):
        seen: set[tuple[int, str]] = set()
        for site in self.facts.jit_sites:
            if site.api_name == LINEN_JIT:
                continue
            for cap in captured_arrays(self.facts, site):
                key = (id(cap.function), cap.name)
                if key in seen:
                    continue
                seen.add(key)
                n = cap.source.elements
                if n is not None and n < SMALL_ELEMENTS:
                    continue
                created = self.related(cap.source.call, f"`{cap.name}` is created here")
                yield self.finding(cap.use, self._message(cap), related=[created])

    def _message(self, cap: Capture) -> str:
        n = cap.source.elements
        where = "at module level" if cap.owner.kind == "module" else f"in `{cap.owner.qualname}`"
        size = f"{n:,} elements, {n * 4 / 2**20:.0f} MiB as float32" if n is not None \
            else "size not known statically"
        ctor = cap.source.api.replace("jax.numpy.", "jnp.").replace("numpy.", "np.")
        return (f"`{cap.name}` is an array ({ctor}, {size}) created {where} on line "
                f"{cap.source.call.lineno} and read here from the enclosing scope: jit bakes it "
                f"into the program as a constant -- a full copy on every device whatever its "
                f"sharding, never donated, embedded again in every compilation; pass it as an "
                f"argument instead")
