"""The `shardlint check` command as users run it: exit codes, formats, config, suppressions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from shardlint.cli import main

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "examples" / "seed_ensemble"
SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())

PITFALL = """\
import jax
from jax.sharding import Mesh
mesh = Mesh(jax.devices(), ("data",))
with mesh:
    pass
params = jax.tree_map(lambda p: p, {})
"""


def run(argv, capsys, cwd: Path | None = None, monkeypatch=None):
    if cwd is not None and monkeypatch is not None:
        monkeypatch.chdir(cwd)
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def as_json(argv, capsys):
    code, out, err = run([*argv, "--format", "json", "--no-cache"], capsys)
    return code, json.loads(out), err


# ---- the seed story ------------------------------------------------------------------------------
def test_seed_original_reports_missing_rules_and_mesh(capsys):
    code, items, _ = as_json(["check", str(SEED / "original.py")], capsys)
    assert code == 1
    codes = {i["code"] for i in items}
    assert {"SHL102", "SHL103"} <= codes
    src = (SEED / "original.py").read_text().splitlines()
    for i in items:
        if i["code"] in ("SHL102", "SHL103"):
            assert ".init(" in src[i["line"] - 1] or ".apply(" in src[i["line"] - 1]


def test_seed_discussion_advice_reports_legacy_mesh_on_the_with_line(capsys):
    code, items, _ = as_json(["check", str(SEED / "discussion_advice.py")], capsys)
    assert code == 1
    shl101 = [i for i in items if i["code"] == "SHL101"]
    assert len(shl101) == 1
    line = (SEED / "discussion_advice.py").read_text().splitlines()[shl101[0]["line"] - 1]
    assert line.startswith("with nn.logical_axis_rules(rules), mesh:")
    assert line[shl101[0]["column"] - 1:].startswith("mesh")
    assert shl101[0]["fix"]["applicability"] == "unsafe"  # (Flax constraints start to apply: placement changes)
    assert not {"SHL102", "SHL103"} & {i["code"] for i in items}


def test_seed_fixed_is_clean(capsys):
    code, out, _ = run(["check", str(SEED / "fixed.py"), "--no-cache"], capsys)
    assert code == 0, out
    assert out == ""


def test_examples_folder(capsys):
    code, items, _ = as_json(["check", str(ROOT / "examples")], capsys)
    assert code == 1
    paths = {Path(i["path"]).name for i in items}
    assert "fixed.py" not in paths
    assert {"original.py", "discussion_advice.py"} <= paths


# ---- formats -------------------------------------------------------------------------------------
def test_json_fields(tmp_path, capsys):
    f = tmp_path / "t.py"
    f.write_text(PITFALL)
    code, items, _ = as_json(["check", str(f)], capsys)
    assert code == 1
    assert [i["code"] for i in items] == ["SHL101", "SHL501"]
    for i in items:
        assert set(i) >= {"code", "name", "severity", "message", "path", "line", "column",
                          "end_line", "end_column", "fix"}
    w = items[0]
    assert (w["line"], w["column"], w["end_line"], w["end_column"]) == (4, 6, 4, 10)
    t = items[1]
    assert (t["line"], t["column"], t["end_column"]) == (6, 10, 22)


def test_sarif_validates_against_the_official_schema(tmp_path, capsys):
    f = tmp_path / "t.py"
    f.write_text(PITFALL)
    code, out, _ = run(["check", str(f), "--format", "sarif", "--no-cache"], capsys)
    assert code == 1
    doc = json.loads(out)
    jsonschema.validate(doc, SCHEMA)
    results = doc["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["SHL101", "SHL501"]
    assert all(r["partialFingerprints"] for r in results)
    # the same tree gives the same fingerprints
    code, out2, _ = run(["check", str(f), "--format", "sarif", "--no-cache"], capsys)
    assert [r["partialFingerprints"] for r in json.loads(out2)["runs"][0]["results"]] == \
        [r["partialFingerprints"] for r in results]


def test_github_annotations(tmp_path, capsys):
    f = tmp_path / "t.py"
    f.write_text(PITFALL)
    code, out, _ = run(["check", str(f), "--format", "github", "--no-cache"], capsys)
    lines = out.strip().splitlines()
    assert lines[0].startswith("::warning file=")
    assert lines[1].startswith("::error file=")
    assert ",line=4,col=6,endLine=4,endColumn=10," in lines[0]


def test_full_format_shows_the_source(tmp_path, capsys):
    f = tmp_path / "t.py"
    f.write_text(PITFALL)
    _, out, _ = run(["check", str(f), "--format", "full", "--no-cache"], capsys)
    assert "4 | with mesh:" in out and "^^^^" in out


def test_statistics_and_exit_zero(tmp_path, capsys):
    f = tmp_path / "t.py"
    f.write_text(PITFALL)
    code, out, _ = run(["check", str(f), "--statistics", "--exit-zero", "--no-cache"], capsys)
    assert code == 0
    assert "SHL101" in out and "SHL501" in out and "Found 2 findings." in out


def test_stdin(tmp_path, capsys, monkeypatch):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO(PITFALL))
    code, out, _ = run(["check", "-", "--stdin-filename", str(tmp_path / "x.py"),
                        "--no-cache"], capsys)
    assert code == 1
    assert "x.py:4:6: SHL101" in out


# ---- select / ignore / config --------------------------------------------------------------------
def test_select_and_ignore(tmp_path, capsys):
    f = tmp_path / "t.py"
    f.write_text(PITFALL)
    _, items, _ = as_json(["check", str(f), "--select", "SHL5"], capsys)
    assert [i["code"] for i in items] == ["SHL501"]
    _, items, _ = as_json(["check", str(f), "--ignore", "SHL1"], capsys)
    assert [i["code"] for i in items] == ["SHL501"]
    code, _, err = run(["check", str(f), "--select", "SHL999"], capsys)
    assert code == 2 and "SHL999" in err


def test_config_table(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.shardlint]\nignore = ["SHL501"]\nseverity = { SHL101 = "info" }\n'
        'per-file-ignores = { "legacy/*" = ["SHL1"] }\n')
    (tmp_path / "t.py").write_text(PITFALL)
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "old.py").write_text(PITFALL)
    code, items, _ = as_json(["check", str(tmp_path)], capsys)
    assert code == 1
    assert [(Path(i["path"]).name, i["code"], i["severity"]) for i in items] == \
        [("t.py", "SHL101", "info")]


def test_configuration_files_named_are_read_as_configuration_not_python(tmp_path, capsys):
    # A YAML or gin file named on the command line (a hook, `git diff --name-only`) is not
    # Python: it is not parsed as such (no SHL000), and it still counts as configuration.
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n")
    (tmp_path / "model.py").write_text(
        "import flax.linen as nn\n\n\ndef f(x):\n"
        "    return nn.with_logical_constraint(x, ('batch', 'hidden'))\n")
    (tmp_path / "train.py").write_text(
        "import flax.linen as nn\n\n\ndef run(cfg):\n"
        "    with nn.logical_axis_rules(cfg.logical_axis_rules):\n        pass\n")
    (tmp_path / "run.gin").write_text("Trainer.logical_axis_rules = [('batch', 'data')]\n"
                                      "Trainer.rules_for = %gin.REQUIRED\n")
    (tmp_path / "base.yml").write_text("logical_axis_rules: [['batch', 'data']\n")  # (broken)
    code, items, _ = as_json(["check", str(tmp_path / "run.gin"), str(tmp_path / "base.yml"),
                              str(tmp_path / "model.py")], capsys)
    assert [(Path(i["path"]).name, i["code"]) for i in items] == [("model.py", "SHL201")]
    assert "run.gin" in items[0]["message"]
    code, items, _ = as_json(["check", str(tmp_path / "run.gin")], capsys)
    assert (code, items) == (0, [])


TEST_STEP = """\
import jax

