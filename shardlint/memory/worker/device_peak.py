"""Inside the worker, on a real accelerator: run the step and measure each device's peak.

Inputs are zeros of the probe's shapes made by one compiled program directly in their shardings
(one compile for every leaf together, and never more memory than the step itself holds).

How the peak is measured depends on what the runtime counts:

- TPU: `memory_stats()['peak_bytes_in_use']` does not count a program's temporaries (on a v5e,
  470M-parameter step: 5.64 GB read against a true peak of 9.38 GB), so it is not used. The peak
  is measured by headroom instead: hold a filler of F bytes on every device the step uses, make
  the inputs and run the step; the largest F that runs and the smallest that does not bracket
  the peak (`bytes_limit - baseline - F`). The compiler's own figure (arguments + outputs -
  aliased + temporaries) starts the bisection, since it is an upper bound on that chip.
- GPU and others: the allocator counts every buffer it hands out, so its peak is read.

Loaded by the worker by file path: imports nothing from shardlint.
"""

from __future__ import annotations

import gc
import time
from typing import Any

import jax
import jax.numpy as jnp

_STAT_KEYS = ("bytes_in_use", "peak_bytes_in_use", "bytes_limit", "largest_alloc_size")
# The bisection stops when the bracket is this narrow, relative to the compiler's figure
# (and never narrower than 1 MiB): 0.25% of the peak, well inside what a plan can use.
_RELATIVE_WIDTH = 0.0025
_MIN_WIDTH = 1 << 20
_MAX_TRIALS = 24
_OOM_MARKERS = ("RESOURCE_EXHAUSTED", "Out of memory", "out of memory", "OOM", "Attempting to allocate")


def _is_sharding(x: Any) -> bool:
    return isinstance(x, jax.sharding.Sharding)


def _zero_leaf(shape: tuple[int, ...], dtype: Any) -> Any:
    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        impl = getattr(dtype, "_impl", None)  # the key type's own implementation (threefry, rbg)
        key_shape = tuple(getattr(impl, "key_shape", (2,)))
        return jax.random.wrap_key_data(jnp.zeros(shape + key_shape, jnp.uint32), impl=impl)
    # Zeros are valid token ids, indices and labels whatever the vocabulary size.
    return jnp.zeros(shape, dtype)


def input_maker(compiled: Any) -> Any:
    """A function that makes the step's inputs, (args, kwargs), with one compiled program."""
    is_info = lambda x: isinstance(x, jax.stages.ArgInfo)
    infos, tree = jax.tree_util.tree_flatten(compiled.args_info, is_leaf=is_info)
    shardings = jax.tree_util.tree_leaves(compiled.input_shardings, is_leaf=_is_sharding)
    specs = [(tuple(info.shape), info.dtype) for info in infos]

    def make_all() -> list[Any]:
        return [_zero_leaf(shape, dtype) for shape, dtype in specs]

    if len(shardings) == len(infos) and all(_is_sharding(s) for s in shardings):
        program = jax.jit(make_all, out_shardings=list(shardings))
    else:
        program = jax.jit(make_all)

    def make() -> tuple[tuple[Any, ...], dict[str, Any]]:
        values = program()
        jax.block_until_ready(values)
        args, kwargs = jax.tree_util.tree_unflatten(tree, values)
        return tuple(args), dict(kwargs)

    return make


def _stats(devices: list[Any]) -> list[dict[str, int] | None]:
    result: list[dict[str, int] | None] = []
    for device in devices:
        try:
            stats = device.memory_stats()
        except Exception:  # noqa: BLE001 - "may not be implemented on all platforms"
            stats = None
        result.append({k: int(stats[k]) for k in _STAT_KEYS if k in stats} if stats else None)
    return result


def _step_devices(compiled: Any) -> list[Any]:
    ids: set[int] = set()
    for tree in (compiled.input_shardings, compiled.output_shardings):
        for sharding in jax.tree_util.tree_leaves(tree, is_leaf=_is_sharding):
            if _is_sharding(sharding):
                ids.update(d.id for d in sharding.device_set)
    return [d for d in jax.devices() if d.id in ids] or jax.local_devices()[:1]


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"[:500]


