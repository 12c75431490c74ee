"""action.yml, the composite GitHub Action: it installs shardlint from its own checkout, and its
check steps, run as the runner runs them (bash, the step's env, GITHUB_OUTPUT), print annotations,
fail on findings and write SARIF."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))

PITFALL = """\
import jax
from jax.sharding import Mesh

mesh = Mesh(jax.devices(), ("data",))
with mesh:
    y = jax.tree_map(lambda p: p, {})
"""


def _step(name: str) -> dict:
    return next(s for s in ACTION["runs"]["steps"] if s["name"] == name)


def test_composite_action_installs_from_its_own_checkout():
    assert ACTION["runs"]["using"] == "composite"
    install = _step("Install shardlint")
    assert install["env"]["SHARDLINT_SOURCE"] == "${{ github.action_path }}"
    assert '-m pip install' in install["run"] and '"$SHARDLINT_SOURCE"' in install["run"]
    assert '"$GITHUB_PATH"' in install["run"]
    # Inputs reach the scripts through env only (an input is never pasted into a script).
    for step in ACTION["runs"]["steps"]:
        assert "${{" not in step["run"], step["name"]
    assert set(ACTION["inputs"]) == {"paths", "args", "sarif-file", "python", "working-directory"}


def _run_step(name: str, inputs: dict[str, str], cwd: Path, tmp_path: Path):
    """Run one step's script as the runner would: bash -e, its env with the inputs put in."""
    step = _step(name)
    defaults = {k: v.get("default", "") for k, v in ACTION["inputs"].items()}
    values = {**defaults, **inputs}
    env = {k: re.sub(r"\$\{\{ inputs\.([\w-]+) \}\}", lambda m: values[m.group(1)], v)
           for k, v in step.get("env", {}).items()}
    shim = tmp_path / "bin"
    shim.mkdir(exist_ok=True)
    (shim / "shardlint").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m shardlint "$@"\n')
    (shim / "shardlint").chmod(0o755)
    output = tmp_path / "github_output"
    output.touch()
    full = {**os.environ, **env, "PATH": f"{shim}{os.pathsep}{os.environ['PATH']}",
            "GITHUB_OUTPUT": str(output), "GITHUB_ACTIONS": "true"}
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=300)
    return proc, output.read_text()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        "[project]\nname = 'p'\ndependencies = ['jax==0.10.2', 'flax==0.12.4']\n")
    (root / "src" / "train.py").write_text(PITFALL)
    (root / "src" / "clean.py").write_text("import jax\n")
    return root


def test_check_step_annotates_and_fails_on_findings(project, tmp_path):
    proc, _ = _run_step("shardlint check", {"args": "--no-cache"}, project, tmp_path)
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("::warning file=src/train.py,line=5,") and "SHL101" in line
               for line in lines), proc.stdout
    assert any(line.startswith("::error file=src/train.py,line=6,") and "SHL501" in line
               for line in lines), proc.stdout


def test_check_step_takes_paths_and_args(project, tmp_path):
    proc, _ = _run_step("shardlint check", {"paths": "src/clean.py", "args": "--no-cache"},
                        project, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc, _ = _run_step("shardlint check", {"args": "--ignore SHL101,SHL501 --no-cache"},
                        project, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_sarif_step_writes_sarif_and_passes(project, tmp_path):
    proc, output = _run_step("shardlint check (SARIF)",
                             {"sarif-file": "out/shardlint.sarif", "args": "--no-cache"},
                             project, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "file=out/shardlint.sarif" in output.splitlines()
    sarif = json.loads((project / "out" / "shardlint.sarif").read_text())
    assert sarif["version"] == "2.1.0"
    codes = {r["ruleId"] for r in sarif["runs"][0]["results"]}
    assert {"SHL101", "SHL501"} <= codes
    assert _step("shardlint check (SARIF)")["if"] == "inputs.sarif-file != ''"
