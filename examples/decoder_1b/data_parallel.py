"""The 1B decoder of `probe.py` trained data-parallel: the table most projects start from.

The batch is split over every device; the weights and the AdamW state have no rule, so each
device holds all of them (about 12.8 GB) and the step's gradients besides. That does not fit a
16 GiB TPU v5e at any device count: the TPU compiler refuses the step. `--fit` finds the rows to
shard from the compiler's figures, without a chip:

    shardlint memory examples/decoder_1b/data_parallel.py --target tpu-v5e:16x16 --fit
"""

from probe import LAYERS, train_step

RULES = (
    ("batch", ("fsdp", "tensor")),
    ("embed", None),
    ("mlp", None),
    ("heads", None),
    ("vocab", None),
    ("layers", None),
    ("length", None),
)


def shardlint_probe_decoder_1b_data_parallel():
    return train_step(LAYERS, RULES)
