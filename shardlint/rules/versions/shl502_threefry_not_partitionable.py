"""SHL502 threefry-not-partitionable."""

from __future__ import annotations

import ast

from shardlint.rules.base import Edit, Fix, Related, Rule, example, register
from shardlint.semantics.file.config_flags import UNKNOWN, flag_settings
from shardlint.semantics.file.facts import CallSite
from shardlint.semantics.file.jit_sites import is_sharded, sharded_jit_calls
from shardlint.semantics.flow.models import project_uses_mesh
from shardlint.semantics.flow.project import ProjectIndex, project_cached
from shardlint.source import Span

FLAG = "jax_threefry_partitionable"
DEFAULT_TRUE = "0.5.0"  # jax release that made the flag default to True
# The first release that defines the flag (read from the releases' `jax/_src/config.py`: 0.3.23
# has no `jax_threefry_partitionable`, 0.3.24 defines it); before it, updating it raises.
FLAG_ADDED = "0.3.24"
# `jax.random` calls that make, split or convert keys rather than draw the numbers of an array
KEY_CALLS = frozenset({"PRNGKey", "key", "split", "fold_in", "clone", "key_data",
                       "wrap_key_data"})


@project_cached
def _flag_set_true_somewhere(project: ProjectIndex) -> bool:
    """Some file sets the flag to True, or to a value shardlint cannot read."""
    return any(v is True or v == 1 or v == UNKNOWN
               for s in project.summaries.values() for v in s.flags.get(FLAG, []))


