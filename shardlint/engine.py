"""Lint one source or many paths: prefilter, parse, build facts, run rules, apply suppressions.

The engine owns the ProjectIndex for a project root. It knows nothing of output formats or LSP.
"""

from __future__ import annotations

import ast
import contextlib
import gc
import hashlib
import json
import marshal
import os
import pickle
import re
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from shardlint import __version__
from shardlint import cache as cache_mod
from shardlint.config import Config
from shardlint.errors import ShardlintError
from shardlint.findings.suppress import parse as parse_suppressions
from shardlint.grammar import newer_syntax
from shardlint.incremental import IncrementalParser
from shardlint.rules.base import Finding, Rule, RuleContext, all_rules
from shardlint.semantics.catalog.versions import VersionMap, Versions, detect_map
from shardlint.semantics.catalog.runnable import STALE_SOURCES, loads, runnable
from shardlint.semantics.flow.runs import inherited, oldest_in
from shardlint.semantics.file.config_tables import might_hold_tables, read_gin, yaml_tables
from shardlint.semantics.file.moves import newer_calls
from shardlint.semantics.file.replay import FactsMemo
from shardlint.semantics.file.visitor import build_facts, rebuild_facts
from shardlint.semantics.file.wrappers import Wrappers
from shardlint.semantics.flow.project import ProjectIndex
from shardlint.semantics.flow.summary import ModuleSummary, summarise
from shardlint.semantics.flow.summary import FORMAT as SUMMARY_FORMAT
from shardlint.source import SourceText, Span, decode_source
from shardlint.syntax import parse as parse_module
from shardlint.warm import code_stamp

CACHE_DIR = cache_mod.DIR
_SKIP_DIRS = {".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", "venv", ".tox",
              ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", CACHE_DIR, "build", "dist",
              "site-packages", ".eggs"}
# Files that never mention these packages cannot hold a pitfall: skipped before parsing. (A
# config builder that writes `config.logical_axis_rules = ...` without importing jax counts.)
# A file is analysed when it names jax, flax or optax, or may write a rules table or mesh axis
# names into a configuration (`config.logical_axis_rules = ...`, `logical_axes_rules=...`,
# `mesh_axes: list[str] = [...]`) without importing any of them.
# A helper module that only updates a state handed to it (`state.apply_gradients(...)`,
# `cache.at[i].set(v)`) names no package and counts too: a jitted step elsewhere may call it.
_PREFILTER = re.compile(r"\b(?:jax|flax|optax)\b|ax[ie]s_rules|mesh_ax|\.apply_gradients\(|\.at\[")
# (what mentions_jax tests)
_PACKAGES = ("jax", "flax", "optax")


def path_order(path: Path) -> list[str]:
    """The order ``sorted`` gives paths (their parts, case-folded where the platform folds
    case), as a key computed once per path instead of at every comparison."""
    return os.path.normcase(str(path)).split(os.sep)


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"  # (what ``\w`` matches in a str pattern)


def mentions_jax(text: str) -> bool:
    """``_PREFILTER.search(text)``, with C-level substring searches instead of the regex's
    character-by-character scan (it cost 0.07 s of the main process on the corpus): a file
    passes when one of the packages' names occurs as a whole word, or a rules or mesh-axes
    name in it."""
    if "s_rules" in text and ("axis_rules" in text or "axes_rules" in text) \
            or "mesh_ax" in text or ".at[" in text or ".apply_gradients(" in text:
        return True
    end = len(text)
    for word in _PACKAGES:
        n = len(word)
        i = text.find(word)
        while i >= 0:
            if (i == 0 or not _is_word_char(text[i - 1])) and \
                    (i + n == end or not _is_word_char(text[i + n])):
                return True
            i = text.find(word, i + 1)
    return False


_MIN_FILES_PER_JOB = 8
# Configuration files read (as data) for the rules tables they hold.
CONFIG_SUFFIXES = (".yml", ".yaml", ".gin")


def config_worth_reading(path: Path, text: str) -> bool:
    """Whether a configuration file may hold what the index keeps: any gin file (its bindings
    are calls), a YAML file whose text could hold a rules table or mesh axis names."""
    return path.name.endswith(".gin") or might_hold_tables(text)
PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")


def _summary(cached) -> ModuleSummary | None:
    """A cache entry's summary: the object itself (this run), its JSON (from disk) or that
    JSON's text (from a worker)."""
    if cached is None or isinstance(cached, ModuleSummary):
        return cached
    return ModuleSummary.from_json(json.loads(cached) if isinstance(cached, str) else cached)


def _quiet_read(path: Path) -> str | None:
    try:
        if path.suffix == ".ipynb":
            from shardlint.notebook import load

            return load(path).text
        return decode_source(path.read_bytes())
    except (OSError, UnicodeDecodeError, SyntaxError, ShardlintError):
        return None


class _Worker:
    """One process of a batch run, for the whole run: it summarises the files it is handed, a
    chunk at a time, and keeps their trees and facts (within a budget of characters), then runs
    the rules on the files it is handed next, against the index the batch sends it, so that no
    file is parsed twice. A worker that dies (killed, out of memory) answers None and the batch
    does its share."""

    def __init__(self, context, engine: Engine) -> None:
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(engine, child), daemon=True)
        self.process.start()
        child.close()
        self.alive = True
        self.summaries: list[bytes] = []  # the summaries it made, for the others (marshalled)
        self.waiting = 0  # chunks sent it and not answered yet

    def send(self, message: tuple) -> None:
        if not self.alive:
            return
        try:
            self.conn.send(message)
        except (OSError, EOFError, ValueError):
            self.alive = False

    def receive(self):
        """The answer to the last message (None: the worker is gone)."""
        if not self.alive:
            return None
        try:
            status, value = pickle.loads(self.conn.recv_bytes())
        except (OSError, EOFError, pickle.UnpicklingError):
            self.alive = False
            return None
        if status != "ok":  # (an error outside the rules, which are guarded one by one)
            print(f"shardlint: a worker failed, its files are done in the main process:\n{value}",
                  file=sys.stderr)
            return None
        return value

    def close(self) -> None:
        self.stop()
        self.join()

    def stop(self) -> None:
        if self.alive:
            try:
                self.conn.send(("stop",))
            except (OSError, ValueError):
                pass
        self.conn.close()

    def join(self, wait: bool = True) -> None:
        """Wait for the process to end (killed after 5 s). ``wait=False``: reap it if it has
        ended, else leave it ending while the run goes on (giving back a worker's memory takes
        the system ~30 ms, which the report needs not wait for). It is a daemon: the
        interpreter's exit reaps it, as does the next start of a process."""
        if not wait:
            self.process.join(0)
            return
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def _answers(workers: list[_Worker], among: list[int],
             block: bool = True) -> list[tuple[int, object]]:
    """``(i, answer)`` of each worker ``i`` of ``among`` whose answer is there (``block``: wait
    for one); None for a worker gone or failing (see ``_Worker.receive``)."""
    from multiprocessing.connection import wait

    ready = wait([workers[i].conn for i in among], None if block else 0)
    return [(i, workers[i].receive()) for i in among if workers[i].conn in ready]


