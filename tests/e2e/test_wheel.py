"""The package as a user installs it: the sdist and the wheel built from a clean copy of this
checkout, the wheel installed into a fresh venv, and `check`, `rule`, `server` and `memory` run
from a folder outside the source tree (scripts/wheel_roundtrip.sh does the steps)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shardlint import __version__

ROOT = Path(__file__).resolve().parent.parent.parent
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.memory]


@pytest.mark.skipif(shutil.which("git") is None, reason="git lists the checkout's files")
def test_wheel_round_trip():
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.pop("SHARDLINT_ROUNDTRIP_DEPS", None)  # offline: the dependencies of this interpreter
    run = subprocess.run(["bash", str(ROOT / "scripts" / "wheel_roundtrip.sh"), sys.executable],
                         capture_output=True, text=True, env=env, timeout=900)
    log = run.stdout + run.stderr
    assert run.returncode == 0, log
    assert f"wheel round trip: ok (shardlint {__version__})" in run.stdout
    imported = next(line for line in log.splitlines() if "shardlint imported from" in line)
    assert str(ROOT) not in imported and "/venv/" in imported, imported
    assert f'serverInfo {{"name": "shardlint", "version": "{__version__}"}}' in log
