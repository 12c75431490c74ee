"""A ~1.07B-parameter Linen decoder train step with AdamW, measured without allocating it.

20 layers (scanned, rematerialised), d_model 2048, MLP 8192, 16 heads, vocabulary 32k, sequence
512; FSDP x tensor parallel logical rules on a (devices/2, 2) mesh. Everything the step sees is
abstract: `jax.eval_shape` for the parameters and optimizer state, `jax.ShapeDtypeStruct`s with
NamedShardings for the inputs, so measuring 12 GiB of training state costs the worker well under
a gigabyte of host memory.

    shardlint memory examples/decoder_1b/probe.py --devices 8 --hardware H100-80GB
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from jax.sharding import AxisType, NamedSharding, PartitionSpec

LAYERS, D_MODEL, D_MLP, HEADS, VOCAB, SEQ, BATCH = 20, 2048, 8192, 16, 32000, 512, 8
RULES = (
    ("batch", "fsdp"),
    ("embed", "fsdp"),
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
    layers: int = LAYERS

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
            length=self.layers,
            metadata_params={nn.PARTITION_NAME: "layers"},
        )
        x, _ = layers(name="layers")(embed(tokens), None)
        return embed.attend(_norm()(x))


def _mesh():
    n = jax.device_count()
    tensor = 2 if n % 2 == 0 else 1
    return jax.make_mesh((n // tensor, tensor), ("fsdp", "tensor"), axis_types=(AxisType.Auto,) * 2)


def _abstract(tree, shardings):
    """ShapeDtypeStructs with shardings, unboxed by hand: `nn.unbox` would re-apply constraints."""
    boxed = lambda b: isinstance(b, nn.Partitioned)
    raw = jax.tree.map(lambda b: b.value if boxed(b) else b, tree, is_leaf=boxed)
    return jax.tree.map(
        lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s), raw, shardings
    )


def train_step(layers, rules):
    """The step lowered for this host's devices, its weights and activations placed by `rules`
    (`data_parallel.py` passes its own table)."""
    model, tx, mesh = Decoder(layers), optax.adamw(1e-4), _mesh()
    # Made outside the mesh: a concrete value made under `jax.set_mesh` of a mesh of devices
    # this host does not have (`shardlint memory --target tpu-v5e:16x16`) cannot run.
    key = jax.random.key(0)
    # 8 sequences, or one a device on a bigger mesh (256 on a v5e:16x16 pod).
    batch = max(BATCH, jax.device_count())
    tokens = jax.ShapeDtypeStruct(
        (batch, SEQ), jnp.int32, sharding=NamedSharding(mesh, PartitionSpec("fsdp"))
    )

    def init_state(key):
        params = model.init(key, jnp.ones((batch, SEQ), jnp.int32))["params"]
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

    with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
        boxed_state = jax.eval_shape(init_state, key)
        shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(boxed_state), mesh, rules)
        state = _abstract(boxed_state, shardings)
        step = jax.jit(
            train_step,
            in_shardings=(shardings, tokens.sharding),
            out_shardings=(shardings, None),
            donate_argnums=0,
        )
        return step.lower(state, tokens)


def shardlint_probe_decoder_1b_train_step():
    return train_step(LAYERS, RULES)


def shardlint_probe_decoder_470m_train_step():
    """The same step with 8 layers (~470M parameters): fits one 16 GiB TPU v5e chip."""
    return train_step(8, RULES)