def _serve(engine: Engine, conn) -> None:
    gc.disable()  # see gc_paused
    held: dict[str, tuple] = {}  # path -> what _prepare made of it, for the rules
    own: list[list] = []  # the cache entries of the summaries made here
    made: dict[str, ModuleSummary] = {}  # rel -> the summary made here (not decoded again)
    kept = 0  # characters of the sources in ``held``
    inbox = _reading(conn)

    while True:
        try:
            message = inbox.get()
        except KeyboardInterrupt:
            return
        if message is None:  # (the batch is gone)
            return
        try:
            if message[0] == "summarise":
                answer = _summarise_items(engine, message[1], message[2] - kept, held, made)
                own.extend(answer[0])
                kept += sum(len(held[p][1]) for p in answer[1])
            elif message[0] == "lint":
                closures = None
                if message[1] is not None:
                    index = engine.index = _index_of(*message[1], own, made)
                    index._ensure()
                    if message[3]:  # (for the batch to keep: see Engine._lint_batch)
                        closures = (index._needs, index._edges, index._callers, index._ctx)
                answer = (_lint_items(engine, message[2], held), closures)
            else:
                # What it holds goes with the process: freeing every tree and fact first would
                # cost as long as a tenth of the rules (measured on the corpus).
                sys.stderr.flush()
                os._exit(0)
            conn.send(("ok", answer))
        except KeyboardInterrupt:
            return
        except BaseException:  # noqa: BLE001 (the batch does this share itself and says why)
            try:
                conn.send(("failed", traceback.format_exc(limit=-4)))
            except (EOFError, OSError, ValueError):
                return


def _reading(conn):
    """The messages the batch sends a worker, read by a thread of their own as they come
    (None once the batch is gone). The batch sends the next chunk, or the index, while a
    worker may be sending an answer; both are larger than a pipe holds (megabytes on the
    corpus), so a worker that read only between answers would wait on the batch while the
    batch waits on it."""
    import queue

    inbox: queue.SimpleQueue = queue.SimpleQueue()

    def read() -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                inbox.put(None)
                return
            inbox.put(message)
            if message[0] == "stop":
                return

    threading.Thread(target=read, name="shardlint-inbox", daemon=True).start()
    return inbox


def _index_of(order: list[tuple[str, str]], others: list[bytes], extra: dict[str, dict],
              own: list[list], made: dict[str, ModuleSummary]) -> ProjectIndex:
    """The batch's project index, in its order (``order``: (module, rel) of each summary),
    from the summaries this worker made (``own``, and the objects themselves: ``made``), the
    other workers' (``others``: their JSON values, marshalled, as the batch received them) and
    the summaries only the batch has (``extra``: the cache's, the config files')."""
    data = dict(extra)
    for rel, _, summary, *_ in own:
        data[rel] = summary
    for values in others:
        data.update(marshal.loads(values))
    index = ProjectIndex()
    for _, rel in order:
        summary = made.get(rel)
        index.add(summary if summary is not None else _summary(data[rel]))  # type: ignore[arg-type]
    return index


def _summarised(engine: Engine, path: Path,
                text: str) -> tuple[tuple | None, ModuleSummary | None]:
    """A target's tree and facts, to hold for its rules, and its summary: parsed once. A file
    that does not parse: its SHL000, made once, and no summary; one too deep to summarise:
    nothing to hold (linted afresh, as the file is in a batch without workers)."""
    item = engine._prepare(path, text, add_to_index=False)
    facts = item[3]
    if facts is None:
        return item, None
    try:
        summary = summarise(facts)
    except (RecursionError, MemoryError):
        facts.release()
        return None, None
    summary.path = os.path.abspath(path)
    return item, summary


def _summarise_items(engine: Engine, items: list[tuple[str, str, str, bool]], budget: int,
                     held: dict[str, tuple], objects: dict[str, ModuleSummary] | None = None
                     ) -> tuple[list[list], list[str], bytes]:
    """Cache entries ``[rel, digest, summary JSON text, summary digest]`` of ``(path, rel,
    digest, is a target)``; the targets whose trees and facts this worker now holds for
    their rules as well (the first ``budget`` characters of them); and the summaries' JSON
    values again, ``{rel: value}`` marshalled, for the other workers (which decode them three
    times as fast as the JSON text, measured on the corpus; the batch keeps the text for the
    cache). ``objects`` gets each summary made (rel -> summary)."""
    made = []
    values: dict[str, dict] = {}
    kept = 0
    now: list[str] = []
    for p, rel, digest, target in items:
        path = Path(p)
        text = _quiet_read(path)
        summary = None
        if text is None:
            pass
        elif target and kept + len(text) <= budget:
            item, summary = _summarised(engine, path, text)
            if item is not None:
                held[p] = item
                now.append(p)
                kept += len(text)
        else:
            summary = engine.summary_for(path, text)
        data = summary.to_json() if summary is not None else None
        # (as text: the batch writes it into the cache file as it is, and sends it on)
        text = cache_mod.encode_json(data) if data is not None else None
        if objects is not None and summary is not None:
            objects[rel] = summary
        if data is not None:
            values[rel] = data
        made.append([rel, digest, text, cache_mod.summary_digest(text) if text is not None
                     and engine.use_cache else None])
    return made, now, marshal.dumps(values)


def _lint_items(engine: Engine, items: list[tuple[str, str, str]],
                held: dict[str, tuple] | None = None) -> list[tuple[str, str, list[Finding],
                                                                    list[InternalError]]]:
    """Rules on each ``(path, rel, digest)`` against the engine's index: per file, (rel, digest,
    findings, errors) -- a file whose rules failed is not cached."""
    out = []
    for p, rel, digest in items:
        engine.errors = []
        item = held.get(p) if held is not None else None
        kept = item is not None
        if item is None:
            text = engine._read_text(Path(p))
            if text is None or not mentions_jax(text):
                out.append((rel, digest, [], engine.errors))
                continue
            # The index already holds this file's summary: do not invalidate it per file.
            item = engine._prepare(Path(p), text, add_to_index=False)
        found = engine._run_rules(*item)
        if item[3] is not None and not kept:
            item[3].release()
        out.append((rel, digest, found, engine.errors))
    return out


# A batch hands the files to summarise out in chunks of about this many characters of source
# while it is still reading them, and then in smaller ones (half of what is left per worker,
# down to _LAST_CHUNK): a worker that finishes early takes the next one, so the workers finish
# together whatever each file costs (measured on the corpus: shares of equal size, made up
# front, ended 0.2 s apart).
_CHUNK = 500_000
_LAST_CHUNK = 150_000
_CHUNK_FILES = 256  # (and at most this many files: a message stays small)


