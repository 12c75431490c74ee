"""The one table of JAX / Flax / optax APIs that shardlint understands.

Each entry has a canonical name, every other fully qualified spelling of the same object
(re-exports, deprecated paths), a role that rules query, and the versions in which it exists.
A new spelling of an API is one line here, and every rule sees it.

The versions (``added``, ``deprecated``, ``removed``) of jax and flax APIs are not written here:
they are read from every release by ``scripts/api_facts.py`` (:mod:`.facts`; a new name needs
``python scripts/api_facts.py --catalogue-only``). ``by_hand`` keeps the few the releases' files
cannot show, each with its reason; ``tests/test_api_facts.py`` holds both to the table, and
``tests/test_api_table.py`` imports every spelling against the installed jax and flax.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from . import facts


class Role(str, Enum):
    JIT = "jit"  # compiles a function: jax.jit, pjit, nnx.jit
    PMAP = "pmap"  # compiles a function replicated over devices: jax.pmap
    PARTIAL = "partial"  # functools.partial
    EVAL_SHAPE = "eval_shape"  # abstract evaluation: no allocation, no context needed
    RULES_CONTEXT = "rules_context"  # `with X(rules):` activates logical axis rules
    RULES_SETTER = "rules_setter"  # X(rules) as a statement sets them globally
    MESH_CONTEXT = "mesh_context"  # `with X(mesh):` activates a mesh for Flax and jax.jit
    MESH_SETTER = "mesh_setter"  # X(mesh) as a statement: jax.set_mesh is both
    MESH = "mesh"  # constructs a concrete mesh
    ABSTRACT_MESH = "abstract_mesh"
    DEVICE_MESH = "device_mesh"  # builds the device array a Mesh is made of
    PARTITION_SPEC = "partition_spec"
    NAMED_SHARDING = "named_sharding"
    LOGICAL_CONSTRAINT = "logical_constraint"  # needs rules + mesh at trace time
    LOGICAL_PARTITIONING = "logical_partitioning"  # initializer wrapper: needs rules + mesh
    MESH_PARTITIONING = "mesh_partitioning"  # names are mesh axes: needs a mesh only
    SHARDING_CONSTRAINT = "sharding_constraint"  # jax.lax.with_sharding_constraint
    NNX_PARTITIONING = "nnx_partitioning"  # nnx.with_partitioning
    NNX_PARAM = "nnx_param"  # nnx.Param / nnx.Variable (out_sharding=...)
    LINEN_MODULE = "linen_module"
    NNX_MODULE = "nnx_module"
    LINEN_LIFT = "linen_lift"  # nn.vmap / nn.scan: stacks variables
    # flax.linen.partitioning.scan_with_axes: an nn.scan that inserts its `axis_name` into the
    # axis metadata `param_with_axes` keeps (a logical name, as the others of that metadata)
    AXES_LIFT = "axes_lift"
    NNX_LIFT = "nnx_lift"  # nnx.vmap / nnx.scan
    PARTITION_NAME = "partition_name"
    APPLY_UPDATES = "apply_updates"  # optax.apply_updates(params, updates)
    TRAIN_STATE = "train_state"
    REMAT = "remat"
    LEGACY_ENV = "legacy_env"  # reads the legacy resource environment (pxla.thread_resources)
    OTHER = "other"


# The base classes of Flax models, by qualified name (project.py, valueflow.py, models.py).
LINEN_MODULE = "flax.linen.Module"
NNX_MODULE = "flax.nnx.Module"


@dataclass(frozen=True)
class Api:
    name: str
    role: Role
    spellings: tuple[str, ...] = ()
    added: str | None = None  # first version of its package with it
    deprecated: str | None = None
    removed: str | None = None
    replacement: str | None = None
    note: str = ""
    # the facts above that are written by hand (the releases' files cannot show them)
    by_hand: tuple[str, ...] = ()

    @property
    def package(self) -> str:
        return self.name.split(".", 1)[0]


def _a(name: str, role: Role, *spellings: str, by_hand: dict[str, str] | None = None,
       **kw: str) -> Api:
    """An API; its versions from the table of releases, but for those given ``by_hand``."""
    added, deprecated, removed = facts.catalogue(name) if name.split(".", 1)[0] in (
        "jax", "flax") else (None, None, None)
    read = {"added": added, "deprecated": deprecated, "removed": removed, **(by_hand or {})}
    return Api(name, role, tuple(spellings), **read, **kw,  # type: ignore[arg-type]
               by_hand=tuple(by_hand or ()))


R = Role

APIS: tuple[Api, ...] = (
    # --- compilation ---------------------------------------------------------------------------
    _a("jax.jit", R.JIT),
    _a("jax.experimental.pjit.pjit", R.JIT, replacement="jax.jit",
       note="shardings by keyword (`in_shardings`/`out_shardings`); bare `PartitionSpec`s then "
            "need a mesh set by `jax.set_mesh` (a legacy `with mesh:` no longer counts), and a "
            "`None` sharding means unspecified, the compiler's choice: write `PartitionSpec()` "
            "where replication is meant"),
    _a("flax.nnx.jit", R.JIT, "flax.nnx.transforms.compilation.jit"),
    _a("flax.linen.jit", R.JIT, "flax.linen.transforms.jit"),
    _a("jax.pmap", R.PMAP),
    _a("functools.partial", R.PARTIAL),
    _a("jax.eval_shape", R.EVAL_SHAPE),
    _a("flax.nnx.eval_shape", R.EVAL_SHAPE),
    # --- contexts ------------------------------------------------------------------------------
    _a("flax.linen.logical_axis_rules", R.RULES_CONTEXT, "flax.linen.partitioning.axis_rules",
       "flax.nnx.logical_axis_rules", "flax.core.spmd.logical_axis_rules"),
    _a("flax.linen.set_logical_axis_rules", R.RULES_SETTER, "flax.linen.partitioning.set_axis_rules",
       "flax.core.spmd.set_logical_axis_rules"),
    _a("jax.set_mesh", R.MESH_CONTEXT, "jax.sharding.set_mesh"),
    _a("jax.sharding.use_mesh", R.MESH_CONTEXT, "jax.sharding.use_mesh",
       replacement="jax.set_mesh"),
    _a("jax.sharding.use_abstract_mesh", R.MESH_CONTEXT),
    # --- meshes and specs ----------------------------------------------------------------------
    _a("jax.sharding.Mesh", R.MESH),
    _a("jax.make_mesh", R.MESH),
    _a("jax.sharding.AbstractMesh", R.ABSTRACT_MESH),
    _a("jax.experimental.mesh_utils.create_device_mesh", R.DEVICE_MESH),
    _a("jax.sharding.PartitionSpec", R.PARTITION_SPEC, "jax.P"),
    _a("jax.sharding.NamedSharding", R.NAMED_SHARDING, "jax.NamedSharding"),
    _a("jax.sharding.AxisType", R.OTHER),
    # --- partitioning and constraints ------------------------------------------------------------
    _a("flax.linen.with_logical_constraint", R.LOGICAL_CONSTRAINT,
       "flax.linen.spmd.with_logical_constraint",
       "flax.linen.partitioning.with_sharding_constraint"),
    _a("flax.linen.with_logical_partitioning", R.LOGICAL_PARTITIONING,
       "flax.linen.spmd.with_logical_partitioning"),
    _a("flax.linen.LogicallyPartitioned", R.LOGICAL_PARTITIONING,
       "flax.linen.spmd.LogicallyPartitioned"),
    _a("flax.linen.partitioning.param_with_axes", R.LOGICAL_PARTITIONING),
    _a("flax.linen.with_partitioning", R.MESH_PARTITIONING, "flax.core.meta.with_partitioning"),
    _a("flax.linen.Partitioned", R.MESH_PARTITIONING, "flax.core.meta.Partitioned"),
    _a("jax.lax.with_sharding_constraint", R.SHARDING_CONSTRAINT),
    _a("flax.nnx.with_partitioning", R.NNX_PARTITIONING, "flax.nnx.spmd.with_partitioning"),
    _a("flax.nnx.Param", R.NNX_PARAM, "flax.nnx.variablelib.Param"),
    _a("flax.nnx.Variable", R.NNX_PARAM, "flax.nnx.variablelib.Variable"),
    # --- modules and lifted transforms ---------------------------------------------------------
    _a("flax.linen.Module", R.LINEN_MODULE, "flax.linen.module.Module"),
    _a("flax.nnx.Module", R.NNX_MODULE, "flax.nnx.module.Module"),
    _a("flax.linen.vmap", R.LINEN_LIFT, "flax.linen.transforms.vmap"),
    _a("flax.linen.scan", R.LINEN_LIFT, "flax.linen.transforms.scan"),
    _a("flax.linen.partitioning.scan_with_axes", R.AXES_LIFT),
    _a("flax.nnx.vmap", R.NNX_LIFT, "flax.nnx.transforms.iteration.vmap"),
    _a("flax.nnx.scan", R.NNX_LIFT, "flax.nnx.transforms.iteration.scan"),
    _a("flax.linen.PARTITION_NAME", R.PARTITION_NAME, "flax.core.meta.PARTITION_NAME",
       "flax.nnx.PARTITION_NAME"),
    _a("flax.linen.remat", R.REMAT, "flax.linen.checkpoint", "flax.linen.transforms.checkpoint",
       "flax.linen.partitioning.remat"),
    _a("flax.nnx.remat", R.REMAT),
    _a("jax.checkpoint", R.REMAT, "jax.remat"),
    # --- helpers rules look at -----------------------------------------------------------------
    _a("flax.linen.logical_to_mesh_sharding", R.OTHER, "flax.linen.spmd.logical_to_mesh_sharding"),
    _a("flax.linen.logical_to_mesh", R.OTHER, "flax.linen.spmd.logical_to_mesh"),
    _a("flax.linen.get_partition_spec", R.OTHER, "flax.core.meta.get_partition_spec"),
    _a("flax.linen.get_sharding", R.OTHER, "flax.core.meta.get_sharding"),
    _a("flax.linen.unbox", R.OTHER, "flax.core.meta.unbox"),
    _a("flax.nnx.get_partition_spec", R.OTHER, "flax.nnx.spmd.get_partition_spec"),
    _a("flax.nnx.Optimizer", R.OTHER, "flax.nnx.training.optimizer.Optimizer"),
    _a("flax.training.train_state.TrainState", R.TRAIN_STATE),
    _a("optax.apply_updates", R.APPLY_UPDATES),
    _a("jax.device_put", R.OTHER),
    _a("jax.grad", R.OTHER),
    _a("jax.value_and_grad", R.OTHER),
    _a("jax.tree.map", R.OTHER, "jax.tree_util.tree_map"),
    # --- moved or removed (SHL501 reads these) -------------------------------------------------
    _a("jax.tree_map", R.OTHER, replacement="jax.tree.map"),
    _a("jax.tree_flatten", R.OTHER, replacement="jax.tree.flatten"),
    _a("jax.tree_unflatten", R.OTHER, replacement="jax.tree.unflatten"),
    _a("jax.tree_leaves", R.OTHER, replacement="jax.tree.leaves"),
    _a("jax.tree_structure", R.OTHER, replacement="jax.tree.structure"),
    _a("jax.tree_transpose", R.OTHER, replacement="jax.tree.transpose"),
    _a("jax.experimental.shard_map.shard_map", R.OTHER, replacement="jax.shard_map",
       note="`mesh`, `in_specs` and `out_specs` are keyword-only there; `check_rep` is now "
            "`check_vma`; `auto=` is gone"),
    # (both made the layout `pmap` takes: a new leading axis, one slice per device -- jax
    # 0.8.1's `device_put_replicated` docstring; `PartitionSpec()` would replicate the array
    # whole, without that axis)
    _a("jax.device_put_sharded", R.OTHER, replacement="jax.device_put",
       note="of `jnp.stack(shards)`, with a NamedSharding that splits the new leading axis "
            "over a 1-D mesh of the devices: `NamedSharding(Mesh(devices, ('d',)), "
            "PartitionSpec('d'))`"),
    _a("jax.device_put_replicated", R.OTHER, replacement="jax.device_put",
       note="of the copies stacked on a new leading axis, `jnp.stack([x] * len(devices))` "
            "(the layout `pmap` takes), with a NamedSharding that splits that axis over a 1-D "
            "mesh of the devices: `NamedSharding(Mesh(devices, ('d',)), PartitionSpec('d'))`"),
    _a("jax.sharding.PmapSharding", R.OTHER, replacement="jax.sharding.NamedSharding"),
    _a("jax.experimental.maps.xmap", R.OTHER, replacement="jax.shard_map"),
    # Old spellings of sharding and mesh APIs: their roles still tell rules what they are.
    _a("jax.experimental.maps.Mesh", R.MESH, replacement="jax.sharding.Mesh"),
    # (`with maps.mesh(devices, names):` built a Mesh and entered it, until jax 0.3.8)
    _a("jax.experimental.maps.mesh", R.MESH, replacement="jax.sharding.Mesh"),
    _a("jax.interpreters.pxla.Mesh", R.MESH, replacement="jax.sharding.Mesh"),
    _a("jax.experimental.PartitionSpec", R.PARTITION_SPEC,
       replacement="jax.sharding.PartitionSpec"),
    _a("jax.interpreters.pxla.PartitionSpec", R.PARTITION_SPEC,
       replacement="jax.sharding.PartitionSpec"),
    _a("jax.experimental.pjit.PartitionSpec", R.PARTITION_SPEC,
       replacement="jax.sharding.PartitionSpec"),
    _a("jax.experimental.pjit.with_sharding_constraint", R.SHARDING_CONSTRAINT,
       replacement="jax.lax.with_sharding_constraint"),
    _a("jax.ad_checkpoint.checkpoint", R.REMAT, replacement="jax.checkpoint"),
    _a("jax.experimental.maps", R.OTHER, replacement="jax.shard_map",
       note="xmap and the maps module are gone"),
    # Shardings, devices and low-level moves.
    _a("jax.sharding.PositionalSharding", R.OTHER, replacement="jax.sharding.NamedSharding",
       note="build a Mesh and a PartitionSpec for the same layout"),
    _a("jax.sharding.GSPMDSharding", R.OTHER, replacement="jax.sharding.NamedSharding",
       note="jax.extend.sharding.GSPMDSharding remains for low-level use"),
    _a("jax.sharding.XLACompatibleSharding", R.OTHER, replacement="jax.sharding.Sharding"),
    _a("jax.sharding.AxisTypes", R.OTHER, replacement="jax.sharding.AxisType"),
    _a("jax.interpreters.pxla.thread_resources", R.LEGACY_ENV,
       replacement="jax.sharding.get_abstract_mesh",
       note="it is what the legacy `with mesh:` sets; read the mesh `jax.set_mesh` sets: its "
            "axis names and sizes there, and `jax.sharding.get_mesh()` (jax >= 0.8.1) where "
            "its devices are read, which an abstract mesh does not have"),
    _a("jax.interpreters.pxla.MeshComputation", R.OTHER),
    _a("jax.interpreters.pxla.global_avals_to_results_handler", R.OTHER),
    _a("jax.lib.xla_client", R.OTHER,
       note="the module is gone: `import jax.lib.xla_client` raises ModuleNotFoundError"),
    _a("jax.lib.xla_client.Device", R.OTHER, replacement="jax.Device"),
    _a("jax.lib.xla_client.OpSharding", R.OTHER),
    _a("jax.lib.xla_client.HloSharding", R.OTHER),
    _a("jax.lib.xla_client.DeviceAssignment", R.OTHER),
    _a("jax.lib.xla_client.get_topology_for_devices", R.OTHER),
    _a("jax.clear_backends", R.OTHER, replacement="jax.extend.backend.clear_backends"),
    # Deprecated in jax 0.2.13, before the oldest release read, and it warns with a UserWarning
    # (no DeprecationWarning category), which the reader does not count as a deprecation.
    _a("jax.host_ids", R.OTHER, by_hand={"deprecated": "0.2.13"},
       replacement="jax.process_indices"),
    _a("jax.extend.core.primitives.pjit_p", R.OTHER,
       replacement="jax.extend.core.primitives.jit_p"),
    _a("jax.experimental.layout.DeviceLocalLayout", R.OTHER,
       replacement="jax.experimental.layout.Layout",
       note="in 0.7.0 the old `Layout` became `Format` and `DeviceLocalLayout` became `Layout`"),
    # Tree utilities.
    _a("jax.treedef_is_leaf", R.OTHER, replacement="jax.tree_util.treedef_is_leaf"),
    _a("jax.tree_util.build_tree", R.OTHER, replacement="jax.tree.unflatten",
       note="arguments in another order"),
    _a("jax.tree_util.register_keypaths", R.OTHER,
       note="key paths are built in: register with `register_pytree_with_keys`"),
    _a("jax.tree_util.AttributeKeyPathEntry", R.OTHER, replacement="jax.tree_util.GetAttrKey"),
    _a("jax.tree_util.GetitemKeyPathEntry", R.OTHER,
       note="use jax.tree_util.SequenceKey or DictKey"),
    # Flax NNX.
    _a("flax.nnx.vars_as", R.OTHER, replacement="flax.nnx.with_vars",
       note="the keywords differ (`is_mutable` is now `mutable`)"),
    _a("flax.nnx.with_sharding_constraint", R.OTHER,
       replacement="jax.lax.with_sharding_constraint"),
    # --- devices, placement, boxes (SHL104, SHL204, SHL205, SHL206, SHL304) --------------------
    _a("jax.sharding.reshard", R.OTHER, "jax.reshard"),
    _a("flax.linen.logical_to_mesh_axes", R.OTHER, "flax.linen.spmd.logical_to_mesh_axes"),
    _a("flax.nnx.get_named_sharding", R.OTHER, "flax.nnx.spmd.get_named_sharding"),
    _a("flax.nnx.to_pure_dict", R.OTHER, "flax.nnx.statelib.to_pure_dict"),
    _a("jax.experimental.mesh_utils.create_hybrid_device_mesh", R.DEVICE_MESH),
    _a("jax.devices", R.OTHER),
    _a("jax.local_devices", R.OTHER),
    _a("jax.device_count", R.OTHER),
    _a("jax.local_device_count", R.OTHER),
    _a("jax.process_index", R.OTHER),
    _a("jax.process_count", R.OTHER),
    _a("jax.distributed.initialize", R.OTHER),
    _a("jax.make_array_from_process_local_data", R.OTHER),
    _a("jax.numpy.asarray", R.OTHER),
    _a("jax.numpy.array", R.OTHER),
    _a("jax.numpy.zeros", R.OTHER),
    _a("jax.numpy.ones", R.OTHER),
    _a("jax.numpy.full", R.OTHER),
    _a("jax.numpy.empty", R.OTHER),
    _a("numpy.zeros", R.OTHER),
    _a("numpy.ones", R.OTHER),
    _a("numpy.full", R.OTHER),
    _a("numpy.empty", R.OTHER),
    _a("flax.nnx.state", R.OTHER, "flax.nnx.graph.state", "flax.nnx.graphlib.state"),
    _a("flax.nnx.split", R.OTHER, "flax.nnx.graph.split", "flax.nnx.graphlib.split"),
    _a("jax.sharding.auto_axes", R.OTHER),
    _a("jax.sharding.explicit_axes", R.OTHER),
    # --- moves, transfers, NNX updates, remat, RNG (SHL305, SHL306, SHL403-405, SHL501, SHL502) -
    _a("jax.experimental.shard", R.OTHER, replacement="jax.sharding"),
    _a("jax.experimental.shard.reshard", R.OTHER, replacement="jax.sharding.reshard"),
    _a("jax.experimental.shard.auto_axes", R.OTHER, replacement="jax.sharding.auto_axes"),
    _a("jax.experimental.shard.explicit_axes", R.OTHER, replacement="jax.sharding.explicit_axes"),
    _a("flax.nnx.with_metadata", R.OTHER, "flax.nnx.variablelib.with_metadata"),
    _a("flax.nnx.update", R.OTHER, "flax.nnx.graph.update", "flax.nnx.graphlib.update"),
    _a("flax.nnx.grad", R.OTHER, "flax.nnx.transforms.autodiff.grad"),
    _a("flax.nnx.value_and_grad", R.OTHER, "flax.nnx.transforms.autodiff.value_and_grad"),
    _a("jax.vjp", R.OTHER),
    _a("jax.lax.scan", R.OTHER),
    _a("jax.config.update", R.OTHER),
    _a("flax.config.update", R.OTHER),

    _a("jax.ad_checkpoint.checkpoint_name", R.OTHER),  # names values for a remat policy
    _a("flax.linen.remat_scan", R.REMAT),
)

_BY_SPELLING: dict[str, Api] = {}
for _api in APIS:
    for _s in (_api.name, *_api.spellings):
        _BY_SPELLING[_s] = _api


def lookup(qualified: str) -> Api | None:
    """The API a fully qualified dotted name refers to, or None if shardlint does not know it."""
    return _BY_SPELLING.get(qualified)


def canonical(qualified: str) -> str:
    api = _BY_SPELLING.get(qualified)
    return api.name if api else qualified


def names_with_role(*roles: Role) -> frozenset[str]:
    return frozenset(a.name for a in APIS if a.role in roles)


# The first jax release with `jax.set_mesh` (read from the releases, as every `added`): before
# it, a mesh is put in context by the legacy `with mesh:` (which flax < 0.12.2 honours).
SET_MESH_ADDED: str = lookup("jax.set_mesh").added or ""  # type: ignore[union-attr]


# Packages whose text in a file makes it worth parsing (the prefilter).
PACKAGES = ("jax", "flax", "optax")


# ---- SHL501: moves of a keyword or attribute, and how a move is repaired ----------------------
@dataclass(frozen=True)
class KeywordMove:
    """A keyword (and the attribute of the same name) of ``owners`` renamed to ``replacement``."""

    owners: tuple[str, ...]  # canonical APIs that take the keyword
    keyword: str
    replacement: str
    deprecated: str  # version of the owners' package that started warning
    attribute: bool = False  # `variable.<keyword>` reads moved too
    call_keyword: bool = True  # the keyword of a call moved (False: only the attribute)


KEYWORD_MOVES: tuple[KeywordMove, ...] = (
    # The Variable sharding metadata became `out_sharding` in flax 0.12.4: `sharding=` and
    # `sharding_names=` were remapped to it silently there, and warn from 0.12.6 on; reading
    # `.sharding_names` warns from 0.12.4. By hand: the warnings' texts are in the table
    # (`tests/test_api_facts.py` holds these versions to the first release that gives them), but
    # not which of them a keyword and which an attribute gives.
    KeywordMove(("flax.nnx.Param", "flax.nnx.Variable", "flax.nnx.with_metadata"), "sharding",
                "out_sharding", "0.12.6"),
    KeywordMove(("flax.nnx.Param", "flax.nnx.Variable", "flax.nnx.with_metadata"),
                "sharding_names", "out_sharding", "0.12.6"),
    KeywordMove(("flax.nnx.Param", "flax.nnx.Variable", "flax.nnx.with_metadata"),
                "sharding_names", "out_sharding", "0.12.4", attribute=True, call_keyword=False),
)


@dataclass(frozen=True)
class MoveFix:
    """How SHL501 rewrites a use of a moved API into its replacement.

    ``rename``: same arguments, same behaviour -- a safe fix. ``review``: the edit is offered as
    unsafe when the call's arguments fit the replacement (at most ``max_positional`` positional
    arguments, none of ``dropped``), else shown only. Moves not listed have no mechanical edit.
    """

    kind: str  # "rename" | "review"
    max_positional: int | None = None
    dropped: tuple[str, ...] = ()
    why: str = ""  # what to check before applying a review fix


MOVE_FIXES: dict[str, MoveFix] = {
    **{f"jax.tree_{n}": MoveFix("rename") for n in (
        "map", "flatten", "unflatten", "leaves", "structure", "transpose")},
    "jax.sharding.use_mesh": MoveFix("rename"),
    **{name: MoveFix("rename") for name in (
        "jax.sharding.XLACompatibleSharding", "jax.sharding.AxisTypes", "jax.lib.xla_client.Device",
        "jax.clear_backends", "jax.treedef_is_leaf", "jax.host_ids",
        "jax.experimental.layout.DeviceLocalLayout", "jax.experimental.maps.Mesh",
        "jax.interpreters.pxla.Mesh", "jax.experimental.PartitionSpec",
        "jax.interpreters.pxla.PartitionSpec", "jax.experimental.pjit.PartitionSpec",
        "jax.experimental.pjit.with_sharding_constraint", "jax.ad_checkpoint.checkpoint")},
    "jax.experimental.shard": MoveFix("rename"),
    "jax.experimental.shard.reshard": MoveFix("rename"),
    "jax.experimental.pjit.pjit": MoveFix(
        "review", max_positional=1,
        why="`jax.jit` takes shardings by keyword only, and bare PartitionSpecs need "
            "`jax.set_mesh` (pjit also accepted the legacy `with mesh:`)"),
    "jax.experimental.shard_map.shard_map": MoveFix(
        "review", max_positional=1, dropped=("check_rep", "auto"),
        why="`jax.shard_map` takes `mesh`, `in_specs` and `out_specs` by keyword only and "
            "checks replication (`check_vma`) by default"),
    "jax.experimental.shard.auto_axes": MoveFix(
        "review", why="check the keyword names against `jax.sharding.auto_axes`"),
    "jax.experimental.shard.explicit_axes": MoveFix(
        "review", why="check the keyword names against `jax.sharding.explicit_axes`"),
    "flax.nnx.with_sharding_constraint": MoveFix(
        "review", dropped=("mesh",),
        why="`jax.lax.with_sharding_constraint` raises without a mesh where flax's returned "
            "the value unchanged"),
}
