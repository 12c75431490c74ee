"""`--target tpu-<generation>:<topology>`: compile for a TPU topology's devices from any host.

The TPU compiler (libtpu) runs on a CPU host: the worker asks it for the devices of a topology
(`v5e:2x2`, `v5p:2x2x2`, a whole `v5e:16x16` pod) and compiles every probe for them, so the
figures are the TPU compiler's own (on one v5e chip they matched the chip's byte for byte; see
`tests/memory/data/tpu_chip.json`). Nothing runs on those devices: the peak is the compiler's.
Device counts smaller than the topology compile for a sub-mesh of its first devices.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import subprocess
from dataclasses import dataclass
from typing import Any

from shardlint.errors import UsageError
from shardlint.memory.hardware import Accelerator, find_accelerator, tpu_generation

# `MemorySettings` (memory/settings.py) is only handed in: settings.py reads a table's `target`
# through this module, so this one does not import it.
MemorySettings = Any

_SPEC = re.compile(r"^tpu-(?P<gen>[a-z0-9]+):(?P<topology>\d+(?:x\d+){1,2})$")
# Generations whose compile-only topology has two JAX devices a chip (one a core).
_TWO_CORES = ("v2", "v3", "v4")
# Slices to pick when only a device count is known (the smallest that holds it).
_SQUARES = ((1, 1), (2, 2), (2, 4), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16), (16, 32))
_CUBES = ((2, 2, 1), (2, 2, 2), (2, 2, 4), (2, 4, 4), (4, 4, 4), (4, 4, 8), (4, 8, 8),
          (8, 8, 8), (8, 8, 16), (8, 16, 16))


@dataclass(frozen=True)
class Target:
    spec: str  # as the user wrote it, normalised: `tpu-v5e:2x2`
    accelerator: Accelerator
    shape: tuple[int, ...]

    @property
    def generation(self) -> str:
        return self.accelerator.generation

    @property
    def topology(self) -> str:
        """libtpu's name of it: `v5e:2x2`."""
        return f"{self.generation}:{'x'.join(map(str, self.shape))}"

    @property
    def devices(self) -> int:
        return math.prod(self.shape) * (2 if self.generation in _TWO_CORES else 1)


def parse_target(text: str) -> Target:
    """`tpu-v5e:2x2` -> Target; UsageError saying what is wrong and what would do."""
    raw = text.strip().lower()
    match = _SPEC.match(raw)
    if not match:
        raise UsageError(f"--target {text!r}: expected tpu-<generation>:<topology>, "
                         "e.g. tpu-v5e:2x2, tpu-v5e:16x16, tpu-v5p:2x2x2, tpu-v6e:4x4")
    try:
        acc = tpu_generation(match.group("gen"))
    except KeyError as exc:
        raise UsageError(f"--target {text!r}: {exc.args[0]}") from None
    shape = tuple(int(n) for n in match.group("topology").split("x"))
    if any(n < 1 for n in shape):
        raise UsageError(f"--target {text!r}: every side of the topology must be at least 1")
    three = acc.generation in ("v4", "v5p")
    if three != (len(shape) == 3):
        example = "2x2x1" if three else "2x2"
        raise UsageError(f"--target {text!r}: a {acc.generation} topology has "
                         f"{'three' if three else 'two'} sides, e.g. "
                         f"tpu-{acc.generation}:{example}")
    return Target(f"tpu-{acc.generation}:{'x'.join(map(str, shape))}", acc, shape)


def target_for(acc: Accelerator, devices: int) -> Target:
    """The smallest slice of ``acc``'s generation with at least ``devices`` devices."""
    per_chip = 2 if acc.generation in _TWO_CORES else 1
    shapes = _CUBES if acc.generation in ("v4", "v5p") else _SQUARES
    for shape in shapes:
        if math.prod(shape) * per_chip >= devices:
            return Target(f"tpu-{acc.generation}:{'x'.join(map(str, shape))}", acc, shape)
    raise UsageError(f"no {acc.name} topology shardlint knows has {devices} devices; "
                     "give one with --target")


def check_counts(target: Target, counts: tuple[int, ...]) -> None:
    over = [n for n in counts if n > target.devices]
    if over:
        raise UsageError(f"--devices {','.join(map(str, over))}: the topology "
                         f"{target.topology} has {target.devices} devices (a smaller count "
                         "compiles for a sub-mesh of its first devices)")


@functools.lru_cache(maxsize=8)
def has_libtpu(python: str) -> bool:
    """Whether ``python`` has libtpu installed (read from its metadata; nothing is loaded)."""
    code = ("import importlib.metadata as m, sys\n"
            "for d in ('libtpu', 'libtpu-nightly'):\n"
            "    try: m.version(d); sys.exit(0)\n"
            "    except m.PackageNotFoundError: pass\n"
            "sys.exit(1)")
    try:
        return subprocess.run([python, "-c", code], capture_output=True, timeout=30,
                              check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def with_target(settings: MemorySettings, target: Target, *, devices_given: bool,
                capacity_given: bool) -> MemorySettings:
    """Settings that compile for ``target``: its device count unless counts were given (each
    checked against it), its TPU's capacity unless one was given."""
    devices = settings.devices
    default = next(f.default for f in dataclasses.fields(settings) if f.name == "devices")
    if not devices_given and settings.devices == default:
        devices = (target.devices,)
    check_counts(target, devices)
    changes: dict[str, object] = {"target": target.spec, "devices": devices, "platform": "cpu"}
    if not capacity_given and (settings.hardware is None or settings.capacity is None
                               or settings.hardware == target.accelerator.name):
        changes.update(hardware=target.accelerator.name,
                       capacity=target.accelerator.bytes_per_device)
    return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]


def default_target(settings: MemorySettings, python: str, platform_given: bool
                   ) -> MemorySettings:
    """Where the hardware is a TPU and that interpreter has libtpu, compile for the TPU: the
    smallest slice of it that holds the largest device count."""
    if settings.target or platform_given or settings.platform != "cpu" or not settings.hardware:
        return settings
    try:
        acc = find_accelerator(settings.hardware)
    except KeyError:
        return settings
    if acc.kind != "tpu" or not has_libtpu(python):
        return settings
    try:
        target = target_for(acc, max(settings.devices))
    except UsageError:
        return settings
    return dataclasses.replace(settings, target=target.spec)
