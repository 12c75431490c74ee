"""Measured savings: each static finding a probe reaches, compiled again with its remedy.

Before the workers start, the static engine (in shardlint's own process: it only reads source)
lists the findings the probe reaches (the code it runs, `reach.py`, and the findings that exist
because the worker calls the probe with no context, `own_call.py`), and turns each into a
remedy the worker can apply without touching the user's files (`remedies.py`):

=========  ===========================================================  ===================
finding    remedy                                                       needs
=========  ===========================================================  ===================
SHL103     the step is traced under ``jax.set_mesh(M)``                 one mesh in the run
SHL102     the step is traced under ``nn.logical_axis_rules(R)``        one literal table
SHL302/3   the jit call gets ``out_shardings`` from the partition specs partition metadata
SHL401     the jit call gets the ``donate_argnums`` the finding names   the argnums
=========  ===========================================================  ===================

Other findings (a missing partition name, an axis with no rule, a legacy ``with mesh:``) need
a choice only the author can make, so they get no remedy and the report says so.

Remedies accumulate in that order (contexts first: shardings are derived under them): the
worker compiles the probe once per remedy, with the remedies before it that applied, so a
finding's saving is what its fix saves once the earlier ones are in, and the last step is all
of them together. That is at most one compile per finding per device count.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from shardlint.memory.own_call import own_call_findings
from shardlint.memory.probes import Probe, relative_path
from shardlint.memory.reach import Reach
from shardlint.memory.units import format_bytes

if TYPE_CHECKING:
    from shardlint.memory.report import MemoryReport, ProbeReport

KINDS = {"SHL103": "mesh", "SHL102": "rules", "SHL302": "out-shardings",
         "SHL303": "out-shardings", "SHL401": "donate"}
_ORDER = {"mesh": 0, "rules": 1, "out-shardings": 2, "donate": 3}
# Findings a probe can reach whose remedy is the author's choice: said, never guessed.
NOT_MECHANICAL = {
    "SHL101": "the legacy `with mesh:` is the probe's own code; shardlint does not rewrite it",
    "SHL201": "which mesh axis the logical name should map to is the author's choice",
    "SHL203": "the name of the stacked axis (and its rule) is the author's choice",
    "SHL204": "which tree the specs should be read from is the author's choice",
}
CODES = frozenset({*KINDS, *NOT_MECHANICAL})
_DONATE = re.compile(r"donate_argnums=(\([^)]*\)|\d+)")


@dataclass
class Step:
    """One finding the probe reaches, and its remedy (None: `why` says why there is none)."""

    code: str
    name: str
    path: str  # relative to the report's root, as the findings show it
    abspath: Path
    line: int
    column: int
    message: str
    remedy: dict[str, Any] | None = None
    why: str = ""

    @property
    def id(self) -> str:
        return f"{self.code}:{self.path}:{self.line}:{self.column}"

    @property
    def key(self) -> tuple[str, str, int, int]:
        return (self.code, self.path, self.line, self.column)


@dataclass
class Saving:
    """What one finding's remedy saves per device count (None where it did not apply)."""

    step: Step
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)  # devices -> before/after
    errors: dict[int, str] = field(default_factory=dict)  # devices -> why it did not apply
    after: list[str] = field(default_factory=list)  # codes of the remedies applied before it
    # devices -> backend compiles its run took: "step" (the probe's step: at most 1), "probe"
    # (the probe's own eager code, compiled again under a new context), "total"
    compiles: dict[int, dict[str, int]] = field(default_factory=dict)
    cached: set[int] = field(default_factory=set)  # device counts answered by the cache

    def saved(self, devices: int) -> int | None:
        run = self.runs.get(devices)
        return run["saved"] if run else None

    @property
    def best(self) -> int:
        return max((r["saved"] for r in self.runs.values()), default=0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.step.code,
            "path": self.step.path,
            "line": self.step.line,
            "column": self.step.column,
            "remedy": describe(self.step),
            "applied_after": self.after,
            "devices": {str(n): r for n, r in sorted(self.runs.items())},
            "not_applied": {str(n): why for n, why in sorted(self.errors.items())}
            or ({"all": self.step.why} if self.step.remedy is None else {}),
            "compiles": {str(n): c for n, c in sorted(self.compiles.items())},
            # Device counts whose figures come from the what-if cache (compiled in an earlier
            # run with the same sources, remedies and baseline): nothing compiled for them now.
            "cached": sorted(self.cached),
        }


