"""Inside the worker: turn what a probe returned into compiled figures (jax imported here only).

Loaded by the worker by file path, so it may import nothing from shardlint. Everything returned is
plain JSON data; the parent turns it into a report.
"""

from __future__ import annotations

import inspect
import math
import re
import time
import warnings
from collections.abc import Callable
from typing import Any

import jax

_COLLECTIVE = re.compile(
    r"\b(all-gather|all-reduce|reduce-scatter|all-to-all|collective-permute)(?:-start)?\("
)
_MEMORY_FIELDS = {
    "argument": "argument_size_in_bytes",
    "output": "output_size_in_bytes",
    "alias": "alias_size_in_bytes",
    "temp": "temp_size_in_bytes",
    "generated_code": "generated_code_size_in_bytes",
    "peak": "peak_memory_in_bytes",
    "host_argument": "host_argument_size_in_bytes",
    "host_output": "host_output_size_in_bytes",
    "host_temp": "host_temp_size_in_bytes",
}
_EXPECTED = (
    "expected a jax.stages.Lowered, Traced or Wrapped (a jitted function taking no arguments), "
    "or (jitted_fn, args) / (jitted_fn, args, kwargs)"
)


class ReturnError(Exception):
    """The probe returned something that cannot be compiled; the message says what to return."""


def _describe(value: object) -> str:
    # Never repr a whole array or tree: it can be huge (and a device array would be copied).
    name = type(value).__name__
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"{name} {value.dtype}{list(value.shape)}"
    if isinstance(value, (tuple, list, dict)):
        items = value.values() if isinstance(value, dict) else value
        return f"{name} of {len(value)} ({', '.join(type(v).__name__ for v in list(items)[:4])})"
    text = repr(value) if isinstance(value, (int, float, str, bool, type(None))) else ""
    return f"{name} {text[:80]}".rstrip()


def _arg_names(fn: Any, count: int) -> list[str]:
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return [f"args[{i}]" for i in range(count)]
    names = []
    for i in range(count):
        if i < len(params) and params[i].kind in (
            params[i].POSITIONAL_ONLY,
            params[i].POSITIONAL_OR_KEYWORD,
        ):
            names.append(params[i].name)
        else:
            names.append(f"args[{i}]")
    return names


_UNKNOWN = object()  # a sharding jax did not report (trees that do not line up)
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*")


def _debug_arg_names(lowered: Any) -> list[str]:
    """Positional argument names of a Lowered whose function we never saw (best effort).

    jax keeps them per flattened input in the lowering's debug info (a private attribute, so any
    failure just means the report says args[i]).
    """
    try:
        flat = list(lowered._lowering.compile_args["all_args_info"].debug_info.arg_names)
        paths = jax.tree_util.tree_flatten_with_path(
            lowered.args_info, is_leaf=lambda x: isinstance(x, jax.stages.ArgInfo)
        )[0]
    except Exception:  # noqa: BLE001
        return []
    if len(flat) != len(paths):
        return []
    names: dict[int, str] = {}
    for (path, _), flat_name in zip(paths, flat):
        match = _IDENT.match(flat_name or "")
        if len(path) > 1 and getattr(path[0], "idx", 1) == 0 and hasattr(path[1], "idx") and match:
            names.setdefault(path[1].idx, match.group(0))
    count = max(names, default=-1) + 1
    return [names.get(i, f"args[{i}]") for i in range(count)]


