"""Every file shardlint writes goes through :func:`write_atomic`.

The text goes to a temporary file in the same folder, is flushed to disk, and is renamed over the
target (``os.replace`` is atomic on POSIX and Windows within one file system): a reader, or a
process killed at any instant, sees the old file or the new one, never half of it. A file that
existed keeps its permission bits (the temporary file would otherwise carry mkstemp's 0600).
"""

from __future__ import annotations

import contextlib
import functools
import os
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path

# Temporary files are named ``.<name>.<random>.shardlint-tmp``: hidden, and with a suffix no
# linted file has, so a run killed mid-write leaves nothing a later run would read as source.
TMP_SUFFIX = ".shardlint-tmp"


def write_atomic(path: Path | str, data: str | bytes | Iterable[str], *, encoding: str = "utf-8",
                 newline: str | None = "") -> None:
    """Replace ``path`` with ``data`` atomically (text given as pieces is written piece by
    piece, never joined in memory). ``newline=""`` writes line endings as they are in ``data``
    (what fixes need: a CRLF file stays CRLF). Raises OSError; the temporary file is removed
    whenever the write does not complete, including on KeyboardInterrupt."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=TMP_SUFFIX)
    try:
        if isinstance(data, bytes):
            fh = os.fdopen(fd, "wb")
        else:
            fh = os.fdopen(fd, "w", encoding=encoding, newline=newline)
        with fh:
            if isinstance(data, (str, bytes)):
                fh.write(data)
            else:
                for piece in data:
                    fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        else:
            os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    """The process umask (read by setting and restoring it, once, at import: there is no getter,
    and setting it later could race with another thread creating a file)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _umask()


def resolved_relative(path: str | Path, root: Path) -> str | None:
    """``path`` resolved, relative to ``root`` resolved, with posix separators (``"."``: the
    root itself); None when it lies outside. ``root`` is resolved once per process: this is
    asked for every file of a run, and each resolve costs a system call per part."""
    full, top = os.path.realpath(path), _resolved_folder(root)
    if full == top:
        return "."
    top = os.path.join(top, "")
    return full[len(top):].replace(os.sep, "/") if full.startswith(top) else None


@functools.lru_cache(maxsize=64)
def _resolved_folder(root: Path) -> str:
    return os.path.realpath(root)
