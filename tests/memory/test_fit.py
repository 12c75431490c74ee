"""`shardlint memory --fit`: the planner's real compiles (simulated CPU devices, no mocks), its
plans pasted back into the probe and measured again, and what it says when it cannot help."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from shardlint.memory.__main__ import main
from shardlint.memory.plan import fit_request
from shardlint.memory.plan.collectives import count
from shardlint.memory.plan.space import rules_table
from shardlint.memory.plan.table import paste, table_code

from .memory_support import DECODER_PROBE, needs_flax

CAPACITY = "100MiB"  # the small decoder needs ~135 MiB per device with `embed` unsharded


def small_decoder(rules_line: str = '    ("embed", None),') -> str:
    """The shipped 1B decoder probe at CI scale (~15M parameters), its `embed` rule replaced."""
    text = DECODER_PROBE.read_text(encoding="utf-8")
    sizes = "LAYERS, D_MODEL, D_MLP, HEADS, VOCAB, SEQ, BATCH = 20, 2048, 8192, 16, 32000, 512, 8"
    assert sizes in text and '    ("embed", "fsdp"),' in text
    text = text.replace(sizes, sizes.split(" = ")[0] + " = 4, 512, 2048, 8, 4096, 128, 8")
    return text.replace('    ("embed", "fsdp"),', rules_line)


def _memory(cwd: Path, *argv: str) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--format", "json", "--quiet"])
    return code, json.loads(out.getvalue()), err.getvalue()


# ---- the search, for real ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def planned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    folder = tmp_path_factory.mktemp("fit")
    probe = folder / "probe.py"
    probe.write_text(small_decoder(), encoding="utf-8")
    code, data, err = _memory(folder, str(probe), "--devices", "8", "--capacity", CAPACITY,
                              "--fit", "--no-whatif")
    assert code == 1, err  # the probe as written still does not fit: the plan is a proposal
    return probe, data["probes"][0]["runs"][0]


@pytest.mark.memory
@pytest.mark.slow
@needs_flax
def test_a_plan_fits_and_its_table_pasted_in_measures_the_same(planned: tuple[Path, dict]) -> None:
    probe, run = planned
    fit = run["fit"]
    assert run["fits"] is False and fit["status"] == "plans", fit
    assert fit["compiles"] <= 40
    # The first plan that keeps the mesh: its table alone is what the code action pastes.
    plan = next(p for p in fit["plans"] if all(c["kind"] == "rule" for c in p["changes"]))
    assert plan["fits"] and plan["peak_bytes"] <= 100 * 2**20 < fit["baseline"]["peak_bytes"]
    assert len(plan["changes"]) == 1
    pasted = probe.with_name("pasted.py")
    pasted.write_text(paste(probe.read_text(encoding="utf-8"), fit["table"], plan["code"]),
                      encoding="utf-8")
    assert "# shardlint --fit: was" in pasted.read_text(encoding="utf-8")
    code, data, err = _memory(probe.parent, str(pasted), "--devices", "8", "--capacity", CAPACITY,
                              "--no-whatif")
    assert code == 0, err
    again = data["probes"][0]["runs"][0]["per_device"]["peak_estimate"]
    assert abs(again - plan["peak_bytes"]) <= 0.05 * plan["peak_bytes"]


@pytest.mark.memory
@pytest.mark.slow
@needs_flax
def test_plans_in_json_have_the_documented_shape(planned: tuple[Path, dict]) -> None:
    _, run = planned
    plans = run["fit"]["plans"]
    assert plans
    for plan in plans:
        assert {"rules", "mesh", "peak_bytes", "fits", "changes", "collectives"} <= set(plan)
        for name, value in plan["rules"]:
            assert isinstance(name, str)
            assert value is None or isinstance(value, str) or (
                isinstance(value, list) and all(isinstance(v, str) for v in value))
        assert plan["mesh"] == {"fsdp": 4, "tensor": 2} or plan["changes"][-1]["kind"] == "mesh"
        assert all(isinstance(n, int) for n in plan["mesh"].values())
        assert isinstance(plan["peak_bytes"], int) and plan["fits"] is True
        for kind, c in plan["collectives"].items():
            assert kind in ("all-gather", "all-reduce", "reduce-scatter", "all-to-all",
                            "collective-permute")
            assert c["count"] > 0 and c["bytes"] >= 0
    ranks = [(len(p["changes"]), sum(c["bytes"] for c in p["collectives"].values()))
             for p in plans]
    assert ranks == sorted(ranks)  # fewest changes, then least communication


@pytest.mark.memory
@pytest.mark.slow
@needs_flax
def test_a_probe_that_fits_gets_no_change(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(small_decoder(), encoding="utf-8")
    code, data, err = _memory(tmp_path, str(probe), "--devices", "8", "--capacity", "1GiB",
                              "--fit", "--no-whatif")
    assert code == 0, err
    fit = data["probes"][0]["runs"][0]["fit"]
    assert fit["status"] == "fits" and fit["plans"] == [] and fit["compiles"] == 0


@pytest.mark.memory
@pytest.mark.slow
@needs_flax
def test_rules_built_at_run_time_are_not_varied_and_the_report_says_why(tmp_path: Path) -> None:
    text = small_decoder().replace("RULES = (", "RULES = tuple((", 1)
    text = text.replace('    ("length", None),\n)', '    ("length", None),\n))', 1)
    probe = tmp_path / "probe.py"
    probe.write_text(text, encoding="utf-8")
    code, data, err = _memory(tmp_path, str(probe), "--devices", "8", "--capacity", CAPACITY,
                              "--fit", "--fit-budget-compiles", "1", "--no-whatif")
    assert code == 1, err
    fit = data["probes"][0]["runs"][0]["fit"]
    assert "built at run time" in fit["rules_note"] and "cannot vary" in fit["rules_note"]
    assert all(c["kind"] == "mesh" for p in fit["plans"] for c in p["changes"])
    assert fit["compiles"] <= 1


# ---- the parts, without jax -------------------------------------------------------------------
def _table(tmp_path: Path, source: str):
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    return rules_table(path)


def test_a_module_level_literal_table_is_found_with_its_range(tmp_path: Path) -> None:
    source = ('import flax.linen as nn\n\nRULES = [("batch", "data"), ("mlp", ("data", "model")),'
              ' ("embed", None)]\n\ndef f():\n    with nn.logical_axis_rules(RULES):\n        pass\n')
    table, why = _table(tmp_path, source)
    assert why is None and table is not None
    assert table.name == "RULES" and table.container == "list"
    assert table.rows == (("batch", "data"), ("mlp", ("data", "model")), ("embed", None))
    assert (table.line, table.col, table.end_line) == (3, 8, 3)
    code = table_code(table, [["batch", "data"], ["mlp", "model"], ["embed", None],
                              ["vocab", "model"]])
    assert code.splitlines() == [
        "[",
        '    ("batch", "data"),',
        '    ("mlp", "model"),  # shardlint --fit: was ("data", "model")',
        '    ("embed", None),',
        '    ("vocab", "model"),  # shardlint --fit: added',
        "]",
    ]
    pasted = paste(source, table.to_dict(), code)
    assert pasted.startswith("import flax.linen as nn\n\nRULES = [\n")
    assert pasted.endswith("]\n\ndef f():\n    with nn.logical_axis_rules(RULES):\n        pass\n")


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("import flax.linen as nn\ndef f():\n    nn.logical_axis_rules(((\"a\", \"b\"),))\n",
         "not a module-level name"),
        ("from config import RULES\nimport flax.linen as nn\nnn.logical_axis_rules(RULES)\n",
         "is imported into probe.py (line 1)"),
        ("import flax.linen as nn\ndef f():\n    R = ()\n    nn.logical_axis_rules(R)\n",
         "not bound at the top level"),
        ("import flax.linen as nn\nRULES = load()\nnn.logical_axis_rules(RULES)\n",
         "built at run time"),
        ("import flax.linen as nn\nA = ()\nB = ()\nnn.logical_axis_rules(A)\n"
         "nn.logical_to_mesh_sharding(t, m, B)\n", "2 rules tables"),
        ("import flax.linen as nn\nR = ()\nR = ((\"a\", None),)\nnn.logical_axis_rules(R)\n",
         "bound 2 times"),
        ("import flax.linen as nn\nR = ((1, 2),)\nnn.logical_axis_rules(R)\n",
         "not a sequence of"),
        ("import jax\n", "enters no rules table"),
    ],
)
def test_rules_that_are_not_one_literal_table_say_why(tmp_path: Path, source: str,
                                                      why: str) -> None:
    table, reason = _table(tmp_path, source)
    assert table is None and reason is not None and why in reason


def test_the_shipped_decoder_probe_has_a_table_to_vary() -> None:
    request = fit_request([type("P", (), {"path": DECODER_PROBE, "key": "k"})()], 2**30)
    assert request.specs["k"]["rules"]["name"] == "RULES" and not request.notes


def test_collectives_are_counted_with_their_bytes_from_hlo_text() -> None:
    hlo = """
  %all-gather.3 = f32[20,2048,8192]{2,1,0} all-gather(f32[20,512,8192]{2,1,0} %p), dimensions={1}
  all-reduce-start.1 = (bf16[8,8]{1,0}, bf16[8,8]{1,0}) all-reduce-start(bf16[8,8]{1,0} %x)
  all-reduce-done.1 = bf16[8,8]{1,0} all-reduce-done(all-reduce-start.1)
  %cp = s32[] collective-permute(s32[] %z), source_target_pairs={{0,1}}
