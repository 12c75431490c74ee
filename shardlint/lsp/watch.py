"""Noticing changes on disk: ``pyproject.toml`` (configuration), the files that state versions
(``requirements*.txt``, ``setup.py``, lock files ...) and Python files (the index).

Clients that can register file watchers get ``**/pyproject.toml``, ``**/*.py`` and the pin files'
watchers and send ``workspace/didChangeWatchedFiles``. For the others (Neovim 0.7 cannot), the
server checks the pyproject.toml and pin files of the folders above an open file once a second:
a ``stat`` and a folder listing each.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from lsprotocol import types

from shardlint.lsp.documents import uri_to_path
from shardlint.lsp.session import Session
from shardlint.semantics.catalog.versions import is_pin_file

log = logging.getLogger("shardlint.lsp")
POLL_SECONDS = 1.0
SETTLE_SECONDS = 0.1
# (YAML and gin files: the rules tables and mesh axis names a project keeps in its
# configuration, and the calls gin makes)
# The files that state versions besides (requirements*.txt, setup.cfg, lock files; setup.py
# and conda's environment.yml are among the above): the versions the findings are judged at.
_WATCHERS = ("**/pyproject.toml", "**/*.py", "**/*.pyi", "**/*.yml", "**/*.yaml", "**/*.gin",
             "**/*requirements*.txt", "**/requirements/*.txt", "**/setup.cfg", "**/*.lock")


async def start(session: Session) -> asyncio.Task | None:
    """Register file watchers with the client; poll instead when it cannot watch."""
    if session.features.watch_files:
        params = types.RegistrationParams(registrations=[types.Registration(
            id="shardlint-watched-files", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(
                watchers=[types.FileSystemWatcher(glob_pattern=g) for g in _WATCHERS]))])
        try:
            await asyncio.wait_for(session.server.client_register_capability_async(params), 10)
            return None
        except Exception as exc:  # noqa: BLE001  (refused or unanswered: poll instead)
            log.warning("registering file watchers failed (%s): polling pyproject.toml", exc)
    return asyncio.ensure_future(_poll(session))


async def _poll(session: Session) -> None:
    while True:
        await asyncio.sleep(POLL_SECONDS)
        try:
            if await session.run(session.analyzer.configs_changed_on_disk):
                await asyncio.sleep(SETTLE_SECONDS)  # do not read a file half-written
                await session.config_changed(session.analyzer.reload_config)
        except Exception:
            log.exception("checking pyproject.toml failed")


async def files_changed(session: Session, params: types.DidChangeWatchedFilesParams) -> None:
    config = False
    paths: list[Path] = []
    for change in params.changes:
        path = uri_to_path(change.uri)
        if path is None:
            continue
        if path.name == "pyproject.toml" or is_pin_file(path.name, path.parent.name.lower()):
            config = True  # (configuration, or the versions the pins state)
        if path.name != "pyproject.toml" and path.suffix in (".py", ".pyi", ".yml", ".yaml",
                                                             ".gin"):
            paths.append(path)
    if config:
        await session.config_changed(session.analyzer.reload_config)
    if paths:
        await session.config_changed(lambda: session.analyzer.files_changed(paths))
