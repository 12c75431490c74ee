"""SHL302 jit-init-without-out-shardings."""

from __future__ import annotations

import ast

from shardlint.rules._versions import out_shardings_note, set_mesh_note
from shardlint.rules.base import Rule, example, register
from shardlint.semantics.catalog import facts as releases
from shardlint.semantics.catalog.api import SET_MESH_ADDED, Role
from shardlint.semantics.file.dataflow import LocalFlow, own_nodes
from shardlint.semantics.file.execution import compiled_function
from shardlint.semantics.file.facts import JitSite, Scope
from shardlint.semantics.file.jit_sites import PLACEMENT_KEYWORDS, jit_keywords, unplaced_jit_sites
from shardlint.semantics.flow.models import (
    is_train_state_create,
    linen_instance,
    project_uses_mesh,
    project_uses_partitioning,
)
from shardlint.syntax import walk_body

INIT_METHODS = ("init", "init_with_output")
# Keywords that place the outputs (`out_axis_resources`: pjit before jax 0.4.x).
_CONSTRAINTS = (Role.SHARDING_CONSTRAINT, Role.LOGICAL_CONSTRAINT)
_CONTAINERS = frozenset({"flax.core.freeze", "flax.core.unfreeze", "flax.core.frozen_dict.freeze",
                         "flax.core.frozen_dict.unfreeze", "flax.linen.unbox",
                         "flax.core.meta.unbox"})

_MODEL = """
import jax
import flax.linen as nn

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        return nn.Dense(4096, kernel_init=init)(x)
"""


