"""SHL103 constraint-without-mesh."""

from __future__ import annotations

from shardlint.rules._context import GUARDED_LIBRARY, mesh_in_context, missing_context_findings
from shardlint.rules.base import Rule, example, register
from shardlint.semantics.file.facts import MESH

_MODEL = """
import jax
import flax.linen as nn

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        y = nn.Dense(512, kernel_init=init)(x)
        return nn.with_logical_constraint(y, ("batch", "mlp"))

RULES = (("batch", "data"), ("embed", None), ("mlp", "model"))
"""


@register
class ConstraintWithoutMesh(Rule):
    code = "SHL103"
    name = "constraint-without-mesh"
    severity = "warning"
    summary = "Flax constraints run with no mesh in context (`jax.set_mesh`): they do nothing."
    what = """
Finds where a model whose code applies Flax partitioning or constraints is initialised or applied
with no mesh in context: no `with jax.set_mesh(mesh):` (or `jax.sharding.use_abstract_mesh`)
around it or around any caller in the project, and no global `jax.set_mesh(mesh)` call.
Constraints that pass `mesh=` themselves need no context. A legacy `with mesh:` is reported by
SHL101 instead, once, at the `with`. A model handed in (`model.apply` of a parameter,
`self.model.apply`) counts where every class the project's callers hand there (calls and
`functools.partial` arguments, at any depth), or the class's methods store there, has them.

Code nobody in the project calls has an unknown context: it is reported only when its program
provides a mesh nowhere, and never for an `nnx.vmap`/`nnx.scan`-decorated factory of stacked
layers (a library function: its caller brings the mesh).

Not flagged: a program that never shards -- its module and the project modules it imports build,
enter or set no mesh and no axis rules -- running a model another module defines (a checkpoint
conversion or export script of a sharded project: one device by design).

A constraint the code around it guards (`if nn.get_logical_axis_rules():`, `if not
jax.sharding.get_abstract_mesh().empty:`, a `..._mesh_defined()` check) or enters its contexts
for (`with nn.logical_axis_rules(...):` inside the function) needs nothing from its callers: a
library that applies its constraints only where its caller brings them.
"""
    why = """
Flax applies a constraint only when a global mesh is defined. Without one, parameters and
activations stay on a single device (device 0) no matter how the rules map the names: the memory
you expected to spread over N devices lands on one.
"""
    use_instead = """
```python
with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    params = jax.jit(model.init, out_shardings=shardings)(key, x)
```
"""
    versions = """
All versions; `jax.set_mesh` exists since jax 0.7.1. Where the project may run an older jax, the
message names the legacy `with mesh:` as the context there (every flax that runs on such a jax
honours it).
"""
    VALID = [
        example(GUARDED_LIBRARY,
                title="a library that applies its constraints only where its caller brings the contexts"),
        example({
            "model.py": _MODEL,
            "convert.py": """
import jax
import numpy as np
from model import MLP

def convert(path):
    variables = MLP().init(jax.random.key(0), jax.numpy.ones((1, 4)))
    np.savez(path, **jax.tree_util.tree_map(np.asarray, variables["params"]))

if __name__ == "__main__":
    convert("params.npz")
""",
            "train.py": """
import jax
import flax.linen as nn
from model import MLP, RULES

with jax.set_mesh(jax.make_mesh((8,), ("data",))), nn.logical_axis_rules(RULES):
    variables = jax.jit(MLP().init)(jax.random.key(0), jax.numpy.ones((8, 4)))
""",
        }, title="a conversion script of a sharded project: it never builds a mesh or enters rules"),
        example({
            "pkg/__init__.py": "",
            "pkg/model.py": _MODEL + """
def sharded_mesh():
    return jax.make_mesh((8,), ("data",))
""",
            "docs/quickstart.py": """
import jax
from pkg.model import MLP

# one device: what the layer computes, before any sharding
variables = MLP().init(jax.random.key(0), jax.numpy.ones((1, 4)))
""",
        }, title="a documentation example that runs on one device, importing a library that "
                 "builds meshes"),
        example(_MODEL + """
mesh = jax.make_mesh((2, 1), ("data", "model"))
with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
    params = jax.jit(MLP().init)(jax.random.key(0), jax.numpy.ones((8, 4)))
"""),
        example(_MODEL + """
jax.set_mesh(jax.make_mesh((2, 1), ("data", "model")))  # global
with nn.logical_axis_rules(RULES):
    params = MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))
"""),
        example({
            "model.py": _MODEL,
            "train.py": """
import jax
import flax.linen as nn
from model import MLP, RULES

def main():
    with nn.logical_axis_rules(RULES):
        return MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))

if __name__ == "__main__":
    with jax.set_mesh(jax.make_mesh((2, 1), ("data", "model"))):
        main()
""",
        }, title="the mesh is entered by the caller"),
        example(_MODEL + """
from jax.sharding import Mesh
mesh = Mesh(jax.devices(), ("data",))
with mesh, nn.logical_axis_rules(RULES):  # SHL101 reports this, not SHL103
    params = MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))
"""),
        example({
            "model.py": _MODEL,
            "meshes.py": """
import jax
from jax.sharding import Mesh

def create_mesh():
    return Mesh(jax.devices(), ("data",))
""",
            "train.py": """
import jax
import flax.linen as nn
from meshes import create_mesh
from model import MLP, RULES

def main():
    mesh = create_mesh()
    with nn.logical_axis_rules(RULES), mesh:  # a mesh from a factory: SHL101 reports it
        return MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))

if __name__ == "__main__":
    main()
""",
        }, title="a legacy `with mesh:` of a mesh from a factory"),
    ]
    VALID += [
        example(_MODEL + """
mesh = jax.make_mesh((2, 1), ("data", "model"))
abstract = jax.eval_shape(MLP().init, jax.random.key(0), jax.numpy.ones((8, 4)))
shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, RULES)
# no context, but out_shardings places every parameter
params = jax.jit(MLP().init, out_shardings=shardings)(jax.random.key(0), jax.numpy.ones((8, 4)))
""", title="out_shardings built from a mesh"),
        example("""
import jax
from flax import nnx

class Block(nnx.Module):
    def __init__(self, mesh, rngs):
        init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("data", None), mesh=mesh)
        self.lin = nnx.Linear(4, 4, kernel_init=init, rngs=rngs)

class Model(nnx.Module):
    def __init__(self, mesh, rngs):
        self.block = Block(mesh, rngs)   # a submodule: it runs where Model is built

mesh = jax.make_mesh((2,), ("data",))
model = Model(mesh, nnx.Rngs(0))        # handed the mesh it partitions with
""", title="NNX submodules, and a module handed its mesh"),
        example("""
from flax import nnx

class Block(nnx.Module):
    def __init__(self, rngs):
        init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("embed", "mlp"))
        self.lin = nnx.Linear(16, 32, kernel_init=init, rngs=rngs)

@nnx.split_rngs(splits=4)
@nnx.vmap(in_axes=(0,), out_axes=0)
def create_blocks(rngs):
    return Block(rngs)           # a library factory: nothing here calls it
""", title="an nnx.vmap factory of stacked layers that nothing in the project calls"),
        example(_MODEL + """
import optax

def sharded_adagrad(lr):
    def init_fn(params):
        return jax.tree.map(jax.numpy.zeros_like, params)

    def update_fn(grads, state, params=None):
        state = jax.tree.map(
            lambda s, g: nn.with_logical_constraint(s + g * g, ("embed", "mlp")), state, grads)
        return jax.tree.map(lambda g, s: -lr * g / (s + 1e-8) ** 0.5, grads, state), state

    return optax.GradientTransformation(init_fn, update_fn)

opt = sharded_adagrad(1e-2)
with nn.logical_axis_rules(RULES):
    opt_state = opt.init({"w": jax.numpy.ones((4, 512))})  # zeros: no model runs here
""", title="`.init` of what an optimizer factory returns, whose update function constrains"),
    ]
    INVALID = [
        example({
            "model.py": _MODEL,
            "convert.py": """
import jax
import flax.linen as nn
import numpy as np
from model import MLP, RULES

def convert(path):
    with nn.logical_axis_rules(RULES):
        variables = MLP().init(jax.random.key(0), jax.numpy.ones((1, 4)))  # expect: SHL103
    np.savez(path, **jax.tree_util.tree_map(np.asarray, variables["params"]))

if __name__ == "__main__":
    convert("params.npz")
""",
        }, title="the same script entering axis rules: it means to shard, and has no mesh"),
        example(_MODEL + """
with nn.logical_axis_rules(RULES):
    params = jax.jit(MLP().init)(jax.random.key(0), jax.numpy.ones((8, 4)))  # expect: SHL103
"""),
        example(_MODEL + """
model = MLP()
@jax.jit
def forward(variables, x):
    return model.apply(variables, x)  # expect: SHL103

with nn.logical_axis_rules(RULES):
    y = forward({}, jax.numpy.ones((8, 4)))
"""),
        example({
            "model.py": _MODEL,
            "train.py": """
import jax
from flax import linen as ln
import model as m

with ln.logical_axis_rules(m.RULES):
    variables = m.MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))  # expect: SHL103
""",
        }, title="cross-file, module import"),
        example("""
import jax
from flax import nnx

class Block(nnx.Module):
    def __init__(self, rngs):
        init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("embed", "mlp"))
        self.lin = nnx.Linear(16, 32, kernel_init=init, rngs=rngs)

@nnx.vmap(in_axes=0, out_axes=0)
def create_blocks(key):
    return Block(nnx.Rngs(key))  # expect: SHL103

blocks = create_blocks(jax.random.split(jax.random.key(0), 4))
""", title="an nnx.vmap factory called with no mesh"),
        example(_MODEL + """
def create_model(config):
    return MLP()

model = create_model({})
with nn.logical_axis_rules(RULES):
    variables = model.init(jax.random.key(0), jax.numpy.ones((8, 4)))  # expect: SHL103
""", title="a model made by a factory function"),
        example(_MODEL + """
def create_ensemble(n):
    ensemble = nn.vmap(MLP, in_axes=None, out_axes=0, axis_size=n,
                       variable_axes={"params": 0}, split_rngs={"params": True})
    return ensemble()

model = create_ensemble(4)
with nn.logical_axis_rules(RULES):
    variables = model.init(jax.random.key(0), jax.numpy.ones((8, 4)))  # expect: SHL103
""", title="a factory of a lifted module, whose result the value flow does not follow"),
    ]

    def check(self):
        context = mesh_in_context(self.ctx.versions)
        return missing_context_findings(self, MESH, f"Flax constraints run with no mesh in context "
                                                    f"({context}): they are no-ops and the values "
                                                    f"stay on one device")
