"""Which jax/flax versions a project runs on: pins read as ranges, lock files, the project's own
environment, and what each finding says it judged."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from helpers import write_project as project

from shardlint.semantics.catalog import versions as V




@pytest.mark.parametrize("files,jax,why", [
    ({"pyproject.toml": """
        [project]
        name = "x"
        dependencies = ["jax>=0.6,<0.11.1", "flax"]
     """}, "0.11.0", "the newest release that `jax>=0.6,<0.11.1` (pyproject.toml) allows"),
    ({"requirements.txt": "jax[cuda12]==0.4.35\n"}, "0.4.35", "pinned in `requirements.txt`"),
    ({"training/requirements-gpu.txt": "jax<0.8  # the TPU image lags\n"}, "0.7.2",
     "`jax<0.8` (training/requirements-gpu.txt)"),
    ({"pyproject.toml": """
        [tool.poetry.dependencies]
        python = "^3.11"
        jax = "^0.4.30"
     """}, "0.4.38", "`jax>=0.4.30,<0.5`"),
    ({"setup.py": """
        from setuptools import setup
        setup(name="x", install_requires=["jax>=0.5.0,<0.6", "numpy"])
     """}, "0.5.3", "(setup.py)"),
    ({"pyproject.toml": """
        [project]
        name = "x"
        dependencies = ["jax>=0.4"]
     """, "uv.lock": """
        version = 1
        [[package]]
        name = "jax"
        version = "0.9.2"
     """}, "0.9.2", "locked in `uv.lock`"),
    # A package others install: its users get what its range allows, not its developers' lock
    ({"pyproject.toml": """
        [build-system]
        requires = ["hatchling"]
        build-backend = "hatchling.build"
        [project]
        name = "x"
        dependencies = ["jax>=0.9.2"]
     """, "uv.lock": """
        version = 1
        [[package]]
        name = "jax"
        version = "0.9.2"
     """}, V.CURRENT["jax"], "`jax>=0.9.2` (pyproject.toml) allows: what the package's users "
        "install (`uv.lock` locks 0.9.2 for its own development)"),
    # ... and the lock still says what the ranges leave unstated
    ({"pyproject.toml": """
        [build-system]
        requires = ["poetry-core"]
        [tool.poetry]
        name = "x"
        [tool.poetry.dependencies]
        flax = "^0.10"
     """, "poetry.lock": """
        [[package]]
        name = "jax"
        version = "0.5.3"
     """}, "0.5.3", "locked in `poetry.lock`"),
    # Poetry's non-package mode is an application: its lock is what runs
    ({"pyproject.toml": """
        [build-system]
        requires = ["poetry-core"]
        [tool.poetry]
        name = "x"
        package-mode = false
        [tool.poetry.dependencies]
        jax = ">=0.4"
     """, "poetry.lock": """
        [[package]]
        name = "jax"
        version = "0.6.0"
     """}, "0.6.0", "locked in `poetry.lock`"),
])
def test_pins_read_as_ranges(tmp_path, monkeypatch, files, jax, why):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    v = V.detect(project(tmp_path, files))
    assert v.jax == jax
    assert why in v.describe("jax")


def test_the_environment_shardlint_happens_to_run_in_does_not_win_over_pins(tmp_path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setattr(V, "_installed", lambda pkg: "0.12.0.1")
    v = V.detect(project(tmp_path, {"requirements.txt": "jax>=0.6,<0.8\n"}))
    assert v.jax == "0.7.2"


def test_the_project_environment_wins(tmp_path, monkeypatch):
    monkeypatch.setattr(V, "_installed", lambda pkg: "0.10.2")
    monkeypatch.setenv("VIRTUAL_ENV", str(tmp_path / ".env"))
    v = V.detect(project(tmp_path, {"requirements.txt": "jax>=0.6,<0.8\n"}))
    assert v.jax == "0.10.2" and "project's environment" in v.describe("jax")


def test_a_project_venv_wins(tmp_path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    (tmp_path / ".venv/lib/python3.12/site-packages/jax-0.9.1.dist-info").mkdir(parents=True)
    v = V.detect(project(tmp_path, {"requirements.txt": "jax==0.6.0\n"}))
    assert v.jax == "0.9.1" and "`.venv`" in v.describe("jax")


def test_no_pin_falls_back_to_the_environment_then_the_newest(tmp_path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setattr(V, "_installed", lambda pkg: None)
    v = V.detect(tmp_path)
    assert v.jax == V.CURRENT["jax"] and "assumed" in v.describe("jax")
    monkeypatch.setattr(V, "_installed", lambda pkg: "0.8.3")
    assert V.detect(tmp_path).jax == "0.8.3"


def test_overrides_win(tmp_path):
    v = V.detect(project(tmp_path, {"requirements.txt": "jax==0.6.0\n"}), {"jax": "0.4.30"})
    assert v.jax == "0.4.30" and "[tool.shardlint]" in v.describe("jax")


def test_the_removal_message_says_which_version_it_judged(tmp_path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    files = {"pyproject.toml": '[project]\nname = "x"\ndependencies = ["jax>=0.6,<0.11.1"]\n',
             "model.py": "import jax\nleaves = jax.tree_leaves({'a': 1})\n"}
    from shardlint.config import Config
    from shardlint.engine import Engine

    project(tmp_path, files)
    engine = Engine(Config(root=tmp_path), use_cache=False)
    [f] = [f for f in engine.lint_paths([tmp_path / "model.py"]) if f.code == "SHL501"]
    assert "jax 0.11.0, the newest release that `jax>=0.6,<0.11.1` (pyproject.toml) allows" \
        in f.message


def test_files_of_a_project_needing_a_newer_python_get_one_info(tmp_path):
    from shardlint.config import Config
    from shardlint.engine import Engine

    project(tmp_path, {
        "pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.99"\n',
        "a.py": "import jax\ntype Params = dict[str, jax.Array]\nx = (\n",
        "b.py": "import jax\nmatch jax:\n  case 1 2: pass\n",
        "c.py": "import jax\nleaves = jax.tree.leaves({})\n",
    })
    found = Engine(Config(root=tmp_path), use_cache=False).lint_paths([tmp_path])
    syntax = [f for f in found if f.code == "SHL000"]
    assert len(syntax) == 1 and syntax[0].severity == "info"
    assert "the project requires Python >=3.99" in syntax[0].message
    assert "1 more files fail the same way" in syntax[0].message


def test_a_broken_file_is_still_an_error_where_the_python_fits(tmp_path):
    from shardlint.config import Config
    from shardlint.engine import Engine

    project(tmp_path, {"pyproject.toml": '[project]\nname = "x"\nrequires-python = ">=3.8"\n',
                       "a.py": "import jax\nx = (\n"})
    [f] = Engine(Config(root=tmp_path), use_cache=False).lint_paths([tmp_path])
    assert f.code == "SHL000" and f.severity == "error"


def test_installed_versions_are_importlib_metadata_s(tmp_path, monkeypatch):
    """The version of an installed package, read off its ``.dist-info`` folder's name, is what
    ``importlib.metadata.version`` gives, for every distribution of this environment and for
    names spelled otherwise or not installed; where the folders cannot tell (an ``.egg-info``, a
    zip on ``sys.path``), importlib.metadata answers itself."""
    from importlib import metadata

    from shardlint.semantics.catalog import versions as V

    def expected(name):
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    names = sorted({d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"]})
    assert len(names) > 10
    for name in [*names, "JAX", "Flax", "py_yaml", "pyyaml", "not-a-package-at-all"]:
        assert V._installed(name) == expected(name), name
    # An egg-info (a legacy develop install) ahead of everything: importlib.metadata decides.
    egg = tmp_path / "eggs" / "legacy_pkg.egg-info"
    egg.mkdir(parents=True)
    (egg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: legacy-pkg\nVersion: 3.1.4\n")
    monkeypatch.syspath_prepend(str(tmp_path / "eggs"))
    assert V._installed("legacy-pkg") == expected("legacy-pkg") == "3.1.4"
    # A zip on the path: importlib.metadata decides (its distributions are found there).
    zipped = tmp_path / "site.zip"
    import zipfile

    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("zipped_pkg-2.0.dist-info/METADATA",
                   "Metadata-Version: 2.1\nName: zipped-pkg\nVersion: 2.0\n")
    monkeypatch.syspath_prepend(str(zipped))
    assert V._installed("zipped-pkg") == expected("zipped-pkg") == "2.0"


def test_a_monorepo_judges_each_folder_by_its_own_pins(tmp_path, monkeypatch):
    """Pins belong to the package they sit in: an example's old pin judges that example, not
    the library beside it; pins kept in a `requirements/` folder or a conda environment judge
    the folder above; `jax` from git beside an exact `jaxlib` is that version."""
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    monkeypatch.setattr(V, "_installed", lambda pkg: None)
    root = project(tmp_path, {
        "pyproject.toml": '[project]\nname = "lib"\ndependencies = ["jax>=0.6", "flax"]\n',
        "lib/core.py": "import jax\n",
        "examples/old/requirements.txt": "-r pins/base.txt\nflax==0.6.11\n",
        "examples/old/pins/base.txt": "jax==0.4.13\n",
        "examples/old/train.py": "import jax\n",
        "serving/deps/requirements.txt": "jax @ git+https://github.com/google/jax\njaxlib==0.5.3\n",
        "serving/app.py": "import jax\n",
        "tools/env/environment.yml": "dependencies:\n  - python=3.10\n  - pip:\n    - jax[cuda12]==0.4.28\n",
    })
    m = V.detect_map(root)
    lib = m.for_path(root / "lib" / "core.py", root)
    assert (lib.jax, lib.oldest("jax")) == ("0.4.28", "0.4.28")  # the environment file judges the root
    old = m.for_path(root / "examples" / "old" / "train.py", root)
    assert (old.jax, old.flax) == ("0.4.13", "0.6.11")
    assert "examples/old/requirements.txt" not in old.describe("jax")  # (-r: the included file)
    serving = m.for_path(root / "serving" / "app.py", root)
    assert serving.jax == "0.5.3" and "jaxlib==0.5.3" in serving.describe("jax")


def test_a_range_remembers_the_oldest_release_it_allows(tmp_path, monkeypatch):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    root = project(tmp_path, {"setup.py": 'setup(install_requires=["jax>=0.4.30", "flax"])\n'})
    v = V.detect(root)
    assert v.jax == V.CURRENT["jax"] and v.oldest("jax") == "0.4.30"
    assert v.may_be_below("jax", "0.7.1") and not v.may_be_below("jax", "0.4.30")
    (root / "setup.py").write_text('setup(install_requires=["jax!=0.7.1", "flax"])\n')
    v = V.detect(root)
    assert not v.may_be_below("jax", "0.7.1")  # (no lower bound written: nothing older meant)
    (root / "setup.py").write_text('setup(install_requires=["jax", "flax"])\n')
    v = V.detect(root)
    assert "states no version" in v.describe("jax") and "`jax`" in v.describe("jax")


def test_the_oldest_jax_allowed_follows_what_the_flax_pin_requires(tmp_path, monkeypatch):
    """`jax>=0.6` beside `flax>=0.12.5`: flax 0.12.5 requires jax >= 0.8.1, so no install of
    the project has a jax older than that (jax.set_mesh, added in 0.7.1, is always there)."""
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    root = project(tmp_path, {"pyproject.toml": """
        [project]
        name = "x"
        dependencies = ["jax>=0.6.0,<0.11.1", "flax>=0.12.5"]
     """})
    v = V.detect(root)
    assert v.oldest("jax") == "0.8.1" and not v.may_be_below("jax", "0.7.1")
    (root / "pyproject.toml").write_text(
        '[project]\nname = "x"\ndependencies = ["jax>=0.6.0", "flax>=0.10.0"]\n')
    assert V.detect(root).oldest("jax") == "0.6.0"  # (flax 0.10.0 needs only jax 0.4.27)


@pytest.mark.parametrize("files,jax,oldest,why", [
    # conda's `python=3.10` and an unversioned jax: jax 0.7.0 needs Python 3.11
    ({"environment.yml": "dependencies:\n  - python=3.10\n  - pip:\n    - jax[cuda12]\n"},
     "0.6.2", "0.6.2", "Python 3.10, `python=3.10` in `environment.yml`, installs it at most"),
    # a range bounded by requires-python's upper end, remembering its own oldest release
    ({"pyproject.toml": """
        [project]
        name = "x"
        requires-python = ">=3.9,<3.11"
        dependencies = ["jax>=0.4.20"]
     """}, "0.6.2", "0.4.20", "`jax>=0.4.20` on Python 3.10 (`python>=3.9,<3.11` in `pyproject.toml`)"),
    # nothing about jax at all, only `python_requires` with an upper bound
    ({"setup.py": 'setup(name="x", python_requires=">=3.8,<3.10")\n'},
     "0.4.30", "0.4.30", "the newest release that Python 3.9 installs"),
])
def test_a_python_pin_bounds_the_jax_the_project_can_run(tmp_path, monkeypatch, files, jax, oldest,
                                                          why):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    v = V.detect(project(tmp_path, files))
    assert (v.jax, v.oldest("jax")) == (jax, oldest)
    assert why in v.describe("jax")


@pytest.mark.parametrize("python", ['requires-python = ">=3.10"', 'requires-python = ">=3.11,<4"'])
def test_a_python_pin_without_an_upper_end_bounds_nothing(tmp_path, monkeypatch, python):
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    root = project(tmp_path, {"pyproject.toml": f"""
        [project]
        name = "x"
        {python}
        dependencies = ["jax>=0.4.30"]
     """})
    v = V.detect(root)
    assert v.jax == V.CURRENT["jax"] and "Python" not in v.describe("jax")


_REQUIREMENT_SPELLINGS = [
    "jax", "Flax", "jax==0.4.7", "jax ==0.4.7", "jax===0.4.7", "jax~=0.4", "jax>0.3a",
    "jax!=0.4.8,>=0.4", "jax>=0.4,", "jax>=0.4.*", "jax==0.4.*", "jax (>=0.4)",
    "jax[tpu]>=0.4.20,<0.5 ; python_version>'3.9'", "jax[cuda12_pip]==0.4.28",
    "jaxlib==0.4.7+cuda11.cudnn82", "flax>=0.8; extra == 'x'",
    "jax @ git+https://github.com/google/jax", "jax @ https://x/jax-0.4.7.tar.gz ; os_name=='nt'",
    "jax==0.4.7 --hash=sha256:abc", "-r req.txt", "--extra-index-url x", "jax<=0.4.7 # pin",
    "jax>=", "jax==0.4.7)", "(jax)", "jax[tpu", "",
]


@pytest.mark.parametrize("text", _REQUIREMENT_SPELLINGS)
def test_requirement_reads_as_packaging_does(text):
    """The version judgement's own reading of a requirement string agrees with
    `packaging.requirements` (not imported on the lint path: its start-up cost) on the name and
    the normalised specifier, and on which strings are not requirements."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(text)
        expected = (req.name.lower(), str(req.specifier))
    except InvalidRequirement:
        expected = None
    assert V.requirement(text) == expected


