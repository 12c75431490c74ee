"""The engines of the workspace's projects, one per configuration root.

Only the server's single worker thread calls an ``Analyzer``: engines and their ProjectIndex are
not thread-safe, and one thread also orders the work (an edit's analysis never overtakes the
previous one's index update).

``generation`` grows whenever something other documents' findings may depend on changes: a
module summary in an index, a configuration, an index rebuild. A result computed at an older
generation is stale.

``trusted`` (the client declared the workspace trusted) decides where the engines' caches live:
``.shardlint_cache/`` of each project when trusted, else a folder of the user's cache directory
(``cache.workspace_cache_dir``), so that a session in an untrusted folder writes nothing into it.
"""

from __future__ import annotations

import gc
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from shardlint import cache as cache_mod
from shardlint.config import Config, find_root, load
from shardlint.engine import CONFIG_SUFFIXES, Engine, gc_paused, mentions_jax, stated_versions
from shardlint.errors import ConfigError
from shardlint.findings import suppress
from shardlint.incremental import IncrementalParser
from shardlint.rules.base import Finding
from shardlint.semantics.catalog.versions import is_pin_file
from shardlint.source import SourceText

_OVERRIDE_KEYS = ("select", "ignore", "extend_select", "severity")


@dataclass
class Outcome:
    findings: list[Finding]
    root: Path | None
    generation: int
    index_changed: bool = False
    errors: list[str] = field(default_factory=list)
    source: SourceText | None = None  # the text linted, its lines split once for the engine
    # and the conversion of positions
    # The statement that holds each line of a finding or of a comment that may be a
    # suppression (suppress.statement_spans), for code actions and hovers.
    spans: dict[int, tuple[int, int] | None] | None = None


def _pin_names(folder: Path) -> tuple[str, ...]:
    """The files of ``folder`` that state versions (``versions.is_pin_file``), sorted."""
    try:
        names = os.listdir(folder)
    except OSError:
        return ()
    low = folder.name.lower()
    return tuple(sorted(n for n in names if is_pin_file(n, low)))