@register
class JitInitWithoutOutShardings(Rule):
    code = "SHL302"
    name = "jit-init-without-out-shardings"
    severity = "warning"
    summary = "Model init is jitted without `out_shardings`: the parameters land on one device or on every device."
    what = """
Flags, in a project that uses a mesh or Flax partitioning, a jit site (`jax.jit`, `@jax.jit`,
`partial(jax.jit, ...)`, `pjit`, `nnx.jit`) without `out_shardings` that compiles a Linen
`model.init` / `model.init_with_output` (`jax.jit(model.init)`, `jax.jit(lambda k: model.init(k,
x))`), or a function whose returned value comes from `model.init(...)` or `TrainState.create(...)`
(flax's or a project subclass).

Not flagged: code of a program that never shards (a conversion script, a one-device benchmark, a
pmap example: neither it nor what it imports builds or enters a mesh or rules; for a test, a
benchmark or an example, its own files); `jax.eval_shape(model.init, ...)`; a function that
places its outputs itself with
`jax.lax.with_sharding_constraint` / `nn.with_logical_constraint` / `jax.device_put(x,
sharding)`; a function that another jit site of the file compiles with `out_shardings` (the
Flax guide's pattern: a decorated `init_fn` feeds `jax.eval_shape`, then `jax.jit(init_fn,
out_shardings=...)` does the real init); `jax.jit(tx.init)` of an optax transformation (that is
SHL303); projects with neither a mesh nor partitioning.
"""
    why = """
A jitted function's outputs go wherever XLA's propagation puts them unless `out_shardings` says
otherwise, and inside `init` the constrained values are often dead code. Reproduced on 8
devices: with no mesh all outputs sit on device 0 (64 MiB on one device); under `jax.set_mesh`
without rules every device holds a full copy; with rules and mesh the result depends on the
model (sharded for the seed's `nn.vmap` ensemble, fully replicated for a plain Dense). Compiled
ahead of time the init output is 64 MiB per device without `out_shardings` against 8 MiB with
them on 8 devices, and the temporary RNG buffers shrink from 128 MiB to 16 MiB.
"""
    use_instead = """
```python
abstract = jax.eval_shape(model.init, key, x)                      # boxed, no allocation
shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, rules)
with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    variables = jax.jit(model.init, out_shardings=shardings)(key, x)
```
"""
    versions = """
All versions of jax and flax. The message holds at every release the project may run: where its
pins allow a jax whose `jax.jit` takes no `out_shardings` (before 0.4.4: pjit's
`out_axis_resources`), a flax without `nn.get_sharding` (before 0.6.9) or a jax without
`jax.set_mesh` (before 0.7.1), it says so.
"""
    VALID = [
        example({
            "examples/wmt/main.py": """
                from train import main

                main()
            """,
            "examples/wmt/train.py": """
                import jax
                import flax.linen as nn
                from flax import jax_utils

                class Transformer(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        return nn.Dense(512)(x)

                def main():
                    params = jax.jit(Transformer().init)(jax.random.key(0), jax.numpy.ones((8, 512)))
                    params = jax_utils.replicate(params)   # one copy per device, for pmap
                    return jax.pmap(lambda p, x: x)(params, params)
            """,
            "lib/layers.py": """
                import jax
                import flax.linen as nn

                def make_mesh():
                    return jax.make_mesh((8,), ("data",))

                def dense(x):
                    return nn.with_logical_constraint(nn.Dense(8)(x), ("batch", "mlp"))
            """,
        }, title="an example that never shards: replicated on purpose for pmap"),
        example(_MODEL + """
model = MLP()
rules = (("embed", None), ("mlp", "data"))
mesh = jax.make_mesh((8,), ("data",))
abstract = jax.eval_shape(model.init, jax.random.key(0), jax.numpy.ones((8, 1024)))
shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, rules)
with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    variables = jax.jit(model.init, out_shardings=shardings)(jax.random.key(0), jax.numpy.ones((8, 1024)))
"""),
        example(_MODEL + """
import optax

tx = optax.adamw(1e-3)
params = {"w": jax.numpy.zeros((1024, 4096))}
with jax.set_mesh(jax.make_mesh((8,), ("data",))):
    opt_state = jax.jit(tx.init)(params)   # an optax transformation: SHL303's business
"""),
        example("""
import jax
import flax.linen as nn

model = nn.Dense(16)
params = jax.jit(model.init)(jax.random.key(0), jax.numpy.ones((1, 4)))   # no mesh, no partitioning
""", title="single-device project"),
        example(_MODEL + """
from jax.sharding import NamedSharding, PartitionSpec as P

model = MLP()
mesh = jax.make_mesh((8,), ("data",))

@jax.jit
def create(key, x):
    variables = model.init(key, x)
    return jax.lax.with_sharding_constraint(variables, NamedSharding(mesh, P()))
""", title="the function places its outputs itself"),
        example(_MODEL + """
from jax.sharding import NamedSharding

model = MLP()
mesh = jax.make_mesh((8,), ("data",))

@jax.jit
def create_variables(key, x):
    variables = nn.unbox(model.init(key, x))
    specs = nn.logical_to_mesh(nn.get_partition_spec(model.init(key, x)), (("mlp", "data"),))
    return jax.tree.map(
        lambda p, s: jax.lax.with_sharding_constraint(p, NamedSharding(mesh, s)), variables, specs)
""", title="outputs placed by a constraint mapped over the tree (the seed discussion's answer)"),
        example(_MODEL + """
from functools import partial
from flax.training import train_state

model = MLP()
mesh = jax.make_mesh((8,), ("data",))

@partial(jax.jit, static_argnums=1, out_shardings=None)
def create(key, tx):
    params = model.init(key, jax.numpy.ones((8, 1024)))["params"]
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)
""", title="out_shardings given (even None is a decision)"),
        example(_MODEL + """
import functools
import optax
from flax.training import train_state

@functools.partial(jax.jit, static_argnames=("model", "tx"))
def init_fn(key, x, model, tx):
    variables = model.init(key, x)
    return train_state.TrainState.create(apply_fn=model.apply, params=variables["params"], tx=tx)

model, tx = MLP(), optax.adam(1e-3)
mesh = jax.make_mesh((8,), ("data",))
key, x = jax.random.key(0), jax.numpy.ones((8, 1024))
abstract = jax.eval_shape(functools.partial(init_fn, model=model, tx=tx), key, x)
state_sharding = nn.get_sharding(abstract, mesh)
sharded_init = jax.jit(init_fn, static_argnums=(2, 3), out_shardings=state_sharding)
state = sharded_init(key, x, model, tx)
""", title="decorated for eval_shape, compiled again with out_shardings"),
        example(_MODEL + """
import optax

def make(kind):
    if kind == "model":
        return MLP()
    return optax.adam(1e-3)

thing = make("tx")
mesh = jax.make_mesh((8,), ("data",))
state = jax.jit(thing.init)(jax.numpy.zeros((8, 1024)))   # a model or an optimizer: not known
""", title="a helper that returns a model on one path and an optimizer on another"),
    ]
    INVALID = [
        example(_MODEL + """
model = MLP()
with jax.set_mesh(jax.make_mesh((8,), ("data",))), nn.logical_axis_rules((("mlp", "data"),)):
    variables = jax.jit(model.init)(jax.random.key(0), jax.numpy.ones((8, 1024)))  # expect: SHL302
"""),
        example(_MODEL + """
import optax
from flax.training import train_state

model = MLP()
tx = optax.adam(1e-3)
mesh = jax.make_mesh((8,), ("data",))

@jax.jit  # expect: SHL302
def create_state(key):
    params = model.init(key, jax.numpy.ones((8, 1024)))["params"]
    return train_state.TrainState.create(apply_fn=model.apply, params=params, tx=tx)
""", title="a jitted create-state function"),
        example("""
import functools
import jax
from flax import linen as ln
from flax.training import train_state

class TrainState(train_state.TrainState):
    batch_stats: dict

def create(key, model, tx):
    variables = model.init(key, jax.numpy.ones((8, 32)))
    return TrainState.create(apply_fn=model.apply, params=variables["params"],
                             batch_stats=variables["batch_stats"], tx=tx)

mesh = jax.make_mesh((4,), ("data",))
state = jax.jit(create, static_argnums=(1, 2))(jax.random.key(0), ln.BatchNorm(), None)  # expect: SHL302
""", title="a project TrainState subclass, call form"),
        example({
            "model.py": _MODEL,
            "train.py": """
import jax
import jax.experimental.pjit
from flax import linen as ln
from model import MLP

model = MLP()
init_fn = jax.experimental.pjit.pjit(lambda k, x: model.init(k, x))  # expect: SHL302
with jax.set_mesh(jax.make_mesh((8,), ("data",))), ln.logical_axis_rules((("mlp", "data"),)):
    variables = init_fn(jax.random.key(0), jax.numpy.ones((8, 1024)))
""",
        }, title="pjit of a lambda, model in another file"),
        example(_MODEL + """
def build():
    ensemble = nn.vmap(MLP, variable_axes={"params": 0}, split_rngs={"params": True},
                       in_axes=None, axis_size=8)
    return ensemble()

def probe():
    model, mesh = build(), jax.make_mesh((8,), ("data",))
    return jax.jit(model.init), (jax.random.key(0), jax.numpy.ones((8, 1024)))  # expect: SHL302
""", title="the model from a helper returning a lifted class, unpacked with the mesh"),
        example({
            "models.py": _MODEL + """
def create_model(config):
    return MLP()
""",
            "train.py": """
import jax
from models import create_model

model = create_model({"size": 8})
mesh = jax.make_mesh((8,), ("data",))
variables = jax.jit(model.init)(jax.random.key(0), jax.numpy.ones((8, 1024)))  # expect: SHL302
""",
        }, title="the model from a factory in another file"),
        example(_MODEL + """
from functools import partial

Ensemble = nn.vmap(MLP, variable_axes={"params": 0}, split_rngs={"params": True},
                   in_axes=None, axis_size=8, metadata_params={nn.PARTITION_NAME: "ensemble"})
mesh = jax.make_mesh((8,), ("ensemble",))
init = partial(jax.jit, keep_unused=True)(Ensemble().init)  # expect: SHL302
""", title="functools.partial form over an nn.vmap ensemble"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        return bool(facts.jit_sites)

    def check(self):
        if not (project_uses_mesh(self.project) or project_uses_partitioning(self.project)):
            return
        placed = self._placed_functions()
        for site in unplaced_jit_sites(self.facts):
            if compiled_function(self.facts, site) in placed:
                continue  # compiled again with out_shardings: that is the one that allocates
            # A program that never shards (a pmap example, a one-device tool): its jitted
            # inits are meant for one device, or replicated on purpose.
            if self.project.runs_on_one_device(self.facts.module, site.scope.qualname):
                continue
            message = self._direct(site) or self._through_function(site)
            if message is not None:
                yield self.finding(site.node, message)

    def _placed_functions(self) -> set[Scope]:
        """Functions some jit site of this file compiles with `out_shardings` (or `**options`).

        The Flax guide pattern: `@partial(jax.jit, static_argnames=...)` on `init_fn` feeds
        `jax.eval_shape`, then `jax.jit(init_fn, out_shardings=...)` does the real init.
        """
        out: set[Scope] = set()
        for site in self.facts.jit_sites:
            kws = jit_keywords(self.facts, site)
            if kws is None or any(k in kws for k in PLACEMENT_KEYWORDS):
                fn = compiled_function(self.facts, site)
                if fn is not None:
                    out.add(fn)
        return out

    def _direct(self, site: JitSite) -> str | None:
        """``jax.jit(model.init)``."""
        t = site.target
        if not (isinstance(t, ast.Attribute) and t.attr in INIT_METHODS):
            return None
        cls = linen_instance(self.facts, self.project, t.value, site.scope)
        if cls is None:
            return None
        return self._message(f"`{self.text(t)}` (Linen `{cls}`) is jitted")

    def _through_function(self, site: JitSite) -> str | None:
        """A compiled function or lambda returning ``model.init(...)`` / ``TrainState.create``."""
        if isinstance(site.target, ast.Lambda):
            flow = LocalFlow(self.facts, None, site.target)
            scope: Scope = site.scope
            label = "This lambda"
        else:
            fn = compiled_function(self.facts, site)
            if fn is None:
                return None
            flow = LocalFlow(self.facts, fn)
            scope = fn
            label = f"`{fn.name}`"
        if self._places_outputs(flow.node):
            return None
        creator: str | None = None
        for n in own_nodes(flow.node):
            if not isinstance(n, ast.Call):
                continue
            if creator is None and flow.returns_structure_of(n, self._keeps_structure):
                creator = self._creator(n, scope)
        if creator is None:
            return None
        return self._message(f"{label} returns {creator} and is jitted", _collection(flow))

    def _places_outputs(self, node: ast.AST) -> bool:
        """The body constrains or places values itself, also inside a lambda it maps over the
        tree (`jax.tree.map(lambda p, s: with_sharding_constraint(p, ...), ...)`)."""
        for n in walk_body(node):
            if not isinstance(n, ast.Call) or not isinstance(n.func, (ast.Name, ast.Attribute)):
                continue
            known = self.facts.resolve(n.func)
            if known is not None and known.role in _CONSTRAINTS:
                return True
            if known is not None and known.name == "jax.device_put" and \
                    (len(n.args) > 1 or any(k.arg == "device" for k in n.keywords)):
                return True
        return False

    def _keeps_structure(self, call: ast.Call) -> bool:
        """Calls whose result holds their arguments' arrays: `TrainState.create(params=...)`."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in ("create", "replace", "copy"):
            return True
        q = self.facts.qualify(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
        return q in _CONTAINERS or (isinstance(func, ast.Name) and func.id == "dict")

    def _creator(self, call: ast.Call, scope: Scope) -> str | None:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr in INIT_METHODS:
            cls = linen_instance(self.facts, self.project, func.value, scope)
            if cls is not None:
                return f"`{self.text(func)}(...)` (Linen `{cls}`)"
        if is_train_state_create(self.facts, self.project, call, scope):
            return f"`{self.text(func)}(...)`"
        return None

    def _message(self, what: str, made: str = "the parameters") -> str:
        # (each part said for every release the project may run: `jax.set_mesh` is from jax
        # 0.7.1, `out_shardings=` from jax 0.4.4 -- pjit's `out_axis_resources=` before it --
        # and `nn.get_sharding` from flax 0.6.9; all read from the releases)
        v = self.ctx.versions
        where = "on device 0 without a mesh"
        if not v.below("jax", SET_MESH_ADDED):  # (a jax with `jax.set_mesh` may run it)
            where += f" or a full copy on every device under `jax.set_mesh`{set_mesh_note(v)}"
        keyword = "pass `out_shardings=`" + out_shardings_note(v)
        helper = "`nn.get_sharding(abstract, mesh)`"
        added = releases.first_release("flax.linen.get_sharding")
        if added is not None and v.may_be_below("flax", added):
            helper += (f", flax >= {added}; {v.allowed_by('flax')} allow flax "
                       f"{v.oldest('flax')}, where `nn.get_partition_spec(abstract)` gives the "
                       f"specs to make `NamedSharding`s of")
        return (f"{what} without `out_shardings`: {made} go wherever propagation puts "
                f"them, {where}; {keyword} computed from `jax.eval_shape` ({helper})")


def _collection(flow) -> str:
    """What the init's result the function returns is: one collection of it by its literal
    key (`return variables["cache"]`: a decoding cache, not the parameters), else the
    parameters."""
    keys = {r.slice.value for r in flow.returns
            if type(r) is ast.Subscript and type(r.slice) is ast.Constant
            and isinstance(r.slice.value, str)}
    if len(keys) == 1 and len(flow.returns) == 1 and keys != {"params"}:
        return f"the `{keys.pop()}` variables"
    return "the parameters"
