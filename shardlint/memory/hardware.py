"""Memory per device of common accelerators, for `--hardware NAME`.

Figures are the capacity per JAX device as the vendor sells it (NVIDIA's "80GB" HBM is 80 GiB of
stacks; the driver keeps a few hundred MiB, e.g. an H100 80GB shows 81559 MiB and an H200 143771
MiB in nvidia-smi). On GPUs JAX's allocator takes 75% of that by default unless
XLA_PYTHON_CLIENT_PREALLOCATE=false or XLA_CLIENT_MEM_FRACTION says otherwise; the report says so
rather than silently shrinking the figure.

TPU figures are what a program may hold on one JAX device, read rather than taken from the
datasheet (a "16 GiB" v5e chip lets a program have 15.75 GiB): the v5e's is the chip's own
`memory_stats()['bytes_limit']` (one v5e chip, jax 0.10.2, libtpu 0.0.42.1); the others are the
TPU compiler's own limit, the largest output libtpu 0.0.50.1 compiles for one device of that
generation's topology on a CPU host (`shardlint.memory.worker.target.compiler_limit`; for the v5e
it gives 16,909,283,328 B, 52,736 B under the chip's bytes_limit). v2, v3 and (in libtpu's
compile-only topologies) v4 expose each of a chip's two cores as a JAX device.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class Accelerator:
    name: str
    bytes_per_device: int
    kind: str  # "gpu" | "tpu"
    note: str = ""
    generation: str = ""  # TPU: libtpu's name of the generation (`v5e`), for `--target`


ACCELERATORS: tuple[Accelerator, ...] = (
    Accelerator("H200-141GB", 141 * GIB, "gpu"),
    Accelerator("H100-80GB", 80 * GIB, "gpu", "SXM and PCIe"),
    Accelerator("H100-94GB", 94 * GIB, "gpu", "H100 NVL"),
    Accelerator("GH200-96GB", 96 * GIB, "gpu"),
    Accelerator("GH200-144GB", 144 * GIB, "gpu"),
    Accelerator("A100-80GB", 80 * GIB, "gpu"),
    Accelerator("A100-40GB", 40 * GIB, "gpu"),
    Accelerator("L40S-48GB", 48 * GIB, "gpu"),
    Accelerator("L4-24GB", 24 * GIB, "gpu"),
    Accelerator("A10G-24GB", 24 * GIB, "gpu"),
    Accelerator("RTX4090-24GB", 24 * GIB, "gpu"),
    Accelerator("V100-32GB", 32 * GIB, "gpu"),
    Accelerator("V100-16GB", 16 * GIB, "gpu"),
    Accelerator("T4-16GB", 16 * GIB, "gpu"),
    Accelerator("TPU-v2", 8_034_141_184, "tpu", "per core: 2 cores = 2 JAX devices a chip",
                "v2"),
    Accelerator("TPU-v3", 16_624_075_776, "tpu", "per core: 2 cores = 2 JAX devices a chip",
                "v3"),
    Accelerator("TPU-v4", 16_372_942_848, "tpu", "per core (libtpu's topology: 2 devices a chip)",
                "v4"),
    Accelerator("TPU-v5e", 16_909_336_064, "tpu", "also sold as v5litepod; the chip's bytes_limit",
                "v5e"),
    Accelerator("TPU-v5p", 102_786_591_744, "tpu", "", "v5p"),
    Accelerator("TPU-v6e", 33_545_986_048, "tpu", "Trillium", "v6e"),
)

_ALIASES = {"v5litepod": "TPU-v5e", "trillium": "TPU-v6e"}


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def find_accelerator(name: str) -> Accelerator:
    """Look a name up ignoring case and punctuation: `h100-80gb`, `H100_80GB`, `tpu v5e`, `v5e`.

    Raises KeyError with the known names when nothing matches.
    """
    wanted = _key(_ALIASES.get(name.strip().lower(), name))
    for acc in ACCELERATORS:
        key = _key(acc.name)
        if wanted == key or (acc.kind == "tpu" and wanted == key[len("tpu") :]):
            return acc
    known = ", ".join(acc.name for acc in ACCELERATORS)
    raise KeyError(f"unknown hardware {name!r}; known: {known} (or give --capacity 24GiB)")


def tpu_generation(generation: str) -> Accelerator:
    """The TPU whose libtpu generation name is ``generation`` (`v5e`, `v5litepod` too)."""
    wanted = _key(_ALIASES.get(generation.strip().lower(), generation))
    for acc in ACCELERATORS:
        if acc.kind == "tpu" and wanted in (_key(acc.generation), _key(acc.name)):
            return acc
    known = ", ".join(acc.generation for acc in ACCELERATORS if acc.kind == "tpu")
    raise KeyError(f"unknown TPU generation {generation!r}; known: {known}")