def lower(
    value: Any, on_stage: Callable[[str], None], timings: dict[str, float]
) -> tuple[Any, str, list[str]]:
    """(Lowered, kind, positional argument names) for any accepted probe return value."""
    stages = jax.stages
    if isinstance(value, stages.Compiled):
        return value, "compiled", []
    if isinstance(value, stages.Lowered):
        return value, "lowered", _debug_arg_names(value)
    if isinstance(value, stages.Traced):
        on_stage("lower")
        started = time.perf_counter()
        lowered = value.lower()
        timings["lower_s"] = time.perf_counter() - started
        return lowered, "traced", _debug_arg_names(lowered)
    if isinstance(value, (tuple, list)) and len(value) in (2, 3) and callable(value[0]):
        fn, args = value[0], value[1]
        kwargs = value[2] if len(value) == 3 else {}
        if not isinstance(args, (tuple, list)):
            raise ReturnError(
                f"the args of (fn, args) must be a tuple or list, got {_describe(args)}"
            )
        if not isinstance(kwargs, dict):
            raise ReturnError(
                f"the kwargs of (fn, args, kwargs) must be a dict, got {_describe(kwargs)}"
            )
        kind = "fn-args"
    elif callable(value) and hasattr(value, "trace"):
        fn, args, kwargs, kind = value, (), {}, "wrapped"
    else:
        raise ReturnError(f"the probe returned {_describe(value)}: {_EXPECTED}")
    if not (hasattr(fn, "trace") or hasattr(fn, "lower")):
        raise ReturnError(
            f"{getattr(fn, '__name__', _describe(fn))} is not jitted: "
            "return (jax.jit(fn, ...), args) "
            "so shardings and donation are the ones your code uses"
        )
    started = time.perf_counter()
    if hasattr(fn, "trace"):
        on_stage("trace")
        traced = fn.trace(*args, **kwargs)
        timings["trace_s"] = time.perf_counter() - started
        on_stage("lower")
        started = time.perf_counter()
        lowered = traced.lower()
    else:
        on_stage("lower")
        lowered = fn.lower(*args, **kwargs)
    timings["lower_s"] = time.perf_counter() - started
    return lowered, kind, _arg_names(fn, len(args))


def _spec(sharding: Any) -> tuple[str, str]:
    if isinstance(sharding, jax.sharding.NamedSharding):
        mesh = ", ".join(f"{name}={size}" for name, size in sharding.mesh.shape.items())
        return str(sharding.spec), mesh
    if isinstance(sharding, jax.sharding.SingleDeviceSharding):
        return "single device", ""
    if getattr(sharding, "is_fully_replicated", False):
        return "replicated", f"{len(sharding.device_set)} devices"
    return type(sharding).__name__, f"{len(sharding.device_set)} devices"


def _key_text(key: Any) -> str:
    return jax.tree_util.keystr((key,))


def _names(path: tuple[Any, ...], role: str, names: list[str]) -> tuple[str, tuple[Any, ...]]:
    """(label of the argument or output, the rest of the path below it)."""
    if role == "out":
        return "out", path
    top, rest = path[0], path[1:]  # args_info is ((args...), {kwargs})
    if not rest:
        return "args", rest
    if getattr(top, "idx", 0) == 1:
        return str(getattr(rest[0], "key", _key_text(rest[0]))), rest[1:]
    idx = getattr(rest[0], "idx", 0)
    return (names[idx] if idx < len(names) else f"args[{idx}]"), rest[1:]


def _group(base: str, rest: tuple[Any, ...], role: str) -> str:
    # Outputs group by their first key (init returns {"params": ...}); both descend one more level
    # through tuples, so ((params, opt_state), loss) gives out[0][0], out[0][1], out[1].
    group = base
    if role == "out" and rest:
        group, rest = group + _key_text(rest[0]), rest[1:]
    if rest and hasattr(rest[0], "idx"):
        group += _key_text(rest[0])
    return group


def _shard_bytes(sharding: Any, shape: tuple[int, ...], itemsize: int, whole: int) -> int:
    try:
        return math.prod(sharding.shard_shape(tuple(shape))) * itemsize
    except Exception:  # noqa: BLE001 - exotic shardings: count the whole leaf on each device
        return whole


def _leaf(
    path: tuple[Any, ...],
    shape: tuple[int, ...],
    dtype: Any,
    sharding: Any,
    role: str,
    names: list[str],
    donated: bool,
) -> dict[str, Any]:
    base, rest = _names(path, role, names)
    itemsize = getattr(dtype, "itemsize", None) or 0
    size = math.prod(shape)
    per_device = size * itemsize
    devices, replicated = 1, False
    spec, mesh = ("unknown", "")
    if sharding is None and role == "arg":
        per_device, devices, spec = 0, 0, "unused by the step"
    elif sharding is not None and sharding is not _UNKNOWN:
        per_device = _shard_bytes(sharding, shape, itemsize, per_device)
        devices = len(sharding.device_set)
        replicated = devices > 1 and bool(sharding.is_fully_replicated)
        spec, mesh = _spec(sharding)
    return {
        "role": role,
        "path": base + "".join(_key_text(k) for k in rest),
        "group": _group(base, rest, role),
        "shape": list(shape),
        "dtype": str(dtype),
        "bytes": size * itemsize,
        "per_device": per_device,
        "spec": spec,
        "mesh": mesh,
        "devices": devices,
        "replicated": replicated,
        "donated": donated,
    }


_NNX_KEYS = ("out_sharding", "sharding_names", "sharding")


