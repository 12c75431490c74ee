"""Inside the worker, on a real accelerator: run the step once and read each device's peak.

The compiler's figures are an estimate; `memory_stats()['peak_bytes_in_use']` is what the
allocator actually held. Inputs are random data of the probe's shapes, created leaf by leaf
directly in their sharding, so creating them never needs more memory than the step itself.
Loaded by the worker by file path: imports nothing from shardlint.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

_STAT_KEYS = ("bytes_in_use", "peak_bytes_in_use", "bytes_limit", "largest_alloc_size")


def _random_leaf(shape: tuple[int, ...], dtype: Any, sharding: Any, seed: int) -> Any:
    def make(key: Any) -> Any:
        if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
            impl = getattr(
                dtype, "_impl", None
            )  # the key type's own implementation (threefry, rbg)
            key_shape = tuple(getattr(impl, "key_shape", (2,)))
            return jax.random.wrap_key_data(jnp.zeros(shape + key_shape, jnp.uint32), impl=impl)
        if jnp.issubdtype(dtype, jnp.floating):
            return jax.random.normal(key, shape, dtype)
        if jnp.issubdtype(dtype, jnp.integer):
            # 0/1: valid as token ids, indices and labels whatever the vocabulary size.
            return jax.random.randint(key, shape, 0, 2, dtype)
        return jnp.zeros(shape, dtype)

    maker = jax.jit(make, out_shardings=sharding) if sharding is not None else jax.jit(make)
    return maker(jax.random.key(seed))


def random_inputs(compiled: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    is_info = lambda x: isinstance(x, jax.stages.ArgInfo)
    is_sharding = lambda x: isinstance(x, jax.sharding.Sharding)
    infos, tree = jax.tree_util.tree_flatten(compiled.args_info, is_leaf=is_info)
    shardings = jax.tree_util.tree_leaves(compiled.input_shardings, is_leaf=is_sharding)
    if len(shardings) != len(infos):
        shardings = [None] * len(infos)
    values = []
    for seed, (info, sharding) in enumerate(zip(infos, shardings)):
        value = _random_leaf(tuple(info.shape), info.dtype, sharding, seed)
        value.block_until_ready()
        values.append(value)
    args, kwargs = jax.tree_util.tree_unflatten(tree, values)
    return tuple(args), dict(kwargs)


def _stats(devices: list[Any]) -> list[dict[str, int] | None]:
    result: list[dict[str, int] | None] = []
    for device in devices:
        try:
            stats = device.memory_stats()
        except Exception:  # noqa: BLE001 - "may not be implemented on all platforms"
            stats = None
        result.append({k: int(stats[k]) for k in _STAT_KEYS if k in stats} if stats else None)
    return result


def measure_peak(compiled: Any) -> dict[str, Any]:
    """Run the step once on random inputs; per device: bytes before, after inputs, peak."""
    is_sharding = lambda x: isinstance(x, jax.sharding.Sharding)
    ids: set[int] = set()
    for tree in (compiled.input_shardings, compiled.output_shardings):
        for sharding in jax.tree_util.tree_leaves(tree, is_leaf=is_sharding):
            if is_sharding(sharding):
                ids.update(d.id for d in sharding.device_set)
    devices = [d for d in jax.devices() if d.id in ids] or jax.local_devices()
    before = _stats(devices)
    error = None
    after_inputs: list[dict[str, int] | None] = [None] * len(devices)
    try:
        args, kwargs = random_inputs(compiled)
        after_inputs = _stats(devices)
        out = compiled(*args, **kwargs)
        jax.block_until_ready(out)
        del out, args, kwargs
    except Exception as exc:  # noqa: BLE001 - an out-of-memory here is a result, not a crash
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
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
                "peak_bytes_in_use": a.get("peak_bytes_in_use"),
                "bytes_limit": a.get("bytes_limit"),
            }
        )
    return {"available": True, "error": error, "devices": rows}
