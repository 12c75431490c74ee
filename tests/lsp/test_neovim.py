"""A real client: headless Neovim (the Debian package in CI) runs `shardlint server`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from conftest import HERE, REPO

NVIM = shutil.which("nvim")


@pytest.mark.e2e
@pytest.mark.skipif(NVIM is None, reason="nvim is not installed (apt-get install neovim)")
def test_neovim_shows_the_seed_example_findings(tmp_path):
    seed = REPO / "examples" / "seed_ensemble" / "original.py"
    env = dict(os.environ, HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "config"),
               XDG_CACHE_HOME=str(tmp_path / "cache"), XDG_STATE_HOME=str(tmp_path / "state"),
               XDG_DATA_HOME=str(tmp_path / "data"), TMPDIR=str(tmp_path),
               SHARDLINT_PY=sys.executable, SHARDLINT_FILE=str(seed), SHARDLINT_ROOT=str(REPO),
               SHARDLINT_HOVER_LINE="68")
    proc = subprocess.run(
        [NVIM, "--headless", "--clean", "-u", "NONE", "-n", "-i", "NONE",
         "-c", f"luafile {HERE / 'nvim' / 'diagnostics.lua'}"],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=90, check=False)
    print(proc.stdout, proc.stderr)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("NVIM 0.")
    diags = {(code, int(line)) for _, code, line, *_ in (x.split() for x in lines if x.startswith("DIAG"))}
    assert {("SHL102", 64), ("SHL103", 64), ("SHL501", 68), ("SHL102", 81), ("SHL103", 81)} <= diags
    assert "DIAG SHL501 68 16 1 shardlint" in lines  # column 16, severity 1 = error
    assert "HOVER # SHL501 deprecated-or-removed-api" in lines
