"""`--html FILE`: one self-contained page (inline CSS and SVG, nothing fetched) per run."""

from __future__ import annotations

import html
from typing import Any

from shardlint.memory.reasons import distinct
from shardlint.memory.plan.render import fit_html
from shardlint.memory.report import MemoryReport, ProbeReport, RunReport
from shardlint.memory.units import format_bytes
from shardlint.memory.whatif import describe

_COLORS = {"arguments": "#4e79a7", "outputs (not aliased)": "#f28e2b", "temporaries": "#bab0ac"}
_LEAF_ROWS = 60
_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
h1{font-size:20px}h2{font-size:16px;margin-top:2em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}
td,th{padding:2px 8px;border-bottom:1px solid #eee;text-align:right}
td:first-child,th:first-child,td.l{text-align:left}.bad{color:#b00020;font-weight:600}
.note{color:#666}.legend span{display:inline-block;width:10px;height:10px;margin:0 4px 0 12px}
pre{background:#f6f6f6;padding:8px;overflow:auto}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def bar_chart(report: MemoryReport, runs: list[RunReport]) -> str:
    """Stacked per-device bars (arguments, outputs not aliased, temporaries) per device count."""
    width, height, left, bottom, bar = 120 * len(runs) + 90, 240, 80, 30, 46
    parts_per_run = []
    for run in runs:
        f = run.figures
        assert f is not None
        parts_per_run.append(
            [
                ("arguments", f.argument),
                ("outputs (not aliased)", max(0, f.output - f.alias)),
                ("temporaries", f.temp),
            ]
        )
    tallest = max(
        [sum(v for _, v in parts) for parts in parts_per_run]
        + [r.measured_peak or 0 for r in runs]
        + [1]
    )
    show_capacity = report.capacity is not None and report.capacity <= tallest * 1.5
    top = max(tallest, report.capacity or 0) if show_capacity else tallest
    scale = (height - bottom - 20) / top
    svg = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'role="img" aria-label="per-device memory">'
        )
    ]
    base_y = height - bottom
    svg.append(f'<line x1="{left}" y1="{base_y}" x2="{width - 10}" y2="{base_y}" stroke="#999"/>')
    svg.append(
        f'<text x="{left - 6}" y="{base_y - (height - bottom - 20)}" font-size="11" '
        f'text-anchor="end">{_e(format_bytes(top))}</text>'
    )
    for i, (run, parts) in enumerate(zip(runs, parts_per_run)):
        x = left + 20 + i * 120
        y = float(base_y)
        for name, value in parts:
            h = value * scale
            y -= h
            svg.append(
                f'<rect x="{x}" y="{y:.1f}" width="{bar}" height="{h:.1f}" fill="{_COLORS[name]}">'
                f"<title>{_e(name)}: {_e(format_bytes(value))}</title></rect>"
            )
        total = sum(v for _, v in parts)
        svg.append(
            f'<text x="{x + bar / 2}" y="{y - 4:.1f}" font-size="11" text-anchor="middle">'
            f"{_e(format_bytes(total))}</text>"
        )
        if run.measured_peak:
            my = base_y - run.measured_peak * scale
            svg.append(
                f'<line x1="{x - 6}" y1="{my:.1f}" x2="{x + bar + 6}" y2="{my:.1f}" '
                f'stroke="#e15759" stroke-width="2"><title>measured peak '
                f"{_e(format_bytes(run.measured_peak))}</title></line>"
            )
        label = "1 device" if run.devices == 1 else f"{run.devices} devices"
        svg.append(
            f'<text x="{x + bar / 2}" y="{height - 10}" font-size="12" '
            f'text-anchor="middle">{label}</text>'
        )
    if show_capacity and report.capacity:
        cy = base_y - report.capacity * scale
        svg.append(
            f'<line x1="{left}" y1="{cy:.1f}" x2="{width - 10}" y2="{cy:.1f}" stroke="#b00020" '
            f'stroke-dasharray="6 4"/><text x="{left - 6}" y="{cy + 4:.1f}" font-size="11" '
            f'text-anchor="end" fill="#b00020">{_e(report.hardware or "capacity")}</text>'
        )
    svg.append("</svg>")
    return "".join(svg)


def _figures_table(report: MemoryReport, runs: list[RunReport]) -> str:
    head = "".join(f"<th>{r.devices} dev</th>" for r in runs)
    rows = [
        ("arguments (exact)", lambda r: r.figures.argument),
        ("outputs (exact)", lambda r: r.figures.output),
        ("aliased (exact)", lambda r: r.figures.alias),
        ("temporaries (estimate)", lambda r: r.figures.temp),
        ("peak estimate", lambda r: r.figures.estimate),
    ]
    if any(r.measured_peak for r in runs):
        rows.append(("measured peak", lambda r: r.measured_peak))
    body = "".join(
        f"<tr><td>{_e(name)}</td>"
        + "".join(f"<td>{_e(format_bytes(get(r)))}</td>" for r in runs)
        + "</tr>"
        for name, get in rows
    )
    if report.capacity is not None:
        cells = "".join(
            f'<td class="{"" if report.fits(r) else "bad"}">'
            f"{'yes' if report.fits(r) else 'NO'}</td>"
            for r in runs
        )
        body += (
            f"<tr><td>fits {_e(report.hardware or format_bytes(report.capacity))}</td>{cells}</tr>"
        )
    return f"<table><tr><th>per device</th>{head}</tr>{body}</table>"


def _leaf_table(report: MemoryReport, run: RunReport) -> str:
    rows = []
    for leaf in run.leaves[:_LEAF_ROWS]:
        flags = []
        if leaf["replicated"] and leaf["per_device"] >= report.replicated_threshold:
            flags.append('<span class="bad">replicated</span>')
        if leaf["donated"]:
            flags.append("donated")
        shape = f"{leaf['dtype']}[{','.join(str(d) for d in leaf['shape'])}]"
        for r in leaf.get("reasons", ()):
            flags.append(
                f'<div class="note" title="{_e(r["message"])}">{_e(r["link"])}: '
                f"<b>{_e(r['code'])}</b> {_e(r['path'])}:{r['line']}: {_e(r['because'])}</div>"
            )
        rows.append(
            f'<tr><td class="l">{_e(leaf["path"])}</td><td class="l">{_e(shape)}</td>'
            f'<td class="l">{_e(leaf["spec"])}</td><td>{_e(format_bytes(leaf["per_device"]))}</td>'
            f'<td>{_e(format_bytes(leaf["bytes"]))}</td><td class="l">{" ".join(flags)}</td></tr>'
        )
    more = len(run.leaves) - _LEAF_ROWS
    note = f'<p class="note">{more} smaller leaves not shown.</p>' if more > 0 else ""
    return (
        f"<table><tr><th>leaf</th><th>shape</th><th>sharding</th><th>per device</th><th>global</th>"
        f"<th></th></tr>{''.join(rows)}</table>{note}"
    )


def _probe_section(report: MemoryReport, probe: ProbeReport, findings: list[dict[str, Any]]) -> str:
    out = [f"<h2>{_e(probe.display)}</h2>"]
    ok = probe.ok_runs
    if ok:
        legend = "".join(f'<span style="background:{c}"></span>{_e(n)}' for n, c in _COLORS.items())
        out.append(bar_chart(report, ok))
        out.append(f'<p class="legend">{legend}</p>')
        out.append(_figures_table(report, ok))
        out.append(f"<h3>Leaves at {ok[-1].devices} device(s), largest first</h3>")
        out.append(_leaf_table(report, ok[-1]))
        causes = distinct(ok[-1].unsharded(report.replicated_threshold))
        if causes:
            items = "".join(
                f"<li><b>{_e(r['code'])} {_e(r['name'])}</b> {_e(r['path'])}:{r['line']}: "
                f"{_e(r['message'])}</li>"
                for r in causes
            )
            out.append(
                f"<h3>Likely causes of unsharded leaves (static analysis)</h3><ul>{items}</ul>"
            )
    for run in probe.runs:
        if run.error is not None:
            text = run.error.message + ("\n\n" + run.error.traceback if run.error.traceback else "")
            out.append(
                f'<p class="bad">error at {run.devices} device(s): {_e(run.error.kind)}</p>'
                f"<pre>{_e(text)}</pre>"
            )
    if probe.savings:
        out.append(savings_chart(probe))
    out.extend(fit_html(run) for run in ok if run.fit)
    mine = [
        f for f in findings if f["probe"] == probe.probe.function and f["line"] == probe.probe.line
    ]
    if mine:
        items = "".join(
            f"<li><b>{_e(f['code'])} {_e(f['name'])}</b>: {_e(f['message'])}</li>" for f in mine
        )
        out.append(f"<ul>{items}</ul>")
    return "\n".join(out)


def savings_chart(probe: ProbeReport) -> str:
    """What fixing each finding saves: a before and an after bar (peak estimate per device) for
    each finding and device count, in the order the remedies were applied, then all together."""
    runs = [r for r in probe.ok_runs if any(r.devices in s.runs for s in probe.savings)]
    if not runs:
        return ""
    groups: list[tuple[str, str, dict[int, dict[str, Any]]]] = [
        (f"{s.step.code} {s.step.path}:{s.step.line}", s.step.name, s.runs)
        for s in probe.savings
        if s.runs
    ]
    groups.append(("all together", "every remedy that applied", probe.together))
    bar, gap, label_h, row_h = 14, 4, 18, 0
    per_group = len(runs) * (2 * bar + gap) + label_h
    tallest = max(
        [max(r["before"]["peak"], r["after"]["peak"]) for _, _, g in groups for r in g.values()]
        + [1]
    )
    width, left = 760, 250
    scale = (width - left - 110) / tallest
    height = len(groups) * (per_group + 10) + row_h + 10
    svg = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        'aria-label="what fixing each finding saves">'
    ]
    y = 10
    for title, name, by_count in groups:
        svg.append(
            f'<text x="4" y="{y + 12}" font-size="12" font-weight="600">{_e(title)}'
            f"<title>{_e(name)}</title></text>"
        )
        y += label_h
        for run in runs:
            got = by_count.get(run.devices)
            label = "1 device" if run.devices == 1 else f"{run.devices} devices"
            svg.append(
                f'<text x="{left - 8}" y="{y + bar + 2}" font-size="11" text-anchor="end">'
                f"{label}</text>"
            )
            if got is None:
                svg.append(
                    f'<text x="{left}" y="{y + bar + 2}" font-size="11" fill="#666">'
                    "not applied</text>"
                )
                y += 2 * bar + gap
                continue
            for kind, color in (("before", "#bab0ac"), ("after", "#59a14f")):
                value = got[kind]["peak"]
                w = max(1.0, value * scale)
                svg.append(
                    f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar - 2}" fill="{color}">'
                    f"<title>{kind}: {_e(format_bytes(value))}</title></rect>"
                    f'<text x="{left + w + 4:.1f}" y="{y + bar - 3}" font-size="11">'
                    f"{_e(format_bytes(value))}</text>"
                )
                y += bar
            y += gap
        y += 10
    svg.append("</svg>")
    legend = (
        '<p class="legend"><span style="background:#bab0ac"></span>before'
        '<span style="background:#59a14f"></span>after (peak estimate per device)</p>'
    )
    notes = "".join(
        f"<li><b>{_e(s.step.code)}</b> {_e(s.step.path)}:{s.step.line}: "
        f"{_e(describe(s.step))}"
        + (f' <span class="note">(not applied: {_e(next(iter(s.errors.values())))})</span>'
           if s.errors else "")
        + "</li>"
        for s in probe.savings
    )
    return (
        "<h3>What fixing the findings it reaches saves (compiled again with each remedy, "
        f"in this order)</h3>{''.join(svg)}{legend}<ul>{notes}</ul>"
    )


def _note(report: MemoryReport) -> str:
    return f'<p class="note">{_e(report.static_note)}</p>' if report.static_note else ""


def render_html(report: MemoryReport, findings: list[dict[str, Any]]) -> str:
    sections = "\n".join(_probe_section(report, p, findings) for p in report.probes)
    capacity = (
        f"; capacity {_e(report.hardware or '')} {_e(format_bytes(report.capacity))} per device"
        if report.capacity is not None
        else ""
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>shardlint memory report</title><style>{_CSS}</style></head><body>"
        f'<h1>shardlint memory report</h1><p class="note">platform {_e(report.platform)}; devices '
        f"{_e(', '.join(map(str, report.device_counts)))}{capacity}. Arguments, outputs and "
        "aliased bytes are exact on any backend; temporaries and the peak are estimates from the "
        "compiler that ran.</p>"
        f"{_note(report)}"
        f"{sections}</body></html>\n"
    )
