"""Configuration and other files: pyproject.toml edits, client settings, cross-file refresh."""

from __future__ import annotations

import asyncio

import pytest
from conftest import TIMEOUT, codes_lines
from lsprotocol import types

pytestmark = pytest.mark.asyncio(loop_scope="session")

PYPROJECT = "[project]\nname = 't'\n\n[tool.shardlint]\nignore = {ignore}\n"
MODEL = '''import jax
import flax.linen as nn


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        y = nn.Dense(512, kernel_init=init)(x)
        return nn.with_logical_constraint(y, ("batch", "mlp"))


def create(key, x):
    return MLP().init(key, x)
'''
TRAIN = '''import jax
import flax.linen as nn
from model import create

RULES = (("batch", "data"), ("embed", None), ("mlp", None))
with jax.set_mesh(jax.make_mesh((2,), ("data",))):
    params = create(jax.random.key(0), jax.numpy.ones((8, 4)))
'''


def codes(diags) -> set[str]:
    return {str(d.code) for d in diags}


def watched(editor, path, kind=types.FileChangeType.Changed) -> None:
    """What VS Code sends for its file watchers; Neovim 0.7 has none, so the server polls."""
    if editor.name == "vscode":
        editor.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(
            [types.FileEvent(path.as_uri(), kind)]))


async def test_editing_pyproject_refreshes_diagnostics(editor, seed_project):
    root = seed_project("original.py", pyproject=PYPROJECT.format(ignore="[]"))
    uri = editor.open(root / "original.py")
    assert "SHL501" in codes(await editor.diagnostics(uri))

    mark = editor.mark()
    (root / "pyproject.toml").write_text(PYPROJECT.format(ignore='["SHL501"]'))
    watched(editor, root / "pyproject.toml")
    diags = await editor.refreshed(uri, lambda d: "SHL501" not in codes(d), mark)
    assert {"SHL102", "SHL103"} <= codes(diags)

    # A broken file is reported once; the last valid settings stay in force meanwhile.
    mark = editor.mark()
    (root / "pyproject.toml").write_text(PYPROJECT.format(ignore='["SHL501"') + "[[[")
    watched(editor, root / "pyproject.toml")

    async def told():
        while not any("pyproject.toml" in m.message for m in editor.client.messages):
            await asyncio.sleep(0.02)
    await asyncio.wait_for(told(), TIMEOUT)
    assert any(m.type == types.MessageType.Error for m in editor.client.messages)
    assert "SHL501" not in codes(await editor.diagnostics(uri))

    (root / "pyproject.toml").write_text(PYPROJECT.format(ignore='["SHL1"]'))
    watched(editor, root / "pyproject.toml")
    diags = await editor.refreshed(uri, 
                                    lambda d: "SHL501" in codes(d) and not codes(d) & {"SHL102", "SHL103"},
                                    mark)
    assert "SHL501" in codes(diags) and not codes(diags) & {"SHL102", "SHL103"}


@pytest.mark.parametrize("name", ["vscode", "neovim"])
async def test_client_settings_override_the_project(name, seed_project, fresh):
    root = seed_project("original.py")
    async with fresh(name) as editor:
        await editor.start(root, options={"shardlint": {"select": ["SHL5"]}})
        uri = editor.open(root / "original.py")
        assert codes(await editor.diagnostics(uri)) == {"SHL501"}

        mark = editor.mark()
        editor.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
            settings={"shardlint": {"ignore": ["SHL103"], "severity": {"SHL102": "error"}}}))
        diags = await editor.refreshed(uri, lambda d: "SHL102" in codes(d), mark)
        assert "SHL103" not in codes(diags) and "SHL501" in codes(diags)
        assert all(d.severity == types.DiagnosticSeverity.Error for d in diags if d.code == "SHL102")

        if editor.name == "vscode":  # it answers workspace/configuration: settings are pulled
            mark = editor.mark()
            editor.client.set_configuration({"select": ["SHL103"]}, section="shardlint")
            editor.client.workspace_did_change_configuration(
                types.DidChangeConfigurationParams(settings=None))
            diags = await editor.refreshed(uri, lambda d: codes(d) == {"SHL103"}, mark)
            assert {line for _, line in codes_lines(diags)} == {64, 81}


async def test_an_edit_in_train_py_refreshes_model_py(editor, project):
    root = project({"model.py": MODEL, "train.py": TRAIN})
    model = editor.open(root / "model.py")
    train = editor.open(root / "train.py")
    assert ("SHL102", 14) in codes_lines(await editor.diagnostics(model))
    assert "SHL102" not in codes(await editor.diagnostics(train))

    # Enter the rules in train.py (unsaved): model.py's finding goes.
    mark = editor.mark()
    editor.replace(train, '("data",))):', '("data",))), nn.logical_axis_rules(RULES):')
    await editor.refreshed(model, lambda d: "SHL102" not in codes(d), mark)

    # Close train.py without saving: the file on disk counts again.
    mark = editor.mark()
    editor.close(train)
    del editor.texts[train], editor.versions[train]
    await editor.refreshed(model, lambda d: "SHL102" in codes(d), mark)


