"""A file runs only at the releases its module-level imports exist in (semantics/catalog/runnable.py):
the range its folder's pins give is narrowed by them, and every message judges that range."""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from pathlib import Path

import pytest

from helpers import write_project as project

from shardlint.config import Config
from shardlint.engine import Engine
from shardlint.semantics.catalog import facts
from shardlint.semantics.catalog.versions import assume
from shardlint.semantics.catalog.runnable import runnable
from shardlint.semantics.file.moves import newer_calls
from shardlint.semantics.file.visitor import build_facts
from shardlint.semantics.file.wrappers import Wrappers

ANY = {"jax": "0.3.0..0.12.0.1", "flax": "0.3.0..0.12.12"}  # (no pin: any release)


def narrowed(source: str, **pins: str):
    return runnable(ast.parse(textwrap.dedent(source)), assume(**{**ANY, **pins}))


def test_the_table_knows_the_newest_jax_each_flax_release_imports_with():
    # flax 0.5.3 does `from jax import ShapedArray`, which jax 0.4.14 dropped; flax 0.4.0
    # imports `jax.linear_util`, which jax 0.4.24 dropped; today's flax imports with today's jax
    assert facts.exists("jax.ShapedArray", "0.4.13") and not facts.exists("jax.ShapedArray",
                                                                           "0.4.14")
    assert facts.flax_runs_with_jax("0.5.3") == "0.4.13"
    assert facts.flax_runs_with_jax("0.4.0") == "0.4.23"
    assert facts.flax_runs_with_jax(facts.releases("flax")[-1]) == facts.releases("jax")[-1]
    assert facts.module_span("flax.optim") == ("0.3.0", "0.5.3")
    assert facts.module_span("jax.experimental.maps") == ("0.3.0", "0.4.30")
    assert facts.module_span("jax._src.core") is None  # (a private module: not known)


def test_a_module_gone_from_newer_releases_bounds_the_range_and_the_other_package():
    v = narrowed("from flax import optim\nimport jax\n")
    assert (v.flax, v.oldest("flax")) == ("0.5.3", "0.3.0")
    # the newest jax any flax with flax.optim imports with
    assert v.jax == max((facts.flax_runs_with_jax(r) for r in facts.releases("flax")
                         if facts.version_key(r) <= (0, 5, 3)), key=facts.version_key)
    assert v.jax == "0.4.23"
    assert "line 1 imports `flax.optim`" in v.describe("jax")
    assert v.pinned is not None and v.pinned.flax == "0.12.12"


def test_a_jax_module_bounds_jax_and_the_flax_that_installs_beside_it():
    v = narrowed("import jax\nfrom jax import linear_util as lu\n")
    assert v.jax == "0.4.23" and "`jax.linear_util`, which line 2 imports" in v.describe("jax")
    needs = facts.flax_needs_jax(v.flax)
    assert needs is not None and facts.version_key(needs) <= (0, 4, 23)
    newer = facts.releases("flax")[facts.releases("flax").index(v.flax) + 1]
    assert facts.version_key(facts.flax_needs_jax(newer) or "0") > (0, 4, 23)


def test_a_module_that_came_later_raises_the_oldest():
    v = narrowed("import jax\nfrom flax import nnx\n", jax="0.4.1..0.6.2", flax="0.6.0..0.10.7")
    first = facts.module_span("flax.nnx")[0]  # type: ignore[index]
    assert v.oldest("flax") == first and v.flax == "0.10.7"
    assert v.oldest("jax") == facts.flax_needs_jax(first)


@pytest.mark.parametrize("source", [
    # guarded: only the releases that have it run it
    "try:\n    from flax import optim\nexcept ImportError:\n    optim = None\n",
    "import jax\nif jax.__version_info__ < (0, 4, 31):\n    from jax.experimental import maps\n",
    # inside a function: only when it is called
    "def legacy():\n    from flax import optim\n    return optim\n",
    # present in every release
    "import jax\nfrom jax import numpy as jnp\nfrom flax import linen as nn\n",
    # not a module the table read
    "from jax._src import core\nimport optax\n",
])
def test_what_does_not_narrow(source):
    v = narrowed(source)
    assert v.pinned is None and (v.jax, v.flax) == ("0.12.0.1", "0.12.12")


def test_an_exact_version_is_what_runs():
    v = runnable(ast.parse("from flax import optim\n"), assume(jax="0.4.20", flax="0.12.0"))
    assert v.pinned is None and v.flax == "0.12.0"


def test_imports_the_pins_exclude_narrow_nothing():
    v = narrowed("from flax import optim\n", flax="0.8.0..0.12.12")
    assert v.pinned is None


# -- what the code calls: the oldest release it runs at, past a pin older than the code ---------
def with_calls(source: str, versions):
    tree = ast.parse(textwrap.dedent(source))
    facts_ = build_facts("m.py", "m", tree, False, Wrappers())
    return runnable(tree, versions, (), newer_calls(facts_))


SET_MESH = """
    import jax

    def train(mesh):
        with jax.set_mesh(mesh):
            return 1
"""


