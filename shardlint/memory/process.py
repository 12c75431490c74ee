"""Worker processes: their environment, their memory, stopping them.

The device count must be fixed in the environment before JAX starts in the child. Memory is
watched from outside (resident set size) rather than capped with RLIMIT_AS: virtual size overstates
use (a small jax process here: 1.7 GB virtual, 0.25 GB resident), and GPU runtimes reserve address
space far beyond what they touch, so a cap tight enough to matter would break them.
"""

from __future__ import annotations

import os
import signal
import subprocess

HAS_PROC = os.path.isdir("/proc/self")


def worker_env(devices: int, platform: str, base: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    flags = [
        f
        for f in env.get("XLA_FLAGS", "").split()
        if not f.startswith("--xla_force_host_platform_device_count")
    ]
    if platform == "cpu":
        flags.append(f"--xla_force_host_platform_device_count={devices}")
        env["JAX_PLATFORMS"] = "cpu"
        env["JAX_NUM_CPU_DEVICES"] = str(devices)  # newer jax lets this override XLA_FLAGS
    else:
        # Allocate as needed: the measured peak is then what the step needs, and a GPU shared
        # with a running job is not grabbed at 75%.
        env.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        visible = [v for v in env.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        env["CUDA_VISIBLE_DEVICES"] = ",".join(
            visible[:devices] if visible else map(str, range(devices))
        )
    env["XLA_FLAGS"] = " ".join(flags)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def rss(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        pass
    try:  # macOS and other systems without /proc
        out = subprocess.run(
            ["ps", "-o", "rss=", "-p", str(pid)],
            check=False,
            capture_output=True,
            text=True,
            timeout=2,
        )
        return int(out.stdout.strip()) * 1024 if out.stdout.strip() else None
    except (OSError, ValueError, subprocess.SubprocessError):
        return None


def kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the worker's own session: it and anything it started
    except (ProcessLookupError, PermissionError, AttributeError):
        proc.kill()
    proc.wait()


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the system may have run out of memory)" if -code == signal.SIGKILL else ""
        return f"the worker was killed by {name}{hint}"
    return f"the worker exited with code {code}"
