"""The `[tool.shardlint.memory]` table: what to measure, on how many devices, against what capacity.

```toml
[tool.shardlint.memory]
probes = ["examples/seed_ensemble/probes.py:shardlint_probe_fixed"]
devices = [1, 2, 8]
hardware = "H100-80GB"          # or capacity = "24GiB" (not both)
timeout = 300                   # seconds per probe
memory-limit = "8GiB"           # worker RSS; default: half of this machine's memory
replicated-threshold = "1MiB"   # replicated leaves at least this big are reported
python = ".venv/bin/python"     # interpreter that has jax; default: the one running shardlint
platform = "cpu"                # "cpu" simulates the devices; "native" uses the real ones
target = "tpu-v5e:2x2"          # compile for a TPU topology with libtpu, from any host
```
"""

from __future__ import annotations

import difflib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shardlint.errors import ConfigError
from shardlint.memory.hardware import find_accelerator
from shardlint.memory.units import parse_size

TABLE = "[tool.shardlint.memory]"
KEYS = (
    "probes",
    "devices",
    "hardware",
    "capacity",
    "timeout",
    "memory-limit",
    "replicated-threshold",
    "python",
    "platform",
    "target",
)
PLATFORMS = ("cpu", "native")


def default_memory_limit() -> int:
    """Half of physical memory: a runaway probe must not take the machine (or the editor) down."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        return 8 * 1024**3


@dataclass(frozen=True)
class MemorySettings:
    probes: tuple[str, ...] = ()
    devices: tuple[int, ...] = (1, 2, 8)
    hardware: str | None = None
    capacity: int | None = None  # bytes per device; from `capacity`, else from `hardware`
    timeout: float = 300.0
    memory_limit: int | None = None  # None: default_memory_limit()
    replicated_threshold: int = 1024**2
    python: str | None = None
    platform: str = "cpu"
    target: str | None = None  # `tpu-v5e:2x2`: the TPU compiler's figures for that topology

    @classmethod
    def from_table(cls, table: dict[str, Any]) -> MemorySettings:
        """Validate a parsed `[tool.shardlint.memory]` table; ConfigError names the bad key."""
        if not isinstance(table, dict):
            raise ConfigError(f"{TABLE} must be a table, not {type(table).__name__}")
        for key in table:
            if key not in KEYS:
                close = difflib.get_close_matches(key.replace("_", "-"), KEYS, n=1)
                hint = (
                    f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(KEYS)}"
                )
                raise ConfigError(f"{TABLE}: unknown key '{key}'{hint}")
        kw: dict[str, Any] = {}
        if "probes" in table:
            kw["probes"] = _probes(table["probes"])
        if "devices" in table:
            kw["devices"] = parse_devices(table["devices"], key="devices")
        if "hardware" in table and "capacity" in table:
            raise ConfigError(f"{TABLE}: set either 'hardware' or 'capacity', not both")
        if "hardware" in table:
            name = _string(table["hardware"], "hardware")
            try:
                acc = find_accelerator(name)
            except KeyError as exc:
                raise ConfigError(f"{TABLE}: 'hardware': {exc.args[0]}") from None
            kw["hardware"] = acc.name
            kw["capacity"] = acc.bytes_per_device
        if "capacity" in table:
            kw["capacity"] = _size(table["capacity"], "capacity")
        if "timeout" in table:
            kw["timeout"] = _positive_number(table["timeout"], "timeout")
        if "memory-limit" in table:
            kw["memory_limit"] = _size(table["memory-limit"], "memory-limit")
        if "replicated-threshold" in table:
            kw["replicated_threshold"] = _size(
                table["replicated-threshold"], "replicated-threshold"
            )
        if "python" in table:
            kw["python"] = _string(table["python"], "python")
        if "platform" in table:
            platform = _string(table["platform"], "platform")
            if platform not in PLATFORMS:
                raise ConfigError(f"{TABLE}: 'platform' must be one of {', '.join(PLATFORMS)}")
            kw["platform"] = platform
        if "target" in table:
            kw.update(_target(table, kw))
        return cls(**kw)


def _target(table: dict[str, Any], kw: dict[str, Any]) -> dict[str, Any]:
    """`target`: the normalised spec; the TPU's capacity and the topology's device count where
    the table sets neither."""
    from shardlint.errors import UsageError
    from shardlint.memory.targets import check_counts, parse_target

    try:
        target = parse_target(_string(table["target"], "target"))
        if "devices" in kw:
            check_counts(target, kw["devices"])
    except UsageError as exc:
        raise ConfigError(f"{TABLE}: 'target': {str(exc).replace('--target ', '')}") from None
    if kw.get("platform") == "native":
        raise ConfigError(f"{TABLE}: 'target' compiles for devices this host does not have; "
                          "'platform = \"native\"' runs on the ones it has: set one of them")
    out: dict[str, Any] = {"target": target.spec}
    if "capacity" not in kw:
        out.update(hardware=target.accelerator.name, capacity=target.accelerator.bytes_per_device)
    if "devices" not in kw:
        out["devices"] = (target.devices,)
    return out


def parse_devices(value: object, *, key: str = "--devices") -> tuple[int, ...]:
    """`[1, 2, 8]` or `"1,2,8"` -> (1, 2, 8): sorted, unique, each at least 1."""
    items: list[object]
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ConfigError(f"'{key}' must be a list of device counts like [1, 2, 8]")
    counts: set[int] = set()
    for item in items:
        if isinstance(item, (bool, float)) or not str(item).strip().isdigit():
            raise ConfigError(f"'{key}': {item!r} is not a device count")
        count = int(str(item).strip())
        if count < 1:
            raise ConfigError(f"'{key}': a device count must be at least 1, got {count}")
        counts.add(count)
    if not counts:
        raise ConfigError(f"'{key}' must name at least one device count")
    return tuple(sorted(counts))


def _probes(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(
            f"{TABLE}: 'probes' must be a list of \"path/to/file.py:function\" strings"
        )
    for item in value:
        path = item.rsplit(":", 1)[0] if _has_function(item) else item
        if not path.endswith(".py"):
            raise ConfigError(f"{TABLE}: 'probes': {item!r} is not \"path/to/file.py[:function]\"")
    return tuple(value)


def _has_function(spec: str) -> bool:
    # "C:\\x.py" has a drive colon, "x.py:f" a function colon: only the latter ends after ".py:".
    head, sep, tail = spec.rpartition(":")
    return bool(sep) and head.endswith(".py") and tail.isidentifier()


def _string(value: object, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{TABLE}: '{key}' must be a non-empty string")
    return value.strip()


def _size(value: object, key: str) -> int:
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise ConfigError(f"{TABLE}: '{key}': not a size: {value!r} (write e.g. 24GiB)")
    try:
        size = parse_size(value)
    except ValueError as exc:
        raise ConfigError(f"{TABLE}: '{key}': {exc}") from None
    if size <= 0:
        raise ConfigError(f"{TABLE}: '{key}' must be more than 0 bytes")
    return size


def _positive_number(value: object, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"{TABLE}: '{key}' must be a number of seconds above 0")
    return float(value)


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above `start` (the lead's config module replaces this)."""
    for folder in (start.resolve(), *start.resolve().parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def load_settings(start: Path) -> tuple[MemorySettings, Path | None]:
    """Settings from the nearest pyproject.toml and the folder it is in (the project root)."""
    pyproject = find_pyproject(start)
    if pyproject is None:
        return MemorySettings(), None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        with pyproject.open("rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{pyproject}: {exc}") from None
    table = data.get("tool", {}).get("shardlint", {}).get("memory", {})
    return MemorySettings.from_table(table), pyproject.parent
