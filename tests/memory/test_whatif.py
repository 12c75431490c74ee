"""Measured savings: the findings a probe reaches, compiled again with their remedies (real
jax compiles on simulated CPU devices)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from pathlib import Path

import pytest

from shardlint.memory.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
SEED_PROBES = ROOT / "examples" / "seed_ensemble" / "probes.py"
DECODER = ROOT / "examples" / "decoder_1b" / "probe.py"
FIGURES = ("arguments", "outputs", "aliased", "temporaries", "peak")


def _memory(*argv: str) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--format", "json", "--quiet"])
    return code, json.loads(out.getvalue()), err.getvalue()


def _figures(run: dict) -> dict[str, int]:
    d = run["per_device"]
    return {"arguments": d["argument"], "outputs": d["output"], "aliased": d["alias"],
            "temporaries": d["temp"], "peak": d["peak_estimate"]}


@pytest.fixture(scope="module", autouse=True)
def own_cache(tmp_path_factory: pytest.TempPathFactory):
    """A user cache folder of this module's own: the what-if cache starts empty."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        yield


@pytest.fixture(scope="module")
def seed() -> dict:
    code, data, err = _memory(f"{SEED_PROBES}:shardlint_probe_original",
                              f"{SEED_PROBES}:shardlint_probe_fixed", "--devices", "1,2,8")
    assert code == 0, err
    return data


@pytest.mark.slow
def test_seed_original_findings_each_carry_a_saving_and_together_give_fixed(seed: dict) -> None:
    original, fixed = seed["probes"]
    savings = {s["code"]: s for s in original["savings"]}
    assert set(savings) == {"SHL102", "SHL103", "SHL302"}  # the contexts and the init
    assert [s["code"] for s in original["savings"]] == ["SHL103", "SHL102", "SHL302"]
    for s in savings.values():
        assert s["path"].endswith("seed_ensemble/probes.py")
        assert set(s["devices"]) == {"1", "2", "8"} and s["not_applied"] == {}
        for n, got in s["devices"].items():
            assert got["saved"] == got["before"]["peak"] - got["after"]["peak"]
    assert savings["SHL302"]["applied_after"] == ["SHL103", "SHL102"]
    # Cumulative: each step starts where the one before ended.
    for n in ("1", "2", "8"):
        chain = [s["devices"][n] for s in original["savings"]]
        assert all(a["after"] == b["before"] for a, b in zip(chain, chain[1:]))
    # All remedies together: exactly what the fixed probe measures, at every device count.
    by_count = {str(r["devices"]): _figures(r) for r in fixed["runs"]}
    for n in ("1", "2", "8"):
        assert original["together"][n]["after"] == by_count[n], n
        base = next(r for r in original["runs"] if str(r["devices"]) == n)
        assert original["together"][n]["before"] == _figures(base)
    assert original["together"]["8"]["saved"] > 400 * 1024**2  # 512 MiB -> 64 MiB
    assert original["together"]["1"]["saved"] == 0  # one device: nothing to shard
    assert fixed["savings"] == [] and fixed["together"] == {}


@pytest.mark.slow
def test_at_most_one_compile_per_finding_per_device_count(seed: dict) -> None:
    """Counted by jax's own compile events in the worker, every backend compile of each what-if
    run: the step once, nothing else (the probe returns `(fn, args)`, so the contexts are
    entered around the worker's trace only, not around the probe's own eager code)."""
    original = seed["probes"][0]
    for n in ("1", "2", "8"):
        counts = [s["compiles"][n] for s in original["savings"]]
        assert counts == [{"step": 1, "probe": 0, "total": 1}] * 3, (n, counts)


