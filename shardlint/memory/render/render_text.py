"""The terminal table: one block per probe, one column per device count."""

from __future__ import annotations

from typing import Any

from shardlint.memory.reasons import distinct
from shardlint.memory.plan.render import fit_lines
from shardlint.memory.report import MemoryReport, ProbeReport, RunReport, Scaling, scale
from shardlint.memory.units import format_bytes
from shardlint.memory.whatif import describe

_TOP_LEAVES = 8
_TOP_GROUPS = 8


def _label(run: RunReport) -> str:
    return "1 device" if run.devices == 1 else f"{run.devices} devices"


def _grid(rows: list[list[str]], indent: str = "  ", align: str = "") -> list[str]:
    """Pad columns; `align` holds "l" or "r" per column (default: first left, others right)."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    align = align or "l" + "r" * (len(widths) - 1)
    lines = []
    for row in rows:
        cells = [
            cell.ljust(widths[i]) if align[i] == "l" else cell.rjust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append((indent + "  ".join(cells)).rstrip())
    return lines


def _scaling_text(s: Scaling | None) -> str:
    if s is None or s.verdict == "baseline":
        return "-"
    return f"{s.ratio:.2f}x (ideal {s.ideal:.2f}x) {s.verdict}"


def _figure_rows(
    report: MemoryReport, probe: ProbeReport, runs: list[RunReport]
) -> list[list[str]]:
    backend = next((r.backend for r in runs if r.backend), "cpu")
    est = "estimate" if backend == "cpu" else f"{backend} compiler"
    rows = [["per device", "basis"] + [_label(r) for r in runs]]

    def row(name: str, basis: str, value: Any) -> None:
        rows.append([name, basis] + [value(r) if r.figures else "-" for r in runs])

    row("arguments", "exact", lambda r: format_bytes(r.figures.argument))
    row("outputs", "exact", lambda r: format_bytes(r.figures.output))
    row("aliased (donated, reused)", "exact", lambda r: format_bytes(r.figures.alias))
    row("temporaries", est, lambda r: format_bytes(r.figures.temp))
    row("generated code", est, lambda r: format_bytes(r.figures.generated_code))
    row("peak estimate", est, lambda r: format_bytes(r.figures.estimate))
    if any(r.measured_peak is not None for r in runs):
        headroom = any((r.measured or {}).get("method") == "headroom" for r in runs)
        row("measured peak", "headroom" if headroom else "run once",
            lambda r: format_bytes(r.measured_peak))
    capacity = report.capacity
    if capacity is not None:
        name = report.hardware or "capacity"

        def fit(r: RunReport) -> str:
            need = max(r.figures.estimate, r.measured_peak or 0) if r.figures else 0
            return f"{'yes' if report.fits(r) else 'NO'} ({100 * need / capacity:.0f}%)"

        row(f"fits {name} ({format_bytes(capacity)})", "", fit)
    row("devices used", "", lambda r: f"{r.devices_used} of {r.devices}")
    if any(r.donated for r in runs):
        row("donated, not reused", "exact", lambda r: format_bytes(r.donated_unused))
    scaling = probe.state_scaling()
    row("args+outputs-aliased vs first", "exact", lambda r: _scaling_text(scaling.get(r.devices)))
    return rows


def _group_rows(probe: ProbeReport, runs: list[RunReport], threshold: int) -> list[list[str]]:
    table = probe.group_table()
    rows = [["by argument/output, per device"] + [_label(r) for r in runs] + ["scaling"]]
    for group, sizes in list(table.items())[:_TOP_GROUPS]:
        s = scale(sizes)
        # Tiny groups (a PRNG key, a step counter) get no verdict: their scaling is noise.
        last = s[max(s)] if s and max(sizes.values()) >= threshold else None
        rows.append(
            [group] + [format_bytes(sizes.get(r.devices)) for r in runs] + [_scaling_text(last)]
        )
    return rows


def _leaf_rows(run: RunReport, threshold: int) -> list[list[str]]:
    rows = [["per device", "leaf", "shape", "sharding", ""]]
    for leaf in run.leaves[:_TOP_LEAVES]:
        shape = f"{leaf['dtype']}[{','.join(str(d) for d in leaf['shape'])}]"
        sharding = leaf["spec"] + (f" on {leaf['mesh']}" if leaf["mesh"] else "")
        notes = []
        if leaf["replicated"] and leaf["per_device"] >= threshold:
            notes.append("REPLICATED")
        if leaf["donated"]:
            notes.append("donated")
        if leaf.get("reasons"):
            notes.append("cause: " + ",".join(dict.fromkeys(r["code"] for r in leaf["reasons"])))
        rows.append(
            [format_bytes(leaf["per_device"]), leaf["path"], shape, sharding, " ".join(notes)]
        )
    return rows


def _reason_lines(run: RunReport, threshold: int) -> list[str]:
    """Unsharded leaves with the static findings that likely explain them."""
    explained = [leaf for leaf in run.unsharded(threshold) if leaf.get("reasons")]
    if not explained:
        return []
    lines = [f"  likely causes of unsharded leaves at {_label(run)} (static analysis)"]
    for leaf in explained[:_TOP_LEAVES]:
        held = "replicated" if leaf["replicated"] else leaf["spec"]
        lines.append(f"    {leaf['path']}  {format_bytes(leaf['per_device'])}/device, {held}")
        for r in leaf["reasons"]:
            lines.append(f"      {r['code']} at {r['path']}:{r['line']}: {r['because']}")
    if len(explained) > _TOP_LEAVES:
        lines.append(f"    ... {len(explained) - _TOP_LEAVES} more leaves")
    for r in distinct(explained):
        lines.append(f"    {r['code']} {r['path']}:{r['line']}:{r['column'] + 1}: {r['message']}")
    return lines


def _counts(runs: list[RunReport]) -> str:
    counts = [str(r.devices) for r in runs]
    return f"{', '.join(counts)} device{'s' if counts != ['1'] else ''}"


def _error_lines(runs: list[RunReport]) -> list[str]:
    err = runs[0].error
    assert err is not None
    lines = [f"  error at {_counts(runs)} ({err.kind}): {err.message.splitlines()[0]}"]
    lines += [f"    {line}" for line in err.message.splitlines()[1:]]
    if err.traceback:
        lines += [f"    {line}" for line in err.traceback.splitlines()]
    if err.log:
        lines.append("    worker output (tail):")
        lines += [f"      {line}" for line in err.log.splitlines()[-20:]]
    return lines


def render_probe(
    report: MemoryReport, probe: ProbeReport, findings: list[dict[str, Any]]
) -> list[str]:
    runs = probe.runs
    ok = probe.ok_runs
    env = next((r.environment for r in runs if r.environment), {})
    kind = next((r.kind for r in ok), "")
    details = [f"line {probe.probe.line}", kind or "not compiled"]
    target = env.get("target") or {}
    if target:
        name = target.get("requested") or target.get("target", "?")
        details += [f"tpu-{name} (TPU compiler, libtpu {target.get('libtpu', '?')}, on this "
                    "host)", f"jax {env.get('jax', '?')}"]
    elif env.get("backend"):
        simulated = " (simulated devices)" if report.platform == "cpu" else ""
        details += [f"{env['backend']}{simulated}", f"jax {env.get('jax', '?')}"]
    head = f"{probe.display}  ({'; '.join(details)})"
    lines = [head]
    if ok:
        lines += _grid(_figure_rows(report, probe, ok), align="ll" + "r" * len(ok))
        lines.append("")
        lines += _grid(_group_rows(probe, ok, report.replicated_threshold))
        widest = ok[-1]
        if widest.leaves:
            lines.append("")
            lines.append(f"  largest leaves at {_label(widest)}")
            lines += _grid(
                _leaf_rows(widest, report.replicated_threshold), indent="    ", align="rllll"
            )
            lines += _reason_lines(widest, report.replicated_threshold)
        for run in ok:
            if run.collectives:
                counts = ", ".join(f"{k} x{v}" for k, v in sorted(run.collectives.items()))
                lines.append(f"  collectives at {_label(run)}: {counts}")
    # The same failure or print at every device count is shown once.
    errors: dict[tuple[str, str, str], list[RunReport]] = {}
    printed: dict[str, list[RunReport]] = {}
    for run in runs:
        if run.error is not None:
            errors.setdefault(
                (run.error.kind, run.error.message, run.error.traceback or ""), []
            ).append(run)
        # A probe that printed and then ran is a "printed" error whose message shows the lines;
        # one that printed and then raised shows them here, next to its error.
        if run.printed.strip() and (run.error is None or run.error.kind != "printed"):
            printed.setdefault(run.printed.strip(), []).append(run)
    for same in errors.values():
        lines += _error_lines(same)
    for text, same in printed.items():
        lines.append(f"  the probe printed to stdout before it failed, at {_counts(same)}:")
        lines += [f"    | {line}" for line in text.splitlines()[-10:]]
    # Failures (SHL900) are already printed above with their traceback.
    mine = [
        f
        for f in findings
        if f["probe"] == probe.probe.function
        and f["line"] == probe.probe.line
        and f["code"] != "SHL900"
    ]
    if mine:
        lines.append("  findings")
        for f in mine:
            lines.append(f"    {f['severity']} {f['code']} {f['name']}: {f['message']}")
    lines += _saving_lines(probe, ok)
    for run in runs:  # a step the TPU compiler refused gets its search too
        lines += fit_lines(run)
    return lines


def _saving_lines(probe: ProbeReport, ok: list[RunReport]) -> list[str]:
    """What fixing each finding the probe reaches saves: peak estimate before -> after."""
    if not probe.savings or not ok:
        return []
    lines = ["", "  what fixing the findings it reaches saves (compiled again with each remedy, "
             "in this order; peak estimate per device)"]
    rows = [["finding", *(_label(r) for r in ok)]]
    notes: list[str] = []
    for saving in probe.savings:
        step = saving.step
        label = f"{step.code} {step.path}:{step.line}"
        cells = []
        for run in ok:
            got = saving.runs.get(run.devices)
            if got is not None:
                cells.append(f"{format_bytes(got['before']['peak'])} -> "
                             f"{format_bytes(got['after']['peak'])}")
            else:
                cells.append("-")
        rows.append([label, *cells])
        why = step.why if step.remedy is None else next(iter(saving.errors.values()), "")
        remedy = describe(step)
        notes.append(f"    {label}: {remedy if step.remedy else 'no remedy: ' + why}"
                     + (f" (not applied: {why})" if step.remedy is not None and why else ""))
    if probe.together:
        cells = []
        for run in ok:
            got = probe.together.get(run.devices)
            cells.append(f"{format_bytes(got['before']['peak'])} -> "
                         f"{format_bytes(got['after']['peak'])}" if got else "-")
        rows.append(["all together", *cells])
    lines += _grid(rows, indent="    ", align="l" + "r" * len(ok))
    return lines + notes


def render_text(report: MemoryReport, findings: list[dict[str, Any]]) -> str:
    blocks = []
    for probe in report.probes:
        blocks.append("\n".join(render_probe(report, probe, findings)))
    backends = {r.backend for p in report.probes for r in p.runs if r.backend}
    legend = "exact: depends only on shapes, dtypes and shardings (same on any backend)."
    if "cpu" in backends:
        legend += (
            " estimate: from the CPU compiler; a GPU/TPU compiler fuses and schedules differently."
        )
    if backends - {"cpu"}:
        legend += " gpu/tpu compiler: that compiler's own figures (its peak is an upper bound)."
    methods = {(r.measured or {}).get("method") for p in report.probes for r in p.runs
               if r.measured_peak is not None}
    if "headroom" in methods:
        legend += (
            " measured peak (headroom): the step run on the device beside a filler, bisected"
            " until it no longer runs; the figure is the bracket's upper end (the TPU's"
            " peak_bytes_in_use leaves temporaries out)."
        )
    if methods - {"headroom"}:
        legend += (
            " measured peak (run once): the allocator's peak_bytes_in_use after running the step"
            " once on zeros of its inputs."
        )
    if report.capacity is not None and report.hardware and not report.hardware.startswith("TPU"):
        legend += (
            " On GPUs JAX takes 75% of memory by default"
            " (XLA_PYTHON_CLIENT_PREALLOCATE=false or XLA_CLIENT_MEM_FRACTION change that)."
        )
    if report.static_note:
        legend += f"\nnote: {report.static_note}"
    code = report.exit_code()
    verdict = {
        0: "all probes ran" + (" and fit" if report.capacity else ""),
        1: "a probe does not fit the capacity",
        2: "a probe failed",
    }[code]
    return "\n\n".join(blocks) + f"\n\n{legend}\n{verdict}\n"
