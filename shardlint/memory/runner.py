"""Run probes in worker subprocesses: device count, time limit, memory limit, cancellation.

One worker process per device count (the count is fixed before JAX starts), running that count's
probes one after another to pay the jax import once. A probe that hangs or exhausts memory gets
its worker killed (the whole process group) and the remaining probes continue in a fresh worker.
However a worker ends, its process group is killed once it is done with, so nothing a probe
started outlives it (see `process.stop` for what can still escape).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shardlint.errors import UsageError
from shardlint.memory.probes import Probe
from shardlint.memory.units import format_bytes
from shardlint.memory.worker import WORKER
from shardlint.memory.worker.process import (
    HAS_PROC,
    MARKER_VAR,
    describe_exit,
    exited,
    group_options,
    rss,
    stop,
    worker_env,
)

_POLL_S = 0.05
# Set by jax's TPU start-up in the process that imported it (seen: TPU_LIBRARY_PATH,
# TPU_SKIP_MDS_QUERY; on a TPU VM also the host's accelerator type and workers).
TPU_DISCOVERY_VARS = ("TPU_LIBRARY_PATH", "TPU_SKIP_MDS_QUERY", "TPU_ACCELERATOR_TYPE",
                      "TPU_WORKER_HOSTNAMES", "TPU_WORKER_ID", "TPU_HOST_BOUNDS",
                      "TPU_CHIPS_PER_HOST_BOUNDS", "TPU_PROCESS_BOUNDS", "TPU_VISIBLE_CHIPS")
_LOG_TAIL = 4000
_START_TIMEOUT = 120.0  # importing jax can be slow on a cold disk; a probe's own limit starts after

# on_progress(probe or None while starting, device count, stage)
Progress = Callable[[Probe | None, int, str], None]


@dataclass(frozen=True)
class WorkerOptions:
    python: str = sys.executable
    platform: str = "cpu"  # "cpu": simulate N host devices; "native": the real accelerators
    # libtpu's topology name (`v5e:2x2`): compile for its first N devices from this host
    # (memory/targets.py); the worker's own backend is then one CPU device.
    target: str | None = None
    timeout: float = 300.0  # seconds per probe (and for the worker to import jax)
    memory_limit: int | None = None  # bytes of worker RSS
    measure: str = "auto"  # "auto": run the step on non-CPU backends; "never"; "always"
    cwd: Path = field(default_factory=Path.cwd)
    # Probe key -> what-if remedies to compile after its baseline (whatif.py), in order.
    whatif: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # "probe key@devices" -> the baseline fingerprint of cached what-ifs: skipped when it holds.
    whatif_cached: dict[str, str] = field(default_factory=dict)
    # Probe key -> what `--fit` searches for it (memory/plan): the worker's planner runs after
    # its baseline when the step does not fit.
    fit: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class ProbeError:
    kind: str  # raised, bad-return, bad-probe, printed, timeout, memory-limit, crashed,
    #            jax-missing, interpreter, backend, device-count, protocol, cancelled
    message: str
    stage: str | None = None
    traceback: str | None = None
    log: str | None = None  # tail of the worker's own output, for crashes

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class ProbeRun:
    """One probe at one device count: the worker's figures, or why there are none."""

    probe: Probe
    devices: int
    facts: dict[str, Any] | None = None
    error: ProbeError | None = None
    printed: str = ""
    wall_s: float = 0.0
    environment: dict[str, Any] = field(default_factory=dict)
    worker_max_rss: int | None = None
    whatifs: list[dict[str, Any]] = field(default_factory=list)  # one per remedy, in order
    fit: dict[str, Any] | None = None  # the `--fit` search's outcome (memory/plan/search.py)


class Cancelled(Exception):
    pass


