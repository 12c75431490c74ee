"""Noticing changes on disk: ``pyproject.toml`` (configuration) and Python files (the index).

Clients that can register file watchers get ``**/pyproject.toml`` and ``**/*.py`` watchers and
send ``workspace/didChangeWatchedFiles``. For the others (Neovim 0.7 cannot), the server checks
the pyproject.toml files that can configure an open file once a second: a few ``stat`` calls.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from lsprotocol import types

from shardlint.lsp.documents import uri_to_path
from shardlint.lsp.session import Session

log = logging.getLogger("shardlint.lsp")
POLL_SECONDS = 1.0
SETTLE_SECONDS = 0.1
# (YAML and gin files: the rules tables and mesh axis names a project keeps in its
# configuration, and the calls gin makes)
_WATCHERS = ("**/pyproject.toml", "**/*.py", "**/*.pyi", "**/*.yml", "**/*.yaml", "**/*.gin")


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
        if path.name == "pyproject.toml":
            config = True
        elif path.suffix in (".py", ".pyi", ".yml", ".yaml", ".gin"):
            paths.append(path)
    if config:
        await session.config_changed(session.analyzer.reload_config)
    if paths:
        await session.config_changed(lambda: session.analyzer.files_changed(paths))