def _is_oom(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return isinstance(exc, MemoryError) or any(marker in text for marker in _OOM_MARKERS)


def _compiler_bound(compiled: Any) -> tuple[int, int] | None:
    """(arguments + outputs - aliased + temporaries, arguments) per device, from the compiler."""
    try:
        stats = compiled.memory_analysis()
    except Exception:  # noqa: BLE001
        return None
    if isinstance(stats, (list, tuple)):
        stats = stats[0] if stats else None
    if stats is None:
        return None
    get = lambda name: int(getattr(stats, name, 0) or 0)
    arg = get("argument_size_in_bytes")
    total = arg + get("output_size_in_bytes") - get("alias_size_in_bytes") + get(
        "temp_size_in_bytes")
    return total, arg


class _Filler:
    """F bytes held on each of the step's devices: one float32 array sharded over them."""

    def __init__(self, devices: list[Any]) -> None:
        import numpy as np

        self.devices = devices
        mesh = jax.sharding.Mesh(np.array(devices), ("shardlint_filler",))
        self.sharding = jax.sharding.NamedSharding(
            mesh, jax.sharding.PartitionSpec("shardlint_filler"))

    def hold(self, per_device: int) -> Any:
        count = per_device // 4
        if count <= 0:
            return None
        shape = (count * len(self.devices),)
        value = jax.jit(lambda: jnp.zeros(shape, jnp.float32), out_shardings=self.sharding)()
        value.block_until_ready()
        return value


def _headroom(compiled: Any, devices: list[Any]) -> dict[str, Any]:
    """Bisect the filler that still lets the step run: the peak's bracket per device."""
    before = _stats(devices)
    if any(s is None or "bytes_limit" not in s for s in before):
        return {"available": False, "method": "headroom",
                "reason": f"memory_stats() has no bytes_limit on the {jax.default_backend()} "
                "backend", "error": None}
    limit = min(s["bytes_limit"] for s in before if s)
    baseline = max(s.get("bytes_in_use", 0) for s in before if s)
    room = limit - baseline
    bound = _compiler_bound(compiled)
    total, arguments = bound if bound else (room, 0)
    make = input_maker(compiled)
    filler = _Filler(devices)
    started = time.perf_counter()
    trials: list[dict[str, Any]] = []

    def runs(per_device: int) -> bool:
        held = out = args = kwargs = None
        t0 = time.perf_counter()
        try:
            held = filler.hold(per_device)
            args, kwargs = make()
            out = compiled(*args, **kwargs)
            jax.block_until_ready(out)
            ok = True
        except Exception as exc:  # noqa: BLE001 - out of memory is the answer; others raise
            if not _is_oom(exc):
                raise
            ok = False
        finally:
            del held, out, args, kwargs
            gc.collect()
        trials.append({"filler": per_device, "ran": ok,
                       "seconds": round(time.perf_counter() - t0, 3)})
        return ok

    error = None
    try:
        if not runs(0):
            return {"available": True, "method": "headroom", "fits": False,
                    "error": "the step does not run on the device with nothing else held",
                    "bytes_limit": limit, "baseline": baseline, "trials": trials,
                    "devices": _rows(devices, None, None, limit)}
        ok, fail = 0, room
        width = max(_MIN_WIDTH, int(total * _RELATIVE_WIDTH))
        # The compiler's figure is an upper bound on the peak (measured on a v5e: 0.4% to 11%
        # above it): leaving that much room should run, and leaving only the inputs should not.
        for guess in (room - total - width, room - arguments):
            if ok < guess < fail and len(trials) < _MAX_TRIALS:
                if runs(guess):
                    ok = guess
                else:
                    fail = guess
                    break
        while fail - ok > width and len(trials) < _MAX_TRIALS:
            middle = (ok + fail) // 2
            if runs(middle):
                ok = middle
            else:
                fail = middle
    except Exception as exc:  # noqa: BLE001 - reported beside the bracket found so far
        error = _first_line(exc)
        ok, fail = (0, room) if not trials else (
            max([t["filler"] for t in trials if t["ran"]], default=0),
            min([t["filler"] for t in trials if not t["ran"]], default=room))
    lower, upper = room - fail, room - ok
    return {"available": True, "method": "headroom", "fits": True, "error": error,
            "bytes_limit": limit, "baseline": baseline, "lower": lower, "upper": upper,
            "compiler_bound": total if bound else None, "trials": trials,
            "seconds": round(time.perf_counter() - started, 3),
            "devices": _rows(devices, lower, upper, limit)}


def _rows(devices: list[Any], lower: int | None, upper: int | None,
          limit: int) -> list[dict[str, Any]]:
    return [{"id": d.id, "kind": d.device_kind, "peak": upper, "peak_lower": lower,
             "bytes_limit": limit} for d in devices]


def _allocator_peak(compiled: Any, devices: list[Any]) -> dict[str, Any]:
    """Run the step once and read the allocator's peak (GPU: it counts every buffer)."""
    before = _stats(devices)
    error = None
    after_inputs: list[dict[str, int] | None] = [None] * len(devices)
    try:
        args, kwargs = input_maker(compiled)()
        after_inputs = _stats(devices)
        out = compiled(*args, **kwargs)
        jax.block_until_ready(out)
        del out, args, kwargs
    except Exception as exc:  # noqa: BLE001 - an out-of-memory here is a result, not a crash
        error = _first_line(exc)
    after = _stats(devices)
    if any(s is None for s in after):
        return {
            "available": False,
            "reason": f"memory_stats() is not available on the {jax.default_backend()} backend",
            "error": error,
        }
    rows = []
    for device, b, i, a in zip(devices, before, after_inputs, after):
        assert a is not None
        rows.append(
            {
                "id": device.id,
                "kind": device.device_kind,
                "in_use_before": (b or {}).get("bytes_in_use"),
                "inputs": ((i or {}).get("bytes_in_use", 0) - (b or {}).get("bytes_in_use", 0))
                if i
                else None,
                "peak_before_run": (i or {}).get("peak_bytes_in_use"),
                "peak": a.get("peak_bytes_in_use"),
                "peak_bytes_in_use": a.get("peak_bytes_in_use"),
                "bytes_limit": a.get("bytes_limit"),
            }
        )
    return {"available": True, "method": "allocator", "error": error, "devices": rows}


def measure_peak(compiled: Any) -> dict[str, Any]:
    """The step's peak per device: by headroom on a TPU, from the allocator elsewhere."""
    devices = _step_devices(compiled)
    if jax.default_backend() == "tpu":
        return _headroom(compiled, devices)
    return _allocator_peak(compiled, devices)
