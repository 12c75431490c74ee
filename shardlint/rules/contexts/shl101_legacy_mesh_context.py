"""SHL101 legacy-mesh-context."""

from __future__ import annotations

import ast
import dataclasses

from shardlint.rules.base import Edit, Fix, Rule, example, register
from shardlint.semantics.catalog import facts as releases
from shardlint.semantics.catalog.api import LINEN_MODULE, NNX_MODULE, SET_MESH_ADDED, Role
from shardlint.semantics.file.execution import (
    EAGER_HIGHER_ORDER,
    compiled_function,
    execution_of,
    function_named,
)
from shardlint.semantics.file.facts import RULES
from shardlint.semantics.file.jit_sites import (
    LINEN_JIT,
    NNX_JIT,
    PJIT,
    calls_of,
    jit_keywords,
    specs_may_be_bare,
    wrapped_callable,
)
from shardlint.semantics.file.moves import guarded_at, may_have_guards, version_guarded
from shardlint.semantics.flow.project import held_as
from shardlint.semantics.flow.summary import HANDED, NNX_EVAL_SHAPE, reference
from shardlint.semantics.sharding.mesh_values import is_mesh
from shardlint.semantics.sharding.placement import bare_specs

# `Mesh.__enter__` warns (DeprecationWarning) from this release on; a method's warning, which the
# catalogue's names do not carry: tests/test_api_facts.py holds it to the table of releases.
DEPRECATED = "0.10.1"
FLAX_NOOP = "0.12.2"  # flax reads only the abstract mesh from here on: `with mesh:` is ignored
# From here on `nnx.eval_shape` under `jax.set_mesh` places a model's parameters by their
# logical axis names (`Resource axis: embed ... not found in mesh` where no rules map them), with
# `flax_always_shard_variable` off; under the legacy `with` it leaves them alone. Run on flax
# 0.12.2-0.12.6 with jax 0.8.1 and on 0.12.12 with jax 0.12: 0.12.5 passes, 0.12.6 raises.
FLAX_PLACES = "0.12.6"
_SPEC_KEYWORDS = ("in_shardings", "out_shardings", "in_axis_resources", "out_axis_resources")


