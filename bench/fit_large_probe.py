"""A ~60B-parameter fp32 Linen decoder train step with AdamW that does not fit H100-80GB at 64
devices: the benchmark of `shardlint memory --fit` (bench/fit_large.py).

The decoder of examples/decoder_1b scaled up (74 layers, d_model 8192, MLP 32768, 64 heads,
sequence 2048, batch 64) on a (devices/8, 8) mesh, with a tensor-parallel-only rules table: the
embedding dimension has no rule, so each weight is sharded 8 ways and replicated over the other
axis. Everything is abstract, as in the 1B probe.

    shardlint memory bench/fit_large_probe.py --devices 64 --hardware H100-80GB --fit
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax.sharding import AxisType, NamedSharding, PartitionSpec

LAYERS, D_MODEL, D_MLP, HEADS, VOCAB, SEQ, BATCH = 74, 8192, 32768, 64, 32000, 2048, 64
RULES = (
    ("batch", "fsdp"),
    ("embed", None),
    ("mlp", "tensor"),
    ("heads", "tensor"),
    ("vocab", "tensor"),
    ("layers", None),
    ("length", None),
)


def _dense(features, names):
    init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), names)
    return nn.Dense(features, kernel_init=init, use_bias=False)


def _norm():
    return nn.LayerNorm(
        use_bias=False, scale_init=nn.with_logical_partitioning(nn.initializers.ones, ("embed",))
    )


class DecoderLayer(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        h = _norm()(x)
        heads = h.shape[:-1] + (HEADS, D_MODEL // HEADS)
        q, k, v = (_dense(D_MODEL, ("embed", "heads"))(h).reshape(heads) for _ in range(3))
        attn = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(h.shape)
        x = x + _dense(D_MODEL, ("heads", "embed"))(attn)
        h = nn.gelu(_dense(D_MLP, ("embed", "mlp"))(_norm()(x)))
        h = nn.with_logical_constraint(h, ("batch", "length", "mlp"))
        x = x + _dense(D_MODEL, ("mlp", "embed"))(h)
        return nn.with_logical_constraint(x, ("batch", "length", "embed")), None


class Decoder(nn.Module):
    @nn.compact
    def __call__(self, tokens):
        embed = nn.Embed(
            VOCAB,
            D_MODEL,
            embedding_init=nn.with_logical_partitioning(
                nn.initializers.normal(0.02), ("vocab", "embed")
            ),
        )
        layers = nn.scan(
            nn.remat(DecoderLayer),
            variable_axes={"params": 0},
            split_rngs={"params": True},
            length=LAYERS,
            metadata_params={nn.PARTITION_NAME: "layers"},
        )
        x, _ = layers(name="layers")(embed(tokens), None)
        return embed.attend(_norm()(x))


def _mesh():
    n = jax.device_count()
    tensor = 8 if n % 8 == 0 else 1
    return jax.make_mesh((n // tensor, tensor), ("fsdp", "tensor"), axis_types=(AxisType.Auto,) * 2)


def _abstract(tree, shardings):
    """ShapeDtypeStructs with shardings, unboxed by hand: `nn.unbox` would re-apply constraints."""
    boxed = lambda b: isinstance(b, nn.Partitioned)
    raw = jax.tree.map(lambda b: b.value if boxed(b) else b, tree, is_leaf=boxed)
    return jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), raw, shardings
    )


def shardlint_probe_decoder_60b_train_step():
    model, tx, mesh = Decoder(), optax.adamw(1e-4), _mesh()
    tokens = jax.ShapeDtypeStruct(
        (BATCH, SEQ), jnp.int32, sharding=NamedSharding(mesh, PartitionSpec("fsdp"))
    )

    def init_state(key):
        params = model.init(key, jnp.ones((BATCH, SEQ), jnp.int32))["params"]
        return params, tx.init(params)

    def train_step(state, tokens):
        params, opt_state = state

        def loss_fn(p):
            logits = model.apply({"params": p}, tokens)
            return optax.softmax_cross_entropy_with_integer_labels(
                logits[:, :-1], tokens[:, 1:]
            ).mean()

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), loss

    with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
        boxed_state = jax.eval_shape(init_state, jax.random.key(0))
        shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(boxed_state), mesh, RULES)
        state = _abstract(boxed_state, shardings)
        step = jax.jit(
            train_step,
            in_shardings=(shardings, tokens.sharding),
            out_shardings=(shardings, None),
            donate_argnums=0,
        )
        return step.lower(state, tokens)
