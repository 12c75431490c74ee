"""A probe that starts processes of its own leaves none behind, however its worker ends.

Real worker subprocesses launched by the code users hit (``shardlint memory``, the language
server's ``measure``). Each probe starts a child ``python -c "import time; time.sleep(600)" MARKER``
with a marker unique to the test, then hangs past the time limit, crashes its worker (abort, exit,
segfault), returns normally, or is cancelled; afterwards no live process may have MARKER as an
argument. Processes are found through /proc/*/cmdline, so these tests need Linux.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from .memory_support import REPO, CliResult, needs_jax

pytestmark = [
    pytest.mark.memory,
    pytest.mark.slow,
    needs_jax,
    pytest.mark.skipif(
        not sys.platform.startswith("linux"),
        reason="finds leftover processes through /proc/*/cmdline, which only Linux has",
    ),
]

PROBES = '''
import os, subprocess, sys, time
import jax, jax.numpy as jnp

MARKER = {marker!r}
STARTED = {started!r}
_children = []  # kept, so nothing here waits on or reaps them


def _start_child(**kw):
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)", MARKER],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw,
    )
    _children.append(child)
    with open(STARTED, "a") as handle:
        handle.write(f"{{child.pid}}\\n")


def _step():
    return jax.jit(lambda x: x * 2), (jax.ShapeDtypeStruct((16,), jnp.float32),)


def shardlint_probe_hangs():
    _start_child()
    time.sleep(600)


def shardlint_probe_aborts():
    _start_child()
    os.abort()


def shardlint_probe_exits():
    _start_child()
    os._exit(7)


def shardlint_probe_segfaults():
    import ctypes
    _start_child()
    ctypes.string_at(0)


def shardlint_probe_returns():
    _start_child()
    return _step()


def shardlint_probe_escapes():
    _start_child(start_new_session=True)  # its own session: out of the worker's process group
    return _step()


def shardlint_probe_escapes_and_hangs():
    _start_child(start_new_session=True)
    time.sleep(600)
'''


def alive_with(marker: str) -> list[int]:
    """Live (not zombie) processes that have ``marker`` as one of their arguments."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                args = handle.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3]
        if marker.encode() in args and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


def assert_none_left(marker: str, started: Path) -> None:
    assert started.is_file(), "the probe never started its child process"
    assert started.read_text().split(), "the probe never started its child process"
    deadline = time.monotonic() + 3.0  # SIGKILL is asynchronous; a live child would stay 600 s
    while alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive_with(marker) == [], f"processes started by the probe are still running: {marker}"


@pytest.fixture
def kids(tmp_path: Path, write_probe: Callable[[str, str], Path]) -> Iterator[tuple[str, Path]]:
    """The probe file kids.py; its marker and the file each started child's pid is added to."""
    marker = f"shardlint-leftover-{uuid.uuid4().hex}"
    started = tmp_path / "started.txt"
    write_probe("kids.py", PROBES.format(marker=marker, started=str(started)))
    assert alive_with(marker) == []  # before: none
    yield marker, started
    for pid in alive_with(marker):  # a failed test leaves nothing either
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _error(result: CliResult) -> dict | None:
    (probe,) = result.json()["probes"]
    return probe["runs"][0].get("error")


def test_child_of_a_probe_past_its_time_limit_is_killed(
    shardlint_memory: Callable[..., CliResult], kids: tuple[str, Path]
) -> None:
    marker, started = kids
    result = shardlint_memory(
        "kids.py:shardlint_probe_hangs", "--devices", "1", "--timeout", "1.5", "--format", "json"
    )
    error = _error(result)
    assert result.code == 2 and error is not None and error["kind"] == "timeout", result.out
    assert_none_left(marker, started)


@pytest.mark.parametrize("probe", ["aborts", "exits", "segfaults"])
def test_child_of_a_probe_that_crashes_its_worker_is_killed(
    shardlint_memory: Callable[..., CliResult], kids: tuple[str, Path], probe: str
) -> None:
    marker, started = kids
    result = shardlint_memory(
        f"kids.py:shardlint_probe_{probe}", "--devices", "1", "--timeout", "30", "--format", "json"
    )
    error = _error(result)
    assert result.code == 2 and error is not None and error["kind"] == "crashed", result.out
    assert_none_left(marker, started)


# "returns": a probe that returns with its child still running. "escapes": the child calls
# setsid(), which takes it out of the worker's process group; on Linux it is still found by the
# marker the worker's environment passes down to everything it starts.
@pytest.mark.parametrize("probe", ["returns", "escapes"])
def test_child_of_a_probe_that_returns_is_killed(
    shardlint_memory: Callable[..., CliResult], kids: tuple[str, Path], probe: str
) -> None:
    marker, started = kids
    result = shardlint_memory(
        f"kids.py:shardlint_probe_{probe}", "--devices", "1", "--timeout", "30", "--format", "json"
    )
    assert _error(result) is None, result.out
    assert_none_left(marker, started)


def test_cancelled_measurement_in_the_language_server_kills_the_child(
    tmp_path: Path, kids: tuple[str, Path]
) -> None:
    from shardlint.lsp.memory_run import Plan, measure
    from shardlint.memory.probes import probes_in_file
    from shardlint.memory.runner import Cancelled
    from shardlint.memory.settings import MemorySettings

    marker, started = kids
    (probe,) = [
        p for p in probes_in_file(tmp_path / "kids.py") if p.function == "shardlint_probe_hangs"
    ]
    plan = Plan(MemorySettings(devices=(1,), timeout=60.0), sys.executable, tmp_path)
    cancel = threading.Event()

    def cancel_once_started() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (started.is_file() and started.read_text()):
            time.sleep(0.05)
        cancel.set()

    watcher = threading.Thread(target=cancel_once_started, daemon=True)
    watcher.start()
    t0 = time.monotonic()
    with pytest.raises(Cancelled):
        measure(probe, plan, lambda devices, stage: None, cancel)
    watcher.join()
    assert time.monotonic() - t0 < 50, "cancel did not stop the run"
    assert_none_left(marker, started)


@pytest.mark.e2e
@pytest.mark.parametrize("probe", ["hangs", "escapes_and_hangs"])
def test_child_is_killed_when_shardlint_itself_is_killed(
    tmp_path: Path, kids: tuple[str, Path], probe: str
) -> None:
    # No parent left to clean up: the worker notices it was orphaned and kills its group (and,
    # on Linux, what left the group).
    marker, started = kids
    path = os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    cli = subprocess.Popen(
        [sys.executable, "-m", "shardlint", "memory", f"kids.py:shardlint_probe_{probe}",
         "--devices", "1", "--timeout", "60"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (started.is_file() and started.read_text()):
            assert cli.poll() is None, "shardlint memory ended before the probe started its child"
            time.sleep(0.05)
    finally:
        cli.kill()
        cli.wait()
    deadline = time.monotonic() + 5.0  # the worker looks for its parent once a second
    while alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert_none_left(marker, started)
