"""Memory probes for the seed ensemble: `shardlint memory examples/seed_ensemble/probes.py`.

They rebuild the model of `original.py` and `fixed.py` (an `nn.vmap` ensemble of MLPs whose
kernels carry logical names) at a size whose figures are easy to read: E=8 members, 1024 -> 4096
-> 1, float32, 128 MiB of parameters in all. E stays 8 whatever the device count, so per-device
figures at 1 and 2 devices compare like with like. Nothing is allocated: inputs are
`jax.ShapeDtypeStruct`s and the parameters exist only as shapes (`jax.eval_shape`).

Probes that depend on a context (axis rules, `jax.set_mesh`) lower inside it and return the
`Lowered`: constraints are resolved when the step is traced, so the worker, which compiles later,
sees exactly what the code sees.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax.sharding import Mesh, NamedSharding, PartitionSpec

E, D_IN, FEATURES, BATCH = 8, 1024, 4096, 8
RULES = (
    ("ensemble", "model"),
    ("batch", "data"),
    ("input", None),
    ("hidden", None),
    ("output", None),
)


class MLP(nn.Module):
    features: int = FEATURES

    @nn.compact
    def __call__(self, x):
        init = nn.initializers.xavier_normal()
        y = nn.Dense(
            self.features,
            use_bias=False,
            kernel_init=nn.with_logical_partitioning(init, ("input", "hidden")),
        )(x)
        y = nn.with_logical_constraint(y, ("batch", None))
        y = nn.Dense(
            1, use_bias=False, kernel_init=nn.with_logical_partitioning(init, ("hidden", "output"))
        )(y)
        return nn.with_logical_constraint(y.reshape(-1), ("batch",))


def _model() -> nn.Module:
    ensemble = nn.vmap(
        MLP,
        in_axes=None,
        out_axes=1,
        axis_size=E,
        variable_axes={"params": 0},
        metadata_params={nn.PARTITION_NAME: "ensemble"},
        split_rngs={"params": True},
    )
    return ensemble()


def _mesh() -> Mesh:
    return jax.make_mesh(
        (jax.device_count(), 1), ("model", "data"), axis_types=(jax.sharding.AxisType.Auto,) * 2
    )


def _key():
    # Abstract: nothing runs, so probes work under a mesh of devices this host does not have
    # (`shardlint memory --target tpu-v5e:2x2`).
    return jax.eval_shape(lambda: jax.random.key(0))


def shardlint_probe_original():
    """The posted code's init: `jax.jit(model.init)`, no out_shardings, no axis rules in context.

    The input is placed on every device as in the discussion (`device_put(x, NamedSharding(mesh,
    P()))`); nothing tells jit how to shard the parameters, so each device gets all of them.
    """
    model, mesh = _model(), _mesh()
    x = jax.ShapeDtypeStruct(
        (BATCH, D_IN), jnp.float32, sharding=NamedSharding(mesh, PartitionSpec())
    )
    return jax.jit(model.init), (_key(), x)


def _sharded_params(model: nn.Module, mesh: Mesh):
    """Boxed abstract parameters whose leaves carry the sharding the rules give them."""
    abstract = jax.eval_shape(model.init, _key(), jax.ShapeDtypeStruct((BATCH, D_IN), jnp.float32))
    shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, RULES)
    return abstract, shardings


def _with_sharding(tree, shardings):
    boxed = lambda b: isinstance(b, nn.Partitioned)

    def leaf(b, s):
        value = b.value if boxed(b) else b
        sds = jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=s)
        return b.replace_boxed(sds) if boxed(b) else sds

    return jax.tree.map(leaf, tree, shardings, is_leaf=boxed)


def shardlint_probe_fixed():
    """`fixed.py`'s init: rules + `jax.set_mesh`, jit with out_shardings from the logical specs."""
    model, mesh = _model(), _mesh()
    x = jax.ShapeDtypeStruct((BATCH, D_IN), jnp.float32)
    with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
        _, shardings = _sharded_params(model, mesh)
        return jax.jit(model.init, out_shardings=shardings).lower(_key(), x)


def shardlint_probe_fixed_train_step():
    """`fixed.py`'s Adam train step, donating parameters and optimizer state."""
    model, mesh = _model(), _mesh()
    tx = optax.adam(1e-3)

    def loss_fn(params, x, y):
        pred = model.apply({"params": params}, x)
        return jnp.mean((pred - y) ** 2)

    def train_step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
        abstract, shardings = _sharded_params(model, mesh)
        params = _with_sharding(abstract["params"], shardings["params"])
        abstract_opt = jax.eval_shape(tx.init, abstract["params"])
        opt_shardings = nn.logical_to_mesh_sharding(
            nn.get_partition_spec(abstract_opt), mesh, RULES
        )
        opt_state = _with_sharding(abstract_opt, opt_shardings)
        x = jax.ShapeDtypeStruct((BATCH, D_IN), jnp.float32)
        y = jax.ShapeDtypeStruct((BATCH, E), jnp.float32)
        step = jax.jit(train_step, donate_argnums=(0, 1))
        return step.lower(params, opt_state, x, y)