def describe(step: Step) -> str:
    r = step.remedy
    if r is None:
        return f"none: {step.why}"
    if r["kind"] == "mesh":
        return "trace the step under jax.set_mesh(mesh), the mesh its values are placed on"
    if r["kind"] == "rules":
        return f"trace the step under nn.logical_axis_rules({r['source']})"
    if r["kind"] == "out-shardings":
        return "jit with out_shardings from the partition specs of the abstract output"
    return f"jit with donate_argnums={tuple(r['argnums'])}"


def _argnums(finding: Any) -> list[int] | None:
    texts = [finding.message]
    if finding.fix is not None:
        texts.extend(e.text for e in finding.fix.edits)
    for text in texts:
        match = _DONATE.search(text)
        if match:
            try:
                value = ast.literal_eval(match.group(1))
            except (ValueError, SyntaxError):
                continue
            value = (value,) if isinstance(value, int) else value
            if all(isinstance(v, int) for v in value):
                return list(value)
    return None


def _rules_tables(engine: Any, reach: Reach) -> list[tuple[list, str]]:
    """The distinct literal rules tables of the files the probe reaches, with where."""
    files = {p.resolve() for p in reach.files}
    found: list[tuple[list, str]] = []
    for summary in engine.index.summaries.values():
        path = Path(summary.path)
        if path.resolve() not in files:
            continue
        for table in summary.rule_tables:
            if table is not None and all(t != table for t, _ in found):
                found.append((table, path.name))
    return found


def plan(probe: Probe, engine: Any, reach: Reach, root: Path) -> list[Step]:
    """The findings the probe reaches, each with its remedy, in the order they are applied."""
    findings = [
        (f, f.message) for f in engine.lint_paths(reach.files)
        if f.code in CODES and reach.contains(Path(f.path).resolve(), f.span.line)
    ]
    findings += own_call_findings(engine, probe)
    steps: dict[tuple[str, str, int, int], Step] = {}
    tables = None
    for f, message in findings:
        path = Path(f.path).resolve()
        step = Step(f.code, f.name, relative_path(path, root), path, f.span.line, f.span.col,
                    message)
        if step.key in steps:
            continue
        steps[step.key] = step
        kind = KINDS.get(f.code)
        if kind is None:
            step.why = NOT_MECHANICAL[f.code]
            continue
        remedy: dict[str, Any] = {"id": step.id, "kind": kind, "path": str(path),
                                  "line": f.span.line, "end_line": f.span.end_line}
        if kind == "rules":
            tables = _rules_tables(engine, reach) if tables is None else tables
            if len(tables) != 1:
                step.why = ("no literal rules table in the code the probe reaches" if not tables
                            else f"{len(tables)} different rules tables in the code the probe "
                            "reaches: which one is meant is not known")
                continue
            remedy["rules"], remedy["source"] = tables[0][0], f"the table in {tables[0][1]}"
        elif kind == "donate":
            argnums = _argnums(f)
            if argnums is None:
                step.why = "the finding names no donate_argnums"
                continue
            remedy["argnums"] = argnums
        step.remedy = remedy
    ordered = sorted(steps.values(), key=lambda s: (
        _ORDER[s.remedy["kind"]] if s.remedy else 9, s.path, s.line, s.column, s.code))
    contexts: set[str] = set()
    for s in ordered:  # one mesh (one rules) context serves every finding of that kind
        kind = s.remedy["kind"] if s.remedy else ""
        if kind in ("mesh", "rules"):
            if kind in contexts:
                s.remedy, s.why = None, f"the same {kind} context as the {s.code} before it"
            contexts.add(kind)
    return ordered


