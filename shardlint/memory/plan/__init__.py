"""`shardlint memory --fit`: a rules table and mesh shape that make the step fit, measured.

- ``space.py`` (here, reading source): the probe's literal rules table, or why it cannot vary;
- ``search.py`` (in the worker, loaded by path): the budgeted search, each candidate an AOT
  compile of the probe with its table rebound and its mesh reshaped;
- ``collectives.py`` (in the worker): collectives and their bytes from the compiled HLO text;
- ``table.py`` (here): a plan's table as code, changed rows marked.

This module is the glue between them: what the worker is sent, and the plans it brings back
turned into code (``attach``).

Holds: the planner of ``--fit`` (the search space, the search, the collectives count, the
table as code, and the prediction that ranks candidates before they are compiled).

May import: its own modules and ``memory.units``; the worker-side modules (``search``,
``hooks``, ``predict``, ``collectives``) import jax and nothing of shardlint's, since the worker
loads them by path in the user's interpreter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shardlint.memory.plan.space import RulesTable, rules_table
from shardlint.memory.plan.table import statement_indent, table_code

SEARCH = Path(__file__).with_name("search.py")
DEFAULT_COMPILES = 40
DEFAULT_SECONDS = 120.0


@dataclass
class FitRequest:
    """What `--fit` sends each probe's worker, and the tables it varies (for ``attach``)."""

    specs: dict[str, dict[str, Any]] = field(default_factory=dict)  # probe key -> worker spec
    tables: dict[str, RulesTable] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)  # probe key -> why its rules are fixed


def fit_request(probes: list[Any], capacity: int, compiles: int = DEFAULT_COMPILES,
                seconds: float = DEFAULT_SECONDS) -> FitRequest:
    out = FitRequest()
    for probe in probes:
        table, why = rules_table(probe.path)
        spec: dict[str, Any] = {"module": str(SEARCH), "capacity": capacity,
                                "compiles": compiles, "seconds": seconds,
                                "rules": table.to_dict() if table else None}
        if table is not None:
            out.tables[probe.key] = table
        else:
            out.notes[probe.key] = why or "no rules table"
        out.specs[probe.key] = spec
    return out


def attach(report: Any, request: FitRequest) -> None:
    """Each run's plans get their table as code; a probe whose rules cannot vary gets why."""
    for probe in report.probes:
        table = request.tables.get(probe.probe.key)
        for run in probe.runs:
            if run.fit is None:
                continue
            run.fit["rules_note"] = request.notes.get(probe.probe.key)
            if table is None:
                continue
            run.fit["table"] = {"name": table.name, "path": str(table.path),
                                "line": table.line, "col": table.col,
                                "end_line": table.end_line, "end_col": table.end_col}
            indent = statement_indent(table)
            for plan in [*run.fit.get("plans", ()), run.fit.get("best")]:
                if plan and plan.get("rules") is not None:
                    plan["code"] = table_code(table, plan["rules"], indent)


def headline(fit: dict[str, Any]) -> str | None:
    """One line: the best plan, or why there is none (for a code lens, a summary)."""
    from shardlint.memory.units import format_bytes

    status = fit.get("status")
    base = (fit.get("baseline") or {}).get("peak_bytes")
    if status == "fits":
        return "fits already: no change proposed"
    if status == "plans":
        best = fit["plans"][0]
        n = len(best["changes"])
        was = f"at least {format_bytes(base or 0)}" if fit["baseline"].get("refused") \
            else format_bytes(base or 0)
        return (f"fits with a plan: {n} change{'s' * (n != 1)} ({describe(best['changes'])}), "
                f"peak {was} -> {format_bytes(best['peak_bytes'])}")
    if status == "none":
        best = fit.get("best") or {}
        n = fit.get("compiles", 0)
        floor = "at least " if best.get("refused") else ""
        return (f"no plan fits ({n} compile{'s' * (n != 1)}); best found "
                f"{floor}{format_bytes(best.get('peak_bytes') or 0)}")
    if status == "error":
        return f"the fit search failed: {fit.get('message', '')}"
    return None


def describe(changes: list[dict[str, Any]]) -> str:
    parts = []
    for c in changes:
        if c["kind"] == "mesh":
            parts.append("mesh " + ", ".join(f"{a}={n}" for a, n in c["to"].items()))
        else:
            parts.append(f"{c['name']}: {_shown(c['from'])} -> {_shown(c['to'])}")
    return "; ".join(parts) or "none"


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return "(" + ", ".join(value) + ")"
    return "None" if value is None else str(value)
