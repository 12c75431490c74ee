"""Memory per device of common accelerators, for `--hardware NAME`.

Figures are the capacity per JAX device as the vendor sells it (NVIDIA's "80GB" HBM is 80 GiB of
stacks; the driver keeps a few hundred MiB, e.g. an H100 80GB shows 81559 MiB and an H200 143771
MiB in nvidia-smi). On GPUs JAX's allocator takes 75% of that by default unless
XLA_PYTHON_CLIENT_PREALLOCATE=false or XLA_CLIENT_MEM_FRACTION says otherwise; the report says so
rather than silently shrinking the figure. TPU figures are HBM per chip from Cloud TPU's system
architecture pages; v2 and v3 expose each of a chip's two cores as a JAX device, so their figure is
half the chip's.
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
    Accelerator("TPU-v2", 8 * GIB, "tpu", "16 GiB per chip, 2 cores = 2 JAX devices"),
    Accelerator("TPU-v3", 16 * GIB, "tpu", "32 GiB per chip, 2 cores = 2 JAX devices"),
    Accelerator("TPU-v4", 32 * GIB, "tpu", "one JAX device per chip (megacore)"),
    Accelerator("TPU-v5e", 16 * GIB, "tpu", "also sold as v5litepod"),
    Accelerator("TPU-v5p", 95 * GIB, "tpu"),
    Accelerator("TPU-v6e", 32 * GIB, "tpu", "Trillium"),
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