@jax.jit
def train_step(state, batch):
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, state, batch)

def run(state, batches):
    for batch in batches:
        state = train_step(state, batch)
    return state

def update(state, batch):
    return jax.tree_util.tree_map(lambda p, g: p - 0.1 * g, state, batch)

step = jax.jit(update, donate_argnums=0)

def reuse(state, batch):
    new = step(state, batch)
    return new + state
"""


@pytest.mark.parametrize("layout", ["tests/test_train.py", "pkg/tests/train_case.py",
                                    "train_test.py", "conftest.py"])
def test_test_files_are_quiet_for_memory_rules_by_default(tmp_path, capsys, layout):
    """Tests run on one device with toy sizes: missing donation (a memory rule) is quiet there,
    a read of a donated buffer (a crash) is not; the same code outside tests gets both."""
    f = tmp_path / layout
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(TEST_STEP)
    (tmp_path / "train.py").write_text(TEST_STEP)
    _, items, _ = as_json(["check", str(tmp_path), "--select", "SHL401,SHL402"], capsys)
    got = sorted((i["path"].replace("\\", "/").endswith(layout), i["code"]) for i in items)
    assert got == [(False, "SHL401"), (False, "SHL402"), (True, "SHL402")]


def test_test_files_and_their_quiet_rules_are_settings(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.shardlint]\ntest-ignore = []\n')
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_train.py").write_text(TEST_STEP)
    _, items, _ = as_json(["check", str(tmp_path), "--select", "SHL401"], capsys)
    assert [i["code"] for i in items] == ["SHL401"]
    (tmp_path / "pyproject.toml").write_text(
        '[tool.shardlint]\ntest-files = ["checks/*"]\n')
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "train.py").write_text(TEST_STEP)
    _, items, _ = as_json(["check", str(tmp_path), "--select", "SHL401"], capsys)
    assert [Path(i["path"]).parent.name for i in items] == ["tests"]


READ_AFTER_DONATION = """\
from functools import partial