@pytest.mark.slow
def test_what_ifs_are_cached_by_the_sources_the_probe_reaches(tmp_path: Path) -> None:
    """A second run answers the what-ifs from the cache (same figures, nothing compiled for
    them); a change in a file the probe reaches compiles them again."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n", encoding="utf-8")
    probe = project / "probes.py"
    shutil.copy(SEED_PROBES, probe)
    spec = f"{probe}:shardlint_probe_original"
    first = _memory(spec, "--devices", "2")[1]["probes"][0]["savings"]
    second = _memory(spec, "--devices", "2")[1]["probes"][0]["savings"]
    assert [s["cached"] for s in first] == [[], [], []]
    assert [s["cached"] for s in second] == [[2], [2], [2]]
    strip = lambda found: [{k: v for k, v in s.items() if k != "cached"} for s in found]
    assert strip(second) == strip(first)
    probe.write_text(probe.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    third = _memory(spec, "--devices", "2")[1]["probes"][0]["savings"]
    assert [s["cached"] for s in third] == [[], [], []] and strip(third) == strip(first)


@pytest.mark.slow
def test_decoder_without_donation_reports_the_difference_of_the_two_compiles(
        tmp_path: Path) -> None:
    text = DECODER.read_text(encoding="utf-8")
    assert "            donate_argnums=0,\n" in text
    copy = tmp_path / "decoder" / "probe.py"
    copy.parent.mkdir()
    copy.write_text(text.replace("            donate_argnums=0,\n", ""), encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'copy'\n", encoding="utf-8")
    step = ":shardlint_probe_decoder_1b_train_step"  # the file also has a 470M variant
    code, undonated, err = _memory(f"{copy}{step}", "--devices", "8")
    assert code == 0, err
    code, donated, err = _memory(f"{DECODER}{step}", "--devices", "8", "--no-whatif")
    assert code == 0, err
    (probe,) = undonated["probes"]
    (saving,) = probe["savings"]
    assert saving["code"] == "SHL401" and saving["remedy"] == "jit with donate_argnums=(0,)"
    assert saving["compiles"]["8"] == {"step": 1, "probe": 0, "total": 1}
    got = saving["devices"]["8"]
    assert got["before"] == _figures(probe["runs"][0])  # the copy, compiled as it is
    assert got["after"] == _figures(donated["probes"][0]["runs"][0])  # the authors' donation
    assert got["after"]["aliased"] > 1024**3 and got["before"]["aliased"] == 0
    assert got["saved"] == got["before"]["peak"] - got["after"]["peak"] > 0
    assert donated["probes"][0]["savings"] == []


_NO_MESH = """\
import flax.linen as nn
import jax
import jax.numpy as jnp


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        return nn.Dense(256, kernel_init=init)(x)


RULES = (("embed", None), ("mlp", "data"))


def _rules_in_use():
    with nn.logical_axis_rules(RULES):
        pass


def shardlint_probe_init():
    return jax.jit(MLP().init), (jax.random.key(0), jax.ShapeDtypeStruct((8, 64), jnp.float32))


def unreached(model, x):
    return jax.jit(model.init)(jax.random.key(0), x)
"""


@pytest.mark.slow
def test_a_remedy_that_cannot_apply_says_why_and_compiles_nothing(tmp_path: Path) -> None:
    """No mesh anywhere in the probe: the mesh remedy is not applied (and says so); the rules
    remedy still runs; the init remedy cannot derive shardings without a mesh."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n", encoding="utf-8")
    (tmp_path / "mesh.py").write_text("import jax\nMESH = jax.make_mesh((1,), ('data',))\n")
    probe = tmp_path / "probe.py"
    probe.write_text(_NO_MESH, encoding="utf-8")
    code, data, err = _memory(str(probe), "--devices", "2")
    assert code == 0, err
    savings = {s["code"]: s for s in data["probes"][0]["savings"]}
    assert "no mesh to enter" in savings["SHL103"]["not_applied"]["2"]
    assert savings["SHL103"]["compiles"]["2"]["total"] == 0 and savings["SHL103"]["devices"] == {}
    assert savings["SHL102"]["devices"]["2"]["saved"] == 0
    assert "no mesh" in savings["SHL302"]["not_applied"]["2"]
    assert data["probes"][0]["together"]["2"]["saved"] == 0