def _box_names(x: Any) -> tuple[list[str | None], str] | None:
    """(names per dimension, kind) of a Flax box or NNX Variable, duck-typed (no flax import).

    kind "logical" (nn.LogicallyPartitioned: mapped to mesh axes through axis rules), "mesh"
    (nn.Partitioned: mesh axis names) or "nnx" (a Variable's sharding metadata: logical names
    where axis rules are in context, mesh axis names otherwise).
    """
    if hasattr(x, "names") and hasattr(x, "value") and hasattr(x, "unbox"):
        kind = "logical" if "Logical" in type(x).__name__ else "mesh"
        return [n if isinstance(n, str) or n is None else str(n) for n in x.names], kind
    get = getattr(x, "get_metadata", None)
    if callable(get) and hasattr(x, "value"):
        meta = get()
        for key in _NNX_KEYS:
            names = meta.get(key) if isinstance(meta, dict) else None
            if isinstance(names, (tuple, list)) and all(
                n is None or isinstance(n, str) for n in names
            ):
                return list(names), "nnx"
    return None


def partition_names(tree: Any, is_leaf: Callable[[Any], bool]) -> dict[str, dict[str, Any]]:
    """keystr(path) of each leaf inside a Flax box or NNX Variable -> its dimensions' names.

    The report ties an unsharded leaf to a static finding through these, e.g. an axis named here
    that has no rule (SHL201).
    """
    found: dict[str, dict[str, Any]] = {}
    try:
        boxes = jax.tree_util.tree_flatten_with_path(
            tree, is_leaf=lambda x: is_leaf(x) or _box_names(x) is not None
        )[0]
        for path, box in boxes:
            named = _box_names(box)
            if named is None:
                continue
            for inner, _ in jax.tree_util.tree_flatten_with_path(box, is_leaf=is_leaf)[0]:
                found[jax.tree_util.keystr(tuple(path) + tuple(inner))] = {
                    "names": named[0],
                    "kind": named[1],
                }
    except Exception:  # noqa: BLE001 - metadata is a bonus; an odd box never breaks the report
        return {}
    return found


def _with_names(leaf: dict[str, Any], path: tuple[Any, ...], found: dict[str, Any]) -> None:
    named = found.get(jax.tree_util.keystr(tuple(path)))
    if named is not None:
        leaf["partition_names"] = named["names"]
        leaf["partition_kind"] = named["kind"]


def _lowered_in_shardings(lowered: Any) -> list[Any]:
    """The shardings a Lowered step was asked for (one a flat argument), or [] where this jax
    does not say. Before the compile there are no pruned arguments, and a sharding left to the
    compiler is not known yet."""
    try:
        given = lowered._lowering.compile_args["in_shardings"]  # no public name before compile
    except (AttributeError, KeyError, TypeError):
        return []
    return [s if isinstance(s, jax.sharding.Sharding) else _UNKNOWN for s in given]


def leaves(compiled: Any, names: list[str]) -> list[dict[str, Any]]:
    """Every argument and output of a compiled step, or of a Lowered one whose compile failed."""
    is_info = lambda x: isinstance(x, jax.stages.ArgInfo)
    is_sharding = lambda x: isinstance(x, jax.sharding.Sharding)
    arg_paths = jax.tree_util.tree_flatten_with_path(compiled.args_info, is_leaf=is_info)[0]
    if isinstance(compiled, jax.stages.Lowered):
        in_shardings = _lowered_in_shardings(compiled)
    else:
        # None marks an argument the step never reads (pruned): it costs the step nothing.
        in_shardings = jax.tree_util.tree_leaves(
            compiled.input_shardings, is_leaf=lambda x: x is None or is_sharding(x)
        )
    if len(in_shardings) != len(arg_paths):
        in_shardings = [_UNKNOWN] * len(arg_paths)
    named = partition_names(compiled.args_info, is_info)
    result = []
    for (path, info), sharding in zip(arg_paths, in_shardings):
        leaf = _leaf(
            path, tuple(info.shape), info.dtype, sharding, "arg", names, bool(info.donated)
        )
        _with_names(leaf, path, named)
        result.append(leaf)
    out_paths = jax.tree_util.tree_flatten_with_path(compiled.out_info)[0]
    out_shardings = jax.tree_util.tree_leaves(
        getattr(compiled, "output_shardings", None), is_leaf=is_sharding)
    if len(out_shardings) != len(out_paths):
        out_shardings = [getattr(info, "sharding", None) for _, info in out_paths]
    named = partition_names(compiled.out_info, lambda x: False)
    for (path, info), sharding in zip(out_paths, out_shardings):
        leaf = _leaf(path, tuple(info.shape), info.dtype, sharding, "out", names, False)
        _with_names(leaf, path, named)
        result.append(leaf)
    return result


