"""SHL201 logical-axis-without-rule."""

from __future__ import annotations

import ast
import difflib
import os
from collections.abc import Iterator

from shardlint.rules._context import GUARDED_LIBRARY
from shardlint.rules.base import Finding, Rule, example, register
from shardlint.semantics.catalog.api import Role
from shardlint.semantics.file.axis_names import LINEN, names_argument
from shardlint.semantics.file.facts import RULES, CallSite
from shardlint.semantics.file.reuse import each_call
from shardlint.semantics.flow.project import ProjectIndex, project_cached
from shardlint.semantics.sharding.lifts import lifted_ref, lifts, local_classes, unwrapped
from shardlint.semantics.sharding.partitioning import (
    LINEN_LOGICAL_BOXES,
    call_names,
    axis_values,
    deref,
    imported_string,
    is_partition_name_key,
    literal_dict,
    logical_names_with_rules,
    reached_apis,
    spec_entries,
    symbol_ref,
)

# The annotation whose axis metadata `scan_with_axes` extends with its `axis_name`.
_AXES_METADATA = "flax.linen.partitioning.param_with_axes"


def _listed(names: list[str]) -> str:
    """``'a'``, ``'a' and 'b'``, ``'a', 'b' and 'c'``."""
    quoted = [f"'{n}'" for n in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


# A layer library with its own test, whose table maps only the names the test uses (SHL201's
# examples: judged by the test's table before, by the library's program's tables now).
_ATTENTION_LIBRARY = {
    "layers/attention.py": """
        import flax.linen as nn

        class Attention(nn.Module):
            features: int

            @nn.compact
            def __call__(self, x):
                init = nn.with_logical_partitioning(nn.initializers.lecun_normal(),
                                                    ("embed", "heads"))
                kernel = self.param("kernel", init, (x.shape[-1], self.features))
                return x @ kernel
    """,
    "tests/test_attention.py": """
        import jax
        import flax.linen as nn
        from layers.attention import Attention

        RULES = (("batch", "data"), ("embed", None))

        def test_shapes():
            with jax.set_mesh(jax.make_mesh((1,), ("data",))):
                with nn.logical_axis_rules(RULES):
                    Attention(8).init(jax.random.key(0), jax.numpy.ones((2, 4)))
    """,
}


# A config builder that writes the rules table its callers hand it (two examples).
_CONFIG_BUILDER = """
    class Config:
        logical_axis_rules = ()

    def make_config(rules):
        cfg = Config()
        cfg.logical_axis_rules = rules  # (a parameter: what its callers hand it)
        return cfg
"""


@project_cached
def _first_source(project: ProjectIndex, program: str | None
                  ) -> tuple[str, str, int, int] | None:
    """The first configuration table the project's rules read (path, key, line) and how many
    tables they read in all, each table counted once wherever it is read from (one table read
    under two keys -- `logical_axis_rules_for_train` standing for `logical_axis_rules` -- is
    named by its shorter key). Once per index state: every finding's message names it."""
    read = project.rule_table_sources(program)[2]
    first: dict[tuple[str, int], tuple[str, str, int]] = {}
    for path, key, line in read:
        have = first.get((path, line))
        if have is None or len(key) < len(have[1]):
            first[(path, line)] = (path, key, line)
    if not first:
        return None
    path, key, line = first[(read[0][0], read[0][2])]
    return path, key, line, len(first)


@project_cached
def _hints(project: ProjectIndex) -> dict:
    """Memo of :func:`_closest` for this index state."""
    return {}


def _closest(project: ProjectIndex, known: set[str], name: str) -> str | None:
    """The known logical name closest to ``name`` (a likely typo), if any is close enough."""
    memo = _hints(project)
    key = (name, frozenset(known))
    if key not in memo:
        found = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
        memo[key] = found[0] if found else None
    return memo[key]


@project_cached
def _names_handed(project: ProjectIndex) -> bool:
    """Some function or class of the project hands a parameter on as axis names."""
    return any(s.name_params or s.name_attrs for s in project.summaries.values())


EAGER_FLAG = "flax_always_shard_variable"  # NNX shards a variable when it is created


@project_cached
def _eager_sharding_off(project: ProjectIndex) -> str | None:
    """The path of a module that turns NNX's eager sharding off (or sets the flag to a value
    shardlint cannot read); None when no module does (the default is on)."""
    for _, s in sorted(project.summaries.items()):
        if any(v is not True for v in s.flags.get(EAGER_FLAG, ())):
            return s.path
    return None


# A module whose rules table is a field, given where the module is built (praxis' adapter).
_ADAPTER = """
import flax.linen as nn
from flax.linen import partitioning

class Adapter(nn.Module):
    logical_axes_rules: tuple | None = None

    @nn.compact
    def __call__(self, x):
        with partitioning.axis_rules(self.logical_axes_rules):
            w = partitioning.param_with_axes(
                "w", nn.initializers.ones, (3, 4), axes=("input", "output"))  # expect: SHL201
        return x @ w
"""

# Enters the rules the configuration holds under `logical_axis_rules` (read by key).
_TRAIN_BY_KEY = """
import jax
import flax.linen as nn
from model import MLP

def train(cfg, x):
    with nn.logical_axis_rules(cfg.logical_axis_rules):
        return MLP().init(jax.random.key(0), x)
"""

_LINEN_MODEL = """
import jax
import flax.linen as nn

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        y = nn.Dense(512, kernel_init=init)(x)
        return nn.with_logical_constraint(y, ("batch", "mlp"))
"""


# A project helper that maps logical names to a sharding by the rules in force unless its
# caller hands it a table (`rules=None` handed on to `nn.logical_to_mesh_axes`).
_SHARDING_HELPERS = """
import jax
import flax.linen as nn
from jax.sharding import NamedSharding

def to_mesh_axes(logical_names, rules=None):
    return nn.logical_to_mesh_axes(logical_names, rules=rules)

def shard_logical(x, mesh, logical_names, rules=None):
    spec = to_mesh_axes(logical_names, rules=rules)
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))
"""

# An attention layer whose input names are a parameter's default, kept on `self` and chosen
# on a branch; its names are constants of another module.
_ATTENTION_BY_DEFAULT = """
from flax import nnx
from pkg.axis_types import BATCH, INPUT_LENGTH, EMBED
from pkg.sharding import shard_logical

class Attention(nnx.Module):
    def __init__(self, mesh, input_axis_names=(BATCH, INPUT_LENGTH, EMBED),
                 decode_axis_names=(BATCH, None, EMBED)):
        self.mesh = mesh
        self.input_axis_names = input_axis_names
        self.decode_axis_names = decode_axis_names

    def __call__(self, x, decode=False):
        if decode:
            axis_names = self.decode_axis_names
        else:
            axis_names = self.input_axis_names
        return shard_logical(x, self.mesh, axis_names%s)
"""

_AXIS_TYPES = """
import jax.numpy as jnp

BATCH = "batch"
INPUT_LENGTH = "input_lenght"
EMBED = "embed"
"""

_TRAIN_ATTENTION = """
import jax
import flax.linen as nn
from pkg.attention import Attention

RULES = (("batch", "data"), ("input_length", None), ("embed", None))

def main(x):
    mesh = jax.make_mesh((2,), ("data",))
    with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
        return Attention(mesh)(x)
"""


# Layers scanned the T5X way: `param_with_axes` records each param's logical axes, and
# `scan_with_axes` inserts its `axis_name` among them.
_SCANNED_T5 = """
    import flax.linen as nn
    from flax.linen import partitioning as nn_partitioning

    scan_with_axes = nn_partitioning.scan_with_axes

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x, _):
            w = nn_partitioning.param_with_axes(
                "kernel", nn.initializers.lecun_normal(), (4, 4), axes=("embed", "mlp"))
            return x @ w, None

    class Stack(nn.Module):
        @nn.compact
        def __call__(self, x):
            x, _ = scan_with_axes(
                Block,
                variable_axes={"params": 0},
                split_rngs={"params": True},
                in_axes=(nn.broadcast,),
                length=4,
                axis_name="layers",
            )(name="blocks")(x, None)
            return x

    with nn_partitioning.axis_rules((RULE_FOR_LAYERS("embed", None), ("mlp", "model"))):
        pass
"""


# A block whose names the partitioner's table maps, but for 'hidden' (and the `%s` one, which
# only the path under test brings).
_PARTITIONED_BLOCK = """
    import flax.linen as nn

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.with_logical_constraint(x, ("batch", "length", "%s"))
            return nn.with_logical_constraint(x, ("batch", "hidden"))  # expect: SHL201
"""


# A partitioner in the shape large training libraries give theirs: the table is a constructor
# parameter whose default a builder makes (extended in place), kept on `self`, handed to a
# wrapper class that enters it around the step; a subclass adds its rules and forwards them.
_PARTITIONER = """
    import flax.linen as nn
    from flax.linen import partitioning as nn_partitioning

    def standard_rules(extra=None):
        rules = [("batch", "data"), ("mlp", "model")]
        rules.extend([("length", None)])
        if extra:
            rules.extend(extra)
        return rules

    class WrappedStep:
        def __init__(self, fn, rules=()):
            self._fn = fn
            self._rules = rules

        def __call__(self, *args):
            with nn_partitioning.axis_rules(self._rules):
                return self._fn(*args)

    class Partitioner:
        def __init__(self, num_partitions=1, logical_axis_rules=None):
            if logical_axis_rules is None:
                logical_axis_rules = standard_rules()
            self._rules = tuple((k, "data" if k == "batch" else v) for k, v in logical_axis_rules)

        def partition(self, fn):
            return WrappedStep(fn, self._rules)

    class MoePartitioner(Partitioner):
        def __init__(self, num_experts, logical_axis_rules=None):
            if logical_axis_rules is None:
                logical_axis_rules = list(standard_rules()) + [("expert", "data")]
            super().__init__(logical_axis_rules=logical_axis_rules)
"""


@register
class LogicalAxisWithoutRule(Rule):
    code = "SHL201"
    name = "logical-axis-without-rule"
    severity = "warning"
    summary = "A logical axis name that no rule maps: Linen replicates it silently, NNX raises."
    what = """
Collects the string logical axis names written in `nn.with_logical_partitioning`,
`nn.with_logical_constraint`, `nn.LogicallyPartitioned`, `param_with_axes(..., axes=...)` and
`metadata_params={nn.PARTITION_NAME: ...}` of `nn.vmap`/`nn.scan`, the `axis_name` (default
`"layers"`) that `scan_with_axes` adds to the axes of a class annotated with `param_with_axes`,
`nn.logical_to_mesh_axes`
(the rules in force: a name without one maps to None), and in NNX `nnx.with_partitioning` /
`nnx.Param(..., out_sharding=...)`, and flags each name that is on the left of no rule in any
logical axis rules table of the project. The finding points at the string literal, also when it
sits in a module constant (`KERNEL_AXES = ("embed", "mlp")`; a constant imported from another
module of the project, at the name where the spec writes it) or in an attribute the module keeps
on `self` (every value its methods assign -- an item of a tuple a function of the file returns
included, `self.wi_axes, self.wo_axes = kernel_axes()` -- a class-body default, and the default
of the parameter a method keeps, where some construction in the project leaves it out or none
is seen: `def __init__(self, axes=(BATCH, LENGTH)): self.axes = axes`),
or in a local name bound on several branches (`if decode: axes = self.decode_axes` / `else:
axes = self.axes`): `self.wo_axes = ("expert", "embed")` ... `nnx.Param(...,
out_sharding=self.wo_axes)`.
Names written where a project layer is built are judged as well, at the caller's literal, when
the layer hands that argument unchanged to one of these calls: `DenseGeneral(16,
kernel_axes=("embed", "mlp"))` whose `__init__` keeps `self.kernel_axes = kernel_axes` for an
`nnx.Param(..., out_sharding=self.kernel_axes)`, a Linen field read as `self.kernel_axes` (by
keyword, or by position when no project base class adds fields), a helper's parameter -- through
any number of helpers and files, `functools.partial` included; a helper that hands its own
`rules=None` parameter on with the names (`def to_spec(names, rules=None): return
nn.logical_to_mesh_axes(names, rules=rules)`) only where its caller leaves `rules` out. An
argument the layer rewrites first (`axes = axes or DEFAULT`) or uses otherwise (`P(*axes)`) is
not followed.

NNX accepts mesh axis names directly, so an NNX name is flagged only when it is not an axis of any
mesh either, and only when the axis names of every mesh the project builds are known: literal, or
read from the configuration by key (`Mesh(devices, config.mesh_axes)` has any of the
`mesh_axes` lists the project's YAML files, config builders and field defaults write). A mesh
handed in (a parameter annotated `Mesh`) or copied from another (`Mesh(m.devices,
m.axis_names)`) adds no axes; one with names built at run time keeps NNX names unjudged. A
`PARTITION_NAME` is a logical name only when the lifted module boxes its params with
`nn.with_logical_partitioning`; over `nn.with_partitioning` it is a mesh axis and is not checked.

The rule speaks only when it can see every rules table the project's contexts use (and at
least one exists). A table is seen when it is a literal, a module constant holding one (possibly
imported from another file), or read by key from the project's configuration --
`nn.logical_axis_rules(config.logical_axis_rules)`, `cfg["logical_axis_rules"]`,
`getattr(cfg, "logical_axis_rules", ())`, a module's own field (`axis_rules(self.logical_axes_rules)`)
read every table written under that key: in a YAML file of the project (`logical_axis_rules:
[['batch', 'data'], ...]`, read as data with the safe loader, never executed), a gin file, an ml_collections
`get_config()` (`config.logical_axis_rules = (...)`), a dataclass or pydantic default
(`Field(default_factory=lambda: copy.deepcopy(RULES))`), a dict entry, or a keyword where a
module or its config is built (`Adapter(logical_axes_rules=rules)`, `Layer.config(...)`). A
write under the key that rewrites a rules value (`_to_tuples(cfg["logical_axis_rules"])`,
`merge(base_rules, model_rules)`) keeps its names; one of a helper's result
(`config.logical_axis_rules = build_rules()`) or of a parameter is a table shardlint cannot
read, and keeps the rule silent -- also when the table reaches the context through
a local name, a parameter every caller passes one to, or a project helper that rewrites it (taken
to keep its logical names). A partitioner's table is followed the same way: kept on `self`
(`self._rules = tuple(logical_axis_rules)`, in the class or a base class), handed to a wrapper
class that enters it around the step, forwarded by a subclass to `super().__init__`, defaulting
to a builder that `extend`s or `append`s to its table, or rewritten entry by entry on the mesh
side (`((k, ("replica", "data") if k == "batch" else v) for k, v in rules)`). A gin file counts
among the callers: `partitioning.Partitioner.logical_axis_rules = @partitioning.standard_rules()`
is a call that hands the builder's table, `%RULES` what the project's gin files bind it to (read
as data with gin-config's parser: nothing imported, nothing called). The message names the config file and key it read. A table built at
run time (by a library, from data) keeps it silent; a call's own `rules=` (a box, a conversion)
applies to that call only. Names built at run time (function arguments, f-strings) are not
checked.

One finding per annotation, at its first name without a rule, naming all of them; the tables
it names are counted once each. The consequence follows the context: where a mesh is active
the dimension is replicated (a warning); in a project that enters its meshes only with a legacy
`with mesh:`, under flax >= 0.12.2 the constraint does nothing at all -- the finding says so and
points at SHL101 (an info: replication is what follows once the mesh is entered right).

A constraint the code around it guards (`if nn.get_logical_axis_rules():`, `if not
jax.sharding.get_abstract_mesh().empty:`, a `..._mesh_defined()` check) or enters its contexts
for (`with nn.logical_axis_rules(...):` inside the function) needs nothing from its callers: a
library that applies its constraints only where its caller brings them.
"""
    why = """
Linen maps logical names through the rules and treats a name with no rule as unsharded
(`RulesFallback.AXIS_IS_UNSHARDED` is the default): a typo such as `"hidden"` for `"mlp"` gives a
kernel spec of `P(None, None)`, a full copy on every device, with no warning. NNX passes an
unmatched name to the mesh as if it were a mesh axis and fails when the variable is created:
`ValueError: Resource axis: embed of P('embed', 'mlp') is not found in mesh`.
"""
    use_instead = """
```python
rules = (("batch", "data"), ("mlp", "model"), ("embed", None))   # every name has a rule
init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
```
A name that should stay replicated gets an explicit `("name", None)` rule.
"""
    fix_safety = "No automatic fix: which mesh axis a name should map to is a design decision."
    versions = "All Flax versions with logical partitioning (Linen) and NNX `out_sharding` metadata."
    VALID = [
        example({
            "config.py": _CONFIG_BUILDER,
            "train.py": """
                import jax
                import flax.linen as nn
                from config import make_config
                from rules_store import load_rules  # a package shardlint does not read

                class Block(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        x = nn.Dense(8)(x)
                        return nn.with_logical_constraint(x, ("batch", "hidden"))

                def main(x):
                    cfg = make_config(load_rules())  # (which names it maps is not known)
                    with jax.set_mesh(jax.make_mesh((1,), ("data",))), \\
                            nn.logical_axis_rules(cfg.logical_axis_rules):
                        return Block().init(jax.random.key(0), x)
            """,
        }, title="a config builder handed a rules table shardlint cannot read"),
        example({
            "partitioning.py": _PARTITIONER,
            "model.py": """
                import flax.linen as nn

                class Block(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        return nn.with_logical_constraint(x, ("batch", "hidden"))
            """,
            "train.py": """
                import jax
                from rules_lib import load_rules
                from partitioning import Partitioner
                from model import Block

                def step(path):
                    partitioner = Partitioner(logical_axis_rules=load_rules(path))
                    return jax.jit(partitioner.partition(Block().apply))
            """,
        }, title="a partitioner handed a table that a library builds at run time: silent"),
        example(_SCANNED_T5.replace("RULE_FOR_LAYERS", '("layers", None), '),
                title="`scan_with_axes`' axis name has a rule"),
        example(GUARDED_LIBRARY,
                title="a library that applies its constraints only where its caller brings the contexts"),
        example({
            "model.py": """
                import flax.linen as nn

                class MLP(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        return nn.with_logical_constraint(x, ("batch", "mlp"))
            """,
            "train.py": """
                import jax
                import flax.linen as nn
                from model import MLP

                def train(config, x):
                    with jax.set_mesh(jax.make_mesh((8,), ("data",))):
                        with nn.logical_axis_rules(config.logical_axis_rules):
                            return MLP().init(jax.random.key(0), x)
            """,
            "configs/base.yml": """
                logical_axis_rules: [['batch', 'data'], ['mlp', 'model']]
            """,
            "configs/large.yml": """
                logical_axis_rules: [['batch', ['data', 'fsdp']], ['mlp', 'model']]
            """,
        }, title="every YAML table maps the names"),
        example({
            "model.py": """
                import flax.linen as nn

                class MLP(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        return nn.with_logical_constraint(x, ("batch", "mlp"))
            """,
            "train.py": """
                import jax
                import flax.linen as nn
                from rules_lib import build_rules
                from model import MLP

                def train(config, x):
                    with nn.logical_axis_rules(build_rules(config)):
                        return MLP().init(jax.random.key(0), x)
            """,
        }, title="a table built at run time by a library: silent"),
        example("""
            import jax
            from flax import linen as ln

            RULES = (("batch", "data"), ("mlp", "model"), ("embed", None))

            class MLP(ln.Module):
                @ln.compact
                def __call__(self, x):
                    init = ln.with_logical_partitioning(ln.initializers.lecun_normal(), ("embed", "mlp"))
                    y = ln.Dense(512, kernel_init=init)(x)
                    return ln.with_logical_constraint(y, ("batch", "mlp"))

            with jax.set_mesh(jax.make_mesh((2, 4), ("data", "model"))), ln.logical_axis_rules(RULES):
                MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))
        """, title="every name has a rule; `(\"embed\", None)` replicates on purpose"),
        example(_LINEN_MODEL + """
import yaml

config = yaml.safe_load(open("config.yaml"))
with jax.set_mesh(jax.make_mesh((2,), ("data",))), nn.logical_axis_rules(config["rules"]):
    MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))
""", title="rules from a config file: shardlint cannot see them and stays silent"),
        example(_LINEN_MODEL, title="no rules table anywhere (SHL102 reports that)"),
        example({
            "model.py": _LINEN_MODEL,
            "config.py": """
                import jax
                RULES = [("batch", "data"), ("embed", None), ("mlp", "model")]
            """,
            "train.py": """
                import jax
                import flax.linen as nn
                from config import RULES
                from model import MLP

                with jax.set_mesh(jax.make_mesh((2, 4), ("data", "model"))), nn.logical_axis_rules(RULES):
                    MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))
            """,
        }, title="cross-file: the table lives in config.py and is entered in train.py"),
        example("""
            import jax
            from flax import nnx

            mesh = jax.make_mesh((2, 4), ("data", "model"))

            class Block(nnx.Module):
                def __init__(self, rngs):
                    init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("embed", "model"))
                    self.linear = nnx.Linear(512, 1024, kernel_init=init, rngs=rngs)

            with jax.set_mesh(mesh), nnx.logical_axis_rules((("embed", None),)):
                Block(nnx.Rngs(0))
        """, title="NNX: 'model' has no rule but is a mesh axis, which NNX accepts"),
        example("""
            import jax
            import flax.linen as nn

            def dense(x, axes):
                init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), axes)
                return nn.Dense(512, kernel_init=init)(x)

            with nn.logical_axis_rules((("batch", "data"),)):
                pass
        """, title="names passed in as arguments, by no caller in the project: nothing to judge"),
        example({
            "layers.py": """
                import jax
                import flax.linen as nn
                from jax.sharding import PartitionSpec as P

                def constrain(x, axes):
                    return jax.lax.with_sharding_constraint(x, P(*axes))  # mesh axes, not names

                def dense(x, axes):
                    axes = axes or ("embed", "mlp")
                    init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), axes)
                    return nn.Dense(8, kernel_init=init)(x)
            """,
            "model.py": """
                import flax.linen as nn
                from layers import constrain, dense

                class Block(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        x = constrain(x, ("data", "model"))
                        return dense(x, ("embed", "hidden"))  # rebound before use: not followed
            """,
            "train.py": """
                import flax.linen as nn
                with nn.logical_axis_rules((("embed", "data"), ("mlp", "model"))):
                    pass
            """,
        }, title="a helper's parameter used as mesh axes, or rebound before the annotation"),
        example({
            "model.py": """
                import jax
                from flax import nnx

                class MoE(nnx.Module):
                    def __init__(self, config, rngs):
                        self.wo_axes = ("expert", "embed")
                        self.wo = nnx.Param(jax.numpy.zeros((8, 16)), out_sharding=self.wo_axes)
            """,
            "train.py": """
                import jax
                from flax import nnx
                from jax.sharding import Mesh
                from model import MoE

                def train(config, devices):
                    mesh = Mesh(devices, config.mesh_axes)
                    with jax.set_mesh(mesh), nnx.logical_axis_rules(config.logical_axis_rules):
                        return MoE(config, None)
            """,
            "configs/base.yml": """
                mesh_axes: ['data', 'fsdp']
                logical_axis_rules: [['embed', 'fsdp']]
            """,
            "configs/moe.yml": """
                mesh_axes: ['data', 'expert']
            """,
        }, title="NNX: 'expert' is an axis of one configured mesh (`mesh_axes` of moe.yml)"),
        example({
            "model.py": """
                import jax
                from flax import nnx

                class MoE(nnx.Module):
                    def __init__(self, rngs):
                        self.wo = nnx.Param(jax.numpy.zeros((8, 16)), out_sharding=("expert", "embed"))
            """,
            "train.py": """
                import jax
                import flax.linen as nn
                from jax.sharding import Mesh
                from model import MoE

                def train(config, devices):
                    with jax.set_mesh(Mesh(devices, config.mesh_names)):
                        with nn.logical_axis_rules((("embed", None),)):
                            return MoE(None)
            """,
        }, title="NNX: a mesh named by a configuration key no file writes: its axes are unknown"),
        example({
            "adapter.py": _ADAPTER.replace("  # expect: SHL201", ""),
            "build.py": """
                from adapter import Adapter
                from rules_lib import make_rules

                def build(cfg):
                    return Adapter(logical_axes_rules=make_rules(cfg))
            """,
        }, title="a module field given a table built at run time: not all tables are known"),
        example({
            "model.py": _LINEN_MODEL,
            "configs.py": """
                import ml_collections
                from rules_lib import build_rules

                def get_config():
                    config = ml_collections.ConfigDict()
                    config.logical_axis_rules = (("batch", "data"),)
                    if config.get("large"):
                        config.logical_axis_rules = build_rules()
                    return config
            """,
            "train.py": _TRAIN_BY_KEY,
        }, title="a config key also written from a helper's result: that table is unknown"),
        example({
            "model.py": _LINEN_MODEL,
            "configs.py": """
                import ml_collections

                def get_config(rules=None):
                    config = ml_collections.ConfigDict()
                    config.logical_axis_rules = (("batch", "data"),)
                    if rules is not None:
                        config.logical_axis_rules = rules  # whatever the callers pass
                    return config
            """,
            "train.py": _TRAIN_BY_KEY,
        }, title="a config key also written from a parameter: that table is unknown"),
        example({
            "model.py": """
                import flax.linen as nn

                class Block(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        init = nn.with_partitioning(nn.initializers.lecun_normal(), (None, "model"))
                        return nn.Dense(512, kernel_init=init)(x)

                Stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True},
                                length=4, metadata_params={nn.PARTITION_NAME: "data"})
            """,
            "train.py": """
                import flax.linen as nn
                RULES = (("batch", "data"),)
                with nn.logical_axis_rules(RULES):
                    pass
            """,
        }, title="PARTITION_NAME over mesh-axis boxes (`with_partitioning`) is a mesh axis, not a logical name"),
        example({
            **_ATTENTION_LIBRARY,
            "benchmarks/bench_attention.py": """
                import flax.linen as nn
                from layers.attention import Attention

                with nn.logical_axis_rules((("embed", "model"),)):
                    pass
            """,
        }, title="a layer library: its tests' and benchmarks' tables judge those programs"),
        example({
            "moe.py": """
                import jax
                from flax import nnx

                def split_kernel_axes():
                    return ("expert", "embed"), ("expert_solo", "embed")

                class MoE(nnx.Module):
                    def __init__(self, rngs):
                        # (only the first spec is an annotation; the second is never handed on)
                        self.wi_axes, self.wo_axes = split_kernel_axes()
                        self.wi = nnx.Param(jax.numpy.zeros((8, 16)), out_sharding=self.wi_axes)
            """,
            "train.py": """
                import jax
                from flax import nnx
                from moe import MoE

                with jax.set_mesh(jax.make_mesh((2,), ("expert",))), \\
                        nnx.logical_axis_rules((("embed", None),)):
                    MoE(None)
            """,
        }, title="NNX: a tuple of specs unpacked into `self` attributes: each attribute gets "
                 "its own item"),
        example({
            "pkg/__init__.py": "",
            "pkg/sharding.py": _SHARDING_HELPERS,
            "pkg/axis_types.py": _AXIS_TYPES,
            "pkg/attention.py": _ATTENTION_BY_DEFAULT % ", rules=((\"input_lenght\", None),)",
            "train.py": _TRAIN_ATTENTION,
        }, title="a helper handed its own rules table (`rules=`): that table judges the names"),
        example({
            "pkg/__init__.py": "",
            "pkg/sharding.py": _SHARDING_HELPERS,
            "pkg/axis_types.py": _AXIS_TYPES,
            "pkg/attention.py": _ATTENTION_BY_DEFAULT % "",
            "train.py": _TRAIN_ATTENTION.replace(
                "Attention(mesh)(x)",
                "Attention(mesh, input_axis_names=(\"batch\", \"input_length\", \"embed\"))(x)"),
        }, title="a constructor default no construction uses: every one passes its own names"),
    ]
    INVALID = [
        example({
            "config.py": _CONFIG_BUILDER,
            "train.py": """
                import jax
                import flax.linen as nn
                from config import make_config

                RULES = (("batch", "data"), ("embed", None))

                class Block(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        x = nn.Dense(8)(x)
                        return nn.with_logical_constraint(x, ("batch", "hidden"))  # expect: SHL201

                def main(x):
                    cfg = make_config(RULES)
                    with jax.set_mesh(jax.make_mesh((1,), ("data",))), \\
                            nn.logical_axis_rules(cfg.logical_axis_rules):
                        return Block().init(jax.random.key(0), x)
            """,
        }, title="a config builder that writes the rules table its callers hand it"),
        example({
            "partitioning.py": _PARTITIONER,
            "model.py": _PARTITIONED_BLOCK % "expert",
            "train.py": """
                import jax
                from partitioning import MoePartitioner, Partitioner
                from model import Block

                def steps(x):
                    plain = Partitioner(num_partitions=2).partition(Block().apply)
                    moe = MoePartitioner(8).partition(Block().apply)
                    return jax.jit(plain), jax.jit(moe)
            """,
        }, title="a partitioner keeps the table it is handed (its default a builder that extends "
                 "its table; a subclass forwards its own to `super().__init__`) and enters it "
                 "around each step"),
        example({
            "trainlib/partitioning.py": _PARTITIONER,
            "trainlib/model.py": _PARTITIONED_BLOCK % "vocab",
            "trainlib/train.py": """
                import gin
                import jax

                @gin.configurable
                def train(model, partitioner=gin.REQUIRED):
                    return jax.jit(partitioner.partition(model.apply))
            """,
            "configs/base.gin": """
                from __gin__ import dynamic_registration
                from trainlib import partitioning

                RULES = [('vocab', 'model')]
                partitioning.Partitioner:
                  num_partitions = 2
                  logical_axis_rules = @partitioning.standard_rules()
                partitioning.standard_rules.extra = %RULES
                partitioning.MoePartitioner.num_experts = 8
            """,
        }, title="a partitioner only a gin file builds: its bindings are calls (read as data, "
                 "never run), `%RULES` what the file binds it to"),
        example(_SCANNED_T5.replace("RULE_FOR_LAYERS", "").replace(
                    'axis_name="layers",', 'axis_name="layers",  # expect: SHL201'),
                title="`scan_with_axes` adds its `axis_name` to the axes `param_with_axes` "
                      "records: a logical name like theirs"),
        example({
            "model.py": """
                import flax.linen as nn

                class MLP(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        return nn.with_logical_constraint(x, ("batch", "hidden"))  # expect: SHL201
            """,
            "train.py": """
                import jax
                import yaml
                import flax.linen as nn
                from model import MLP

                def train(path, x):
                    cfg = yaml.safe_load(open(path))
                    rules = [tuple(r) for r in cfg["logical_axis_rules"]]
                    with jax.set_mesh(jax.make_mesh((8,), ("data",))), nn.logical_axis_rules(rules):
                        return MLP().init(jax.random.key(0), x)
            """,
            "configs/base.yml": """
                logical_axis_rules: [['batch', 'data'], ['mlp', 'model']]
            """,
        }, title="a table read from YAML through a comprehension keeps its names"),
        example({
            "layers/attention.py": _ATTENTION_LIBRARY["layers/attention.py"].replace(
                '("embed", "heads"))', '("embed", "heads"))  # expect: SHL201'),
            "tests/test_attention.py": _ATTENTION_LIBRARY["tests/test_attention.py"],
            "train.py": """
                import jax
                import flax.linen as nn
                from layers.attention import Attention

                RULES = (("batch", "data"), ("embed", "model"))

                def main():
                    with jax.set_mesh(jax.make_mesh((2, 4), ("data", "model"))):
                        with nn.logical_axis_rules(RULES):
                            return Attention(8).init(jax.random.key(0), jax.numpy.ones((2, 4)))
            """,
        }, title="the library's own program: its table judges the layers"),
        example({
            "model.py": """
                import flax.linen as nn

                class MLP(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        return nn.with_logical_constraint(x, ("batch", "mlp"))  # expect: SHL201
            """,
            "train.py": """
                import jax
                import flax.linen as nn
                from model import MLP

                def train(config, x):
                    mesh = jax.make_mesh((8,), ("data",))
                    with jax.set_mesh(mesh), nn.logical_axis_rules(config.logical_axis_rules):
                        return MLP().init(jax.random.key(0), x)
            """,
            "configs/base.yml": """
                model: mlp
                logical_axis_rules: [
                    ['batch', 'data'],
                    ['embed', null],
                ]
            """,
        }, title="the rules live in a YAML config file, read by key"),
        example({
            "model.py": """
                import flax.linen as nn

                class MLP(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        return nn.with_logical_constraint(x, ("batch", "hidden"))  # expect: SHL201
            """,
            "configs.py": """
                import ml_collections

                def get_config():
                    config = ml_collections.ConfigDict()
                    config.logical_axis_rules = (("batch", "data"), ("mlp", "model"))
                    return config
            """,
            "train.py": """
                import jax
                import flax.linen as nn
                from model import MLP

                def train(cfg, x):
                    with jax.set_mesh(jax.make_mesh((8,), ("data",))):
                        with nn.logical_axis_rules(cfg["logical_axis_rules"]):
                            return MLP().init(jax.random.key(0), x)
            """,
        }, title="the rules come from an ml_collections get_config()"),
        example({
            "model.py": """
                import dataclasses
                import flax.linen as nn

                @dataclasses.dataclass
                class Config:
                    logical_axis_rules: tuple = (("batch", "data"), ("embed", None))

                class MLP(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        return nn.with_logical_constraint(x, ("batch", "mpl"))  # expect: SHL201

                def run(config: Config, x):
                    import jax
                    with nn.logical_axis_rules(config.logical_axis_rules):
                        return MLP().init(jax.random.key(0), x)
            """,
        }, title="a dataclass default"),
        example("""
            import jax
            from flax import linen as ln

            rules = (("batch", "data"), ("mlp", "model"))

            class MLP(ln.Module):
                @ln.compact
                def __call__(self, x):
                    init = ln.with_logical_partitioning(
                        ln.initializers.lecun_normal(), ("embed", "hidden"))  # expect: SHL201
                    return ln.Dense(4096, kernel_init=init)(x)

            with jax.set_mesh(jax.make_mesh((2, 4), ("data", "model"))), ln.logical_axis_rules(rules):
                MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))
        """, title="a typo: 'hidden' (and 'embed') have no rule"),
        example("""
            import flax.linen as nn

            class Attn(nn.Module):
                @nn.compact
                def __call__(self, x):
                    return nn.spmd.with_logical_constraint(x, ("batch", "lenght", None))  # expect: SHL201

            nn.set_logical_axis_rules([("batch", "data"), ("length", None)])
        """),
        example({
            "model.py": """
                import flax.linen as nn

                class MLP(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(),
                                                            ("embed", "mlp"))  # expect: SHL201
                        return nn.Dense(512, kernel_init=init)(x)

                Ensemble = nn.vmap(MLP, variable_axes={"params": 0}, split_rngs={"params": True},
                                   metadata_params={nn.PARTITION_NAME: "ensemble"})  # expect: SHL201
            """,
            "train.py": """
                import jax
                import flax.linen as nn
                from model import Ensemble

                RULES = (("batch", "data"), ("embed", None))
                with jax.set_mesh(jax.make_mesh((8,), ("data",))), nn.logical_axis_rules(RULES):
                    Ensemble().init(jax.random.key(0), jax.numpy.ones((8, 4)))
            """,
        }, title="cross-file: rules in train.py lack 'mlp' and the vmap's 'ensemble'"),
        example("""
            import jax
            from flax import nnx

            mesh = jax.make_mesh((2, 4), ("data", "model"))

            class Block(nnx.Module):
                def __init__(self, rngs):
                    init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("embed", "mlp"))  # expect: SHL201
                    self.linear = nnx.Linear(512, 1024, kernel_init=init, rngs=rngs)
                    self.scale = nnx.Param(jax.numpy.ones((1024,)), out_sharding=("mlp_out",))  # expect: SHL201

            with jax.set_mesh(mesh), nnx.logical_axis_rules((("mlp", "model"),)):
                Block(nnx.Rngs(0))
        """, title="NNX: 'embed' and 'mlp_out' are neither rules nor mesh axes: raises"),
        example({
            "layers.py": """
                import jax
                import flax.linen as nn
                from flax import nnx

                class DenseGeneral(nnx.Module):
                    def __init__(self, features, kernel_axes=(), *, rngs):
                        self.kernel_axes = kernel_axes
                        self.kernel = nnx.Param(jax.numpy.zeros((4, features)),
                                                out_sharding=self.kernel_axes)

                class LinenDense(nn.Module):
                    features: int
                    kernel_axes: tuple = ()

                    @nn.compact
                    def __call__(self, x):
                        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(),
                                                            self.kernel_axes)
                        return nn.Dense(self.features, kernel_init=init)(x)

                def dense(x, axes):
                    init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), axes)
                    return nn.Dense(8, kernel_init=init)(x)

                def mlp(x, names):
                    return dense(x, names)

                class GatedDense(DenseGeneral):  # (runs its base's `__init__`)
                    pass
            """,
            "model.py": """
                import functools
                import flax.linen as nn
                from flax import nnx
                from layers import DenseGeneral, GatedDense, LinenDense, dense, mlp

                class Block(nnx.Module):
                    def __init__(self, rngs):
                        self.up = DenseGeneral(16, ("embed", "mlpp"), rngs=rngs)  # expect: SHL201
                        self.down = DenseGeneral(16, kernel_axes=("mlp", "embd"), rngs=rngs)  # expect: SHL201
                        make = functools.partial(DenseGeneral, kernel_axes=("mlp", "vocb"))  # expect: SHL201
                        self.out = make(16, rngs=rngs)
                        self.gate = GatedDense(16, kernel_axes=("embed", "mlq"), rngs=rngs)  # expect: SHL201

                class LBlock(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        x = LinenDense(8, kernel_axes=("embed", "hiden"))(x)  # expect: SHL201
                        x = LinenDense(8, ("embed", "hiddn"))(x)  # expect: SHL201
                        x = dense(x, ("embed", "vocab"))  # expect: SHL201
                        return mlp(x, ("heads", "mlp"))  # expect: SHL201
            """,
            "train.py": """
                import jax
                import flax.linen as nn
                RULES = (("embed", "data"), ("mlp", "model"))
                with jax.set_mesh(jax.make_mesh((2, 2), ("data", "model"))), nn.logical_axis_rules(RULES):
                    pass
            """,
        }, title="names written where a project layer is built: an NNX layer keeping them on "
                 "`self`, a subclass of it, a Linen field (by keyword or position), "
                 "`functools.partial`, a helper's parameter, two helpers deep"),
        example({
            "moe.py": """
                import jax
                from flax import nnx

                class MoE(nnx.Module):
                    def __init__(self, config, rngs):
                        if config.batch_split:
                            self.wo_axes = ("expert_only", "embed")  # expect: SHL201
                        else:
                            self.wo_axes = ("expert", "embed")
                        self.wo = nnx.Param(jax.numpy.zeros((8, 16)), out_sharding=self.wo_axes)
            """,
            "train.py": """
                import jax
                from flax import nnx
                from jax.sharding import Mesh
                from moe import MoE

                def train(config, devices):
                    mesh = Mesh(devices, config.mesh_axes)
                    explicit = Mesh(mesh.devices, mesh.axis_names)  # a copy: no new axes
                    with jax.set_mesh(explicit), nnx.logical_axis_rules(config.logical_axis_rules):
                        return MoE(config, None)
            """,
            "configs/base.yml": """
                mesh_axes: ['data', 'fsdp', 'expert']
                logical_axis_rules: [['embed', 'fsdp']]
            """,
        }, title="NNX: a name kept on `self`, meshes named by the configuration's `mesh_axes`"),
        example({
            "moe.py": """
                import jax
                from flax import nnx

                def split_kernel_axes():
                    return (("expert_solo", "embed"),  # expect: SHL201
                            ("expert", "embed"))

                class MoE(nnx.Module):
                    def __init__(self, config, rngs):
                        if config.batch_split:
                            self.wi_axes, self.wo_axes = split_kernel_axes()
                        else:
                            self.wi_axes, self.wo_axes = ("expert", "embed"), ("expert", "embed")
                        self.wi = nnx.Param(jax.numpy.zeros((8, 16)), out_sharding=self.wi_axes)
            """,
            "train.py": """
                import jax
                from flax import nnx
                from jax.sharding import Mesh
                from moe import MoE

                def train(config, devices):
                    with jax.set_mesh(Mesh(devices, config.mesh_axes)), \\
                            nnx.logical_axis_rules(config.logical_axis_rules):
                        return MoE(config, None)
            """,
            "configs/base.yml": """
                mesh_axes: ['data', 'fsdp', 'expert']
                logical_axis_rules: [['embed', 'fsdp']]
            """,
        }, title="NNX: `self` attributes unpacked from a function of the file that returns "
                 "a tuple of specs"),
        example({
            "pkg/__init__.py": "",
            "pkg/sharding.py": _SHARDING_HELPERS,
            "pkg/axis_types.py": _AXIS_TYPES,
            "pkg/attention.py": (_ATTENTION_BY_DEFAULT % "").replace(
                "(BATCH, INPUT_LENGTH, EMBED),", "(BATCH, INPUT_LENGTH, EMBED),  # expect: SHL201"),
            "train.py": _TRAIN_ATTENTION,
        }, title="a constructor parameter's default kept on `self`, chosen on a branch and "
                 "handed to a helper that maps it by the rules in force; the names are "
                 "constants imported from another module"),
        example({
            "adapter.py": _ADAPTER,
            "build.py": """
                from adapter import Adapter

                def build():
                    rules = [("input", "model")]
                    return Adapter(logical_axes_rules=rules)
            """,
        }, title="a module field given its table by keyword where the module is built"),
        example({
            "model.py": """
                import flax.linen as nn

                class MLP(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        x = nn.with_logical_constraint(x, ("batch", "expert"))
                        return nn.with_logical_constraint(x, ("batch", "mlp"))  # expect: SHL201
            """,
            "loader.py": """
                import yaml

                def load(path):
                    raw = yaml.safe_load(open(path))
                    raw["logical_axis_rules"] = tuple(map(tuple, raw["logical_axis_rules"]))
                    raw["logical_axis_rules"] += (("expert", "model"),)
                    return raw

                def load_moe(raw):
                    raw["logical_axis_rules"] = raw["logical_axis_rules"] + [("expert", "model")]
                    return raw
            """,
            "train.py": """
                import jax
                import flax.linen as nn
                from model import MLP

                def train(cfg, x):
                    with nn.logical_axis_rules(cfg["logical_axis_rules"]):
                        return MLP().init(jax.random.key(0), x)
            """,
            "base.yml": """
                logical_axis_rules: [['batch', 'data']]
            """,
        }, title="a loader that rewrites the table it read keeps its names, and adds those it "
                 "appends"),
        example({
            "model.py": """
                import flax.linen as nn

                class Attention(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        x = nn.with_logical_constraint(x, ("batch", "embed"))
                        return nn.with_logical_constraint(
                            x, ("activation_kv_batch", "embed"))  # expect: SHL201
            """,
            "pipeline.py": """
                import functools

                import jax
                import flax.linen as nn
                from model import Attention

                def _rule(v, logical_axis_rules):
                    return v

                def shard_model(params, logical_axis_rules):  # (called nowhere in the project)
                    tag = functools.partial(_rule, logical_axis_rules=logical_axis_rules)
                    return jax.tree.map(tag, params)

                def denoise(params, x, logical_axis_rules):
                    with nn.logical_axis_rules(logical_axis_rules):
                        return Attention().apply(params, x)

                def run(config, params, x):
                    rules = tuple(tuple(r) if isinstance(r, list) else r
                                  for r in config.logical_axis_rules)
                    return denoise(params, x, rules)
            """,
            "configs/base.yml": """
                logical_axis_rules: [['batch', 'data'], ['embed', 'model']]
            """,
        }, title="every table the project uses is read: one converted entry by entry, and a "
                 "helper called nowhere that hands its parameter on adds none"),
        example({
            "model.py": """
                import flax.linen as nn

                class MLP(nn.Module):
                    @nn.compact
                    def __call__(self, x):
                        return nn.with_logical_constraint(x, ("batch", "embd"))  # expect: SHL201
            """,
            "pipelines/__init__.py": """
                from .pipeline import Pipeline
            """,
            "pipelines/pipeline.py": """
                import flax.linen as nn

                class Pipeline:
                    def __init__(self, model, logical_axis_rules=()):
                        self.model = model
                        self.logical_axis_rules = logical_axis_rules

                    def __call__(self, params, x):
                        with nn.logical_axis_rules(self.logical_axis_rules):
                            return self.model.apply(params, x)
            """,
            "load.py": """
                import jax
                from model import MLP
                from pipelines import Pipeline

                def load(config):
                    return Pipeline(MLP(), logical_axis_rules=config.logical_axis_rules)
            """,
            "configs/base.yml": """
                logical_axis_rules: [['batch', 'data'], ['embed', 'model']]
            """,
        }, title="a class built through its package's re-export (an `__init__` that names no "
                 "jax) is handed the configuration's table"),
        example("""
            import jax
            import flax.linen as nn

            KERNEL_AXES = ("embed", "hiden")  # expect: SHL201
            RULES = (("embed", None), ("hidden", "model"))

            class MLP(nn.Module):
                @nn.compact
                def __call__(self, x):
                    init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), KERNEL_AXES)
                    return nn.Dense(512, kernel_init=init)(x)

            with nn.logical_axis_rules(RULES):
                pass
        """, title="a module constant: the finding points at the literal"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        R = Role
        return bool(facts.roles & {R.LOGICAL_CONSTRAINT, R.LOGICAL_PARTITIONING, R.NNX_PARTITIONING, R.NNX_PARAM, R.LINEN_LIFT, R.NNX_LIFT, R.AXES_LIFT}) \
            or _names_handed(project)  # (names written where a project layer is built)

    def check(self) -> Iterator[Finding]:
        # (a test's or a benchmark's tables and meshes judge that program, not the library)
        known, trusted = logical_names_with_rules(self.project, self.facts.module)
        if not trusted:
            return
        # (the project's meshes are all there are, as its rules tables are: a mesh handed in
        # is one of them)
        mesh_axes, mesh_complete = self.project.mesh_axes(
            True, self.project.judging(self.facts.module))
        seen: set[int] = set()
        # NNX accepts mesh axes directly: only a name that is neither can be judged, and only
        # when the axes of every mesh of the project are known.
        judge_nnx = bool(mesh_complete and mesh_axes)
        # The names of each call are the file's alone: reused across keystrokes (reuse.py).
        for c, (kind, names) in each_call(self.facts, "shl201", self._names):
            if self._left_to_callers(c):
                continue
            yield from self._judged(kind, names, known, seen, judge_nnx, mesh_axes)
        # Names written where a project layer is built, which it hands to an annotation call
        # (`DenseGeneral(kernel_axes=("embed", "mlp"))`; any depth of helpers, any file). Which
        # arguments of a call those are depends on the call, the names it reads and the index:
        # reused per part of the file while the index is the same. The values an argument
        # holds are not (`self.kernel_axes` is set in another method).
        for c, found in each_call(self.facts, f"shl201:carriers:{self.project.generation}",
                                  self._carried, local=True):
            for arg, kind in found:
                yield from self._judged(kind, self._top_level_names(arg, c), known, seen,
                                        judge_nnx, mesh_axes)
        yield from self._report(self._partition_names(), known, seen, nnx=False)

    def _judged(self, kind: str, names, known: set[str], seen: set[int], judge_nnx: bool,
                mesh_axes: set[str]) -> Iterator[Finding]:
        if kind == LINEN:
            yield from self._report(names, known, seen, nnx=False)
        elif judge_nnx:
            yield from self._report([(n, node) for n, node in names if n not in mesh_axes],
                                    known, seen, nnx=True)

    def _report(self, names, known: set[str], seen: set[int], nnx: bool) -> Iterator[Finding]:
        """One finding per annotation, at its first name without a rule, naming them all."""
        missing: list[tuple[str, ast.expr]] = []
        for name, node in names:
            if name in known or id(node) in seen:
                continue
            seen.add(id(node))
            if name not in (n for n, _ in missing):
                missing.append((name, node))
        if not missing:
            return
        node = missing[0][1]
        listed = _listed([n for n, _ in missing])
        hints = [f"'{close}' for '{n}'" for n, _ in missing
                 if (close := _closest(self.project, known, n)) is not None]
        hint = f" (did you mean {', '.join(hints)}?)" if hints else ""
        explicit = ", ".join(f'(\"{n}\", None)' for n, _ in missing)
        one = len(missing) == 1
        severity = None
        if nnx:
            name = missing[0][0]
            off = _eager_sharding_off(self.project)
            if off is None:
                then = (f"NNX passes {'it' if one else 'them'} to the mesh unchanged and raises "
                        f"`ValueError: Resource axis: {name} ... is not found in mesh` when the "
                        f"variable is created under the mesh")
            else:
                then = (f"`{EAGER_FLAG}` is off ({self._shown(off)}), so NNX does not shard "
                        f"the variable when it is created; mapped through the rules later "
                        f"(as `nn.logical_to_mesh_axes` maps) {'this dimension is' if one else 'these dimensions are'} "
                        f"replicated on every device, and used as a mesh axis the name raises "
                        f"`ValueError: ... is not found in mesh`")
            msg = (f"axis name{'' if one else 's'} {listed} {'has' if one else 'have'} no logical "
                   f"axis rule{self._read_from()} and {'is not an axis' if one else 'are not axes'} "
                   f"of any mesh the project builds{self._axes_from()}: {then}{hint}; add "
                   f"{'a rule' if one else 'rules'}, or `{explicit}` to replicate explicitly")
        else:
            if self.ctx.versions.at_least("flax", "0.12.2") \
                    and self.project.meshes_entered_only_legacy:
                then = (f"the project enters its meshes only with a legacy `with mesh:`, under "
                        f"which flax >= 0.12.2 applies no logical constraint at all (SHL101); "
                        f"once a mesh is entered with `jax.set_mesh`, Flax leaves "
                        f"{'this dimension' if one else 'these dimensions'} unsharded, "
                        f"replicated on every device")
                severity = "info"
            else:
                then = (f"where a mesh is active, Flax leaves {'this dimension' if one else 'these dimensions'} "
                        f"unsharded: replicated on every device")
            msg = (f"logical axis name{'' if one else 's'} {listed} {'has' if one else 'have'} no "
                   f"rule in the project's logical axis rules{self._read_from()}: {then}{hint}; "
                   f"add {'a rule' if one else 'rules'}, or `{explicit}` to make the replication "
                   f"explicit")
        yield self.finding(node, msg, severity=severity)

    def _left_to_callers(self, c: CallSite) -> bool:
        """A constraint applied only where its caller brings rules (``if
        nn.get_logical_axis_rules():`` around it, no rules table entered around it here): a
        library's, whose names its callers' tables map."""
        return bool(c.ctx & RULES) and "rules" not in {
            w.kind for w in self.facts.with_items
            if w.scope is c.scope and w.stmt.lineno <= c.node.lineno <= (w.stmt.end_lineno or 0)}

    def _read_from(self) -> str:
        """`` (read from `configs/base.yml` key `logical_axis_rules`, and 2 more tables)``:
        tables counted once each, wherever they are read from."""
        found = _first_source(self.project, self.project.judging(self.facts.module))
        if found is None:
            return ""
        path, key, line, count = found
        shown = self._shown(path)
        more = f", and {count - 1} more table{'s' if count > 2 else ''}" if count > 1 else ""
        return f" (read from `{shown}`:{line} key `{key}`{more})"

    def _shown(self, path: str) -> str:
        """A project file's path relative to the linted file's folder."""
        here = os.path.dirname(os.path.abspath(self.facts.path))
        return os.path.relpath(os.path.abspath(path), here)

    def _axes_from(self) -> str:
        """`` (any of the configuration's `mesh_axes` lists)`` when a mesh takes its names
        from the configuration."""
        keys = self.project.mesh_axis_keys()
        if not keys:
            return ""
        shown = ", ".join(f"`{k}`" for k in keys[:2]) + (", ..." if len(keys) > 2 else "")
        return f" (any of the configuration's {shown} lists included)"

    def _carried(self, c: CallSite) -> list[tuple[ast.expr, str]]:
        return call_names(self.project, self.facts, c)

    def _names(self, c: CallSite) -> tuple[str, list[tuple[str, ast.expr]]] | None:
        """Whose names (``axis_names.LINEN``/``NNX``) a Linen or NNX annotation call writes,
        and which; None for other calls (and for one judged by its own table, ``rules=``)."""
        found = names_argument(c)
        if found is None:
            return None
        return found[1], self._top_level_names(found[0], c)

    def _top_level_names(self, node: ast.expr | None, c: CallSite) -> list[tuple[str, ast.expr]]:
        # Only top-level strings are logical names: a nested tuple is taken as mesh axes as is.
        out: list[tuple[str, ast.expr]] = []
        module = self.facts.module
        used = lambda m, p: self.project.flows.default_used(f"{module}:{m.qualname}", p)  # noqa: E731
        for value, scope in [(node, c.scope)] if node is None else \
                axis_values(node, c.scope, used):
            entries = spec_entries(self.facts, value, scope)
            for e in entries or ():
                if e.names and not e.nested:
                    out.append(e.names[0])
                elif not e.names:  # (a name imported from the module that binds it)
                    name = imported_string(self.project, self.facts, e.node, scope)
                    if name is not None:
                        out.append((name, e.node))
        return out

    def _partition_names(self) -> list[tuple[str, ast.expr]]:
        """``metadata_params={nn.PARTITION_NAME: "name"}`` names the stacked axis; it is a
        logical name when the lifted module boxes its params with logical names."""
        out: list[tuple[str, ast.expr]] = []
        for lift in lifts(self.facts, Role.LINEN_LIFT):
            pairs = literal_dict(self.facts, lift.keywords.get("metadata_params"), lift.scope)
            if not pairs:
                continue
            ref = lifted_ref(self.facts, lift)
            if ref is None or not reached_apis(self.project, ref, self.facts.module) & LINEN_LOGICAL_BOXES:
                continue
            for key, written in pairs:
                value, _ = deref(self.facts, written, lift.scope)
                if is_partition_name_key(self.facts, key) and isinstance(value, ast.Constant) \
                        and isinstance(value.value, str):
                    out.append((value.value, value))
        return out + self._scan_axis_names()

    def _scan_axis_names(self) -> list[tuple[str, ast.expr]]:
        """``scan_with_axes(Block, variable_axes={"params": 0}, axis_name="layers")`` inserts
        ``axis_name`` (default ``"layers"``: then the finding is at the call) into the axis
        metadata of each collection of ``axes_collections`` (default ``("params",)``) it
        stacks; a logical name when ``Block`` annotates with ``param_with_axes``."""
        out: list[tuple[str, ast.expr]] = []
        for c in self.facts.calls_with_role(Role.AXES_LIFT):
            node = c.node
            if not node.args or isinstance(node.args[0], ast.Starred):
                continue
            kws = {k.arg: k.value for k in node.keywords if k.arg}
            stacked = literal_dict(self.facts, kws.get("variable_axes"), c.scope)
            cols = self.facts.literal(kws["axes_collections"], c.scope) \
                if "axes_collections" in kws else ("params",)
            if not stacked or not isinstance(cols, (tuple, list)):
                continue
            keys = {k.value for k, _ in stacked if isinstance(k, ast.Constant)}
            if not keys & set(cols):
                continue
            target = unwrapped(self.facts, node.args[0])
            ref = symbol_ref(self.facts, target, c.scope) \
                if isinstance(target, (ast.Name, ast.Attribute)) else None
            key = self.project.resolve(ref, self.facts.module) if ref else None
            # (a local bound to the class, or to `remat(Block)` on one branch of an `if`)
            keys = [key] if key is not None and self.project.symbol(key) is not None \
                else local_classes(self.facts, self.project, target, c.scope) or []
            if not any(_AXES_METADATA in reached_apis(self.project, k) for k in keys):
                continue
            written = kws.get("axis_name")
            if written is None:
                out.append(("layers", node.func))
                continue
            value, _ = deref(self.facts, written, c.scope)
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                out.append((value.value, value))
        return out
