"""The `--fit` section of each report format: text lines, a JSON object, an HTML fragment."""

from __future__ import annotations

import html
from typing import Any

from shardlint.memory.plan import describe, headline
from shardlint.memory.units import format_bytes

_SPACE = ("the space searched: the rules table's rows (each mapped to another mesh axis, to "
          "several, or to none; rows added for logical names it lacks) and the factorisations "
          "of the device count over the mesh axes")


def _comm(plan: dict[str, Any], base: dict[str, Any] | None) -> str:
    got = plan.get("collectives") or {}
    before = (base or {}).get("collectives") or {}
    parts = []
    for kind, c in got.items():
        was = before.get(kind, {"count": 0, "bytes": 0})
        dc, db = c["count"] - was["count"], (c.get("bytes") or 0) - (was.get("bytes") or 0)
        if dc or db:
            sign = "+" if db >= 0 else "-"
            parts.append(f"{kind} {dc:+d} ({sign}{format_bytes(abs(db))})")
    return ", ".join(parts) or "no change"


def peak_text(plan: dict[str, Any] | None) -> str:
    """A plan's peak; a step the TPU compiler refused has a floor, not a figure."""
    plan = plan or {}
    shown = format_bytes(plan.get("peak_bytes") or 0)
    return f"at least {shown} (refused by the TPU compiler)" if plan.get("refused") else shown


def fit_lines(run: Any) -> list[str]:
    fit = run.fit
    if not fit:
        return []
    label = f"{run.devices} device{'s' * (run.devices != 1)}"
    lines = ["", f"  fit at {label}: {headline(fit) or fit.get('status')}"]
    status = fit.get("status")
    if status == "error":
        return lines
    base = fit.get("baseline")
    plans = fit.get("plans") or []
    for i, plan in enumerate(plans, 1):
        lines.append(f"    plan {i}: {len(plan['changes'])} change(s): "
                     f"{describe(plan['changes'])}; peak {peak_text(base)} -> "
                     f"{format_bytes(plan['peak_bytes'])}; mesh "
                     + ", ".join(f"{a}={n}" for a, n in plan["mesh"].items())
                     + (f"; collectives: {_comm(plan, None)} (the refused step has none "
                        "counted)" if base.get("refused") else
                        f"; collectives added: {_comm(plan, base)}"))
    coded = next(((i, p) for i, p in enumerate(plans, 1)
                  if p.get("code") and any(c["kind"] == "rule" for c in p["changes"])), None)
    if coded is not None:
        i, plan = coded
        name = (fit.get("table") or {}).get("name", "RULES")
        lines.append(f"    plan {i}'s table as code ({name} = ...)"
                     + (", with the mesh it names" if any(c["kind"] == "mesh"
                                                          for c in plan["changes"]) else "")
                     + ":")
        lines += ["      " + line for line in f"{name} = {plan['code']}".splitlines()]
    if status == "none":
        best = fit.get("best") or {}
        lines.append(f"    stopped: {'budget spent' if fit.get('stopped') == 'budget' else 'nothing left to try'}"
                     f"; best plan: {describe(best.get('changes', []))}, peak "
                     f"{peak_text(best)}")
        dominant = best.get("dominant") or []
        if dominant:
            lines.append("    what its peak is made of: " + ", ".join(
                f"{d['what']} {format_bytes(d['bytes'])}"
                + (f" (largest {d['largest']}, {d['spec']})" if d.get("largest") else "")
                for d in dominant))
    if status != "fits":
        lines.append(f"    {fit.get('compiles', 0)} compile(s) in {fit.get('seconds', 0):.1f} s "
                     f"(budget {fit['budget']['compiles']} compiles, "
                     f"{fit['budget']['seconds']:g} s); {_SPACE}")
    if fit.get("rules_note"):
        lines.append(f"    rules not varied: {fit['rules_note']}")
    if fit.get("mesh_note"):
        lines.append(f"    mesh not varied: {fit['mesh_note']}")
    lines.append("    collectives are counted as written in the compiled module (a loop body "
                 "once); bytes are per device")
    return lines


def fit_json(fit: dict[str, Any] | None) -> dict[str, Any] | None:
    if not fit:
        return None

    def plan(p: dict[str, Any] | None) -> dict[str, Any] | None:
        if p is None:
            return None
        out = {k: p.get(k) for k in ("rules", "mesh", "peak_bytes", "fits", "changes",
                                     "collectives")}
        if p.get("refused"):
            out["refused"] = True  # peak_bytes is a floor: the TPU compiler refused the step
        for k in ("code", "dominant"):
            if k in p:
                out[k] = p[k]
        return out

    keys = ("status", "capacity", "budget", "compiles", "failed_compiles", "seconds",
            "stopped", "rules_name", "mesh_axes", "rules_note", "mesh_note", "table",
            "message", "trail")
    out = {k: fit[k] for k in keys if k in fit}
    out["baseline"] = plan(fit.get("baseline"))
    out["plans"] = [plan(p) for p in fit.get("plans") or []]
    if fit.get("best") is not None:
        out["best"] = plan(fit["best"])
    return out


def fit_html(run: Any) -> str:
    lines = fit_lines(run)
    if not lines:
        return ""
    head, *rest = [line for line in lines if line]
    return (f"<h3>{html.escape(head.strip())}</h3>"
            f"<pre>{html.escape(chr(10).join(line[4:] for line in rest))}</pre>")