"""
    assert count(hlo) == {
        "all-gather": {"count": 1, "bytes": 20 * 2048 * 8192 * 4},
        "all-reduce": {"count": 1, "bytes": 8 * 8 * 2},
        "collective-permute": {"count": 1, "bytes": 4},
    }


@pytest.mark.parametrize(("argv", "message"), [
    (["--fit"], "--fit needs a capacity"),
    (["--capacity", "1GiB", "--fit-budget-compiles", "3"], "need --fit"),
    (["--capacity", "1GiB", "--fit", "--fit-budget-compiles", "0"], "at least 1"),
])
def test_fit_options_are_checked_before_anything_runs(tmp_path: Path, argv: list[str],
                                                      message: str) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def shardlint_probe_x():\n    raise SystemExit('never called')\n",
                     encoding="utf-8")
    err = io.StringIO()
    with contextlib.chdir(tmp_path), contextlib.redirect_stderr(err):
        code = main([str(probe), *argv, "--quiet"])
    assert code == 2 and message in err.getvalue()


@pytest.mark.parametrize("source", [
    # the table handed to the probe's own helper, which enters it under a parameter name
    ("import flax.linen as nn\nRULES = ((\"batch\", \"data\"), (\"embed\", None))\n"
     "def step_for(rules):\n    with nn.logical_axis_rules(rules):\n        pass\n"
     "def shardlint_probe_step():\n    return step_for(RULES)\n"),
    # ... or to a helper of another module (a sibling probe file's)
    ("from probe_model import train_step\nRULES = [(\"batch\", \"data\"), (\"embed\", None)]\n"
     "def shardlint_probe_step():\n    return train_step(8, rules=RULES)\n"),
])
def test_a_table_handed_to_a_helper_is_the_one_varied(tmp_path: Path, source: str) -> None:
    table, why = _table(tmp_path, source)
    assert why is None and table is not None
    assert table.name == "RULES" and table.rows == (("batch", "data"), ("embed", None))


def test_a_helper_handed_no_literal_table_still_says_why(tmp_path: Path) -> None:
    source = ("import flax.linen as nn\nLAYERS = 4\ndef step_for(layers, rules):\n"
              "    with nn.logical_axis_rules(rules):\n        pass\n"
              "def shardlint_probe_step():\n    return step_for(LAYERS, load())\n")
    table, why = _table(tmp_path, source)
    assert table is None and why is not None and "`load()`, not a module-level name" in why


def test_the_data_parallel_decoder_probe_varies_its_own_table() -> None:
    probe = DECODER_PROBE.with_name("data_parallel.py")
    table, why = rules_table(probe)
    assert why is None and table is not None and table.path == probe.resolve()
    assert dict(table.rows)["embed"] is None
