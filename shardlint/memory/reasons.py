"""Why a measured leaf is not sharded, where the static analysis knows: findings tied to leaves.

After the workers have measured, the static engine runs here, in shardlint's own process (it only
reads source), over the files a probe reaches (`reach.py`). A finding explains a leaf only when
both hold:

- it lies in code the probe runs: a definition the probe reaches, or, for the context rules
  (SHL101-SHL103), the probe's own call: the worker calls a probe with no axis rules and no mesh,
  so the probe file is linted once more with that call appended, and a context finding whose
  chain of callers ends at that call is the probe's own;
- it speaks about that leaf: SHL201 names an axis the leaf's partition names hold; SHL101-SHL103
  explain leaves with partition names (the annotations that need the context) or model
  parameters; SHL203 leaves with an unnamed stacked dimension; SHL204 and SHL302 parameters;
  SHL303 optimizer state.

Anything else gives no reason: a missing reason is better than a wrong one. The link is always a
"likely cause": the engine reads code, the worker measured what it compiled, and the two are
matched by location and names, not proven equal. SHL304 (single-device placement) and SHL306
(captured constants) are not used: the first places a value the step receives already placed,
the second bakes a constant into the executable, so neither is a leaf of the report.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shardlint.memory.own_call import CONTEXT_CODES, own_call_findings
from shardlint.memory.probes import Probe, relative_path
from shardlint.memory.reach import Reach, probe_reach
from shardlint.memory.report import MemoryReport, build_report
from shardlint.memory.whatif import attach

if TYPE_CHECKING:
    from shardlint.memory.runner import ProbeRun
    from shardlint.memory.settings import MemorySettings

CODES = frozenset({*CONTEXT_CODES, "SHL201", "SHL203", "SHL204", "SHL302", "SHL303"})
LINK = "likely cause"
_AXIS = re.compile(r"axis name '([^']+)'")
_PARAMS = re.compile(r"(?:^|[\['.])(?:params|variables)\b")
_OPT_STATE = re.compile(r"(?:^|[\['.])(?:opt_state|optimizer_state|mu|nu)\b")


def because(code: str, message: str, leaf: dict[str, Any]) -> str | None:
    """How finding `code` explains this unsharded leaf, or None when it does not speak about it."""
    names: list[str | None] = list(leaf.get("partition_names") or [])
    named = [n for n in names if n]
    path = leaf["path"]
    params = bool(_PARAMS.search(path)) and not _OPT_STATE.search(path)
    opt_state = bool(_OPT_STATE.search(path))
    if code == "SHL201":
        match = _AXIS.search(message)
        if match and match.group(1) in named:
            return f"its dimension named '{match.group(1)}' has no rule, so it is not split"
        return None
    if code in CONTEXT_CODES:
        if named and not (code == "SHL102" and leaf.get("partition_kind") == "mesh"):
            shown = ", ".join(n or "None" for n in names)
            return f"its partition names ({shown}) take effect only with {CONTEXT_CODES[code]}"
        if not named and params:
            return "it is a parameter of the model run there"
        return None
    if code == "SHL203":
        if named and None in names:
            return "its stacked dimension has no partition name"
        return None
    if code == "SHL204" and not named and (params or opt_state):
        return "it was placed with a spec read from an unboxed tree: P()"
    if code == "SHL302" and (params or (named and not opt_state)):
        return "it comes from a jitted init with no out_shardings"
    if code == "SHL303" and opt_state:
        return "it comes from a jitted optimizer init with no out_shardings"
    return None


def _record(finding: Any, root: Path, message: str | None = None) -> dict[str, Any]:
    return {
        "code": finding.code,
        "name": finding.name,
        "message": message or finding.message,
        "path": relative_path(Path(finding.path).resolve(), root),
        "line": finding.span.line,
        "column": finding.span.col,
        "link": LINK,
    }


def _own_call(engine: Any, probe: Probe, root: Path) -> list[dict[str, Any]]:
    return [_record(f, root, message) for f, message in own_call_findings(engine, probe)]


def _call_name(tree: ast.AST, line: int, col: int) -> str:
    """Name of the innermost call around a position ("" if none): `nn.f(x, ("a",))` -> "f"."""
    best: tuple[int, int, str] | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or node.end_lineno is None:
            continue
        start, end = (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset or 0)
        if start <= (line, col) <= end:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            size = (node.end_lineno - node.lineno, (node.end_col_offset or 0) - node.col_offset)
            if best is None or size < best[:2]:
                best = (*size, name)
    return best[2] if best else ""


def _about_values(finding: Any, trees: dict[str, ast.AST | None]) -> bool:
    """SHL201 at `with_logical_constraint`: about an activation, never a parameter's names."""
    if finding.code != "SHL201":
        return False
    if finding.path not in trees:
        try:
            trees[finding.path] = ast.parse(Path(finding.path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            trees[finding.path] = None
    tree = trees[finding.path]
    return tree is not None and "constraint" in _call_name(
        tree, finding.span.line, finding.span.col
    )


def static_reasons(probe: Probe, engine: Any, reach: Reach, root: Path) -> list[dict[str, Any]]:
    """Findings of CODES in code the probe reaches, as plain records."""
    trees: dict[str, ast.AST | None] = {}
    found = [
        _record(f, root)
        for f in engine.lint_paths(reach.files)
        if f.code in CODES
        and reach.contains(Path(f.path).resolve(), f.span.line)
        and not _about_values(f, trees)
    ]
    found += _own_call(engine, probe, root)
    unique: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    for record in found:
        unique.setdefault(
            (record["code"], record["path"], record["line"], record["column"]), record
        )
    return sorted(unique.values(), key=lambda r: (r["path"], r["line"], r["code"]))


def explained_report(runs: list[ProbeRun], probes: list[Probe], counts: tuple[int, ...],
                     settings: MemorySettings, root: Path,
                     plans: dict[str, list[Any]] | None = None) -> MemoryReport:
    """The report of measured runs under ``settings`` (platform, hardware, capacity, threshold),
    each unsharded leaf tied to the static finding that likely explains it, and each finding a
    probe reaches with what its remedy saved (``plans``: whatif.plans_for, sent with the runs):
    what the CLI, the measured findings of ``check --memory`` and the editor all show."""
    report = build_report(runs, probes, counts, platform=settings.platform,
                          hardware=settings.hardware, capacity=settings.capacity,
                          replicated_threshold=settings.replicated_threshold, root=root)
    report.static_note = attach_reasons(report)
    if plans:
        attach(report, plans)
    return report


def attach_reasons(report: MemoryReport) -> str | None:
    """Set `leaf["reasons"]` on every unsharded leaf a static finding explains.

    Returns None, or a one-line note when the static analysis could not run (the measured report
    stands on its own either way). Nothing runs for a report without unsharded leaves.
    """
    wanted = [
        probe
        for probe in report.probes
        if any(run.unsharded(report.replicated_threshold) for run in probe.ok_runs)
    ]
    if not wanted:
        return None
    try:
        from shardlint import config as config_mod
        from shardlint.engine import Engine

        engines: dict[Path, Any] = {}
        for probe in wanted:
            config = config_mod.load(probe.probe.path)
            engine = engines.get(config.root) or engines.setdefault(config.root, Engine(config))
            reach = probe_reach(probe.probe.path, probe.probe.function, config.root)
            shown_root = report.root or config.root
            reasons = static_reasons(probe.probe, engine, reach, shown_root)
            _attach(probe.ok_runs, reasons, report.replicated_threshold)
    except Exception as exc:  # noqa: BLE001 - a static-analysis failure must not hide the figures
        return f"the static analysis could not run ({type(exc).__name__}: {exc}); no causes shown"
    return None


def distinct(leaves: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings behind these leaves, each once (without the per-leaf `because`)."""
    seen: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    for leaf in leaves:
        for r in leaf.get("reasons", ()):
            key = (r["code"], r["path"], r["line"], r["column"])
            seen.setdefault(key, {k: v for k, v in r.items() if k != "because"})
    return list(seen.values())


def _attach(runs: Iterable[Any], reasons: list[dict[str, Any]], threshold: int) -> None:
    for run in runs:
        for leaf in run.unsharded(threshold):
            tied = []
            for reason in reasons:
                why = because(reason["code"], reason["message"], leaf)
                if why is not None:
                    tied.append({**reason, "because": why})
            if tied:
                leaf["reasons"] = tied
