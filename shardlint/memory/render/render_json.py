"""`--format json`: the same figures as the table, machine-readable (bytes are plain integers)."""

from __future__ import annotations

import json
from typing import Any

from shardlint.memory.plan.render import fit_json
from shardlint.memory.report import ESTIMATED_FIGURES, EXACT_FIGURES, MemoryReport, RunReport

SCHEMA_VERSION = 1


def _run(report: MemoryReport, run: RunReport) -> dict[str, Any]:
    data: dict[str, Any] = {
        "devices": run.devices,
        "ok": run.error is None and run.figures is not None,
        "backend": run.backend,
        "kind": run.kind,
        "environment": run.environment,
        "wall_s": run.wall_s,
        "worker_max_rss": run.worker_max_rss,
        "printed": run.printed,
        "error": run.error.to_dict() if run.error else None,
    }
    if run.fit is not None:
        data["fit"] = fit_json(run.fit)
    if run.figures is None:
        return data
    f = run.figures
    data.update(
        per_device={
            "argument": f.argument,
            "output": f.output,
            "alias": f.alias,
            "temp": f.temp,
            "generated_code": f.generated_code,
            "peak_reported": f.peak_reported,
            "peak_estimate": f.estimate,
            "state": f.state,
        },
        exact=list(EXACT_FIGURES),
        estimated=[] if run.estimate_exact else list(ESTIMATED_FIGURES),
        measured=run.measured,
        measured_peak=run.measured_peak,
        fits=report.fits(run),
        devices_used=run.devices_used,
        donated=run.donated,
        donated_unused=run.donated_unused,
        donation_warnings=run.donation_warnings,
        groups=run.groups,
        replicated=[leaf["path"] for leaf in run.replicated(report.replicated_threshold)],
        # Leaves held whole by a device (replicated, or a one-device step at N > 1) and the
        # static findings that likely explain each one ("reasons", empty when none is known).
        unsharded=[
            {
                "path": leaf["path"],
                "per_device": leaf["per_device"],
                "spec": leaf["spec"],
                "replicated": leaf["replicated"],
                "reasons": leaf.get("reasons", []),
            }
            for leaf in run.unsharded(report.replicated_threshold)
        ],
        leaves=run.leaves,
        collectives=run.collectives,
        timings=run.timings,
    )
    return data


def report_dict(report: MemoryReport, findings: list[dict[str, Any]]) -> dict[str, Any]:
    probes = []
    for probe in report.probes:
        scaling = probe.state_scaling()
        probes.append(
            {
                "probe": probe.display,
                "path": str(probe.probe.path),
                "function": probe.probe.function,
                "line": probe.probe.line,
                "source_hash": probe.probe.source_hash,
                "runs": [_run(report, run) for run in probe.runs],
                "scaling": {
                    str(n): {
                        "ratio": round(s.ratio, 4),
                        "ideal": round(s.ideal, 4),
                        "verdict": s.verdict,
                    }
                    for n, s in scaling.items()
                },
                "groups": {
                    group: {str(n): size for n, size in sizes.items()}
                    for group, sizes in probe.group_table().items()
                },
                # What fixing each static finding the probe reaches saves, from compiles with
                # the remedies applied in order (whatif.py); "together": all that applied.
                "savings": [saving.to_dict() for saving in probe.savings],
                "together": {str(n): t for n, t in sorted(probe.together.items())},
            }
        )
    return {
        "version": SCHEMA_VERSION,
        "platform": report.platform,
        "devices": list(report.device_counts),
        "hardware": report.hardware,
        "capacity": report.capacity,
        "replicated_threshold": report.replicated_threshold,
        "static_note": report.static_note,
        "exit_code": report.exit_code(),
        "probes": probes,
        "findings": findings,
    }


def render_json(report: MemoryReport, findings: list[dict[str, Any]]) -> str:
    return json.dumps(report_dict(report, findings), indent=2) + "\n"
