"""The memory check in the editor: code lenses over probes, a command that measures, a hover.

- ``textDocument/codeLens``: "Measure memory" over each probe (``shardlint_probe_*`` or named in
  ``[tool.shardlint.memory] probes``), only while the client says the check is enabled and the
  workspace trusted. After a run: the headline figure on the probe and, where it can be found, on
  the jitted function it returns; "stale" once the probe's file changed; the failure in one line.
- ``workspace/executeCommand`` ``shardlint.server.measureMemory [uri, function]``: runs the probe
  exactly as ``shardlint memory FILE:FUNCTION`` does, in a thread of its own (never the analysis
  worker), with ``$/progress`` and cancellation (``$/cancelRequest``, the progress's cancel
  button, ``shardlint.server.cancelMemory``, or a new run of the same probe).
- Hover over the probe's name: the full table.

Results are cached by the probe file's text and the settings, so an unchanged probe shows its
figure again without running; a change in a project file the probe reaches (its model, its step:
``memory.reach``), saved or not, makes the figure stale.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from lsprotocol import types

from shardlint.errors import ShardlintError
from shardlint.lsp.documents import code_units, split_lines, uri_to_path
from shardlint.lsp.memory_run import (
    Measurement,
    Plan,
    failed,
    measure,
    normalise,
    plan_for,
    probes_of,
    savings_line,
    text_hash,
    top_level_def,
)
from shardlint.lsp.settings import MemoryClientSettings
from shardlint.memory.probes import Probe
from shardlint.memory.runner import Cancelled

log = logging.getLogger("shardlint.lsp")
MEASURE = "shardlint.server.measureMemory"
CANCEL = "shardlint.server.cancelMemory"
_DEF_NAME = re.compile(r"(?:async\s+)?def\s+(\w+)")  # top level: probes are
_CACHED = 256  # measurements kept; each holds one rendered table


@dataclass
class _Running:
    probe: Probe
    cancel: threading.Event
    done: asyncio.Future


class MemoryLenses:
    def __init__(self, server) -> None:
        self.server = server
        self.settings = MemoryClientSettings()
        self.pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="shardlint-memory")
        self.cache: dict[tuple[str, str, str], Measurement] = {}  # (key, source hash, plan key)
        self.latest: dict[str, Measurement] = {}  # probe key -> its last measurement
        self.running: dict[str, _Running] = {}
        self.closed = False
        self._tokens = itertools.count(1)
        self._hashes: dict[Path, tuple[tuple[int, int], str]] = {}  # file -> (mtime, size), hash

    @property
    def session(self):
        return self.server.session

    # ---- settings -------------------------------------------------------------------------------
    def configure(self, settings: MemoryClientSettings, refresh: bool = True) -> None:
        changed, self.settings = settings != self.settings, settings
        if not settings.active:
            for run in self.running.values():
                run.cancel.set()
        if changed and refresh:
            self.refresh()

    def refresh(self) -> None:
        if self.session.features.code_lens_refresh and not self.closed:
            self.server.spawn(self._refresh())

    async def _refresh(self) -> None:
        try:
            await asyncio.wait_for(self.server.workspace_code_lens_refresh_async(None), 10)
        except Exception as exc:  # noqa: BLE001  (a client shutting down)
            log.warning("workspace/codeLens/refresh failed: %s", exc)

    # ---- what a document shows --------------------------------------------------------------------
    def _document(self, uri: str) -> tuple[str, Path] | None:
        doc = self.session.store.text_doc(uri)
        if doc is None or doc.path is None or doc.notebook is not None or not doc.is_python:
            return None
        return doc.text, doc.path

    def _plan(self, path: Path) -> Plan | None:
        try:
            return plan_for(path, self.settings)
        except ShardlintError as exc:
            self.session.show_messages([("warning", f"shardlint memory: {exc}")])
            return None

    def code_lenses(self, uri: str) -> list[types.CodeLens]:
        if not self.settings.active:
            return []
        found = self._document(uri)
        if found is None:
            return []
        text, path = found
        plan = self._plan(path)
        lenses: list[types.CodeLens] = []
        for probe in probes_of(text, path, plan):
            lenses += self._probe_lenses(uri, probe, plan)
        lenses += self._target_lenses(text, path)
        return lenses

    def _probe_lenses(self, uri: str, probe: Probe, plan: Plan | None) -> list[types.CodeLens]:
        at = types.Range(types.Position(probe.line - 1, 0), types.Position(probe.line - 1, 0))
        args = [uri, probe.function]

        def lens(title: str, command: str = "", tooltip: str = "") -> types.CodeLens:
            return types.CodeLens(at, types.Command(title=title, command=command,
                                                    arguments=args if command else None,
                                                    tooltip=tooltip or None))

        if probe.key in self.running:
            return [lens("measuring memory… (cancel)", CANCEL, "stop the measurement")]
        current = self._cached(probe, plan)
        if current is not None:
            out = []
            if current.headline:
                out.append(lens(current.headline, "", "hover the probe's name for the table"))
            if current.fit and current.fit.get("headline"):
                out.append(lens(f"memory at {current.fit['devices']} devices: "
                                f"{current.fit['headline']}", "",
                                "a code action on the rules table puts the plan's table in"
                                if current.fit.get("edit") else
                                "shardlint memory --fit: the plans, in the hover's table"))
            saved = savings_line(current)
            if saved:
                out.append(lens(saved, "", "what-if compiles: the probe compiled again with "
                                "each finding's remedy, in order; hover a finding for details"))
            if current.failure:
                out.append(lens(f"memory check failed: {current.failure}", "",
                                "the server log holds the traceback"))
            return out + [lens("measure again", MEASURE)]
        last = self.latest.get(probe.key)
        if last is not None and (last.headline or last.failure):
            figure = last.headline or f"failed: {last.failure}"
            changed = self._changed_import(last)
            if last.probe.source_hash != probe.source_hash:
                what, why = "the file", "measured before the file changed"
            elif changed is not None:
                what, why = f"`{changed.name}`", f"measured before {changed} changed"
            else:
                what, why = "the settings", "measured with other settings"
            return [lens(f"memory (stale, {what} changed): {figure}", "", why),
                    lens("Measure memory", MEASURE)]
        return [lens("Measure memory", MEASURE,
                     f"shardlint memory {probe.function}: per-device memory at each device count")]

    def _cached(self, probe: Probe, plan: Plan | None) -> Measurement | None:
        """The measurement that still holds: same probe source, settings and imported files."""
        if plan is None:
            return None
        m = self.cache.get((probe.key, probe.source_hash, plan.key))
        return m if m is not None and self._changed_import(m) is None else None

    def _changed_import(self, m: Measurement) -> Path | None:
        """The first file the probe reaches (its model, its step) whose text is no longer the
        one measured."""
        return next((path for path, digest in m.imports.items() if self._hash_now(path) != digest),
                    None)

    def _hash_now(self, path: Path) -> str:
        """The hash of a file's text as the user sees it: the editor's unsaved text when it is
        open (as for the probe's own file), else the disk's."""
        doc = next((d for d in self.session.store.docs.values()
                    if d.path is not None and d.notebook is None and d.path.resolve() == path),
                   None)
        return text_hash(doc.text) if doc is not None else self._disk_hash(path)

    def _disk_hash(self, path: Path) -> str:
        try:
            st = path.stat()
        except OSError:
            return ""
        stamp = (st.st_mtime_ns, st.st_size)
        known = self._hashes.get(path)
        if known is not None and known[0] == stamp:
            return known[1]
        try:
            digest = text_hash(path.read_bytes().decode("utf-8"))
        except (OSError, UnicodeDecodeError):
            digest = ""
        self._hashes[path] = (stamp, digest)
        return digest

    def _current(self, m: Measurement) -> bool:
        """Whether a measurement still describes the code: its probe file and imports unchanged."""
        return self._hash_now(m.probe.path) == m.probe.source_hash and \
            self._changed_import(m) is None

    def _target_lenses(self, text: str, path: Path) -> list[types.CodeLens]:
        lenses = []
        for m in self.latest.values():
            if m.target is None or m.target[0] != path.resolve() or not m.headline:
                continue
            node = top_level_def(normalise(text), m.target[1])
            if node is None:
                continue
            at = types.Range(types.Position(node.lineno - 1, 0), types.Position(node.lineno - 1, 0))
            stale = "" if self._current(m) else "memory (stale, the code changed): "
            lenses.append(types.CodeLens(at, types.Command(
                title=f"{stale}{m.headline} ({m.probe.function})", command="",
                tooltip=f"measured by {m.probe.path.name}:{m.probe.function}")))
        return lenses

    # ---- the plan as a code action ------------------------------------------------------------------
    def code_actions(self, uri: str, rng: types.Range) -> list[types.CodeAction]:
        """Over the rules table of a file whose current measurement has a plan that fits:
        replace the table with the plan's (a WorkspaceEdit in the client's position encoding)."""
        if not self.settings.active:
            return []
        found = self._document(uri)
        if found is None:
            return []
        text, path = found
        out = []
        for m in self.latest.values():
            edit = (m.fit or {}).get("edit")
            if edit is None or Path(edit["path"]).resolve() != path.resolve() or \
                    not self._current(m):
                continue
            lines = split_lines(text)
            if edit["end_line"] > len(lines):
                continue
            encoding = self.session.features.encoding

            def position(line: int, utf8_col: int) -> types.Position:
                head = lines[line - 1].encode("utf-8")[:utf8_col].decode("utf-8", "replace")
                return types.Position(line - 1, code_units(head, encoding))

            table = types.Range(position(edit["line"], edit["col"]),
                                position(edit["end_line"], edit["end_col"]))
            if rng.end.line < table.start.line or rng.start.line > table.end.line:
                continue
            out.append(types.CodeAction(
                title=edit["title"], kind=types.CodeActionKind.RefactorRewrite,
                edit=types.WorkspaceEdit(changes={uri: [types.TextEdit(table, edit["code"])]})))
        return out

    # ---- hover --------------------------------------------------------------------------------------
    def hover(self, uri: str, pos: types.Position) -> types.Hover | None:
        """The table over a measured probe's name (``def <name>``)."""
        if not self.settings.active:
            return None
        found = self._document(uri)
        if found is None:
            return None
        text, path = found
        lines = split_lines(text)
        if pos.line >= len(lines):
            return None
        m = _DEF_NAME.match(lines[pos.line])
        if m is None:
            return None
        encoding = self.session.features.encoding
        start, end = (code_units(lines[pos.line][:i], encoding) for i in m.span(1))
        if not start <= pos.character <= end:
            return None
        plan = self._plan(path)
        probe = next((p for p in probes_of(text, path, plan) if p.function == m.group(1)), None)
        if probe is None:
            return None
        last = self._cached(probe, plan)
        stale = last is None
        last = last or self.latest.get(probe.key)
        if last is None:
            return None
        note = "stale: the file changed since this was measured\n\n" if stale else ""
        title = f"shardlint memory: {probe.function}"
        if self.session.features.markdown:
            value = f"**{title}**\n\n{'*' + note.strip() + '*' if note else ''}\n\n```text\n" \
                    f"{last.detail.rstrip()}\n```"
            kind = types.MarkupKind.Markdown
        else:
            value, kind = f"{title}\n\n{note}{last.detail.rstrip()}", types.MarkupKind.PlainText
        rng = types.Range(types.Position(pos.line, start), types.Position(pos.line, end))
        return types.Hover(types.MarkupContent(kind, value), rng)

    # ---- the command --------------------------------------------------------------------------------
    def cancel(self, *args) -> dict:
        probe_key = self._key_of(*args)
        run = self.running.get(probe_key) if probe_key else None
        if run is not None:
            run.cancel.set()
        return {"cancelled": run is not None}

    def _key_of(self, uri=None, function=None, *_rest) -> str | None:
        path = uri_to_path(uri) if isinstance(uri, str) else None
        if path is None or not isinstance(function, str):
            return None
        return f"{path.resolve()}:{function}"

    async def measure(self, *args) -> dict:
        """``[uri, function]``: measure the probe (the saved file); returns the summary."""
        if not self.settings.active:
            why = "enable it and trust the workspace" if not self.settings.trusted \
                else "enable it in the settings"
            return self._refuse(f"the memory check is off ({why})")
        if len(args) < 2 or not isinstance(args[0], str) or not isinstance(args[1], str):
            return self._refuse("expected the arguments [uri, probe function]")
        uri, function = args[0], args[1]
        path = uri_to_path(uri)
        if path is None or not path.is_file():
            return self._refuse(f"{uri} is not a file on disk")
        plan = self._plan(path)
        if plan is None:
            return self._refuse("the memory settings are not valid; see the message above")
        saved = path.read_text(encoding="utf-8", errors="surrogateescape")
        probe = next((p for p in probes_of(saved, path, plan) if p.function == function), None)
        if probe is None:
            return self._refuse(f"no probe {function} in the saved {path.name}")
        open_doc = self._document(uri)
        if open_doc is not None and normalise(open_doc[0]) != saved:
            self.session.log_message(types.MessageType.Warning,
                                     f"shardlint memory: {path.name} has unsaved changes; "
                                     "measuring the saved file")

        old = self.running.get(probe.key)
        if old is not None:  # a new run of the same probe replaces the old one
            old.cancel.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(old.done), 30)
        me = _Running(probe, threading.Event(), asyncio.get_running_loop().create_future())
        self.running[probe.key] = me
        self.refresh()
        try:
            return await self._measure(probe, plan, me)
        finally:
            if not me.done.done():
                me.done.set_result(None)
            if self.running.get(probe.key) is me:
                del self.running[probe.key]
            self.refresh()

    def _refuse(self, message: str) -> dict:
        self.server.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Warning, message=f"shardlint memory: {message}"))
        return {"ok": False, "failure": message}

    async def _measure(self, probe: Probe, plan: Plan, me: _Running) -> dict:
        loop = asyncio.get_running_loop()
        token = await self._progress_begin(probe, me)
        total, finished = len(plan.settings.devices), set()

        def progress(devices: int, stage: str) -> None:  # from the runner's threads
            if stage in ("done", "failed"):
                finished.add(devices)
            if token is not None:
                loop.call_soon_threadsafe(self._progress_report, token,
                                          f"{devices} device(s): {stage}",
                                          int(100 * len(finished) / total))

        outcome = "cancelled"
        try:
            work = loop.run_in_executor(self.pool, measure, probe, plan, progress, me.cancel)
            try:
                result = await asyncio.shield(work)
            except asyncio.CancelledError:  # $/cancelRequest: stop the worker, then give up
                me.cancel.set()
                await asyncio.wait({work}, timeout=10)
                raise
            except Cancelled:
                return {"ok": False, "probe": probe.function, "cancelled": True}
            except Exception as exc:  # a bug of ours must not take the server down
                log.exception("measuring %s failed", probe.key)
                result = failed(probe, plan.key, f"{type(exc).__name__}: {exc}")
            self._store(result)
            outcome = result.headline or f"failed: {result.failure}"
            return result.summary()
        finally:
            if token is not None and not self.closed:
                self.server.work_done_progress.end(token, types.WorkDoneProgressEnd(
                    message=outcome))

    def saving_texts(self) -> dict[tuple[str, str, int, int], str]:
        """(code, real path, line, column) of each static finding a current measurement reaches
        -> the sentence its diagnostic and hover get (what fixing it saved)."""
        out: dict[tuple[str, str, int, int], str] = {}
        for m in self.latest.values():
            if not m.savings or not self._current(m):
                continue
            for r in m.savings:
                key = (r["code"], os.path.realpath(r["path"]), r["line"], r["column"])
                out[key] = f"{out[key]} {r['text']}" if key in out else r["text"]
        return out

    def _store(self, m: Measurement) -> None:
        self.cache[(m.probe.key, m.probe.source_hash, m.plan_key)] = m
        while len(self.cache) > _CACHED:
            del self.cache[next(iter(self.cache))]
        self.latest[m.probe.key] = m
        if m.failure:
            self.server.window_show_message(types.ShowMessageParams(
                type=types.MessageType.Error,
                message=f"shardlint memory: {m.probe.function} failed: {m.failure}"))
            self.session.log_message(types.MessageType.Error,
                                     f"shardlint memory: {m.probe.function}\n{m.detail}")
        else:
            self.session.log_message(types.MessageType.Info,
                                     f"shardlint memory: {m.probe.function}: {m.headline}")
        if m.savings:
            self.session.republish()  # the diagnostics the savings belong to get them

    async def _progress_begin(self, probe: Probe, me: _Running) -> str | None:
        if not self.session.features.progress:
            return None
        token = f"shardlint-memory-{next(self._tokens)}"
        try:
            await asyncio.wait_for(self.server.work_done_progress.create_async(token), 5)
        except Exception as exc:  # noqa: BLE001  (no progress bar then, nothing worse)
            log.warning("window/workDoneProgress/create failed: %s", exc)
            return None
        cancelled = self.server.work_done_progress.tokens.get(token)
        if cancelled is not None:  # the client's cancel button (window/workDoneProgress/cancel)
            def on_cancel(future) -> None:
                if future.cancelled():
                    me.cancel.set()

            cancelled.add_done_callback(on_cancel)
        self.server.work_done_progress.begin(token, types.WorkDoneProgressBegin(
            title="shardlint memory", message=f"measuring {probe.function}", cancellable=True,
            percentage=0))
        return token

    def _progress_report(self, token: str, message: str, percentage: int) -> None:
        if self.closed:
            return
        self.server.work_done_progress.report(token, types.WorkDoneProgressReport(
            message=message, percentage=percentage))

    def shutdown(self) -> None:
        self.closed = True
        for run in self.running.values():
            run.cancel.set()
        self.pool.shutdown(wait=False, cancel_futures=True)