def test_a_call_of_a_newer_api_raises_the_oldest():
    v = with_calls(SET_MESH, assume(**ANY))
    assert (v.jax, v.oldest("jax")) == ("0.12.0.1", facts.first_release("jax.set_mesh"))
    assert v.allowed_by("jax") == "the pins and what this file imports and calls"


@pytest.mark.parametrize("source", [
    # compatibility code: only the releases that have it run the call
    "import jax\n\ndef train(mesh):\n    if hasattr(jax, 'set_mesh'):\n"
    "        return jax.set_mesh(mesh)\n    return mesh\n",
    "import jax\n\ndef train(mesh):\n    try:\n        return jax.set_mesh(mesh)\n"
    "    except AttributeError:\n        return mesh\n",
    # a call every release has, and a moved API SHL501 reports
    "import jax\nx = jax.tree_util.tree_map(abs, [1])\ny = jax.tree_map(abs, [1])\n",
])
def test_calls_that_do_not_raise_the_oldest(source):
    v = with_calls(source, assume(**ANY))
    assert v.pinned is None and v.oldest("jax") == "0.3.0"


@pytest.mark.parametrize("how,pins", [
    ("an exact pin", {"jax": "0.4.13", "source": "pinned in `requirements.txt`"}),
    ("a lock", {"jax": "0.4.13", "source": "locked in `uv.lock`"}),
    ("a range", {"jax": "0.4.1..0.4.13",
                 "source": "the newest release that `jax<=0.4.13` (`requirements.txt`) allows"}),
])
def test_a_pin_older_than_the_code_is_stale(how, pins):
    base = assume(jax=pins["jax"], flax="0.12.12")
    base = dataclasses.replace(base, source={**base.source, "jax": pins["source"]})
    v = with_calls(SET_MESH, base)
    assert v.jax == facts.releases("jax")[-1] and v.oldest("jax") == "0.7.1", how
    assert "is older than the code (line 5 uses `jax.set_mesh`, jax 0.7.1 or newer)" \
        in v.describe("jax")
    assert v.allowed_by("jax").startswith("the releases this file's code runs at")


@pytest.mark.parametrize("source", ["set in `[tool.shardlint]`",
                                    "installed in the project's `.venv`"])
def test_a_version_set_or_installed_is_what_runs_whatever_the_code_calls(source):
    base = assume(jax="0.4.13", flax="0.12.12")
    base = dataclasses.replace(base, source={**base.source, "jax": source})
    assert with_calls(SET_MESH, base).jax == "0.4.13"




def lint(root: Path, name: str):
    engine = Engine(Config(root=root), use_cache=False)
    return [f for f in engine.lint_paths([root / name]) if f.code == "SHL501"]


