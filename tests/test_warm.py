"""A warm `shardlint check` (nothing changed since the last run) prints what the last run
printed without running the analysis, and anything that could change the answer runs it again
(``shardlint/warm.py``).

Whether a run took the full path is seen by counting calls of ``shardlint.check.run_check``;
the subprocess tests read ``-X importtime`` to see that the analysis was not even imported.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import shardlint.check as check_mod
from shardlint import warm
from shardlint.cli import main

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "examples" / "seed_ensemble"
RULES_YAML = "rules:\n  logical_axis_rules:\n    - [batch, data]\n    - [embed, null]\n"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small real project with findings of several rules (some with fixes), a config and
    a YAML rules table; the files are older than the margin a stamp needs to be trusted."""
    root = tmp_path / "proj"
    shutil.copytree(SEED, root)
    (root / "pyproject.toml").write_text('[project]\nname = "p"\n\n[tool.shardlint]\n')
    (root / "configs").mkdir()
    (root / "configs" / "base.yaml").write_text(RULES_YAML)
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "steps.py").write_text(
        "import jax\n\n\ndef step(state, batch):\n    return state.apply_gradients(grads=batch)\n"
        "\n\nstep_jit = jax.jit(step)\n")
    return root


@pytest.fixture
def full_runs(monkeypatch) -> list:
    """The arguments of each run that took the full path."""
    calls: list = []
    real = check_mod.run_check

    def counting(args, record=None):
        calls.append(args)
        return real(args, record)

    monkeypatch.setattr(check_mod, "run_check", counting)
    return calls


def check(argv: list[str], capsys, full_runs: list) -> tuple[int, str, bool]:
    """(exit code, stdout, whether the full path ran); stderr must be empty."""
    before = len(full_runs)
    code = main(["check", *argv])
    out, err = capsys.readouterr()
    assert err == ""
    return code, out, len(full_runs) > before


def warm_pair(argv, capsys, full_runs) -> tuple[tuple[int, str], tuple[int, str]]:
    """A run that records (full path), then the same again (must be replayed)."""
    code, out, full = check(argv, capsys, full_runs)
    assert full
    again, out_again, full_again = check(argv, capsys, full_runs)
    assert not full_again, "the second, unchanged run took the full path"
    return (code, out), (again, out_again)


# ---- the same answer --------------------------------------------------------------------------------
@pytest.mark.parametrize("options", [
    [], ["--format", "full"], ["--format", "json"], ["--format", "sarif"],
    ["--format", "github"], ["--format", "junit"], ["--format", "gitlab"], ["--statistics"],
    ["--exit-zero"], ["--select", "SHL1"], ["--ignore", "SHL205", "--format", "json"],
    ["--preview"], ["--jax-version", "0.4.30"], ["--jobs", "1"],
], ids=lambda o: " ".join(o) or "default")
def test_a_replayed_run_prints_what_the_full_run_printed(project, capsys, full_runs,
                                                         monkeypatch, options):
    monkeypatch.chdir(project)
    first, replayed = warm_pair(options, capsys, full_runs)
    assert replayed == first
    assert first[1].strip()  # (the project has findings in every one of these)
    assert first[0] == (0 if "--exit-zero" in options else 1)


def test_a_replay_matches_a_run_that_ignores_the_cache(project, capsys, full_runs,
                                                       monkeypatch):
    monkeypatch.chdir(project)
    for fmt in ("concise", "full", "json", "sarif"):
        _, replayed = warm_pair(["--format", fmt], capsys, full_runs)
        code, out, _ = check(["--format", fmt, "--no-cache"], capsys, full_runs)
        assert replayed == (code, out), fmt


def test_the_pre_commit_invocation_is_replayed(project, capsys, full_runs, monkeypatch):
    """pre-commit names the changed files; the index still covers the whole project."""
    monkeypatch.chdir(project)
    files = ["original.py", "pkg/steps.py"]
    first, replayed = warm_pair(files, capsys, full_runs)
    assert replayed == first
    # A file not named changes: the named files' findings may depend on it.
    (project / "discussion_advice.py").write_text("import jax\n")
    assert check(files, capsys, full_runs)[2]


def test_a_clean_project_is_replayed_with_exit_zero(tmp_path, capsys, full_runs, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "a.py").write_text("import jax\n\nx = jax.numpy.zeros(3)\n")
    monkeypatch.chdir(tmp_path)
    first, replayed = warm_pair([], capsys, full_runs)
    assert first == replayed == (0, "")


# ---- what makes the full path run -------------------------------------------------------------------
def _rewrite_same_size(path: Path) -> None:
    text = path.read_text()
    st = path.stat()
    changed = text.replace("jax.tree_map", "jax.tree_zip", 1)
    assert changed != text and len(changed) == len(text)
    path.write_text(changed)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # (the old time, as a fast rewrite has)


def _add_venv_jax(root: Path, version: str) -> None:
    site = root / ".venv" / "lib" / f"python3.{sys.version_info[1]}" / "site-packages"
    for old in site.glob("jax-*.dist-info") if site.is_dir() else ():
        shutil.rmtree(old)
    (site / f"jax-{version}.dist-info").mkdir(parents=True)


