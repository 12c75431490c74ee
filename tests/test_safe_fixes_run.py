"""A fix is safe when running the program before and after gives the same result.

For each kind of safe fix, a small program of the shape the fix applies to is run on CPU with
four simulated devices, `shardlint check --fix` is applied, and the program is run again: its
printed values and shardings must be the same. For the shapes where replacing the code would
break the program (a `pjit` with bare `PartitionSpec`s in a loop under `with mesh:`), the fix
must not touch it and the program must still run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shardlint.cli import main

pytestmark = [pytest.mark.memory, pytest.mark.slow]
jax = pytest.importorskip("jax")

PYPROJECT = '[project]\nname = "p"\ndependencies = ["jax>=0.10.1", "flax>=0.12.2"]\n'

# The deprecation alone: `with mesh:` around a jit whose shardings are NamedShardings.
DEPRECATED_ONLY = """
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

mesh = Mesh(np.array(jax.devices()), ("data",))
step = jax.jit(lambda x: x * 2.0 + 1.0, in_shardings=NamedSharding(mesh, P("data")),
               out_shardings=NamedSharding(mesh, P("data")))
x = jnp.arange(16.0).reshape(8, 2)
with mesh:
    for _ in range(3):
        x = step(x)
print(x.tolist(), x.sharding.spec)
"""

# A tree API moved: `jax.tree_map` -> `jax.tree.map` (on jax >= 0.6 only the new one exists,
# so the program runs only after the fix: before it, the same computation through tree_util).
TREE_MAP = """
import jax
import jax.numpy as jnp

tree = {"a": jnp.ones((2, 2)), "b": [jnp.arange(3.0)]}
mapped = jax.tree_util.tree_map(lambda v: v * 3, tree) if not hasattr(jax, "tree_map") \\
    else jax.tree_map(lambda v: v * 3, tree)
print(jax.tree_util.tree_map(lambda v: v.tolist(), mapped))
"""

# The program the old safe fix broke: a pjit with bare PartitionSpecs, called in a loop.
PJIT_LOOP = """
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pjit import pjit
from jax.sharding import Mesh, PartitionSpec as P

mesh = Mesh(np.array(jax.devices()), ("data",))
step = pjit(lambda x: x + 1.0, in_shardings=P("data"), out_shardings=P("data"))
x = jnp.zeros((8, 2))
with mesh:
    for _ in range(3):
        x = step(x)
print(x.tolist(), x.sharding.spec)
"""


# pjit given its function by keyword: the unsafe fix to `jax.jit` moves it to the first argument
# (`jax.jit(fun=...)` raises TypeError from jax 0.7.0).
PJIT_FUN = """
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pjit import pjit
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

mesh = Mesh(np.array(jax.devices()), ("data",))
rows = NamedSharding(mesh, P("data"))
step = pjit(in_shardings=rows, out_shardings=rows,
            fun=lambda x: x * 3.0 - 1.0)
x = step(jnp.arange(16.0).reshape(8, 2))
print(x.tolist(), x.sharding.spec)
"""

def run(path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
    env["JAX_PLATFORMS"] = "cpu"
    return subprocess.run([sys.executable, str(path)], capture_output=True, text=True, env=env,
                          cwd=path.parent, timeout=300)


def fixed(tmp_path: Path, program: str, capsys) -> tuple[str, str]:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(program).lstrip())
    before = path.read_text()
    main(["check", "--fix", "--no-cache", "--exit-zero", str(path)])
    capsys.readouterr()
    return before, path.read_text()


def test_the_deprecation_fix_keeps_values_and_shardings(tmp_path, capsys):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(DEPRECATED_ONLY).lstrip())
    first = run(path)
    assert first.returncode == 0, first.stderr
    before, after = fixed(tmp_path, DEPRECATED_ONLY, capsys)
    assert "with jax.set_mesh(mesh):" in after and "with mesh:" not in after
    second = run(path)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout


def test_the_tree_api_fix_keeps_values(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\ndependencies = ["jax>=0.4.26,<0.6"]\n')
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(TREE_MAP).lstrip())
    first = run(path)
    assert first.returncode == 0, first.stderr
    main(["check", "--fix", "--no-cache", "--exit-zero", str(path)])
    capsys.readouterr()
    after = path.read_text()
    assert "jax.tree.map(" in after and "jax.tree_map(" not in after
    second = run(path)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout


def test_a_pjit_loop_under_a_legacy_mesh_is_left_working(tmp_path, capsys):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(PJIT_LOOP).lstrip())
    first = run(path)
    assert first.returncode == 0, first.stderr
    before, after = fixed(tmp_path, PJIT_LOOP, capsys)
    assert after == before  # no fix: jax.set_mesh alone would make the pjit raise
    second = run(path)
    assert second.returncode == 0 and second.stdout == first.stdout, second.stderr
    # ... and what the old fix did breaks it, so the test would catch the fix coming back
    path.write_text(before.replace("with mesh:", "with jax.set_mesh(mesh):"))
    broken = run(path)
    assert broken.returncode != 0 and "mesh" in broken.stderr.lower()
    # The finding says what to migrate first, and offers nothing to apply.
    path.write_text(before)
    main(["check", "--no-cache", "--format", "json", "--select", "SHL101", str(path)])
    out = capsys.readouterr().out
    assert "`step` runs under it, a `pjit` given bare `PartitionSpec`s" in out
    assert '"fix": null' in out


def test_the_pjit_fix_passes_the_function_by_position(tmp_path, capsys):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(PJIT_FUN).lstrip())
    first = run(path)
    assert first.returncode == 0, first.stderr
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    before = path.read_text()
    main(["check", "--fix", "--unsafe-fixes", "--no-cache", "--exit-zero", "--select", "SHL501",
          str(path)])
    capsys.readouterr()
    after = path.read_text()
    assert "from jax import jit as pjit" in after and "fun=" not in after
    second = run(path)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    # ... and the old edit, `jax.jit(fun=...)`, raises
    path.write_text(before.replace("from jax.experimental.pjit import pjit",
                                   "from jax import jit as pjit"))
    broken = run(path)
    assert broken.returncode != 0 and "positional-only" in broken.stderr
