"""Unsharded leaves tied to the static finding that likely explains them, and to nothing else.

A project whose model names an axis the rules table lacks (SHL201) and a script elsewhere that
initialises the same model without a context (SHL102/SHL103): the probe's replicated leaves carry
the SHL201 of their own axis, never the other script's findings. The seed example's original
probe carries its own SHL102/SHL103 (the worker calls it with no context), the fixed one nothing.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from shardlint.memory.findings import measured_findings
from shardlint.memory.reach import probe_reach
from shardlint.memory.reasons import because

from .memory_support import CliResult, needs_flax

MODEL = """
import flax.linen as nn
import jax.numpy as jnp

RULES = (("batch", "x"), ("embed", None))


class Block(nn.Module):
    @nn.compact
    def __call__(self, h):
        init = nn.initializers.lecun_normal()
        w = self.param("w", nn.with_logical_partitioning(init, ("embed", "mlp")), (1024, 1024))
        b = self.param("b", nn.with_logical_partitioning(init, ("embed", "vocab")), (1024, 1024))
        return nn.with_logical_constraint(h @ w + h @ b, ("batch", "mlp"))
"""
PROBES = """
import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec

from .model import RULES, Block


def shardlint_probe_block():
    mesh = jax.make_mesh((jax.device_count(),), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    model = Block()
    h = jax.ShapeDtypeStruct((8, 1024), jnp.float32, sharding=NamedSharding(mesh, PartitionSpec("x")))
    with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
        abstract = jax.eval_shape(model.init, jax.random.key(0), h)
        shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, RULES)
        return jax.jit(model.init, out_shardings=shardings).lower(jax.random.key(0), h)
"""
OTHER_SCRIPT = """
import jax
import jax.numpy as jnp
from pkg.model import Block

variables = Block().init(jax.random.key(0), jnp.ones((8, 1024)))
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    files = {
        "pyproject.toml": "[project]\nname = 'demo'\n",
        "pkg/__init__.py": "",
        "pkg/model.py": MODEL,
        "pkg/probes.py": PROBES,
        "other_script.py": OTHER_SCRIPT,
    }
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return tmp_path


def _line(project: Path, name: str, text: str) -> int:
    lines = (project / name).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_reach_follows_imports_not_other_scripts(project: Path) -> None:
    reach = probe_reach(project / "pkg" / "probes.py", "shardlint_probe_block", project)
    model = (project / "pkg" / "model.py").resolve()
    assert reach.files == sorted([model, (project / "pkg" / "probes.py").resolve()])
    assert reach.contains(model, _line(project, "pkg/model.py", '"mlp"'))  # in class Block
    assert reach.contains(model, _line(project, "pkg/model.py", "RULES ="))
    assert not reach.contains((project / "other_script.py").resolve(), 5)


def _leaf(names: list[str | None] | None, path: str = "out['params']['w'].value") -> dict:
    leaf = {"path": path, "role": "out", "partition_names": names, "partition_kind": "logical"}
    return {k: v for k, v in leaf.items() if v is not None}


def test_which_finding_speaks_about_which_leaf() -> None:
    mlp = "logical axis name 'mlp' has no rule in the project's logical axis rules: ..."
    assert "'mlp' has no rule" in (because("SHL201", mlp, _leaf(["embed", "mlp"])) or "")
    assert because("SHL201", mlp, _leaf(["embed", "vocab"])) is None
    assert because("SHL201", mlp, _leaf(None)) is None
    assert "take effect only with axis rules" in (
        because("SHL102", "", _leaf(["ensemble", None])) or ""
    )
    mesh_names = {**_leaf(["x", None]), "partition_kind": "mesh"}
    assert because("SHL102", "", mesh_names) is None  # mesh axis names need no rules
    assert because("SHL103", "", mesh_names) is not None
    assert because("SHL103", "", _leaf(None, "params['dense']['kernel']")) is not None
    assert because("SHL103", "", _leaf(None, "batch['tokens']")) is None
    assert because("SHL203", "", _leaf([None, "embed"])) is not None
    assert because("SHL203", "", _leaf(["layers", "embed"])) is None
    assert because("SHL303", "", _leaf(None, "opt_state[0].mu['w']")) is not None
    assert because("SHL303", "", _leaf(None, "params['w']")) is None
    assert because("SHL302", "", _leaf(None, "opt_state[0].mu['w']")) is None
    assert because("SHL302", "", _leaf(None, "out['params']['w']")) is not None