CHANGES = {
    "a file edited, same size, old mtime": lambda r: _rewrite_same_size(r / "original.py"),
    "a file added": lambda r: (r / "pkg" / "more.py").write_text("import jax\n"),
    "a file without jax added": lambda r: (r / "pkg" / "notes.py").write_text("x = 1\n"),
    "a file removed": lambda r: (r / "probes.py").unlink(),
    "a folder added": lambda r: (r / "pkg" / "sub").mkdir(),
    "pyproject [tool.shardlint] changed": lambda r: (r / "pyproject.toml").write_text(
        '[project]\nname = "p"\n\n[tool.shardlint]\nignore = ["SHL205"]\n'),
    "a YAML rules table changed": lambda r: (r / "configs" / "base.yaml").write_text(
        RULES_YAML.replace("data", "model")),
    "a pin added": lambda r: (r / "requirements.txt").write_text("jax==0.4.30\nflax==0.8.5\n"),
    "jax installed in the project's .venv": lambda r: _add_venv_jax(r, "0.4.30"),
}


def _judge_files_by(how: str, monkeypatch) -> None:
    """``stamp``: every file old enough for its stamp to be trusted (no content recorded);
    ``content``: every file too new, and stamps that cannot tell (the same clock tick)."""
    if how == "stamp":
        monkeypatch.setattr(warm, "_margin", lambda stamp: 0)
    else:
        monkeypatch.setattr(warm, "_stamp", lambda path: [1, 2, 3, 4])
        monkeypatch.setattr(warm, "_now", lambda: 2)


@pytest.mark.parametrize("how", ["stamp", "content"])
@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_a_change_runs_the_full_path(project, capsys, full_runs, monkeypatch, change, how):
    _judge_files_by(how, monkeypatch)
    monkeypatch.chdir(project)
    warm_pair([], capsys, full_runs)
    CHANGES[change](project)
    code, out, full = check([], capsys, full_runs)
    assert full
    # ... and its answer is the one a run without the cache gives, then replayed in turn.
    assert (code, out) == check(["--no-cache"], capsys, full_runs)[:2]
    assert check([], capsys, full_runs) == (code, out, False)


def test_another_installed_jax_runs_the_full_path(project, capsys, full_runs, monkeypatch):
    """A project environment whose jax is upgraded (the dist-info folder renamed)."""
    _add_venv_jax(project, "0.4.30")
    monkeypatch.chdir(project)
    first = warm_pair([], capsys, full_runs)[0]
    _add_venv_jax(project, "0.6.0")
    code, out, full = check([], capsys, full_runs)
    assert full and (code, out) != first  # (SHL501's message names the version judged)


def test_a_new_pyproject_between_the_start_and_the_root(project, capsys, full_runs, monkeypatch):
    monkeypatch.chdir(project / "pkg")
    warm_pair([], capsys, full_runs)
    (project / "pkg" / "pyproject.toml").write_text("[tool.shardlint]\nselect = ['SHL4']\n")
    assert check([], capsys, full_runs)[2]


def test_only_files_near_the_run_start_are_recorded_with_their_content(project, capsys,
                                                                        full_runs, monkeypatch):
    """A file changed twice within one tick of its clock can keep its stamp: the recording
    keeps the content digest of the files whose time is within the margin of its start."""
    monkeypatch.chdir(project)
    old = project / "original.py"
    st = old.stat()
    os.utime(old, ns=(st.st_atime_ns, st.st_mtime_ns - 10**10))  # (its ctime stays new)
    recorder = warm.Recorder("key")
    recorder.started = max(st.st_mtime_ns, st.st_ctime_ns) + 10**10  # (ten seconds later)
    recorder.seen("open", (str(project / "probes.py"), "r", 0))
    assert recorder.files[str(project / "probes.py")][1] is None
    recorder.started = st.st_ctime_ns  # (the run started as the file was written)
    recorder.seen("open", (str(old), "r", 0))
    assert recorder.files[str(old)][1] is not None


@pytest.mark.parametrize("options", [["--select", "SHL1"], ["--ignore", "SHL205"],
                                     ["--extend-select", "SHL9"], ["--flax-version", "0.10.0"],
                                     ["--format", "json"], ["original.py"]])
def test_other_arguments_are_another_invocation(project, capsys, full_runs, monkeypatch,
                                                options):
    monkeypatch.chdir(project)
    warm_pair([], capsys, full_runs)
    assert check(options, capsys, full_runs)[2]


def test_another_shardlint_runs_the_full_path(project, capsys, full_runs, monkeypatch):
    monkeypatch.chdir(project)
    warm_pair([], capsys, full_runs)
    monkeypatch.setattr(warm, "__version__", "99.0")
    assert check([], capsys, full_runs)[2]
    monkeypatch.setattr(warm, "_STAMP", ["another copy of the code"])
    assert check([], capsys, full_runs)[2]