import jax


@partial(jax.jit, donate_argnums=(1,))
def step(params, batch):
    return params, (batch * 2).sum()


def train(params, batch):
    params, loss = step(params, batch)
    return batch.mean() + loss
"""


def test_behaviours_in_preview_run_only_in_preview_mode(tmp_path, capsys):
    """SHL402's read of a donated argument that no output is known to fit (deleted only if XLA
    finds one) is in preview: not reported by default, nor when the rule is selected;
    `--preview` or `preview = true` reports it."""
    f = tmp_path / "train.py"
    f.write_text(READ_AFTER_DONATION)
    assert [i["code"] for i in as_json(["check", str(f)], capsys)[1]] == []
    assert [i["code"] for i in as_json(["check", str(f), "--select", "SHL402"], capsys)[1]] == []
    assert [i["code"] for i in as_json(["check", str(f), "--preview"], capsys)[1]] == ["SHL402"]
    (tmp_path / "pyproject.toml").write_text("[tool.shardlint]\npreview = true\n")
    assert [i["code"] for i in as_json(["check", str(f)], capsys)[1]] == ["SHL402"]


@pytest.mark.parametrize("table,key", [
    ('unknown-key = 1', "unknown-key"),
    ('select = "SHL1"', "select"),
    ('ignore = ["E501"]', "ignore"),
    ('severity = { SHL101 = "fatal" }', "severity.SHL101"),
    ('jax-version = "latest"', "jax-version"),
    ('test-ignore = ["tests"]', "test-ignore"),
    ('test-files = "tests/*"', "test-files"),
    ('preview = "yes"', "preview"),
])
def test_bad_config_is_a_clear_error(tmp_path, capsys, table, key):
    (tmp_path / "pyproject.toml").write_text(f"[tool.shardlint]\n{table}\n")
    (tmp_path / "t.py").write_text(PITFALL)
    code, out, err = run(["check", str(tmp_path / "t.py"), "--no-cache"], capsys)
    assert code == 2
    assert key in err and "Traceback" not in err


def test_broken_toml_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("[tool.shardlint\n")
    (tmp_path / "t.py").write_text(PITFALL)
    code, _, err = run(["check", str(tmp_path / "t.py")], capsys)
    assert code == 2 and "pyproject.toml" in err


def test_version_override_changes_findings(tmp_path, capsys):
    (tmp_path / "t.py").write_text(PITFALL)
    _, items, _ = as_json(["check", str(tmp_path / "t.py"), "--jax-version", "0.4.20",
                           "--flax-version", "0.8.0"], capsys)
    assert items == []


# ---- suppressions --------------------------------------------------------------------------------
@pytest.mark.parametrize("comment,suppressed", [
    ("# shardlint: ignore[SHL101]", True),
    ("# shardlint: ignore[SHL1]", True),
    ("# noqa: SHL101", True),
    ("# noqa: SHL5", False),
    ("# noqa", False),  # codes are required
    ("# shardlint: ignore[]", False),
])
def test_line_suppressions(tmp_path, capsys, comment, suppressed):
    f = tmp_path / "t.py"
    f.write_text(PITFALL.replace("with mesh:", f"with mesh:  {comment}"))
    _, items, _ = as_json(["check", str(f)], capsys)
    assert ("SHL101" not in {i["code"] for i in items}) is suppressed
    assert "SHL501" in {i["code"] for i in items}


def test_file_suppression(tmp_path, capsys):
    f = tmp_path / "t.py"
    f.write_text("# shardlint: file-ignore[SHL5]\n" + PITFALL)
    _, items, _ = as_json(["check", str(f)], capsys)
    assert [i["code"] for i in items] == ["SHL101"]


# ---- bad input -----------------------------------------------------------------------------------
def test_syntax_error_is_one_finding_and_other_files_still_lint(tmp_path, capsys):
    (tmp_path / "a.py").write_text("import jax\ndef f(:\n    pass\n")
    (tmp_path / "b.py").write_text(PITFALL)
    code, items, err = as_json(["check", str(tmp_path)], capsys)
    assert code == 1
    by_file = {}
    for i in items:
        by_file.setdefault(Path(i["path"]).name, []).append(i)
    assert [i["code"] for i in by_file["a.py"]] == ["SHL000"]
    assert (by_file["a.py"][0]["line"], by_file["a.py"][0]["column"]) == (2, 7)
    assert "cannot parse" in by_file["a.py"][0]["message"]
    assert {i["code"] for i in by_file["b.py"]} == {"SHL101", "SHL501"}


def test_file_without_jax_is_skipped_before_parsing(tmp_path, capsys):
    # Not even a syntax error is reported: the file is never parsed.
    (tmp_path / "plain.py").write_text("def f(:\n    mesh = 1\n")
    code, items, _ = as_json(["check", str(tmp_path / "plain.py")], capsys)
    assert code == 0 and items == []


def test_missing_path(tmp_path, capsys):
    code, _, err = run(["check", str(tmp_path / "nope.py")], capsys)
    assert code == 2 and "no such file" in err


def test_binary_and_non_utf8_files(tmp_path, capsys):
    (tmp_path / "bin.py").write_bytes(b"import jax\n\xff\xfe\x00\x00")
    code, _, err = run(["check", str(tmp_path / "bin.py"), "--no-cache"], capsys)
    assert code == 2 and "UTF-8" in err and "Traceback" not in err


def test_null_bytes(tmp_path, capsys):
    (tmp_path / "nul.py").write_text("import jax\nx = 1\x00\n")
    code, items, _ = as_json(["check", str(tmp_path / "nul.py")], capsys)
    assert code == 1 and [i["code"] for i in items] == ["SHL000"]


# ---- positions -----------------------------------------------------------------------------------
def test_columns_count_characters_not_bytes(tmp_path, capsys):
    f = tmp_path / "t.py"
    f.write_text(PITFALL.replace("params = jax.tree_map", "données = 'é😀'; p = jax.tree_map"))
    _, items, _ = as_json(["check", str(f)], capsys)
    i = next(i for i in items if i["code"] == "SHL501")
    line = f.read_text().splitlines()[i["line"] - 1]
    assert line[i["column"] - 1:i["end_column"] - 1] == "jax.tree_map"


# ---- rule docs -----------------------------------------------------------------------------------
def test_rule_docs(capsys):
    code, out, _ = run(["rule", "SHL101"], capsys)
    assert code == 0
    for heading in ("# SHL101 legacy-mesh-context", "## What it does", "## Why is this bad?",
                    "## Example", "## Use instead", "## Fix safety", "## Versions"):
        assert heading in out
    assert "# expect" not in out
    code, out, _ = run(["rules"], capsys)
    assert code == 0 and "SHL101" in out and "SHL501" in out
    code, _, err = run(["rule", "SHL999"], capsys)
    assert code == 2 and "unknown rule" in err


def test_console_script_runs_in_a_subprocess():
    proc = subprocess.run([sys.executable, "-m", "shardlint", "check", "--no-cache",
                           str(SEED / "discussion_advice.py")], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "SHL101" in proc.stdout and proc.stderr == ""


@pytest.mark.memory
@pytest.mark.slow
def test_check_memory_adds_measured_findings(capsys):
    pytest.importorskip("jax")
    probes = SEED / "probes.py"
    code, out, _ = run(["check", "--memory", str(probes), "--format", "json", "--no-cache"],
                       capsys)
    items = json.loads(out)
    assert code == 1
    assert {"SHL902", "SHL905"} <= {i["code"] for i in items}
    assert all(Path(i["path"]).name == "probes.py" for i in items)


def test_cached_findings_take_the_paths_of_this_run(tmp_path, capsys, monkeypatch):
    """A cache filled by a run that named the files by absolute path (the memory check, the
    editor) gives a relative run relative paths, in the same order as a cold run."""
    project = tmp_path / "proj"
    (project / "pkg").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (project / "pkg" / "a.py").write_text(PITFALL)
    (project / "pkg" / "b.py").write_text(PITFALL)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(project)
    cold = run(["check", "--no-cache", "pkg"], capsys)
    # Fill the cache through absolute paths for one file, then through the relative folder.
    run(["check", str(project / "pkg" / "b.py")], capsys)
    warm = run(["check", "pkg"], capsys)
    assert warm == cold
    assert "pkg/a.py" in cold[1] and str(project) not in warm[1]


_MODEL_PY = """\
import jax
import flax.linen as nn


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        y = nn.Dense(512, kernel_init=init)(x)
        return nn.with_logical_constraint(y, ("batch", "mlp"))