def memory(compiled: Any) -> dict[str, int | None] | None:
    try:
        stats = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - some backends do not implement it
        return None
    if isinstance(stats, (list, tuple)):
        stats = stats[0] if stats else None
    if stats is None:
        return None
    return {name: getattr(stats, field, None) for name, field in _MEMORY_FIELDS.items()}


def collectives(compiled: Any) -> dict[str, int]:
    try:
        text = compiled.as_text()
    except Exception:  # noqa: BLE001
        return {}
    counts: dict[str, int] = {}
    for match in _COLLECTIVE.finditer(text or ""):
        counts[match.group(1)] = counts.get(match.group(1), 0) + 1
    return counts


def _device_ids(compiled: Any) -> list[int]:
    is_sharding = lambda x: isinstance(x, jax.sharding.Sharding)
    ids: set[int] = set()
    for tree in (compiled.input_shardings, compiled.output_shardings):
        for sharding in jax.tree_util.tree_leaves(tree, is_leaf=is_sharding):
            if is_sharding(sharding):
                ids.update(d.id for d in sharding.device_set)
    return sorted(ids)


def _lowered_facts(lowered: Any, kind: str, names: list[str],
                   timings: dict[str, float]) -> dict[str, Any] | None:
    """The facts of a step whose compile failed: its leaves as lowered, no compiler figures."""
    try:
        found = leaves(lowered, names)
    except Exception:  # noqa: BLE001 - the error itself is what gets reported
        return None
    return {"kind": kind, "backend": jax.default_backend(), "device_count": jax.device_count(),
            "device_kind": jax.devices()[0].device_kind,
            "devices_used": max((leaf["devices"] for leaf in found), default=1) or 1,
            "memory": None, "leaves": found, "donation_warnings": [], "warnings": [],
            "collectives": {}, "timings": {k: round(v, 3) for k, v in timings.items()}}


def analyse(
    value: Any,
    on_stage: Callable[[str], None],
    measure: str = "auto",
    measure_peak: Callable[[Any], dict[str, Any]] | None = None,
    on_compiled: Callable[[Any], None] | None = None,
) -> dict[str, Any]:
    """Compile what the probe returned and read every figure the report needs (``on_compiled``
    is handed the compiled step)."""
    timings: dict[str, float] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lowered, kind, names = lower(value, on_stage, timings)
        on_stage("compile")
        started = time.perf_counter()
        try:
            compiled = lowered if kind == "compiled" else lowered.compile()
        except Exception as exc:
            # What is known without the compile rides along: a step the compiler refuses as too
            # big still has its arguments and outputs (`--fit` starts from them).
            timings["compile_s"] = time.perf_counter() - started
            known = _lowered_facts(lowered, kind, names, timings)
            exc.shardlint_lowered = known  # type: ignore[attr-defined]
            raise
        timings["compile_s"] = time.perf_counter() - started
    if on_compiled is not None:
        on_compiled(compiled)
    messages = [str(w.message) for w in caught if not issubclass(w.category, DeprecationWarning)]
    facts: dict[str, Any] = {
        "kind": kind,
        "backend": jax.default_backend(),
        "device_count": jax.device_count(),
        "device_kind": jax.devices()[0].device_kind,
        "devices_used": len(_device_ids(compiled)) or 1,
        "memory": memory(compiled),
        "leaves": leaves(compiled, names),
        "donation_warnings": [m.split("\n")[0] for m in messages if "donated buffers" in m],
        "warnings": [m.split("\n")[0][:300] for m in messages if "donated buffers" not in m][:10],
        "timings": timings,
    }
    started = time.perf_counter()
    facts["collectives"] = collectives(compiled)
    timings["inspect_s"] = time.perf_counter() - started
    run = measure == "always" or (measure == "auto" and jax.default_backend() != "cpu")
    if run and measure_peak is not None:
        on_stage("run")
        started = time.perf_counter()
        facts["measured"] = measure_peak(compiled)
        timings["run_s"] = time.perf_counter() - started
    for name, seconds in timings.items():
        timings[name] = round(seconds, 3)
    return facts
