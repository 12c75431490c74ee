"""Workspace trust: a session in a workspace the client does not declare trusted (the default)
writes nothing into it; its cache goes to the user's cache directory."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path

import pytest
from conftest import SEED, TIMEOUT
from lsprotocol import types

from shardlint import cache as cache_mod
from shardlint.lsp import settings
from shardlint.lsp.analyzer import Analyzer

FILES = ("original.py", "discussion_advice.py", "probes.py", "fixed.py")


# ---- the folder ----------------------------------------------------------------------------------------
def snapshot(root: Path) -> dict[str, tuple]:
    """Every file and folder under ``root``: size, mtime and content hash (folders: their mtime,
    which changes when an entry is created or removed, a temporary file included)."""
    out: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for d in dirnames:
            p = Path(dirpath) / d
            out[p.relative_to(root).as_posix() + "/"] = ("dir", p.stat().st_mtime_ns)
        for f in filenames:
            p = Path(dirpath) / f
            st = p.stat()
            out[p.relative_to(root).as_posix()] = (
                st.st_size, st.st_mtime_ns, hashlib.sha1(p.read_bytes()).hexdigest())
    out["./"] = ("dir", root.stat().st_mtime_ns)
    return out


def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    for name in FILES:
        (root / name).write_text((SEED / name).read_text(encoding="utf-8"), encoding="utf-8")
    (root / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (root / "pkg" / "model.py").write_text((SEED / "original.py").read_text(encoding="utf-8"),
                                           encoding="utf-8")
    (root / "pyproject.toml").write_text("[project]\nname = 'ws'\n", encoding="utf-8")
    return root


@pytest.fixture
def homes(tmp_path, monkeypatch):
    """A home and a user cache directory of the test's own, for the server and for this process
    (which computes where the server's cache should be)."""
    home, cache = tmp_path / "home", tmp_path / "user-cache"
    home.mkdir()
    env = {"HOME": str(home), "USERPROFILE": str(home), "XDG_CACHE_HOME": str(cache),
           "LOCALAPPDATA": str(cache)}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return dict(os.environ, **env), cache


async def session(ed, root: Path, options, saved: str) -> dict[str, tuple]:
    """What a user does: open files, type, apply a quick fix, hover, save one file (the editor
    writes it: the one change to the folder), ask again, close, shut down. Returns the folder's
    snapshot right after the user's own write."""
    if ed.name == "vscode" and isinstance(options, dict):
        # Like the extension's middleware: workspace/configuration answers the same payload.
        ed.client.set_configuration(options.get("shardlint", options), section="shardlint")
    await ed.start(root, options)
    uris = {name: ed.open(root / name) for name in (*FILES, "pkg/model.py")}
    uri = uris["original.py"]
    diags = await ed.diagnostics(uri)
    assert {"SHL501", "SHL102", "SHL103"} <= {str(d.code) for d in diags}
    assert {str(d.code) for d in await ed.diagnostics(uris["pkg/model.py"])} >= {"SHL501"}

    ed.replace(uri, "jax.tree_map", "jax.tree_map ")
    diags = await ed.diagnostics(uri)
    (d501,) = [d for d in diags if d.code == "SHL501"]
    hover = await ed.hover(uri, d501.range.start)
    assert hover is not None and "SHL501" in str(hover.contents)
    actions = await ed.code_actions(uri, d501.range)
    fix = next(a for a in actions if a.edit is not None and "tree.map" in json.dumps(
        [e.new_text for es in (a.edit.changes or {}).values() for e in es]
        + [e.new_text for c in (a.edit.document_changes or []) for e in c.edits]))
    ed.apply(fix.edit)  # the edit goes to the editor's buffer, not to the disk
    assert "SHL501" not in {str(d.code) for d in await ed.diagnostics(uri)}

    # The user saves: the editor writes the file, then tells the server.
    (root / saved).write_text(ed.texts[uris[saved]], encoding="utf-8")
    after_save = snapshot(root)
    ed.client.text_document_did_save(types.DidSaveTextDocumentParams(
        types.TextDocumentIdentifier(uris[saved])))
    assert "SHL501" not in {str(d.code) for d in await ed.diagnostics(uri)}
    await ed.code_actions(uris["discussion_advice.py"], types.Range(
        types.Position(0, 0), types.Position(100, 0)))
    await ed.hover(uris["probes.py"], types.Position(0, 0))
    for u in uris.values():
        ed.close(u)
    await asyncio.sleep(0.3)  # the closes are handled (each re-reads its file from disk)
    await asyncio.wait_for(ed.client.shutdown_session(), TIMEOUT)
    ed.caps = None  # shut down already
    await ed.client.stop()
    return after_save


UNTRUSTED = [
    ("vscode", None),  # says nothing: untrusted
    ("neovim", None),
    # What the VS Code extension sends in an untrusted folder.
    ("vscode", {"shardlint": {"memory": {"enabled": False, "trusted": False}}}),
    ("neovim", {"trusted": False, "memory": {"enabled": True, "trusted": True}}),
]


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize(("name", "options"), UNTRUSTED)
async def test_an_untrusted_session_writes_nothing_into_the_workspace(name, options, tmp_path,
                                                                      homes, fresh):
    env, cache = homes
    root = workspace(tmp_path)
    before = snapshot(root)
    async with fresh(name, env=env) as ed:
        after_save = await session(ed, root, options, saved="original.py")
    # Nothing changed but the file the user saved, and only by the user's write.
    assert {k: v for k, v in after_save.items() if k != "original.py"} == \
        {k: v for k, v in before.items() if k != "original.py"}
    assert snapshot(root) == after_save
    assert not (root / cache_mod.DIR).exists()
    # The cache is in the user cache directory, named after the workspace.
    folder = cache_mod.workspace_cache_dir(root)
    assert folder.is_relative_to(cache / "shardlint")
    data = json.loads((folder / cache_mod.FILE).read_text(encoding="utf-8"))
    assert {"original.py", "pkg/model.py"} <= set(data["files"])
    assert not (folder / ".gitignore").exists()


@pytest.mark.asyncio(loop_scope="session")
@pytest.mark.parametrize(("name", "options"), [
    ("vscode", {"shardlint": {"memory": {"enabled": False, "trusted": True}}}),
    ("neovim", {"trusted": True}),
])
async def test_a_trusted_session_keeps_the_cache_in_the_project(name, options, tmp_path, homes,
                                                                fresh):
    env, cache = homes
    root = workspace(tmp_path)
    async with fresh(name, env=env) as ed:
        await session(ed, root, options, saved="original.py")
    local = root / cache_mod.DIR
    data = json.loads((local / cache_mod.FILE).read_text(encoding="utf-8"))
    assert {"original.py", "pkg/model.py"} <= set(data["files"])
    assert (local / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"
    assert not (cache / "shardlint").exists()


# ---- units -----------------------------------------------------------------------------------------------
def test_the_cache_folder_is_keyed_by_the_workspace(tmp_path, homes):
    _, cache = homes
    a, b = tmp_path / "one" / "proj", tmp_path / "two" / "proj"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    fa, fb = cache_mod.workspace_cache_dir(a), cache_mod.workspace_cache_dir(b)
    assert fa != fb  # same name, two roots: two folders
    assert fa.parent == fb.parent == cache / "shardlint"
    assert fa.name.startswith("proj-") and fb.name.startswith("proj-")
    assert cache_mod.workspace_cache_dir(a) == fa
    assert cache_mod.workspace_cache_dir(str(a) + "/") == fa
    assert cache_mod.workspace_cache_dir(a / ".." / "proj") == fa  # resolved
    link = tmp_path / "link"
    link.symlink_to(a)
    assert cache_mod.workspace_cache_dir(link) == fa
    odd = tmp_path / "we ird:näme"
    odd.mkdir()
    assert "/" not in cache_mod.workspace_cache_dir(odd).name
    assert cache_mod.workspace_cache_dir(odd).parent == cache / "shardlint"


def test_user_cache_dir_follows_the_platform(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
    monkeypatch.setattr(cache_mod.sys, "platform", "linux")
    assert cache_mod.user_cache_dir() == tmp_path / "xdg"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    assert cache_mod.user_cache_dir() == Path.home() / ".cache"
    monkeypatch.setattr(cache_mod.sys, "platform", "darwin")
    assert cache_mod.user_cache_dir() == Path.home() / "Library" / "Caches"
    monkeypatch.setattr(cache_mod.sys, "platform", "win32")
    assert cache_mod.user_cache_dir() == tmp_path / "local"


def test_the_analyzer_places_each_engines_cache_by_trust(tmp_path, homes):
    root = workspace(tmp_path)
    an = Analyzer()
    engine = an.engine_for(root / "original.py")
    assert engine.cache.path == cache_mod.workspace_cache_dir(root) / cache_mod.FILE
    an.set_trusted(True)
    assert engine.cache.path == root / cache_mod.DIR / cache_mod.FILE
    an.set_trusted(False)
    assert engine.cache.path.parent == cache_mod.workspace_cache_dir(root)
    an.build_index(root / "original.py")
    assert (cache_mod.workspace_cache_dir(root) / cache_mod.FILE).is_file()
    assert not (root / cache_mod.DIR).exists()


@pytest.mark.parametrize(("raw", "trusted", "memory_trusted"), [
    (None, False, False),
    ({}, False, False),
    ({"shardlint": {"select": ["SHL1"]}}, False, False),
    ({"shardlint": {"memory": {"enabled": True, "trusted": True}}}, True, True),
    ({"shardlint": {"memory": {"enabled": True, "trusted": False}}}, False, False),
    ({"shardlint": {"memory": {"trusted": "yes"}}}, False, False),
    ({"trusted": True}, True, True),
    ({"trusted": True, "memory": {"trusted": False}}, True, False),
    ({"trusted": False, "memory": {"trusted": True}}, False, False),
    ({"trusted": "yes", "memory": {"trusted": True}}, False, False),
    ({"trusted": 1}, False, False),
])
def test_the_trust_signal(raw, trusted, memory_trusted):
    got = settings.parse(raw)
    assert got.trusted is trusted
    assert got.memory.trusted is memory_trusted
    if isinstance(raw, dict) and "trusted" in raw and not isinstance(raw["trusted"], bool):
        assert any("`trusted`" in p for p in got.problems)
