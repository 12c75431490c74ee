"""From worker figures to the memory report: per device count, per group, per leaf, scaling, fit.

Which figures can be trusted where: argument, output and aliased bytes depend only on shapes,
dtypes and shardings, so they are exact for any backend. Temporaries, generated code and the peak
come from the compiler that ran; on the CPU backend they are an estimate of what a GPU or TPU
compiler would need (different fusion, remat and scheduling).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shardlint.memory.probes import Probe
from shardlint.memory.runner import ProbeError, ProbeRun

EXACT_FIGURES = ("argument", "output", "alias")
ESTIMATED_FIGURES = ("temp", "generated_code", "peak")


@dataclass(frozen=True)
class Figures:
    """Per-device bytes from `Compiled.memory_analysis()` (SPMD executables: per device)."""

    argument: int
    output: int
    alias: int
    temp: int
    generated_code: int
    peak_reported: int | None  # the compiler's own peak; on CPU it leaves temporaries out

    @property
    def estimate(self) -> int:
        return max(self.peak_reported or 0, self.argument + self.output + self.temp - self.alias)

    @property
    def state(self) -> int:
        """What stays resident across steps: inputs plus outputs that do not reuse an input."""
        return self.argument + self.output - self.alias

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Figures:
        return cls(
            argument=int(data.get("argument") or 0),
            output=int(data.get("output") or 0),
            alias=int(data.get("alias") or 0),
            temp=int(data.get("temp") or 0),
            generated_code=int(data.get("generated_code") or 0),
            peak_reported=data.get("peak"),
        )


@dataclass
class RunReport:
    """One probe at one device count."""

    devices: int
    backend: str = ""
    figures: Figures | None = None
    devices_used: int = 0
    donated: int = 0  # per device, from the donated leaves
    groups: dict[str, int] = field(default_factory=dict)  # per-device bytes per argument/output
    leaves: list[dict[str, Any]] = field(default_factory=list)
    donation_warnings: list[str] = field(default_factory=list)
    collectives: dict[str, int] = field(default_factory=dict)
    measured: dict[str, Any] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    printed: str = ""
    error: ProbeError | None = None
    kind: str = ""
    wall_s: float = 0.0
    worker_max_rss: int | None = None
    environment: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] | None = None  # the worker's memory figures, as it sent them
    whatifs: list[dict[str, Any]] = field(default_factory=list)  # what-if compiles (whatif.py)
    fit: dict[str, Any] | None = None  # `--fit`: the plans found (memory/plan)

    @property
    def donated_unused(self) -> int:
        return max(0, self.donated - (self.figures.alias if self.figures else 0))

    @property
    def measured_peak(self) -> int | None:
        if not self.measured or not self.measured.get("available"):
            return None
        # "peak": the headroom bracket's upper end on a TPU, the allocator's peak elsewhere
        # ("peak_bytes_in_use" alone: reports from before the headroom measure).
        peaks = [d.get("peak", d.get("peak_bytes_in_use")) or 0
                 for d in self.measured.get("devices", [])]
        return max(peaks) if peaks else None

    @property
    def estimate_exact(self) -> bool:
        return self.backend not in ("", "cpu")

    def replicated(self, threshold: int) -> list[dict[str, Any]]:
        return [
            leaf for leaf in self.leaves if leaf["replicated"] and leaf["per_device"] >= threshold
        ]

    def unsharded(self, threshold: int) -> list[dict[str, Any]]:
        """Leaves at least `threshold` per device held whole by a device on an N > 1 run.

        Replicated leaves, and leaves of a step compiled for one device: both are what a
        missing rule or context leaves behind, so both can carry a static reason.
        """
        if self.devices <= 1:
            return []
        return [
            leaf
            for leaf in self.leaves
            if leaf["per_device"] >= threshold
            and (leaf["replicated"] or leaf["spec"] == "single device")
        ]


def _run_report(run: ProbeRun) -> RunReport:
    report = RunReport(
        devices=run.devices,
        error=run.error,
        printed=run.printed,
        wall_s=run.wall_s,
        worker_max_rss=run.worker_max_rss,
        environment=run.environment,
    )
    report.fit = run.fit  # a step the TPU compiler refused is searched too
    facts = run.facts
    if facts is None:
        report.backend = str(run.environment.get("backend", ""))
        return report
    report.backend = facts.get("backend", "")
    report.kind = facts.get("kind", "")
    report.figures = Figures.from_dict(facts["memory"]) if facts.get("memory") else None
    report.memory = facts.get("memory")
    report.whatifs = list(run.whatifs)
    report.devices_used = int(facts.get("devices_used") or 1)
    report.leaves = sorted(facts.get("leaves", []), key=lambda leaf: -leaf["per_device"])
    report.donated = sum(leaf["per_device"] for leaf in report.leaves if leaf["donated"])
    for leaf in report.leaves:
        report.groups[leaf["group"]] = report.groups.get(leaf["group"], 0) + leaf["per_device"]
    report.donation_warnings = list(facts.get("donation_warnings", []))
    report.collectives = dict(facts.get("collectives", {}))
    report.measured = facts.get("measured")
    report.timings = dict(facts.get("timings", {}))
    return report


@dataclass(frozen=True)
class Scaling:
    """Per-device bytes at `devices` relative to the smallest device count measured."""

    devices: int
    ratio: float  # observed / baseline
    ideal: float  # baseline devices / devices

    @property
    def verdict(self) -> str:
        if self.ideal >= 1:
            return "baseline"
        if self.ratio <= self.ideal * 1.1:
            return "ideal"
        if self.ratio >= 0.9:
            return "flat"
        return "partial"


def scale(values: dict[int, int]) -> dict[int, Scaling]:
    """Scaling of a per-device figure over device counts (missing counts are skipped)."""
    if not values:
        return {}
    base_devices = min(values)
    base = values[base_devices]
    return {
        n: Scaling(n, (v / base) if base else 1.0, base_devices / n)
        for n, v in sorted(values.items())
    }


@dataclass
class ProbeReport:
    probe: Probe
    display: str
    runs: list[RunReport]
    savings: list[Any] = field(default_factory=list)  # whatif.Saving per finding it reaches
    together: dict[int, dict[str, Any]] = field(default_factory=dict)  # all remedies applied

    @property
    def ok_runs(self) -> list[RunReport]:
        return [r for r in self.runs if r.figures is not None]

    def state_scaling(self) -> dict[int, Scaling]:
        return scale({r.devices: r.figures.state for r in self.ok_runs if r.figures})

    def group_table(self) -> dict[str, dict[int, int]]:
        """group -> device count -> per-device bytes, biggest groups first."""
        table: dict[str, dict[int, int]] = {}
        for run in self.ok_runs:
            for group, size in run.groups.items():
                table.setdefault(group, {})[run.devices] = size
        return dict(sorted(table.items(), key=lambda item: -max(item[1].values())))


@dataclass
class MemoryReport:
    probes: list[ProbeReport]
    device_counts: tuple[int, ...]
    platform: str = "cpu"
    hardware: str | None = None
    capacity: int | None = None
    replicated_threshold: int = 1024**2
    root: Path | None = None
    static_note: str | None = None  # why no static reasons could be tied to leaves, if so

    def fits(self, run: RunReport) -> bool | None:
        if self.capacity is None or run.figures is None:
            return None
        measured = run.measured_peak
        return max(run.figures.estimate, measured or 0) <= self.capacity

    @property
    def errors(self) -> list[tuple[ProbeReport, RunReport]]:
        """Runs that failed: not those the TPU compiler refused because they do not fit."""
        return [(p, r) for p in self.probes for r in p.runs
                if r.error is not None and r.error.kind != "does-not-fit"]

    def exit_code(self) -> int:
        """0 all ran and fit, 1 something does not fit the capacity, 2 a probe failed."""
        if self.errors:
            return 2
        if any(self.fits(r) is False or (r.error is not None and r.error.kind == "does-not-fit")
               for p in self.probes for r in p.runs):
            return 1
        return 0


def build_report(
    runs: list[ProbeRun],
    probes: list[Probe],
    device_counts: tuple[int, ...],
    *,
    platform: str = "cpu",
    hardware: str | None = None,
    capacity: int | None = None,
    replicated_threshold: int = 1024**2,
    root: Path | None = None,
) -> MemoryReport:
    by_probe: dict[str, list[RunReport]] = {p.key: [] for p in probes}
    for run in runs:
        by_probe.setdefault(run.probe.key, []).append(_run_report(run))
    reports = [
        ProbeReport(
            probe, probe.display(root), sorted(by_probe[probe.key], key=lambda r: r.devices)
        )
        for probe in probes
    ]
    return MemoryReport(
        reports, device_counts, platform, hardware, capacity, replicated_threshold, root
    )
