"""Collectives of a compiled module, counted from its HLO text: how many of each, and bytes.

Loaded by the worker by path (standard library only). The bytes of an op are its result's
bytes per device (for an async ``-start`` op whose result is a tuple, its largest element);
an op in a loop body (a scanned layer) is counted once, as it is written in the module, not
once per iteration, so the figures compare plans with one another rather than time a step.
"""

from __future__ import annotations

import re

KINDS = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute")
_OP = re.compile(
    r"=\s*(?P<shape>\([^=]*?\)|[a-z0-9]+\[[^\]]*\](?:\{[^}]*\})?)\s+"
    r"(?P<op>all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)(?:-start)?\("
)
_ARRAY = re.compile(r"\b([a-z]+[0-9]*(?:e[0-9]m[0-9][a-z0-9]*)?)\[([0-9,]*)\]")
_BITS = {"pred": 8, "s4": 4, "u4": 4, "s8": 8, "u8": 8, "s16": 16, "u16": 16, "f16": 16,
         "bf16": 16, "s32": 32, "u32": 32, "f32": 32, "s64": 64, "u64": 64, "f64": 64,
         "c64": 64, "c128": 128}


def _bytes(shape: str) -> int:
    best = 0
    for dtype, dims in _ARRAY.findall(shape):
        bits = _BITS.get(dtype, 8 if dtype.startswith("f8") else 32)
        count = 1
        for d in dims.split(","):
            if d:
                count *= int(d)
        best = max(best, count * bits // 8)
    return best


def count(hlo: str) -> dict[str, dict[str, int]]:
    """``{kind: {"count": n, "bytes": b}}`` for each kind present, in a fixed order."""
    found: dict[str, dict[str, int]] = {}
    for match in _OP.finditer(hlo):
        entry = found.setdefault(match.group("op"), {"count": 0, "bytes": 0})
        entry["count"] += 1
        entry["bytes"] += _bytes(match.group("shape"))
    return {k: found[k] for k in KINDS if k in found}


def total_bytes(counted: dict[str, dict[str, int]]) -> int:
    return sum(v.get("bytes") or 0 for v in counted.values())
