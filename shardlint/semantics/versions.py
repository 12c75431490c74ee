"""Which jax / flax versions the project runs on, and how shardlint knows.

In this order (the first that answers wins, per package):

1. ``[tool.shardlint] jax-version / flax-version``;
2. the project's own environment: a ``.venv``/``venv`` in the project root, or the interpreter
   shardlint runs in when that interpreter belongs to the project (its prefix, or the active
   ``VIRTUAL_ENV``, is inside the project root);
3. a lock file of the project (``uv.lock``, ``poetry.lock``, ``pdm.lock``): the exact version;
4. the project's requirements, read as ranges, never executed: ``pyproject.toml`` (PEP 621
   dependencies and optional ones, dependency groups, Poetry), ``requirements*.txt`` and
   ``requirements/*.txt`` (also in subfolders), ``setup.cfg`` and the strings of ``setup.py``. An
   exact pin is that version; a range is judged for the newest release it allows -- what a fresh
   install gets, bounded by its upper bound (``jax>=0.6,<0.11.1`` -> 0.11.0);
5. the interpreter shardlint runs in, when the project states nothing (an environment shared with
   the project is the best guess left);
6. the newest releases shardlint knows.

An environment shardlint merely happens to be installed in (a pre-commit or editor environment
outside the project) never wins over the project's own pins.
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# Releases shardlint knows (PyPI, 2026-11), oldest first.
RELEASES = {
    "jax": ("0.4.20", "0.4.21", "0.4.22", "0.4.23", "0.4.24", "0.4.25", "0.4.26", "0.4.27",
            "0.4.28", "0.4.29", "0.4.30", "0.4.31", "0.4.33", "0.4.34", "0.4.35", "0.4.36",
            "0.4.37", "0.4.38", "0.5.0", "0.5.1", "0.5.2", "0.5.3", "0.6.0", "0.6.1", "0.6.2",
            "0.7.0", "0.7.1", "0.7.2", "0.8.0", "0.8.1", "0.8.2", "0.8.3", "0.9.0", "0.9.0.1",
            "0.9.1", "0.9.2", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "0.11.1", "0.11.2",
            "0.12.0", "0.12.0.1"),
    "flax": ("0.8.0", "0.8.1", "0.8.2", "0.8.3", "0.8.4", "0.8.5", "0.9.0", "0.10.0", "0.10.1",
             "0.10.2", "0.10.3", "0.10.4", "0.10.5", "0.10.6", "0.10.7", "0.11.0", "0.11.1",
             "0.11.2", "0.12.0", "0.12.1", "0.12.2", "0.12.3", "0.12.4", "0.12.5", "0.12.6",
             "0.12.7", "0.12.8", "0.12.9", "0.12.10", "0.12.12"),
}
CURRENT = {pkg: releases[-1] for pkg, releases in RELEASES.items()}
PACKAGES = ("jax", "flax")


def parse(version: str) -> tuple[int, ...]:
    out = []
    for part in version.split("."):
        m = re.match(r"\d+", part)
        if m is None:
            break
        out.append(int(m.group()))
    return tuple(out)


@dataclass(frozen=True)
class Versions:
    jax: str
    flax: str
    source: dict[str, str] = field(hash=False, compare=False)  # package -> how it was learned

    def at_least(self, package: str, version: str) -> bool:
        have = self.jax if package == "jax" else self.flax
        return parse(have) >= parse(version)

    def below(self, package: str, version: str) -> bool:
        return not self.at_least(package, version)

    def describe(self, package: str) -> str:
        """``jax 0.11.0, the newest that `jax>=0.6,<0.11.1` (pyproject.toml) allows``."""
        have = self.jax if package == "jax" else self.flax
        why = self.source.get(package)
        return f"{package} {have}, {why}" if why else f"{package} {have}"


# ---- the project's own environment --------------------------------------------------------------
def _venv_version(root: Path, package: str) -> tuple[str, str] | None:
    for venv in (".venv", "venv"):
        for dist in sorted((root / venv).glob(f"lib/python3*/site-packages/{package}-*.dist-info")):
            m = re.match(rf"{package}-([0-9][^-]*)\.dist-info", dist.name)
            if m:
                return m.group(1), f"installed in the project's `{venv}`"
    return None


def _inside(path: str | None, root: Path) -> bool:
    if not path:
        return False
    try:
        Path(path).resolve().relative_to(root.resolve())
        return True
    except (ValueError, OSError):
        return False


def _running_is_the_project_s(root: Path) -> bool:
    return _inside(sys.prefix, root) or _inside(os.environ.get("VIRTUAL_ENV"), root)


def _installed(package: str) -> str | None:
    """The version of ``package`` this interpreter imports, as ``importlib.metadata.version``
    gives it: the first ``<name>-<version>.dist-info`` folder on ``sys.path`` that names it (the
    name normalised as importlib.metadata does), read from the folder's name, which is how pip
    and uv write it. Parsing the METADATA file instead imported the email package: 20 ms of
    every run's start-up. Where the folders cannot tell, importlib.metadata itself answers: an
    entry of ``sys.path`` that is a file (a zip, an egg), an ``.egg-info``, a metadata finder of
    another kind than the standard one."""
    want = _normalised(package)
    standard = importlib.machinery.PathFinder.find_distributions
    if any(getattr(f, "find_distributions", None) not in (None, standard) for f in sys.meta_path):
        return _from_metadata(package)
    for entry in sys.path:
        folder = entry or "."
        try:
            names = os.listdir(folder)
        except NotADirectoryError:
            return _from_metadata(package)  # (a zip file on the path)
        except OSError:
            continue
        for name in names:
            low = name.lower()
            if not low.endswith((".dist-info", ".egg-info", ".egg")):
                continue
            if _normalised(low.rpartition(".")[0].partition("-")[0]) != want:
                continue  # (the project's name as importlib.metadata reads it off the folder)
            version = name[:-len(".dist-info")].partition("-")[2] \
                if low.endswith(".dist-info") else ""
            return version or _from_metadata(package)
    return None


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _from_metadata(package: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


# ---- what the project states ---------------------------------------------------------------------
_SKIP = {".git", ".venv", "venv", "node_modules", "__pycache__", "site-packages", ".tox", "build",
         "dist", ".shardlint_cache"}


def _requirement_files(root: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        depth = len(Path(dirpath).relative_to(root).parts)
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP and not d.startswith(".")
                             and depth < 3)
        in_requirements_dir = Path(dirpath).name == "requirements"
        for name in sorted(filenames):
            if name.endswith(".txt") and (name.startswith("requirements") or in_requirements_dir):
                out.append(Path(dirpath) / name)
    return out


def _strings_of_pyproject(data: dict) -> list[str]:
    project = data.get("project", {})
    out = list(project.get("dependencies", []))
    for group in project.get("optional-dependencies", {}).values():
        out.extend(group)
    for group in data.get("dependency-groups", {}).values():
        out.extend(x for x in group if isinstance(x, str))
    poetry = data.get("tool", {}).get("poetry", {})
    tables = [poetry.get("dependencies", {})]
    tables += [g.get("dependencies", {}) for g in poetry.get("group", {}).values()]
    for table in tables:
        for name, spec in table.items():
            if isinstance(spec, dict):
                spec = spec.get("version", "")
            if isinstance(spec, str):
                out.append(f"{name}{_poetry(spec)}")
    return out


def _poetry(spec: str) -> str:
    """Poetry's ``^0.4.30`` / ``~0.4.30`` / ``0.4.30`` as PEP 440."""
    spec = spec.strip()
    if spec in ("", "*"):
        return ""
    m = re.fullmatch(r"([\^~])\s*([0-9][0-9.]*)", spec)
    if m:
        parts = [int(x) for x in m.group(2).split(".")]
        if m.group(1) == "^":
            i = next((k for k, v in enumerate(parts) if v != 0), len(parts) - 1)
        else:
            i = min(1, len(parts) - 1) if len(parts) > 1 else 0
        upper = parts[: i + 1]
        upper[-1] += 1
        return f">={m.group(2)},<{'.'.join(map(str, upper))}"
    if re.fullmatch(r"[0-9][0-9.]*", spec):
        return f"=={spec}"
    return spec