def test_environment_that_decides_the_output_is_part_of_the_invocation(
        project, capsys, full_runs, monkeypatch):
    monkeypatch.chdir(project)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    warm_pair([], capsys, full_runs)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")  # (the default format becomes github)
    _, out, full = check([], capsys, full_runs)
    assert full and out.startswith("::")


@pytest.mark.parametrize("options", [["--no-cache"], ["--diff"], ["--output-file", "out.txt"],
                                     ["--write-baseline", "base.json"]])
def test_runs_that_write_or_skip_the_cache_are_never_replayed(project, capsys, full_runs,
                                                             monkeypatch, options):
    monkeypatch.chdir(project)
    for _ in range(2):
        before = len(full_runs)
        main(["check", *options])
        capsys.readouterr()
        assert len(full_runs) == before + 1


def test_a_run_that_fails_is_not_recorded(project, capsys, full_runs, monkeypatch):
    (project / "bad.py").write_bytes(b"import jax\n\xff\xfe\n")
    monkeypatch.chdir(project)
    for _ in range(2):
        before = len(full_runs)
        assert main(["check"]) == 2
        capsys.readouterr()
        assert len(full_runs) == before + 1


ENV_READS = re.compile(r"""os\.environ\.get\(\s*["']([A-Za-z_0-9]+)|os\.getenv\(\s*["']([A-Za-z_0-9]+)"""
                       r"""|os\.environ\[\s*["']([A-Za-z_0-9]+)|["']([A-Za-z_0-9]+)["']\s+(?:not\s+)?in\s+os\.environ""")


def test_every_environment_variable_a_check_reads_is_part_of_the_invocation():
    """warm.ENV must name each variable the code under a check run reads (the memory check and
    the language server are never replayed)."""
    exempt = {"XDG_CACHE_HOME": "the language server's cache folder (cache.user_cache_dir)",
              "LOCALAPPDATA": "the same, on Windows"}
    read: set[str] = set()
    for path in (ROOT / "shardlint").rglob("*.py"):
        if path.relative_to(ROOT / "shardlint").parts[0] not in ("memory", "lsp"):
            for match in ENV_READS.finditer(path.read_text(encoding="utf-8")):
                read.update(g for g in match.groups() if g)
    assert {"GITHUB_ACTIONS", "NO_COLOR"} <= read  # (the scan sees what check.py reads)
    assert read - set(warm.ENV) - set(exempt) == set()


# ---- in a subprocess: the analysis is not imported --------------------------------------------------
def _run(argv: list[str], cwd: Path) -> tuple[int, bytes, set[str]]:
    """(exit code, stdout bytes, the shardlint and libcst modules imported)."""
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_ACTIONS", "NO_COLOR")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "shardlint", "check",
                           *argv], cwd=cwd, capture_output=True, env=env, timeout=300, check=False)
    names = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.decode().splitlines()
             if line.startswith("import time:")}
    return proc.returncode, proc.stdout, {n for n in names if n.startswith(("shardlint", "libcst"))}


ANALYSIS = ("shardlint.check", "shardlint.engine", "shardlint.rules", "shardlint.semantics",
            "shardlint.cache", "shardlint.report", "libcst")


@pytest.mark.parametrize("argv", [[], ["--format", "sarif"], ["--format", "full"],
                                  ["original.py", "pkg/steps.py"]],
                         ids=["concise", "sarif", "full", "pre-commit"])
def test_a_warm_run_does_not_import_the_analysis(project, argv):
    code, out, imported = _run(argv, project)
    assert code == 1 and any(m.startswith(ANALYSIS) for m in imported)  # (the full path)
    again, out_again, imported_again = _run(argv, project)
    assert "shardlint.warm" in imported_again
    assert sorted(m for m in imported_again if m.startswith(ANALYSIS)) == []
    assert (again, out_again) == (code, out)
    (project / "pkg" / "steps.py").write_text("import jax\n")  # (then the full path again)
    assert any(m.startswith(ANALYSIS) for m in _run(argv, project)[2])


def test_a_baseline_or_a_named_config_file_that_changes_runs_the_full_path(
        project, capsys, full_runs, monkeypatch):
    monkeypatch.chdir(project)
    main(["check", "--select", "SHL1", "--write-baseline", "base.json"])
    (project / "cfg").mkdir()
    (project / "cfg" / "pyproject.toml").write_text("[tool.shardlint]\nignore = ['SHL205']\n")
    capsys.readouterr()
    named = ["--config", "cfg/pyproject.toml", "."]
    for options in (["--baseline", "base.json"], named):
        first, replayed = warm_pair(options, capsys, full_runs)
        assert replayed == first
    main(["check", "--select", "SHL5", "--write-baseline", "base.json"])
    capsys.readouterr()
    assert check(["--baseline", "base.json"], capsys, full_runs)[2]
    (project / "cfg" / "pyproject.toml").write_text("[tool.shardlint]\nignore = ['SHL102']\n")
    assert check(named, capsys, full_runs)[2]