def create_variables(x):
    return MLP().init(jax.random.key(0), x)
"""
_TRAIN_PY = """\
import jax
from jax.sharding import Mesh
from model import MLP, create_variables

mesh = Mesh(jax.devices(), ("data",))
variables = create_variables(jax.numpy.ones((8, 4)))
again = MLP().init(jax.random.key(1), jax.numpy.ones((8, 4)))
params = jax.tree_map(lambda p: p, variables)
"""


@pytest.mark.parametrize("edited", ["model.py", "train.py"])
@pytest.mark.parametrize("edit", ["line at the top", "line in the middle", "comment",
                                  "statement", "line removed"])
def test_a_warm_run_after_an_edit_equals_a_cold_one(tmp_path, capsys, monkeypatch, edit,
                                                     edited):
    """The project digest leaves positions out, so the other files' cached findings survive a
    line added; those that point into the moved file (train.py's SHL102 relates the constraint
    sites of model.py; model.py's says `create_variables` is called at train.py:6) are made
    again: the output equals a cold run's, positions included."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (project / "model.py").write_text(_MODEL_PY)
    (project / "train.py").write_text(_TRAIN_PY)
    (project / "other.py").write_text("import jax\nleaves = jax.tree_leaves({})\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(project)
    run(["check", "--format", "json", "."], capsys)  # fills the cache
    text = (project / edited).read_text()
    middle = "\n\ndef create_variables" if edited == "model.py" else "\nvariables ="
    if edit == "line at the top":
        text = "import jax  # added\n" + text
    elif edit == "line in the middle":
        text = text.replace(middle, "\nX = 1\n" + middle, 1)
    elif edit == "comment":
        text = text.replace("jax.numpy.ones((8, 4))", "jax.numpy.ones(  # why\n    (8, 4))", 1)
    elif edit == "statement":
        text = text.replace("import jax\n", "import jax\nimport numpy\n", 1)
    else:
        text = text.replace("import jax\n", "", 1)
    (project / edited).write_text(text)
    warm = run(["check", "--format", "json", "."], capsys)
    cold = run(["check", "--format", "json", "--no-cache", "."], capsys)
    assert warm == cold
    found = json.loads(cold[1])
    assert {f["code"] for f in found} >= {"SHL102", "SHL501"}
    assert any(f["path"].endswith("train.py") and r["path"].endswith("model.py")
               for f in found for r in f["related"])
    assert any(f["path"].endswith("model.py") and "is called at train.py:" in f["message"]
               for f in found)


def test_config_reads_the_file_it_names_whatever_its_name(tmp_path, capsys):
    (tmp_path / ".git").mkdir()
    (tmp_path / "m.py").write_text(PITFALL)
    (tmp_path / "ci").mkdir()
    (tmp_path / "ci" / "lint.toml").write_text('[tool.shardlint]\nignore = ["SHL501"]\n')
    code, out, _ = run(["check", "--no-cache", "--config", str(tmp_path / "ci" / "lint.toml"),
                        str(tmp_path / "m.py")], capsys)
    assert "SHL501" not in out and "SHL10" in out
    code_all, out_all, _ = run(["check", "--no-cache", str(tmp_path / "m.py")], capsys)
    assert "SHL501" in out_all
    # a file without the table is a usage error, not a silent default
    (tmp_path / "ci" / "other.toml").write_text("[tool.other]\nx = 1\n")
    code, out, err = run(["check", "--no-cache", "--config", str(tmp_path / "ci" / "other.toml"),
                          str(tmp_path / "m.py")], capsys)
    assert code == 2 and "has no [tool.shardlint] table" in err


def test_the_program_prints_all_it_found_before_it_ends(tmp_path):
    """A report larger than a pipe's buffer, and a small one that fits in it, arrive whole
    through a block-buffered pipe, in text and JSON, with the exit code of findings (a guard
    for any shortcut out of the interpreter: one that skips the flush loses the tail); a caller
    in the same process (``main(argv)``) gets the code back."""
    # (stdout block-buffered, as a pipe makes it where PYTHONUNBUFFERED is not set)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    (tmp_path / "pyproject.toml").write_text("[project]\nname = \"t\"\n")
    body = "import jax\nfrom jax.sharding import Mesh\nmesh = Mesh(jax.devices(), (\"data\",))\n"
    (tmp_path / "train.py").write_text(body + "with mesh:\n    pass\n" * 400)
    text = subprocess.run([sys.executable, "-m", "shardlint", "check", "--no-cache", "."],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert text.returncode == 1, text.stderr
    assert len(text.stdout) > 65536
    assert text.stdout.count("SHL101") == 400 and "Found 400 findings" in text.stdout
    report = subprocess.run([sys.executable, "-m", "shardlint", "check", "--no-cache",
                             "--format", "json", "."],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert report.returncode == 1
    assert len(json.loads(report.stdout)) == 400
    (tmp_path / "train.py").write_text(body + "with mesh:\n    pass\n")  # (a small report)
    small = subprocess.run([sys.executable, "-m", "shardlint", "check", "--no-cache", "."],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert small.returncode == 1 and "Found 1 finding" in small.stdout, small
    assert main(["check", "--no-cache", "--exit-zero", str(tmp_path / "train.py")]) == 0