def test_a_file_on_flax_optim_is_not_told_to_use_a_name_its_jax_lacks(tmp_path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    project(tmp_path, {
        "requirements.txt": "jax\nflax\n",
        "train.py": """
            import jax
            from flax import optim

            def step(params, grads):
                return jax.tree_map(lambda p, g: p - g, params, grads)

            def count(tree):
                return len(jax.tree_leaves(tree))
        """,
        # the same code without flax.optim: the newest jax, where both are gone
        "modern.py": """
            import jax

            def step(params, grads):
                return jax.tree_map(lambda p, g: p - g, params, grads)
        """,
    })
    # jax.tree_map is not even deprecated at the jax a flax.optim file runs at (<= 0.4.23);
    # jax.tree_leaves is (0.4.14), and the advice is the spelling every such release has
    [leaves] = lint(tmp_path, "train.py")
    assert leaves.line == 8 and leaves.severity == "warning"
    assert "use `jax.tree_util.tree_leaves`" in leaves.message
    assert "the newest jax that flax 0.3.0 to 0.5.3 imports with (line 2 imports `flax.optim`)" \
        in leaves.message
    [tree_map] = lint(tmp_path, "modern.py")
    assert tree_map.severity == "error" and "use `jax.tree.map`" in tree_map.message


def test_an_import_of_a_moved_api_narrows_nothing(tmp_path, monkeypatch):
    # `jax.experimental.maps` is gone after jax 0.4.30, and SHL501 reports its import: the file
    # is told to migrate it, so the rest is judged for the pins, and fixing the import changes
    # no other finding
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    project(tmp_path, {
        "requirements.txt": "jax>=0.4.1\n",
        "legacy.py": """
            import jax
            from jax.experimental import maps

            def step(params, grads):
                return jax.tree_map(lambda p, g: p - g, params, grads)
        """,
    })
    found = {f.line: f for f in lint(tmp_path, "legacy.py")}
    assert found[2].severity == "error" and "was removed in jax 0.4.31" in found[2].message
    assert found[5].severity == "error" and "was removed in jax 0.6.0" in found[5].message
    assert "use `jax.tree_util.tree_map`" in found[5].message
    assert "the project's pins allow jax 0.4.1" in found[5].message
    assert narrowed("from jax.experimental import maps\n").pinned is None


@pytest.mark.parametrize("how", ["from . import train_utils", "from pkg.train_utils import make",
                                 "import pkg.train_utils", "from pkg import helpers"])
def test_a_project_module_that_loads_flax_optim_bounds_its_importers(tmp_path, monkeypatch, how):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    project(tmp_path, {
        "requirements.txt": "jax\nflax\n",
        "pkg/__init__.py": "",
        "pkg/train_utils.py": "from flax import optim\n\ndef make(lr):\n    return optim.Adam(lr)\n",
        # (two hops: helpers loads train_utils; a file that never names jax or flax is not read)
        "pkg/helpers.py": "import jax\nfrom pkg import train_utils\n",
        "pkg/trainer.py": f"""
            import jax
            {how}

            def count(tree):
                return len(jax.tree_leaves(tree))

            def step(params, grads):
                return jax.tree_map(lambda p, g: p - g, params, grads)
        """,
    })
    [leaves] = lint(tmp_path, "pkg/trainer.py")
    assert leaves.line == 5 and leaves.severity == "warning"
    assert "use `jax.tree_util.tree_leaves`" in leaves.message
    assert "(line 2 imports `flax.optim` through `pkg." in leaves.message


@pytest.mark.parametrize("how", [
    "try:\n    from pkg import train_utils\nexcept ImportError:\n    train_utils = None",
    "def legacy():\n    from pkg import train_utils\n    return train_utils",
])
def test_a_project_module_loaded_only_sometimes_bounds_nothing(tmp_path, monkeypatch, how):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    project(tmp_path, {
        "requirements.txt": "jax\nflax\n",
        "pkg/__init__.py": "",
        "pkg/train_utils.py": "from flax import optim\n",
        "pkg/trainer.py": "import jax\n" + how + "\n\n"
                          "def step(params, grads):\n"
                          "    return jax.tree_map(lambda p, g: p - g, params, grads)\n",
    })
    [tree_map] = lint(tmp_path, "pkg/trainer.py")
    assert tree_map.severity == "error" and "use `jax.tree.map`" in tree_map.message


@pytest.mark.parametrize("source,bounded", [
    # the module `jax.config` went after jax 0.4.28, and the package binds `config` since: the
    # import answers in every release
    ("from jax import config", False),
    ("from jax import lax, numpy as jnp", False),
    # `import jax.config` needs the module itself
    ("import jax.config", True),
    # a name of a module that only some releases bind (not one SHL501 reports as moved)
    ("from jax.experimental.gda_serialization import serialization", True),
])
def test_a_from_import_answers_where_the_module_binds_the_name(source, bounded):
    assert (narrowed(source).pinned is not None) is bounded


@pytest.mark.parametrize("loads", [True, False])
def test_a_pin_older_than_what_its_folder_calls_is_stale_for_every_file_of_the_folder(
        tmp_path, monkeypatch, loads):
    # flax's examples/lm1b: requirements.txt pins jax 0.4.13, utils.py calls jax.set_mesh (jax
    # 0.7.1); train.py does `import utils` as a script does (its folder is on sys.path), or not
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    step = """
        import jax
        {load}

        def step(params, grads):
            return jax.tree_map(lambda p, g: p - g, params, grads)
    """
    project(tmp_path, {
        "pyproject.toml": "[project]\nname = 'examples'\n",
        "examples/lm1b/requirements.txt": "jax==0.4.13\n",
        "examples/lm1b/utils.py": SET_MESH,
        "examples/lm1b/train.py": step.format(load="import utils" if loads else ""),
        # another folder, pinned alike, whose code calls nothing newer: its pin holds
        "examples/mnist/requirements.txt": "jax==0.4.13\n",
        "examples/mnist/train.py": step.format(load=""),
    })
    [tree_map] = lint(tmp_path, "examples/lm1b/train.py")
    assert tree_map.severity == "error" and "removed in jax 0.6.0" in tree_map.message
    # jax 0.4.13, as pinned: jax.tree_map was deprecated in 0.4.26 only
    assert lint(tmp_path, "examples/mnist/train.py") == []


@pytest.mark.parametrize("load", ["import utils", ""])
def test_a_sibling_module_a_script_imports_bounds_it(tmp_path, monkeypatch, load):
    # a range the code does not outgrow: what the script's sibling calls raises the script's
    # oldest jax only where the script loads it (`import utils`, its folder on sys.path)
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    project(tmp_path, {
        "pyproject.toml": "[project]\nname = 'examples'\n",
        "examples/lm1b/requirements.txt": "jax>=0.4.1\n",
        "examples/lm1b/utils.py": SET_MESH,
        "examples/lm1b/train.py": f"""
            import jax
            import numpy as np
            {load}

            def main():
                mesh = jax.sharding.Mesh(np.array(jax.devices()), ("x",))
                with mesh:
                    return jax.jit(lambda x: x)(1.0)
        """,
    })
    engine = Engine(Config(root=tmp_path), use_cache=False)
    [found] = [f for f in engine.lint_paths([tmp_path / "examples/lm1b/train.py"])
               if f.code == "SHL101"]
    if load:
        assert "use `with jax.set_mesh(mesh):`" in found.message
    else:
        assert "keep it until they require jax >= 0.7.1" in found.message
