"""``[tool.shardlint]`` in pyproject.toml, read with tomllib and checked key by key."""

from __future__ import annotations

import fnmatch
import functools
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

from shardlint.errors import ConfigError
from shardlint.fsio import resolved_relative

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CODE_OR_PREFIX = re.compile(r"^SHL[0-9]{0,3}$")
_LIST_KEYS = ("select", "ignore", "extend-select", "exclude", "jit-wrappers",
              "constraint-wrappers", "rules-contexts", "mesh-contexts")
KNOWN_KEYS = (*_LIST_KEYS, "per-file-ignores", "test-files", "test-ignore", "severity",
              "jax-version", "flax-version", "preview", "memory")

# Test code runs on one device with toy sizes: what a test file is (pytest's and unittest's
# conventions, test folders) and the rules quiet there by default -- memory and placement
# advice, not crashes (SHL202, SHL402, SHL404 and removed APIs still apply). Both are
# `[tool.shardlint]` keys: `test-ignore = []` judges tests like any other code.
DEFAULT_TEST_FILES = ("test_*.py", "*_test.py", "tests.py", "conftest.py", "tests", "test",
                      "*/tests/*", "*/test/*")
DEFAULT_TEST_IGNORE = ("SHL103", "SHL201", "SHL203", "SHL205", "SHL206", "SHL301", "SHL302",
                       "SHL303", "SHL304", "SHL305", "SHL306", "SHL401", "SHL405", "SHL502")


@dataclass(frozen=True)
class Config:
    root: Path = Path(".")
    path: Path | None = None  # the pyproject.toml it came from
    select: tuple[str, ...] = ()  # empty: every rule that is on by default
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    test_files: tuple[str, ...] = DEFAULT_TEST_FILES
    test_ignore: tuple[str, ...] = DEFAULT_TEST_IGNORE
    severity: tuple[tuple[str, str], ...] = ()
    jax_version: str | None = None
    flax_version: str | None = None
    exclude: tuple[str, ...] = ()
    jit_wrappers: tuple[str, ...] = ()
    constraint_wrappers: tuple[str, ...] = ()
    rules_contexts: tuple[str, ...] = ()
    mesh_contexts: tuple[str, ...] = ()
    # Rules and behaviours in preview (not yet right often enough on real code) run only here.
    preview: bool = False
    memory: dict = field(default_factory=dict, hash=False, compare=False)

    def with_overrides(self, select: list[str] | None = None, ignore: list[str] | None = None,
                       extend_select: list[str] | None = None,
                       severity: dict[str, str] | None = None) -> Config:
        out = self
        if select is not None:
            out = replace(out, select=_codes("select", select))
        if extend_select:
            out = replace(out, extend_select=out.extend_select + _codes("extend-select", extend_select))
        if ignore:
            out = replace(out, ignore=out.ignore + _codes("ignore", ignore))
        if severity:
            merged = dict(out.severity)
            merged.update(_severity(severity))
            out = replace(out, severity=tuple(sorted(merged.items())))
        return out

    def is_selected(self, code: str, enabled_by_default: bool, path: str | None = None,
                    preview: bool = False) -> bool:
        """Whether the rule ``code`` runs (on ``path``): a rule in preview only in preview mode."""
        if preview and not self.preview:
            return False
        chosen = _best(code, self.select + self.extend_select)
        dropped = _best(code, self.ignore)
        if path is not None:
            for pattern, codes in self.per_file_ignores:
                if _path_matches(path, pattern, self.root):
                    d = _best(code, codes)
                    if d is not None and (dropped is None or d > dropped):
                        dropped = d
            if self.test_ignore and self.is_test_file(path):
                d = _best(code, self.test_ignore)
                if d is not None and (dropped is None or d > dropped):
                    dropped = d
        if chosen is None and not self.select:
            chosen = 0 if enabled_by_default else None
        if chosen is None:
            return False
        return dropped is None or chosen > dropped

    def is_test_file(self, path: str) -> bool:
        """Whether ``path`` is test code by ``test-files`` (pytest and unittest conventions)."""
        return _matches_any(path, self.test_files, self.root)

    def severity_of(self, code: str, default: str) -> str:
        best, value = -1, default
        for prefix, sev in self.severity:
            if code.startswith(prefix) and len(prefix) > best:
                best, value = len(prefix), sev
        return value

    def is_excluded(self, path: Path) -> bool:
        return any(_path_matches(str(path), p, self.root) for p in self.exclude)

    @property
    def fingerprint(self) -> str:
        """What makes cached analysis results stale when it changes."""
        return repr((self.jit_wrappers, self.constraint_wrappers, self.rules_contexts,
                     self.mesh_contexts))


def _best(code: str, prefixes: tuple[str, ...]) -> int | None:
    """Length of the longest prefix in ``prefixes`` matching ``code`` (more specific wins)."""
    best = None
    for p in prefixes:
        if code.startswith(p) and (best is None or len(p) > best):
            best = len(p)
    return best


def _relative(path: str, root: Path) -> str:
    rel = resolved_relative(path, root)
    return rel if rel is not None else Path(path).as_posix()


