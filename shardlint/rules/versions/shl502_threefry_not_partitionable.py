"""SHL502 threefry-not-partitionable."""

from __future__ import annotations

from shardlint.rules.base import Edit, Fix, Rule, example, register
from shardlint.semantics.file.config_flags import UNKNOWN, flag_settings
from shardlint.semantics.file.facts import CallSite
from shardlint.semantics.flow.models import project_uses_mesh
from shardlint.semantics.flow.project import ProjectIndex, project_cached

FLAG = "jax_threefry_partitionable"
DEFAULT_TRUE = "0.5.0"  # jax release that made the flag default to True


@project_cached
def _flag_set_true_somewhere(project: ProjectIndex) -> bool:
    """Some file sets the flag to True, or to a value shardlint cannot read."""
    return any(v is True or v == 1 or v == UNKNOWN
               for s in project.summaries.values() for v in s.flags.get(FLAG, []))


# `jax.random` functions that make or split keys: they draw no random bits of an array's size.
KEY_ONLY = frozenset({"PRNGKey", "key", "split", "fold_in", "key_data", "wrap_key_data", "clone",
                      "key_impl", "default_prng_impl"})


@register
class ThreefryNotPartitionable(Rule):
    code = "SHL502"
    name = "threefry-not-partitionable"
    severity = "warning"
    summary = "Random numbers are not partitionable: every device generates the whole array's bits."
    what = """
In a project that builds or enters a mesh, flags:

* `jax.config.update("jax_threefry_partitionable", False)` (also through
  `from jax import config`), at the value;
* in preview only (`--preview`, `preview = true`: on the real-code corpus it was wrong 5 times of
  7 -- a stale pin, pmap-only or one-device programs, draws outside jit or inside `shard_map`):
  on jax < 0.5.0 (the versions of the folder the file belongs to: the nearest pins above it),
  where `False` is the default, the first `jax.random` call of each file that draws random
  bits (`normal`, `uniform`, `bernoulli`, an initializer, ...) when no file of the project sets
  the flag to `True`.

Not flagged: the flag set to `True` (or to a value computed at run time); other flags
(`jax_enable_x64`, `jax_default_prng_impl`); making or splitting keys (`PRNGKey`, `key`,
`split`, `fold_in`), which draws no array of bits; single-device projects (no mesh anywhere),
where the flag changes the random stream but not the memory; test files, by the default of
`test-ignore` (they pin the random stream on purpose and run on one device).
"""
    why = """
With the flag off, a random array generated under `jit` for a sharded output is not split
between devices: each device runs the generator for the whole array and keeps its slice. Measured
on 8 devices for a 128 MiB `jax.random.normal` with `out_shardings` split 8 ways: temporary
memory 136 MiB per device with the flag off against 48 MiB with it on (the output is 16 MiB per
device either way). Sharded initialisation of a large model pays this for every parameter.
"""
    use_instead = """
```python
# jax >= 0.5.0: the default is already True -- delete the override.
# jax < 0.5.0: opt in once at start-up, before any random number is drawn.
jax.config.update("jax_threefry_partitionable", True)
```
"""
    fix_safety = """
Unsafe: turning the flag on changes the random numbers a given key produces (the bits are
generated per shard), so runs stop being bit-for-bit reproducible against older runs or
checkpoints seeded the old way. The fix rewrites `False` to `True` in the `jax.config.update`
call; the version case has no automatic fix (where to opt in is the project's start-up code).
"""
    versions = """
The flag exists since jax 0.4.x and defaults to `True` since jax 0.5.0, so the version case only
applies to projects on older jax. The explicit `False` is reported on every version.
"""
    VALID = [
        example("""
            import jax
            jax.config.update("jax_threefry_partitionable", True)
            mesh = jax.make_mesh((8,), ("data",))
        """, title="opting in"),
        example("""
            import jax
            # One device, no mesh: the flag only picks the random stream.
            jax.config.update("jax_threefry_partitionable", False)
            x = jax.random.normal(jax.random.key(0), (1024, 1024))
        """, title="a single-device project"),
        example("""
            import jax
            jax.config.update("jax_enable_x64", False)
            jax.config.update("jax_default_prng_impl", "rbg")
            mesh = jax.make_mesh((8,), ("data",))
        """, title="other flags"),
        example("""
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P
            mesh = jax.make_mesh((8,), ("model",))
            init = jax.jit(lambda k: jax.random.normal(k, (8192, 4096)),
                           out_shardings=NamedSharding(mesh, P("model")))
            w = init(jax.random.key(0))
        """, title="jax >= 0.5.0: partitionable by default"),
        example({
            "main.py": """
                import jax
                jax.config.update("jax_threefry_partitionable", True)
                mesh = jax.make_mesh((8,), ("data",))
            """,
            "model.py": """
                import jax
                def init(key):
                    return jax.random.normal(key, (8192, 4096))
            """,
        }, title="old jax, opted in once in another file", jax="0.4.30"),
        example("""
            import jax
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
            import numpy as np

            class Engine:
                def __init__(self, devices):
                    self.mesh = Mesh(np.array(devices), ("x",))
                    key = jax.random.key(0)
                    self.key = jax.device_put(key, NamedSharding(self.mesh, P()))

                def next_keys(self):
                    self.key, sub = jax.random.split(self.key)
                    return sub
        """, title="old jax, keys made and split only: no array of bits drawn", jax="0.4.33"),
    ]
    INVALID = [
        example("""
            import jax
            jax.config.update("jax_threefry_partitionable", False)  # expect: SHL502
            mesh = jax.make_mesh((8,), ("data",))
        """, title="switched off in a sharded project"),
        example("""
            from jax import config
            from jax.sharding import Mesh
            import jax
            import numpy as np
            config.update("jax_threefry_partitionable", False)  # expect: SHL502
            mesh = Mesh(np.array(jax.devices()), ("model",))
        """, title="through `from jax import config`"),
        example("""
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P
            mesh = jax.make_mesh((8,), ("model",))
            init = jax.jit(lambda k: jax.random.normal(k, (8192, 4096)),  # expect: SHL502
                           out_shardings=NamedSharding(mesh, P("model")))
        """, title="jax < 0.5.0 defaults to False", jax="0.4.30"),
        example("""
            import jax
            mesh = jax.make_mesh((8,), ("data",))

            def dropout(key, x, rate):
                key, sub = jax.random.split(key)
                keep = jax.random.bernoulli(sub, 1.0 - rate, x.shape)  # expect: SHL502
                return jax.numpy.where(keep, x / (1.0 - rate), 0.0)
        """, title="old jax: the first call that draws bits, after a key split", jax="0.4.28"),
        example({
            "main.py": """
                import jax
                mesh = jax.make_mesh((8,), ("data",))
            """,
            "rng.py": """
                import jax
                OFF = False
                jax.config.update("jax_threefry_partitionable", OFF)  # expect: SHL502
            """,
        }, title="the mesh lives in another file"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        prefixes = ("jax.config.", "jax.random.")
        return any(q.startswith(prefixes) for q in facts.called_names())

    def check(self):
        if not project_uses_mesh(self.project):
            return
        switched_off = False
        for s in flag_settings(self.facts):
            if s.name != FLAG or s.value is UNKNOWN or s.value not in (False, 0) \
                    or isinstance(s.value, str):
                continue
            switched_off = True
            text = self.text(s.value_node)
            yield self.finding(
                s.value_node,
                f"`{FLAG}` is switched off: under jit every device generates the random bits "
                f"of the whole array and keeps its slice; it is `True` by default "
                f"since jax {DEFAULT_TRUE}",
                fix=Fix(f"Replace `{text}` with `True` (changes the random streams)", "unsafe",
                        (Edit(self.span(s.value_node), "True"),)))
        # (preview: the version case -- the default left off on jax < 0.5.0 -- was wrong 5 times
        # of 7 on the real-code corpus: stale pins, pmap-only or one-device programs, draws
        # outside jit or inside shard_map)
        if switched_off or not self.ctx.preview or self.ctx.versions.at_least("jax", DEFAULT_TRUE) \
                or _flag_set_true_somewhere(self.project):
            return
        first = self._first_random_call()
        if first is not None:
            yield self.finding(
                first.node,
                f"jax {self.ctx.versions.jax} defaults `{FLAG}` to False: random numbers "
                f"generated under jit for a sharded array are computed in full on every device; "
                f"opt in once at start-up with `jax.config.update(\"{FLAG}\", True)` (the "
                f"default since jax {DEFAULT_TRUE})")

    def _first_random_call(self) -> CallSite | None:
        calls = [c for c in self.facts.calls
                 if c.qualified is not None and c.qualified.startswith("jax.random.")
                 and c.qualified.rpartition(".")[2] not in KEY_ONLY]
        return min(calls, key=lambda c: (c.node.lineno, c.node.col_offset)) if calls else None
