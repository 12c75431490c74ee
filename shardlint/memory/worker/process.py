"""Worker processes: their environment, their memory, stopping them.

The device count must be fixed in the environment before JAX starts in the child. Memory is
watched from outside (resident set size) rather than capped with RLIMIT_AS: virtual size overstates
use (a small jax process here: 1.7 GB virtual, 0.25 GB resident), and GPU runtimes reserve address
space far beyond what they touch, so a cap tight enough to matter would break them.

Stopping: a probe may start processes of its own (a data loader, a server, a stray `Popen`), and
they must not outlive the measurement. On POSIX the worker is the leader of a session and process
group of its own (`start_new_session`), and `stop` kills that whole group (SIGKILL) whenever the
worker is done with, however it ended: a time or memory limit, a cancel, a crash, or a normal end
that left a background process running. A process that calls setsid()/setpgid() itself leaves the
group and escapes that kill; on Linux `sweep` also finds those through a marker in the environment
every descendant inherits (`MARKER_VAR`), so only one that both leaves the group and drops or
replaces its environment (`env -i`, `Popen(env=...)`) outlives the worker, and on other POSIX
systems any that leaves the group does. This module imports only the standard library: the worker
loads it by path.

Windows has no process groups to kill: the worker gets CREATE_NEW_PROCESS_GROUP and `stop` kills
the worker alone (TerminateProcess); what it started may outlive it there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

HAS_PROC = os.path.isdir("/proc/self")
POSIX = os.name == "posix"
# Set in the worker's environment to a value unique to the worker; inherited by what it starts.
MARKER_VAR = "SHARDLINT_MEMORY_WORKER"


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


def group_options() -> dict[str, Any]:
    """Popen keywords that give the worker a process group of its own."""
    if POSIX:
        return {"start_new_session": True}  # setsid(): session and group id = the worker's pid
    return {"creationflags": getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0)}


def exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the worker has ended, leaving it unreaped where the system allows (a zombie):
    until it is reaped its pid, which is also its group's id, cannot be given to another process,
    so `stop` can kill the group without a chance of hitting a stranger's."""
    if proc.returncode is not None:
        return True
    if POSIX and hasattr(os, "waitid"):
        try:
            info = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except OSError:  # ChildProcessError: reaped elsewhere; Popen sorts out its return code
            return proc.poll() is not None
        return info is not None
    return proc.poll() is not None


def stop(proc: subprocess.Popen[bytes], marker: str | None = None) -> None:
    """Kill the worker and everything it started, then reap it. For a worker that has already
    ended as well: what its probe started is still running otherwise. Never raises for a
    process that is already gone."""
    killed = False
    if POSIX and proc.returncode is None:  # after reaping, the pid (the group id) may be reused
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the worker's own group: it and what it started
            killed = True
        except ProcessLookupError:  # nothing left in the group
            killed = True
        except PermissionError:
            pass
    if not killed:
        try:
            proc.kill()  # Windows (TerminateProcess), or a group we may not signal
        except OSError:
            pass
    proc.wait()
    if marker:
        sweep(marker)


def sweep(marker: str, skip: int | None = None) -> int:
    """Linux: SIGKILL every process of ours whose environment has ``MARKER_VAR=marker`` (what
    left the worker's group with setsid() and so escaped the group kill); how many were found.
    A few passes, for processes that fork while being looked for."""
    if not (HAS_PROC and sys.platform.startswith("linux")):
        return 0
    wanted = f"{MARKER_VAR}={marker}".encode()
    killed: set[int] = set()
    for _ in range(3):
        before = len(killed)
        try:
            entries = os.listdir("/proc")
        except OSError:
            break
        for entry in entries:
            if not entry.isdigit() or int(entry) in (os.getpid(), skip):
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as handle:
                    environ = handle.read()  # empty for a zombie: nothing to kill there
            except OSError:  # gone, or another user's
                continue
            if wanted in environ.split(b"\0"):
                try:
                    os.kill(int(entry), signal.SIGKILL)
                    killed.add(int(entry))
                except OSError:
                    pass
        if len(killed) == before:
            break
    return len(killed)


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the system may have run out of memory)" if -code == signal.SIGKILL else ""
        return f"the worker was killed by {name}{hint}"
    return f"the worker exited with code {code}"
