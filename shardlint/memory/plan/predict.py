"""Inside the worker: a candidate's peak predicted without compiling it.

The per-device bytes of every argument and output, recomputed from its shape, its logical names
(where known) or its current spec, and the candidate's rules and mesh sizes; the temporaries are
the current plan's (or a given figure), which the prediction cannot see. Used to order the
compiles, never reported as a figure. Standard library only.
"""

from __future__ import annotations

import ast
import math
from typing import Any

Rows = tuple[tuple[str, Any], ...]
Names = dict[str, tuple[Any, ...]]  # leaf path -> logical names per dimension


def spec_axes(spec: str, ndim: int) -> list[tuple[str, ...]] | None:
    """Mesh axes per dimension of a leaf's spec text ("P(None, 'fsdp')")."""
    head, _, body = spec.partition("(")
    if not (head == "P" or head.endswith("PartitionSpec")) or not body.endswith(")"):
        return None
    try:
        parts = ast.literal_eval("(" + body[:-1] + ",)") if body[:-1].strip() else ()
    except (ValueError, SyntaxError):
        return None
    axes = [() if p is None else (p,) if isinstance(p, str) else tuple(p) for p in parts]
    return (axes + [()] * ndim)[:ndim]


def leaf_names(leaves: list[dict[str, Any]], recorded: dict[str, tuple[Any, ...]]) -> Names:
    """Logical names per leaf: its own Flax box's, or those of the recorded tree path that its
    path ends with (the longest), with as many dimensions."""
    by_length = sorted(recorded.items(), key=lambda kv: (-len(kv[0]), kv[0]))
    out: Names = {}
    for leaf in leaves:
        ndim = len(leaf["shape"])
        names = leaf.get("partition_names")
        if names is not None and leaf.get("partition_kind") != "mesh":
            out[leaf["path"]] = tuple(names)
            continue
        for key, spec in by_length:
            if key and leaf["path"].endswith(key) and len(spec) == ndim:
                out[leaf["path"]] = spec
                break
    return out


def axes_of(names: tuple[Any, ...], rows: Rows) -> list[tuple[str, ...]]:
    """flax's assignment: rows in order, each mesh axis used once per array."""
    result: list[Any] = [None] * len(names)
    used: set[str] = set()
    for name, value in rows:
        if name not in names:
            continue
        pos = names.index(name)
        if result[pos] is not None:
            continue
        axes = () if value is None else (value,) if isinstance(value, str) else tuple(value)
        if used & set(axes):
            continue
        result[pos] = axes
        used.update(axes)
    return [r or () for r in result]


def _leaf_axes(leaf: dict[str, Any], names: Names, rows: Rows) -> list[tuple[str, ...]] | None:
    known = names.get(leaf["path"])
    if known is not None:
        return axes_of(known, rows)
    return spec_axes(leaf.get("spec", ""), len(leaf["shape"]))


def divisible(leaves: list[dict[str, Any]], names: Names, rows: Rows,
              sizes: dict[str, int]) -> bool:
    """Whether every argument splits evenly over its axes (jit refuses otherwise)."""
    for leaf in leaves:
        axes = _leaf_axes(leaf, names, rows) if leaf["role"] == "arg" else None
        if axes is not None and any(d % math.prod(sizes.get(a, 1) for a in ax)
                                    for d, ax in zip(leaf["shape"], axes)):
            return False
    return True


def peak(leaves: list[dict[str, Any]], memory: dict[str, Any], names: Names, rows: Rows,
         sizes: dict[str, int], temp: int | None = None) -> int:
    """Arguments + outputs - aliased (scaled with the donated bytes) + temporaries."""
    arg = out = donated = 0
    for leaf in leaves:
        if leaf.get("devices") == 0:  # unused by the step
            continue
        dims = leaf["shape"]
        axes = _leaf_axes(leaf, names, rows)
        if axes is None:
            size = leaf["per_device"]
        else:
            itemsize = leaf["bytes"] // max(1, math.prod(dims)) if dims else leaf["bytes"]
            size = itemsize * math.prod(
                -(-d // math.prod(sizes.get(a, 1) for a in ax)) for d, ax in zip(dims, axes))
        if leaf["role"] == "arg":
            arg += size
            donated += size if leaf.get("donated") else 0
        else:
            out += size
    before = sum(leaf["per_device"] for leaf in leaves if leaf.get("donated"))
    alias = (memory.get("alias") or 0) * donated // before if before else 0
    return arg + out - alias + ((memory.get("temp") or 0) if temp is None else temp)
