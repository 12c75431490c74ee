"""Shared test helpers for the memory check (a module, since conftest is not importable)."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SEED_PROBES = REPO / "examples" / "seed_ensemble" / "probes.py"
DECODER_PROBE = REPO / "examples" / "decoder_1b" / "probe.py"


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


needs_jax = pytest.mark.skipif(
    not _has("jax"),
    reason="jax is not importable in the test interpreter; "
    "install it with pip install 'shardlint[memory]'",
)
needs_flax = pytest.mark.skipif(
    not (_has("jax") and _has("flax") and _has("optax")),
    reason="the examples need jax, flax and optax (pip install 'shardlint[memory]')",
)


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    def json(self) -> dict:
        return json.loads(self.out)


TINY_PROBE = '''
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

def _mesh():
    return jax.make_mesh((jax.device_count(),), ("x",), axis_types=(jax.sharding.AxisType.Auto,))

def shardlint_probe_replicated():
    """4 MiB weight sharded over x, a 4 MiB table replicated on every device."""
    mesh = _mesh()
    w = jax.ShapeDtypeStruct((1024, 1024), jnp.float32, sharding=NamedSharding(mesh, P("x")))
    table = jax.ShapeDtypeStruct((1024, 1024), jnp.float32, sharding=NamedSharding(mesh, P()))
    step = jax.jit(lambda w, t: (w * 2, t.sum()), donate_argnums=0)
    return step, (w, table)
'''
