"""The seed ensemble, fixed: rules + `jax.set_mesh`, a sharded jitted init, a donating step.

- logical axis rules and the mesh are entered with `jax.set_mesh(mesh)` (not the legacy
  `with mesh:`), so Flax constraints apply;
- the init is jitted with `out_shardings` derived from the abstract (boxed) variables, so each
  device only ever holds its share of the ensemble;
- the train step donates the parameters and the optimizer state, so the update reuses their
  buffers instead of holding two copies.
"""

import functools

import jax
import jax.numpy as jnp
import flax.linen as nn
import optax
from jax.experimental import mesh_utils
from jax.sharding import Mesh

N = jax.device_count()
mesh = Mesh(mesh_utils.create_device_mesh((N, 1)), ("model", "data"))
RULES = (
    ("ensemble", "model"),
    ("batch", "data"),
    ("input", None),
    ("hidden", None),
    ("output", None),
)


class MLP(nn.Module):
    features: int = 5000

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


EnsembleMLP = nn.vmap(
    MLP,
    in_axes=None,
    out_axes=1,
    axis_size=N,
    variable_axes={"params": 0},
    metadata_params={nn.PARTITION_NAME: "ensemble"},
    split_rngs={"params": True},
)
model = EnsembleMLP()
tx = optax.adam(1e-3)


def loss_fn(params, x, y):
    pred = model.apply({"params": params}, x)
    return jnp.mean((pred - y) ** 2)


@functools.partial(jax.jit, donate_argnums=(0, 1))
def train_step(params, opt_state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, loss


def main(steps: int = 3):
    rng = jax.random.key(0)
    x = jnp.ones((8, 20))
    y = jnp.zeros((8, N))
    with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
        abstract = jax.eval_shape(model.init, rng, x)
        shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, RULES)
        variables = jax.jit(model.init, out_shardings=shardings)(rng, x)
        params = variables["params"]
        opt_state = tx.init(params)  # eager init keeps the parameters' sharding
        loss = None
        for _ in range(steps):
            params, opt_state, loss = train_step(params, opt_state, x, y)
    return params, loss


if __name__ == "__main__":
    params, loss = main()
    kernel = params["Dense_0"]["kernel"]
    print(f"loss {float(loss):.4f}; Dense_0 kernel {kernel.value.shape} "
          f"sharded as {kernel.value.sharding.spec}")