@register
class LegacyMeshContext(Rule):
    code = "SHL101"
    name = "legacy-mesh-context"
    severity = "error"
    summary = "`with mesh:` no longer activates Flax constraints (flax >= 0.12.2); use `jax.set_mesh(mesh)`."
    what = """
Flags a `with` statement that enters a `jax.sharding.Mesh` object directly (`with mesh:`,
`with nn.logical_axis_rules(rules), mesh:`, `with Mesh(devices, names):`, `with self.mesh:`).
The value must be known to be a mesh through the value-flow layer: built by `Mesh(...)`,
`jax.make_mesh(...)` or `AbstractMesh(...)`, returned by a project function that returns one
(any file; a `-> Mesh` annotation counts), a parameter annotated `Mesh` (or `Mesh | None`) or one
every caller in the project passes a mesh to, an attribute of `self` that the class only sets
from a mesh, or a name the same function also hands to `NamedSharding`/`jax.set_mesh`/
`shard_map`, or an attribute of an object whose class is not known (`config.mesh`,
`self.model.mesh` where `model` is a property over what `nnx.eval_shape` made) that some project
class makes a mesh (a property annotated `-> Mesh` or returning one, a field annotated `Mesh`,
an attribute set from one) and none makes something else it can tell (a property returning
`jax.set_mesh(...)`). A variable that merely happens to be called `mesh` is not flagged, nor is the
`with mesh:` of the branch for the releases without `jax.set_mesh` (`if not hasattr(jax,
"set_mesh")`, the `else` or the rest of the block after `if hasattr(jax, "set_mesh"): ...
return`, a branch of a version compare, an `except AttributeError` / `ImportError` handler).

Severity says what happens. **Error** (flax >= 0.12.2) when a Linen logical constraint or a
logically partitioned parameter is traced under the `with` -- the model initialised or applied
there, or a function called there or handed to a call that runs it (`lax.fori_loop(0, n, body,
...)`, `jax.jit(step)(x)`; a jit only made there runs where it is called), reaches one, or applies
a model handed to it (`model.apply` of a parameter, given by a call or a `functools.partial`'s
argument at any depth, or `self.model.apply` of what the class's methods store there, where
every model the project puts there has such constraints): each is then a no-op (a warning where the
project's pins also allow a flax older than 0.12.2, which still honours the `with`, and in
test code, which runs toy sizes and passes the same unsharded; the
shardings a jit's `in_shardings`/`out_shardings` or a `shard_map` give the values still apply). Building an NNX module
there (directly, or through `nnx.eval_shape` in a helper) runs its `__init__`, not its forward
pass: only what `__init__` reaches counts, unless the module built is called under the `with`
too. **Warning** otherwise: the
statement is only deprecated (jax 0.10.1), and `pjit` and `lax.with_sharding_constraint` with a
bare `PartitionSpec` still read it. A legacy mesh entered next to `jax.set_mesh(mesh)` in the
same `with` (`with jax.set_mesh(m), m:`) only sets the legacy resource environment for code that
reads it: a warning without a fix.
"""
    why = """
Since flax 0.12.2 Flax decides whether a mesh is defined from `jax.sharding.get_abstract_mesh()`
only, which the legacy `with mesh:` does not set. Under it every `with_logical_constraint`,
`with_logical_partitioning` and `Partitioned` unbox returns its input unchanged: the whole model
lands on device 0, even though the code looks sharded. jax itself deprecated `Mesh.__enter__` in
0.10.1. (The old advice `with nn.logical_axis_rules(rules), mesh:` is exactly this pitfall.)
"""
    use_instead = """
```python
with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
    params = jax.jit(model.init, out_shardings=shardings)(key, x)
```
"""
    fix_safety = """
Safe for the deprecation alone (nothing under the `with` that Flax constraints or the legacy
environment change): `jax.set_mesh(mesh)` sets the concrete and the abstract mesh, and the
program computes the same values with the same shardings (tests/test_safe_fixes_run.py runs
both). Unsafe where Flax constraints run under it (the error): they start to apply, so where
values live changes -- the point of the fix, but a change. Unsafe where a call under the `with`
goes to a package shardlint cannot read, which may read the legacy environment, or to project
code that reaches a module calling `pjit` (given bare `PartitionSpec`s, it raises under
`jax.set_mesh` alone). No fix, and
the message says what to migrate first, where `pjit` or `with_sharding_constraint` with bare
`PartitionSpec`s runs under the `with` (with only `jax.set_mesh` they raise `pjit requires a
non-empty mesh in context`), where the project reads `pxla.thread_resources` (which
`jax.set_mesh` leaves empty: a call under the `with` that reaches the function reading it is
named with that function; shardlint does not follow every call, so where none is seen the
project's readers are named), or where the project's pins allow a jax older than 0.7.1 (no
`jax.set_mesh`). Where a `pjit` whose shardings shardlint cannot read runs under the `with`, or
in a project function a call there reaches, the advice waits for it (given bare
`PartitionSpec`s, it reads the legacy mesh) and the fix is unsafe. No fix next to
`jax.set_mesh`. Unsafe where a model may be built under the `with` with `nnx.eval_shape` (called
there, or in a module that project code called there reaches): from flax 0.12.6, under
`jax.set_mesh` `nnx.eval_shape` places the parameters by their logical axis names, and raises
where no rules map them to the mesh's axes; where no rules are entered with the `with` (or
around or inside it), the advice names them too, and where rules are entered, it holds provided
they map every name. Unsafe, and the advice waits for it, where Flax's `unbox` runs under the
`with` outside a jit with logical axis rules entered with it (`nn.unbox(tree)`, `nn.meta.unbox`,
a box's `.unbox()` there, in a function or lambda written there, or in a function of the file
called or mapped over a tree there): under `jax.set_mesh` it applies `with_sharding_constraint`,
which raises for an abstract value of `jax.eval_shape` or a jax array not placed with a
`NamedSharding`; under the legacy mesh it does nothing. No fix inside a function a jit compiles
(decorated, or named in a `jax.jit(...)` call of this file, `self.step` included, or of another
module, `jax.jit(steps.train_step)` or through a `functools.partial`), or in a function nested
in one: the `with` runs
while it is traced, where `jax.set_mesh` raises (`set_mesh can only be used outside of jax.jit`,
in every jax that has it); the message says to enter `jax.set_mesh(mesh)` around the calls of
the compiled function instead and to leave the mesh out of that `with`. The same in a Flax
module's forward pass (`__call__`, Linen's `setup`, an `@nn.compact` method), which runs
wherever the model is initialised or applied, under a jit as a rule: the mesh is set where the
model runs. Another method of a module (a loader) keeps the advice and the fix.
"""
    versions = ("Error with flax >= 0.12.2 when a Linen logical constraint or partitioned "
                "parameter runs under it; a deprecation warning with jax >= 0.10.1 otherwise.")
    VALID = [
        example("""
            import contextlib
            import dataclasses
            import jax

            @dataclasses.dataclass
            class Config:
                embed: int = 8
                mesh: object = None

            def run(cfg, x):
                cfg = dataclasses.replace(cfg, mesh=contextlib.nullcontext())
                with cfg.mesh:
                    return x * 2
        """, title="a configuration record's field that holds no mesh"),
        example("""
            import contextlib
            import jax

            class Loader:
                def __init__(self, config):
                    self.mesh = contextlib.nullcontext()

            def run(config, x):
                loader = Loader(config)
                with loader.mesh:
                    return jax.jit(lambda y: y)(x)
        """, title="an instance attribute that holds no mesh"),
        example("""
            import jax

            class Runner:
                def __init__(self, ctx, inputs):
                    self._ctx = ctx
                    self._inputs = inputs

                def run(self, step):
                    with self._ctx:
                        return jax.jit(step)(self._inputs)
        """, title="an attribute of `self` no method uses as a mesh: a name is not evidence"),
        example("""
            import jax
            from jax.sharding import Mesh

            class Model:
                def __init__(self, mesh: Mesh):
                    self._mesh = mesh

                @property
                def mesh(self) -> Mesh:
                    return self._mesh

            class Runner:
                def __init__(self, mesh: Mesh):
                    self._mesh = mesh

                @property
                def mesh(self):
                    return jax.set_mesh(self._mesh)  # (a context manager, not the mesh)

            def run(obj, x):
                with obj.mesh:
                    return jax.jit(lambda y: y)(x)
        """, title="an attribute one project class makes a mesh and another something else"),
        example("""
            import dataclasses
            import jax

            @dataclasses.dataclass(frozen=True)
            class Config:
                depth: int = 2
                mesh: object = None

            class Runner:
                def __init__(self):
                    self.mesh = jax.make_mesh((1,), ("x",))
                    self.cfg = dataclasses.replace(Config(), mesh=self.mesh)

                def reload(self, cfg):
                    self.cfg = cfg  # (a record from elsewhere: its mesh is not known)

                def run(self, x):
                    with self.cfg.mesh:
                        return jax.jit(lambda y: y)(x)
        """, title="a record on `self` that another method replaces with one built elsewhere"),
        example("""
            import jax
            mesh = jax.make_mesh((4,), ("data",))
            with jax.set_mesh(mesh):
                y = jax.jit(lambda x: x * 2)(jax.numpy.ones(4))
        """, title="the mesh entered with jax.set_mesh"),
        example("""
            import jax
            mesh = jax.make_mesh((2,), ("data",))
            with jax.set_mesh(mesh):
                pass
        """),
        example("""
            import jax
            import trimesh
            mesh = trimesh.load("bunny.obj")   # not a JAX mesh
            with mesh:
                pass
        """),
        example("""
            import jax
            from jax.sharding import Mesh
            mesh = Mesh(jax.devices(), ("data",))
            with mesh:   # fine before jax 0.10.1 and flax 0.12.2
                pass
        """, jax="0.9.0", flax="0.12.1"),
        example("""
            import jax
            def run(mesh):   # unknown type: shardlint does not guess
                with mesh:
                    pass
        """),
        example({
            "scene.py": """
                def make():
                    return open("scene.obj")   # a file, not a mesh
            """,
            "train.py": """
                import jax
                from scene import make

                mesh = make()
                with mesh:
                    pass
            """,
        }, title="a module-level name from a helper that returns no mesh"),
        example("""
            import contextlib
            import jax
            from jax.sharding import Mesh
            import numpy as np

            def dump(config, dcn_mesh_shape=None):
                if dcn_mesh_shape:
                    context_manager = Mesh(np.array(jax.devices()), ("data",))
                else:
                    context_manager = contextlib.nullcontext()
                with context_manager:   # a mesh on one path only: not certainly a mesh
                    return config.instantiate()

            def run(trainer, distributed, mesh: Mesh):
                ctx = mesh if distributed else contextlib.nullcontext()
                with ctx:
                    trainer.train()
        """, title="a conditional context manager is not a mesh"),
        example("""
            import jax
            from jax.sharding import Mesh

            def run(mesh: Mesh, step, batch):
                if hasattr(jax, "set_mesh"):
                    with jax.set_mesh(mesh):
                        return step(batch)
                with mesh:  # only on a jax without `jax.set_mesh` (< 0.7.1), where it is the way
                    return step(batch)

            def evaluate(mesh: Mesh, step, batch):
                if not hasattr(jax, "set_mesh"):
                    with mesh:
                        return step(batch)
                with jax.set_mesh(mesh):
                    return step(batch)
        """, title="the branch for the releases without `jax.set_mesh`"),
    ]
    INVALID = [
        example("""
            import flax.linen as nn
            import jax
            from jax.sharding import Mesh

            import serving_engine  # a package shardlint does not read

            class Model(nn.Module):
                @nn.compact
                def __call__(self, x):
                    x = nn.with_logical_constraint(x, ("batch", "embed"))
                    return nn.Dense(4)(x)

            class Runner:
                def __init__(self, cfg):
                    self._engine = serving_engine.build(cfg)

                @property
                def mesh(self) -> Mesh:  # (what it returns is not known; its annotation says)
                    return self._engine.mesh

                def run(self, params, x, rules):
                    with self.mesh, nn.logical_axis_rules(rules):  # expect: SHL101
                        return jax.jit(Model().apply)(params, x)
        """, title="a property annotated `-> Mesh`"),
        example("""
            import jax
            from jax.sharding import Mesh

            class Runner:
                def __init__(self, mesh):
                    self._mesh = mesh

                @property
                def mesh(self) -> Mesh:
                    return self._mesh

                @mesh.setter
                def mesh(self, value):
                    self._mesh = value

                def run(self, x):
                    with self.mesh:  # expect: SHL101
                        return jax.jit(lambda y: y * 2)(x)
        """, title="a property annotated `-> Mesh` with a setter (reading it runs the getter)"),
        example({"partitioning.py": """
            import jax

            Mesh = jax.sharding.Mesh
        """, "initialization.py": """
            import jax
            import partitioning

            Mesh = partitioning.Mesh

            def restore(ckpt, *, mesh: Mesh):
                with mesh:  # expect: SHL101
                    return jax.jit(lambda x: x)(ckpt)
        """, "train.py": """
            import initialization

            def main(config, ckpt):
                return initialization.restore(ckpt, mesh=config.mesh)
        """}, title="a parameter annotated with another module's alias of the mesh class"),
        example("""
            import flax.linen as nn
            import jax
            import numpy as np
            from jax.sharding import Mesh

            class Model(nn.Module):
                @nn.compact
                def __call__(self, x):
                    x = nn.with_logical_constraint(x, ("batch", "embed"))
                    return nn.Dense(4)(x)

            class Engine:
                def __init__(self, devices):
                    self.mesh = Mesh(np.array(devices), ("data",))

            class Runner:
                def __init__(self, devices):
                    self.engine = Engine(devices)

                @property
                def mesh(self):
                    return self.engine.mesh  # (the mesh of the engine it built)

                def run(self, params, x, rules):
                    with self.mesh, nn.logical_axis_rules(rules):  # expect: SHL101
                        return jax.jit(Model().apply)(params, x)
        """, title="a property that returns the mesh of an object the class built"),
        example({"modeling.py": """
            import jax
            from flax import nnx

            class BaseModule(nnx.Module):
                def __init__(self, config):
                    self.config = config

                @property
                def mesh(self) -> jax.sharding.Mesh:
                    return self.config.mesh
        """, "trainer.py": """
            from flax import nnx

            class BaseTrainer:
                def __init__(self, model_state, functions):
                    self._model = nnx.eval_shape(lambda: model_state.model)
                    self.mesh = functions.mesh  # (goes to the setter below)

                @property
                def model(self):
                    return self._model

                @property
                def mesh(self):
                    return self.model.mesh

                @mesh.setter
                def mesh(self, value):
                    pass

                def evaluate(self, module, batch):
                    with module.mesh:  # expect: SHL101
                        return module(batch)

                def predict(self, batch):
                    mesh = self.model.mesh
                    with mesh:  # expect: SHL101
                        return self.model(batch)

            class Trainer(BaseTrainer):
                def train(self, state, batches):
                    with self.mesh:  # expect: SHL101
                        for batch in batches:
                            state = self.step(state, batch)
                    return state
        """}, title="`.mesh` of an object of a class not known, which the project's classes make "
                    "a mesh (a property over a property over `nnx.eval_shape`'s result)"),
        example("""
            import functools

            import flax.linen as nn
            import jax
            import numpy as np
            from jax.sharding import Mesh

            class Model(nn.Module):
                @nn.compact
                def __call__(self, x):
                    x = nn.with_logical_constraint(x, ("batch", "embed"))
                    return nn.Dense(4)(x)

            def run(x, params, *, mesh, rules):
                with mesh, nn.logical_axis_rules(rules):  # expect: SHL101
                    return Model().apply(params, x)

            class Pipeline:
                def __init__(self, devices):
                    self.mesh = Mesh(np.array(devices), ("data",))

                def go(self, x, params, rules):
                    # the mesh reaches `run` bound by keyword in a partial
                    fn = functools.partial(run, mesh=self.mesh, rules=rules)
                    return jax.jit(fn)(x, params)
        """, title="a mesh bound by keyword through `functools.partial`"),
        example("""
            import dataclasses
            import jax
            from jax.sharding import AxisType, PartitionSpec as P

            @dataclasses.dataclass
            class Config:
                embed: int = 8
                mesh: jax.sharding.Mesh | None = None

            def run(cfg, x):
                mesh = jax.make_mesh((1,), ("x",), axis_types=(AxisType.Explicit,))
                cfg = dataclasses.replace(cfg, mesh=mesh)
                with cfg.mesh:  # expect: SHL101
                    return jax.sharding.reshard(x, P("x"))
        """, title="a mesh kept in a field of a configuration record (`cfg.mesh`)"),
        example("""
            import jax
            import jax.numpy as jnp
            import numpy as np
            from jax.experimental.pjit import pjit
            from jax.sharding import Mesh, PartitionSpec as PS

            def main(params, batches):
                mesh = Mesh(np.array(jax.devices()), ("dp",))
                train_step = pjit(lambda p, b: p - 0.1 * b, in_shardings=(PS(), PS("dp")),
                                  out_shardings=PS())
                with mesh:  # expect: SHL101
                    for batch in batches:
                        params = train_step(params, batch)
                return params
        """, title="a pjit loop with bare specs: reported, with what to migrate first and no fix"),
        example("""
            import jax
            import flax.linen as nn

            class MLP(nn.Module):
                @nn.compact
                def __call__(self, x):
                    init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
                    return nn.Dense(512, kernel_init=init)(x)

            mesh = jax.make_mesh((8,), ("data",))
            with nn.logical_axis_rules((("embed", None), ("mlp", "data"))), mesh:  # expect: SHL101
                variables = MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))
        """, title="an error: the model's partitioned params are no-ops under it"),
        example("""
            import jax
            import flax.linen as nn
            from jax.experimental import mesh_utils
            from jax.sharding import Mesh
            mesh = Mesh(mesh_utils.create_device_mesh((2, 1)), ("model", "data"))
            with nn.logical_axis_rules((("batch", "data"),)), mesh:  # expect: SHL101
                pass
        """),
        example("""
            import jax
            mesh = jax.make_mesh((4,), ("data",))
            with mesh:  # expect: SHL101
                pass
        """),
        example("""
            import jax
            from jax.sharding import Mesh

            def train(mesh: Mesh):
                with mesh:  # expect: SHL101
                    pass
        """),
        example("""
            import jax
            from jax import sharding as shd
            with shd.Mesh(jax.devices(), ("x",)):  # expect: SHL101
                pass
        """),
        example({
            "meshes.py": """
                import jax

                def make():
                    return jax.make_mesh((1,), ("data",))
            """,
            "train.py": """
                import jax
                from meshes import make

                mesh = make()
                if __name__ == "__main__":
                    with mesh:  # expect: SHL101
                        jax.jit(lambda x: x)(1)
            """,
        }, title="a module-level mesh from a helper in another file"),
        example({
            "meshes.py": """
                import jax
                from jax.sharding import Mesh

                MESH = Mesh(jax.devices(), ("data",))
            """,
            "train.py": """
                import jax
                from meshes import MESH

                def run(x):
                    with MESH:  # expect: SHL101
                        return jax.jit(lambda y: y)(x)
            """,
        }, title="a mesh constant imported from another module"),
        example({
            "checkpointing.py": """
                import jax
                from jax.sharding import Mesh

                class BaseCheckpointer:
                    def __init__(self, config):
                        self.mesh = Mesh(jax.devices(), ("data",))
            """,
            "generate.py": """
                import jax
                from checkpointing import BaseCheckpointer

                class Generator(BaseCheckpointer):
                    def load(self):
                        return None

                def run(config, x):
                    loader = Generator(config)
                    with loader.mesh:  # expect: SHL101
                        return jax.jit(lambda y: y)(x)
            """,
        }, title="the mesh attribute of a project class's instance, set in a base class's "
                 "`__init__`"),
        example("""
            import jax
            from jax.sharding import Mesh

            class ServingLoop:
                def __init__(self, devices):
                    self.decode_mesh = Mesh(devices, ("data",))

                    def update(x):
                        with self.decode_mesh:  # expect: SHL101
                            return jax.jit(lambda y: y)(x)

                    self.update = update
        """, title="`self`'s mesh read in a function nested in a method"),
        example("""
            import dataclasses
            import unittest
            import jax

            @dataclasses.dataclass(frozen=True)
            class Config:
                depth: int = 2
                mesh: jax.sharding.Mesh | None = None

            CFG = Config(depth=4)

            class ModelTest(unittest.TestCase):
                def setUp(self):
                    self.mesh = jax.make_mesh((1,), ("x",))
                    self.small_cfg = dataclasses.replace(CFG, mesh=self.mesh, depth=1)

                def test_step(self):
                    cfg = dataclasses.replace(self.small_cfg, depth=3)
                    with cfg.mesh:  # expect: SHL101
                        jax.jit(lambda y: y)(1.0)

                def test_direct(self):
                    with self.small_cfg.mesh:  # expect: SHL101
                        jax.jit(lambda y: y)(1.0)
        """, title="a mesh kept in a record on `self` (`dataclasses.replace(CFG, mesh=self.mesh)` "
                   "in `setUp`), read back through a copy of it"),
        example("""
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P

            class Benchmark:
                def __init__(self, mesh, inputs):
                    self._mesh = mesh
                    self._inputs = inputs

                def place(self, x):
                    return jax.device_put(x, NamedSharding(self._mesh, P()))

                def run(self, step):
                    with self._mesh:  # expect: SHL101
                        return jax.jit(step)(self._inputs)
        """, title="an attribute of `self` another method hands to an API that takes a mesh"),
    ]

    def check(self):
        versions = self.ctx.versions
        flax_noop = versions.at_least("flax", FLAX_NOOP)
        deprecated = versions.at_least("jax", DEPRECATED)
        if not (flax_noop or deprecated):
            return
        items = [w for w in self.facts.with_items if w.kind == "legacy_mesh"]
        # A mesh from a helper, `self.mesh`, a parameter: the value-flow layer decides.
        items += [w for w in self.facts.other_withs
                  if is_mesh(self.facts, self.project, w.expr, w.scope)]
        items = [w for w in items if not self._conditional(w)]
        if items and may_have_guards(self.ctx.source.text):
            # The branch for the releases without `jax.set_mesh` (`if not hasattr(jax,
            # "set_mesh")`, its `else`, a version compare, an `except AttributeError`).
            guards = version_guarded(self.facts.tree, [w.expr.lineno for w in items])
            items = [w for w in items
                     if not guarded_at(guards, w.expr.lineno, try_bodies=False)]
        for item in sorted(items, key=lambda w: (w.expr.lineno, w.expr.col_offset)):
            text = self.text(item.expr)
            beside = self._set_mesh_beside(item)
            silenced = self._silenced(item) if flax_noop and beside is None else None
            advice, fix, act = self._advice(item, text, silenced is not None)
            if beside is not None:
                if not deprecated:
                    continue
                msg = (f"`{text}` next to `{self.text(beside)}` only sets the legacy resource "
                       f"environment (`pxla.thread_resources`), which `with mesh:` is deprecated "
                       f"for since jax {DEPRECATED}; the mesh jax and Flax read is already set: "
                       f"keep it only while something reads that environment")
                severity, fix = "warning", None
            elif silenced is not None:
                # Certain only where every flax the pins allow drops them; what else shards the
                # values (a jit's in/out shardings, a shard_map) still does.
                certain = not versions.may_be_below("flax", FLAX_NOOP)
                since = "since flax 0.12.2" if certain else (
                    f"on flax >= {FLAX_NOOP}, which {versions.allowed_by('flax')} allow (and also flax "
                    f"{versions.oldest('flax')}, where it still does)")
                msg = (f"`with {text}:` does not activate Flax constraints {since}, and "
                       f"{silenced} runs under it: every logical constraint and logically "
                       f"partitioned parameter there is a no-op (the shardings they name are "
                       f"not applied); {advice}")
                # (a test runs toy sizes and checks values, which are the same unsharded:
                # nothing certainly goes wrong there)
                severity = "error" if certain and not self.ctx.test_code else "warning"
                if fix is not None:  # (it shards what ran unsharded: where values live changes)
                    fix = dataclasses.replace(fix, applicability="unsafe")
            elif deprecated:
                msg = (f"`with {text}:` is deprecated since jax {DEPRECATED}: it sets only the "
                       f"legacy resource environment, which `pjit` and `with_sharding_constraint` "
                       f"still read but `jax.jit` and Flax do not (since flax 0.12.2); {advice}")
                # (where only the project's oldest jax stands in the way, nothing is to be done now)
                severity = "warning" if fix is not None or act else "info"
            else:
                continue
            yield self.finding(item.expr, msg, severity=severity, fix=fix, tags=("deprecated",))

    def _advice(self, item, text: str, silenced: bool = False) -> tuple[str, Fix | None, bool]:
        """What to do instead, the fix where replacing the ``with`` keeps the program working, and
        whether something is to be done now without a fix. No fix where ``jax.set_mesh`` does not
        exist on the oldest jax the project allows, where code under the ``with`` reads the
        legacy environment that ``jax.set_mesh`` does not set, or where the ``with`` runs inside
        a function a jit compiles or a Flax module's forward pass (``jax.set_mesh`` raises in a
        trace: the mesh is set around its calls, or where the model runs). Unsafe where a model
        may be built under it with ``nnx.eval_shape`` (see ``FLAX_PLACES``). ``silenced``: Flax
        constraints run under it, so keeping it as it is leaves them no-ops wherever the flax
        that drops them runs."""
        versions = self.ctx.versions
        blocker = self._blocker(item)
        caveat = self._caveat(item) if blocker is None else None
        blocked = blocker is not None
        # Inside a function a jit compiles, or a Flax module's forward pass (it runs wherever
        # the model is initialised or applied, under a jit as a rule), the `with` runs while
        # traced, where `jax.set_mesh` raises (`set_mesh can only be used outside of jax.jit`,
        # in every jax that has it): the mesh is set outside, around the calls, instead.
        traced = self._traced_where(item)
        if traced is None:
            enter, replace = f"enter `jax.set_mesh({text})`", f"use `with jax.set_mesh({text}):`"
        else:
            around, why = traced
            enter = replace = (f"enter `jax.set_mesh({text})` {around}, outside the trace ({why}, "
                               f"and `jax.set_mesh` raises inside a trace)")
        if versions.may_be_below("jax", SET_MESH_ADDED):
            needs = releases.flax_needs_jax(FLAX_NOOP)
            if silenced and needs is not None:
                # Every flax that drops them needs a jax that has `jax.set_mesh`.
                return (f"its replacement `jax.set_mesh` needs jax >= {SET_MESH_ADDED} and "
                        f"{versions.allowed_by('jax')} allow jax {versions.oldest('jax')}, but flax "
                        f"{FLAX_NOOP} needs jax >= {needs}: where `jax.set_mesh` exists "
                        f"(`hasattr(jax, \"set_mesh\")`) {enter} as well, "
                        f"or require jax >= {SET_MESH_ADDED} and replace it",
                        None, blocked)
            # (nothing to do now: what needs the legacy environment is said for the day the
            # pins move, and does not make it a warning)
            then = (f" (then migrate first what needs the legacy resource environment, which "
                    f"`jax.set_mesh` does not set: {blocker})" if blocker is not None else "")
            return (f"its replacement `jax.set_mesh` needs jax >= {SET_MESH_ADDED}, and "
                    f"{versions.allowed_by('jax')} allow jax {versions.oldest('jax')}: keep it until they "
                    f"require jax >= {SET_MESH_ADDED}{then}", None, False)
        if blocker is not None:
            return (f"but {blocker}, which `jax.set_mesh` does not set: migrate that first (`pjit` "
                    f"to `jax.jit` with `NamedSharding`s, `pxla.thread_resources` to "
                    f"`jax.sharding.get_abstract_mesh()`), then {replace}", None, True)
        if traced is not None:  # (no fix: `with jax.set_mesh(...)` in its place would raise)
            return (f"{enter} and leave `{text}` out of this `with`"
                    + (f" once nothing under it needs the legacy resource environment, which "
                       f"`jax.set_mesh` does not set: {caveat}" if caveat is not None else ""),
                    None, True)
        if caveat is not None:  # (the fix stays: unsafe, as a pjit is reached)
            return (f"{replace} once nothing under it needs the legacy "
                    f"resource environment, which `jax.set_mesh` does not set: {caveat}",
                    self._fix(item, text, unsafe=True), False)
        unbox = self._unbox_under(item) if versions.at_least("flax", FLAX_NOOP) else None
        if unbox is not None:  # (the fix stays: unsafe)
            return (f"{replace} once {unbox} under it unboxes only values already placed: "
                    f"with logical axis rules entered, under `jax.set_mesh` Flax's `unbox` "
                    f"(flax >= {FLAX_NOOP}) applies `with_sharding_constraint`, outside a jit "
                    f"here, which raises for an abstract value of `jax.eval_shape` or a jax "
                    f"array not placed with a `NamedSharding`; under the legacy mesh it does "
                    f"nothing", self._fix(item, text, unsafe=True), False)
        shapes, maybe = self._eval_shape_under(item) if versions.at_least("flax", FLAX_PLACES) \
            else (None, False)
        rules = self._rules_around(item)
        if shapes is not None and rules:  # (and the fix is unsafe)
            return (f"{replace}, provided the logical axis rules entered with it map every "
                    f"logical axis name that the parameters of a model built under it with "
                    f"`nnx.eval_shape` carry ({shapes}): under `jax.set_mesh`, `nnx.eval_shape` "
                    f"(flax >= {FLAX_PLACES}) places parameters by those names and raises for a "
                    f"name no rule maps to the mesh's axes (`Resource axis ... not found in "
                    f"mesh`)",
                    self._fix(item, text, unsafe=True), False)
        if shapes is not None:  # (and the fix is unsafe)
            return (f"{replace}, and where a model is built under it with `nnx.eval_shape` "
                    f"({shapes}), enter logical axis rules that map its parameters' names as "
                    f"well (`nn.logical_axis_rules(rules)`): under `jax.set_mesh`, "
                    f"`nnx.eval_shape` (flax >= {FLAX_PLACES}) places parameters by their logical "
                    f"axis names and raises where no rules map them to the mesh's axes "
                    f"(`Resource axis ... not found in mesh`)", self._fix(item, text, unsafe=True),
                    False)
        # (a module calling `nnx.eval_shape` is reached, though no function that calls it is:
        # nothing to say, but the fix stays unsafe)
        return replace, self._fix(item, text, unsafe=maybe), False

    def _rules_around(self, item) -> bool:
        """Logical axis rules entered with the ``with``, around it or inside it."""
        stmt = item.stmt
        last = stmt.end_lineno or stmt.lineno
        return any(w.kind == "rules" and w.scope is item.scope and w.stmt.lineno <= last
                   and stmt.lineno <= (w.stmt.end_lineno or w.stmt.lineno)
                   for w in self.facts.with_items)

    def _unbox_under(self, item) -> str | None:
        """A Flax ``unbox`` that runs under the ``with`` outside a jit with logical axis rules
        entered with it (where callers enter them, the contexts cannot say it is certain):
        ``nn.unbox``/``meta.unbox`` of a
        tree, or ``.unbox()`` of a box, in its body, in a function or lambda written there, or
        in a function of this file named there (``jax.tree.map(unbox_fn, ...)``). ``.unbox(
        apply_constraint=False)`` constrains nothing. Under ``jax.set_mesh`` the box's
        constraint applies, eagerly (``tests/test_project_scope.py`` holds the behaviour).
        Asked only where the ``with`` itself does not run traced (``_advice``)."""
        if not self._rules_around(item):
            return None
        stmt = item.stmt
        first = stmt.body[0].lineno if stmt.body else stmt.lineno
        last = stmt.end_lineno or stmt.lineno
        # (what runs traced -- in a function a jit compiles, a lambda handed to a transform,
        # under `jax.eval_shape` -- applies the constraint where it holds: the file's
        # execution says which)
        execution = execution_of(self.facts)
        named: set[int] = set()  # (functions of this file called or mapped over a tree there)
        for c in self._calls_under(item):
            if execution.is_traced(c):
                continue
            q = self.facts.qualify(c.node.func) or ""
            mapped = q in EAGER_HIGHER_ORDER or not q and type(c.node.func) is ast.Name \
                and c.node.func.id == "map"
            for n in [c.node.func, *(c.node.args if mapped else ())]:
                if type(n) is ast.Name:
                    f = function_named(self.facts, n, c.scope)
                    if f is not None:
                        named.add(id(f))
        for c in self.facts.calls:
            func = c.node.func
            if not (type(func) is ast.Attribute and func.attr == "unbox" and not (
                    type(func.value) is ast.Name and func.value.id == "self")
                    or type(func) is ast.Name and func.id == "unbox"):
                continue
            if execution.is_traced(c):
                continue
            scope, inside = c.scope, False
            while scope is not None and not inside:
                inside = scope is item.scope and first <= c.node.lineno <= last or \
                    id(scope) in named
                scope = scope.parent
            if not inside or any(k.arg == "apply_constraint" and not (
                    type(k.value) is ast.Constant and k.value.value is True)
                    for k in c.node.keywords):
                continue
            q = self.facts.qualify(func) or ""
            if q in _FLAX_UNBOX or not q and not c.node.args:  # (a box's own method)
                return f"`{self.text(func)}` (line {c.node.lineno})"
        return None

    def _eval_shape_under(self, item) -> tuple[str | None, bool]:
        """What under the ``with`` builds a model with ``nnx.eval_shape`` -- a call of it there,
        or a call there whose code reaches a function that calls it -- for the message; and
        whether something there may: that, or project code a call reaches in a module that
        calls it (coarse on purpose, as ``_reaches_pjit``: it decides whether the fix is safe).
        The legacy mesh leaves the parameters' logical names alone, ``jax.set_mesh`` makes
        ``nnx.eval_shape`` place them by those names."""
        for c in self._calls_under(item):
            if c.api is not None and c.api.name == NNX_EVAL_SHAPE:
                return f"`{self.text(c.node.func)}` runs under it", True  # (a call of it there)
        found = self._first_reaching(item, self.project.eval_shape_symbols)
        if found is not None:
            call, key = found
            return (f"`{self.text(call.func)}` runs under it and reaches `{_shown(key)}`, which "
                    f"calls it"), True
        return None, self._reaching_api(item, NNX_EVAL_SHAPE) is not None

    def _reaching_api(self, item, api: str):
        """The first call under the ``with`` of project code that reaches a module calling
        ``api`` (through calls, methods, base classes, any depth), and the symbol reached.
        Module-level on purpose: it decides whether a fix is safe."""
        summaries = self.project.summaries
        for c, ref in self._call_refs(item):
            for key in self.project.reachable(ref, self.facts.module):
                s = summaries.get(key.partition(":")[0])
                if s is not None and api in s.apis:
                    return c, key
        return None

    def _traced_where(self, item) -> tuple[str, str] | None:
        """Where to set the mesh instead, and why, when the ``with`` runs while traced: in a
        function a jit site of this file compiles (decorated, or named: ``jax.jit(self.step)``,
        ``jax.jit(functools.partial(run, ...))``) or of another module (named there), or one
        nested in it; in the forward pass of a Flax module (Linen or NNX: ``__call__``,
        ``setup``, an ``@nn.compact`` method), which runs where the model is initialised or
        applied, under a jit as a rule."""
        around: list = []  # (the functions around the `with`, the innermost first)
        s = item.scope
        cls = None
        while s is not None and s.kind != "module":
            if s.kind == "function":
                around.append(s)
            elif s.kind == "class" and cls is None:
                cls = s
            s = s.parent
        if not around:
            return None
        for site in self.facts.jit_sites:
            compiled = compiled_function(self.facts, site)
            if compiled is None and isinstance(site.target, ast.Call):
                # `jax.jit(functools.partial(run, model=m))`: the function the partial binds
                compiled = function_named(
                    self.facts, wrapped_callable(self.facts, site.target, site.scope), site.scope)
            if compiled is not None and compiled in around:
                api = _JIT_SHOWN.get(site.api_name, site.api_name)
                return (f"around the calls of `{compiled.name}`",
                        f"`{compiled.name}` is compiled by the `{api}` of line {site.node.lineno}")
        elsewhere = self.project.compiled_elsewhere
        for fn in around:
            found = elsewhere.get(f"{self.facts.module}:{fn.qualname}")
            if found is not None:
                module, api, line = found
                api = _JIT_SHOWN.get(api, api)
                return (f"around the calls of `{fn.name}`",
                        f"`{fn.name}` is compiled by the `{api}` of line {line} of `{module}`")
        if cls is None:
            return None
        # (its forward pass only: `__call__`, Linen's `setup` and `@nn.compact` methods; any
        # other method may be a loader, run eagerly)
        method = next(f for f in [item.scope, *_parents(item.scope)] if f.parent is cls)
        if method.name not in ("__call__", "setup") and not any(
                (self.facts.qualify(d) or "").endswith(".compact") for d in method.decorators
                if isinstance(d, (ast.Name, ast.Attribute))):
            return None
        ref, module = f"{self.facts.module}:{cls.qualname}", self.facts.module
        if self.project.is_subclass(ref, LINEN_MODULE, module) or \
                self.project.is_subclass(ref, NNX_MODULE, module):
            return ("where the model is initialised, applied or called",
                    f"`{cls.name}.{method.name}` is part of a Flax module's forward pass, "
                    f"which runs traced wherever the model runs under a jit")
        return None

    def _blocker(self, item) -> str | None:
        """Code under the ``with`` that needs the legacy resource environment it sets: a
        ``pjit`` or ``with_sharding_constraint`` given bare ``PartitionSpec``s (with only
        ``jax.set_mesh`` they fail: `pjit requires a non-empty mesh in context`), a project
        function a call there reaches that reads ``pxla.thread_resources``; or, where the
        project reads it and shardlint cannot tell whether the ``with``'s code does (its calls
        are not all followed), the project's readers."""
        site = self._pjit_under(item, self._bare)
        if site is not None:
            return (f"{_named(site)} runs under it, a `pjit` given bare `PartitionSpec`s that "
                    f"reads the legacy mesh")
        for c in self._calls_under(item):
            if c.api is not None and c.api.name == "jax.lax.with_sharding_constraint" \
                    and bare_specs(self.facts, c.arg(1, "shardings"), c.scope) is not None:
                return (f"`{self.text(c.node.func)}` runs under it with a bare `PartitionSpec` and "
                        f"reads the legacy mesh")
        readers = self.project.legacy_env_readers
        if not readers:
            return None
        found = self._first_reaching(item, self.project.legacy_env_symbols)
        if found is not None:
            call, key = found
            return (f"`{self.text(call.func)}` runs under it and reaches `{_shown(key)}`, which "
                    f"reads the legacy resource environment (`pxla.thread_resources`)")
        # (the calls under it are not all followed: whether they reach one is not known)
        more = f" and {len(readers) - 1} more" if len(readers) > 1 else ""
        return (f"the project reads the legacy resource environment (`pxla.thread_resources`) "
                f"in `{readers[0]}`{more}")

    def _caveat(self, item) -> str | None:
        """Where nothing certainly needs the legacy resource environment but a ``pjit`` whose
        specs shardlint cannot read may: one under the ``with``, or in a project function a
        call there reaches (given bare ``PartitionSpec``s, a ``pjit`` reads it)."""
        site = self._pjit_under(item, lambda s: specs_may_be_bare(self.facts, s))
        if site is not None:
            return (f"{_named(site)} runs under it, a `pjit` given shardings shardlint cannot "
                    f"read (given bare `PartitionSpec`s, a `pjit` reads it)")
        found = self._first_reaching(item, self.project.pjit_symbols)
        if found is None:
            return None
        call, key = found
        return (f"`{self.text(call.func)}` runs under it and reaches `{_shown(key)}`, which calls a "
                f"`pjit` given shardings shardlint cannot read (given bare `PartitionSpec`s, a "
                f"`pjit` reads it)")

    def _first_reaching(self, item, targets: frozenset[str]) -> tuple[ast.Call, str] | None:
        """The first call under the ``with`` whose code runs one of ``targets``
        (:meth:`ProjectIndex.first_reaching`), and that symbol."""
        calls = self._call_refs(item) if targets else []
        found = self.project.first_reaching([r for _, r in calls], self.facts.module, targets) \
            if calls else None
        return (calls[found[0]][0].node, found[1]) if found is not None else None

    def _pjit_under(self, item, given):
        """The first ``pjit`` of this file that runs under the ``with`` (made or called there)
        and whose shardings satisfy ``given``."""
        stmt = item.stmt
        first = stmt.body[0].lineno if stmt.body else stmt.lineno
        last = stmt.end_lineno or stmt.lineno
        for site in self.facts.jit_sites:
            if site.api_name != PJIT or not given(site):
                continue
            if (site.scope is item.scope and first <= site.node.lineno <= last) or any(
                    c.scope is item.scope and first <= c.node.lineno <= last
                    for c in calls_of(self.facts, site)):
                return site
        return None

    def _bare(self, site) -> bool:
        """A pjit given bare ``PartitionSpec``s, as this file shows them."""
        kws = jit_keywords(self.facts, site)
        return any(k in _SPEC_KEYWORDS and bare_specs(self.facts, v, site.scope) is not None
                   for k, v in (kws or {}).items())

    def _call_refs(self, item) -> list:
        """(call, reference of what it calls) of the calls under the ``with`` that name what
        they call."""
        out = []
        for c in self._calls_under(item):
            ref = reference(self.facts, c.node.func, c.scope) \
                if isinstance(c.node.func, (ast.Name, ast.Attribute)) else None
            if ref is not None:
                out.append((c, ref))
        return out

    def _calls_under(self, item) -> list:
        """The calls in the body of the ``with`` of ``item`` (in its own scope), in order."""
        stmt = item.stmt
        first = stmt.body[0].lineno if stmt.body else stmt.lineno
        last = stmt.end_lineno or stmt.lineno
        return [c for c in self.facts.calls
                if c.scope is item.scope and first <= c.node.lineno <= last]

    def _conditional(self, item) -> bool:
        """A name the function binds to something else than a mesh on another path
        (``ctx = mesh if distributed else contextlib.nullcontext()``, or a mesh in one branch
        and ``nullcontext()`` in the other): not certainly a mesh."""
        expr = item.expr
        if isinstance(expr, ast.IfExp):
            return True
        if not isinstance(expr, ast.Name) or item.scope.kind != "function":
            return False
        values = [a.value for a in item.scope.assigned.get(expr.id, ())]
        if any(isinstance(v, ast.IfExp) for v in values):
            return True
        if len(values) < 2:
            return False
        return any(v is None or not (self.facts.mesh_for(v, item.scope) is not None
                                     or is_mesh(self.facts, self.project, v, item.scope))
                   for v in values)

    def _set_mesh_beside(self, item):
        """The ``jax.set_mesh(...)`` item of the same ``with`` (``with jax.set_mesh(m), m:``)."""
        for other in self.facts.with_items:
            if other.stmt is item.stmt and other.kind == "mesh":
                return other.expr
        return None

    def _silenced(self, item) -> str | None:
        """What runs under the ``with`` that a legacy mesh leaves unsharded: a Linen logical
        constraint or logically partitioned parameter, directly or through the model or
        function called there (None when nothing does: then it is only deprecated)."""
        stmt = item.stmt
        first = stmt.body[0].lineno if stmt.body else stmt.lineno
        last = stmt.end_lineno or stmt.lineno
        module = self.facts.module
        for e in self.project.entries(module):
            if e.scope == item.scope.qualname and first <= e.line <= last:
                if e.model.startswith(HANDED):  # (`model.apply(...)` of a parameter...)
                    classes = self.project.handed_classes(e.model, module)
                    if classes and all(self.project.needs(c) & RULES for c in classes):
                        return f"{_class_names(classes)} ({held_as(e.model)})"
                    continue
                model = self.project.resolve(e.model, module)
                # (an NNX module built there runs its __init__, not its forward pass -- unless
                # the module built is called there too)
                needs = 0 if model is None else self.project.needs_running(model) \
                    if e.kind == "nnx" and not self._called_in(e, item.scope, first, last) \
                    else self.project.needs(model)
                if model is not None and needs & RULES:
                    return f"`{model.partition(':')[2]}`"
        for c in self.facts.calls:
            if c.scope is not item.scope or not (first <= c.node.lineno <= last):
                continue
            if c.api is not None and c.api.role in _LOGICAL:
                return f"`{self.text(c.node.func)}`"
            if c.api is None and isinstance(c.node.func, (ast.Name, ast.Attribute)):
                ref = reference(self.facts, c.node.func, c.scope)
                key = self.project.resolve(ref, module) if ref is not None else None
                if key is None:
                    continue
                needs = self.project.needs(key) if self._built_and_called(c, first, last) \
                    else self.project.needs_running(key)
                if needs & RULES:
                    return f"`{self.text(c.node.func)}`"
        for call, node, key in self._functions_handed(item):
            if self.project.needs_running(key) & RULES:
                return f"`{self.text(node)}` (handed to `{self.text(call.func)}`)"
        return self._handed_model(item)

    def _functions_handed(self, item) -> list[tuple[ast.Call, ast.expr, str]]:
        """(call, argument, the project function's key) of the functions handed to a call
        under the ``with`` (``lax.fori_loop(0, n, body, ...)``, a partial or jit of one,
        or a local bound to one): they run there."""
        out = []
        module = self.facts.module
        calls = self._calls_under(item)
        called = {id(c.node.func) for c in calls}  # (`jax.jit(f)(x)`: the jit runs there)
        for c in calls:
            n = c.node
            if id(n) not in called and self.facts.qualify(n.func) not in _RUNS_CALLABLES:
                ref = reference(self.facts, n.func, c.scope) \
                    if isinstance(n.func, (ast.Name, ast.Attribute)) else None
                key = self.project.resolve(ref, module) if ref is not None else None
                sym = self.project.symbol(key) if key is not None else None
                if sym is None or sym.kind != "function":
                    # (a jit, a partial or a package's call may keep it for later: only a
                    # project function is taken to call what it is handed)
                    continue
            for a in (*n.args, *(k.value for k in n.keywords)):
                ref = self._callable_ref(a, c.scope)
                key = self.project.resolve(ref, module) if ref is not None else None
                sym = self.project.symbol(key) if key is not None else None
                if sym is not None and sym.kind in ("function", "alias"):
                    out.append((n, a, key))
        return out

    def _handed_model(self, item) -> str | None:
        """A model handed to a function that applies it (``transformer.apply(...)`` of a
        parameter), where that function runs under the ``with``: called there, or handed
        there to a call as a callable (``lax.fori_loop(0, n, partial(body, transformer=m),
        ...)``, a local bound to ``jax.jit(functools.partial(run, model=m))``). Only where
        every class the project hands it applies Linen constraints: the value flow does not
        tell which caller's model this call runs."""
        appliers = self.project.model_appliers()
        if not appliers:
            return None
        module = self.facts.module
        refs = [ref for c in self._calls_under(item)
                if (ref := self._callable_ref(c.node.func, c.scope)) is not None]
        # (an argument runs there where it is a function: a value handed on does not)
        refs += [key for _, _, key in self._functions_handed(item)]
        targets = set(appliers)
        while refs and targets:  # (the classes of those reached only: few are)
            found = self.project.first_reaching(refs, module, frozenset(targets))
            if found is None:
                return None
            key = found[1]
            classes = self.project.applied_models(key)
            if classes and all(self.project.needs(c) & RULES for c in classes):
                how = held_as(appliers[key][0])
                return f"{_class_names(classes)}, applied in `{key.rpartition(':')[2]}` ({how}),"
            targets.discard(key)
        return None

    def _callable_ref(self, node: ast.expr, scope) -> str | None:
        """The reference of the function a callable expression runs (``wrapped_callable``)."""
        name = wrapped_callable(self.facts, node, scope)
        return reference(self.facts, name, scope) if name is not None else None

    def _called_in(self, entry, scope, first: int, last: int) -> bool:
        """The NNX module built at ``entry`` is called in the same function between ``first``
        and ``last``."""
        return any(self._built_and_called(c, first, last) for c in self.facts.calls
                   if c.scope is scope and c.node.lineno == entry.line
                   and c.node.col_offset == entry.col)

    def _built_and_called(self, c, first: int, last: int) -> bool:
        """``block = Block(rngs=...)`` and ``block(x)`` in the same function between ``first``
        and ``last``: the module's forward pass runs there."""
        stmt = c.stmt
        if not isinstance(stmt, ast.Assign) or stmt.value is not c.node:
            return False
        names = {t.id for t in stmt.targets if isinstance(t, ast.Name)}
        return bool(names) and any(
            o.scope is c.scope and first <= o.node.lineno <= last
            and isinstance(o.node.func, ast.Name) and o.node.func.id in names
            for o in self.facts.calls)

    def _fix(self, item, text: str, unsafe: bool = False) -> Fix | None:
        expr = item.expr
        jax_name = next((local for local, q in self.facts.imports.names.items() if q == "jax"), None)
        set_mesh = next((local for local, q in self.facts.imports.names.items()
                         if q in ("jax.set_mesh", "jax.sharding.set_mesh")), None)
        call = f"{jax_name}.set_mesh" if jax_name else set_mesh
        if call is None:
            return None
        # `jax.set_mesh` does not set the legacy environment: code that reads it would lose it
        # (the project's own, or a library called under the `with` that shardlint cannot read).
        safety = "unsafe" if unsafe or self._calls_a_library(item) or self._reaches_pjit(item) \
            else "safe"
        return Fix(f"Replace `{text}` with `{call}({text})`", safety,
                   (Edit(self.span(expr), f"{call}({text})"),))

    def _reaches_pjit(self, item) -> bool:
        """A call under the ``with`` of project code that reaches a module calling ``pjit``:
        given bare ``PartitionSpec``s there, it reads the legacy environment ``jax.set_mesh``
        does not set."""
        return self._reaching_api(item, PJIT) is not None

    def _calls_a_library(self, item) -> bool:
        return self._library_call(item) is not None

    def _library_call(self, item):
        """The first call under the ``with`` of a package shardlint cannot read
        (``es.get_corrected_named_sharding``): it may read the legacy environment the ``with``
        sets."""
        for c in self._calls_under(item):
            q = c.qualified
            if q is not None and q.partition(".")[0] not in _READABLE:
                ref = reference(self.facts, c.node.func, c.scope) \
                    if isinstance(c.node.func, (ast.Name, ast.Attribute)) else None
                if ref is None or self.project.resolve(ref, self.facts.module) is None:
                    return c
        return None