@pytest.mark.parametrize("pin,jax,oldest", [
    ("jax~=0.2.12", "0.2.12", "0.2.12"),
    ("jax>=0.2.12,<0.3", "0.2.12", "0.2.12"),
    ("jax==0.2.25", "0.2.25", "0.2.25"),
    ("jax<0.3", V.CURRENT["jax"], V.CURRENT["jax"]),  # (no version older than the table written)
    ("jax>=99.0", V.CURRENT["jax"], V.CURRENT["jax"]),  # (newer than every release known)
])
def test_pins_older_than_every_release_known_judge_at_what_they_write(tmp_path, monkeypatch,
                                                                       pin, jax, oldest):
    """`jax~=0.2.12` runs a jax 0.2 (the table starts at 0.3.0), not the newest release: the
    versions the pins write judge it, so nothing deprecated or removed since is claimed."""
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    v = V.detect(project(tmp_path, {"requirements.txt": f"{pin}\n"}))
    assert (v.jax, v.oldest("jax")) == (jax, oldest), v.describe("jax")
    if jax != V.CURRENT["jax"] and "==" not in pin:
        assert "allows only releases older than any shardlint knows (from 0.3.0)" \
            in v.describe("jax")


def test_a_jax_0_2_project_is_told_nothing_about_later_removals(tmp_path, monkeypatch):
    """The pitfalls of a jax 0.2 project are its own: `jax.tree_map` and
    `jax.experimental.maps.Mesh` are current there, and `with maps.mesh(...)` enters the mesh
    a bare `PartitionSpec` of a pjit reads (SHL104 stays quiet)."""
    from helpers import lint_files

    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    files = {"requirements.txt": "jax~=0.2.12\n", "train.py": textwrap.dedent("""
        import jax
        import numpy as np
        from jax.experimental import maps
        from jax.experimental.pjit import pjit
        from jax.experimental import PartitionSpec as P

        def step(x):
            return jax.tree_map(lambda a: a * 2, x)

        def main(x):
            devices = np.array(jax.devices()).reshape(1, -1)
            step_p = pjit(step, in_axis_resources=P("dp"), out_axis_resources=P("dp"))
            with maps.mesh(devices, ("dp", "mp")):
                return step_p(x)

        def init_env(devices):
            maps.thread_resources.env = maps.ResourceEnv(maps.Mesh(devices, ("dp", "mp")), ())
    """)}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    from shardlint.config import Config
    from shardlint.engine import Engine

    engine = Engine(Config(root=tmp_path), use_cache=False)
    assert engine.versions.jax == "0.2.12"
    found = engine.lint_paths([tmp_path / "train.py"])
    assert [f for f in found if f.code in ("SHL501", "SHL104")] == [], found


@pytest.mark.parametrize("name", ["gpu_requirements.txt", "tpu-requirements.txt",
                                  "requirements-dev.txt"])
def test_a_requirements_file_with_a_prefix_states_the_versions(tmp_path, monkeypatch, name):
    """`gpu_requirements.txt` (LargeWorldModel's only pins: `jax[cuda12]==0.4.29`) states the
    versions the project runs as `requirements.txt` does."""
    monkeypatch.delenv("VIRTUAL_ENV", raising=False)
    v = V.detect(project(tmp_path, {name: "jax[cuda12]==0.4.29\nflax==0.8.4\n"}))
    assert (v.jax, v.flax) == ("0.4.29", "0.8.4"), v.describe("jax")
    assert name in v.describe("jax")