class _Session:
    """One worker process over a list of probes; stops early on a kill or a requested restart."""

    def __init__(
        self, probes: list[Probe], devices: int, options: WorkerOptions, folder: Path
    ) -> None:
        self.probes, self.devices, self.options = probes, devices, options
        self.events_path = folder / "events.jsonl"
        self.log_path = folder / "worker.log"
        request = folder / "request.json"
        request.write_text(
            json.dumps(
                {
                    "device_count": devices,
                    "measure": options.measure,
                    "target": options.target,
                    "probes": [
                        {"key": p.key, "path": str(p.path), "function": p.function,
                         "whatif": options.whatif.get(p.key, []),
                         "whatif_cached": options.whatif_cached.get(f"{p.key}@{devices}"),
                         **({"fit": options.fit[p.key]} if p.key in options.fit else {})}
                        for p in probes
                    ],
                }
            ),
            encoding="utf-8",
        )
        self.events_path.write_text("", encoding="utf-8")
        self.results: dict[str, ProbeRun] = {}
        self.environment: dict[str, Any] = {}
        self.fatal: dict[str, Any] | None = None
        self.end: dict[str, Any] | None = None
        self.current: Probe | None = None
        self.current_started = 0.0
        self.current_stage = "start"
        self.peak_rss = 0
        self._offset = 0
        # Inherited by everything the worker starts: how `stop` finds those that left its group.
        self.marker = uuid.uuid4().hex
        env = worker_env(1 if options.target else devices, options.platform)
        if options.target:
            # Compile-only: libtpu's lockfile (one process per host holds the chips) guards
            # nothing here, and would keep parallel workers and other compiles out.
            env["ALLOW_MULTIPLE_LIBTPU_LOAD"] = "1"
            # What jax wrote into this process's environment when it looked for a TPU here
            # (TPU_LIBRARY_PATH names *this* interpreter's libtpu): the worker must load the
            # libtpu of its own interpreter, the one its jax pins and the report names.
            for name in TPU_DISCOVERY_VARS:
                env.pop(name, None)
        env[MARKER_VAR] = self.marker
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                [options.python, str(WORKER), str(request), str(self.events_path)],
                cwd=options.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                **group_options(),  # a group of its own; what escapes it: process module doc
            )

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-_LOG_TAIL:].strip()
        except OSError:
            return ""

    def _read_events(self, progress: Progress | None) -> None:
        with self.events_path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written is read next time
        self._offset += len(complete)
        by_key = {p.key: p for p in self.probes}
        for line in complete.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = event.get("event")
            probe = by_key.get(event.get("probe", ""))
            if kind == "hello":
                self.environment = {k: v for k, v in event.items() if k != "event"}
            elif kind == "fatal":
                self.fatal = event
            elif kind == "end":
                self.end = event
            elif kind == "begin" and probe:
                self.current, self.current_started, self.current_stage = (
                    probe,
                    time.monotonic(),
                    "import",
                )
            elif kind == "stage" and probe:
                self.current_stage = event.get("stage", "")
                if progress:
                    progress(probe, self.devices, self.current_stage)
            elif kind == "whatif" and probe and probe.key in self.results:
                self.results[probe.key].whatifs.append(
                    {k: v for k, v in event.items() if k not in ("event", "probe")})
                if progress:
                    progress(probe, self.devices, f"what-if {event.get('id', '')}")
            elif kind == "fit" and probe and probe.key in self.results:
                self.results[probe.key].fit = {k: v for k, v in event.items()
                                               if k not in ("event", "probe")}
            elif kind == "result" and probe:
                run = ProbeRun(
                    probe,
                    self.devices,
                    printed=event.get("printed", ""),
                    environment=self.environment,
                )
                run.wall_s = round(time.monotonic() - self.current_started, 3)
                if event.get("ok"):
                    run.facts = event.get("facts")
                else:
                    err = event.get("error", {})
                    run.error = ProbeError(
                        kind=err.get("kind", "raised"),
                        message=err.get("message", "the probe failed"),
                        stage=err.get("stage"),
                        traceback=err.get("traceback"),
                    )
                self.results[probe.key] = run
                self.current = None
                if progress:
                    progress(probe, self.devices, "done" if run.facts else "failed")

    def wait(self, progress: Progress | None, cancel: threading.Event | None) -> ProbeError | None:
        """Run to the end; the error is for the probe in flight when the worker was stopped.

        However it returns or raises, the worker's whole process group is killed and the worker
        reaped: after a limit or a cancel, and also after a crash or a normal end, which may
        leave running what the probe started."""
        try:
            return self._watch(progress, cancel)
        finally:
            stop(self.proc, self.marker)

    def _watch(
        self, progress: Progress | None, cancel: threading.Event | None
    ) -> ProbeError | None:
        started = time.monotonic()
        limit = self.options.memory_limit
        if progress:
            progress(None, self.devices, "starting")
        while True:
            self._read_events(progress)
            if exited(self.proc):  # not reaped yet: `stop` still kills its group safely
                self._read_events(progress)
                return None
            now = time.monotonic()
            if cancel is not None and cancel.is_set():
                return ProbeError("cancelled", "cancelled")
            if self.current is not None and now - self.current_started > self.options.timeout:
                return ProbeError(
                    "timeout",
                    f"the probe did not finish within {self.options.timeout:g} s "
                    f"(stage: {self.current_stage}); raise --timeout if the step is just big",
                    stage=self.current_stage,
                )
            start_limit = max(self.options.timeout, _START_TIMEOUT)
            if self.current is None and not self.environment and now - started > start_limit:
                return ProbeError(
                    "timeout",
                    f"the worker did not import jax within {start_limit:g} s",
                    log=self.log_tail() or None,
                )
            used = rss(self.proc.pid) if limit or HAS_PROC else None
            self.peak_rss = max(self.peak_rss, used or 0)
            if limit and used is not None and used > limit:
                return ProbeError(
                    "memory-limit",
                    f"the worker used {format_bytes(used)} of host memory, over the limit of "
                    f"{format_bytes(limit)} (stage: {self.current_stage}); raise --memory-limit, "
                    "or build inputs with jax.ShapeDtypeStruct / jax.eval_shape so nothing is "
                    "allocated",
                    stage=self.current_stage,
                )
            time.sleep(_POLL_S)