class _Summarising:
    """The first step of a batch: the files whose summaries the cache lacks, summarised by the
    workers as the main process reads them. Workers start once there is enough to do; each
    has at most two chunks waiting while files are read, one after."""

    def __init__(self, engine: Engine, jobs: int) -> None:
        self.engine, self.jobs = engine, jobs
        self.workers: list[_Worker] = []
        self.queue: list[tuple[str, str, str, bool]] = []  # read, not handed out yet
        self.sizes: list[int] = []  # the characters of each queued file
        self.queued = 0  # their sum
        self.count = 0  # files added in all
        self.reading = True
        self.entries: dict[str, list] = {}  # rel -> its cache entry, from a worker
        self.made_by: dict[str, int] = {}  # rel -> the worker that summarised it
        self.held: dict[str, int] = {}  # path -> the worker holding its tree and facts

    def add(self, item: tuple[str, str, str, bool], size: int) -> None:
        self.queue.append(item)
        self.sizes.append(size)
        self.queued += size
        self.count += 1
        if not self.workers and self.count >= _MIN_FILES_PER_JOB * 2 and self.queued >= _CHUNK:
            self.workers = self.engine._start_workers(self.jobs)
        self._collect(block=False)

    def finish(self) -> None:
        """Every file is read: hand out the rest and wait for all the answers."""
        self.reading = False
        if not self.workers and self.count >= _MIN_FILES_PER_JOB * 2:
            self.workers = self.engine._start_workers(self.jobs)
        while self._collect(block=True):
            pass

    def _collect(self, block: bool) -> bool:
        """Hand out chunks to the workers with room for one, then take the answers that are
        there (``block``: wait for one); whether any answer is still awaited."""
        live = [w for w in self.workers if w.alive]
        room = 2 if self.reading else 1
        for w in sorted(live, key=lambda w: w.waiting):
            while w.waiting < room and self.queue:
                chunk = self._chunk(len(live))
                if not chunk:
                    break
                w.send(("summarise", chunk, FACTS_BUDGET))
                w.waiting += 1
        waiting = [i for i, w in enumerate(self.workers) if w.alive and w.waiting]
        if not waiting:
            return False
        for i, done in _answers(self.workers, waiting, block):
            w = self.workers[i]
            w.waiting -= 1
            if done is None:  # gone, or its chunk failed: what it lacks is summarised later
                continue
            made, kept, values = done
            w.summaries.append(values)
            for rel, *entry in made:
                self.entries[rel] = entry
                self.made_by[rel] = i
            self.held.update(dict.fromkeys(kept, i))
        return True

    def _chunk(self, workers: int) -> list[tuple[str, str, str, bool]]:
        if self.reading:
            if self.queued < _CHUNK:
                return []
            target = _CHUNK
        else:
            target = max(self.queued // (2 * workers), min(_LAST_CHUNK, self.queued // workers))
        n, size = 0, 0
        while n < len(self.queue) and (size < target or n == 0) and n < _CHUNK_FILES:
            size += self.sizes[n]
            n += 1
        chunk = self.queue[:n]
        del self.queue[:n], self.sizes[:n]
        self.queued -= size
        return chunk


@contextlib.contextmanager
def gc_paused():
    """Pause the cyclic garbage collector during a batch.

    A batch keeps the syntax trees of every file it lints alive until the rules have run; with
    the collector on, each full collection walks all of them again (measured: parsing 1,472
    files went from 7.0 s to 23.8 s). Nothing here makes garbage cycles worth collecting early.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass
class InternalError:
    path: str
    message: str


def stated_versions(config: Config) -> VersionMap:
    """The versions that judge each file of the project: its configuration's, else what its
    pins state (read again when a pin file changes: the language server)."""
    overrides = {k: v for k, v in (("jax", config.jax_version), ("flax", config.flax_version))
                 if v}
    return detect_map(config.root, overrides)


@dataclass
class Engine:
    config: Config
    versions: Versions | None = None  # the root's; a file is judged by ``version_map``'s
    use_cache: bool = True
    version_map: VersionMap | None = None
    index: ProjectIndex = field(default_factory=ProjectIndex)
    errors: list[InternalError] = field(default_factory=list)
    _indexed: bool = False
    _digests: dict[str, str] = field(default_factory=dict)  # rel -> content hash, this run
    _scope_of: dict[str, Versions] = field(default_factory=dict)  # summary path -> its pins

    def __post_init__(self) -> None:
        if self.versions is None and self.version_map is None:
            self.version_map = stated_versions(self.config)
        elif self.version_map is None:
            self.version_map = VersionMap.single(self.versions)  # type: ignore[arg-type]
        if self.versions is None:
            self.versions = self.version_map.default
        c = self.config
        self.wrappers = Wrappers(c.jit_wrappers, c.constraint_wrappers, c.rules_contexts,
                                 c.mesh_contexts)
        self.cache = cache_mod.Cache(
            self.root, f"{__version__}|{code_stamp()}|{SUMMARY_FORMAT}|{c.fingerprint}"
                       f"|{os.path.abspath(self.root)}"  # (summaries name files by full path)
                       f"|py{sys.version_info[0]}.{sys.version_info[1]}",  # (its grammar parses)
            self.use_cache)

    # ---- files of the project ---------------------------------------------------------------------
    @property
    def root(self) -> Path:
        return self.config.root

    def project_files(self) -> list[Path]:
        return self._walk(self.root)[0]

    def config_files(self) -> list[Path]:
        """The project's YAML files (rules tables, mesh axis names), in path order."""
        return self._walk(self.root)[1]

    def _walk(self, folder: Path) -> tuple[list[Path], list[Path]]:
        """(Python sources and notebooks, YAML files) under ``folder``, each in path order:
        one walk for both. A check walks a folder once, however many of the steps ask (the
        targets, the project's files, its YAML files): ``lint_paths`` keeps the walks while it
        runs (``_walks``); outside a run (a language server's index) every call walks."""
        walks = self.__dict__.get("_walks")
        key = os.path.realpath(folder) if walks is not None else None
        found = walks.get(key) if walks is not None else None
        if found is None:
            py: list[Path] = []
            yaml: list[Path] = []
            for p in self.iter_python_files(folder, (*PYTHON_SUFFIXES, *CONFIG_SUFFIXES)):
                (yaml if p.name.endswith(CONFIG_SUFFIXES) else py).append(p)
            found = sorted(py, key=path_order), sorted(yaml, key=path_order)
            if walks is not None:
                # (kept by the resolved folder, its files as first spelled: `check .` and the
                # project's root are one folder)
                walks[key] = found
        return found

    def iter_python_files(self, folder: Path, suffixes: tuple[str, ...] = PYTHON_SUFFIXES):
        """The files under ``folder`` whose names end with ``suffixes``, not excluded, outside
        the folders no project keeps code in (``_SKIP_DIRS``). Each file's resolved path is
        noted on the way for ``resolved``: its folder's, resolved once, and its name (a
        symbolic link is resolved itself), rather than a system call per part of every path."""
        memo = self.__dict__.setdefault("_resolved_paths", {})
        excluded = self.config.is_excluded if self.config.exclude else None
        for dirpath, dirnames, filenames in os.walk(folder):
            dirnames[:] = sorted(
                d for d in dirnames
                if d not in _SKIP_DIRS and not d.startswith(".")
                and not (excluded and excluded(Path(dirpath) / d))
            )
            real = None
            for name in filenames:
                if name.endswith(suffixes):
                    full = os.path.join(dirpath, name)
                    p = Path(full)
                    if excluded is None or not excluded(p):
                        if p not in memo:
                            if os.path.islink(full):
                                memo[p] = os.path.realpath(full)
                            else:
                                if real is None:
                                    real = os.path.realpath(dirpath)
                                memo[p] = os.path.join(real, name)
                        yield p

    def resolved(self, path: Path) -> str:
        """``str(path.resolve())``, once per path (each costs a system call per part), as
        the key that tells whether two spellings name one file (a string: hashing a Path
        costs more than making it)."""
        memo = self.__dict__.setdefault("_resolved_paths", {})
        found = memo.get(path)
        if found is None:
            found = memo[path] = os.path.realpath(path)
        return found

    def _relative(self, path: Path | str) -> Path | None:
        """``path`` relative to the project root (abspath, not resolve: no syscalls per file)."""
        rel = self._relative_text(path)
        return Path(rel) if rel is not None else None

    def _relative_text(self, path: Path | str) -> str | None:
        """:meth:`_relative` as a string (pathlib costs more than the rest of it)."""
        root = self.__dict__.get("_abs_root")
        if root is None:
            root = self.__dict__["_abs_root"] = os.path.abspath(self.root)
        full = os.path.abspath(path)
        if full == root or not full.startswith(root.rstrip(os.sep) + os.sep):
            return None
        return full[len(root.rstrip(os.sep)) + 1:]

    def module_name(self, path: Path | str) -> tuple[str, bool]:
        # (strings, not pathlib: asked for every file of the project on every run)
        rel = self._relative_text(path) or os.path.basename(os.path.abspath(path))
        parts = [p for p in os.path.splitext(rel)[0].split(os.sep) if p]
        if parts and parts[0] == "src" and len(parts) > 1:
            parts = parts[1:]
        is_package = bool(parts) and parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        return ".".join(parts) or "__main__", is_package

    # ---- the project index ------------------------------------------------------------------------
    def build_index(self, skip: set[str] | None = None, save: bool = True,
                    sources: bool = True,
                    configs: list[ModuleSummary | None] | None = None) -> ProjectIndex:
        """Summaries of every project file into the index (``save``: write the cache now; a
        batch run saves once, at its end; ``sources=False``: the caller added the Python
        files' summaries itself, only the config files are left; ``configs``: what
        ``_config_summaries`` gave, when the caller read them already)."""
        if self._indexed:
            return self.index
        self.cache.load()
        for path in self.project_files() if sources else ():
            if skip and self.resolved(path) in skip:
                continue
            text = _quiet_read(path)
            if text is None:
                continue
            summary = self.summary_for(path, text)
            if summary is not None:
                self.index.add(summary)
        for summary in self._config_summaries() if configs is None else configs:
            if summary is not None:
                self.index.add(summary)
        self._indexed = True
        if save:
            self.cache.save()
        return self.index

    def summary_for(self, path: Path, text: str) -> ModuleSummary | None:
        if not mentions_jax(text):
            return None
        key, digest, hit, cached = self._held_summary(path, text)
        if hit:
            return _summary(cached)
        module, is_package = self.module_name(path)
        try:
            tree = parse_module(text, str(path))
            facts = build_facts(str(path), module, tree, is_package, self.wrappers)
            summary = summarise(facts)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None  # (linted on its own, the file gets its SHL000)
        summary.path = os.path.abspath(path)  # (one name for the file however it was reached)
        facts.release()
        if self.use_cache:
            self.cache.put_summary(key, digest, summary)
        return summary

    def _summarised_here(self, path: Path, text: str,
                         held: dict[str, tuple]) -> ModuleSummary | None:
        """``summary_for`` a target of a batch whose summary no worker made (one file changed
        since the last run, say), its tree and facts kept in ``held`` for its rules, as a
        worker keeps them."""
        item, summary = _summarised(self, path, text)
        if item is not None:
            held[str(path)] = item
        if summary is not None and self.use_cache:
            self.cache.put_summary(self._rel(path), cache_mod.digest(text), summary)
        return summary

    def _held_summary(self, path: Path, text: str) -> tuple[str, str, bool, object]:
        """(cache key, content digest, whether the cache holds this content's summary, that
        summary); the digest counts in the project digest either way."""
        key = self._rel(path)
        digest = cache_mod.digest(text)
        self._digests[key] = digest
        hit, cached = self.cache.summary(key, digest)
        return key, digest, hit, cached

    def _config_summaries(self) -> list[ModuleSummary | None]:
        """The project's YAML files, each as ``config_summary_for`` reads it, in path order."""
        return [self.config_summary_for(path) for path in self.config_files()]

    def config_summary_for(self, path: Path, text: str | None = None) -> ModuleSummary | None:
        """A YAML file's rules tables (read as data: config_tables.py), as a summary of its own
        (``config:<path>``) in the index; None when it holds none. ``text``: unsaved text."""
        if text is None:
            text = _quiet_read(path)
        if text is None or not config_worth_reading(path, text):
            return None
        key, digest, hit, cached = self._held_summary(path, text)
        if hit:
            return _summary(cached)
        summary = None
        if path.name.endswith(".gin"):
            read = read_gin(text)
            if read is not None and any(read):
                gin, tables = read
                summary = ModuleSummary(f"config:{key}", os.path.abspath(path),
                                        config_tables=tables, gin=gin)
        else:
            tables = yaml_tables(text)
            summary = ModuleSummary(f"config:{key}", os.path.abspath(path),
                                    config_tables=tables) if tables else None
        if self.use_cache:
            self.cache.put_summary(key, digest, summary)
        return summary

    def update_file(self, path: Path, text: str) -> None:
        """The language server calls this on every edit: unsaved text counts."""
        module, _ = self.module_name(path)
        summary = self.summary_for(path, text)
        if summary is None:
            self.index.remove(module)
        else:
            self.index.add(summary)

    def update_config_file(self, path: Path, text: str | None = None) -> bool:
        """A YAML file changed (``text``: its text; None: read it, gone if unreadable): its
        tables and mesh axis names replace what the index had. Whether the index changed."""
        key = f"config:{self._rel(path)}"
        before = self.index.summaries.get(key)
        if text is None:
            text = _quiet_read(path)
        summary = self.config_summary_for(path, text) if text is not None else None
        if summary is None:
            self.index.remove(key)
        else:
            self.index.add(summary)
        return self.index.summaries.get(key) != before

    def _rel(self, path: Path) -> str:
        rel = self._relative(path)
        return rel.as_posix() if rel is not None else str(path)

    # ---- cache ------------------------------------------------------------------------------------
    # ---- linting ----------------------------------------------------------------------------------
    def selected_rules(self, path: str | None = None) -> list[type[Rule]]:
        return [r for r in all_rules()
                if self.config.is_selected(r.code, r.enabled_by_default, path, bool(r.preview))]

    def lint_text(self, path: Path | str, text: str, parser: IncrementalParser | None = None,
                  source: SourceText | None = None) -> list[Finding]:
        """Findings for one file's text (which may differ from the file on disk).

        ``parser`` parsed the previous versions of this file (the language server keeps one per
        open file): only the statements an edit touched are parsed again. ``source``: the
        caller's ``SourceText`` of ``text`` (its lines are split once for both).
        """
        path = Path(path)
        if not mentions_jax(text):
            return []
        self.build_index()
        prepared = self._prepare(path, text, parser=parser, source=source)
        return self._run_rules(*prepared)

    def _prepare(self, path: Path, text: str, add_to_index: bool = True,
                 parser: IncrementalParser | None = None, source: SourceText | None = None):
        """Parse and build facts; the file's summary goes into the index (unsaved text counts)."""
        spath = str(path)
        if source is None or source.text is not text:
            source = SourceText(spath, text)
        try:
            if parser is None:
                tree = parse_module(text, spath)
            else:
                try:
                    tree = parser.parse(text, spath)
                finally:
                    if parser.last_lines is not None and parser.last_lines[0] is text:
                        source.take_lines(parser.last_lines[1])
        except SyntaxError as exc:
            return spath, text, source, None, self._syntax_error(spath, source, exc)
        except ValueError as exc:  # null bytes
            return spath, text, source, None, Finding(
                "SHL000", "syntax-error", "error", f"cannot parse: {exc}", spath, Span(1, 0, 1, 0))
        except (RecursionError, MemoryError):  # Python's own parser gives up: it cannot run either
            return spath, text, source, None, Finding(
                "SHL000", "syntax-error", "error",
                "cannot parse: the code nests too deeply for Python's parser", spath,
                Span(1, 0, 1, 0))
        try:
            return self._prepared(path, spath, text, source, tree, add_to_index, parser)
        except RecursionError:
            if parser is not None:
                parser.memo = None
            return spath, text, source, None, _too_deep(spath)

    def _prepared(self, path: Path, spath: str, text: str, source: SourceText, tree,
                  add_to_index: bool, parser: IncrementalParser | None):
        module, is_package = self.module_name(path)
        kept = None
        if parser is not None:
            kept, parser.kept = parser.kept, None
            how = (module, is_package, self.wrappers)
            if kept is not None and (not parser.same_tree or kept[0] != how
                                     or self.index.summaries.get(module) is not kept[2]):
                kept = None
        if kept is not None:
            # The same tree (an edit of a comment or of blank space): the same facts, and the
            # same summary, which the index holds. The rules run again: a few read the text.
            facts, summary = kept[1], kept[2]
        else:
            if parser is not None:  # the next version of an open file: replay what did not change
                previous = parser.memo if isinstance(parser.memo, FactsMemo) else None
                parser.memo = None  # a build that fails leaves nothing half-made to replay
                facts, parser.memo = rebuild_facts(spath, module, tree, is_package,
                                                   self.wrappers, previous)
                if facts.reuse is not None:  # (where the edit is: summary.py reuses the rest)
                    facts.reuse.edited = parser.changed  # type: ignore[attr-defined]
            else:
                facts = build_facts(spath, module, tree, is_package, self.wrappers)
            if not add_to_index:
                return spath, text, source, facts, None
            summary = summarise(facts)
            summary.path = os.path.abspath(spath)
            self.index.add(summary)
        if parser is not None:  # (an equal summary leaves the index the one it held)
            parser.kept = ((module, is_package, self.wrappers), facts,
                           self.index.summaries.get(module))
        key = self._rel(path)
        digest = cache_mod.digest(text)
        self._digests[key] = digest
        if self.use_cache and not self.cache.has_summary(key, digest):
            self.cache.put_summary(key, digest, summary)
        return spath, text, source, facts, None

    def _folder_needs(self, versions: Versions):
        """What the code of the files ``versions`` judges (one folder's pins, the same object
        for each) needs at least: against an exact pin or a lock, which it may show stale
        (semantics/catalog/runnable.py). Worked out once per index state and folder."""
        if not any(s.startswith(STALE_SOURCES) for s in versions.source.values()):
            return None
        memo = self.index._memo
        key = ("folder_needs", id(versions))
        found = memo.get(key)
        if found is None:
            where = self._scope_of
            members = []
            for module, s in self.index.summaries.items():
                scope = where.get(s.path)
                if scope is None:  # (relative by abspath: no syscalls per summary)
                    scope = where[s.path] = self.version_map.for_relative(  # type: ignore[union-attr]
                        self._rel(Path(s.path)))
                if scope is versions:
                    members.append(module)
            found = memo[key] = oldest_in(self.index, members)
        return found

    def _run_rules(self, spath: str, text: str, source: SourceText, facts, error) -> list[Finding]:
        if facts is None:
            return self._filter([error], text, spath)
        versions = self.version_map.for_path(spath, self.root)  # type: ignore[union-attr]
        # (narrowed to the releases the file's imports, and the project modules they load, run
        # at: semantics/catalog/runnable.py)
        versions = runnable(facts.tree, versions, inherited(
            self.index, loads(facts.tree, facts.imports), facts.module), newer_calls(facts),
            self._folder_needs(versions))
        ctx = RuleContext(facts, self.index, versions, source, preview=self.config.preview,
                          test_code=self.config.is_test_file(spath))
        findings: list[Finding] = []
        for cls in self.selected_rules(spath):
            if not cls.applies(versions) or not cls.relevant(facts, self.index):  # type: ignore[arg-type]
                continue
            try:
                findings.extend(cls(ctx).check())
            except RecursionError:
                return self._filter([_too_deep(spath)], text, spath)
            except Exception:  # a broken rule must not take the other rules down
                self.errors.append(InternalError(
                    spath, f"rule {cls.code} failed: {traceback.format_exc(limit=-3)}"))
        kept = self._filter(findings, text, spath, facts.tree)
        for f in kept:
            f.symbol = facts.symbol_at(f.span.line)
        if spath.endswith(".ipynb"):
            self._map_cells(Path(spath), kept)
        return kept

    def _map_cells(self, path: Path, findings: list[Finding]) -> None:
        from shardlint.errors import ShardlintError
        from shardlint.notebook import load

        try:
            nb = load(path)
        except ShardlintError:
            return
        for f in findings:
            cell, line = nb.locate(f.span.line)
            f.cell = (cell, f.span.line - line)

    def _newer_grammar(self) -> str | None:
        """The project's ``requires-python`` when the running Python does not satisfy it (a file
        may then use syntax this interpreter cannot parse: PEP 695 aliases, PEP 701 f-strings)."""
        found = self.__dict__.get("_requires_python", False)
        if found is False:
            found = None
            try:
                import tomllib as toml
            except ImportError:  # pragma: no cover
                import tomli as toml  # type: ignore[no-redef]
            try:
                data = toml.loads((self.root / "pyproject.toml").read_text(encoding="utf-8"))
                spec = data.get("project", {}).get("requires-python")
                if isinstance(spec, str):
                    from packaging.specifiers import InvalidSpecifier, SpecifierSet

                    running = ".".join(map(str, sys.version_info[:3]))
                    try:
                        if running not in SpecifierSet(spec):
                            found = spec
                    except InvalidSpecifier:
                        pass
            except (OSError, ValueError, AttributeError):
                pass
            self.__dict__["_requires_python"] = found
        return found

    def _syntax_error(self, path: str, source: SourceText, exc: SyntaxError) -> Finding:
        line = exc.lineno or 1
        # SyntaxError.offset is 1-based in characters; findings carry UTF-8 columns.
        char_col = max((exc.offset or 1) - 1, 0)
        text = source.line_text(line)
        col = len(text[:char_col].encode("utf-8"))
        end_line = exc.end_lineno or line
        end_char = max((exc.end_offset or (char_col + 2)) - 1, char_col)
        end_col = len(source.line_text(end_line)[:end_char].encode("utf-8"))
        if end_line == line and end_col <= col:
            end_col = col
        running = ".".join(map(str, sys.version_info[:2]))
        needs = newer_syntax(source.text, exc)
        if needs is not None:  # valid code for a newer Python: not a broken file
            return Finding(
                "SHL000", "syntax-error", "info",
                f"needs Python >= {needs.python} ({needs.feature}); shardlint runs on {running} "
                f"and cannot analyse this file", path, Span(line, col, end_line, end_col))
        newer = self._newer_grammar()
        if newer is not None:
            # Likely valid for the project's own Python: say so once, not an error per file.
            return Finding(
                "SHL000", "syntax-error", "info",
                f"cannot parse with Python {running} ({exc.msg}); the project requires Python "
                f"{newer}: run shardlint with an interpreter that satisfies it (or select one in "
                f"your editor) to check this file", path, Span(line, col, end_line, end_col))
        return Finding("SHL000", "syntax-error", "error", f"cannot parse: {exc.msg}", path,
                       Span(line, col, end_line, end_col))

    def _filter(self, findings: list[Finding], text: str, path: str,
                tree: ast.Module | None = None) -> list[Finding]:
        if not findings:
            return findings  # most files: no need to look for suppression comments
        # (only the suppressions on the findings' lines, and file-wide ones, are looked for;
        # with the tree, only the statements that hold them are tokenized)
        sup = parse_suppressions(text, tree, {x for f in findings
                                              for x in (f.span.line, f.span.end_line)})
        out = []
        for f in findings:
            if f.code != "SHL000" and not self.config.is_selected(f.code, True, path):
                continue
            if sup.suppresses(f.code, f.span.line, f.span.end_line):
                continue
            f.severity = self.config.severity_of(f.code, f.severity)
            out.append(f)
        out.sort(key=Finding.sort_key)
        return out

    def lint_paths(self, paths: list[Path], jobs: int = 1) -> list[Finding]:
        """Lint files: their summaries join the index first, so it is computed once for all.

        With ``jobs > 1`` and enough files, parsing and rules run in a process pool; the index
        is still computed once, in this process, and handed to the workers.
        """
        try:
            targets = self.expand(paths)
            with gc_paused():
                if jobs > 1 and len(targets) >= _MIN_FILES_PER_JOB * 2:
                    findings = self._lint_parallel(targets, jobs)
                else:
                    findings = self._lint_serial(targets)
        finally:
            self.__dict__.pop("_walks", None)  # (the next run walks again)
        findings.sort(key=Finding.sort_key)
        # A project that needs a newer Python than this one: its files' parse failures are one
        # fact about the run, reported once.
        grammar = [f for f in findings if f.code == "SHL000" and f.severity == "info"
                   and f.message.startswith(_NEWER_GRAMMAR)]
        if len(grammar) > 1:
            first = grammar[0]
            first.message += f" ({len(grammar) - 1} more files fail the same way)"
            findings = [f for f in findings if f not in grammar[1:]]
        return findings

    def _read_text(self, path: Path) -> str | None:
        if path.suffix == ".ipynb":
            from shardlint.errors import ShardlintError
            from shardlint.notebook import load

            try:
                return load(path).text
            except ShardlintError as exc:
                # (the error names the file itself; the report puts the path in front)
                self.errors.append(InternalError(str(path), str(exc).removeprefix(f"{path}: ")))
                return None
        try:
            data = path.read_bytes()
        except OSError as exc:
            self.errors.append(InternalError(str(path), f"cannot read: {exc.strerror}"))
            return None
        try:
            return decode_source(data)
        except UnicodeDecodeError as exc:
            self.errors.append(InternalError(
                str(path), f"not UTF-8 text (nor in the encoding its coding line declares): "
                f"{exc.reason} at byte {exc.start}"))
            return None
        except SyntaxError as exc:  # a coding line naming an encoding Python does not know
            self.errors.append(InternalError(str(path), f"cannot decode: {exc.msg}"))
            return None

    def _lint_serial(self, targets: list[Path]) -> list[Finding]:
        self.cache.load()
        texts: dict[Path, str] = {}
        prepared: dict[Path, tuple] = {}
        kept = 0  # characters of source whose trees and facts are held for the rules
        for path in targets:
            text = self._read_text(path)
            if text is None or not mentions_jax(text):
                continue
            texts[path] = text
            rel, digest = self._rel(path), cache_mod.digest(text)
            hit, cached = self.cache.summary(rel, digest)
            if hit:  # unchanged since the last run: its summary is enough for the index
                self._digests[rel] = digest
                if cached is not None:
                    self.index.add(_summary(cached))  # type: ignore[arg-type]
            elif kept + len(text) <= FACTS_BUDGET:
                prepared[path] = self._prepare(path, text)
                kept += len(text)
            else:
                # Past the budget: only the summary now, the file is parsed again for its rules
                # (memory stays bounded on a large project, at the price of a second parse).
                summary = self.summary_for(path, text)
                if summary is not None:
                    self.index.add(summary)
        self.build_index(skip={self.resolved(p) for p in texts}, save=False)
        project = self._project_digest()
        self._closures_kept()
        findings: list[Finding] = []
        for path, text in texts.items():
            rel = self._rel(path)
            digest = self._digests.get(rel) or cache_mod.digest(text)
            reused = self.cache.get_findings(rel, digest, project, str(path)) \
                if self.use_cache else None
            if reused is not None:
                findings.extend(reused)
                continue
            item = prepared.pop(path, None) or self._prepare(path, text, add_to_index=False)
            errors = len(self.errors)
            found = self._run_rules(*item)
            if item[3] is not None:
                item[3].release()
            if len(self.errors) == errors:  # a file whose rules failed is not cached
                self.cache.put_findings(rel, digest, project, found)
            findings.extend(found)
        self.cache.save()
        return findings

    def _closures_kept(self) -> None:
        """Let the index take its closures (what each symbol needs, the contexts of calls)
        from the cache when a run over the same summaries kept them, and keep them there when
        it computes them: a file edited where its summary does not see (a comment) costs the
        run its own rules, not the whole project's closures again."""
        if not self.use_cache:
            return
        key = self.cache.summaries_key(self._digests)
        if key is None:
            return
        cache = self.cache
        self.index.recall_closures = lambda: cache.closures(key)
        self.index.keep_closures = lambda closures: cache.put_closures(key, closures)

    def _project_digest(self) -> str:
        """The token this run's findings are kept under: what every file's findings may depend
        on is the whole project (every file's content, as far as its summary says: an edit
        that leaves a file's summary as it was, or moves only its positions -- a line added --
        keeps the other files' findings, unless they point into the moved file, which
        ``cache.get_findings`` checks), the configuration, the versions and the rules (see
        ``Cache.project_token``). Read the files and put their summaries first."""
        settings = hashlib.sha1(repr((
            self.cache.key, self.version_map, self.config.select, self.config.ignore,
            self.config.extend_select, self.config.preview, self.config.per_file_ignores,
            self.config.test_files,
            self.config.test_ignore, self.config.severity
        )).encode()).hexdigest()
        return self.cache.project_token(settings, self._digests)

    def _lint_parallel(self, targets: list[Path], jobs: int) -> list[Finding]:
        """The batch on ``jobs`` worker processes, with the same cache as the serial path, each
        file parsed once: the workers summarise the files whose summaries the cache lacks, as
        this process reads them, and keep their trees and facts (up to FACTS_BUDGET each); each
        then builds the index from all summaries (its own, the others' forwarded, the rest from
        here) and runs the rules on the files it holds and on a share of the others
        whose findings the cache does not hold for this project digest. This process decodes
        no summary unless it lints files itself; a warm run starts no process at all."""
        self.cache.load()
        # 1. Summaries of every project file and target the cache does not hold, in parallel.
        wanted = {self.resolved(p): p for p in [*self.project_files(), *targets]}
        is_target = set(targets)
        texts: dict[Path, tuple[str, str]] = {}  # target -> (rel, digest)
        sources: dict[Path, str] = {}  # every file read, read once
        names: dict[Path, tuple[str, str, str]] = {}  # each of them -> (rel, digest, module)
        batch = _Summarising(self, jobs)
        try:
            for path in wanted.values():
                text = self._read_text(path) if path in is_target else _quiet_read(path)
                if text is None:
                    continue
                rel, digest = self._rel(path), cache_mod.digest(text)
                held = self.cache.has_summary(rel, digest)  # (then it mentions jax: it did)
                if not held and not mentions_jax(text):
                    continue
                sources[path] = text
                self._digests[rel] = digest
                # (the module name is worked out here for the files the workers summarise, while
                # they do; for the others only if the index is needed)
                names[path] = (rel, digest, "" if held else self.module_name(path)[0])
                if path in is_target:
                    texts[path] = (rel, digest)
                if not held:
                    batch.add((str(path), rel, digest, path in is_target), len(text))
            if not batch.count and self.use_cache:
                # Every summary is in the cache: when every target's findings are too, for this
                # project digest, that is the answer, without decoding a summary or an index.
                for path in self.config_files():
                    text = _quiet_read(path)  # (their digests count in the project's)
                    if text is not None and config_worth_reading(path, text):
                        self._digests[self._rel(path)] = cache_mod.digest(text)
                project = self._project_digest()
                cached = [self.cache.get_findings(rel, digest, project, str(path))
                          for path, (rel, digest) in texts.items()]
                if all(found is not None for found in cached):
                    self.cache.save()
                    return [f for found in cached for f in found]  # type: ignore[union-attr]
            configs = self._config_summaries()  # (read here while the workers parse)
            batch.finish()
            return self._lint_batch(batch, sources, names, texts, configs, jobs)
        finally:
            for w in batch.workers:  # (all told first: they exit together)
                w.stop()
            for w in batch.workers:
                w.join(wait=False)

    def _lint_batch(self, batch: _Summarising, sources: dict[Path, str],
                    names: dict[Path, tuple[str, str, str]], texts: dict[Path, tuple[str, str]],
                    configs: list[ModuleSummary | None], jobs: int) -> list[Finding]:
        """The second step of ``_lint_parallel``: the index, then the rules (``names``: each
        source's rel, content digest and module)."""
        workers, held, made_by = batch.workers, batch.held, batch.made_by
        size = {str(p): len(t) for p, t in sources.items()}
        # What the index holds, in its order: module -> (rel, summary or its JSON). A file
        # whose summary no worker gave (one gone, or failing) is summarised here.
        held_summaries: dict[str, tuple[str, object]] = {}
        here: dict[str, tuple] = {}  # target -> its tree and facts, when summarised here
        kept = 0  # (the characters of their sources, within FACTS_BUDGET)
        for path, (rel, digest, module) in names.items():
            entry = batch.entries.get(rel)
            if entry is not None:  # (put in the files' order: the same cache whoever made what)
                self.cache.put_entry(rel, entry)  # (in memory even with no cache)
            hit, cached = self.cache.summary(rel, digest)
            if hit:
                value = cached
            elif path in texts and kept + len(sources[path]) <= FACTS_BUDGET:
                value = self._summarised_here(path, sources[path], here)
                kept += len(sources[path])
            else:
                value = self.summary_for(path, sources[path])
            if value is not None:
                held_summaries[module or self.module_name(path)[0]] = (rel, value)
        for summary in configs:
            if summary is not None:
                held_summaries[summary.module] = (summary.module, summary)

        def index_here(workers: bool = False) -> None:
            """This process's index (to lint files here, or to start workers with it); else
            it stays unbuilt, and ``build_index`` makes it from the cache when asked. Its
            closures (what each symbol needs, the contexts of calls) are computed here for
            workers to start with; for files linted here, when a rule first asks."""
            if held_summaries:
                for _, value in held_summaries.values():
                    self.index.add(_summary(value))  # type: ignore[arg-type]
                held_summaries.clear()
                self._indexed = True
                self._closures_kept()
            if workers:
                self.index._ensure()

        # 2. Rules against the finished index, for the files the cache holds no findings of.
        project = self._project_digest() if self.use_cache else ""
        findings: list[Finding] = []
        todo: list[tuple[str, str, str]] = []
        for path, (rel, digest) in texts.items():
            reused = self.cache.get_findings(rel, digest, project, str(path)) \
                if self.use_cache else None
            if reused is not None:
                findings.extend(reused)
            else:
                todo.append((str(path), rel, digest))
        plan = None
        if todo and not workers and len(todo) >= _MIN_FILES_PER_JOB * 2:
            index_here(workers=True)  # (once here: the workers start with it)
            workers = batch.workers = self._start_workers(jobs)
        elif todo and workers:
            # What a worker of the first step needs to build this index: its order, the other
            # workers' summaries (forwarded as received, marshalled), the rest as JSON
            # (summaries from the cache, the config files', those made here).
            order = [(m, rel) for m, (rel, _) in held_summaries.items()]
            extra = {rel: value.to_json() if isinstance(value, ModuleSummary) else value
                     for rel, value in held_summaries.values() if rel not in made_by}
            plan = order, extra
        live = [i for i, w in enumerate(workers) if w.alive] if todo else []
        if live:
            # A file held by a worker is linted there; the others go where the load is least
            # (a file still to parse costs about three times one whose facts are held).
            load = dict.fromkeys(live, 0)
            parts: dict[int, list[tuple[str, str, str]]] = {i: [] for i in live}
            rest = []
            for item in todo:
                owner = held.get(item[0])
                if owner in parts:
                    parts[owner].append(item)
                    load[owner] += size.get(item[0], 0)
                else:
                    rest.append(item)
            for item in sorted(rest, key=lambda it: -size.get(it[0], 0)):
                i = min(live, key=lambda k: (load[k], k))
                parts[i].append(item)
                load[i] += 3 * size.get(item[0], 0)
            # (the first worker sends back the closures it computes over the whole index, for
            # the cache: a later run over the same summaries -- a comment edited -- takes them
            # back instead of computing them again)
            for i in live:
                workers[i].send(("lint", None if plan is None else (
                    plan[0], [values for k, w in enumerate(workers) if k != i
                              for values in w.summaries], plan[1]), parts[i],
                    self.use_cache and i == live[0]))
            self.cache.save_summaries()  # (while the rules run)
            results = self._collect_rules(workers, live, parts, index_here)
        else:  # a few files: here, not worth starting processes for
            if todo:
                index_here()
            results = _lint_items(self, todo, here)
        for rel, digest, found, errors in results:
            findings.extend(found)
            self.errors.extend(errors)
            if not errors:
                self.cache.put_findings(rel, digest, project, found)
        self.cache.save()
        return findings

    def _collect_rules(self, workers: list[_Worker], live: list[int],
                       parts: dict[int, list[tuple[str, str, str]]],
                       index_here: Callable[[], None]) -> list:
        """The workers' findings, as each finishes its share (a share whose worker is gone is
        linted here)."""
        results: list = []
        linting = set(live)
        for i in sorted(linting):
            if not workers[i].alive:  # (its share could not be sent)
                linting.discard(i)
                index_here()
                results.extend(_lint_items(self, parts[i]))
        while linting:
            for i, got in _answers(workers, sorted(linting)):
                linting.discard(i)
                if got is None:  # the worker is gone: its share is linted here
                    index_here()
                    got = _lint_items(self, parts[i])
                else:
                    got, closures = got  # type: ignore[misc]
                    key = self.cache.summaries_key(self._digests) if closures else None
                    if key is not None:
                        self.cache.put_closures(key, closures)
                results.extend(got)
        return results

    def _start_workers(self, jobs: int) -> list[_Worker]:
        import multiprocessing

        # fork is cheapest, but unsafe once threads exist (a language server, a test runner).
        methods = multiprocessing.get_all_start_methods()
        method = "fork" if "fork" in methods and threading.active_count() == 1 else \
            "forkserver" if "forkserver" in methods else "spawn"
        context = multiprocessing.get_context(method)
        workers: list[_Worker] = []
        if self.__dict__.get("_no_workers"):
            return workers
        try:
            for _ in range(jobs):
                workers.append(_Worker(context, self))
        except OSError as exc:  # (no processes left, no semaphores): this process does it all
            print(f"shardlint: cannot start worker processes ({exc}); linting in one process",
                  file=sys.stderr)
            for w in workers:
                w.close()
            self.__dict__["_no_workers"] = True  # (not tried again in this run)
            return []
        return workers

    def expand(self, paths: list[Path]) -> list[Path]:
        """The files under ``paths`` (folders walked), each once. An already expanded list
        comes back as it is (``check`` expands, then hands the list to ``lint_paths``)."""
        if paths is self.__dict__.get("_expanded"):
            return paths
        self.__dict__.setdefault("_walks", {})  # (until the end of lint_paths: see _walk)
        out = self._expand(paths)
        self.__dict__["_expanded"] = out
        return out

    def _expand(self, paths: list[Path]) -> list[Path]:
        out: list[Path] = []
        seen: set[str] = set()
        for p in paths:
            if not p.is_dir() and p.name.endswith(CONFIG_SUFFIXES):
                continue  # (a YAML or gin file named: read as configuration, never as Python)
            files = self._walk(p)[0] if p.is_dir() else [p]
            for f in files:
                key = self.resolved(f)
                if key not in seen:
                    seen.add(key)
                    out.append(f)
        return out


# Characters of source whose parsed trees and facts a serial run holds between building the index
# and running the rules (the rest are parsed a second time). Measured on the benchmark corpus
# (27 M characters), cold `check --jobs 1` with its cache: all held 9.5 s / 915 MiB peak; 16 M
# 10.8 s / 658 MiB; 12 M 11.9 s / 515 MiB; 8 M 12.4 s / 397 MiB. In a pool (the default on more
# than one core) each worker has this budget for the files it summarises, and keeps them until it
# exits.
FACTS_BUDGET = 12_000_000


# How the SHL000 infos of code for a newer Python begin (those of one run are reported once).
_NEWER_GRAMMAR = ("needs Python >= ", "cannot parse with Python ")


def _too_deep(path: str) -> Finding:
    """The one finding of a file that parses but nests deeper than the analysis follows (its
    recursion would pass Python's limit: a generated sum of thousands of terms, say). Not an
    error in the user's code, and nothing else is reported for the file."""
    return Finding("SHL000", "syntax-error", "info",
                   "not analysed: the code nests deeper than shardlint follows (Python's "
                   "recursion limit); no other rule ran on this file", path, Span(1, 0, 1, 0))
