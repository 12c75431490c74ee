"""SHL203 stacked-axis-unnamed."""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator

from shardlint.rules.base import Edit, Finding, Fix, Related, Rule, example, register
from shardlint.semantics.catalog.api import NNX_MODULE, Role
from shardlint.semantics.file.facts import Opaque, Scope
from shardlint.semantics.flow.project import ProjectIndex, project_cached
from shardlint.semantics.flow.summary import reference
from shardlint.semantics.flow.valueflow import kind_terms
from shardlint.semantics.sharding.lifts import (
    Lift,
    annotation_calls,
    is_nnx_annotation,
    lifted_ref,
    lifts,
    local_classes,
    returned_calls,
    unwrapped,
)
from shardlint.semantics.sharding.partitioning import (
    LINEN_BOXES,
    NNX_ANNOTATIONS,
    deref,
    is_partition_name_key,
    literal_dict,
    reached_apis,
    symbol_ref,
)
from shardlint.source import Span

_MAX_SITES = 200
# What an NNX function returns of a module: its states (`nnx.split`, `nnx.state`).
_SPLITS = frozenset({"flax.nnx.split", "flax.nnx.state"})  # annotation sites looked at for "all of them name only None"

_LINEN_BLOCK = """
import jax
import flax.linen as nn

class Block(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        return nn.Dense(512, kernel_init=init)(x), None
"""

_NNX_BLOCK = """
import jax
from flax import nnx

class Block(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        init = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, "model"))
        self.linear = nnx.Linear(512, 1024, kernel_init=init, rngs=rngs)
"""

_HANDED_LAYERS = """
from flax import nnx


class Dense(nnx.Module):
    def __init__(self, config, rngs: nnx.Rngs):
        init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("embed", "mlp"))
        self.linear = nnx.Linear(512, 1024, kernel_init=init, rngs=rngs)


class Plain(nnx.Module):
    def __init__(self, config, rngs: nnx.Rngs):
        self.linear = nnx.Linear(512, 1024, rngs=rngs)
"""

# A stage class handed its layer class by a decoder that picks it from a table of classes
# (the shape of maxtext's NNXScannedPipelineStage / NNXDecoder.get_decoder_layers).
_HANDED_STAGE = """
from flax import nnx


class Stage(nnx.Module):
    def __init__(self, layer_cls, config, *, rngs: nnx.Rngs):
        def create(rng):
            return layer_cls(config, rngs=rng)

        self.layers = nnx.vmap(create, in_axes=0, out_axes=0{metadata})(rngs.fork(split=4))
"""
_HANDED_DECODER = """
from flax import nnx
from layers import {classes}
from stage import Stage


class Decoder(nnx.Module):
    def __init__(self, config, rngs: nnx.Rngs):
        blocks = self.pick(config)
        self.stage = Stage(blocks[0], config, rngs=rngs)

    def pick(self, config):
        table = {{"dense": [{first}], "plain": [{second}]}}
        return table[config.kind]
"""

# A pipeline whose base class stacks what a factory it is handed builds, twice (the shape of
# maxtext's PipelineBase: `nnx.split` of the stage under two nested `nnx.vmap`s).
_PIPELINE = """
from flax import nnx


class PipelineBase(nnx.Module):
    def __init__(self, config, stage_factory, *, rngs: nnx.Rngs):
        def create_stage(r):
            stage = stage_factory(r)
            return nnx.split(stage, nnx.Param, ...)

        stages = nnx.vmap(create_stage, in_axes=0, out_axes=(None, 0, 0),
                          transform_metadata={{nnx.PARTITION_NAME: "stages"}})
        repeats = nnx.vmap(stages, in_axes=0, out_axes=(None, 0, 0){metadata})
        self.graphdef, self.params, self.rest = repeats(rngs.fork(split=(2, 4)))


class Pipeline(PipelineBase):
    pass


def build(config, rngs):
    def make_stage(r):
        return {layer}(config, rngs=r)

    return Pipeline(config, make_stage, rngs=rngs)
"""

# A decoder that scans a layer class its callers pick, through `nn.remat` applied in a loop, along
# an axis read from the configuration (the shape of maxtext's Decoder.scan_decoder_layers).
_HANDED_LINEN = """
import flax.linen as nn
from layers import {layer}


class Decoder(nn.Module):
    scan_axis: int = 0

    def layer_classes(self):
        return [{layer}]

    def with_remat(self, block_layers):
        out = []
        for block_layer in block_layers:
            out.append(nn.remat(block_layer, prevent_cse=False))
        return out

    def scan_layers(self, layer_cls, length):
        spec = self.scan_axis if self.is_mutable_collection("params") else 1
        return nn.scan(layer_cls, variable_axes={{"params": spec}},  # {mark}
                       split_rngs={{"params": True}}, length=length)

    @nn.compact
    def __call__(self, x):
        layers = self.with_remat(self.layer_classes())
        y, _ = self.scan_layers(layers[0], 4)(x, None)
        return y
"""

_LINEN_LAYERS = """
import flax.linen as nn


class Boxed(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        return nn.Dense(16, kernel_init=init)(x), None


class Plain(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        return nn.Dense(16)(x), None
"""

# A pipeline that vmaps a function whose first argument is the stage module, handed in as a
# field nobody in the project sets (the shape of maxtext's pipeline_deprecated.py), and wraps
# that vmap in another one; `{metadata}` is where the partition name goes.
_HANDED_STAGE_LINEN = """
import flax.linen as nn


class Pipeline(nn.Module):
    stage: nn.Module
    repeats: int = 2

    def stage_vmap(self):
        def run_stage(stage, x):
            return stage(x)

        return nn.vmap(run_stage, in_axes=0, variable_axes={{"params": 0}},  # {mark}
                       split_rngs={{"params": True}}{metadata})

    @nn.compact
    def __call__(self, x):
        stages = self.stage_vmap()
        repeated = nn.vmap(stages, in_axes=0, variable_axes={{"params": 0}},  # {outer}
                           split_rngs={{"params": True}}{metadata})
        return repeated(self.stage, x)
"""

