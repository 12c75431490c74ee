"""The discussion's code with the advice it received: `with nn.logical_axis_rules(rules), mesh:`.

The advice was right for flax 0.6, but since flax 0.12.2 the legacy `with mesh:` no longer
activates Linen constraints at all: they are still no-ops, and the ensemble still lands on one
device. `shardlint check` reports SHL101 on the `with` line and offers `jax.set_mesh(mesh)`.
"""

import jax
import flax.linen as nn
from jax.experimental import mesh_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

device_mesh = mesh_utils.create_device_mesh((jax.local_device_count(), 1))
mesh = Mesh(devices=device_mesh, axis_names=("model", "data"))


class MLP(nn.Module):
    features: int = 5000

    @nn.compact
    def __call__(self, x):
        y = nn.Dense(
            self.features,
            use_bias=False,
            kernel_init=nn.spmd.with_logical_partitioning(
                nn.initializers.xavier_normal(), ("input", "hidden")
            ),
        )(x)
        y = nn.spmd.with_logical_constraint(y, ("batch", None))
        y = nn.Dense(
            1,
            use_bias=False,
            kernel_init=nn.spmd.with_logical_partitioning(
                nn.initializers.xavier_normal(), ("hidden", "output")
            ),
        )(y)
        y = y.reshape(-1)
        y = nn.spmd.with_logical_constraint(y, ("batch",))
        return y


EnsembleMLP = nn.vmap(
    MLP,
    in_axes=None,
    out_axes=1,
    axis_size=jax.local_device_count(),
    variable_axes={"params": 0},
    metadata_params={nn.PARTITION_NAME: "ensemble"},
    split_rngs={"params": True},
)

model = EnsembleMLP()
rules = (("ensemble", "model"), ("batch", "data"))

data_spec = PartitionSpec()
x = jax.random.normal(jax.random.PRNGKey(0), (8, 20))
rng = jax.random.PRNGKey(0)
x = jax.device_put(x, NamedSharding(mesh, data_spec))


@jax.jit
def create_variables():
    variables = model.init(rng, x)
    spec = nn.get_partition_spec(variables)
    mesh_spec = nn.logical_to_mesh(spec, rules)
    variables = nn.unbox(variables)
    variables = jax.tree.map(
        lambda p, s: jax.lax.with_sharding_constraint(p, NamedSharding(mesh, s)),
        variables,
        mesh_spec,
    )
    return variables


@jax.jit
def forward(variables, x):
    return model.apply(variables, x)


with nn.logical_axis_rules(rules), mesh:
    variables = create_variables()
    y = forward(variables, x)
