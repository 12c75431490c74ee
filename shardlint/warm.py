"""``shardlint check`` answered again when nothing it read has changed (issue 40's warm path).

A finished run leaves a *run record* in ``.shardlint_cache/runs-v1/`` of its project root:
what it printed, its exit code, and a stamp of everything it read -- each file it opened (its
size, modification and change times and inode), each folder it listed (the names in it), and
the places the configuration lookup probed (``config.looked_up``). The next run of the same
invocation (the same arguments, folder, interpreter, shardlint code, environment variables that
matter and kind of terminal) whose stamps all still hold prints the recorded output and exits
with the recorded code, without importing the analysis: a warm run costs the interpreter's
start, this module and a ``stat`` per file.

What a run read is observed rather than listed: an audit hook (``sys.addaudithook``) sees every
``open``, ``os.listdir`` and ``os.scandir`` of the process while a recorded run lasts, so a
config file, a pin file, a package's metadata or a YAML rules table read by code written after
this module is stamped all the same. Writes, compiled bytecode and the cache folder itself are
left out (shardlint's own code counts through :func:`code_stamp`). Environment variables cannot
be observed: the ones shardlint reads are listed in ``ENV`` (a test holds the list to the code).

Stamps and the clock (racy-git): a file changed twice within one tick of its file system's clock
can keep its stamp. A file whose time is within ``_margin`` of the recording run's start could
have been changed after it was read without its stamp showing it, so its content digest is
recorded as well (taken before the run reads it) and checked instead of trusting the stamp.

Only runs that write nothing but their report to stdout are recorded and replayed: not
``--fix``/``--diff``/``--memory``/``--output-file``/``--write-baseline``/``--no-cache``/stdin,
not a run that printed to stderr or exited 2, not a run over several projects.

May import: the standard library and ``fsio`` (this module runs before the analysis is imported).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from shardlint import __version__
from shardlint.fsio import write_atomic

DIR = ".shardlint_cache"  # (the cache's folder: ``cache.DIR`` is this)
RUNS = "runs-v1"  # in DIR: a file per invocation, named by its key
KEEP = 8  # invocations remembered per project (the latest recorded)
# Environment variables a check run reads: they are part of the invocation.
ENV = ("GITHUB_ACTIONS", "NO_COLOR", "VIRTUAL_ENV")
_WATCHED = frozenset({"open", "os.listdir", "os.scandir"})
_SKIPPED_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

_STAMP: list[str] = []
_now = time.time_ns  # (the clock a recording run's start is read from)


def code_stamp() -> str:
    """What identifies this copy of shardlint's code beyond its version: the size and time of
    each of its source files and of the API table it ships (an editable install, or a reinstall
    of the same version, must not reuse findings the old code made). Taken once per process."""
    if not _STAMP:
        package = os.path.dirname(os.path.realpath(__file__))
        lines = []
        for folder, subfolders, names in os.walk(package):
            subfolders[:] = [d for d in subfolders if d != "__pycache__"]
            for name in names:
                if name.endswith((".py", ".json")):
                    path = os.path.join(folder, name)
                    try:
                        st = os.stat(path)
                    except OSError:
                        continue
                    rel = os.path.relpath(path, package).replace(os.sep, "/")
                    lines.append(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n")
        _STAMP.append(hashlib.sha1("".join(sorted(lines)).encode()).hexdigest()[:16])
    return _STAMP[0]


# ---- the invocation --------------------------------------------------------------------------------
def replayable(args) -> bool:
    """Whether a ``check`` run with these arguments only reads and prints its report."""
    paths = args.paths
    return not (args.fix or args.diff or args.memory or args.no_cache
                or args.output_file is not None or args.write_baseline is not None
                or (len(paths) == 1 and str(paths[0]) == "-"))


def invocation_key(argv: list[str]) -> str:
    """What besides the files decides a run's output: its arguments, the folder they are
    relative to, the interpreter and its import path (which packages' versions are seen),
    shardlint's code, the environment variables it reads, and where the report goes (a
    terminal gets colour; the stream's encoding decides what unencodable text becomes)."""
    out = sys.stdout
    try:
        tty = out.isatty()
    except (AttributeError, ValueError):
        tty = None
    parts = (argv, os.getcwd(), sys.executable, sys.version, sys.prefix, sys.path,
             __version__, code_stamp(),
             [(k, os.environ.get(k)) for k in ENV], tty,
             getattr(out, "encoding", None), getattr(out, "errors", None))
    return hashlib.sha1(repr(parts).encode("utf-8", "surrogatepass")).hexdigest()


def _start(args) -> Path:
    """The folder the run's configuration is looked up from (as ``check._config`` does)."""
    start = args.config or (args.paths[0] if args.paths else None)
    if start is None:
        return Path(os.getcwd())
    start = Path(os.path.abspath(start))
    return start if start.is_dir() else start.parent


def _record_files(args, key: str) -> Iterator[Path]:
    """Where a record of this invocation may be (its project's root: the start folder or one
    above it), nearest first."""
    start = _start(args)
    for d in (start, *start.parents):
        yield d / DIR / RUNS / f"{key}.json"


# ---- stamps ----------------------------------------------------------------------------------------
def _stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _listing(path: str) -> str | None:
    """A digest of the names in a folder (the cache's own folder left out: a run creates it)."""
    try:
        names = sorted(n for n in os.listdir(path) if n != DIR)
    except OSError:
        return None
    return hashlib.sha1("\0".join(names).encode("utf-8", "surrogatepass")).hexdigest()


def _content(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha1(f.read()).hexdigest()
    except OSError:
        return None


def _margin(stamp: list[int]) -> int:
    """How close to a run's start a file's time may be and still be trusted not to hide a
    change made after the run read it: one tick of its file system's clock, and more.
    Whole-second times: a clock of 1 s (ext3, HFS+) or 2 s (FAT); else 100 ms (a kernel's
    coarse clock lags by a scheduler tick)."""
    coarse = stamp[1] % 1_000_000_000 == 0 and stamp[2] % 1_000_000_000 == 0
    return 2_000_000_000 if coarse else 100_000_000


def _kind(path: str) -> str | None:
    """What a probed path is: a file, something else, or nothing (configuration lookup asks
    only whether it is there; a folder such as ``.git`` changes all the time)."""
    return "file" if os.path.isfile(path) else "other" if os.path.lexists(path) else None


def holds(entry: dict) -> bool:
    """Whether everything the recorded run read is as it was."""
    for path, stamp, content in entry["files"]:
        if _stamp(path) != stamp:
            return False
        if content is not None and _content(path) != content:
            return False
    return all(_kind(path) == kind for path, kind in entry["probes"]) \
        and all(_listing(path) == listing for path, listing in entry["folders"])


# ---- replay ----------------------------------------------------------------------------------------
def _read(path: Path, key: str) -> dict | None:
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    valid = isinstance(entry, dict) and entry.get("key") == key \
        and isinstance(entry.get("out"), str) and entry.get("code") in (0, 1) \
        and all(isinstance(entry.get(k), list) for k in ("files", "folders", "probes"))
    return entry if valid else None


def replay(args, key: str) -> int | None:
    """Print the recorded output of this invocation and return its exit code, when a record of
    it holds; None: run the check."""
    for path in _record_files(args, key):
        entry = _read(path, key)
        if entry is not None and holds(entry):
            if entry["out"]:
                sys.stdout.write(entry["out"])
                sys.stdout.flush()
            return entry["code"]
    return None


# ---- recording -------------------------------------------------------------------------------------
class _Tee:
    """A text stream that passes writes on and keeps them."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.written: list[str] = []

    def write(self, text: str) -> int:
        self.written.append(text)
        return self._stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


class Recorder:
    """What one check run reads and prints. ``project`` (called by the run once it knows its
    one project) says where the record goes and what the configuration lookup probed."""

    def __init__(self, key: str | None) -> None:
        self.key = key
        self.started = _now()
        self.pid = os.getpid()
        self.root: Path | None = None
        self.files: dict[str, tuple[list[int] | None, str | None]] = {}
        self.folders: dict[str, str | None] = {}
        self.probes: dict[str, str | None] = {}
        self.trusted = True
        self.out: _Tee | None = None
        self.err: _Tee | None = None
        self._busy = False

    def project(self, root: Path, probed: list[Path]) -> None:
        self.root = root
        for p in probed:
            path = os.path.abspath(p)
            self.probes[path] = _kind(path)

    def seen(self, event: str, args: tuple) -> None:
        if self._busy or os.getpid() != self.pid or not args:
            return  # (a worker process forked from this one: the main process reads the files)
        target = args[0]
        if event == "open":
            if not self._reads(args):
                return
        elif target is None:
            target = "."
        if isinstance(target, int):
            return
        try:
            path = os.path.abspath(os.fsdecode(target))
        except (TypeError, ValueError):
            return
        if f"{os.sep}{DIR}{os.sep}" in path or path.endswith(_SKIPPED_SUFFIXES):
            return
        self._busy = True  # (what is done here opens and lists too)
        try:
            if event == "open":
                if path not in self.files:
                    self.files[path] = self._file(path)
            elif path not in self.folders:
                self.folders[path] = _listing(path)
        finally:
            self._busy = False

    @staticmethod
    def _reads(args: tuple) -> bool:
        mode = args[1] if len(args) > 1 else None
        if isinstance(mode, str):
            return not any(c in mode for c in "wax+")
        flags = args[2] if len(args) > 2 else 0
        return not (isinstance(flags, int) and flags & _WRITE_FLAGS)

    def _file(self, path: str) -> tuple[list[int] | None, str | None]:
        stamp = _stamp(path)
        if stamp is None or max(stamp[1], stamp[2]) < self.started - _margin(stamp):
            return stamp, None
        # Too new to trust its stamp: its content decides, read before the run reads it.
        content = _content(path)
        if content is None:
            self.trusted = False
        return stamp, content

    def finish(self, code: int) -> None:
        """Write the record (when the run may be replayed: see the module's doc)."""
        if self.key is None or self.root is None or self.out is None or not self.trusted \
                or code not in (0, 1) or (self.err is not None and self.err.written):
            return
        if not (self.root / DIR).is_dir():
            return  # (the run wrote no cache: a read-only checkout)
        folder = self.root / DIR / RUNS
        entry = {
            "key": self.key, "code": code, "out": "".join(self.out.written),
            "started": self.started,
            "files": [[p, s, c] for p, (s, c) in self.files.items()],
            "folders": [[p, listing] for p, listing in self.folders.items()],
            "probes": [[p, kind] for p, kind in self.probes.items()]}
        try:
            folder.mkdir(exist_ok=True)
            write_atomic(folder / f"{self.key}.json", json.dumps(entry, separators=(",", ":")))
            _prune(folder)
        except OSError:
            pass


def _prune(folder: Path) -> None:
    """Keep the ``KEEP`` records written last."""
    records = []
    for name in os.listdir(folder):
        try:
            records.append((os.stat(folder / name).st_mtime_ns, name))
        except OSError:
            continue
    for _, name in sorted(records)[:-KEEP]:
        with contextlib.suppress(OSError):
            os.remove(folder / name)


_CURRENT: list[Recorder] = []  # the recorder of the run in progress
_HOOKED: list[bool] = []


def _hook(event: str, args: tuple) -> None:
    if _CURRENT and event in _WATCHED:
        _CURRENT[-1].seen(event, args)


@contextlib.contextmanager
def recording(key: str | None) -> Iterator[Recorder]:
    """Observe the run inside the block and tee its stdout and stderr (``key``: the
    invocation; None: observe nothing). The caller then calls the recorder's ``finish``."""
    recorder = Recorder(key)
    if key is None:
        yield recorder
        return
    if not _HOOKED:  # (an audit hook cannot be removed: one per process, idle between runs)
        sys.addaudithook(_hook)
        _HOOKED.append(True)
    saved = sys.stdout, sys.stderr
    recorder.out, recorder.err = _Tee(sys.stdout), _Tee(sys.stderr)
    sys.stdout, sys.stderr = recorder.out, recorder.err  # type: ignore[assignment]
    _CURRENT.append(recorder)
    try:
        yield recorder
    finally:
        _CURRENT.remove(recorder)
        sys.stdout, sys.stderr = saved
