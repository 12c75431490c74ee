"""The server's state and timing: open units, their latest results, debounced analysis, push and
pull diagnostics, cross-file refresh, index builds with progress.

Everything here runs on the event loop thread; engine work goes to ``worker``, one thread, so
the loop stays free to read the next edit while a file is analysed.

- An edit bumps the unit's revision and (re)starts its debounce timer: a newer edit cancels the
  timer, and a queued analysis of an older revision is skipped when its turn comes.
- Results are kept per unit; one is current while its revision and generation are the latest.
- Push clients get ``publishDiagnostics`` for the latest revision only, and only when the
  diagnostics changed; pull clients get a report computed on demand (reusing a current result).
- When an analysis changes the ProjectIndex, the other open units are re-analysed in the
  background (after the edits settle); those whose diagnostics changed are pushed again, or the
  pull client is asked to refresh.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import itertools
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsprotocol import types

from shardlint.lsp.analyzer import Analyzer
from shardlint.lsp.client import ClientFeatures
from shardlint.lsp.documents import DocumentStore, Notebook, TextDoc
from shardlint.lsp.result import Result, analyse
from shardlint.lsp.settings import DEFAULT_DEBOUNCE_MS

log = logging.getLogger("shardlint.lsp")
Unit = TextDoc | Notebook
GC_DELAY = 0.05  # seconds after an analysis before collecting its garbage


@dataclass
class _Job:
    revision: int
    generation: int
    future: asyncio.Future


class Session:
    def __init__(self, server) -> None:
        self.server = server
        self.store = DocumentStore()
        self.analyzer = Analyzer()
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shardlint-analysis")
        self.features = ClientFeatures()
        self.debounce = DEFAULT_DEBOUNCE_MS / 1000
        self.fallback_root = Path.cwd()
        self.generation = 0
        self.results: dict[str, Result] = {}
        self.reported: dict[str, str] = {}  # uri -> fingerprint last pushed or pulled
        self._pushed: dict[str, set[str]] = {}  # unit key -> uris it last pushed to
        self._jobs: dict[str, _Job] = {}
        self._timers: dict[str, asyncio.Task] = {}
        self._refresh: asyncio.Task | None = None
        self._indexing: dict[Path, asyncio.Task] = {}
        self._indexed_folders: set[Path] = set()
        self._tokens = itertools.count(1)
        self._shown: set[str] = set()
        self._gc_pending: asyncio.TimerHandle | None = None

    # ---- running on the worker ----------------------------------------------------------------------
    async def run(self, fn: Callable[..., Any], *args) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.worker, fn, *args)

    # ---- documents --------------------------------------------------------------------------------
    def edited(self, unit: Unit | None, delay: float | None = None) -> None:
        """A unit changed (or opened, saved): analyse it after the debounce, then push."""
        if unit is None:
            return
        key = self.store.key(unit.uri)
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        wait = self.debounce if delay is None else delay
        self._timers[key] = asyncio.ensure_future(self._after_edit(key, unit.uri, wait))

    async def _after_edit(self, key: str, uri: str, wait: float) -> None:
        me = asyncio.current_task()
        try:
            if wait > 0:
                await asyncio.sleep(wait)
            unit = self.store.unit(uri)
            if unit is None:
                return
            res = await self.analysed(unit)
            if not self.features.pull:
                self.publish(res, every=True)
            elif isinstance(unit, Notebook) and self._changed_since_pulled(res):
                # The client re-pulls only the cell that was edited; cell 5 may depend on cell 1.
                await self.request_refresh()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("analysis of %s failed", uri)
            self.log_message(types.MessageType.Error, f"shardlint: analysis of {uri} failed; "
                             "see the server log")
        finally:
            if self._timers.get(key) is me:
                del self._timers[key]

    def closed(self, unit: Unit, uris: list[str]) -> None:
        key = self.store.key(unit.uri)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self.results.pop(key, None)
        for uri in set(uris) | self._pushed.pop(key, set()):
            if self.reported.pop(uri, None) is not None and not self.features.pull:
                self.server.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        if unit.path is not None:
            asyncio.ensure_future(self._forget(unit.path))

    async def _forget(self, path: Path) -> None:
        try:
            outcome = await self.run(self.analyzer.forget, path)
        except Exception:
            log.exception("forgetting %s failed", path)
            return
        self.generation = max(self.generation, outcome.generation)
        if outcome.index_changed:
            self.refresh_open_units()

    # ---- analysis -----------------------------------------------------------------------------------
    def path_of(self, unit: Unit) -> Path:
        if unit.path is not None:
            return unit.path
        name = unit.uri.rsplit("/", 1)[-1].replace(":", "_") or "untitled"
        return self.fallback_root / (name if isinstance(unit, TextDoc) else name + ".ipynb")

    async def analysed(self, unit: Unit) -> Result:
        """The result for the unit's current revision: reused when current, else computed.

        Awaiting callers share one computation; cancelling a caller does not cancel it.
        """
        key = self.store.key(unit.uri)
        for _ in range(50):
            live = self.store.unit(unit.uri)
            if live is None:
                raise LookupError(f"{unit.uri} is not open")
            res = self.results.get(key)
            if res is not None and res.revision == live.revision and res.generation >= self.generation:
                return res
            await self._ensure_index(self.path_of(live))
            job = self._jobs.get(key)
            if job is None or job.revision != live.revision or job.generation < self.generation:
                job = self._submit(key, live)
            res = await asyncio.shield(job.future)
            live = self.store.unit(unit.uri)
            if res is not None and live is not None and res.revision == live.revision:
                return res
        raise RuntimeError(f"{unit.uri} kept changing while it was analysed")

    def _submit(self, key: str, unit: Unit) -> _Job:
        path = self.path_of(unit)
        if isinstance(unit, Notebook):
            cells = unit.source(self.store.docs)
            text = cells.text
            versions = {c.uri: self._version(c.uri) for c in cells.cells}
        else:
            cells, text, versions = None, unit.text, {unit.uri: unit.version}
        others = {str(d.path): (d.uri, d.text) for d in self.store.docs.values()
                  if d.path is not None and d.notebook is None and d.uri != unit.uri}
        revision, uri = unit.revision, unit.uri

        def work() -> Result | None:
            live = self.store.unit(uri)  # a plain dict read: safe from the worker
            if live is None or live.revision != revision:
                return None  # a newer edit arrived while this waited: skip it
            return analyse(self.analyzer, key=key, revision=revision, path=path, text=text,
                           cells=cells, uri=uri, versions=versions, others=others,
                           encoding=self.features.encoding, support=self.features.diagnostics)

        future = asyncio.get_running_loop().run_in_executor(self.worker, work)
        job = _Job(revision, self.generation, future)
        self._jobs[key] = job
        future.add_done_callback(lambda f: self._finished(key, job, f))
        return job

    def _version(self, uri: str) -> int | None:
        doc = self.store.text_doc(uri)
        return doc.version if doc is not None else None

    def _finished(self, key: str, job: _Job, future: asyncio.Future) -> None:
        if self._jobs.get(key) is job:
            del self._jobs[key]
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            log.error("analysis failed", exc_info=exc)
            return
        res: Result | None = future.result()
        if res is None:
            return
        self._collect_later()
        self.generation = max(self.generation, res.generation)
        prev = self.results.get(key)
        if self.store.by_key(key) is not None and (
                prev is None or (res.revision, res.generation) >= (prev.revision, prev.generation)):
            self.results[key] = res
        for err in res.errors:  # a rule that raised: the other rules' findings still count
            log.error("%s", err)
            if err not in self._shown:  # into the client's log once, not on every keystroke
                self._shown.add(err)
                self.log_message(types.MessageType.Error, f"shardlint: {err}")
        self.show_messages(res.messages)
        if res.index_changed:
            self.refresh_open_units()

    def _collect_later(self) -> None:
        """Collect the analysis's garbage once its diagnostics are out: a collection holds the
        GIL for ~15 ms, which must not delay sending them."""
        if self._gc_pending is not None:
            return

        def submit() -> None:
            self._gc_pending = None
            with contextlib.suppress(RuntimeError):  # the worker is gone after shutdown
                self.worker.submit(self.analyzer.collect_garbage)

        self._gc_pending = asyncio.get_running_loop().call_later(GC_DELAY, submit)

    # ---- push -----------------------------------------------------------------------------------------
    def publish(self, res: Result, every: bool = False) -> None:
        """Push a result's diagnostics: all of them after an edit of the unit (they carry its new
        version), else only those that changed."""
        unit = self.store.by_key(res.key)
        if unit is None or unit.revision != res.revision:
            return  # a newer revision will publish
        for uri in self._pushed.get(res.key, set()) - set(res.diagnostics):  # a removed cell
            if self.reported.pop(uri, None) is not None:
                self.server.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
        self._pushed[res.key] = set(res.diagnostics)
        for uri in res.diagnostics:
            items, fp = self.shown(res, uri)
            if not every and self.reported.get(uri) == fp:
                continue
            self.reported[uri] = fp
            self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=uri, diagnostics=items, version=res.versions.get(uri)))

    def shown(self, res: Result, uri: str) -> tuple[list[types.Diagnostic], str]:
        """A document's diagnostics as the client gets them, and their fingerprint: the
        analysis's, each finding a current memory measurement reaches with what fixing it
        saved (``memory_lens.saving_texts``)."""
        items, fp = res.items(uri), res.fingerprints.get(uri, "")
        memory = getattr(self.server, "memory", None)
        texts = memory.saving_texts() if memory is not None else {}
        if not texts:
            return [d for _, d in items], fp
        out, added = [], []
        for f, d in items:
            text = texts.get((f.code, os.path.realpath(f.path), f.span.line, f.span.col))
            if text:
                d = copy.copy(d)
                d.message = f"{d.message} {text}"
                added.append(text)
            out.append(d)
        if added:
            fp = f"{fp}:{hashlib.sha256(repr(added).encode()).hexdigest()[:12]}"
        return out, fp

    def republish(self) -> None:
        """Diagnostics changed without an edit (a memory measurement came in): push them again,
        or ask a pull client to pull."""
        if self.features.pull:
            asyncio.ensure_future(self.request_refresh())
            return
        for res in list(self.results.values()):
            self.publish(res)

    # ---- cross-file -------------------------------------------------------------------------------
    def refresh_open_units(self) -> None:
        """Something other units may depend on changed: re-check them once the edits settle."""
        if self._refresh is not None and not self._refresh.done():
            self._refresh.cancel()
        self._refresh = asyncio.ensure_future(self._refresh_open_units())

    async def _refresh_open_units(self) -> None:
        await asyncio.sleep(max(self.debounce, 0.05))
        changed = False
        for unit in list(self.store.units()):
            while self._timers:  # the unit being edited comes first
                await asyncio.sleep(0.02)
            if self.store.unit(unit.uri) is None:
                continue
            try:
                res = await self.analysed(unit)
            except LookupError:
                continue
            except Exception:
                log.exception("re-analysis of %s failed", unit.uri)
                continue
            if self.features.pull:
                changed |= self._changed_since_pulled(res)
            else:
                self.publish(res)
        if changed:
            await self.request_refresh()

    def _changed_since_pulled(self, res: Result) -> bool:
        return any(uri in self.reported and self.reported[uri] != self.shown(res, uri)[1]
                   for uri in res.fingerprints)

    async def request_refresh(self) -> None:
        """Ask a pull client to pull every open document again."""
        if not self.features.refresh:
            return
        try:
            await asyncio.wait_for(self.server.workspace_diagnostic_refresh_async(None), 10)
        except Exception as exc:  # noqa: BLE001  (an old client, or one shutting down)
            log.warning("workspace/diagnostic/refresh failed: %s", exc)

    # ---- the project index ------------------------------------------------------------------------
    async def _ensure_index(self, path: Path) -> None:
        if path.parent in self._indexed_folders:
            return
        root = await self.run(self.analyzer.root_needing_index, path)
        if root is not None:
            task = self._indexing.get(root)
            if task is None or task.done():
                task = asyncio.ensure_future(self._build_index(root, path))
                self._indexing[root] = task
            await asyncio.shield(task)
        self._indexed_folders.add(path.parent)

    async def index_folder(self, folder: Path) -> None:
        """Build a workspace folder's index ahead of the first open file."""
        try:
            await self._ensure_index(folder / "__init__.py")
        except Exception:
            log.exception("indexing %s failed", folder)

    async def _build_index(self, root: Path, path: Path) -> None:
        token = f"shardlint-index-{next(self._tokens)}"
        progress = self.features.progress and await self._create_progress(token)
        if progress:
            self.server.work_done_progress.begin(token, types.WorkDoneProgressBegin(
                title="shardlint", message=f"indexing {root}", cancellable=False))
        t0 = time.perf_counter()
        try:
            _, modules, _ = await self.run(self.analyzer.build_index, path)
            generation = await self.run(lambda: self.analyzer.generation)
            self.generation = max(self.generation, generation)
            noun = "module" if modules == 1 else "modules"
            message = f"indexed {modules} {noun} of {root} in {time.perf_counter() - t0:.2f} s"
        except Exception:
            log.exception("indexing %s failed", root)
            message = f"indexing {root} failed; see the server log"
        if progress:
            self.server.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))
        self.log_message(types.MessageType.Info, f"shardlint: {message}")

    async def _create_progress(self, token: str) -> bool:
        try:
            await asyncio.wait_for(self.server.work_done_progress.create_async(token), 5)
            return True
        except Exception as exc:  # noqa: BLE001  (no progress bar then, nothing worse)
            log.warning("window/workDoneProgress/create failed: %s", exc)
            return False

    # ---- configuration ----------------------------------------------------------------------------
    async def config_changed(self, fn: Callable[[], bool]) -> None:
        """Run a configuration change on the worker; re-check every open unit if it mattered."""
        changed = await self.run(fn)
        self.show_messages(await self.run(self.analyzer.drain_messages))
        if changed:
            self.generation = max(self.generation, await self.run(lambda: self.analyzer.generation))
            self._indexed_folders.clear()
            self.refresh_open_units()

    # ---- messages -----------------------------------------------------------------------------------
    def log_message(self, kind: types.MessageType, text: str) -> None:
        self.server.window_log_message(types.LogMessageParams(type=kind, message=text))

    def show_messages(self, messages: list[tuple[str, str]]) -> None:
        for level, text in messages:
            log.warning("%s", text)
            if text in self._shown:  # once per distinct problem, not on every keystroke
                continue
            self._shown.add(text)
            kind = types.MessageType.Error if level == "error" else types.MessageType.Warning
            self.server.window_show_message(types.ShowMessageParams(type=kind, message=text))

    def shutdown(self) -> None:
        for task in list(self._timers.values()) + list(self._indexing.values()):
            task.cancel()
        if self._refresh is not None:
            self._refresh.cancel()
        self.worker.shutdown(wait=False, cancel_futures=True)