@pytest.mark.memory
@needs_flax
def test_replicated_leaves_carry_their_axis_rule_finding_only(
    shardlint_memory: Callable[..., CliResult], project: Path, tmp_path: Path
) -> None:
    html = tmp_path / "report.html"
    result = shardlint_memory(
        "pkg/probes.py", "--devices", "2", "--format", "json", "--html", str(html), cwd=project
    )
    assert result.code == 0, result.err
    run = result.json()["probes"][0]["runs"][0]
    mlp_line = _line(project, "pkg/model.py", '("embed", "mlp")')
    vocab_line = _line(project, "pkg/model.py", '("embed", "vocab")')
    unsharded = {leaf["path"]: leaf for leaf in run["unsharded"]}
    assert set(unsharded) == {"out['params']['w'].value", "out['params']['b'].value"}
    (w_reason,) = unsharded["out['params']['w'].value"]["reasons"]
    assert (w_reason["code"], w_reason["path"], w_reason["line"]) == (
        "SHL201",
        "pkg/model.py",
        mlp_line,
    )
    assert w_reason["link"] == "likely cause" and "'mlp' has no rule" in w_reason["message"]
    assert w_reason["because"] == "its dimension named 'mlp' has no rule, so it is not split"
    (b_reason,) = unsharded["out['params']['b'].value"]["reasons"]
    assert (b_reason["code"], b_reason["line"]) == ("SHL201", vocab_line)
    w_leaf = next(leaf for leaf in run["leaves"] if leaf["path"] == "out['params']['w'].value")
    assert w_leaf["partition_names"] == ["embed", "mlp"] and w_leaf["reasons"] == [w_reason]
    # other_script.py's SHL102/SHL103 are about code this probe never runs.
    assert "other_script" not in result.out
    (finding,) = [f for f in result.json()["findings"] if f["code"] == "SHL901"]
    assert {(r["path"], r["line"]) for r in finding["related"]} == {
        ("pkg/model.py", mlp_line),
        ("pkg/model.py", vocab_line),
    }
    assert "likely cause, from the static analysis: SHL201 at pkg/model.py:" in finding["message"]
    page = html.read_text(encoding="utf-8")
    assert "likely cause: <b>SHL201</b> pkg/model.py:" in page

    table = shardlint_memory("pkg/probes.py", "--devices", "2", cwd=project)
    assert "likely causes of unsharded leaves at 2 devices (static analysis)" in table.out
    assert f"SHL201 at pkg/model.py:{mlp_line}: its dimension named 'mlp'" in table.out
    assert "REPLICATED cause: SHL201" in table.out


@pytest.mark.memory
@needs_flax
def test_check_memory_gives_related_locations(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from shardlint.cli import main

    monkeypatch.chdir(project)
    found = measured_findings(["pkg/probes.py"], root=project, devices=[2])
    assert [r["path"] for f in found for r in f["related"]] == ["pkg/model.py"] * 2
    capsys.readouterr()
    code = main(["check", "--memory", "pkg/probes.py", "--format", "json", "--no-cache"])
    items = json.loads(capsys.readouterr().out)
    assert code == 1
    (replicated,) = [i for i in items if i["code"] == "SHL901"]
    assert {Path(r["path"]).name for r in replicated["related"]} == {"model.py"}
    assert all(r["message"].startswith("likely cause: SHL201") for r in replicated["related"])


NNX_PROBE = """
import jax
from flax import nnx


class Mlp(nnx.Module):
    def __init__(self, rngs):
        init = nnx.initializers.lecun_normal()
        self.w = nnx.Param(init(rngs.params(), (1024, 2048)), sharding_names=("embed", "mlp"))


def shardlint_probe_nnx():
    mesh = jax.make_mesh((jax.device_count(),), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    with jax.set_mesh(mesh), nnx.logical_axis_rules((("embed", None), ("mlp", None))):
        state = nnx.state(nnx.eval_shape(lambda: Mlp(nnx.Rngs(0))))
        return jax.jit(lambda s: jax.tree.map(lambda a: a * 2, s)).lower(state)
"""


@pytest.mark.memory
@needs_flax
def test_nnx_variables_give_their_sharding_names(
    shardlint_memory: Callable[..., CliResult], write_probe: Callable[[str, str], Path]
) -> None:
    write_probe("nnx_probe.py", NNX_PROBE)
    result = shardlint_memory("nnx_probe.py", "--devices", "2", "--format", "json")
    assert result.code == 0, result.err
    run = result.json()["probes"][0]["runs"][0]
    arg = next(leaf for leaf in run["leaves"] if leaf["role"] == "arg")
    assert (arg["partition_names"], arg["partition_kind"]) == (["embed", "mlp"], "nnx")
    assert arg["replicated"] and "reasons" not in arg  # the rules replicate it on purpose