_REQ_LINE = re.compile(r"""["']?\s*((?:jax|flax)\s*(?:\[[^\]]*\])?\s*(?:[<>=!~][^;"'\n#]*)?)""")


def _requirement_strings(root: Path) -> list[tuple[str, str]]:
    """(requirement, file) pairs naming jax or flax."""
    out: list[tuple[str, str]] = []
    pyproject = root / "pyproject.toml"
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
        out.extend((s, "pyproject.toml") for s in _strings_of_pyproject(data))
    except (OSError, tomllib.TOMLDecodeError, AttributeError, TypeError):
        pass
    for path in _requirement_files(root):
        rel = path.relative_to(root).as_posix()
        try:
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                line = line.split("#", 1)[0].strip()
                if line and not line.startswith("-"):
                    out.append((line, rel))
        except OSError:
            continue
    for name in ("setup.cfg", "setup.py"):  # as text: install_requires strings
        try:
            text = (root / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        out.extend((m.group(1).strip(), name) for m in _REQ_LINE.finditer(text)
                   if not re.match(r"(?:jax|flax)\w", m.group(1)))
    return out


def _locked(root: Path) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for name in ("uv.lock", "poetry.lock", "pdm.lock"):
        try:
            data = tomllib.loads((root / name).read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            continue
        for pkg in data.get("package", []):
            if isinstance(pkg, dict) and pkg.get("name") in PACKAGES and "version" in pkg:
                out.setdefault(pkg["name"], (str(pkg["version"]), f"locked in `{name}`"))
    return out


def _from_requirements(root: Path) -> dict[str, tuple[str, str]]:
    """package -> (version judged, why), from the project's stated requirements."""
    strings = [(t, w) for t, w in _requirement_strings(root)
               if any(p in t.lower() for p in PACKAGES)]
    if not strings:
        return {}  # (and `packaging` is not even imported: a warm run's start-up)
    try:
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - a declared dependency
        return {}
    specs: dict[str, list[tuple[str, str]]] = {}
    for text, where in strings:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        name = req.name.lower()
        if name in PACKAGES and str(req.specifier):
            written = re.sub(r"\s+", "", text.split(";", 1)[0])  # as the project wrote it
            specs.setdefault(name, []).append((str(req.specifier), where, written))
    out: dict[str, tuple[str, str]] = {}
    for pkg, found in specs.items():
        pins = [(s, w) for s, w, _ in found if s.startswith(("==", "===")) and "," not in s]
        if pins:
            spec, where = pins[0]
            out[pkg] = (spec.lstrip("="), f"pinned in `{where}`")
            continue
        combined = SpecifierSet(",".join(s for s, _, _ in found))
        wheres = sorted({w for _, w, _ in found})
        shown = ", ".join(f"`{written}`" for _, _, written in found)
        releases = [v for v in RELEASES[pkg] if _allowed(combined, v, Version, InvalidVersion)]
        if releases:
            out[pkg] = (releases[-1], f"the newest release that {shown} ({', '.join(wheres)}) "
                        f"allows")
        else:
            out[pkg] = (CURRENT[pkg], f"assumed: no release shardlint knows satisfies {shown}")
    return out


def _allowed(spec, version: str, Version, InvalidVersion) -> bool:
    try:
        return Version(version) in spec
    except InvalidVersion:
        return False


def detect(root: Path, overrides: dict[str, str] | None = None) -> Versions:
    overrides = overrides or {}
    values: dict[str, str] = {}
    source: dict[str, str] = {}
    stated: dict[str, tuple[str, str]] | None = None
    own_env = _running_is_the_project_s(root)
    for pkg in PACKAGES:
        if pkg in overrides:
            values[pkg], source[pkg] = overrides[pkg], "set in `[tool.shardlint]`"
            continue
        found = _venv_version(root, pkg)
        installed = _installed(pkg) if found is None else None
        if found is None and own_env and installed:
            found = (installed, "installed in the project's environment")
        if found is None:
            if stated is None:
                stated = {**_from_requirements(root), **_locked(root)}
            found = stated.get(pkg)
        if found is None and installed:
            found = (installed, "installed next to shardlint (the project states no version)")
        if found is None:
            found = (CURRENT[pkg], "assumed: the newest release (the project states no version)")
        values[pkg], source[pkg] = found
    return Versions(values["jax"], values["flax"], source)


def assume(jax: str | None = None, flax: str | None = None) -> Versions:
    """Fixed versions (tests, examples)."""
    return Versions(jax or CURRENT["jax"], flax or CURRENT["flax"],
                    {"jax": "fixed", "flax": "fixed"})
