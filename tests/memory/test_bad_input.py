"""Every way a probe can go wrong gives a clear message, exit code 2, and the other probes run.

Real worker subprocesses with a real jax: a probe that raises, returns the wrong thing, prints to
stdout (an error too: stdout carries the report), hangs, exhausts memory; an interpreter without
jax.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from .memory_support import TINY_PROBE, CliResult, needs_jax

pytestmark = [pytest.mark.memory, needs_jax]

MANY = """
import os, sys
import jax, jax.numpy as jnp

def shardlint_probe_raises():
    def build_layer(name):
        raise ValueError(f"no such layer: {name!r}")
    build_layer("decoder")

def shardlint_probe_returns_int():
    return 42

def shardlint_probe_not_jitted():
    return (lambda x: x * 2), (jax.ShapeDtypeStruct((2,), jnp.float32),)

def shardlint_probe_args_not_tuple():
    return jax.jit(lambda x: x), jax.ShapeDtypeStruct((2,), jnp.float32)

def shardlint_probe_trace_error():
    a = jax.ShapeDtypeStruct((2, 3), jnp.float32)
    b = jax.ShapeDtypeStruct((4, 5), jnp.float32)
    return jax.jit(lambda x, y: x @ y), (a, b)

def shardlint_probe_prints():
    print("loading config from somewhere")
    os.write(1, b"raw bytes on fd 1\\n")
    return jax.jit(lambda x: x * 2), (jax.ShapeDtypeStruct((256,), jnp.float32),)

def shardlint_probe_traced():
    return jax.jit(lambda x: x + 1).trace(jax.ShapeDtypeStruct((1024,), jnp.float32))

def shardlint_probe_wrapped():
    return jax.jit(lambda: jnp.zeros((2048,), jnp.float32))

def shardlint_probe_takes_args(batch_size):
    return None
