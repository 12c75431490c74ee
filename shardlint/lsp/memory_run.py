"""One memory measurement for the editor: which probes a file holds, what to run them with, and
the figures an editor shows (a headline for a code lens, the table for a hover).

Nothing here knows LSP; ``memory_lens.py`` calls it from the event loop (``plan_for``,
``probes_of``: cheap, `ast` and a pyproject read) and from its own threads (``measure``: minutes,
a worker subprocess per device count exactly as ``shardlint memory`` runs it).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from shardlint.lsp.settings import MemoryClientSettings
from shardlint.memory.findings import report_findings, saving_records
from shardlint.memory.plan import attach, describe, fit_request
from shardlint.memory.plan import headline as fit_headline
from shardlint.memory.probes import PREFIX, Probe, function_in_source, probes_in_source
from shardlint.memory.reach import probe_reach
from shardlint.memory.reasons import explained_report
from shardlint.memory.render.render_text import render_text
from shardlint.memory.report import MemoryReport, ProbeReport
from shardlint.memory.runner import WorkerOptions, interpreter, run_all
from shardlint.memory.settings import MemorySettings, default_memory_limit, load_settings
from shardlint.memory.targets import default_target, parse_target, with_target
from shardlint.memory.units import format_bytes
from shardlint.memory.whatif import finish, prepare

_JIT_NAMES = {"jit", "pjit"}
_STAGES = {"lower", "trace"}


def normalise(text: str) -> str:
    """Line breaks as ``Path.read_text`` gives them, so an open document hashes like its file."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


@dataclass(frozen=True)
class Plan:
    """The project's ``[tool.shardlint.memory]`` with the client's overrides, and the interpreter."""

    settings: MemorySettings
    python: str
    root: Path

    @property
    def key(self) -> str:
        """What else, besides the probe's source, a cached figure depends on."""
        text = repr((self.settings, self.python))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def plan_for(path: Path, client: MemoryClientSettings) -> Plan:
    """Raises ShardlintError (a bad table, an interpreter that is not there)."""
    loaded, root = load_settings(path.parent)
    root = (root or path.parent).resolve()
    changes: dict[str, object] = {}
    if client.devices:
        changes["devices"] = client.devices
    if client.capacity is not None:
        changes.update(capacity=client.capacity, hardware=client.hardware)
    settings = dataclasses.replace(loaded, **changes)  # type: ignore[arg-type]
    if client.target:
        settings = with_target(settings, parse_target(client.target),
                               devices_given=bool(client.devices),
                               capacity_given=client.capacity is not None)
    python = interpreter(client.python or settings.python, root)
    return Plan(default_target(settings, python, platform_given=False), python, root)


def probes_of(text: str, path: Path, plan: Plan | None) -> list[Probe]:
    """``shardlint_probe_*`` functions of the text, and those ``probes = [...]`` names in it."""
    named: list[str] = []
    if plan is not None:
        for spec in plan.settings.probes:
            head, sep, tail = spec.rpartition(":")
            if sep and head.endswith(".py") and tail.isidentifier():
                file = Path(head) if Path(head).is_absolute() else plan.root / head
                if _same_file(file, path):
                    named.append(tail)
    if PREFIX not in text and not named:
        return []
    text = normalise(text)
    try:
        found = probes_in_source(text, path)
        for name in named:
            if all(p.function != name for p in found):
                probe = function_in_source(text, path, name)
                if probe is not None:
                    found.append(probe)
    except SyntaxError:
        return []
    return sorted(found, key=lambda p: p.line)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()


@dataclass
class Measurement:
    """A probe's figures (or why there are none) for one source hash and one plan."""

    probe: Probe
    plan_key: str
    headline: str | None = None  # e.g. "peak 64.00 MiB/device at 2 devices · fits H100-80GB"
    failure: str | None = None  # one line
    detail: str = ""  # the `shardlint memory` table, errors with their traceback
    peak: int | None = None  # bytes per device at `devices`
    devices: int | None = None
    target: tuple[Path, str] | None = None  # where the jitted function is defined
    # The project files the probe reaches besides its own (its model, its step), by the hash of
    # their text when it was measured: a change in any of them makes the figure stale.
    imports: dict[Path, str] = dataclasses.field(default_factory=dict)
    # What fixing each static finding the probe reaches saved (findings.saving_records, paths
    # absolute), biggest saving first.
    savings: list[dict] = dataclasses.field(default_factory=list)
    # `--fit` at the widest device count, when a capacity is set and the step does not fit:
    # "headline" (one line), and "edit" (the rules table's range in the probe's file, ast's
    # positions, and the best plan's table as code) when a plan that keeps the mesh fits.
    fit: dict | None = None

    def summary(self) -> dict:
        return {"probe": self.probe.function, "ok": self.failure is None, "headline": self.headline,
                "failure": self.failure, "peak": self.peak, "devices": self.devices}