def plans_for(probes: list[Probe], root: Path,
              sources: dict[str, str] | None = None) -> tuple[dict[str, list[Step]], str | None]:
    """Steps per probe key (paths shown relative to ``root``), and a note when the static
    analysis could not run (the probes then run without what-if compiles). ``sources`` is
    filled with a digest per probe key of the text of every file the probe reaches."""
    from shardlint import config as config_mod
    from shardlint.engine import Engine
    from shardlint.memory.reach import probe_reach

    out: dict[str, list[Step]] = {}
    try:
        engines: dict[Path, Any] = {}
        for probe in probes:
            config = config_mod.load(probe.path)
            engine = engines.get(config.root) or engines.setdefault(config.root, Engine(config))
            reach = probe_reach(probe.path, probe.function, config.root)
            out[probe.key] = plan(probe, engine, reach, root)
            if sources is not None:
                sources[probe.key] = _digest_of(sorted({probe.path.resolve(), *reach.files}))
    except Exception as exc:  # noqa: BLE001 - the figures stand without what-ifs
        return {}, f"the static analysis could not run ({type(exc).__name__}: {exc})"
    return out, None


def _digest_of(files: list[Path]) -> str:
    h = hashlib.sha256()
    for path in files:
        try:
            data = path.read_bytes()
        except OSError:
            data = b"\0missing"
        h.update(f"{path}\0{len(data)}\0".encode("utf-8", "surrogatepass"))
        h.update(data)
    return h.hexdigest()


# ---- the what-if cache ------------------------------------------------------------------------------
CACHE_FILE = "whatif-v1.json"
_CACHE_ENTRIES = 256


class WhatIfCache:
    """What-if results by the sources a probe reaches, its remedies, the device count and the
    interpreter, in the project's cache folder outside it. An entry also holds the fingerprint
    of the baseline compile it followed (jax's version and the baseline's figures): the worker
    compiles the baseline every time, and skips the what-ifs only when that fingerprint is the
    same, so an upgraded jax or anything the key cannot see recompiles them."""

    def __init__(self, root: Path) -> None:
        from shardlint.cache import workspace_cache_dir

        self.path = workspace_cache_dir(root) / CACHE_FILE
        self.entries: dict[str, dict[str, Any]] = {}
        self.dirty = False
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        if isinstance(data, dict) and isinstance(data.get("entries"), dict):
            self.entries = data["entries"]

    @staticmethod
    def key(probe: Probe, sources: str, remedies: list[dict[str, Any]], devices: int,
            options: Any) -> str:
        text = json.dumps([probe.key, sources, remedies, devices, options.python,
                           options.platform], sort_keys=True, default=str)
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def put(self, key: str, fingerprint: str, events: list[dict[str, Any]]) -> None:
        self.entries.pop(key, None)
        self.entries[key] = {"fingerprint": fingerprint, "events": events}
        while len(self.entries) > _CACHE_ENTRIES:
            del self.entries[next(iter(self.entries))]
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        from shardlint.fsio import write_atomic

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, json.dumps({"entries": self.entries}, separators=(",", ":")))
            self.dirty = False
        except OSError:
            pass  # a read-only cache folder: the what-ifs just run again next time


@dataclass
class Prepared:
    """What ``prepare`` planned, for ``finish`` after the runs."""

    plans: dict[str, list[Step]] = field(default_factory=dict)
    note: str | None = None
    cache: WhatIfCache | None = None
    keys: dict[tuple[str, int], str] = field(default_factory=dict)  # (probe, devices) -> key


def prepare(probes: list[Probe], root: Path, counts: tuple[int, ...], options: Any,
            use_cache: bool = True) -> tuple[Any, Prepared]:
    """The worker options that carry each probe's remedies (and the fingerprints of cached
    results), and the plan for ``finish``."""
    import dataclasses

    sources: dict[str, str] = {}
    plans, note = plans_for(probes, root, sources)
    sent = requests(plans)
    prepared = Prepared(plans, note)
    fingerprints: dict[str, str] = {}
    if sent and use_cache:
        try:
            prepared.cache = WhatIfCache(root)
        except Exception:  # noqa: BLE001 - no cache folder: the what-ifs run every time
            prepared.cache = None
    if prepared.cache is not None:
        for probe in probes:
            if probe.key not in sent:
                continue
            for n in counts:
                key = WhatIfCache.key(probe, sources.get(probe.key, ""), sent[probe.key], n,
                                      options)
                prepared.keys[(probe.key, n)] = key
                entry = prepared.cache.entries.get(key)
                if entry is not None:
                    fingerprints[f"{probe.key}@{n}"] = entry["fingerprint"]
    return dataclasses.replace(options, whatif=sent, whatif_cached=fingerprints), prepared


