"""The command line, the configuration table, measured findings, cancellation."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from shardlint.memory.findings import measured_findings
from shardlint.memory.probes import resolve
from shardlint.memory.runner import Cancelled, WorkerOptions, run_probes

from .memory_support import TINY_PROBE, CliResult, needs_jax

pytestmark = [pytest.mark.memory, needs_jax]
MIB = 1024**2


def test_does_not_fit_exits_1(
    shardlint_memory: Callable[..., CliResult], write_probe: Callable[[str, str], Path]
) -> None:
    write_probe("tiny.py", TINY_PROBE)
    result = shardlint_memory("tiny.py", "--devices", "2", "--capacity", "6MiB")
    assert result.code == 1, result.out + result.err
    assert re.search(r"fits capacity \(6\.00 MiB\)\s+NO \(\d+%\)", result.out)
    assert "error SHL904 does-not-fit" in result.out
    assert "a probe does not fit the capacity" in result.out


def test_measured_findings_are_plain_dicts(
    tmp_path: Path, write_probe: Callable[[str, str], Path]
) -> None:
    probe = write_probe("tiny.py", TINY_PROBE)
    lines: list[str] = []
    found = measured_findings(["tiny.py"], root=tmp_path, devices=[2], progress=lines.append)
    replicated = [f for f in found if f["code"] == "SHL901"]
    assert len(replicated) == 1, found
    f = replicated[0]
    assert f["name"] == "replicated-leaf" and f["severity"] == "warning" and f["source"] == "memory"
    assert (f["path"], f["line"], f["column"], f["probe"], f["devices"]) == (
        "tiny.py",
        probe.read_text().splitlines().index("def shardlint_probe_replicated():") + 1,
        0,
        "shardlint_probe_replicated",
        2,
    )
    assert "t float32[1024,1024] 4.00 MiB/device" in f["message"]
    assert any("done" in line for line in lines)


def test_configured_probes_and_devices(
    shardlint_memory: Callable[..., CliResult],
    tmp_path: Path,
    write_probe: Callable[[str, str], Path],
) -> None:
    write_probe("sub/tiny.py", TINY_PROBE)
    write_probe("other.py", "def shardlint_probe_not_configured():\n    raise RuntimeError\n")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.shardlint.memory]\nprobes = ["sub/tiny.py:shardlint_probe_replicated"]\n'
        'devices = [2]\nhardware = "L4-24GB"\nreplicated-threshold = "8MiB"\n'
    )
    result = shardlint_memory("--format", "json", cwd=tmp_path / "sub")
    assert result.code == 0, result.err
    data = result.json()
    assert (
        data["devices"] == [2]
        and data["hardware"] == "L4-24GB"
        and data["capacity"] == 24 * 1024**3
    )
    assert [p["function"] for p in data["probes"]] == ["shardlint_probe_replicated"]
    run = data["probes"][0]["runs"][0]
    assert run["per_device"]["argument"] == 2 * MIB + 4 * MIB
    assert run["per_device"]["alias"] == 2 * MIB  # the donated, sharded weight is reused
    assert run["replicated"] == []  # 4 MiB is under the configured 8 MiB threshold


def test_bad_config_names_the_key(
    shardlint_memory: Callable[..., CliResult], tmp_path: Path
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        "[tool.shardlint.memory]\ndevices = [1]\ntimeout = -3\n"
    )
    result = shardlint_memory()
    assert result.code == 2 and "'timeout'" in result.err and "Traceback" not in result.err


def test_no_probes_found(shardlint_memory: Callable[..., CliResult], tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    result = shardlint_memory()
    assert result.code == 0 and "no probes found" in result.err


def test_list_hardware(shardlint_memory: Callable[..., CliResult]) -> None:
    result = shardlint_memory("--list-hardware")
    assert result.code == 0 and "H100-80GB" in result.out and "TPU-v5p" in result.out


def test_step_runs_on_random_inputs(
    tmp_path: Path, write_probe: Callable[[str, str], Path]
) -> None:
    """The GPU measurement path, run on CPU: inputs built in their shardings, the step run once."""
    write_probe("tiny.py", TINY_PROBE)
    probes = resolve(["tiny.py"], tmp_path)
    (run,) = run_probes(probes, 2, WorkerOptions(cwd=tmp_path, measure="always", timeout=60))
    assert run.error is None and run.facts is not None
    measured = run.facts["measured"]
    assert measured["available"] is False and measured["error"] is None
    assert "not available on the cpu backend" in measured["reason"]


def test_cancel_kills_the_worker(tmp_path: Path, write_probe: Callable[[str, str], Path]) -> None:
    pid_file = tmp_path / "pid"
    write_probe(
        "hang.py",
        f"""
        import os, time, jax

        def shardlint_probe_hang():
            open({str(pid_file)!r}, "w").write(str(os.getpid()))
            time.sleep(600)
    """,
    )
    probes = resolve(["hang.py"], tmp_path)
    cancel = threading.Event()
    stages: list[str] = []

    def progress(probe: object, devices: int, stage: str) -> None:
        stages.append(stage)
        if stage == "call":
            while not pid_file.exists() or not pid_file.read_text():
                time.sleep(0.05)
            cancel.set()

    started = time.monotonic()
    with pytest.raises(Cancelled):
        run_probes(probes, 1, WorkerOptions(cwd=tmp_path, timeout=60), progress, cancel)
    assert time.monotonic() - started < 30 and "call" in stages
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)
