"""`shardlint memory [PROBE...]`: measure per-device memory of probes in worker subprocesses.

The main CLI wires these two functions in: `add_arguments(parser)` and `run(args) -> int`.
Exit codes: 0 every probe ran (and fits, with a capacity), 1 a probe does not fit the capacity,
2 an error (a probe raised, hung, ran out of memory, returned the wrong thing; no jax; bad input).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

from shardlint.errors import ConfigError, ShardlintError, UsageError
from shardlint.fsio import write_atomic
from shardlint.memory.findings import report_findings
from shardlint.memory.hardware import ACCELERATORS, find_accelerator
from shardlint.memory.plan import DEFAULT_COMPILES, DEFAULT_SECONDS, FitRequest, attach, fit_request
from shardlint.memory.probes import Probe, discover, resolve
from shardlint.memory.reasons import explained_report
from shardlint.memory.runner import Cancelled, WorkerOptions, interpreter, run_all
from shardlint.memory.settings import (
    MemorySettings,
    default_memory_limit,
    load_settings,
    parse_devices,
)
from shardlint.memory.targets import default_target, parse_target, with_target
from shardlint.memory.units import format_bytes, parse_size
from shardlint.memory.whatif import Prepared, finish, prepare


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "probes",
        nargs="*",
        metavar="PROBE",
        help="file.py (all its shardlint_probe_* functions), file.py:function, or a "
        "folder; default: configured probes, else every probe in the project",
    )
    parser.add_argument("--devices", metavar="N,N", help="device counts to measure (default 1,2,8)")
    parser.add_argument(
        "--hardware",
        metavar="NAME",
        help="accelerator to check the fit against, "
        "e.g. H100-80GB, A100-40GB, TPU-v5e (see --list-hardware)",
    )
    parser.add_argument(
        "--capacity", metavar="SIZE", help="memory per device to check against, e.g. 24GiB"
    )
    parser.add_argument(
        "--format", choices=("table", "json"), default="table", help="output on stdout"
    )
    parser.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", help="per probe (default 300)")
    parser.add_argument(
        "--memory-limit",
        metavar="SIZE",
        help="worker host memory (RSS) limit (default: half of this machine's memory)",
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        help="interpreter with jax that runs the probes (default: this one)",
    )
    parser.add_argument(
        "--platform",
        choices=("cpu", "native"),
        help="cpu: simulate N devices on the host (default); native: the real accelerators, "
        "and run the step once to measure each device's peak",
    )
    parser.add_argument(
        "--target",
        metavar="tpu-GEN:TOPOLOGY",
        help="compile for a TPU topology's devices with the TPU compiler (libtpu), from any "
        "host: e.g. tpu-v5e:2x2, tpu-v5e:16x16, tpu-v5p:2x2x2, tpu-v6e:4x4; --devices then "
        "picks sub-meshes of its first devices (default: all of them)",
    )
    parser.add_argument(
        "--replicated-threshold",
        metavar="SIZE",
        help="report replicated leaves at least this big per device (default 1MiB)",
    )
    parser.add_argument(
        "--no-measure",
        action="store_true",
        help="on an accelerator, compile only: do not run the step to measure the peak",
    )
    parser.add_argument(
        "--no-whatif",
        action="store_true",
        help="do not compile the probes again with the remedies of the findings they reach "
        "(what each fix saves)",
    )
    parser.add_argument(
        "--fit",
        action="store_true",
        help="when a step does not fit the capacity, search the probe's rules table and mesh "
        "shape for a plan that fits, each candidate an AOT compile (needs --hardware or "
        "--capacity)",
    )
    parser.add_argument(
        "--fit-budget-compiles",
        type=int,
        metavar="N",
        help=f"--fit: at most N compiles per probe and device count (default {DEFAULT_COMPILES})",
    )
    parser.add_argument(
        "--fit-budget-seconds",
        type=float,
        metavar="SECONDS",
        help=f"--fit: stop searching after this long per probe and device count "
        f"(default {DEFAULT_SECONDS:g})",
    )
    parser.add_argument("--jobs", type=int, metavar="N", help="device counts measured in parallel")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--list-hardware", action="store_true", help="print the known accelerators and exit"
    )


def _size_option(value: str | None, option: str) -> int | None:
    if value is None:
        return None
    try:
        return parse_size(value)
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from None


def merge(settings: MemorySettings, args: argparse.Namespace) -> MemorySettings:
    """Command-line options over the [tool.shardlint.memory] table."""
    changes: dict[str, object] = {}
    if args.devices:
        try:
            changes["devices"] = parse_devices(args.devices)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None
    if args.hardware:
        try:
            acc = find_accelerator(args.hardware)
        except KeyError as exc:
            raise UsageError(f"--hardware: {exc.args[0]}") from None
        changes.update(hardware=acc.name, capacity=acc.bytes_per_device)
    if args.capacity:
        changes.update(capacity=_size_option(args.capacity, "--capacity"), hardware=None)
    if args.timeout is not None:
        if args.timeout <= 0:
            raise UsageError("--timeout must be above 0 seconds")
        changes["timeout"] = args.timeout
    if args.memory_limit:
        changes["memory_limit"] = _size_option(args.memory_limit, "--memory-limit")
    if args.replicated_threshold:
        changes["replicated_threshold"] = _size_option(
            args.replicated_threshold, "--replicated-threshold"
        )
    if args.python:
        changes["python"] = args.python
    if args.platform:
        changes["platform"] = args.platform
    merged = dataclasses.replace(settings, **changes)  # type: ignore[arg-type]
    target = args.target or (merged.target if not args.platform else None)
    if target is None:
        return dataclasses.replace(merged, target=None)
    if merged.platform == "native":
        raise UsageError("--target compiles for devices this host does not have; "
                         "--platform native runs on the ones it has: give one of them")
    return with_target(merged, parse_target(target), devices_given=bool(args.devices),
                       capacity_given=bool(args.hardware or args.capacity))


class ProgressLine:
    """One updating line on a terminal; one line per finished probe otherwise (CI logs)."""

    def __init__(self, stream: TextIO, root: Path, enabled: bool) -> None:
        self.stream, self.root, self.enabled = stream, root, enabled
        self.tty = enabled and stream.isatty()
        self.lock = threading.Lock()
        self.started: dict[tuple[str, int], float] = {}

    def __call__(self, probe: Probe | None, devices: int, stage: str) -> None:
        if not self.enabled:
            return
        name = probe.display(self.root) if probe else "worker"
        key = (name, devices)
        with self.lock:
            now = time.monotonic()
            self.started.setdefault(key, now)
            text = f"shardlint memory: {name} @ {devices} device(s): {stage}"
            if stage in ("done", "failed"):
                text += f" ({now - self.started[key]:.1f} s)"
            if self.tty:
                self.stream.write("\r\x1b[2K" + text[: shutil.get_terminal_size().columns - 1])
                if stage in ("done", "failed"):
                    self.stream.write("\n")
            elif stage in ("done", "failed", "starting"):
                self.stream.write(text + "\n")
            self.stream.flush()


def _list_hardware() -> int:
    for acc in ACCELERATORS:
        print(f"{acc.name:14s} {format_bytes(acc.bytes_per_device):>11s} per device  {acc.note}")
    return 0


def _fit(args: argparse.Namespace, settings: MemorySettings, probes: list[Probe]
         ) -> FitRequest | None:
    compiles, seconds = args.fit_budget_compiles, args.fit_budget_seconds
    if not args.fit:
        if compiles is not None or seconds is not None:
            raise UsageError("--fit-budget-compiles and --fit-budget-seconds need --fit")
        return None
    if settings.capacity is None:
        raise UsageError("--fit needs a capacity to fit: --hardware NAME or --capacity SIZE")
    if compiles is not None and compiles < 1:
        raise UsageError("--fit-budget-compiles must be at least 1")
    if seconds is not None and seconds <= 0:
        raise UsageError("--fit-budget-seconds must be above 0")
    return fit_request(probes, settings.capacity,
                       DEFAULT_COMPILES if compiles is None else compiles,
                       DEFAULT_SECONDS if seconds is None else seconds)


def _run(args: argparse.Namespace) -> int:
    if args.list_hardware:
        return _list_hardware()
    cwd = Path.cwd()
    loaded, root = load_settings(cwd)
    settings = merge(loaded, args)
    project = (root or cwd).resolve()
    if args.probes:
        probes = resolve(args.probes, cwd)
    elif settings.probes:
        probes = resolve(settings.probes, project)
    else:
        probes = discover(project)
    if not probes:
        print(
            f"shardlint memory: no probes found under {project} (define a top-level "
            "`def shardlint_probe_...():` or set [tool.shardlint.memory] probes)",
            file=sys.stderr,
        )
        return 0 if not args.probes else 2
    python = (
        interpreter(args.python, cwd) if args.python else interpreter(settings.python, project)
    )
    settings = default_target(settings, python, platform_given=bool(args.platform))
    counts = settings.devices
    # Workers compile with several threads each: half the cores, at most 4 workers at a time.
    jobs = args.jobs or min(len(counts), max(1, (os.cpu_count() or 1) // 2), 4)
    options = WorkerOptions(
        python=python,
        platform=settings.platform,
        timeout=settings.timeout,
        memory_limit=settings.memory_limit or default_memory_limit() // jobs,
        measure="never" if args.no_measure else "auto",
        cwd=project,
        target=parse_target(settings.target).topology if settings.target else None,
    )
    prepared = Prepared()
    if not args.no_whatif:
        options, prepared = prepare(probes, cwd, counts, options)
        if prepared.note:
            print(f"shardlint memory: no what-if compiles: {prepared.note}", file=sys.stderr)
    fit = _fit(args, settings, probes)
    if fit is not None:
        options = dataclasses.replace(options, fit=fit.specs)
    progress = ProgressLine(sys.stderr, cwd, enabled=not args.quiet)
    cancel = threading.Event()
    try:
        runs = run_all(probes, counts, options, progress, jobs, cancel)
    except (Cancelled, KeyboardInterrupt):
        print("\nshardlint memory: cancelled; workers stopped", file=sys.stderr)
        return 2
    finish(runs, prepared)
    report = explained_report(runs, probes, counts, settings, cwd, prepared.plans)
    if fit is not None:
        attach(report, fit)
    findings = report_findings(report)
    if args.format == "json":
        from shardlint.memory.render.render_json import render_json

        sys.stdout.write(render_json(report, findings))
    else:
        from shardlint.memory.render.render_text import render_text

        sys.stdout.write(render_text(report, findings))
    if args.html:
        from shardlint.memory.render.render_html import render_html

        try:
            write_atomic(args.html, render_html(report, findings), newline=None)
        except OSError as exc:
            raise UsageError(f"--html: cannot write {args.html}: {exc}") from None
        if not args.quiet:
            print(f"shardlint memory: wrote {args.html}", file=sys.stderr)
    for _, run in report.errors:
        if not args.quiet and args.format == "json" and run.error is not None:
            print(
                f"shardlint memory: error at {run.devices} device(s): "
                f"{run.error.message.splitlines()[0]}",
                file=sys.stderr,
            )
    return report.exit_code()


def run(args: argparse.Namespace) -> int:
    """Run `shardlint memory` with parsed arguments; returns the exit code (0, 1 or 2)."""
    try:
        return _run(args)
    except ShardlintError as exc:
        print(f"shardlint memory: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("\nshardlint memory: cancelled", file=sys.stderr)
        return 2