def text_hash(text: str) -> str:
    """The hash probes use for their file (``Probe.source_hash``), of any file's text."""
    return hashlib.sha256(normalise(text).encode("utf-8", "surrogatepass")).hexdigest()


def reached_files(probe: Probe, root: Path) -> dict[Path, str]:
    """The project files the probe's call can run code of, other than its own, with the hash of
    their text on disk (what the worker imports)."""
    out: dict[Path, str] = {}
    try:
        files = probe_reach(probe.path, probe.function, root).files
    except (OSError, SyntaxError, ValueError, RecursionError):
        return out
    for file in files:
        if file.resolve() == probe.path:
            continue
        try:
            out[file.resolve()] = text_hash(file.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError):
            out[file.resolve()] = ""
    return out


def failed(probe: Probe, plan_key: str, message: str, detail: str = "") -> Measurement:
    line = message.strip().splitlines()[0] if message.strip() else "unknown error"
    return Measurement(probe, plan_key, failure=line, detail=detail or message)


def measure(probe: Probe, plan: Plan, progress: Callable[[int, str], None],
            cancel: threading.Event) -> Measurement:
    """Run one probe at every device count, as ``shardlint memory FILE:FUNCTION`` does.

    Raises ``runner.Cancelled`` when ``cancel`` is set; every other failure is a Measurement.
    """
    s = plan.settings
    jobs = min(len(s.devices), max(1, (os.cpu_count() or 1) // 2), 4)
    options = WorkerOptions(python=plan.python, platform=s.platform, timeout=s.timeout,
                            memory_limit=s.memory_limit or default_memory_limit() // jobs,
                            cwd=plan.root,
                            target=parse_target(s.target).topology if s.target else None)
    def on_progress(_probe: Probe | None, devices: int, stage: str) -> None:
        progress(devices, stage)

    imports = reached_files(probe, plan.root)  # before the run: what the worker will import
    options, prepared = prepare([probe], plan.root, s.devices, options)
    fit = fit_request([probe], s.capacity) if s.capacity is not None else None
    if fit is not None:
        options = dataclasses.replace(options, fit=fit.specs)
    runs = run_all([probe], s.devices, options, on_progress, jobs, cancel)
    finish(runs, prepared)
    report = explained_report(runs, [probe], s.devices, s, plan.root, prepared.plans)
    if fit is not None:
        attach(report, fit)
    detail = render_text(report, report_findings(report))
    (probe_report,) = report.probes
    savings = [{**r, "path": str((plan.root / r["path"]).resolve())}
               for r in saving_records(report) if r.get("text")]
    savings.sort(key=lambda r: -_best(r))
    out = Measurement(probe, plan.key, detail=detail, target=jitted_target(probe),
                      imports=imports, savings=savings, fit=fit_summary(probe_report))
    errors = [r.error for r in probe_report.runs if r.error is not None]
    if errors:
        out.failure = f"{errors[0].kind}: {errors[0].message.strip().splitlines()[0]}"
    if probe_report.ok_runs:
        out.headline, out.peak, out.devices = headline(report, probe_report)
    elif out.failure is None:
        out.failure = "the probe produced no figures"
    return out


def fit_summary(probe: ProbeReport) -> dict | None:
    """The editor's view of `--fit`: the widest device count's outcome, and the edit that puts
    its best plan's table in place of the probe's (a plan that keeps the mesh shape)."""
    run = next((r for r in reversed(probe.runs) if r.fit), None)  # refused steps are searched too
    if run is None or run.fit is None:
        return None
    fit = run.fit
    out: dict = {"headline": fit_headline(fit), "devices": run.devices}
    table = fit.get("table")
    plan = next((p for p in fit.get("plans") or ()
                 if p.get("code") and all(c["kind"] == "rule" for c in p["changes"])), None)
    if table is not None and plan is not None:
        out["edit"] = {**table, "code": plan["code"],
                       "title": f"Apply the memory plan to {table['name']} "
                       f"({describe(plan['changes'])}): peak "
                       f"{'at least ' if fit['baseline'].get('refused') else ''}"
                       f"{format_bytes(fit['baseline']['peak_bytes'])} -> "
                       f"{format_bytes(plan['peak_bytes'])} per device at {run.devices} devices"}
    return out


def _best(record: dict) -> int:
    return max((d["saved"] for d in record["saving"]["devices"].values()), default=0)


def savings_line(m: Measurement) -> str | None:
    """A code lens title: the findings the probe reaches, by what fixing each saved."""
    shown = [r for r in m.savings if r["saving"]["devices"]]
    if not shown:
        return None
    parts = [f"{r['code']} {format_bytes(_best(r))}" if _best(r) >= 0 else
             f"{r['code']} +{format_bytes(-_best(r))}" for r in shown]
    return "fixes save (peak/device): " + " · ".join(parts)


def headline(report: MemoryReport, probe: ProbeReport) -> tuple[str, int, int]:
    """The figure at the largest device count, its fit and how it scaled from the smallest."""
    run = probe.ok_runs[-1]
    assert run.figures is not None
    peak = max(run.figures.estimate, run.measured_peak or 0)
    n = run.devices
    parts = [f"peak {format_bytes(peak)}/device at {n} device{'' if n == 1 else 's'}"]
    target = run.environment.get("target") or {}
    if target:  # the TPU compiler's figure, not a CPU estimate
        parts[0] += f" of tpu-{target.get('target', '?')}"
    fits = report.fits(run)
    if fits is not None:
        name = report.hardware or format_bytes(report.capacity)
        parts.append(f"fits {name}" if fits else f"does NOT fit {name}")
    scaling = probe.state_scaling().get(n)
    if scaling is not None and scaling.verdict != "baseline":
        parts.append(f"state {scaling.ratio:.2f}x of {min(probe.state_scaling())} device "
                     f"(ideal {scaling.ideal:.2f}x, {scaling.verdict})")
    return " · ".join(parts), peak, n


# ---- where the probe's jitted function is defined (best effort, static) -------------------------
def jitted_target(probe: Probe) -> tuple[Path, str] | None:
    """The top-level function a probe returns, jitted: ``return step, args``,
    ``return jax.jit(step).lower(...)``, ``f = jax.jit(step); return f, args``; found in the
    probe's file or a module it imports from its folder. None when unsure."""
    try:
        tree = ast.parse(probe.path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef)
               and n.name == probe.function), None)
    if fn is None:
        return None
    returns = [n.value for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
    if not returns:
        return None
    name = _returned_name(returns[-1], fn)
    if name is None or name == probe.function:
        return None
    return _defined(name, tree, probe.path)


def _returned_name(expr: ast.expr, fn: ast.FunctionDef, depth: int = 0) -> str | None:
    if isinstance(expr, ast.Tuple) and expr.elts:
        expr = expr.elts[0]
    while isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in _STAGES:
            expr = func.value
        elif _callee(func) in _JIT_NAMES and expr.args:
            expr = expr.args[0]
        else:
            return None
    if not isinstance(expr, ast.Name):
        return None
    if depth < 3:  # `step = jax.jit(train_step, ...)` inside the probe
        for node in ast.walk(fn):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name) and node.targets[0].id == expr.id):
                return _returned_name(node.value, fn, depth + 1)
    return expr.id


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _defined(name: str, tree: ast.Module, path: Path) -> tuple[Path, str] | None:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return path.resolve(), name
        if isinstance(node, ast.ImportFrom) and node.module and node.level <= 1:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    file = path.parent.joinpath(*node.module.split(".")).with_suffix(".py")
                    if top_level_def(file, alias.name) is not None:
                        return file.resolve(), alias.name
    return None


def top_level_def(path_or_text: Path | str, name: str) -> ast.FunctionDef | None:
    """The top-level ``def name`` of a file or a source text."""
    try:
        text = (path_or_text.read_text(encoding="utf-8") if isinstance(path_or_text, Path)
                else path_or_text)
        tree = ast.parse(text)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    return None
