"""Every file shardlint writes is replaced whole or not at all (shardlint.fsio.write_atomic).

The end-to-end check kills `shardlint check --fix` (SIGKILL, no chance to clean up) while it is
writing fixes over many files, and finds every file either as it was or as the fix makes it.
"""

from __future__ import annotations

import json
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shardlint import fsio
from shardlint.fsio import TMP_SUFFIX, write_atomic

ROOT = Path(__file__).resolve().parent.parent

# A legacy `with mesh:` around a Linen constraint: SHL101 with a fix (`jax.set_mesh`; unsafe, as
# the constraint starts to apply: the tests pass --unsafe-fixes).
BAD = """\
import jax
import flax.linen as nn
from jax.sharding import Mesh

mesh = Mesh(jax.devices(), ("data",))
with nn.logical_axis_rules((("batch", "data"),)), mesh:
    y{i} = nn.with_logical_constraint(jax.numpy.ones((8,)), ("batch",))
"""


def test_write_atomic_replaces_and_keeps_the_mode(tmp_path):
    target = tmp_path / "script.py"
    target.write_text("old\n", encoding="utf-8")
    target.chmod(0o751)
    write_atomic(target, "new\r\nline\n")
    assert target.read_bytes() == b"new\r\nline\n"  # newline="" writes endings as given
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert sorted(p.name for p in tmp_path.iterdir()) == ["script.py"]


def test_write_atomic_new_file_gets_the_umask_mode(tmp_path):
    target = tmp_path / "report.html"
    write_atomic(target, b"<html></html>")
    assert target.read_bytes() == b"<html></html>"
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~fsio._UMASK


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "train.py"
    target.write_text("old\n", encoding="utf-8")

    def interrupted(src, dst):
        raise KeyboardInterrupt  # Ctrl-C between the write and the rename

    monkeypatch.setattr(fsio.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, "new\n")
    assert target.read_text(encoding="utf-8") == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.py"]


def test_text_in_pieces_is_written_in_order_and_a_failing_piece_leaves_the_old_file(tmp_path):
    """The cache's summaries file is written piece by piece (it is as large as the sources):
    the pieces land in order, and a piece that fails halfway leaves the old file as it was
    and no temporary file behind."""
    target = tmp_path / "summaries.json"
    write_atomic(target, (f"{i}," for i in range(1000)))
    assert target.read_text() == "".join(f"{i}," for i in range(1000))

    def failing():
        yield "new"
        raise ValueError("an entry that cannot be encoded")

    with pytest.raises(ValueError):
        write_atomic(target, failing())
    assert target.read_text().startswith("0,1,2,")
    assert not list(tmp_path.glob(f"*{TMP_SUFFIX}"))


def test_output_file_and_baseline_are_written_whole(tmp_path):
    (tmp_path / "train.py").write_text(BAD.format(i=0), encoding="utf-8")
    out = tmp_path / "out.json"
    base = tmp_path / "baseline.json"
    for args in (["--format", "json", "--output-file", str(out)], ["--write-baseline", str(base)]):
        subprocess.run([sys.executable, "-m", "shardlint", "check", "--no-cache", *args,
                        str(tmp_path / "train.py")], cwd=tmp_path, capture_output=True, timeout=120)
    assert json.loads(out.read_text(encoding="utf-8"))
    assert json.loads(base.read_text(encoding="utf-8"))["findings"]
    assert not list(tmp_path.glob(f"*{TMP_SUFFIX}"))


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_fix_killed_mid_run_leaves_each_file_old_or_new(tmp_path):
    n = 400
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text("[tool.shardlint]\n", encoding="utf-8")
    old = {f"m{i:03d}.py": BAD.format(i=i) for i in range(n)}
    for name, text in old.items():
        (project / name).write_text(text, encoding="utf-8")
    command = [sys.executable, "-m", "shardlint", "check", "--no-cache", "--fix", "--unsafe-fixes",
               "."]
    # What a run that is left to finish writes: the "new" side of each file.
    reference = tmp_path / "reference"
    reference.mkdir()
    for name, text in old.items():
        (reference / name).write_text(text, encoding="utf-8")
    (reference / "pyproject.toml").write_text("[tool.shardlint]\n", encoding="utf-8")
    subprocess.run(command, cwd=reference, capture_output=True, timeout=300)
    new = {name: (reference / name).read_text(encoding="utf-8") for name in old}
    assert all(new[name] != old[name] for name in old), "the fix did not apply"
    assert all("jax.set_mesh(mesh)" in text for text in new.values())

    mixed = 0
    for trial, fraction in enumerate((0.0, 0.1, 0.3, 0.5, 0.7, 0.9)):
        for name, text in old.items():
            (project / name).write_text(text, encoding="utf-8")
        proc = subprocess.Popen(command, cwd=project, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        want = int(n * fraction)
        # Kill once the run has rewritten about `fraction` of the files (the first trial kills
        # at the first rewritten file). Polling by size: the fixed text is longer.
        sizes = {name: len(text.encode()) for name, text in old.items()}
        while proc.poll() is None and time.monotonic() < deadline:
            done = sum(1 for name in old
                       if (project / name).stat().st_size != sizes[name])
            if done > want:
                break
            time.sleep(0.002)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        states = []
        for name in old:
            text = (project / name).read_text(encoding="utf-8")
            assert text in (old[name], new[name]), f"trial {trial}: {name} is neither old nor new"
            states.append(text == new[name])
        if 0 < sum(states) < n:
            mixed += 1
        print(f"trial {trial}: killed with {sum(states)}/{n} files rewritten")
        # A kill can leave a temporary file behind; it is never taken for source.
        for leftover in project.glob(f".*{TMP_SUFFIX}"):
            assert leftover.name.startswith(".m") and not leftover.name.endswith(".py")
    assert mixed >= 1, "no kill landed while files were being written"
    # A run after the kills finishes the job and ignores what they left behind.
    subprocess.run(command, cwd=project, capture_output=True, timeout=300)
    assert {name: (project / name).read_text(encoding="utf-8") for name in old} == new
    lint = subprocess.run([sys.executable, "-m", "shardlint", "check", "--no-cache",
                           "--format", "json", "."], cwd=project, capture_output=True, text=True,
                          timeout=300)
    assert not any(TMP_SUFFIX in f["path"] for f in json.loads(lint.stdout))


def test_a_file_in_its_declared_encoding_is_linted_and_fixed_in_it(tmp_path):
    """PEP 263: `# -*- coding: latin-1 -*-` is valid Python; its fix is written back in latin-1."""
    path = tmp_path / "train.py"
    text = "# -*- coding: latin-1 -*-\n# café\n" + BAD.format(i=0)
    path.write_bytes(text.encode("latin-1"))
    run = [sys.executable, "-m", "shardlint", "check", "--no-cache"]
    found = subprocess.run([*run, str(path)], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120)
    assert found.returncode == 1 and "SHL101" in found.stdout, found.stdout + found.stderr
    subprocess.run([*run, "--fix", "--unsafe-fixes", str(path)], cwd=tmp_path, capture_output=True,
                   timeout=120)
    fixed = path.read_bytes().decode("latin-1")
    assert "jax.set_mesh(mesh)" in fixed and "# café\n" in fixed