"""


def _run(result: CliResult) -> dict[str, dict]:
    """probe function -> its single run, from --format json."""
    return {p["function"]: p["runs"][0] for p in result.json()["probes"]}


def test_bad_probes_are_reported_and_good_ones_still_measured(
    shardlint_memory: Callable[..., CliResult], write_probe: Callable[[str, str], Path]
) -> None:
    write_probe("many.py", MANY)
    write_probe("pkg/__init__.py", "")
    write_probe("pkg/helpers.py", "SIZE = 4096\n")
    write_probe(
        "pkg/probes.py",
        """
        import jax, jax.numpy as jnp
        from .helpers import SIZE

        def shardlint_probe_in_package():
            return jax.jit(lambda x: x.sum()), (jax.ShapeDtypeStruct((SIZE,), jnp.float32),)
    """,
    )
    result = shardlint_memory("many.py", "pkg/probes.py", "--devices", "1", "--format", "json")
    assert result.code == 2
    runs = _run(result)  # stdout is valid JSON although probes printed

    raised = runs["shardlint_probe_raises"]["error"]
    assert raised["kind"] == "raised" and raised["stage"] == "call"
    assert raised["message"] == "ValueError: no such layer: 'decoder'"
    assert 'File "many.py", line 7, in build_layer' in raised["traceback"]
    assert "shardlint/memory" not in raised["traceback"]  # the user's frames, never ours

    assert runs["shardlint_probe_returns_int"]["error"]["kind"] == "bad-return"
    assert "returned int 42" in runs["shardlint_probe_returns_int"]["error"]["message"]
    assert "is not jitted" in runs["shardlint_probe_not_jitted"]["error"]["message"]
    assert "must be a tuple" in runs["shardlint_probe_args_not_tuple"]["error"]["message"]
    trace_error = runs["shardlint_probe_trace_error"]["error"]
    assert trace_error["kind"] == "raised" and trace_error["stage"] == "trace"
    assert "TypeError" in trace_error["message"]
    assert "takes arguments" in runs["shardlint_probe_takes_args"]["error"]["message"]

    printed = runs["shardlint_probe_prints"]
    assert not printed["ok"] and printed["printed"] == "loading config from somewhere\n"
    error = printed["error"]
    print_line = MANY.splitlines().index('    print("loading config from somewhere")') + 1
    assert error["kind"] == "printed" and error["stage"] == "call"
    assert error["message"].startswith(
        f"shardlint_probe_prints printed to stdout at many.py:{print_line} "
        "in shardlint_probe_prints; probes must not print to stdout"
    )
    assert "write to sys.stderr or use logging" in error["message"]
    assert "  | loading config from somewhere" in error["message"]
    assert f'File "many.py", line {print_line}, in shardlint_probe_prints' in error["traceback"]
    assert "shardlint/memory" not in error["traceback"]
    assert runs["shardlint_probe_traced"]["per_device"]["output"] == 4096
    assert runs["shardlint_probe_wrapped"]["per_device"]["output"] == 8192
    assert runs["shardlint_probe_in_package"]["per_device"]["argument"] == 16384
    assert "raw bytes on fd 1" not in result.out


def test_printing_probe_fails_alone_and_says_where(
    shardlint_memory: Callable[..., CliResult], write_probe: Callable[[str, str], Path]
) -> None:
    write_probe(
        "chatty.py",
        """
        import logging, sys
        import jax, jax.numpy as jnp

        print("chatty module imported")

        def shardlint_probe_at_import():
            return jax.jit(lambda x: x + 1), (jax.ShapeDtypeStruct((8,), jnp.float32),)

        def _report(n):
            for i in range(n):
                print(f"step {i}")

        def shardlint_probe_in_helper():
            _report(12)
            return jax.jit(lambda x: x + 1), (jax.ShapeDtypeStruct((8,), jnp.float32),)

        def shardlint_probe_quiet():
            print("to stderr is fine", file=sys.stderr)
            logging.getLogger("probe").warning("so is logging")
            return jax.jit(lambda x: x + 1), (jax.ShapeDtypeStruct((8,), jnp.float32),)
    """,
    )
    result = shardlint_memory("chatty.py", "--devices", "1")
    assert result.code == 2
    # The module-level print happens once, at import, inside the first probe.
    assert (
        "error at 1 device (printed): shardlint_probe_at_import printed to stdout at "
        "chatty.py:5 in <module>; probes must not print to stdout" in result.out
    )
    assert (
        "error at 1 device (printed): shardlint_probe_in_helper printed to stdout at "
        "chatty.py:12 in _report" in result.out
    )
    assert "| step 4" in result.out and "| step 5" not in result.out
    assert "(7 more lines)" in result.out
    assert 'File "chatty.py", line 15, in shardlint_probe_in_helper' in result.out
    quiet = result.out.split("chatty.py:shardlint_probe_quiet", 1)[1]
    assert "error" not in quiet.split("findings")[0] and "arguments" in quiet


def test_probe_error_table_shows_user_traceback(
    shardlint_memory: Callable[..., CliResult], write_probe: Callable[[str, str], Path]
) -> None:
    write_probe("many.py", MANY)
    result = shardlint_memory("many.py:shardlint_probe_raises", "--devices", "1")
    assert result.code == 2
    assert "error at 1 device (raised): ValueError: no such layer: 'decoder'" in result.out
    assert 'raise ValueError(f"no such layer: {name!r}")' in result.out
    assert "Traceback" in result.out and "shardlint/memory" not in result.out + result.err


@pytest.mark.slow
def test_hanging_probe_is_killed_and_the_next_probe_runs(
    shardlint_memory: Callable[..., CliResult],
    write_probe: Callable[[str, str], Path],
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    write_probe(
        "hang.py",
        f"""
        import os, time
        import jax, jax.numpy as jnp

        def shardlint_probe_hangs():
            open({str(pid_file)!r}, "w").write(str(os.getpid()))
            time.sleep(600)

        def shardlint_probe_after():
            return jax.jit(lambda x: x), (jax.ShapeDtypeStruct((16,), jnp.float32),)
    """,
    )
    result = shardlint_memory("hang.py", "--devices", "1", "--timeout", "2", "--format", "json")
    assert result.code == 2
    runs = _run(result)
    error = runs["shardlint_probe_hangs"]["error"]
    assert error["kind"] == "timeout" and error["stage"] == "call"
    assert "did not finish within 2 s" in error["message"]
    assert runs["shardlint_probe_after"]["ok"]
    _assert_gone(int(pid_file.read_text()))


def _assert_gone(pid: int) -> None:
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    pytest.fail(f"worker {pid} is still running")


@pytest.mark.slow
def test_probe_exhausting_memory_is_killed(
    shardlint_memory: Callable[..., CliResult], write_probe: Callable[[str, str], Path]
) -> None:
    # 200 MB touched per step, 8 GB at most if the limit failed; then it would hit the timeout.
    write_probe(
        "hog.py",
        """
        import time
        import numpy as np

        def shardlint_probe_hog():
            hog = [np.ones(25_000_000) for _ in range(40)]
            time.sleep(60)
            return hog
    """,
    )
    result = shardlint_memory(
        "hog.py", "--devices", "1", "--memory-limit", "1GiB", "--timeout", "30"
    )
    assert result.code == 2
    assert "error at 1 device (memory-limit)" in result.out
    assert "over the limit of 1.00 GiB" in result.out


def _python_without_jax(tmp_path: Path) -> Path:
    base = shutil.which("python3.11") or sys.executable
    venv = tmp_path / "nojax"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    if (
        subprocess.run(
            [str(python), "-c", "import jax"], check=False, capture_output=True
        ).returncode
        == 0
    ):
        pytest.skip(f"{base} can import jax even in a fresh venv")
    return python


def test_interpreter_without_jax(
    shardlint_memory: Callable[..., CliResult],
    write_probe: Callable[[str, str], Path],
    tmp_path: Path,
) -> None:
    python = _python_without_jax(tmp_path)
    write_probe("tiny.py", TINY_PROBE)
    result = shardlint_memory("tiny.py", "--devices", "1", "--python", str(python))
    assert result.code == 2
    assert "(jax-missing): jax cannot be imported by" in result.out
    assert str(python) in result.out
    assert "-m pip install 'shardlint[memory]'" in result.out


def test_missing_interpreter_is_a_usage_error(
    shardlint_memory: Callable[..., CliResult], write_probe: Callable[[str, str], Path]
) -> None:
    write_probe("tiny.py", TINY_PROBE)
    result = shardlint_memory("tiny.py", "--python", "./no/such/python")
    assert result.code == 2 and "no interpreter at" in result.err


def test_unknown_probe_spec_is_a_usage_error(shardlint_memory: Callable[..., CliResult]) -> None:
    result = shardlint_memory("nowhere.py")
    assert result.code == 2 and "nowhere.py: no such file or folder" in result.err