@pytest.mark.parametrize("editor", ["vscode"], indirect=True)  # Neovim 0.7 cannot watch files
async def test_a_file_changed_on_disk_refreshes_open_files(editor, project):
    root = project({"model.py": MODEL, "train.py": TRAIN})
    model = editor.open(root / "model.py")
    assert ("SHL102", 14) in codes_lines(await editor.diagnostics(model))

    (registration,) = editor.client.registrations  # the server asked VS Code to watch files
    assert registration.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
    globs = {w["globPattern"] for w in registration.register_options["watchers"]}
    assert {"**/pyproject.toml", "**/*.py"} <= globs

    # train.py is not open: a checkout (or another editor) changes it on disk.
    mark = editor.mark()
    (root / "train.py").write_text(TRAIN.replace('("data",))):', '("data",))), nn.logical_axis_rules(RULES):'))
    watched(editor, root / "train.py")
    await editor.refreshed(model, lambda d: "SHL102" not in codes(d), mark)


@pytest.mark.parametrize("editor", ["vscode"], indirect=True)  # Neovim 0.7 cannot watch files
async def test_a_yaml_rules_table_changed_on_disk_refreshes_open_files(editor, project):
    train = TRAIN.replace('RULES = (("batch", "data"), ("embed", None), ("mlp", None))\n', "") \
        .replace("from model import create\n", "from model import create\n\n\ndef run(config):\n"
                 "    with nn.logical_axis_rules(config.logical_axis_rules):\n"
                 "        return create(jax.random.key(0), jax.numpy.ones((8, 4)))\n")
    yml = "logical_axis_rules: [['batch', 'data'], ['embed', null], ['mlp', null]]\n"
    root = project({"model.py": MODEL, "train.py": train, "configs/base.yml": yml})
    model = editor.open(root / "model.py")
    assert "SHL201" not in codes(await editor.diagnostics(model))

    (registration,) = editor.client.registrations
    globs = {w["globPattern"] for w in registration.register_options["watchers"]}
    assert {"**/*.yml", "**/*.yaml"} <= globs

    # The YAML file loses its rule for 'mlp' on disk: model.py's two uses of it are reported.
    mark = editor.mark()
    (root / "configs/base.yml").write_text(yml.replace(", ['mlp', null]", ""))
    watched(editor, root / "configs/base.yml")
    diags = await editor.refreshed(model, lambda d: "SHL201" in codes(d), mark)
    assert {line for code, line in codes_lines(diags) if code == "SHL201"} == {8, 10}


GIN_PARTITIONER = '''import jax
import flax.linen as nn


class Partitioner:
    def __init__(self, logical_axis_rules=()):
        self._rules = tuple(logical_axis_rules)

    def run(self, fn, *args):
        with nn.logical_axis_rules(self._rules):
            return jax.jit(fn)(*args)
'''
GIN = """from __gin__ import dynamic_registration
import partitioning

partitioning.Partitioner.logical_axis_rules = [('batch', 'data'), ('embed', None), ('mlp', None)]
"""


@pytest.mark.parametrize("editor", ["vscode"], indirect=True)  # Neovim 0.7 cannot watch files
async def test_a_gin_binding_changed_on_disk_refreshes_open_files(editor, project):
    # The partitioner's table is a constructor parameter that only the gin file binds.
    root = project({"model.py": MODEL, "partitioning.py": GIN_PARTITIONER,
                    "configs/run.gin": GIN})
    model = editor.open(root / "model.py")
    assert "SHL201" not in codes(await editor.diagnostics(model))

    (registration,) = editor.client.registrations
    assert "**/*.gin" in {w["globPattern"] for w in registration.register_options["watchers"]}

    # The binding loses its rule for 'mlp' on disk: model.py's two uses of it are reported.
    mark = editor.mark()
    (root / "configs/run.gin").write_text(GIN.replace(", ('mlp', None)", ""))
    watched(editor, root / "configs/run.gin")
    diags = await editor.refreshed(model, lambda d: "SHL201" in codes(d), mark)
    assert {line for code, line in codes_lines(diags) if code == "SHL201"} == {8, 10}


async def test_editing_the_pins_judges_the_file_at_the_new_versions(editor, project):
    """`requirements.txt` states the jax the project runs: `jax.tree_map` is only deprecated
    (from 0.4.26) on the jax 0.4.20 it pins, and removed on the jax 0.6.0 it pins after the
    edit. VS Code's watcher says so; for Neovim 0.7 the server notices on its own."""
    root = project({"util.py": "import jax\n\n\ndef double(tree):\n"
                               "    return jax.tree_map(lambda x: 2 * x, tree)\n",
                    "requirements.txt": "jax==0.4.20\n"})
    uri = editor.open(root / "util.py")
    assert "SHL501" not in codes(await editor.diagnostics(uri))

    mark = editor.mark()
    (root / "requirements.txt").write_text("jax==0.6.0\n")
    watched(editor, root / "requirements.txt")
    diags = await editor.refreshed(uri, lambda d: "SHL501" in codes(d), mark)
    [d] = [d for d in diags if d.code == "SHL501"]
    assert "was removed in jax 0.6.0" in d.message and "jax 0.6.0, pinned" in d.message, d.message

    # A pin file made next to it: a `constraints` requirements file that pins jax back.
    mark = editor.mark()
    (root / "requirements.txt").unlink()
    watched(editor, root / "requirements.txt", types.FileChangeType.Deleted)
    (root / "requirements-tpu.txt").write_text("jax==0.4.20\n")
    watched(editor, root / "requirements-tpu.txt", types.FileChangeType.Created)
    await editor.refreshed(uri, lambda d: "SHL501" not in codes(d), mark)