def finish(runs: list[Any], prepared: Prepared) -> None:
    """Fill in the what-ifs a worker skipped because its baseline matched a cached entry, and
    store the ones that ran."""
    cache = prepared.cache
    if cache is None:
        return
    for run in runs:
        key = prepared.keys.get((run.probe.key, run.devices))
        fingerprint = (run.facts or {}).get("whatif_fingerprint")
        if key is None or fingerprint is None:
            continue
        entry = cache.entries.get(key)
        if (run.facts or {}).get("whatif_cached") and entry is not None and \
                entry["fingerprint"] == fingerprint:
            run.whatifs = [{**e, "cached": True} for e in entry["events"]]
        elif run.whatifs:
            cache.put(key, fingerprint, [e for e in run.whatifs if not e.get("cached")])
    cache.save()


def requests(plans: dict[str, list[Step]]) -> dict[str, list[dict[str, Any]]]:
    """What the worker is sent: the remedies per probe key, in order."""
    return {key: [s.remedy for s in steps if s.remedy] for key, steps in plans.items()
            if any(s.remedy for s in steps)}


def _figures(memory: dict[str, Any]) -> dict[str, int]:
    from shardlint.memory.report import Figures

    f = Figures.from_dict(memory)
    return {"arguments": f.argument, "outputs": f.output, "aliased": f.alias,
            "temporaries": f.temp, "peak": f.estimate}


def savings(probe: ProbeReport, steps: list[Step]) -> list[Saving]:
    """Each step's saving per device count, from the what-if figures the runs brought back."""
    out = [Saving(s) for s in steps]
    by_id = {s.step.id: s for s in out}
    for run in probe.runs:
        if run.figures is None or run.error is not None:
            continue
        before = _figures(run.memory) if run.memory else None
        applied: list[str] = []
        for event in run.whatifs:
            saving = by_id.get(event.get("id", ""))
            if saving is None:
                continue
            got = event.get("compiles") or {}
            saving.compiles[run.devices] = {k: int(got.get(k) or 0)
                                            for k in ("step", "probe", "total")}
            if event.get("cached"):
                saving.cached.add(run.devices)
            if not event.get("ok") or before is None:
                error = event.get("error") or {}
                saving.errors[run.devices] = error.get("message", "the what-if compile failed")
                continue
            after = _figures(event["memory"])
            saving.runs[run.devices] = {"before": before, "after": after,
                                        "saved": before["peak"] - after["peak"]}
            saving.after = list(applied)
            applied.append(saving.step.code)
            before = after
    return out


def together(probe: ProbeReport, found: list[Saving]) -> dict[int, dict[str, Any]]:
    """Per device count: the baseline and the figures with every remedy that applied."""
    out: dict[int, dict[str, Any]] = {}
    for run in probe.ok_runs:
        done = [s.runs[run.devices] for s in found if run.devices in s.runs]
        if done and run.memory:
            before, after = _figures(run.memory), done[-1]["after"]
            out[run.devices] = {"before": before, "after": after,
                                "saved": before["peak"] - after["peak"]}
    return out


def attach(report: MemoryReport, plans: dict[str, list[Step]]) -> None:
    for probe in report.probes:
        steps = plans.get(probe.probe.key, [])
        probe.savings = savings(probe, steps) if steps else []
        probe.together = together(probe, probe.savings)


def summary(saving: Saving, probe: str) -> str | None:
    """The sentence a finding's message gets, or None when nothing was compiled for it."""
    if not saving.runs:
        return None
    parts = []
    for n, r in sorted(saving.runs.items()):
        b, a = r["before"]["peak"], r["after"]["peak"]
        parts.append(f"{format_bytes(b)} -> {format_bytes(a)} at {n} device{'s' * (n > 1)}")
    after = f" with the remedies of {', '.join(saving.after)} already applied" \
        if saving.after else ""
    best = saving.best
    verb = f"saves up to {format_bytes(best)} per device" if best > 0 else "saves nothing" \
        if best == 0 else f"costs {format_bytes(-best)} per device"
    return (f"(memory check, probe `{probe}`: fixing it {verb}{after}; peak estimate "
            f"{'; '.join(parts)})")
