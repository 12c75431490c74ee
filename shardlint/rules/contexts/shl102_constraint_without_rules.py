"""SHL102 constraint-without-rules."""

from __future__ import annotations

import importlib.util
from shardlint.rules._context import GUARDED_LIBRARY, missing_context_findings
from shardlint.rules.base import Fix, Rule, example, register
from shardlint.semantics.file.facts import RULES

_MODEL = """
import jax
import flax.linen as nn

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        y = nn.Dense(512, kernel_init=init)(x)
        return nn.with_logical_constraint(y, ("batch", "mlp"))
"""


_LIBCST = importlib.util.find_spec("libcst") is not None


@register
class ConstraintWithoutRules(Rule):
    code = "SHL102"
    name = "constraint-without-rules"
    severity = "warning"
    summary = "Flax logical constraints run with no logical axis rules in context: they do nothing."
    what = """
Finds where a Flax Linen model whose code calls `nn.with_logical_constraint`,
`nn.with_logical_partitioning` or `nn.LogicallyPartitioned` is initialised or applied
(`model.init`, `model.apply`, a jitted `model.init`) with no `nn.logical_axis_rules(...)` around
it: not in the `with` statement, not in any caller in the project, and no global
`nn.set_logical_axis_rules`. The constraint may sit in another file than the `init` call: the
project index follows the model across files. A model handed in (`model.apply` of a parameter,
`self.model.apply`) counts where every class the project's callers hand there (through calls and
`functools.partial` arguments at any depth), or the class's methods store there, has such
constraints. Constraints that pass `rules=` themselves need no
context.
Not flagged: a program that never shards -- its module and the project modules it imports build,
enter or set no mesh and no axis rules -- running a model another module defines (a checkpoint
conversion or export script of a sharded project: one device by design).

A constraint the code around it guards (`if nn.get_logical_axis_rules():`, `if not
jax.sharding.get_abstract_mesh().empty:`, a `..._mesh_defined()` check) or enters its contexts
for (`with nn.logical_axis_rules(...):` inside the function) needs nothing from its callers: a
library that applies its constraints only where its caller brings them.
"""
    why = """
`with_logical_constraint` returns its input unchanged when no rules are active, and logically
partitioned parameters are never sharded. The program runs, but every device holds a full copy of
the parameters and activations: per-device memory does not drop when you add devices.
"""
    use_instead = """
```python
with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    params = jax.jit(model.init, out_shardings=shardings)(key, x)
```
"""
    fix_safety = """
Unsafe, offered when the file defines exactly one rules table at module level: the statement that
runs the model is wrapped in `with nn.logical_axis_rules(TABLE):` (through libcst, so comments and
formatting survive). The constraints then start to apply, which changes shardings and memory:
check that the table is the one this model was written for.
"""
    versions = "All Flax Linen versions (Linen and NNX share the same rules context)."
    VALID = [
        example(GUARDED_LIBRARY,
                title="a library that applies its constraints only where its caller brings the contexts"),
        example({
            "model.py": _MODEL,
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
        example(_MODEL + """
mesh = jax.make_mesh((2,), ("data",))
rules = (("batch", "data"), ("embed", None), ("mlp", None))
with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    params = jax.jit(MLP().init)(jax.random.key(0), jax.numpy.ones((8, 4)))
"""),
        example(_MODEL + """
nn.set_logical_axis_rules((("batch", "data"), ("embed", None), ("mlp", None)))
model = MLP()
with jax.set_mesh(jax.make_mesh((2,), ("data",))):
    params = model.init(jax.random.key(0), jax.numpy.ones((8, 4)))
""", title="global setter"),
        example({
            "model.py": _MODEL,
            "train.py": """
import jax
from flax import linen as ln
from model import MLP

RULES = (("batch", "data"), ("embed", None), ("mlp", None))

def train(mesh):
    model = MLP()
    params = jax.jit(model.init)(jax.random.key(0), jax.numpy.ones((8, 4)))
    return params

with jax.set_mesh(jax.make_mesh((2,), ("data",))), ln.logical_axis_rules(RULES):
    train(None)
""",
        }, title="constraints in model.py, rules entered by the caller in train.py"),
        example(_MODEL + """
def init_model(key, x):
    # nobody in the project calls this: the caller may provide the rules
    return MLP().init(key, x)
with nn.logical_axis_rules((("batch", "data"),)):
    pass
""", title="unknown caller"),
        example(_MODEL + """
abstract = jax.eval_shape(MLP().init, jax.random.key(0), jax.numpy.ones((8, 4)))
specs = nn.get_partition_spec(abstract)  # abstract evaluation needs no rules
"""),
    ]
    INVALID = [
        example({
            "model.py": _MODEL,
            "convert.py": """
import jax
import numpy as np
from model import MLP

def convert(path):
    with jax.set_mesh(jax.make_mesh((8,), ("data",))):
        variables = MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))  # expect: SHL102
    np.savez(path, **jax.tree_util.tree_map(np.asarray, variables["params"]))

if __name__ == "__main__":
    convert("params.npz")
""",
        }, title="the same script, entering a mesh: it shards, so the missing piece counts"),
        example(_MODEL + """
RULES = (("batch", "data"), ("embed", None), ("mlp", None))
mesh = jax.make_mesh((2,), ("data",))
with jax.set_mesh(mesh):
    # a rules table is defined, but never entered
    params = jax.jit(MLP().init)(jax.random.key(0), jax.numpy.ones((8, 4)))  # expect: SHL102
""", title="the rules table exists but is never entered (fix: wrap the statement)"),
        example(_MODEL + """
model = MLP()
with jax.set_mesh(jax.make_mesh((2,), ("data",))):
    params = jax.jit(model.init)(jax.random.key(0), jax.numpy.ones((8, 4)))  # expect: SHL102
"""),
        example(_MODEL + """
model = MLP()
init_fn = jax.jit(model.init)
with jax.set_mesh(jax.make_mesh((2,), ("data",))):
    params = init_fn(jax.random.key(0), jax.numpy.ones((8, 4)))  # expect: SHL102
""", title="the jitted init runs where it is called"),
        example({
            "model.py": _MODEL,
            "train.py": """
import jax
from model import MLP

def create(key, x):
    return MLP().init(key, x)  # expect: SHL102

with jax.set_mesh(jax.make_mesh((2,), ("data",))):
    create(jax.random.key(0), jax.numpy.ones((8, 4)))
""",
        }, title="cross-file: no caller enters rules"),
        example({
            "layers.py": """
import flax.linen as nn

class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.with_logical_constraint(x, ("batch", "embed"))
""",
            "model.py": """
import jax
import flax.linen as nn
from layers import Block

class Model(nn.Module):
    def setup(self):
        self.block = Block()
    def __call__(self, x):
        return self.block(x)

mesh = jax.make_mesh((2,), ("data",))
with jax.set_mesh(mesh):
    variables = Model().init(jax.random.key(0), jax.numpy.ones((8, 4)))  # expect: SHL102
""",
        }, title="constraint two modules deep"),
    ]

    def check(self):
        return missing_context_findings(
            self, RULES, "logical constraints run with no `nn.logical_axis_rules` in context: "
                         "they are no-ops and the values stay unsharded", self._fix)

    def _fix(self, m) -> Fix | None:
        """Wrap the statement in `with nn.logical_axis_rules(TABLE):` when the file has exactly
        one module-level rules table and a name for the context manager."""
        summary = self.project.summaries.get(self.facts.module)
        tables = sorted(summary.constants) if summary is not None else []
        if len(tables) != 1:
            return None
        imports = self.facts.imports.names
        manager = next((f"{local}.logical_axis_rules" for local, q in sorted(imports.items())
                        if q == "flax.linen"), None) or next(
            (local for local, q in sorted(imports.items())
             if q in ("flax.linen.logical_axis_rules", "flax.linen.partitioning.axis_rules")),
            None)
        if manager is None:
            return None
        context = f"{manager}({tables[0]})"
        if not _LIBCST:
            return None  # (a bundled server without libcst's compiled parser: no fix)
        # Built with libcst only when someone asks for it (fixes.resolve), not on every lint.
        return Fix(f"Wrap the statement in `with {context}:`", "unsafe",
                   recipe=("wrap_in_with", m.entry.line, context))