def _fatal_error(fatal: dict[str, Any], python: str) -> ProbeError:
    kind = fatal.get("kind", "backend")
    if kind == "jax-missing":
        shown = fatal.get("python") or python
        version = fatal.get("python_version", "?")
        return ProbeError(
            "jax-missing",
            f"jax cannot be imported by {shown} (Python {version}): {fatal.get('message')}\n"
            f"install the memory extra in that interpreter: "
            f"{shown} -m pip install 'shardlint[memory]' "
            "(or point --python / [tool.shardlint.memory] python at the interpreter that has jax)",
        )
    return ProbeError(kind, str(fatal.get("message", "the worker could not start")))


def run_probes(
    probes: Sequence[Probe],
    devices: int,
    options: WorkerOptions,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> list[ProbeRun]:
    """Every probe at one device count; never raises for a probe's failure (see ProbeRun.error)."""
    runs: dict[str, ProbeRun] = {}
    from_worker: set[str] = set()
    remaining = []
    for probe in probes:
        if probe.takes_arguments:
            runs[probe.key] = ProbeRun(
                probe,
                devices,
                error=ProbeError(
                    "bad-probe", f"{probe.function} takes arguments; a probe is called with none"
                ),
            )
        else:
            remaining.append(probe)
    while remaining:
        with tempfile.TemporaryDirectory(prefix="shardlint-memory-") as folder:
            try:
                session = _Session(remaining, devices, options, Path(folder))
            except OSError as exc:
                error = ProbeError(
                    "interpreter", f"cannot run the interpreter {options.python}: {exc}"
                )
                runs.update({p.key: ProbeRun(p, devices, error=error) for p in remaining})
                break
            stopped = session.wait(progress, cancel)
            code = session.proc.returncode
            runs.update(session.results)
            from_worker.update(session.results)
            max_rss = (session.end or {}).get("max_rss") or session.peak_rss or None
            for run in session.results.values():
                run.worker_max_rss = max_rss
            left = [p for p in remaining if p.key not in session.results]
            if stopped is not None and stopped.kind == "cancelled":
                raise Cancelled()
            if session.fatal is not None:
                error = _fatal_error(session.fatal, options.python)
                runs.update(
                    {
                        p.key: ProbeRun(p, devices, error=error, environment=session.environment)
                        for p in left
                    }
                )
                break
            if not session.environment or (stopped is None and session.current is None and left):
                # Nothing ran (a broken interpreter, a worker that never started) or the worker
                # stopped between probes: a worker problem, so no point in retrying each probe.
                if stopped is not None:
                    error = stopped
                elif not session.environment:
                    error = ProbeError(
                        "interpreter",
                        f"{describe_exit(code)} before importing jax with {options.python}",
                        log=session.log_tail() or None,
                    )
                else:
                    error = ProbeError(
                        "protocol",
                        f"{describe_exit(code)} between probes",
                        log=session.log_tail() or None,
                    )
                if session.end is not None and session.end.get("reason") == "fresh-process":
                    remaining = left
                    continue
                runs.update(
                    {
                        p.key: ProbeRun(p, devices, error=error, environment=session.environment)
                        for p in left
                    }
                )
                break
            in_flight = session.current
            if in_flight is not None:
                error = stopped or ProbeError(
                    "crashed",
                    f"{describe_exit(code)} while the probe was at stage '{session.current_stage}'",
                    stage=session.current_stage,
                    log=session.log_tail() or None,
                )
                elapsed = time.monotonic() - session.current_started
                runs[in_flight.key] = ProbeRun(
                    in_flight,
                    devices,
                    error=error,
                    environment=session.environment,
                    wall_s=round(elapsed, 3),
                )
                left = [p for p in left if p.key != in_flight.key]
            remaining = left
    if progress:  # the worker reported its own results; these failures were decided here
        for key, run in runs.items():
            if key not in from_worker:
                progress(run.probe, devices, "failed")
    return [runs[p.key] for p in probes if p.key in runs]


def interpreter(python: str | None, base: Path) -> str:
    """The interpreter a probe runs in: ``python`` (a path, relative to ``base``, or a name on
    PATH), else this one."""
    if not python:
        return sys.executable
    if os.sep in python or (os.altsep and os.altsep in python):
        path = Path(python) if Path(python).is_absolute() else base / python
        if not path.exists():
            raise UsageError(f"--python: no interpreter at {path}")
        return str(path)
    found = shutil.which(python)
    if found is None:
        raise UsageError(f"--python: {python} is not on PATH")
    return found


def run_all(
    probes: list[Probe],
    counts: tuple[int, ...],
    options: WorkerOptions,
    progress: Progress,
    jobs: int,
    cancel: threading.Event,
) -> list[ProbeRun]:
    """Each device count in its own worker; `jobs` of them at a time."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run_probes, probes, n, options, progress, cancel) for n in counts]
        try:
            while not all(f.done() for f in futures):
                time.sleep(0.05)
        except KeyboardInterrupt:
            cancel.set()
            raise
        runs: list[ProbeRun] = []
        for future in futures:
            runs.extend(future.result())
    return runs
