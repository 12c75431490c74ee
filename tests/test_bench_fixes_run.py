"""bench/fixes_run.py: what a fix wrote is read back as the calls to check against each jax
release, and the probe that binds them in another interpreter tells a missing name and a
rejected keyword from one that binds."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import fixes_run  # noqa: E402

BEFORE = textwrap.dedent("""
    import jax
    from jax.experimental.pjit import pjit

    def run(f, tree):
        leaves = jax.tree_leaves(tree)
        step = pjit(f, in_shardings=None)
        return leaves, step, jax.numpy.ones(3)
""")
AFTER = BEFORE.replace("jax.tree_leaves(tree)", "jax.tree.leaves(tree)").replace(
    "pjit(f, in_shardings=None)", "jax.jit(f, in_shardings=None)")


def test_the_calls_a_fix_wrote_are_read_with_their_arguments() -> None:
    got = fixes_run.written_calls(BEFORE, AFTER)
    assert (6, "jax.tree.leaves", 1, []) in got
    assert (7, "jax.jit", 1, ["in_shardings"]) in got
    assert (6, "jax.tree", 0, []) in got  # the namespace itself must exist too
    assert not any(line == 8 for line, *_ in got)  # an untouched line is not read


def test_the_probe_tells_missing_rejected_and_bound_apart() -> None:
    calls = {"a": ["json.dumps", 1, ["indent"]], "b": ["json.no_such_name", 0, []],
             "c": ["textwrap.dedent", 1, ["no_such_keyword"]], "d": ["jax.jit", 1, []]}
    probe = fixes_run._PROBE.replace('("jax", "flax", "optax")', '("json", "textwrap")')
    out = subprocess.run([sys.executable, "-c", probe], input=json.dumps(calls),
                         capture_output=True, text=True, check=True).stdout
    results = json.loads(out.splitlines()[-1])["results"]
    assert results["a"][0] == "ok"
    assert results["b"][0] == "missing"
    assert results["c"][0] == "rejects" and "no_such_keyword" in results["c"][1]
    assert results["d"][0] == "skipped"  # jax is not among the packages this probe imports


def test_the_sample_runs_each_call_shape_and_reports_what_raises() -> None:
    import importlib.util

    import pytest

    if importlib.util.find_spec("jax") is None:
        pytest.skip("needs jax")
    calls = {"jit": ["jax.jit", 1, ["out_shardings", "donate_argnums"]],
             "map": ["jax.tree.map", 3, []],
             "odd": ["jax.jit", 0, ["fun"]],  # no stand-in for `fun=`: not run, not passed
             "gone": ["jax.shard_map", 1, ["mesh", "in_specs", "out_specs"]]}
    probe = fixes_run._RUN.replace('if callee == "jax.shard_map":',
                                   'if callee == "jax.shard_map":\n        raise TypeError("x")')
    out = subprocess.run([sys.executable, "-c", probe], input=json.dumps(calls),
                         capture_output=True, text=True, check=True,
                         env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"}).stdout
    got = json.loads(out.splitlines()[-1])
    assert got["jit"] == ["ran", ""] and got["map"] == ["ran", ""]
    assert got["odd"][0] == "no stand-in"
    assert got["gone"] == ["raises", "TypeError: x"]