# A helper module whose function compiles an initialiser with `out_shardings` (JAXSeq's
# shard_model.py shape): the key its callers pass is drawn from under a sharded jit.
_SHARD = """
import jax
from jax.experimental.pjit import pjit


def init_weights(model, rng):
    return model.init(rng, jax.numpy.ones((1, 16)))


def shard_params(model, rng, shardings):
    def init_fn(rng):
        return init_weights(model, rng)
    return pjit(init_fn, out_shardings=shardings)(rng)
"""


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
* on jax < 0.5.0 (the versions of the folder the file belongs to: the nearest pins above it),
  where `False` is the default, when no file of the project sets the flag to `True`: the first
  `jax.random` call of each file whose numbers are generated under a jit given `in_shardings`
  or `out_shardings` (pjit's `in_axis_resources`/`out_axis_resources` too); the first draw
  (`normal`, `categorical`, ...) where there is one, else the first call that makes keys. That
  is a call inside the function such a jit compiles, or in a project function that function
  reaches (at any depth, across modules: a call of it, an object built there, which runs its
  `__init__` and `__call__`, or a method called on a parameter annotated with a class, such as
  `model: FlaxPreTrainedModel` and `model.generate(...)`, which is that method of each project
  class deriving from it); or the call that makes a key (`PRNGKey`, `key`, `split`, ... bound
  to a name, an item of a split, either branch of a conditional) handed to a call of such a
  jit, or to a parameter of a project function that hands it on there (any depth, across
  modules: `train.py`'s key passed to `load_state(rng=...)` that passes it to
  `shard_params(rng)` that calls `pjit(init_fn, out_shardings=s)(rng)`). The related location
  is the jit.

Not flagged: the flag set to `True` (or to a value computed at run time); other flags
(`jax_enable_x64`, `jax_default_prng_impl`); random numbers not known to be generated under a
jit with shardings (an eager `jax.random.permutation` of data indices, a key only split or
placed, a draw in a function no such jit is known to trace: on the real-code corpus the
version case flagged at the first random call of each file was wrong 5 times of 7, at eager
draws, pmap-only or one-device programs); single-device projects (no mesh anywhere),
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
The flag exists since jax 0.3.24 and defaults to `True` since jax 0.5.0, so the version case only
applies to projects on older jax; where the project runs (or its pins allow) a jax older than
0.3.24, the advice says to require 0.3.24 first (updating a flag jax does not define raises).
The explicit `False` is reported on every version.
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
        example("""
            import jax
            mesh = jax.make_mesh((8,), ("data",))

            def dropout(key, x, rate):
                key, sub = jax.random.split(key)
                keep = jax.random.bernoulli(sub, 1.0 - rate, x.shape)
                return jax.numpy.where(keep, x / (1.0 - rate), 0.0)

            def shuffled(key, n):
                return jax.random.permutation(key, n).tolist()

            order = shuffled(jax.random.PRNGKey(0), 1000)
        """, title="old jax: draws not known to run under a jit with shardings (a helper, an "
                   "eager permutation of data indices)", jax="0.4.28"),
        example({
            "shard.py": _SHARD,
            "train.py": """
                import jax
                import numpy as np
                from jax.sharding import Mesh
                from shard import init_weights

                mesh = Mesh(np.array(jax.devices()), ("fsdp",))
                step = jax.jit(lambda k, x: jax.random.normal(k, x.shape) + x)
                params = init_weights(None, jax.random.PRNGKey(0))
                y = step(jax.random.PRNGKey(1), np.ones((4, 4)))
            """,
        }, title="old jax: keys handed to a function that runs no jit with shardings and to a "
                 "jit without them", jax="0.4.7"),
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
        example({
            "shard.py": _SHARD,
            "load.py": """
                import jax
                from shard import shard_params

                def load_state(model, mesh, shardings, prng_key: jax.Array | None = None):
                    return shard_params(model, prng_key, shardings)
            """,
            "train.py": """
                import jax
                import numpy as np
                from jax.sharding import Mesh
                from load import load_state

                mesh = Mesh(np.array(jax.devices()), ("fsdp",))

                def main(model, shardings, seed=None):
                    model_key = seed if seed is not None else jax.random.PRNGKey(2)  # expect: SHL502
                    return load_state(model, mesh, shardings, prng_key=model_key)
            """,
        }, title="old jax: a key handed through two modules' parameters to "
                 "`pjit(init_fn, out_shardings=...)`", jax="0.4.7"),
        example("""
            import functools
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P
            mesh = jax.make_mesh((8,), ("model",))

            @functools.partial(jax.jit, out_shardings=NamedSharding(mesh, P("model")))
            def init(key):
                key, sub = jax.random.split(key)
                return jax.random.normal(sub, (8192, 4096))  # expect: SHL502

            def restart(key=None):
                key = key if key is not None else jax.random.PRNGKey(0)
                return init(key)
        """, title="old jax: inside a decorated jit with shardings (the file's first draw, "
                   "before the keys that reach it)", jax="0.4.30"),
        example({
            "model.py": """
                import jax
                from transformers import FlaxPreTrainedModel

                class Mixin:
                    def generate(self, params, key, n):
                        key, sub = jax.random.split(key)
                        return jax.random.categorical(sub, self.logits(params, n))  # expect: SHL502

                class LM(Mixin, FlaxPreTrainedModel):
                    @classmethod
                    def from_seed(cls, seed):
                        return cls(jax.random.PRNGKey(seed))

                    def init_weights(self, rng, shape):
                        params_rng, dropout_rng = jax.random.split(rng)
                        return self.module.init({"params": params_rng, "dropout": dropout_rng},
                                                jax.numpy.zeros(shape))
            """,
            "serve.py": """
                import functools
                import jax
                from jax.experimental.pjit import pjit
                from jax.sharding import Mesh, PartitionSpec as PS
                from transformers.modeling_flax_utils import FlaxPreTrainedModel

                def load(model: FlaxPreTrainedModel, devices, specs):
                    mesh = Mesh(devices, ("fsdp",))

                    @functools.partial(pjit, in_shardings=(specs, PS(), PS()),
                                       out_shardings=PS())
                    def sample(params, key, n):
                        return model.generate(params, key, n)
                    with mesh:
                        return sample
            """,
        }, title="old jax: a draw in a method of the project's model, called on a parameter "
                 "annotated with its library base class inside a pjit with shardings",
           jax="0.4.7"),
        example({
            "rng.py": """
                import jax

                class Rng:
                    @classmethod
                    def from_seed(cls, seed):
                        return cls(jax.random.PRNGKey(seed))

                    def __init__(self, key):
                        self.key = key

                    def __call__(self):
                        self.key, sub = jax.random.split(self.key)  # expect: SHL502
                        return sub
            """,
            "train.py": """
                import jax
                from jax.sharding import NamedSharding, PartitionSpec as P
                from rng import Rng
                mesh = jax.make_mesh((8,), ("data",))

                def step(params, key, batch):
                    rng = Rng(key)
                    return params, batch, rng()

                train = jax.jit(step, in_shardings=(None, None, NamedSharding(mesh, P("data"))))
            """,
        }, title="old jax: an object built under a jit with shardings runs its `__init__` and "
                 "`__call__` there, not its other methods", jax="0.4.28"),
        example("""
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P
            from model import make_params
            mesh = jax.make_mesh((8,), ("model",))
            init = jax.jit(make_params, out_shardings=NamedSharding(mesh, P("model")))
            keys = jax.random.split(jax.random.PRNGKey(0))  # expect: SHL502
            params = init(keys[0])
        """, title="old jax: an item of a split handed to a jit with shardings of a function "
                   "written elsewhere", jax="0.4.30"),
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
        if switched_off or self.ctx.versions.at_least("jax", DEFAULT_TRUE) \
                or _flag_set_true_somewhere(self.project):
            return
        first = self._first_reaching()
        if first is None:
            return
        node, how, related = first
        versions = self.ctx.versions
        opt_in = f"`jax.config.update(\"{FLAG}\", True)`"
        if not versions.at_least("jax", FLAG_ADDED):  # (the flag does not exist there)
            advice = (f"the flag that opts in needs jax >= {FLAG_ADDED}: require it, then opt "
                      f"in once at start-up with {opt_in}")
            what = f"jax {versions.jax} has no `{FLAG}` flag (its threefry is not partitionable)"
        else:
            what = f"jax {versions.jax} defaults `{FLAG}` to False"
            advice = f"opt in once at start-up with {opt_in} (the default since jax {DEFAULT_TRUE})"
            if versions.may_be_below("jax", FLAG_ADDED):
                advice += (f"; the flag exists from jax {FLAG_ADDED}, and "
                           f"{versions.allowed_by('jax')} allow jax {versions.oldest('jax')}, "
                           f"where updating it raises: require jax >= {FLAG_ADDED} as well")
        yield self.finding(
            node,
            f"{what}: {how}, where the random numbers generated for a sharded array are "
            f"computed in full on every device; {advice}", related=related)

    # ---- the version case: random numbers that reach a jit with shardings -----------------------
    def _first_reaching(self) -> tuple[ast.Call, str, list[Related]] | None:
        """The first `jax.random` call of the file (by place) whose numbers are generated
        under a jit with in/out shardings: inside the function such a jit of this file
        compiles, or a key handed to a call of one, or to a project function's parameter
        that reaches one (``FlowIndex.sharded_jit_params``)."""
        found: list[tuple[ast.Call, str, list[Related]]] = []
        for site in self.facts.jit_sites:
            if not is_sharded(self.facts, site):
                continue
            body = site.function.node if site.function is not None else site.target
            inner = self._random_calls_in(body) if isinstance(
                body, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) else []
            found += [(call, "this random call runs under a jit with in/out shardings",
                       [self.related(site.node, "the jit")]) for call in inner]
        for site, c in sharded_jit_calls(self.facts):
            for a in [*c.node.args, *(k.value for k in c.node.keywords)]:
                key = self._key_made(a, c.scope)
                if key is not None:
                    found.append((key, "this key is handed to a jit with in/out shardings",
                                  [self.related(site.node, "the jit")]))
        summary = self.project.summaries.get(self.facts.module)
        if summary is not None and summary.calls:
            found += self._keys_handed_on(summary)
        found += self._in_traced_functions()
        # (a draw first, where the numbers of an array are generated; else a call that only
        # makes or splits the keys that reach one)
        return min(found, key=lambda f: (self._makes_keys(f[0]), f[0].lineno, f[0].col_offset)) \
            if found else None

    def _makes_keys(self, node: ast.Call) -> bool:
        c = self._calls_by_node().get(id(node))
        return c is not None and c.qualified is not None \
            and c.qualified.rpartition(".")[2] in KEY_CALLS

    def _keys_handed_on(self, summary) -> list[tuple[ast.Call, str, list[Related]]]:
        """Keys made here and handed to a project function's parameter that reaches a jit
        with shardings."""
        flows = self.project.flows
        reach = flows.sharded_jit_params()
        if not reach:
            return []
        edges = {(e.line, e.col): e for e in summary.calls}
        out = []
        for c in self.facts.calls:
            e = edges.get((c.node.lineno, c.node.col_offset))
            target = flows.function(e.target, self.facts.module) if e is not None else None
            if target is None:
                continue
            key, flow = target
            params = flow.get("params") or []
            offset = flow.get("method", 0) if "self" in (e.args or {}) else 0
            handed = [(params[i + offset] if i + offset < len(params) else None, a)
                      for i, a in enumerate(c.node.args) if not isinstance(a, ast.Starred)]
            handed += [(k.arg, k.value) for k in c.node.keywords if k.arg]
            for name, a in handed:
                at = reach.get((key, name)) if name is not None else None
                made = self._key_made(a, c.scope) if at is not None else None
                if made is None:
                    continue
                out.append((made, f"this key reaches a jit with in/out shardings through "
                                  f"`{key.partition(':')[2]}({name}=...)`",
                            self._jit_at(at, "the jit with in/out shardings it reaches")))
        return out

    def _in_traced_functions(self) -> list[tuple[ast.Call, str, list[Related]]]:
        """Random calls in functions of this file that a jit with in/out shardings of the
        project traces: called, at any depth across modules, from the function it compiles
        (``ProjectIndex.traced_under_sharded_jits``)."""
        traced = self.project.traced_under_sharded_jits
        if not traced:
            return []
        out = []
        for c in self.facts.calls:
            scope = c.scope
            if c.qualified is None or not c.qualified.startswith("jax.random.") \
                    or scope.kind != "function":
                continue
            key = f"{self.facts.module}:{scope.qualname}"
            at = traced.get(key)
            if at is None:
                continue
            out.append((c.node, f"this random call runs under a jit with in/out shardings, "
                                f"which traces `{scope.qualname}`",
                        self._jit_at(at, "the jit with in/out shardings that traces it")))
        return out

    def _jit_at(self, at: list, message: str) -> list[Related]:
        """The related location of a jit kept as ``[module, line, col, end_line, end_col]``."""
        module, line, col, end_line, end_col = at
        other = self.project.summaries.get(module)
        return [Related(other.path, Span(line, col, end_line, end_col), message)] \
            if other is not None else []

    def _key_made(self, node: ast.expr, scope) -> ast.Call | None:
        """The `jax.random` call that makes the key an argument is: written there, or bound
        to the name in this scope (either branch of a conditional, an item of a split)."""
        todo = [node]
        seen = 0
        while todo and seen < 8:
            seen += 1
            n = todo.pop()
            if isinstance(n, ast.Subscript):
                todo.append(n.value)
            elif isinstance(n, ast.IfExp):
                todo += [n.body, n.orelse]
            elif isinstance(n, ast.Call):
                c = self._calls_by_node().get(id(n))
                if c is not None and c.qualified is not None \
                        and c.qualified.startswith("jax.random."):
                    return n
            elif isinstance(n, ast.Name):
                found = scope.lookup(n.id)
                if found is not None:
                    todo += [v for v in found[1] if isinstance(v, ast.expr)]
        return None

    def _random_calls_in(self, fn: ast.AST) -> list[ast.Call]:
        """The `jax.random` calls inside a function (or lambda), by place."""
        start = (fn.lineno, fn.col_offset)
        end = (fn.end_lineno or fn.lineno, fn.end_col_offset or 0)
        return sorted((c.node for c in self.facts.calls
                       if c.qualified is not None and c.qualified.startswith("jax.random.")
                       and start < (c.node.lineno, c.node.col_offset) < end),
                      key=lambda n: (n.lineno, n.col_offset))

    def _calls_by_node(self) -> dict[int, CallSite]:
        held = self.facts.derived.get("calls_by_node")
        if held is None:
            held = self.facts.derived["calls_by_node"] = {id(c.node): c for c in self.facts.calls}
        return held  # type: ignore[return-value]
