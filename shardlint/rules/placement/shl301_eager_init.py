"""SHL301 eager-init."""

from __future__ import annotations

import ast

from shardlint.rules._versions import out_shardings_note
from shardlint.rules.base import Rule, example, register
from shardlint.semantics.file.execution import execution_of
from shardlint.semantics.file.facts import MESH, CallSite
from shardlint.semantics.flow.models import linen_instance, nnx_class, project_uses_mesh

INIT_METHODS = ("init", "init_with_output")

_LINEN_MODEL = """
import jax
import flax.linen as nn

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.Dense(4096, kernel_init=nn.with_logical_partitioning(
            nn.initializers.lecun_normal(), ("embed", "mlp")))(x)
        return nn.Dense(16)(x)
"""

_NNX_MODEL = """
import jax
from flax import nnx

class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.up = nnx.Linear(1024, 4096, rngs=rngs)
        self.down = nnx.Linear(4096, 1024, rngs=rngs)

    def __call__(self, x):
        return self.down(self.up(x))
"""


@register
class EagerInit(Rule):
    code = "SHL301"
    name = "eager-init"
    severity = "warning"
    summary = "A model is initialised eagerly in a sharded project: it is built on one device or replicated."
    what = """
Flags, in a project that builds or enters a mesh:

* a Linen `model.init(...)` / `model.init_with_output(...)` that runs eagerly -- at module
  level, or in a function the file's module-level code calls directly (`main()`,
  `app.run(main)`) -- where `model` is an instance of a project `nn.Module` subclass, of a
  `flax.linen` layer, or of a lifted class (`nn.vmap(MLP, ...)`);
* an NNX module constructor given `rngs` (`MLP(rngs=...)` of an `nnx.Module` subclass,
  `nnx.Linear(..., rngs=...)`) run eagerly under `jax.set_mesh(...)`; a wrapper built from
  modules created elsewhere (no `rngs`) allocates nothing and is not flagged.

Not flagged: `jax.eval_shape(model.init, ...)` (abstract, nothing is allocated), init under
`jax.jit` / in a lambda or function handed to `jax.jit`, optax's `tx.init(params)`, functions
whose callers the file does not show (they may be jitted elsewhere), projects with no mesh, and
programs that never shard (a conversion or export script whose module and imports build, enter
or set no mesh and no axis rules: an eager init there is meant for one device; in a folder of
examples, tests or docs, a script neither importing one that shards nor imported by one).
"""
    why = """
Eagerly, every initializer runs as its own small computation with no sharding to follow:
without a mesh all parameters land on one device; under `jax.set_mesh` every array is fully
replicated. Reproduced on 8 devices: a 16 MiB Linen init took 16 MiB on device 0 without a
mesh, and 16 MiB on *each* of the 8 devices under `set_mesh` with axis rules (2 MiB per device
only after an extra eager `nn.unbox` reshard). NNX modules with sharding annotations create each
Variable on one device and then reshard it (the Flax guide: "a single-device variable must be
created first"), so the whole model must fit on one device before it is sharded.
"""
    use_instead = """
```python
abstract = jax.eval_shape(model.init, key, x)              # shapes only, no allocation
shardings = nn.get_sharding(abstract, mesh)
with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    variables = jax.jit(model.init, out_shardings=shardings)(key, x)

# NNX: build the whole model in one compiled call
with jax.set_mesh(mesh):
    model = nnx.jit(lambda: MLP(rngs=nnx.Rngs(0)))()
```
"""
    versions = "All versions. NNX eager sharding of annotated Variables is on by default since flax 0.12.0."
    VALID = [
        example({
            "examples/vision/distributed.py": """
import jax

def make_mesh():
    return jax.make_mesh((jax.device_count(),), ("data",))

if __name__ == "__main__":
    with jax.set_mesh(make_mesh()):
        pass
""",
            "examples/vision/plot_mnist.py": """
import jax
import flax.linen as nn

class CNN(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(10)(x)

def main():
    return CNN().init(jax.random.key(0), jax.numpy.ones((8, 784)))

if __name__ == "__main__":
    main()
""",
        }, title="a one-device script beside a sharded one in a folder of examples"),
        example({
            "model.py": _LINEN_MODEL,
            "train.py": """
import jax
import flax.linen as nn
from model import MLP

RULES = (("batch", "data"), ("embed", None), ("mlp", None))

def main():
    mesh = jax.make_mesh((8,), ("data",))
    with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
        abstract = jax.eval_shape(MLP().init, jax.random.key(0), jax.numpy.ones((8, 4)))
        shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, RULES)
        return jax.jit(MLP().init, out_shardings=shardings)(jax.random.key(0), jax.numpy.ones((8, 4)))
""",
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
        }, title="a conversion script of a sharded project: it never builds a mesh or enters rules"),
        example(_LINEN_MODEL + """
model = MLP()
mesh = jax.make_mesh((8,), ("data",))
abstract = jax.eval_shape(model.init, jax.random.key(0), jax.numpy.ones((8, 1024)))
specs = nn.get_partition_spec(abstract)
""", title="eval_shape allocates nothing"),
        example(_LINEN_MODEL + """
import optax

model = MLP()
tx = optax.adam(1e-3)
mesh = jax.make_mesh((8,), ("data",))
with jax.set_mesh(mesh), nn.logical_axis_rules((("embed", None), ("mlp", "data"))):
    shardings = nn.get_sharding(jax.eval_shape(model.init, jax.random.key(0), jax.numpy.ones((8, 1024))), mesh)
    params = jax.jit(model.init, out_shardings=shardings)(jax.random.key(0), jax.numpy.ones((8, 1024)))
    opt_state = tx.init(params)   # optax, eager: keeps the params' sharding
""", title="jitted init with out_shardings; optax tx.init"),
        example(_LINEN_MODEL + """
model = MLP()
variables = model.init(jax.random.key(0), jax.numpy.ones((8, 1024)))   # no mesh anywhere
""", title="single-device project"),
        example({
            "model.py": _LINEN_MODEL,
            "train.py": """
import jax
from flax import linen as ln
from model import MLP

def main():
    model = MLP()
    mesh = jax.make_mesh((8,), ("data",))
    with jax.set_mesh(mesh):
        init = jax.jit(lambda k: model.init(k, jax.numpy.ones((8, 1024))))
        variables = init(jax.random.key(0))

if __name__ == "__main__":
    main()
""",
        }, title="init inside a lambda handed to jax.jit"),
        example(_LINEN_MODEL + """
mesh = jax.make_mesh((8,), ("data",))

def create(key):
    # nobody in this file calls it: a caller elsewhere may jit it
    return MLP().init(key, jax.numpy.ones((8, 1024)))
"""),
        example(_NNX_MODEL + """
mesh = jax.make_mesh((8,), ("data",))
with jax.set_mesh(mesh):
    model = nnx.jit(lambda: MLP(rngs=nnx.Rngs(0)))()
""", title="NNX model built under jit"),
        example(_LINEN_MODEL + """
import functools
import jax.experimental.pjit

mesh = jax.make_mesh((8,), ("data",))

@functools.partial(jax.jit, static_argnums=1)
def create(key, model):
    return model.init(key, jax.numpy.ones((8, 1024)))

variables = create(jax.random.key(0), MLP())
init_p = jax.experimental.pjit.pjit(lambda k: MLP().init(k, jax.numpy.ones((8, 1024))))
""", title="init inside functools.partial(jax.jit) and pjit"),
    ]
    INVALID = [
        example({
            "model.py": _LINEN_MODEL,
            "convert.py": """
import jax
import numpy as np
from model import MLP

def convert(path):
    with jax.set_mesh(jax.make_mesh((8,), ("data",))):
        variables = MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))  # expect: SHL301
    np.savez(path, **jax.tree_util.tree_map(np.asarray, variables["params"]))

if __name__ == "__main__":
    convert("params.npz")
""",
        }, title="the same script, entering a mesh: it shards, so the missing piece counts"),
        example({
            "model.py": _LINEN_MODEL,
            "meshes.py": """
import jax

def make_mesh():
    return jax.make_mesh((8,), ("data",))
""",
            "setup_lib.py": """
import jax
from meshes import make_mesh

DEVICES = jax.devices()
""",
            "convert.py": """
import jax
import numpy as np
import setup_lib
from model import MLP

def convert(path):
    variables = MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))  # expect: SHL301
    np.savez(path, **jax.tree_util.tree_map(np.asarray, variables["params"]))

if __name__ == "__main__":
    convert("params.npz")
""",
        }, title="a mesh built two imports away: the program shards"),
        example(_LINEN_MODEL + """
model = MLP()
mesh = jax.make_mesh((8,), ("data",))
with jax.set_mesh(mesh), nn.logical_axis_rules((("embed", None), ("mlp", "data"))):
    variables = model.init(jax.random.key(0), jax.numpy.ones((8, 1024)))  # expect: SHL301
"""),
        example({
            "model.py": _LINEN_MODEL,
            "train.py": """
import jax
from flax import linen as ln
from model import MLP

Ensemble = ln.vmap(MLP, variable_axes={"params": 0}, split_rngs={"params": True},
                   in_axes=None, axis_size=8, metadata_params={ln.PARTITION_NAME: "ensemble"})

def main():
    mesh = jax.make_mesh((8,), ("ensemble",))
    with jax.set_mesh(mesh):
        variables = Ensemble().init(jax.random.key(0), jax.numpy.ones((8, 1024)))  # expect: SHL301

if __name__ == "__main__":
    main()
""",
        }, title="nn.vmap ensemble built in main(), model in another file"),
        example("""
import jax
from flax import linen as nn
from absl import app
from jax.sharding import Mesh

def main(argv):
    mesh = Mesh(jax.devices(), ("data",))
    dense = nn.Dense(8192)
    y, variables = dense.init_with_output(jax.random.key(0), jax.numpy.ones((8, 8192)))  # expect: SHL301

app.run(main)
""", title="a flax.linen layer, run through absl's app.run"),
        example(_NNX_MODEL + """
mesh = jax.make_mesh((8,), ("data",))
with jax.set_mesh(mesh):
    model = MLP(rngs=nnx.Rngs(0))  # expect: SHL301
""", title="NNX constructor under set_mesh"),
        example("""
import jax
from flax import nnx

def build(mesh):
    with jax.set_mesh(mesh):
        return nnx.Linear(8192, 8192, rngs=nnx.Rngs(0))  # expect: SHL301

layer = build(jax.make_mesh((8,), ("data",)))
""", title="an nnx layer built in a function the module calls"),
    ]

    def check(self):
        if not project_uses_mesh(self.project):
            return
        # A program that never shards (a conversion or export script of a sharded project):
        # its eager inits are meant for one device.
        for c in execution_of(self.facts).eager_calls():
            if self.project.runs_on_one_device(self.facts.module, c.scope.qualname):
                continue
            func = c.node.func
            linen = isinstance(func, ast.Attribute) and func.attr in INIT_METHODS
            # NNX: only constructors handed `rngs` create parameters (cheap tests first).
            nnx = not linen and c.api is None and isinstance(func, (ast.Name, ast.Attribute)) \
                and bool(c.node.args or c.node.keywords)
            if not (linen or nnx) or (nnx and not self._creates_parameters(c)):
                continue
            if isinstance(func, ast.Attribute) and func.attr in INIT_METHODS:
                cls = linen_instance(self.facts, self.project, func.value, c.scope)
                if cls is not None:
                    yield self.finding(c.node, self._linen_message(c, func, cls))
            elif c.api is None and isinstance(func, (ast.Name, ast.Attribute)):
                cls = nnx_class(self.facts, self.project, func, c.scope)
                if cls is not None and self._under_mesh(c):
                    yield self.finding(c.node, self._nnx_message(cls))

    def _linen_message(self, c: CallSite, func: ast.Attribute, cls: str) -> str:
        call = f"{self.text(func)}(...)"
        if self._under_mesh(c):
            where = "under `jax.set_mesh` every array it creates is fully replicated"
        else:
            where = "every parameter lands on one device before it can be sharded"
        return (f"`{call}` initialises the Linen `{cls}` eagerly, op by op: {where}; initialise "
                f"it with `jax.jit({self.text(func)}, out_shardings=...)` (shardings from "
                f"`jax.eval_shape`){out_shardings_note(self.ctx.versions)}")

    def _nnx_message(self, cls: str) -> str:
        return (f"`{cls}(...)` builds the NNX model eagerly under `jax.set_mesh`: each Variable "
                f"is created on one device and then resharded, so the full model must fit on "
                f"one device first; build it in one compiled call "
                f"(`nnx.jit(lambda: {cls}(...))()`) or restore into `nnx.eval_shape(...)`")

    def _creates_parameters(self, c: CallSite) -> bool:
        """NNX modules draw their parameters from `rngs`: a constructor given none (a wrapper
        holding modules built elsewhere) allocates nothing worth a warning."""
        args = [*c.node.args, *(k.value for k in c.node.keywords)]
        if any(k.arg == "rngs" for k in c.node.keywords):
            return True
        for a in args:
            if isinstance(a, ast.Name):
                value = self.facts.value_of(a.id, c.scope)
                a = value if isinstance(value, ast.Call) else a
            if isinstance(a, ast.Call) and (self.facts.qualify(a.func) or "").endswith(".Rngs"):
                return True
        return False

    def _under_mesh(self, c: CallSite) -> bool:
        """``jax.set_mesh`` is active: a `with` around the call, an earlier `jax.set_mesh(m)`
        statement in the same scope, or every caller of the scope enters one."""
        for w in self.facts.with_items:
            if w.kind == "mesh" and w.scope is c.scope and w.stmt.body \
                    and w.stmt.body[0].lineno <= c.node.lineno <= (w.stmt.end_lineno or 0):
                return True
        for s in self.facts.calls:
            if s.scope is c.scope and s.api is not None and s.api.name == "jax.set_mesh" \
                    and isinstance(s.stmt, ast.Expr) and s.stmt.value is s.node \
                    and s.node.lineno < c.node.lineno:
                return True
        if c.scope.kind == "function":
            ctx = self.project.context_of(self.facts.module, c.scope.qualname)
            return ctx is not None and bool(ctx & MESH)
        return False
