"""Inside the worker: the budgeted search for a rules table and mesh shape that fit.

Loaded by the worker by path (the standard library only; its siblings by path too).
:func:`install` (``hooks.py``) runs before any user code, so that the mesh shape can be changed
and the logical names of the leaves are recorded. :func:`search` then compiles candidates one at
a time, each by calling the probe again with its rules table rebound
(``module.RULES = candidate``) and its mesh shape replaced; the user's files are never touched.

How the compiles are spent: every neighbour of the current plan (one rule row mapped to another
mesh axis, to several, or to none; a row added for a logical name the table lacks; another
factorisation of N over the mesh axes) gets a predicted peak without compiling: the per-device
bytes of each argument and output recomputed from its shape, its logical names and the
candidate's rules and mesh, plus the current temporaries. The step's largest leaves therefore
steer the order. The most promising neighbour is compiled; a measured peak below the current one
is kept and the search goes on from there, until the step fits or the budget (compiles, seconds)
is spent. Changes whose effect cannot be predicted (names only activations carry) are tried
after those, when temporaries are a large part of the peak. Once a plan fits, each of its
changes is reverted where the prediction says it still fits (fewer changes), and a few other
single changes predicted to fit are compiled as alternatives.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
import sys
import time
from collections.abc import Callable
from typing import Any


_HERE = os.path.dirname(os.path.abspath(__file__))
_ALTERNATIVES = 3  # single changes compiled after a plan fits, when predicted to fit too
_GAIN = 0.995  # a candidate is kept when its measured peak is below 99.5% of the current one


def _sibling(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"_shardlint_plan_{name}",
                                                  os.path.join(_HERE, f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


collectives = _sibling("collectives")
hooks_module = _sibling("hooks")
predict = _sibling("predict")
install = hooks_module.install
Hooks = hooks_module.Hooks


# ---- plans -------------------------------------------------------------------------------------
Rows = predict.Rows


def _value(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(v) if len(v) != 1 else v[0]
    return v


def _json(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def _factorisations(n: int, rank: int) -> list[tuple[int, ...]]:
    if rank == 1:
        return [(n,)]
    out = []
    for first in range(1, n + 1):
        if n % first == 0:
            out.extend((first, *rest) for rest in _factorisations(n // first, rank - 1))
    return out


def _peak(memory: dict[str, Any] | None) -> int:
    m = memory or {}
    state = (m.get("argument") or 0) + (m.get("output") or 0) - (m.get("alias") or 0)
    return max(m.get("peak") or 0, state + (m.get("temp") or 0))


class Search:
    def __init__(self, spec: dict[str, Any], base: dict[str, Any], hooks: Hooks,
                 compile_once: Callable[[], tuple[dict[str, Any], Any]],
                 base_compiled: Any, module: Callable[[], Any]) -> None:
        self.spec, self.hooks, self.compile_once, self.module = spec, hooks, compile_once, module
        self.started = time.perf_counter()
        self.capacity = int(spec["capacity"])
        self.max_compiles = int(spec.get("compiles", 40))
        self.max_seconds = float(spec.get("seconds", 120.0))
        table = spec.get("rules")
        self.name: str | None = table["name"] if table else None
        self.rows0: Rows = tuple((r[0], _value(r[1])) for r in table["rows"]) if table else ()
        self.axes, self.shape0 = self._mesh(base)
        self.mesh_note: str | None = None
        if not self.axes:
            self.mesh_note = "the step's values are not placed on one named mesh"
        elif not hooks.built:
            self.mesh_note = ("the probe builds its mesh without jax.make_mesh or "
                              "mesh_utils.create_device_mesh: its shape cannot be varied")
        self.compiles, self.failed = 0, 0
        self.trail: list[dict[str, Any]] = []  # each compile: its changes, prediction, peak
        self.last_s = 0.0
        self.measured: dict[tuple[Rows, tuple[int, ...]], dict[str, Any]] = {}
        self.names = predict.leaf_names(base.get("leaves", []), hooks.logical)
        self.base = self._record(self.rows0, self.shape0, base, base_compiled)

    # ---- what the baseline tells ----------------------------------------------------------
    @staticmethod
    def _mesh(facts: dict[str, Any]) -> tuple[tuple[str, ...], tuple[int, ...]]:
        counts: dict[str, int] = {}
        for leaf in facts.get("leaves", ()):
            if "=" in leaf.get("mesh", ""):
                counts[leaf["mesh"]] = counts.get(leaf["mesh"], 0) + 1
        if not counts:
            return (), ()
        text = max(sorted(counts), key=lambda k: counts[k])
        pairs = [p.strip().split("=") for p in text.split(",")]
        return tuple(p[0] for p in pairs), tuple(int(p[1]) for p in pairs)

    def predict(self, rows: Rows, shape: tuple[int, ...], current: dict[str, Any],
                temp: int | None = None) -> int:
        return predict.peak(current["leaves"], current["memory"] or {}, self.names, rows,
                            dict(zip(self.axes, shape)), temp)

    # ---- candidates -----------------------------------------------------------------------------
    def _values(self, shape: tuple[int, ...]) -> list[Any]:
        live = [a for a, s in zip(self.axes, shape) if s > 1]
        values: list[Any] = [None, *live]
        values += [pair for pair in itertools.combinations(live, 2)]
        if len(live) > 2:
            values.append(tuple(live))
        return values

    def neighbours(self, rows: Rows, shape: tuple[int, ...]) -> list[tuple[Rows, tuple[int, ...]]]:
        out: list[tuple[Rows, tuple[int, ...]]] = []
        if self.name is not None:
            values = self._values(shape)
            for i, (name, value) in enumerate(rows):
                for v in values:
                    if v != value:
                        out.append((rows[:i] + ((name, v),) + rows[i + 1:], shape))
            known = {n for n, _ in rows}
            missing = sorted({n for names in self.names.values() for n in names
                              if isinstance(n, str) and n not in known})
            for name in missing:
                for v in values[1:]:
                    out.append((rows + ((name, v),), shape))
        if self.mesh_note is None:
            for other in _factorisations(math.prod(self.shape0), len(self.shape0)):
                if other != shape:
                    out.append((rows, other))
        return [c for c in out if c not in self.measured and self._divisible(*c)]

    def _divisible(self, rows: Rows, shape: tuple[int, ...]) -> bool:
        return predict.divisible(self.base["leaves"], self.names, rows,
                                 dict(zip(self.axes, shape)))

    def changes(self, rows: Rows, shape: tuple[int, ...]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for i, (name, value) in enumerate(rows):
            if i >= len(self.rows0):
                out.append({"kind": "rule", "row": i, "name": name, "from": "absent",
                            "to": _json(value)})
            elif value != self.rows0[i][1]:
                out.append({"kind": "rule", "row": i, "name": name,
                            "from": _json(self.rows0[i][1]), "to": _json(value)})
        if shape != self.shape0:
            out.append({"kind": "mesh", "from": dict(zip(self.axes, self.shape0)),
                        "to": dict(zip(self.axes, shape))})
        return out

    # ---- compiles -------------------------------------------------------------------------------
    def budget_left(self) -> bool:
        elapsed = time.perf_counter() - self.started
        return self.compiles < self.max_compiles and elapsed + self.last_s <= self.max_seconds

    def measure(self, rows: Rows, shape: tuple[int, ...], predicted: int | None = None,
                why: str = "") -> dict[str, Any] | None:
        key = (rows, shape)
        if key in self.measured:
            return self.measured[key]
        step = {"why": why, "changes": self.changes(rows, shape), "predicted": predicted}
        self.trail.append(step)
        module = self.module() if self.name is not None else None
        old = getattr(module, self.name) if module is not None and self.name else None
        if module is not None and self.name:
            kind = list if isinstance(old, list) else tuple
            setattr(module, self.name, kind((n, v) for n, v in rows))
        self.hooks.shape, self.hooks.built = (shape if shape != self.shape0 else None), []
        started = time.perf_counter()
        try:
            facts, compiled = self.compile_once()
        finally:
            if module is not None and self.name:
                setattr(module, self.name, old)
            self.hooks.shape = None
        self.compiles += 1
        self.last_s = time.perf_counter() - started
        if facts is None or (shape != self.shape0 and shape not in self.hooks.built):
            if facts is not None:
                self.mesh_note = ("the probe's mesh did not take the candidate's shape (it is "
                                  "not built from jax.device_count() with jax.make_mesh or "
                                  "mesh_utils.create_device_mesh)")
            self.failed += 1
            self.measured[key] = {"failed": True, "error": compiled}
            step["error"] = str(compiled)[:300] if facts is None else self.mesh_note
            return None
        got = self._record(rows, shape, facts, compiled)
        step["peak_bytes"] = got["peak_bytes"]
        if got["refused"]:
            step["refused"] = True
        return got

    def _record(self, rows: Rows, shape: tuple[int, ...], facts: dict[str, Any],
                compiled: Any) -> dict[str, Any]:
        hlo = ""
        if compiled is not None:
            try:
                hlo = compiled.as_text() or ""
            except Exception:  # noqa: BLE001
                hlo = ""
        found = collectives.count(hlo) if compiled is not None else \
            {k: {"count": v, "bytes": None} for k, v in facts.get("collectives", {}).items()}
        # A step the TPU compiler refused: its peak is at least its arguments, outputs and the
        # temporaries the compiler had counted when it stopped, and it does not fit.
        refused = facts.get("refused") is not None
        plan = {"rules": [[n, _json(v)] for n, v in rows] if self.name else None,
                "mesh": dict(zip(self.axes, shape)), "peak_bytes": _peak(facts.get("memory")),
                "fits": not refused and _peak(facts.get("memory")) <= self.capacity,
                "refused": refused,
                "changes": self.changes(rows, shape), "collectives": found,
                "memory": facts.get("memory"), "leaves": facts.get("leaves", []),
                "key": (rows, shape)}
        self.measured[(rows, shape)] = plan
        return plan

    # ---- the walk -----------------------------------------------------------------------------
    def _order(self, current: dict[str, Any]) -> tuple[list[Any], list[Any]]:
        rows, shape = current["key"]
        scored, unknown = [], []
        here = self.predict(rows, shape, current)  # the predictor's own figure for `current`
        for cand in self.neighbours(rows, shape):
            predicted = self.predict(cand[0], cand[1], current)
            if predicted < here * _GAIN:
                fits = predicted <= self.capacity
                changes = len(self.changes(*cand)) if fits else 0
                scored.append(((not fits, changes, predicted), cand, predicted))
            elif cand[1] == shape and self._unpredictable(cand[0], rows):
                unknown.append(cand)
        scored.sort(key=lambda s: (s[0], repr(s[1])))
        return [(c, p) for _, c, p in scored], unknown

    def _unpredictable(self, rows: Rows, before: Rows) -> bool:
        """A row change of a name no argument or output carries (activations only)."""
        carried = {n for names in self.names.values() for n in names}
        changed = {n for (n, v), (m, w) in zip(rows, before) if v != w} | \
            {n for n, _ in rows[len(before):]}
        return bool(changed) and not (changed & carried)

    def run(self) -> dict[str, Any]:
        out: dict[str, Any] = {"capacity": self.capacity, "budget": {
            "compiles": self.max_compiles, "seconds": self.max_seconds}}
        if self.base["fits"]:
            return {**out, "status": "fits", **self._totals()}
        current = self.base
        while not current["fits"] and self.budget_left():
            known, unknown = self._order(current)
            temp = (current["memory"] or {}).get("temp") or 0
            queue = known + ([(c, None) for c in unknown]
                             if temp >= current["peak_bytes"] // 5 else [])
            moved = False
            for cand, predicted in queue:
                if not self.budget_left():
                    break
                got = self.measure(*cand, predicted=predicted,
                                   why="descend" if predicted is not None else "activations")
                if got is not None and got["peak_bytes"] < current["peak_bytes"] * _GAIN:
                    current, moved = got, True
                    break
            if not moved:
                break
        if current["fits"]:
            current = self._prune(current)
            self._alternatives(current)
        return {**out, **self._verdict(), **self._totals()}

    def _prune(self, plan: dict[str, Any]) -> dict[str, Any]:
        """Revert each change of a fitting plan that the prediction says is not needed."""
        changed = True
        while changed and self.budget_left():
            changed = False
            rows, shape = plan["key"]
            reverts = []
            for i in range(len(rows)):
                if i < len(self.rows0) and rows[i] != self.rows0[i]:
                    reverts.append((rows[:i] + (self.rows0[i],) + rows[i + 1:], shape))
            if len(rows) > len(self.rows0):
                for i in range(len(self.rows0), len(rows)):
                    reverts.append((rows[:i] + rows[i + 1:], shape))
            if shape != self.shape0:
                reverts.append((rows, self.shape0))
            for cand in reverts:
                if cand in self.measured or self.predict(*cand, plan) > self.capacity:
                    continue
                if not self.budget_left():
                    break
                got = self.measure(*cand, predicted=self.predict(*cand, plan), why="prune")
                if got is not None and got["fits"]:
                    plan, changed = got, True
                    break
        return plan

    def _alternatives(self, plan: dict[str, Any]) -> None:
        """A few single changes of the original predicted to fit: with the original's
        temporaries, or (when those alone would not fit) with the fitting plan's, on the chance
        that one change lowers them as much as the plan's did."""
        temp = min((plan["memory"] or {}).get("temp") or 0,
                   (self.base["memory"] or {}).get("temp") or 0)
        scored = []
        for cand in self.neighbours(self.rows0, self.shape0):
            predicted = self.predict(*cand, self.base, temp=temp)
            if predicted <= self.capacity:
                scored.append((predicted, repr(cand), cand))
        for predicted, _, cand in sorted(scored)[:_ALTERNATIVES]:
            if not self.budget_left():
                return
            self.measure(*cand, predicted=predicted, why="alternative")

    # ---- the report -------------------------------------------------------------------------------
    def _totals(self) -> dict[str, Any]:
        return {"compiles": self.compiles, "failed_compiles": self.failed, "trail": self.trail,
                "seconds": round(time.perf_counter() - self.started, 3),
                "rules_name": self.name, "mesh_axes": list(self.axes),
                "mesh_note": self.mesh_note,
                "baseline": self._public(self.base)}

    def _verdict(self) -> dict[str, Any]:
        plans = [p for p in self.measured.values() if not p.get("failed") and p["fits"]
                 and p is not self.base]
        plans.sort(key=lambda p: (len(p["changes"]), collectives.total_bytes(p["collectives"]),
                                  p["peak_bytes"], repr(p["key"])))
        if plans:
            return {"status": "plans", "plans": [self._public(p) for p in plans]}
        tried = [p for p in self.measured.values() if not p.get("failed")]
        best = min(tried, key=lambda p: (p["peak_bytes"], len(p["changes"]), repr(p["key"])))
        stop = "budget" if not self.budget_left() else "space"
        return {"status": "none", "stopped": stop, "plans": [],
                "best": self._public(best, dominant=True)}

    def _public(self, plan: dict[str, Any], dominant: bool = False) -> dict[str, Any]:
        out = {k: plan[k] for k in ("rules", "mesh", "peak_bytes", "fits", "refused",
                                    "changes", "collectives", "memory")}
        if dominant:
            out["dominant"] = self._dominant(plan)
        return out

    @staticmethod
    def _dominant(plan: dict[str, Any]) -> list[dict[str, Any]]:
        """What the peak is made of, biggest first: argument groups, outputs that do not reuse
        an input, temporaries."""
        m = plan["memory"] or {}
        parts: dict[str, int] = {}
        example: dict[str, dict[str, Any]] = {}
        for leaf in plan["leaves"]:
            if leaf["role"] != "arg":
                continue
            parts[leaf["group"]] = parts.get(leaf["group"], 0) + leaf["per_device"]
            if leaf["group"] not in example or \
                    leaf["per_device"] > example[leaf["group"]]["per_device"]:
                example[leaf["group"]] = leaf
        items = [{"what": g, "bytes": b, "largest": example[g]["path"],
                  "spec": example[g]["spec"]} for g, b in parts.items()]
        fresh = (m.get("output") or 0) - (m.get("alias") or 0)
        if fresh > 0:
            items.append({"what": "outputs (not reusing an input)", "bytes": fresh})
        items.append({"what": "temporaries", "bytes": m.get("temp") or 0})
        items.sort(key=lambda i: (-i["bytes"], i["what"]))
        return items[:5]


def search(spec: dict[str, Any], base: dict[str, Any], hooks: Hooks,
           compile_once: Callable[[], tuple[dict[str, Any], Any]], base_compiled: Any,
           module: Callable[[], Any]) -> dict[str, Any]:
    """The ``fit`` event's payload for one probe at this worker's device count."""
    return Search(spec, base, hooks, compile_once, base_compiled, module).run()
