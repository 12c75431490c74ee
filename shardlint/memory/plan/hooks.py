"""Inside the worker: what `--fit` changes and watches while the probe runs again.

Loaded by path (the standard library and jax; flax where the probe has it). :func:`install` runs
before any user module is imported. It wraps ``jax.make_mesh`` and
``mesh_utils.create_device_mesh`` so that a mesh of the same rank over the same N devices takes
the candidate's shape while one is set, and it wraps ``nn.logical_to_mesh_sharding`` to record
the logical names of every tree the probe hands it (which leaf carries which logical axis: the
prediction's input). Outside a candidate's run nothing changes: the wrappers pass through.
"""

from __future__ import annotations

import math
from typing import Any

import jax


class Hooks:
    """The mesh shape override and the logical names recorded from the probe's own calls."""

    def __init__(self) -> None:
        self.shape: tuple[int, ...] | None = None  # the candidate's mesh shape, while it runs
        self.built: list[tuple[int, ...]] = []  # shapes of the meshes built in this run
        self.logical: dict[str, tuple[Any, ...]] = {}  # keystr path -> logical names

    def _shape(self, shape: Any) -> tuple[int, ...]:
        shape = tuple(int(s) for s in shape)
        want = self.shape
        if want is not None and len(want) == len(shape) and math.prod(want) == math.prod(shape):
            shape = want
        self.built.append(shape)
        return shape


def install() -> Hooks:
    hooks = Hooks()
    make_mesh = jax.make_mesh

    def _make_mesh(axis_shapes: Any, axis_names: Any, *args: Any, **kwargs: Any) -> Any:
        return make_mesh(hooks._shape(axis_shapes), axis_names, *args, **kwargs)

    jax.make_mesh = _make_mesh  # type: ignore[assignment]
    try:
        from jax.experimental import mesh_utils

        create = mesh_utils.create_device_mesh

        def _create(mesh_shape: Any, *args: Any, **kwargs: Any) -> Any:
            return create(hooks._shape(mesh_shape), *args, **kwargs)

        mesh_utils.create_device_mesh = _create
    except Exception:  # noqa: BLE001 - an older jax without it: make_mesh only
        pass
    try:
        import flax.linen as nn
    except Exception:  # noqa: BLE001 - no flax: no logical names to record
        return hooks
    to_sharding = nn.logical_to_mesh_sharding
    spec_type = jax.sharding.PartitionSpec

    def _to_sharding(tree: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            flat = jax.tree_util.tree_flatten_with_path(
                tree, is_leaf=lambda x: isinstance(x, spec_type))[0]
            for path, spec in flat:
                if isinstance(spec, spec_type):
                    hooks.logical[jax.tree_util.keystr(tuple(path))] = tuple(spec)
        except Exception:  # noqa: BLE001 - names only steer the order; the compile decides
            pass
        return to_sharding(tree, *args, **kwargs)

    nn.logical_to_mesh_sharding = _to_sharding
    return hooks
