"""Probe discovery reads source with `ast` only: no import of the probe, no import of jax."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from shardlint.errors import UsageError
from shardlint.memory.probes import discover, probes_in_file, resolve

SOURCE = """
import jax
raise RuntimeError("importing this file would fail")

def shardlint_probe_first():
    return None

def shardlint_probe_needs_arg(x):
    return x

class Holder:
    def shardlint_probe_method(self):  # not top level: not a probe
        return None

def helper():
    def shardlint_probe_nested():  # not top level either
        return None
"""


def test_top_level_probes_only(write_probe: Callable[[str, str], Path]) -> None:
    path = write_probe("model_probes.py", SOURCE)
    probes = probes_in_file(path)
    assert [p.function for p in probes] == ["shardlint_probe_first", "shardlint_probe_needs_arg"]
    first = probes[0]
    assert (first.line, first.column, first.takes_arguments) == (5, 0, False)
    assert probes[1].takes_arguments
    assert len(first.source_hash) == 64


def test_discover_skips_venvs_hidden_and_unparsable(
    tmp_path: Path, write_probe: Callable[[str, str], Path]
) -> None:
    write_probe("pkg/a.py", "def shardlint_probe_a():\n    pass\n")
    write_probe(".venv/lib/b.py", "def shardlint_probe_b():\n    pass\n")
    write_probe(".hidden/c.py", "def shardlint_probe_c():\n    pass\n")
    write_probe("broken.py", "def shardlint_probe_d(:\n")
    assert [p.function for p in discover(tmp_path)] == ["shardlint_probe_a"]


def test_resolve_specs(tmp_path: Path, write_probe: Callable[[str, str], Path]) -> None:
    write_probe("p.py", "def shardlint_probe_a():\n    pass\n\ndef custom():\n    pass\n")
    assert [p.function for p in resolve(["p.py"], tmp_path)] == ["shardlint_probe_a"]
    assert [p.function for p in resolve(["p.py:custom"], tmp_path)] == ["custom"]
    assert [p.function for p in resolve([".", "p.py"], tmp_path)] == [
        "shardlint_probe_a"
    ]  # no duplicates
    with pytest.raises(UsageError, match="no top-level function 'nope'"):
        resolve(["p.py:nope"], tmp_path)
    with pytest.raises(UsageError, match="no such file"):
        resolve(["missing.py"], tmp_path)
    write_probe("empty.py", "x = 1\n")
    with pytest.raises(UsageError, match="shardlint_probe_"):
        resolve(["empty.py"], tmp_path)


def test_discovery_does_not_import_jax(
    tmp_path: Path, write_probe: Callable[[str, str], Path]
) -> None:
    write_probe("p.py", SOURCE)
    code = (
        "import sys; from pathlib import Path; from shardlint.memory.probes import discover; "
        f"found = discover(Path({str(tmp_path)!r})); "
        "assert found and 'jax' not in sys.modules and 'flax' not in sys.modules, "
        "sorted(sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