def _parents(scope):
    """The scopes around ``scope``, innermost first."""
    s = scope.parent
    while s is not None:
        yield s
        s = s.parent


def _named(site) -> str:
    """How a message names a jit site: the name it is bound to, else where it is."""
    return f"`{site.bound_name}`" if site.bound_name else f"the `pjit` of line {site.node.lineno}"


def _class_names(classes) -> str:
    """The classes of project class keys, named in order (`` `A`, `B` ``)."""
    return ", ".join(f"`{c.rpartition(':')[2]}`" for c in sorted(classes))


def _shown(key: str) -> str:
    """``mod.Qual`` of a symbol key (``mod`` for a module's top-level code)."""
    module, _, qual = key.partition(":")
    return f"{module}.{qual}" if qual else module


_LOGICAL = (Role.LOGICAL_CONSTRAINT, Role.LOGICAL_PARTITIONING)
# Calls that run the callables they are handed, there and then.
_RUNS_CALLABLES = frozenset(f"jax.lax.{n}" for n in (
    "fori_loop", "while_loop", "scan", "cond", "switch", "map", "associative_scan"))
_FLAX_UNBOX = frozenset({"flax.linen.unbox", "flax.linen.meta.unbox", "flax.core.meta.unbox",
                         "flax.core.unbox"})
# How a message names a jit API (its canonical name otherwise: `jax.jit`, `jax.pmap`).
_JIT_SHOWN = {PJIT: "pjit", NNX_JIT: "nnx.jit", LINEN_JIT: "nn.jit"}
# Packages whose calls are known not to read the legacy environment (jax's own readers are the
# APIs that honour `with mesh:` on purpose: pjit, with_sharding_constraint).
_READABLE = frozenset({"jax", "flax", "optax", "numpy", "math", "functools", "itertools",
                       "collections", "logging", "builtins", "typing", "dataclasses"})
