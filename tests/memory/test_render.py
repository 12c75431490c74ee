"""Rendering from worker figures, including the GPU-only measured peak (no jax, no subprocess)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from shardlint.memory.findings import report_findings
from shardlint.memory.probes import Probe
from shardlint.memory.render.render_html import render_html
from shardlint.memory.render.render_json import report_dict
from shardlint.memory.render.render_text import render_text
from shardlint.memory.report import build_report
from shardlint.memory.runner import ProbeError, ProbeRun

GIB = 1024**3
PROBE = Probe(Path("/proj/p.py"), "shardlint_probe_step", 3, 0, 9, False, "0" * 64)


def _facts(devices: int, backend: str = "gpu") -> dict:
    per_device = 12 * GIB // devices
    leaf = {
        "role": "arg",
        "path": "state[0]['w']",
        "group": "state[0]",
        "shape": [1024],
        "dtype": "float32",
        "bytes": 12 * GIB,
        "per_device": per_device,
        "spec": "P('fsdp',)",
        "mesh": f"fsdp={devices}",
        "devices": devices,
        "replicated": False,
        "donated": True,
    }
    return {
        "kind": "lowered",
        "backend": backend,
        "device_count": devices,
        "device_kind": "NVIDIA H200",
        "devices_used": devices,
        "leaves": [leaf],
        "donation_warnings": [],
        "warnings": [],
        "collectives": {},
        "timings": {"compile_s": 1.0},
        "memory": {
            "argument": per_device,
            "output": per_device,
            "alias": per_device,
            "temp": 2 * GIB,
            "generated_code": 0,
            "peak": None,
        },
        "measured": {
            "available": True,
            "error": None,
            "devices": [
                {
                    "id": 0,
                    "kind": "NVIDIA H200",
                    "peak_bytes_in_use": per_device + 3 * GIB,
                    "bytes_limit": 140 * GIB,
                    "inputs": per_device,
                    "in_use_before": 0,
                    "peak_before_run": per_device,
                }
            ],
        },
    }


def _report(capacity: int | None = None):
    runs = [ProbeRun(PROBE, 1, facts=_facts(1), environment={"backend": "gpu", "jax": "0.11.2"})]
    return build_report(
        runs,
        [PROBE],
        (1,),
        platform="native",
        hardware="H100-80GB" if capacity else None,
        capacity=capacity,
        root=Path("/proj"),
    )


def test_gpu_figures_side_by_side() -> None:
    report = _report()
    text = render_text(report, report_findings(report))
    assert re.search(r"temporaries\s+gpu compiler\s+2\.00 GiB", text)
    assert re.search(r"peak estimate\s+gpu compiler\s+14\.00 GiB", text)
    assert re.search(r"measured peak\s+run once\s+15\.00 GiB", text)
    run = report_dict(report, [])["probes"][0]["runs"][0]
    assert run["estimated"] == [] and run["measured_peak"] == 15 * GIB
    assert run["per_device"]["peak_estimate"] == 14 * GIB
    json.dumps(run)


def test_measured_peak_decides_the_fit() -> None:
    report = _report(capacity=int(14.5 * GIB))  # estimate 14 GiB fits, measured 15 GiB does not
    assert report.exit_code() == 1
    findings = report_findings(report)
    assert [f["code"] for f in findings] == ["SHL904"]
    assert "needs 15.00 GiB per device" in findings[0]["message"]
    page = render_html(report, findings)
    assert "measured peak" in page and 'class="bad">NO' in page


def test_failure_is_one_finding_for_all_device_counts() -> None:
    error = ProbeError(
        "raised", "ValueError: boom", stage="call", traceback="Traceback ...\nValueError: boom"
    )
    runs = [ProbeRun(PROBE, n, error=error) for n in (1, 2, 8)]
    report = build_report(runs, [PROBE], (1, 2, 8), root=Path("/proj"))
    findings = report_findings(report)
    assert [(f["code"], f["severity"], f["path"], f["line"]) for f in findings] == [
        ("SHL900", "error", "p.py", 3)
    ]
    assert "1, 2, 8 device(s)" in findings[0]["message"]
    text = render_text(report, findings)
    assert text.count("ValueError: boom") == 2  # the message and the traceback's last line, once
    assert report.exit_code() == 2
