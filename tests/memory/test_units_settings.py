"""Sizes, the hardware table and the [tool.shardlint.memory] table: no jax, no subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from shardlint.errors import ConfigError
from shardlint.memory.hardware import ACCELERATORS, find_accelerator
from shardlint.memory.settings import MemorySettings, load_settings, parse_devices
from shardlint.memory.units import format_bytes, parse_size

GIB = 1024**3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("24GiB", 24 * GIB),
        ("24 GB", 24 * 10**9),
        ("512MiB", 512 * 1024**2),
        ("1.5G", int(1.5 * GIB)),
        ("4096", 4096),
        (123, 123),
    ],
)
def test_parse_size(text: str | int, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "lots", "12 parsecs", "-1GiB", True])
def test_parse_size_rejects(text: object) -> None:
    with pytest.raises(ValueError):
        parse_size(text)  # type: ignore[arg-type]


def test_format_bytes() -> None:
    assert format_bytes(64 * 1024**2) == "64.00 MiB"
    assert format_bytes(512) == "512 B"
    assert format_bytes(None) == "-"


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("H100-80GB", 80 * GIB),
        ("h100_80gb", 80 * GIB),
        ("H200-141GB", 141 * GIB),
        ("A100-40GB", 40 * GIB),
        ("A100-80GB", 80 * GIB),
        ("L4-24GB", 24 * GIB),
        # TPUs: what a program may hold on one device, read from the chip (v5e's bytes_limit)
        # or from the TPU compiler (tests/memory/test_tpu_target.py checks the compiler's).
        ("TPU-v4", 16_372_942_848),
        ("v5e", 16_909_336_064),
        ("tpu v5p", 102_786_591_744),
        ("TPU-v6e", 33_545_986_048),
        ("v5litepod", 16_909_336_064),
    ],
)
def test_hardware_table(name: str, size: int) -> None:
    assert find_accelerator(name).bytes_per_device == size


def test_unknown_hardware_lists_known_names() -> None:
    with pytest.raises(KeyError, match="H100-80GB"):
        find_accelerator("Z80")
    assert len({acc.name for acc in ACCELERATORS}) == len(ACCELERATORS)


def test_settings_from_table() -> None:
    settings = MemorySettings.from_table(
        {
            "probes": ["a/probes.py:shardlint_probe_x", "b.py"],
            "devices": [8, 1, 2],
            "hardware": "a100-80gb",
            "timeout": 60,
            "memory-limit": "4GiB",
            "replicated-threshold": "16MiB",
            "python": ".venv/bin/python",
        }
    )
    assert settings.devices == (1, 2, 8)
    assert settings.hardware == "A100-80GB" and settings.capacity == 80 * GIB
    assert settings.memory_limit == 4 * GIB and settings.replicated_threshold == 16 * 1024**2
    assert settings.timeout == 60.0 and settings.python == ".venv/bin/python"
    assert MemorySettings.from_table({"capacity": "24GiB"}).capacity == 24 * GIB


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"devise": [1]}, "devise"),
        ({"memory_limit": "1GiB"}, "memory-limit"),
        ({"devices": [0]}, "devices"),
        ({"devices": "x"}, "devices"),
        ({"hardware": "Z80"}, "hardware"),
        ({"capacity": "lots"}, "capacity"),
        ({"timeout": -1}, "timeout"),
        ({"probes": "a.py"}, "probes"),
        ({"probes": ["a.txt"]}, "probes"),
        ({"replicated-threshold": True}, "replicated-threshold"),
        ({"python": ""}, "python"),
        ({"platform": "tpu"}, "platform"),
        ({"hardware": "H100-80GB", "capacity": "1GiB"}, "capacity"),
    ],
)
def test_settings_errors_name_the_key(table: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=f"'{key}'"):
        MemorySettings.from_table(table)


def test_parse_devices_string() -> None:
    assert parse_devices("8, 2,1,2") == (1, 2, 8)


def test_load_settings_from_nearest_pyproject(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.shardlint.memory]\ndevices = [4]\ncapacity = "1GiB"\n'
    )
    nested = tmp_path / "src" / "pkg"
    nested.mkdir(parents=True)
    settings, root = load_settings(nested)
    assert settings.devices == (4,) and settings.capacity == GIB and root == tmp_path.resolve()


def test_load_settings_reports_bad_toml(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.shardlint.memory\n")
    with pytest.raises(ConfigError, match="pyproject.toml"):
        load_settings(tmp_path)
