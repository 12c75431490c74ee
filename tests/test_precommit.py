"""The pre-commit hook as users get it: a real `pre-commit` installs this repository's hook."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BAD = """\
import jax
import flax.linen as nn
from jax.sharding import Mesh

mesh = Mesh(jax.devices(), ("data",))
with nn.logical_axis_rules((("batch", "data"),)), mesh:
    y = nn.with_logical_constraint(jax.numpy.ones((8,)), ("batch",))
"""


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          check=check)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> tuple[Path, str]:
    """This working tree as a git repository of its own (pre-commit clones hooks by rev)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path_factory.mktemp("shardlint-hook")
    files = git(ROOT, "ls-files", "-co", "--exclude-standard").stdout.split()
    for name in files:
        src = ROOT / name
        if src.is_file() and not name.startswith(("tests/", "vscode-extension/", "examples/")):
            dst = repo / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "snapshot")
    return repo, git(repo, "rev-parse", "HEAD").stdout.strip()


def test_commit_refused_then_accepted(tmp_path, hook_repo):
    repo, rev = hook_repo
    work = tmp_path / "project"
    work.mkdir()
    git(work, "init", "-q")
    (work / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {repo}\n  rev: {rev}\n  hooks:\n  - id: shardlint\n")
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")}
    pre_commit = [sys.executable, "-m", "pre_commit"]
    subprocess.run([*pre_commit, "install"], cwd=work, env=env, check=True, capture_output=True)

    def commit(message: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com",
                               "commit", "-m", message], cwd=work, env=env,
                              capture_output=True, text=True, timeout=600)

    git(work, "add", ".pre-commit-config.yaml")
    assert commit("config").returncode == 0
    # a pitfall staged: the commit is refused with the finding shown
    (work / "train.py").write_text(BAD)
    git(work, "add", "train.py")
    refused = commit("bad")
    assert refused.returncode != 0, refused.stdout + refused.stderr
    shown = refused.stdout + refused.stderr
    assert "train.py:6:" in shown and "SHL101 [error]" in shown
    # fixed: it goes through
    (work / "train.py").write_text(BAD.replace(", mesh:", ", jax.set_mesh(mesh):"))
    git(work, "add", "train.py")
    ok = commit("fixed")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    # only a non-Python file staged: passes (the hook is skipped)
    (work / "notes.txt").write_text("with mesh:\n")
    git(work, "add", "notes.txt")
    skipped = commit("notes")
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
