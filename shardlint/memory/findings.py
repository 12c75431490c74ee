"""Measured findings (SHL900-SHL905): what the memory report proves, as lint-style records.

`shardlint check --memory` adds these to the static findings; `shardlint memory` prints them under
each probe. Each is a plain dict so the engine needs no import from this package to use it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from shardlint.memory.probes import Probe, discover, relative_path, resolve
from shardlint.memory.reasons import distinct, explained_report
from shardlint.memory.report import MemoryReport, ProbeReport, RunReport
from shardlint.memory.settings import MemorySettings, default_memory_limit, load_settings
from shardlint.memory.units import format_bytes

CODES = {
    "SHL900": ("probe-failed", "error"),
    "SHL901": ("replicated-leaf", "warning"),
    "SHL902": ("single-device-step", "warning"),
    "SHL903": ("donation-not-reused", "warning"),
    "SHL904": ("does-not-fit", "error"),
    "SHL905": ("memory-does-not-scale", "warning"),
}


def _finding(
    code: str,
    probe: Probe,
    root: Path | None,
    devices: int | None,
    message: str,
    leaves: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """`leaves`: the measured leaves the finding is about; their static reasons become related
    locations and a "likely cause" clause of the message."""
    name, severity = CODES[code]
    causes = distinct(leaves or [])
    if causes:
        where = ", ".join(f"{r['code']} at {r['path']}:{r['line']}" for r in causes)
        message += f" (likely cause, from the static analysis: {where})"
    return {
        "code": code,
        "name": name,
        "severity": severity,
        "path": relative_path(probe.path, root),
        "line": probe.line,
        "column": probe.column,
        "end_line": probe.end_line,
        "message": message,
        "probe": probe.function,
        "devices": devices,
        "source": "memory",
        "related": [
            {
                "path": r["path"],
                "line": r["line"],
                "column": r["column"],
                "message": f"{r['link']}: {r['code']} {r['name']}: {r['message']}",
            }
            for r in causes
        ],
    }


def _leaf_text(leaf: dict[str, Any]) -> str:
    shape = ",".join(str(d) for d in leaf["shape"])
    return f"{leaf['path']} {leaf['dtype']}[{shape}] {format_bytes(leaf['per_device'])}/device"


def _run_findings(report: MemoryReport, probe: ProbeReport, run: RunReport) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    p, root, n = probe.probe, report.root, run.devices
    if run.error is not None and run.error.kind == "does-not-fit":
        return [_finding("SHL904", p, root, n, f"at {n} device(s) {run.error.message}")]
    if run.error is not None:
        return found  # SHL900 is built per probe, merging device counts
    figures = run.figures
    replicated = run.replicated(report.replicated_threshold)
    if replicated:
        total = sum(leaf["per_device"] for leaf in replicated)
        found.append(
            _finding(
                "SHL901",
                p,
                root,
                n,
                f"{len(replicated)} leaves ({format_bytes(total)} per device) are replicated "
                f"on all {n} devices, "
                f"largest {_leaf_text(replicated[0])}: give them a sharding (logical axis rules, "
                "out_shardings from nn.get_partition_spec) so each device holds 1/N",
                replicated,
            )
        )
    if n > 1 and run.devices_used == 1:
        found.append(
            _finding(
                "SHL902",
                p,
                root,
                n,
                f"the step is compiled for 1 of {n} devices: everything sits on one device; "
                "pass inputs "
                "with NamedShardings or jit with in_shardings/out_shardings",
                run.unsharded(report.replicated_threshold),
            )
        )
    if figures is not None and run.donated_unused >= report.replicated_threshold:
        warned = f" (compiler: {run.donation_warnings[0]})" if run.donation_warnings else ""
        found.append(
            _finding(
                "SHL903",
                p,
                root,
                n,
                f"{format_bytes(run.donated_unused)} of {format_bytes(run.donated)} donated per "
                f"device is not reused by any output{warned}: outputs must match the donated "
                "inputs' shape, dtype and sharding",
            )
        )
    if report.fits(run) is False and figures is not None:
        found.append(
            _finding(
                "SHL904",
                p,
                root,
                n,
                f"needs {format_bytes(max(figures.estimate, run.measured_peak or 0))} per device "
                f"at {n} device(s), more than {report.hardware or 'the capacity'} "
                f"({format_bytes(report.capacity)})",
            )
        )
    return found


def report_findings(report: MemoryReport) -> list[dict[str, Any]]:
    """Every finding the report supports, in probe then device-count order."""
    found: list[dict[str, Any]] = []
    for probe in report.probes:
        per_run = [_run_findings(report, probe, run) for run in probe.runs]
        failed: dict[str, list[int]] = {}
        for run in probe.runs:
            if run.error is not None and run.error.kind != "does-not-fit":  # SHL904 says it
                failed.setdefault(run.error.message, []).append(run.devices)
        for message, counts in failed.items():  # the same failure at every count: one finding
            where = ", ".join(map(str, counts))
            found.append(
                _finding(
                    "SHL900",
                    probe.probe,
                    report.root,
                    counts[0],
                    f"probe failed at {where} device(s): {message}",
                )
            )
        # One replicated-leaf finding per probe (at the largest count): the same leaves repeat.
        last_901 = max(
            (i for i, fs in enumerate(per_run) for f in fs if f["code"] == "SHL901"), default=-1
        )
        for i, fs in enumerate(per_run):
            found.extend(f for f in fs if f["code"] != "SHL901" or i == last_901)
        scaling = probe.state_scaling()
        worst = [s for s in scaling.values() if s.verdict == "flat"]
        if worst:
            s = worst[-1]
            base = min(scaling)
            found.append(
                _finding(
                    "SHL905",
                    probe.probe,
                    report.root,
                    s.devices,
                    f"per-device memory (arguments + outputs - aliased) at {s.devices} devices is "
                    f"{s.ratio:.2f}x of {base} device(s); sharded state would be {s.ideal:.2f}x",
                )
            )
    return found


def measured_findings(
    probes: Sequence[str] | None = None,
    *,
    root: str | os.PathLike[str] | None = None,
    settings: MemorySettings | None = None,
    devices: Sequence[int] | None = None,
    progress: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    savings: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Run the memory probes and return measured findings as plain dicts.

    Signature::

        measured_findings(probes=None, *, root=None, settings=None, devices=None,
                          progress=None, cancel=None, savings=None) -> list[dict]

    - probes: specs as on the command line (`file.py`, `file.py:function`, a folder); None: the
      configured probes, else every `shardlint_probe_*` under `root`.
    - root: project root (default: the folder of the nearest pyproject.toml, else the cwd); finding
      paths are relative to it.
    - settings: a MemorySettings (default: read from that pyproject.toml); devices overrides
      settings.devices.
    - progress: called with one line of text per stage; cancel: set it to kill the workers.

    Each dict: code ("SHL900".."SHL905"), name, severity ("error" | "warning"), path, line (1-based,
    the probe's `def`), column (0-based), end_line, message, probe (function name), devices (the
    device count it was measured at, or None), source ("memory"), related (list of {path, line,
    column, message}: static findings that likely explain the leaves, e.g. SHL102 at the init
    that ran without axis rules; empty when none is known). Probe failures are SHL900
    findings, never exceptions; a bad configuration raises shardlint.errors.ConfigError.

    - savings: a list to fill with what fixing each static finding a probe reaches saves (one
      dict per finding and probe: code, path, line, column (0-based), probe, and either text (a
      sentence for the finding's message) and saving (before/after per device count), or text
      None and why (no remedy, or it could not be applied)). None: no what-if compiles run.
    """
    from shardlint.memory.runner import WorkerOptions, run_probes  # here: keeps imports cheap

    start = Path(root) if root is not None else Path.cwd()
    loaded, found_root = load_settings(start)
    settings = settings or loaded
    project = Path(root).resolve() if root is not None else (found_root or Path.cwd()).resolve()
    specs = list(probes) if probes else list(settings.probes)
    selected: list[Probe] = resolve(specs, project) if specs else discover(project)
    counts = tuple(devices) if devices else settings.devices
    from shardlint.memory.whatif import Prepared, finish, prepare

    options = WorkerOptions(
        python=settings.python or WorkerOptions().python,
        platform=settings.platform,
        timeout=settings.timeout,
        memory_limit=settings.memory_limit or default_memory_limit(),
        cwd=project,
    )
    prepared = Prepared()
    if savings is not None:
        options, prepared = prepare(selected, project, counts, options)
    runs = []
    for count in counts:

        def on_progress(probe: Probe | None, n: int, stage: str) -> None:
            if progress is not None:
                progress(
                    f"{probe.display(project) if probe else 'worker'} @ {n} device(s): {stage}"
                )

        runs.extend(run_probes(selected, count, options, on_progress, cancel))
    finish(runs, prepared)
    report = explained_report(runs, selected, counts, settings, project, prepared.plans)
    if savings is not None:
        savings.extend(saving_records(report))
    return report_findings(report)


def saving_records(report: MemoryReport) -> list[dict[str, Any]]:
    """One record per static finding a probe reaches, by probe (see measured_findings): with
    ``text`` and ``saving`` where its remedy was compiled, else ``text`` None and ``why``."""
    from shardlint.memory.whatif import summary

    out = []
    for probe in report.probes:
        for saving in probe.savings:
            text = summary(saving, probe.probe.function)
            if text is None:
                why = saving.step.why or next(iter(saving.errors.values()), "")
                if why:  # said, not silently dropped (check --memory logs it)
                    step = saving.step
                    out.append({"code": step.code, "path": step.path, "line": step.line,
                                "column": step.column, "probe": probe.probe.function,
                                "text": None, "why": why})
                continue
            step = saving.step
            out.append({"code": step.code, "path": step.path, "line": step.line,
                        "column": step.column, "probe": probe.probe.function, "text": text,
                        "saving": saving.to_dict()})
    return out