# A scanned wrapper chosen by if/else: the class, or `nn.remat` of it (maxdiffusion's flux).
_CHOSEN = """
import flax.linen as nn


class Block(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        return nn.Dense(16, kernel_init=init)(x), None


class Stack(nn.Module):
    remat: bool = False

    def setup(self):
        if self.remat:
            Wrapped = nn.remat(Block, prevent_cse=True)
        else:
            Wrapped = Block
        self.blocks = nn.scan(Wrapped, variable_axes={{"params": {axis}}},  # {mark}
                              split_rngs={{"params": True}}, length=4)
"""


@register
class StackedAxisUnnamed(Rule):
    code = "SHL203"
    name = "stacked-axis-unnamed"
    severity = "error"
    summary = "`vmap`/`scan` stacks partitioned variables without naming the new axis."
    what = """
Flags a lifted transform that stacks the variables of a model whose code annotates them with
partition names, without saying how the new leading axis is named:

* Linen `nn.vmap` / `nn.scan` with a `variable_axes` dict that maps `"params"` (or every
  collection) to an axis, over a module that boxes its params (`nn.with_logical_partitioning`,
  `nn.with_partitioning`, `LogicallyPartitioned`, `Partitioned`), with no
  `metadata_params={nn.PARTITION_NAME: ...}`. An error: init raises. The axis is a literal, or
  a value that is an axis on every path (`cfg.param_scan_axis`, a local set from one); a value
  that may be None or `nn.broadcast` is not known to stack. The module is a class named there,
  a local bound to a class or `nn.remat` of one (in either branch of an `if`), or a class the
  callers hand in, which the value-flow layer follows through lists, loops and `nn.remat`
  (the first boxing class, by name, is reported; a warning, not an error, where some of the
  classes it may be box no params).
  Where the module cannot be named -- the first argument of a lifted function or lambda
  (`nn.vmap(fn)` with `fn(module, ...)`: whatever the caller passes), another lift a method
  returns, a class parameter no caller of the project passes -- "not known" does not make it
  quiet: in a project that boxes Linen params anywhere, a warning says that init raises if that
  module's params are boxed.
* NNX `nnx.vmap` / `nnx.scan`, as a decorator or a call, whose function constructs and returns
  an `nnx.Module` of the project annotated with `nnx.with_partitioning` or `out_sharding=` (or an
  `nnx` layer given such an initializer), with no `transform_metadata={nnx.PARTITION_NAME: ...}`.
  The module may be named, or built by a class or factory the function is handed: a parameter
  of it or of an enclosing function, which the value-flow layer follows to what the callers pass
  (any depth, across files; an item of a list or dict of classes counts as its classes; a
  subclass's constructor call counts for the `__init__` it inherits). What is returned may be
  the module or its states (`nnx.split`, `nnx.state`), and the function may itself be an
  `nnx.vmap` of one (an outer transform stacks what the inner one builds).
  A warning: nothing fails, the metadata is wrong.

Not flagged: transforms that stack no params (`variable_axes={"params": None}`, a forward
`nn.vmap` with only `in_axes`, an `nnx.vmap` over a function that only calls a model or drops
what it builds, `out_axes=None`), targets without partitioning annotations, NNX targets whose
every annotation names only None (`(None, None)`: the stacked variable's spec is replicated on
every dimension, the new one included; reproduced on flax 0.12: `P(None, None)` on a
stacked `(3, 4, 4)` kernel), NNX classes of this file whose every annotated variable is made in
their `__init__` under `if flag:` on a parameter that defaults to False or None, built by the
lifted function without that flag (no annotated variable is created), Linen targets that
are classes of other packages, a handed-in class or factory whose callers' values lead to no
annotated project class, and a Linen module shardlint cannot name in a project that boxes no
Linen params. Linen raises whatever the names, so all-None boxes still count;
but only boxes on the traced path do: a Linen class's `setup` and `__call__` (or the methods a
literal `methods=` names) and what they call, not a method the transform never runs.
"""
    why = """
Partitioned variables carry one name per dimension. A lifted transform that adds a dimension
must add a name too. Linen refuses to guess: `PartitioningUnspecifiedError: Trying to transform a
Partitioned variable but "partition_name" is not specified in metadata_params`, raised at init,
after the rest of the program has been set up. NNX does not refuse: the value becomes
`(L, 512, 1024)` but its `out_sharding` stays `(None, 'model')`, so `nnx.get_partition_spec`,
`nnx.get_named_sharding`, checkpoint restore and `nnx.Optimizer` all shard dimension 1 instead of
dimension 2, silently.
"""
    use_instead = """
```python
Stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=L,
                metadata_params={nn.PARTITION_NAME: "layers"})

@nnx.vmap(in_axes=0, out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
def make_blocks(rngs):
    return Block(rngs)
```
`None` as the name keeps the stacked axis replicated; a logical name needs a rule (SHL201).
"""
    fix_safety = """
Display-only: the suggested edit adds `metadata_params={nn.PARTITION_NAME: "layers"}` (Linen) or
`transform_metadata={nnx.PARTITION_NAME: None}` (NNX) after the transform's last argument, but the
name of the stacked axis (and its rule) is a design decision, so it is never applied by `--fix`.
"""
    versions = "All Flax versions with Linen `metadata_params` and NNX `transform_metadata`."
    VALID = [
        example("""
import jax
import flax.linen as nn

class Block(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        return nn.Dense(16)(x), None

    def decode(self, x):   # boxed, but the scan traces __call__: never created on that path
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        return nn.Dense(16, kernel_init=init)(x)

Stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=4)
variables = Stack().init(jax.random.key(0), jax.numpy.ones((2, 16)), None)
""", title="Linen: the boxed params live in a method the transform does not trace"),
        example("""
import jax
from flax import nnx

class Block(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        init = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, None))
        self.linear = nnx.Linear(512, 1024, kernel_init=init, rngs=rngs)

@nnx.vmap(in_axes=0, out_axes=0)
def create_blocks(key):
    return Block(nnx.Rngs(key))

with jax.set_mesh(jax.make_mesh((8,), ("data",))):
    blocks = create_blocks(jax.random.split(jax.random.key(0), 4))
""", title="NNX annotations of only None: the stacked spec is replicated on every dimension, as meant"),
        example(_LINEN_BLOCK + """
Stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=4,
                metadata_params={nn.PARTITION_NAME: "layers"})
"""),
        example("""
            import flax.linen as nn
            from flax import linen as ln

            class MLP(ln.Module):
                @ln.compact
                def __call__(self, x):
                    init = ln.with_logical_partitioning(ln.initializers.lecun_normal(), ("embed", "mlp"))
                    return ln.Dense(512, kernel_init=init)(x)

            # one set of params shared by every element of the batch
            Shared = ln.vmap(MLP, variable_axes={"params": None}, split_rngs={"params": False},
                             in_axes=0)
        """, title="params broadcast: nothing is stacked"),
        example("""
            import flax.linen as nn

            class Plain(nn.Module):
                @nn.compact
                def __call__(self, x, _):
                    x = nn.Dense(512)(x)
                    return nn.with_logical_constraint(x, ("batch", "embed")), None

            Stack = nn.scan(Plain, variable_axes={"params": 0}, split_rngs={"params": True}, length=4)
        """, title="no boxed params (a constraint on activations is not metadata)"),
        example("""
            import flax.linen as nn
            from some_library import Block   # not in the project: shardlint stays silent

            Stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=4)
        """),
        example(_NNX_BLOCK + """
@nnx.split_rngs(splits=4)
@nnx.vmap(in_axes=(0,), out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
def make_blocks(rngs):
    return Block(rngs)

@nnx.vmap(in_axes=(0, None))
def forward(block, x):   # runs the stacked blocks, creates nothing
    return block.linear(x)
"""),
        example("""
            import jax
            from flax import nnx

            class Plain(nnx.Module):
                def __init__(self, rngs):
                    self.linear = nnx.Linear(512, 1024, rngs=rngs)

            @nnx.vmap(in_axes=0, out_axes=0)
            def make(rngs):
                return Plain(rngs)
        """, title="NNX module without sharding annotations"),
        example({
            "model.py": _LINEN_BLOCK,
            "train.py": """
                import jax
                from flax import linen as ln
                from model import Block

                Stack = ln.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True},
                                length=4, metadata_params={"partition_name": None})
            """,
        }, title="cross-file, named with the string key"),
        example({
            "layers.py": _HANDED_LAYERS,
            "stage.py": _HANDED_STAGE.format(metadata=""),
            "decoder.py": _HANDED_DECODER.format(classes="Plain", first="Plain", second="Plain"),
        }, title="a class handed in as a parameter: every class its callers hand in is "
                 "unannotated"),
        example({
            "layers.py": _HANDED_LAYERS,
            "stage.py": _HANDED_STAGE.format(
                metadata=", transform_metadata={nnx.PARTITION_NAME: 'layers'}"),
            "decoder.py": _HANDED_DECODER.format(classes="Dense, Plain", first="Dense",
                                                 second="Plain"),
        }, title="a class handed in as a parameter, the stacked axis named"),
        example({
            "layers.py": _HANDED_LAYERS,
            "pipeline.py": "from layers import Plain\n" + _PIPELINE.format(
                layer="Plain", metadata=""),
        }, title="a factory handed to a base class builds only unannotated modules"),
        example("""
            import jax
            import jax.numpy as jnp
            from flax import nnx

            class ResBlock(nnx.Module):
                def __init__(self, dim, *, rngs: nnx.Rngs, noise: bool = False):
                    self.proj = nnx.Linear(dim, dim, rngs=rngs)
                    if noise:
                        self.scale = nnx.Param(jnp.zeros((dim,)), sharding=("embed",))
                    else:
                        self.scale = None

            class Stage(nnx.Module):
                def __init__(self, dim, depth, *, rngs: nnx.Rngs):
                    @nnx.split_rngs(splits=depth)
                    @nnx.vmap(in_axes=0, out_axes=0, axis_size=depth)
                    def make(rngs):
                        return ResBlock(dim, rngs=rngs)
                    self.blocks = make(rngs)
        """, title="the annotated variables are made only under a flag this call leaves off"),
        example({"layers.py": _LINEN_LAYERS,
                 "decoder.py": _HANDED_LINEN.format(layer="Plain", mark="no box")},
                title="a handed-in layer class, through `nn.remat` in a loop: none of the "
                      "classes its callers pick boxes its params"),
        example(_CHOSEN.format(axis="None if self.remat else 0", mark="may be None"),
                title="a params axis that is None on one path: not known to stack"),
        example({"layers.py": _LINEN_LAYERS,
                 "pipeline.py": _HANDED_STAGE_LINEN.format(
                     mark="named", outer="named",
                     metadata=', metadata_params={nn.PARTITION_NAME: "stages"}')},
                title="a stage module handed to the vmapped function, the stacked axis named"),
        example({"layers.py": _LINEN_LAYERS.replace(
                     'init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), '
                     '("embed", "mlp"))\n        return nn.Dense(16, kernel_init=init)',
                     "return nn.Dense(16)"),
                 "pipeline.py": _HANDED_STAGE_LINEN.format(mark="no box in the project",
                                                          outer="same", metadata="")},
                title="a stage module handed in, in a project that boxes no Linen params"),
        example((_LINEN_LAYERS + """

Ensemble = nn.vmap(Dense, variable_axes={"params": 0}, split_rngs={"params": True},
                   in_axes=0)


class Decoder(nn.Module):
    @functools.partial(nn.scan, variable_axes={"params": 0}, split_rngs={"params": True},
                       length=4)
    @nn.compact
    def __call__(self, x, _):
        return Plain()(x, None)
""").replace("import flax.linen as nn",
             "import functools\nimport flax.linen as nn\nfrom flax.linen import Dense"),
                title="in a project that boxes params: a class of another package, and a "
                      "scanned method whose class boxes nothing"),
    ]
    INVALID = [
        example("""
            import jax
            import jax.numpy as jnp
            from flax import nnx

            class ResBlock(nnx.Module):
                def __init__(self, dim, *, rngs: nnx.Rngs, noise: bool = False):
                    self.proj = nnx.Linear(dim, dim, rngs=rngs)
                    if noise:
                        self.scale = nnx.Param(jnp.zeros((dim,)), sharding=("embed",))
                    else:
                        self.scale = None

            class Stage(nnx.Module):
                def __init__(self, dim, depth, *, rngs: nnx.Rngs):
                    @nnx.split_rngs(splits=depth)
                    @nnx.vmap(in_axes=0, out_axes=0, axis_size=depth)  # expect: SHL203
                    def make(rngs):
                        return ResBlock(dim, rngs=rngs, noise=True)
                    self.blocks = make(rngs)
        """, title="the same block built with the flag on"),
        example("""
import jax
import flax.linen as nn

class Block(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        return self.decode(x), None

    def decode(self, x):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        return nn.Dense(16, kernel_init=init)(x)

Stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True},  # expect: SHL203
                length=4)
variables = Stack().init(jax.random.key(0), jax.numpy.ones((2, 16)), None)
""", title="the same method called from __call__: created on the scanned path"),
        example("""
            import jax
            import flax.linen as nn

            class MLP(nn.Module):
                @nn.compact
                def __call__(self, x):
                    init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
                    return nn.Dense(4096, kernel_init=init)(x)

            Ensemble = nn.vmap(MLP, variable_axes={"params": 0}, split_rngs={"params": True},  # expect: SHL203
                               in_axes=0)
        """),
        example(_LINEN_BLOCK.replace("import flax.linen as nn", "from flax import linen as nn") + """
from flax import linen as ln
Stack = ln.scan(ln.remat(Block), variable_axes={"params": 0}, split_rngs={"params": True},  # expect: SHL203
                length=4, metadata_params={})
""", title="`metadata_params` without the name, through `remat`"),
        example({
            "model.py": _LINEN_BLOCK,
            "train.py": """
                import functools
                import flax.linen as nn
                from model import Block

                class Decoder(nn.Module):
                    @functools.partial(nn.scan, variable_axes={"params": 0},  # expect: SHL203
                                       split_rngs={"params": True}, length=4)
                    @nn.compact
                    def __call__(self, x, _):
                        return Block()(x, None)
            """,
        }, title="cross-file, a scanned method"),
        example(_NNX_BLOCK + """
@nnx.split_rngs(splits=4)
@nnx.vmap(in_axes=(0,), out_axes=0)  # expect: SHL203
def make_blocks(rngs):
    return Block(rngs)
"""),
        example({
            "model.py": _NNX_BLOCK,
            "train.py": """
                from flax import nnx
                from model import Block

                rngs = nnx.Rngs(0)
                blocks = nnx.vmap(lambda r: Block(r), in_axes=0, out_axes=0)(rngs.split(4))  # expect: SHL203
            """,
        }, title="cross-file NNX, call form"),
        example({
            "layers.py": _HANDED_LAYERS,
            "stage.py": _HANDED_STAGE.format(metadata="").replace(
                "self.layers = nnx.vmap(", "self.layers = nnx.vmap(  # expect: SHL203\n            "),
            "decoder.py": _HANDED_DECODER.format(classes="Dense, Plain", first="Dense",
                                                 second="Plain"),
        }, title="a class handed in as a constructor parameter, picked from a table of classes "
                 "in another module (one of them annotated)"),
        example({
            "layers.py": _HANDED_LAYERS,
            "pipeline.py": "from layers import Dense\n" + _PIPELINE.format(
                layer="Dense", metadata="").replace(
                "repeats = nnx.vmap(", "repeats = nnx.vmap(  # expect: SHL203\n            "),
        }, title="a factory handed to the base class of a pipeline, `nnx.split` of what it "
                 "builds stacked again by an outer `nnx.vmap`"),
        example({"layers.py": _LINEN_LAYERS,
                 "decoder.py": _HANDED_LINEN.format(layer="Boxed", mark="expect: SHL203")},
                title="a layer class the callers hand in, through `nn.remat` applied in a loop "
                      "and a list, scanned along an axis read from the configuration"),
        example(_CHOSEN.format(axis="0", mark="expect: SHL203"),
                title="the scanned class chosen by if/else: the class or `nn.remat` of it"),
        example({"layers.py": _LINEN_LAYERS + """

def adapt(cls):
    return nn.remat(cls)


BoxedAdapted = adapt(Boxed)
""", "decoder.py": _HANDED_LINEN.format(layer="Plain", mark="expect: SHL203").replace(
            "layers = self.with_remat(self.layer_classes())\n        y, _ = self.scan_layers(layers[0], 4)(x, None)",
            "layer = self.with_remat([BoxedAdapted])[0]\n"
            "        y, _ = nn.scan(layer, variable_axes={'params': 0},  # expect: SHL203\n"
            "                       split_rngs={'params': True}, length=4)(x, None)").replace(
            "from layers import Plain", "from layers import BoxedAdapted, Plain")},
                title="a class made at import by a project function, handed in a list to a "
                      "method that remats each class it is given"),
        example({"layers.py": _LINEN_LAYERS,
                 "pipeline.py": _HANDED_STAGE_LINEN.format(
                     mark="expect: SHL203", outer="expect: SHL203", metadata="")},
                title="a function whose first argument is the stage module (handed in at the "
                      "call, not known here), and a vmap of that vmap, in a project that boxes "
                      "Linen params"),
        example({"layers.py": _LINEN_LAYERS, "ensemble.py": """
            import flax.linen as nn

            def ensemble(module, x):
                run = nn.vmap(lambda m, y: m(y, None), in_axes=0,  # expect: SHL203
                              variable_axes={"params": 0}, split_rngs={"params": True})
                return run(module, x)
        """}, title="a lambda over the module it is handed"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        R = Role
        return bool(facts.roles & {R.LINEN_LIFT, R.NNX_LIFT})

    def check(self) -> Iterator[Finding]:
        for lift in lifts(self.facts, Role.LINEN_LIFT):
            finding = self._linen(lift)
            if finding is not None:
                yield finding
        self._nnx_lifts = lifts(self.facts, Role.NNX_LIFT)
        for lift in self._nnx_lifts:
            finding = self._nnx(lift)
            if finding is not None:
                yield finding

    # ---- Linen ---------------------------------------------------------------------------------
    def _linen(self, lift: Lift) -> Finding | None:
        if lift.opaque_kwargs:
            return None
        axes = literal_dict(self.facts, lift.keywords.get("variable_axes"), lift.scope)
        stacked = next((found for k, v in axes or ()
                        if (found := self._stacked_params(k, v, lift.scope))), None)
        if stacked is None or self._names_axis(lift, "metadata_params") is not False:
            return None
        boxed = self._boxed_target(lift)
        if boxed is None:
            return self._linen_handed(lift, stacked)
        ref, how, others, certain = boxed
        name = self._display(ref)
        spelled = self._spelling(lift)
        nn = self._prefix(lift, "flax.linen", "nn")
        what = f"`{name}`" if not how else \
            f"`{how}` (`{name}`{f' or one of {others} other boxed classes' if others else ''})"
        raises = "so init raises `PartitioningUnspecifiedError`" if certain else \
            "so init raises `PartitioningUnspecifiedError` when it is the class scanned (some " \
            "of the classes the code may scan here box none)"
        msg = (f"`{spelled}` stacks the params of {what} along a new axis ({stacked}) but no "
               f"`metadata_params={{{nn}.PARTITION_NAME: ...}}` names it; `{name}` boxes its "
               f"params with partition names, {raises}. "
               f"{_add_partition_name(nn)}")
        fix = self._fix(lift, "metadata_params", f"{nn}.PARTITION_NAME", '"layers"')
        return self.finding(lift.node, msg, severity="error" if certain else "warning",
                            related=self._box_sites(ref, LINEN_BOXES), fix=fix)

    def _linen_handed(self, lift: Lift, stacked: str) -> Finding | None:
        """A lift of a module shardlint cannot name (a function whose first argument is the
        module, the result of another call), in a project that boxes Linen params: "not known"
        does not veto, the warning says what it depends on."""
        handed = self._handed_module(lift)
        boxes = _linen_box_count(self.project)
        if handed is None or not boxes:
            return None
        spelled = self._spelling(lift)
        nn = self._prefix(lift, "flax.linen", "nn")
        msg = (f"`{spelled}` stacks the params of {handed} along a new axis ({stacked}) but no "
               f"`metadata_params={{{nn}.PARTITION_NAME: ...}}` names it; shardlint cannot tell "
               f"which module that is, and this project boxes Linen params with partition names "
               f"({boxes} place{'s' if boxes != 1 else ''}): if that module's are boxed, init "
               f"raises `PartitioningUnspecifiedError`. {_add_partition_name(nn)}")
        return self.finding(lift.node, msg, severity="warning",
                            fix=self._fix(lift, "metadata_params", f"{nn}.PARTITION_NAME",
                                          '"layers"'))

    def _handed_module(self, lift: Lift) -> str | None:
        """How a Linen lift's module reaches it where shardlint cannot name the module: the
        first argument of a lifted function or lambda (``nn.vmap(fn)`` with ``fn(module,
        ...)``: what the caller passes), or a local whose value it cannot follow (another
        lift a method returns). None where the target is known: a project class or alias (its
        boxes are judged above), a class of another package."""
        if lift.function is not None:
            return None  # (a decorated method: the module is its class)
        ref = lifted_ref(self.facts, lift)
        key = self.project.resolve(ref, self.facts.module) if ref else None
        sym = self.project.symbol(key) if key else None
        if sym is not None:
            if sym.kind != "function":
                return None
            scope = self.facts.scopes.get(key.partition(":")[2]) \
                if key.partition(":")[0] == self.facts.module else None
            first = scope.params[0] if scope is not None and scope.params else None
            return f"the module handed to `{self._display(ref).rpartition('.')[2]}`" + \
                (f" as `{first}`" if first else " as its first argument")
        target = unwrapped(self.facts, lift.target)
        if isinstance(target, ast.Lambda):
            params = target.args.posonlyargs + target.args.args
            return f"the module handed to the lambda as `{params[0].arg}`" if params else None
        if not isinstance(target, ast.Name):
            return None
        q = self.facts.qualify(target)
        if q is not None and self.project.resolve(f"ext:{q}", self.facts.module) is None:
            return None  # (imported from another package)
        terms = kind_terms(self.facts, lift.scope, target,
                           lambda n, s: reference(self.facts, n, s), None,
                           assigned=lift.scope.assigned if lift.scope.kind == "function"
                           else None)
        if terms and self.project.flows.classes(terms, f"{self.facts.module}:"
                                                        f"{lift.scope.qualname}"):
            return None  # (the classes the callers hand in, none of them boxing)
        return f"`{target.id}`"

    def _boxed_target(self, lift: Lift) -> tuple[str, str | None, int, bool] | None:
        """The lifted class whose traced code boxes its params; how the target names it when
        not directly (a local chosen by if/else, a class the callers hand in); how many other
        boxing classes it may be; and whether every class it may be boxes (init then raises
        whichever runs). The first boxing class, by name, is the one named."""
        ref = lifted_ref(self.facts, lift)
        if ref is not None:
            key = self.project.resolve(ref, self.facts.module)
            if key is not None and self.project.symbol(key) is not None:
                return (ref, None, 0, True) if self._traced_apis(ref, lift) & LINEN_BOXES \
                    else None
        target = unwrapped(self.facts, lift.target)
        if not isinstance(target, ast.Name):
            return None
        keys = local_classes(self.facts, self.project, target, lift.scope)
        if keys is None:  # a parameter: the classes the callers hand in
            terms = kind_terms(self.facts, lift.scope, target,
                               lambda n, s: reference(self.facts, n, s), None,
                               assigned=lift.scope.assigned if lift.scope.kind == "function"
                               else None)
            where = f"{self.facts.module}:{lift.scope.qualname}"
            keys = sorted(self.project.flows.classes(terms, where)) if terms else []
        boxed = [k for k in keys if self._traced_apis(k, lift) & LINEN_BOXES]
        if not boxed:
            return None
        return boxed[0], target.id, len(boxed) - 1, len(boxed) == len(keys)

    def _stacked_params(self, key: ast.expr, value: ast.expr, scope: Scope) -> str | None:
        """``"params": 0`` (or ``True: 0``): the collection holding boxed params gets an axis.
        The axis may be any value that is an axis on every path (``cfg.param_scan_axis``, a
        local set from it); a value that may be None or ``nn.broadcast`` stacks nothing."""
        keys = key.elts if isinstance(key, (ast.Tuple, ast.List)) else [key]
        if isinstance(key, ast.Constant) and key.value is True:
            label = "all collections"
        elif any(isinstance(k, ast.Constant) and k.value == "params" for k in keys):
            label = "'params'"
        else:
            return None
        axis = value
        if isinstance(axis, ast.UnaryOp) and isinstance(axis.op, ast.USub):
            axis = axis.operand
        if isinstance(axis, ast.Constant) and isinstance(axis.value, int) \
                and not isinstance(axis.value, bool):
            return f"{label} on axis {ast.unparse(value)}"
        if self._always_an_axis(value, scope, 0):
            return f"{label} on axis `{ast.unparse(value)}`"
        return None

    def _always_an_axis(self, value: ast.expr, scope: Scope, depth: int) -> bool:
        """Whether a non-literal ``variable_axes`` value is an axis on every path: a config field
        or a call is; None, ``nn.broadcast``, a parameter or a name bound to one of them on some
        path is not known to be."""
        if depth > 4 or isinstance(value, Opaque):
            return False
        if isinstance(value, ast.Constant):
            return isinstance(value.value, int) and not isinstance(value.value, bool)
        if isinstance(value, ast.IfExp):
            return all(self._always_an_axis(v, scope, depth + 1) for v in (value.body, value.orelse))
        if isinstance(value, (ast.Name, ast.Attribute)):
            qualified = self.facts.qualify(value) or ""
            if qualified.partition(".")[0] in ("flax", "jax"):
                return False  # `nn.broadcast`, or a constant shardlint does not read
        if isinstance(value, ast.Name):
            found = scope.lookup(value.id)
            if found is None or value.id in scope.params:
                return False
            owner, values = found
            return bool(values) and all(isinstance(v, ast.expr) and
                                        self._always_an_axis(v, owner, depth + 1) for v in values)
        if isinstance(value, ast.Attribute):
            return True  # a config field: `cfg.param_scan_axis`
        if isinstance(value, ast.Call):
            known = self.facts.resolve(value.func)
            return known is None
        return False

    # ---- NNX -----------------------------------------------------------------------------------
    def _nnx(self, lift: Lift) -> Finding | None:
        if lift.opaque_kwargs or self._names_axis(lift, "transform_metadata") is not False:
            return None
        out_axes = lift.keywords.get("out_axes")
        if isinstance(out_axes, ast.Constant) and out_axes.value is None:
            return None  # the outputs are not stacked
        built = self._annotated_construction(lift)
        if built is None:
            return None
        what, ref = built
        if ref and self._only_unnamed(ref):
            return None  # every annotation is all-None: a stacked copy is replicated as meant
        if ref and self._switched_off(lift, ref):
            return None  # the annotated variables are made only under flags this call leaves off
        spelled = self._spelling(lift)
        nnx = self._prefix(lift, "flax.nnx", "nnx")
        msg = (f"`{spelled}` stacks {what} along a new axis, but without "
               f"`transform_metadata={{{nnx}.PARTITION_NAME: ...}}` its variables keep their "
               f"unstacked `out_sharding`: `nnx.get_partition_spec`, `nnx.get_named_sharding`, "
               f"checkpoint restore and `nnx.Optimizer` then shard the wrong dimension, "
               f"silently. Add `transform_metadata={{{nnx}.PARTITION_NAME: None}}` (or the name "
               f"of a mesh axis or logical axis)")
        related = self._box_sites(ref, NNX_ANNOTATIONS) if ref else []
        fix = self._fix(lift, "transform_metadata", f"{nnx}.PARTITION_NAME", "None")
        return self.finding(lift.node, msg, severity="warning", related=related, fix=fix)

    def _fix(self, lift: Lift, keyword: str, key: str, value: str) -> Fix | None:
        """Display-only: add the keyword after the last argument of the transform's call. The
        axis name is the user's choice (a logical name with a rule, a mesh axis, or None)."""
        call = lift.node if isinstance(lift.node, ast.Call) else next(
            (c.node for c in self.facts.calls if c.node.func is lift.node), None)
        if call is None or not (call.args or call.keywords):
            return None
        last = max([*call.args, *(k.value for k in call.keywords)],
                   key=lambda n: (n.end_lineno or 0, n.end_col_offset or 0))
        at = Span(last.end_lineno or last.lineno, last.end_col_offset or 0,
                  last.end_lineno or last.lineno, last.end_col_offset or 0)
        text = f", {keyword}={{{key}: {value}}}"
        return Fix(f"Add `{keyword}={{{key}: {value}}}` (choose the axis name)", "display-only",
                   (Edit(at, text),))

    def _annotated_construction(self, lift: Lift, depth: int = 0) -> tuple[str, str | None] | None:
        """What the lifted function builds and returns that carries sharding annotations."""
        if lift.function is not None:
            return self._returned(lift.function, lift.function)
        target = lift.target
        if isinstance(target, ast.Lambda):
            return self._returned(target, lift.scope)
        if not isinstance(target, (ast.Name, ast.Attribute)):
            return None
        ref = symbol_ref(self.facts, target, lift.scope)
        key = self.project.resolve(ref, self.facts.module) if ref else None
        sym = self.project.symbol(key) if key else None
        if key is None or sym is None:
            # a transform of a transformed function (`nnx.vmap(stages, ...)` where `stages =
            # nnx.vmap(make_stage, ...)`): the outer one stacks what the inner one builds
            value, _ = deref(self.facts, target, lift.scope)
            inner = next((other for other in self._nnx_lifts if isinstance(value, ast.Call)
                          and other.node in (value, value.func) and other is not lift), None)
            return self._annotated_construction(inner, depth + 1) \
                if inner is not None and depth < 8 else None
        if sym.kind == "class":
            return self._annotated_class(key)  # `nnx.vmap(Block, ...)(rngs)`
        mod, _, qual = key.partition(":")
        if mod == self.facts.module and qual in self.facts.scopes:
            scope = self.facts.scopes[qual]
            return self._returned(scope, scope) if scope.kind == "function" else None
        if sym.kind != "function":
            return None
        # A function of another file: judge by what it creates and the classes it refers to.
        if {s.api for s in sym.sites} & NNX_ANNOTATIONS:
            return f"the annotated variables `{qual}` creates", key
        for r in sym.refs:
            t = self.project.resolve(r, mod)
            found = self._annotated_class(t) if t is not None else None
            if found is not None:
                return found
        return None

    def _returned(self, fn: Scope | ast.Lambda, scope: Scope) -> tuple[str, str | None] | None:
        """A returned construction: only what leaves the function gets the stacked axis."""
        for call in returned_calls(self.facts, fn):
            site = self.facts.call_at(call)
            if site is None:
                continue
            if is_nnx_annotation(site):
                return f"the `{ast.unparse(call.func)}` it creates", None
            if site.qualified in _SPLITS and call.args:
                # `return nnx.split(stage, nnx.Param, ...)`: the states of the module it built
                found = self._handed(call.args[0], site.scope)
                if found is not None:
                    return found
                continue
            if site.qualified and site.qualified.startswith("flax.nnx."):
                if annotation_calls(self.facts, call, site.scope):
                    return f"the `{ast.unparse(call.func)}` it creates", None
                continue
            if isinstance(call.func, (ast.Name, ast.Attribute)):
                ref = symbol_ref(self.facts, call.func, site.scope)
                key = self.project.resolve(ref, self.facts.module) if ref else None
                found = self._annotated_class(key) if key else self._handed(call, site.scope)
                if found is not None:
                    return found
        return None

    def _handed(self, value: ast.expr, scope: Scope) -> tuple[str, str | None] | None:
        """A module built by a class or factory the function is handed rather than names
        (``layer_cls(config, rngs=r)``, ``stage_factory(rngs)``: a parameter, here or of an
        enclosing function, or an item of a list of classes): the first, by name, of the
        annotated NNX classes the value may be an instance of (the value-flow layer follows
        what the callers hand in, any depth)."""
        terms = kind_terms(self.facts, scope, value, lambda n, s: reference(self.facts, n, s),
                           None, assigned=scope.assigned if scope.kind == "function" else None)
        if not terms:
            return None
        where = f"{self.facts.module}:{scope.qualname}"
        found = [(key, hit) for key in sorted(self.project.flows.instances(terms, where))
                 if (hit := self._annotated_class(key)) is not None]
        if not found:
            return None
        key, _ = found[0]
        spelled = ast.unparse(value.func if isinstance(value, ast.Call) else value)
        more = f" (or one of {len(found) - 1} other annotated classes its callers hand in)" \
            if len(found) > 1 else ""
        return f"the `{self._display(key)}` it constructs through `{spelled}`{more}", key

    def _annotated_class(self, key: str) -> tuple[str, str | None] | None:
        sym = self.project.symbol(key)
        if sym is None or sym.kind != "class" or not self.project.is_subclass(key, NNX_MODULE):
            return None
        if not reached_apis(self.project, key) & NNX_ANNOTATIONS:
            return None
        return f"the `{self._display(key)}` it constructs", key

    # ---- shared --------------------------------------------------------------------------------
    def _names_axis(self, lift: Lift, keyword: str) -> bool | None:
        """True when ``keyword`` names the new axis, False when it certainly does not, None when
        shardlint cannot read it."""
        node = lift.keywords.get(keyword)
        if node is None:
            return False
        pairs = literal_dict(self.facts, node, lift.scope)
        if pairs is None:
            return None
        return any(is_partition_name_key(self.facts, k) for k, _ in pairs)

    def _traced_apis(self, ref: str, lift: Lift) -> frozenset[str]:
        """The partitioning APIs the lifted class's traced code reaches: its `setup`, its
        `__call__` (or the methods the transform's `methods=` names) and what they call. A
        boxed param made only in another method is never created on that path. Where the class
        does not define them itself (inherited, an alias shardlint cannot follow), all of its
        code counts."""
        module = self.facts.module
        key = self.project.resolve(ref, module)
        for _ in range(4):  # `Block = nn.remat(_Block)`: the class it stands for
            sym = self.project.symbol(key) if key else None
            if sym is None or sym.kind != "alias" or len(sym.refs) != 1:
                break
            key = self.project.resolve(sym.refs[0], key.partition(":")[0])
        sym = self.project.symbol(key) if key else None
        if key is None or sym is None or sym.kind != "class":
            return reached_apis(self.project, ref, module)
        methods = self._methods(lift)
        if methods == ():
            return reached_apis(self.project, ref, module)  # `methods=` not a literal
        wanted = {"setup", *(methods or ("__call__",))}
        own = [r for r in sym.refs if r.startswith(key + ".")]
        starts = [r for r in own if r[len(key) + 1:] in wanted]
        if not any(r.endswith(".__call__") for r in starts) and "__call__" in wanted:
            return reached_apis(self.project, ref, module)  # inherited: not followed here
        out = {site.api for site in sym.sites}
        for r in [*starts, *(r for r in sym.refs if not r.startswith(key + "."))]:
            out |= reached_apis(self.project, r, key.partition(":")[0])
        return frozenset(out)

    def _methods(self, lift: Lift) -> tuple[str, ...] | None:
        """The method names a Linen transform's literal `methods=` lifts (a list, or a dict's
        keys); None without `methods=`; () when it is not a literal (any method may be)."""
        node = lift.keywords.get("methods")
        if node is None:
            return None
        value = self.facts.literal(node, lift.scope)
        if isinstance(value, dict):
            value = tuple(value)
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return tuple(value)
        return ()

    def _switched_off(self, lift: Lift, ref: str) -> bool:
        """Every NNX annotation the class reaches sits in its own `__init__` (this file) under
        `if flag:` on a parameter that defaults to False/None and is never rebound, and each
        construction of the class in the lifted function leaves that flag out: no annotated
        variable is created, so nothing stacked carries a partition spec."""
        module, _, qual = ref.partition(":")
        init = self.facts.scopes.get(f"{qual}.__init__") if module == self.facts.module else None
        if lift.function is None or init is None or \
                not isinstance(init.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return False
        found = [(path, site) for path, site in
                 self.project.constraint_sites(ref, module, limit=_MAX_SITES)
                 if site.api in NNX_ANNOTATIONS]
        here = os.path.abspath(self.facts.path)
        if not found or len(found) >= _MAX_SITES or \
                any(os.path.abspath(path) != here for path, _ in found):
            return False
        sites = [site for _, site in found]
        fn = init.node
        args = [*fn.args.posonlyargs, *fn.args.args]
        defaults = dict(zip([a.arg for a in args[len(args) - len(fn.args.defaults):]],
                            fn.args.defaults))
        defaults.update({a.arg: d for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults)
                         if d is not None})
        off = {name for name, d in defaults.items()
               if isinstance(d, ast.Constant) and d.value in (False, None)
               and d.value is not True and len(init.bindings.get(name, [])) == 1}
        guards: set[str] = set()
        for site in sites:
            flag = _guard(fn, site.line, off)
            if flag is None:
                return False
            guards.add(flag)
        builds = [c for c in returned_calls(self.facts, lift.function)
                  if isinstance(c.func, (ast.Name, ast.Attribute))
                  and (r := symbol_ref(self.facts, c.func, lift.function)) is not None
                  and self.project.resolve(r, self.facts.module) == ref]
        if not builds:
            return False
        positional = [a.arg for a in args[1:]]  # (after self)
        for call in builds:
            if any(k.arg is None for k in call.keywords) or \
                    any(isinstance(a, ast.Starred) for a in call.args):
                return False  # **kwargs / *args: any flag may be set
            passed = {k.arg for k in call.keywords} | set(positional[:len(call.args)])
            if passed & guards:
                return False
        return True

    def _only_unnamed(self, ref: str) -> bool:
        """Every NNX annotation the class reaches names only None (`(None, None)`): the stacked
        variables' spec is then replicated on every dimension, the new one included."""
        sites = [site for _, site in self.project.constraint_sites(ref, self.facts.module,
                                                                   limit=_MAX_SITES)
                 if site.api in NNX_ANNOTATIONS]
        return bool(sites) and len(sites) < _MAX_SITES and all(s.spec == "none" for s in sites)

    def _box_sites(self, ref: str, apis: frozenset[str]) -> list[Related]:
        out = []
        for path, site in self.project.constraint_sites(ref, self.facts.module, limit=20):
            if site.api in apis:
                out.append(Related(path, Span(site.line, site.col, site.end_line, site.end_col),
                                   "partition names are attached here"))
                break
        return out

    def _spelling(self, lift: Lift) -> str:
        node = lift.node
        if isinstance(node, ast.Call):  # functools.partial(nn.scan, ...)
            node = node.args[0]
        return ast.unparse(node)

    def _prefix(self, lift: Lift, module: str, default: str) -> str:
        """How this file spells ``module``: the transform's own prefix (``ln`` in ``ln.scan``),
        else any alias of it."""
        node = lift.node.args[0] if isinstance(lift.node, ast.Call) else lift.node
        if isinstance(node, ast.Attribute) and self.facts.qualify(node.value) == module:
            return ast.unparse(node.value)
        alias = next((loc for loc, q in self.facts.imports.names.items() if q == module), None)
        return alias or default

    @staticmethod
    def _display(ref: str) -> str:
        return ref.partition(":")[2] or ref


def _add_partition_name(nn: str) -> str:
    """The advice of a Linen finding, in the file's spelling of ``flax.linen``."""
    return (f"Add `metadata_params={{{nn}.PARTITION_NAME: \"layers\"}}` (a logical name with a "
            f"rule, or None to keep the stacked axis replicated)")


@project_cached
def _linen_box_count(project: ProjectIndex) -> int:
    """How many places of the project box Linen params (``nn.with_logical_partitioning``,
    ``nn.with_partitioning``, ``nn.Partitioned``...)."""
    return sum(1 for s in project.summaries.values() for sym in s.symbols.values()
               for site in sym.sites if site.api in LINEN_BOXES)


def _guard(fn: ast.AST, line: int, flags: set[str]) -> str | None:
    """The parameter of ``flags`` that an `if flag:` around ``line`` in ``fn``'s body tests
    (the line in the `if` branch, not the `else`)."""
    todo: list[ast.AST] = list(getattr(fn, "body", []))
    while todo:
        node = todo.pop()
        start, end = getattr(node, "lineno", 0), getattr(node, "end_lineno", 0) or 0
        if not start <= line <= end:
            continue
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) \
                and node.test.id in flags and node.body \
                and node.body[0].lineno <= line <= (node.body[-1].end_lineno or 0):
            return node.test.id
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        todo.extend(ast.iter_child_nodes(node))
    return None

