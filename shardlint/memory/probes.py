"""Find probes without running anything: stdlib `ast` only, so editors can list them cheaply.

A probe is a top-level `def shardlint_probe_*():` in a file, or a function named in
`[tool.shardlint.memory] probes = ["path/to/file.py:function"]`. Importing jax here is forbidden:
this module runs in the language server and in pre-commit, where jax may be missing or slow.
"""

from __future__ import annotations

import ast
import hashlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from shardlint.errors import UsageError

PREFIX = "shardlint_probe_"
# Folders that never hold a project's own probes; walking them costs seconds in big checkouts.
_SKIP_DIRS = {
    "__pycache__",
    "node_modules",
    "site-packages",
    "build",
    "dist",
    "venv",
    ".venv",
    "env",
}


@dataclass(frozen=True)
class Probe:
    path: Path  # absolute
    function: str
    line: int  # 1-based, of the `def`
    column: int  # 0-based
    end_line: int
    takes_arguments: bool  # a required parameter: the probe cannot be called with none
    source_hash: str  # sha256 of the file, so results can be cached per source

    @property
    def key(self) -> str:
        return f"{self.path}:{self.function}"

    def display(self, root: Path | None = None) -> str:
        return f"{relative_path(self.path, root)}:{self.function}"


def relative_path(path: Path, root: Path | None) -> str:
    base = root or Path.cwd()
    try:
        return path.relative_to(base.resolve()).as_posix()
    except ValueError:
        return str(path)


def probes_in_source(source: str, path: Path) -> list[Probe]:
    """Every top-level function named `shardlint_probe_*`; SyntaxError propagates to the caller."""
    tree = ast.parse(source, filename=str(path))
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
    return [
        _probe(node, path, digest)
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith(PREFIX)
    ]


def function_in_source(source: str, path: Path, name: str) -> Probe | None:
    """A named top-level function (configured probes need not follow the naming convention)."""
    tree = ast.parse(source, filename=str(path))
    digest = hashlib.sha256(source.encode("utf-8", "surrogatepass")).hexdigest()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return _probe(node, path, digest)
    return None


def _probe(node: ast.FunctionDef, path: Path, digest: str) -> Probe:
    args = node.args
    required = len(args.posonlyargs) + len(args.args) - len(args.defaults)
    required += sum(1 for default in args.kw_defaults if default is None)
    return Probe(
        path=path.resolve(),
        function=node.name,
        line=node.lineno,
        column=node.col_offset,
        end_line=node.end_lineno or node.lineno,
        takes_arguments=required > 0,
        source_hash=digest,
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read probe file {path}: {exc}") from None


def probes_in_file(path: Path) -> list[Probe]:
    try:
        return probes_in_source(_read(path), path)
    except SyntaxError as exc:
        raise UsageError(f"{path}:{exc.lineno}: cannot parse probe file: {exc.msg}") from None


def _python_files(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(folder) / name


def discover(root: Path) -> list[Probe]:
    """All probes under `root`; files that do not parse are skipped (the linter reports them)."""
    found: list[Probe] = []
    for path in _python_files(root):
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if PREFIX not in source:  # cheap prefilter: most files never mention probes
            continue
        try:
            found.extend(probes_in_source(source, path))
        except SyntaxError:
            continue
    return found


def resolve(specs: Iterable[str], base: Path) -> list[Probe]:
    """`file.py` (all its probes), `file.py:function`, or a folder (all probes under it).

    Relative paths are taken from `base`. UsageError names the spec that does not resolve.
    """
    probes: list[Probe] = []
    for spec in specs:
        head, sep, tail = spec.rpartition(":")
        if sep and head.endswith(".py") and tail.isidentifier():
            path = _existing(base, head, spec)
            probe = _named(path, tail)
            if probe is None:
                raise UsageError(f"{spec}: no top-level function '{tail}' in {head}")
            probes.append(probe)
            continue
        path = _existing(base, spec, spec)
        if path.is_dir():
            probes.extend(discover(path))
        else:
            found = probes_in_file(path)
            if not found:
                raise UsageError(f"{spec}: no top-level function named {PREFIX}* in this file")
            probes.extend(found)
    return _unique(probes)


def _named(path: Path, name: str) -> Probe | None:
    try:
        return function_in_source(_read(path), path, name)
    except SyntaxError as exc:
        raise UsageError(f"{path}:{exc.lineno}: cannot parse probe file: {exc.msg}") from None


def _existing(base: Path, text: str, spec: str) -> Path:
    path = Path(text)
    path = path if path.is_absolute() else base / path
    if not path.exists():
        raise UsageError(f"{spec}: no such file or folder")
    return path.resolve()


def _unique(probes: list[Probe]) -> list[Probe]:
    seen: set[str] = set()
    result = []
    for probe in probes:
        if probe.key not in seen:
            seen.add(probe.key)
            result.append(probe)
    return result