def _rel_matches(rel: str, name: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    return (fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(rel, pattern + "/*")
            or rel.startswith(pattern + "/") or fnmatch.fnmatch(name, pattern))


def _path_matches(path: str, pattern: str, root: Path) -> bool:
    return _rel_matches(_relative(path, root), Path(path).name, pattern)


@functools.lru_cache(maxsize=8192)
def _matches_any(path: str, patterns: tuple[str, ...], root: Path) -> bool:
    rel = _relative(path, root)  # (resolved once for all patterns: a few syscalls each)
    name = Path(path).name
    return any(_rel_matches(rel, name, p) for p in patterns)


def _codes(key: str, values) -> tuple[str, ...]:
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise ConfigError(f"`{key}` must be a list of rule codes or prefixes, e.g. [\"SHL4\"]")
    out = []
    for v in values:
        code = str(v).strip().upper()
        if code == "ALL":
            code = "SHL"
        if not CODE_OR_PREFIX.match(code):
            raise ConfigError(f"`{key}`: {v!r} is not a rule code or prefix (like SHL401 or SHL4)")
        out.append(code)
    return tuple(out)


def _severity(table) -> tuple[tuple[str, str], ...]:
    if not isinstance(table, dict):
        raise ConfigError("`severity` must be a table of code = \"error\" | \"warning\" | \"info\"")
    out = []
    for code, sev in table.items():
        _codes(f"severity.{code}", [code])
        if sev not in ("error", "warning", "info"):
            raise ConfigError(f"`severity.{code}`: {sev!r} is not one of error, warning, info")
        out.append((code.upper(), sev))
    return tuple(out)


def _strings(key: str, values) -> tuple[str, ...]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ConfigError(f"`{key}` must be a list of strings")
    return tuple(values)


def _version(key: str, value) -> str:
    if not isinstance(value, str) or not re.match(r"^\d+(\.\d+){0,3}$", value):
        raise ConfigError(f"`{key}`: {value!r} is not a version like \"0.12.2\"")
    return value


def from_table(table: dict, root: Path, path: Path | None = None) -> Config:
    if not isinstance(table, dict):
        raise ConfigError("[tool.shardlint] must be a table")
    unknown = sorted(set(table) - set(KNOWN_KEYS))
    if unknown:
        raise ConfigError(f"unknown key `{unknown[0]}` in [tool.shardlint] of {path or 'config'}; "
                          f"known keys: {', '.join(KNOWN_KEYS)}")
    kw: dict = {"root": root, "path": path}
    for key in ("select", "ignore", "extend-select"):
        if key in table:
            kw[key.replace("-", "_")] = _codes(key, table[key])
    if "per-file-ignores" in table:
        pfi = table["per-file-ignores"]
        if not isinstance(pfi, dict):
            raise ConfigError("`per-file-ignores` must be a table of glob = [codes]")
        kw["per_file_ignores"] = tuple(
            (pattern, _codes(f"per-file-ignores.{pattern}", codes)) for pattern, codes in pfi.items()
        )
    if "test-files" in table:
        kw["test_files"] = _strings("test-files", table["test-files"])
    if "test-ignore" in table:
        kw["test_ignore"] = _codes("test-ignore", table["test-ignore"])
    if "severity" in table:
        kw["severity"] = _severity(table["severity"])
    if "preview" in table:
        if not isinstance(table["preview"], bool):
            raise ConfigError("`preview` must be true or false")
        kw["preview"] = table["preview"]
    for key in ("jax-version", "flax-version"):
        if key in table:
            kw[key.replace("-", "_")] = _version(key, table[key])
    for key in ("exclude", "jit-wrappers", "constraint-wrappers", "rules-contexts", "mesh-contexts"):
        if key in table:
            kw[key.replace("-", "_")] = _strings(key, table[key])
    if "memory" in table:
        if not isinstance(table["memory"], dict):
            raise ConfigError("`memory` must be a table ([tool.shardlint.memory])")
        from shardlint.memory.settings import MemorySettings

        MemorySettings.from_table(table["memory"])  # raises ConfigError naming the bad key
        kw["memory"] = dict(table["memory"])
    return Config(**kw)


def find_root(start: Path) -> Path:
    """The project root: the nearest folder upwards with pyproject.toml, setup.py or .git."""
    start = start.resolve()
    if start.is_file():
        start = start.parent
    for d in (start, *start.parents):
        if (d / "pyproject.toml").is_file() or (d / "setup.py").is_file() or (d / ".git").exists():
            return d
    return start


def looked_up(start: Path) -> list[Path]:
    """The paths ``load(start)`` and ``find_root`` ask about (is it there? is it a file?): a
    file appearing at one of them, or going, can change the root or the configuration. The
    files they read are these too."""
    start = start.resolve()
    folder = start if start.is_dir() else start.parent
    root = find_root(folder)
    out = []
    for d in (folder, *folder.parents):
        out += [d / "pyproject.toml", d / "setup.py", d / ".git"]
        if d == root:
            break
    return out


def load(start: Path) -> Config:
    """Config of the project around ``start``: the nearest pyproject.toml with [tool.shardlint]."""
    start = start.resolve()
    folder = start if start.is_dir() else start.parent
    root = find_root(folder)
    for d in (folder, *folder.parents):
        candidate = d / "pyproject.toml"
        if candidate.is_file():
            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"cannot read {candidate}: {exc}") from None
            table = data.get("tool", {}).get("shardlint")
            if table is not None:
                return from_table(table, d, candidate)
            return Config(root=d, path=None)
        if d == root:
            break
    return Config(root=root)


def load_file(path: Path) -> Config:
    """Config from the file ``--config`` names (any name: ``ci/shardlint.toml``), read as a
    pyproject.toml: its ``[tool.shardlint]`` table. The project root is found from the file's
    folder, as for a pyproject.toml there."""
    path = path.resolve()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None
    table = data.get("tool", {}).get("shardlint")
    if table is None:
        if path.name == "pyproject.toml":
            return Config(root=find_root(path.parent), path=None)
        raise ConfigError(f"{path} has no [tool.shardlint] table")
    return from_table(table, find_root(path.parent), path)


def matches_glob(path: str, patterns: tuple[str, ...], root: Path) -> bool:
    return any(_path_matches(path, p, root) for p in patterns)