def _check_json(cwd: Path, *argv: str, monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    from shardlint.cli import main as cli

    monkeypatch.chdir(cwd)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli(["check", *argv, "--format", "json", "--no-cache"])
    assert code in (0, 1), err.getvalue()
    return json.loads(out.getvalue())


@pytest.mark.slow
def test_check_memory_adds_the_saving_to_reached_findings_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        "[project]\nname = 'p'\n[tool.shardlint.memory]\ndevices = [2]\n", encoding="utf-8")
    shutil.copy(SEED_PROBES, project / "probes.py")
    (project / "other.py").write_text(_NO_MESH.replace("shardlint_probe_init", "not_a_probe"),
                                      encoding="utf-8")
    plain = {(f["path"], f["line"], f["code"]): f for f in _check_json(
        project, ".", monkeypatch=monkeypatch)}
    measured = {(f["path"], f["line"], f["code"]): f for f in _check_json(
        project, ".", "--memory", monkeypatch=monkeypatch)}
    reached = next(k for k in plain if k[0] == "probes.py" and k[2] == "SHL302")
    unreached = [k for k in plain if k[0] == "other.py"]
    assert unreached, plain
    for key in unreached:  # no probe reaches it: the message is the static one
        assert measured[key]["message"] == plain[key]["message"] and "saving" not in measured[key]
    f = measured[reached]
    assert f["message"].startswith(plain[reached]["message"])
    assert re.search(r"memory check, probe `shardlint_probe_original`: fixing it saves up to "
                     r"[\d.]+ MiB per device", f["message"]), f["message"]
    (saving,) = f["saving"]
    assert saving["probe"] == "shardlint_probe_original" and saving["devices"]["2"]["saved"] > 0


@pytest.mark.slow
def test_a_failing_probe_leaves_messages_unchanged(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        "[project]\nname = 'p'\n[tool.shardlint.memory]\ndevices = [2]\n", encoding="utf-8")
    broken = SEED_PROBES.read_text(encoding="utf-8").replace(
        "    model, mesh = _model(), _mesh()\n    x = jax.ShapeDtypeStruct(\n",
        "    model, mesh = _model(), _mesh()\n    raise RuntimeError('broken probe')\n"
        "    x = jax.ShapeDtypeStruct(\n", 1)
    (project / "probes.py").write_text(broken, encoding="utf-8")
    plain = _check_json(project, "probes.py", monkeypatch=monkeypatch)
    measured = _check_json(project, "probes.py", "--memory", monkeypatch=monkeypatch)
    failed = [f for f in measured if f["code"] == "SHL900"]
    assert failed and "broken probe" in failed[0]["message"]  # why, in the measured finding
    static = [f for f in measured if f["code"] != "SHL900" and not f["code"].startswith("SHL90")]
    assert [(f["code"], f["message"]) for f in static] == \
        [(f["code"], f["message"]) for f in plain]
    assert not any("saving" in f for f in measured)


_DECORATED = """\
import functools

import jax
import jax.numpy as jnp
import optax

tx = optax.adam(1e-3)


def loss(params, x):
    return jnp.mean((x @ params["w"]) ** 2)


@functools.partial(jax.jit, static_argnums=())
def train_step(params, opt_state, x):
    grads = jax.grad(loss)(params, x)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def shardlint_probe_step():
    params = {"w": jax.ShapeDtypeStruct((1024, 1024), jnp.float32)}
    opt_state = jax.eval_shape(tx.init, params)
    return train_step, (params, opt_state, jax.ShapeDtypeStruct((8, 1024), jnp.float32))
"""


@pytest.mark.slow
def test_donation_reaches_a_step_jitted_by_a_decorator_at_import(tmp_path: Path) -> None:
    """The jit runs when the probe's module is imported (a decorator), long before the what-if
    run: the worker's jax.jit stand-in still applies each run's remedies to it."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n", encoding="utf-8")
    probe = tmp_path / "train.py"
    probe.write_text(_DECORATED, encoding="utf-8")
    code, data, err = _memory(str(probe), "--devices", "1")
    assert code == 0, err
    (saving,) = data["probes"][0]["savings"]
    assert saving["code"] == "SHL401" and saving["remedy"] == "jit with donate_argnums=(0, 1)"
    got = saving["devices"]["1"]
    # params, mu and nu (4 MiB each) and the step count (4 B) are reused in place
    assert got["before"]["aliased"] == 0 and got["after"]["aliased"] == 3 * 4 * 1024**2 + 4
    assert got["saved"] > 0