def _stat(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _compatible(old: Config, new: Config) -> bool:
    """Only rule selection or severities differ: the engine and its index stay valid."""
    return (old.root == new.root and old.fingerprint == new.fingerprint
            and old.exclude == new.exclude and old.jax_version == new.jax_version
            and old.flax_version == new.flax_version)


class Analyzer:
    def __init__(self) -> None:
        self.overrides: dict = {}
        self.trusted = False  # until the client says so: nothing is written into the workspace
        self.generation = 0
        self.messages: list[tuple[str, str]] = []  # (level, text) for the client, drained by the session
        self._configs: dict[Path, Config] = {}  # by folder of a linted file
        self._good: dict[Path, Config] = {}  # last configuration that loaded, by folder
        self._engines: dict[Path, Engine] = {}  # by configuration root
        self._indexed: set[Path] = set()
        self._open: dict[Path, str] = {}  # unsaved text of open files: it outranks the disk
        # pyproject.toml and the other files that state versions (requirements*.txt, setup.py,
        # lock files ...) of the folders above an open file -> (mtime, size) when read; and the
        # pin files each of those folders held then (one made or removed changes the versions)
        self._stamps: dict[Path, tuple | None] = {}
        self._pin_names: dict[Path, tuple[str, ...]] = {}
        self._parsers: dict[Path, IncrementalParser] = {}  # open files: reparse only what changed
        self._young = 0  # young-generation collections by collect_garbage

    # ---- configuration ----------------------------------------------------------------------------
    def config_for(self, path: Path) -> Config:
        folder = path.parent
        cfg = self._configs.get(folder)
        if cfg is not None:
            return cfg
        self._record(folder)  # before reading: a change in between is seen by the next check
        try:
            cfg = load(folder)
            self._good[folder] = cfg
        except ConfigError as exc:
            self.messages.append(("error", f"shardlint: {exc} (using the last valid settings)"))
            cfg = self._good.get(folder) or Config(root=find_root(folder))
        cfg = self._with_overrides(cfg)
        self._configs[folder] = cfg
        return cfg

    def _with_overrides(self, cfg: Config) -> Config:
        if not self.overrides:
            return cfg
        try:
            return cfg.with_overrides(**self.overrides)
        except ConfigError as exc:
            self.messages.append(("error", f"shardlint: client settings: {exc}"))
            return cfg

    def set_overrides(self, overrides: dict) -> bool:
        """Client settings (select/ignore/extend_select/severity) over pyproject's."""
        clean = {k: v for k, v in overrides.items() if k in _OVERRIDE_KEYS and v is not None}
        if clean == self.overrides:
            return False
        self.overrides = clean
        return self.reload_config(force=True)

    def set_trusted(self, trusted: bool) -> None:
        """The client's workspace trust: where the caches go from now on (it changes no finding)."""
        self.trusted = bool(trusted)
        for engine in self._engines.values():
            self._place_cache(engine)

    def _place_cache(self, engine: Engine) -> None:
        cache = engine.cache
        cache.folder, cache.enabled = None, engine.use_cache
        if not self.trusted:
            try:
                cache.folder = cache_mod.workspace_cache_dir(engine.root)
            except (RuntimeError, OSError, ValueError):  # no home directory: no cache at all
                cache.enabled = False

    def reload_config(self, force: bool = False) -> bool:
        """Re-read every configuration (a pyproject.toml changed) and the versions the pins
        state (a requirements file, setup.py, a lock file changed); True when any differs."""
        old_configs = dict(self._configs)
        self._configs.clear()
        self._stamps.clear()
        self._pin_names.clear()
        changed = force
        for folder, old in old_configs.items():
            if self.config_for(folder / "__init__.py") != old:
                changed = True
        for root, engine in list(self._engines.items()):
            new = self.config_for(root / "__init__.py")
            if new == engine.config:
                continue
            changed = True
            if _compatible(engine.config, new):
                engine.config = new
            else:  # wrappers, excludes or versions changed: summaries must be recomputed
                del self._engines[root]
                self._indexed.discard(root)
        for root, engine in list(self._engines.items()):
            if engine.version_map != stated_versions(engine.config):
                # (the pins state other versions: what the findings say, and the summaries
                # of the files whose imports narrow them, are made again)
                del self._engines[root]
                self._indexed.discard(root)
                changed = True
        if changed:
            self.generation += 1
        return changed

    def configs_changed_on_disk(self) -> bool:
        """Whether any pyproject.toml that configures (or could configure) an open file, or any
        file stating the versions of a folder above one, changed (or was made or removed) since
        it was read: for clients that cannot watch files."""
        return any(_stat(p) != st for p, st in list(self._stamps.items())) or \
            any(_pin_names(d) != names for d, names in list(self._pin_names.items()))

    def _record(self, folder: Path) -> None:
        top = find_root(folder)
        for d in (folder, *folder.parents):
            p = d / "pyproject.toml"
            self._stamps[p] = _stat(p)
            names = self._pin_names[d] = _pin_names(d)
            for name in names:
                self._stamps[d / name] = _stat(d / name)
            if d == top:
                break

    # ---- engines and their indexes ----------------------------------------------------------------
    def engine_for(self, path: Path) -> Engine:
        cfg = self.config_for(path)
        engine = self._engines.get(cfg.root)
        if engine is None:
            engine = Engine(cfg)
            self._place_cache(engine)  # before anything loads or saves it
            self._engines[cfg.root] = engine
        elif engine.config != cfg and _compatible(engine.config, cfg):
            engine.config = cfg
        return engine

    def root_needing_index(self, path: Path) -> Path | None:
        root = self.engine_for(path).root
        return None if root in self._indexed else root

    def build_index(self, path: Path) -> tuple[Path, int, float]:
        """Index the project of ``path`` (cached on disk by content hash); open files' text wins."""
        engine = self.engine_for(path)
        t0 = time.perf_counter()
        if engine.root not in self._indexed:
            engine.build_index()
            for p, text in self._open.items():
                if self._engines.get(self.config_for(p).root) is engine and self._indexable(engine, p):
                    engine.update_file(p, text)
            self._indexed.add(engine.root)
            self.generation += 1
            # The index lives as long as the server: keep the collector from walking it again.
            gc.collect()
            gc.freeze()
        return engine.root, len(engine.index.summaries), time.perf_counter() - t0

    @staticmethod
    def _indexable(engine: Engine, path: Path) -> bool:
        return path.suffix in (".py", ".pyi") and not engine.config.is_excluded(path)

    # ---- linting ----------------------------------------------------------------------------------
    def lint(self, path: Path, text: str) -> Outcome:
        engine = self.engine_for(path)
        if engine.root not in self._indexed:
            self.build_index(path)
        if engine.config.is_excluded(path):
            return Outcome([], engine.root, self.generation)
        self._open[path] = text
        source = SourceText(str(path), text)
        module, _ = engine.module_name(path)
        before = engine.index.summaries.get(module)
        # No cyclic collection during an analysis: on a 2,000-line file a full collection in the
        # middle of one cost up to 540 ms (p95 460 ms with it, 120 ms without). Its cycles are
        # collected between analyses (``collect_garbage``, which leaves the collector off).
        spans = None
        with gc_paused():
            if mentions_jax(text):
                parser = self._parsers.get(path)
                if parser is None:
                    parser = self._parsers[path] = IncrementalParser()
                findings = engine.lint_text(path, text, parser=parser, source=source)
                # (worked out now, while the tree holds this text's positions: the next edit
                # shifts them in place)
                tree = parser.tree_of(text)
                if tree is not None:
                    lines = {*suppress.candidate_lines(text),
                             *(x for f in findings for x in (f.span.line, f.span.end_line))}
                    spans = suppress.statement_spans(text, tree, lines, source.lines)
            else:
                engine.update_file(path, text)  # a file that stops mentioning jax leaves the index
                findings = []
        changed = engine.index.summaries.get(module) != before
        if changed:
            self.generation += 1
        errors = [e.message for e in engine.errors]
        engine.errors.clear()
        return Outcome(findings, engine.root, self.generation, changed, errors, source, spans)

    def forget(self, path: Path) -> Outcome:
        """A file was closed: what is on disk counts again (unsaved edits are gone)."""
        self._open.pop(path, None)
        self._parsers.pop(path, None)
        engine = self.engine_for(path)
        module, _ = engine.module_name(path)
        before = engine.index.summaries.get(module)
        text = None
        if self._indexable(engine, path):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                text = None
        if text is None:
            engine.index.remove(module)
        else:
            engine.update_file(path, text)
        changed = engine.index.summaries.get(module) != before
        if changed:
            self.generation += 1
        return Outcome([], engine.root, self.generation, changed)

    def files_changed(self, paths: list[Path]) -> bool:
        """Files changed on disk (a checkout, another tool): files open in the editor keep their
        unsaved text; the others update the index of an already loaded project."""
        changed = False
        for path in paths:
            if path.suffix in CONFIG_SUFFIXES:  # YAML, gin: rules tables, mesh axes, gin's calls
                engine = self._engines.get(self.config_for(path).root)
                if engine is not None and engine.root in self._indexed \
                        and engine.update_config_file(path):
                    changed = True
                continue
            if path in self._open or path.suffix not in (".py", ".pyi"):
                continue
            engine = self._engines.get(self.config_for(path).root)
            if engine is None or engine.root not in self._indexed:
                continue
            if not self._indexable(engine, path):
                continue
            module, _ = engine.module_name(path)
            before = engine.index.summaries.get(module)
            try:
                engine.update_file(path, path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                engine.index.remove(module)
            if engine.index.summaries.get(module) != before:
                changed = True
        if changed:
            self.generation += 1
        return changed

    def collect_garbage(self) -> None:
        """Collect what the last analysis left (its syntax tree and facts hold reference cycles),
        between analyses rather than in the middle of the next one. The collector stays off
        otherwise: re-enabled after an analysis it collected at once, inside the measured
        keystroke (every ~7th keystroke in a 5,000-line file cost 90 ms more). The older
        generations are collected here on the collector's own schedule (every 10th young
        collection, every 10th of those)."""
        if gc.isenabled():
            gc.disable()
        gc.collect(0)
        self._young += 1
        if self._young % 10 == 0:
            gc.collect(1)
            if self._young % 100 == 0:
                gc.collect(2)

    def drain_messages(self) -> list[tuple[str, str]]:
        out, self.messages = self.messages, []
        return out
