"""Which jax / flax versions the project runs on, and how shardlint knows.

In this order (the first that answers wins, per package):

1. ``[tool.shardlint] jax-version / flax-version``;
2. the project's own environment: a ``.venv``/``venv`` in the project root, or the interpreter
   shardlint runs in when that interpreter belongs to the project (its prefix, or the active
   ``VIRTUAL_ENV``, is inside the project root);
3. a lock file of the project (``uv.lock``, ``poetry.lock``, ``pdm.lock``): the exact version --
   except beside a ``pyproject.toml`` that builds a package others install, whose users get what
   its ranges allow: the lock is then only its developers' environment;
4. the project's requirements, read as ranges, never executed: ``pyproject.toml`` (PEP 621
   dependencies and optional ones, dependency groups, Poetry), ``*requirements*.txt`` and
   ``requirements/*.txt`` with the files they include (``-r``, ``-c``), conda's
   ``environment.yml``, ``setup.cfg`` and the strings of ``setup.py``. An exact pin is that
   version; a range is judged for the newest release it allows -- what a fresh install gets,
   bounded by its upper bound (``jax>=0.6,<0.11.1`` -> 0.11.0) -- and remembers the oldest it
   allows, so that advice holds for the whole range (:meth:`Versions.may_be_below`). A ``jax``
   installed from git beside an exact ``jaxlib`` pin is that jaxlib's version.

   Pins belong to the package they sit in: in a monorepo (``examples/lm1b/requirements.txt``,
   ``experimental/jax/requirements.txt``) they judge the files of that folder only, and a file
   is judged by the nearest folder above it that states a version (:class:`VersionMap`). Pins
   kept apart from the code (``requirements/``, ``dependencies/``, ``scripts/``, a folder without
   Python) belong to the folder above it;
5. the interpreter shardlint runs in, when the project states nothing (an environment shared with
   the project is the best guess left);
6. the newest releases shardlint knows.

An environment shardlint merely happens to be installed in (a pre-commit or editor environment
outside the project) never wins over the project's own pins.
"""

from __future__ import annotations

import functools
import importlib.machinery
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import facts

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

# Releases shardlint knows, oldest first: every release of the registry from jax 0.3.0 and flax
# 0.3.0 on, read from the released files by `scripts/api_facts.py` (catalog/api_facts.json).
RELEASES = {pkg: facts.releases(pkg) for pkg in ("jax", "flax")}
CURRENT = {pkg: releases[-1] for pkg, releases in RELEASES.items()}
PACKAGES = ("jax", "flax")


parse = facts.version_key  # "0.4.36.dev2" -> (0, 4, 36)


# how runnable.py starts the source of a version whose pin is older than the code
STALE_PIN = "the newest release: the version "


@dataclass(frozen=True)
class Versions:
    jax: str
    flax: str
    source: dict[str, str] = field(hash=False, compare=False)  # package -> how it was learned
    # package -> the oldest release the project's pins allow, where they allow older ones than
    # the version judged (``jax>=0.4.3`` is judged as the newest release, and allows 0.4.20)
    low: dict[str, str] = field(default_factory=dict, hash=False, compare=False)
    # where a file's imports narrowed the range (semantics/catalog/runnable.py): the versions of
    # its folder
    pinned: Versions | None = field(default=None, hash=False, compare=False)

    def at_least(self, package: str, version: str) -> bool:
        have = self.jax if package == "jax" else self.flax
        return parse(have) >= parse(version)

    def below(self, package: str, version: str) -> bool:
        return not self.at_least(package, version)

    def may_be_below(self, package: str, version: str) -> bool:
        """Whether the project's pins allow a release older than ``version``: advice that needs
        ``version`` (``jax.set_mesh`` needs jax 0.7.1) does not hold for the whole range."""
        have = self.low.get(package, self.jax if package == "jax" else self.flax)
        return parse(have) < parse(version)

    def oldest(self, package: str) -> str:
        return self.low.get(package, self.jax if package == "jax" else self.flax)

    def allowed_by(self, package: str) -> str:
        """Who allows the range of ``package``: the project's pins, or (where what the file
        imports and calls narrowed them) the pins and the file's code, or the code alone where
        the pins are older than it (semantics/catalog/runnable.py)."""
        p = self.pinned
        if p is not None and (p.oldest(package), p.judged(package)) != \
                (self.oldest(package), self.judged(package)):
            if self.source.get(package, "").startswith(STALE_PIN):
                return "the releases this file's code runs at (its pins are older than it)"
            return "the pins and what this file imports and calls"
        return "the project's pins"

    def judged(self, package: str) -> str:
        return self.jax if package == "jax" else self.flax

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
# Folders where projects keep pins apart from the code they pin: those pins judge the folder above.
PIN_FOLDERS = frozenset({"requirements", "dependencies", "deps", "pip_package", "docker", "env",
                         "envs", "environment", "environments", "conda", "scripts", "ci",
                         "install", "setup", "tools", "generated_requirements",
                         "base_requirements", "src"})
_LOCKS = ("uv.lock", "poetry.lock", "pdm.lock")
_NAMES = ("jax", "flax", "jaxlib")
MAX_DEPTH = 6


def is_pin_file(name: str, folder: str) -> bool:
    """A file that states the versions of a folder (``folder``: its name, lowercase)."""
    low = name.lower()
    if low in ("pyproject.toml", "setup.py", "setup.cfg") or low in _LOCKS:
        return True
    # (`requirements-dev.txt`, and the accelerator's own: `gpu_requirements.txt`,
    # `tpu-requirements.txt`)
    if low.endswith(".txt") and ("requirements" in low or folder == "requirements"):
        return True
    return low.endswith((".yml", ".yaml")) and ("environment" in low or low.startswith("conda"))


def _walk(root: Path):
    """(folder, sub-folders, files) below ``root``, skipping environments and hidden folders."""
    top = str(root)
    prefix = os.path.join(top, "")
    for dirpath, dirnames, filenames in os.walk(root):
        # (as `len(relative_to(root).parts)`, without pathlib)
        depth = 0 if dirpath == top else dirpath[len(prefix):].count(os.sep) + 1
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP and not d.startswith(".")
                             and depth < MAX_DEPTH)
        yield Path(dirpath), dirnames, filenames


def pin_scopes(root: Path) -> dict[str, list[Path]]:
    """Folder (relative, ``""`` the root) -> the files stating versions that judge it."""
    found: dict[Path, list[Path]] = {}
    python_below: dict[Path, bool] = {}
    for folder, _, files in _walk(root):
        pins = [folder / f for f in sorted(files) if is_pin_file(f, folder.name.lower())]
        if pins:
            found[folder] = pins
        if any(f.endswith(".py") for f in files):
            for d in (folder, *folder.parents):
                if python_below.get(d):
                    break
                python_below[d] = True
                if d == root:
                    break
    out: dict[str, list[Path]] = {}
    for folder, pins in found.items():
        scope = folder
        while scope != root and (scope.name.lower() in PIN_FOLDERS
                                 or not python_below.get(scope)):
            scope = scope.parent
        out.setdefault("" if scope == root else scope.relative_to(root).as_posix(),
                       []).extend(pins)
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


_REQ_LINE = re.compile(r"""["']?\s*((?:jaxlib|jax|flax)\s*(?:\[[^\]]*\])?\s*(?:[<>=!~][^;"'\n#]*)?)""")
_INCLUDE = re.compile(r"^(?:-r|-c|--requirement|--constraint)(?:\s*=\s*|\s+)(\S+)")


def _requirements_lines(path: Path, root: Path, seen: set[Path]) -> list[tuple[str, str]]:
    """The requirement lines of a requirements file and of the files it includes."""
    if path in seen:
        return []
    seen.add(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    rel = _rel(path, root)
    out: list[tuple[str, str]] = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].split("\t#", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        m = _INCLUDE.match(line)
        if m:
            out.extend(_requirements_lines((path.parent / m.group(1)).resolve(), root, seen))
        elif not line.startswith("-"):
            out.append((line, rel))
    return out


def _rel(path: Path, root: Path) -> str:
    """``path`` resolved, relative to ``root`` resolved (posix); its name when outside."""
    full, top = os.path.realpath(path), _resolved_folder(root)
    if full == top:
        return "."
    top = os.path.join(top, "")
    return full[len(top):].replace(os.sep, "/") if full.startswith(top) else path.name


@functools.lru_cache(maxsize=64)
def _resolved_folder(root: Path) -> str:
    """(resolved once per root: ``_rel`` is asked for every file of a run, and a resolve costs
    a system call per part of the path)"""
    return os.path.realpath(root)


def _conda_strings(path: Path, root: Path) -> list[tuple[str, str]]:
    """conda's ``environment.yml``: its dependencies and their ``pip:`` list (``jax=0.4.28`` is
    conda's ``==``)."""
    try:
        import yaml

        data = yaml.safe_load(path.read_text(encoding="utf-8", errors="replace"))
    except Exception:  # noqa: BLE001 - a broken or odd YAML file states nothing
        return []
    deps = data.get("dependencies") if isinstance(data, dict) else None
    if not isinstance(deps, list):
        return []
    rel = _rel(path, root)
    out: list[tuple[str, str]] = []
    for item in deps:
        items = item.get("pip", []) if isinstance(item, dict) else [item]
        for text in items if isinstance(items, list) else []:
            if isinstance(text, str):
                text = text.split()[0] if text.split() else text
                text = re.sub(r"^([A-Za-z0-9_.\[\]-]+)=(?!=)", r"\1==", text)
                out.append((text, rel))
    return out


def _stated_strings(files: list[Path], root: Path) -> list[tuple[str, str]]:
    """(requirement, file) pairs of the files of one scope."""
    out: list[tuple[str, str]] = []
    seen: set[Path] = set()
    for path in files:
        name = path.name.lower()
        rel = _rel(path, root)
        if name == "pyproject.toml":
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
                out.extend((x, rel) for x in _strings_of_pyproject(data))
            except (OSError, tomllib.TOMLDecodeError, AttributeError, TypeError):
                pass
        elif name in ("setup.py", "setup.cfg"):  # as text: install_requires strings
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            out.extend((m.group(1).strip(), rel) for m in _REQ_LINE.finditer(text)
                       if not re.match(r"(?:jaxlib|jax|flax)\w", m.group(1)))
        elif name.endswith(".txt"):
            out.extend(_requirements_lines(path.resolve(), root, seen))
        elif name.endswith((".yml", ".yaml")):
            out.extend(_conda_strings(path, root))
    return out


def _distributed(files: list[Path]) -> bool:
    """Whether the scope's ``pyproject.toml`` builds a package others install (a
    ``[build-system]`` beside a ``[project]`` or Poetry name): its users install whatever its
    ranges allow, and a lock file beside it is only its developers' environment."""
    for path in files:
        if path.name != "pyproject.toml":
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            continue
        poetry = data.get("tool", {}).get("poetry", {})
        named = bool(data.get("project", {}).get("name") or poetry.get("name"))
        if "build-system" in data and named and poetry.get("package-mode", True) is not False:
            return True
    return False


def _locked(files: list[Path]) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for path in files:
        if path.name not in _LOCKS:
            continue
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            continue
        for pkg in data.get("package", []):
            if isinstance(pkg, dict) and pkg.get("name") in PACKAGES and "version" in pkg:
                out.setdefault(pkg["name"], (str(pkg["version"]), f"locked in `{path.name}`"))
    return out


Stated = dict[str, tuple[str, str, str]]  # package -> (version judged, why, oldest allowed)

_PY_MINORS = tuple(f"3.{m}" for m in range(6, 16))  # Python releases a pin may name
_PYTHON_REQUIRES = re.compile(r"""python_requires\s*=\s*["']([^"']+)["']""")


def _python_strings(files: list[Path], root: Path) -> list[tuple[str, str, str]]:
    """(Python specifier as PEP 440, as written, file) of one scope: ``requires-python``,
    Poetry's ``python``, ``python_requires`` in setup.py / setup.cfg, conda's ``python=3.10``."""
    out: list[tuple[str, str]] = []
    shown: dict[int, str] = {}
    for path in files:
        name, rel = path.name.lower(), _rel(path, root)
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if name == "pyproject.toml":
            try:
                data = tomllib.loads(text)
            except (tomllib.TOMLDecodeError, TypeError):
                continue
            spec = data.get("project", {}).get("requires-python")
            poetry = data.get("tool", {}).get("poetry", {}).get("dependencies", {}).get("python")
            for found in (spec, _poetry(poetry) if isinstance(poetry, str) else None):
                if isinstance(found, str) and found.strip():
                    out.append((found, rel))
        elif name in ("setup.py", "setup.cfg"):
            out.extend((m.group(1), rel) for m in _PYTHON_REQUIRES.finditer(text))
            if name == "setup.cfg":
                m = re.search(r"^\s*python_requires\s*=\s*(\S.*)$", text, re.M)
                if m:
                    out.append((m.group(1).strip(), rel))
        elif name.endswith((".yml", ".yaml")):
            for item, where in _conda_strings(path, root):
                m = re.fullmatch(r"python(?:==)?([<>=!~].*|[0-9][0-9.*]*)", item.replace(" ", ""))
                if m and not item.startswith("python-"):
                    spec = m.group(1)
                    if spec[:1].isdigit():  # conda's `python=3.10` is 3.10.*
                        spec = "==" + (spec if spec.endswith("*") or spec.count(".") > 1
                                       else spec + ".*")
                    out.append((spec, where))
                    shown[len(out) - 1] = item.replace("python==", "python=", 1)
    return [(spec, shown.get(i, f"python{spec}"), where) for i, (spec, where) in enumerate(out)]


def _newest_python(files: list[Path], root: Path) -> tuple[str, str] | None:
    """(the newest Python minor the scope's pins allow, where they say so), or None where they
    allow the newest there is (no upper bound)."""
    strings = _python_strings(files, root)
    if not strings:
        return None
    try:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import Version
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    allowed = set(_PY_MINORS)
    wheres = []
    for text, written, where in strings:
        try:
            spec = SpecifierSet(text)
        except InvalidSpecifier:
            continue
        ok = {m for m in _PY_MINORS
              if any(Version(f"{m}.{patch}") in spec for patch in (0, 9, 20))}
        if ok != set(_PY_MINORS):
            allowed &= ok
            wheres.append(f"`{written}` in `{where}`")
    if not allowed or _PY_MINORS[-1] in allowed or not wheres:
        return None
    return max(allowed, key=parse), ", ".join(sorted(set(wheres)))


def _python_allows(pkg: str, version: str, python: str) -> bool:
    return facts.allows_python(pkg, version, python) is not False


# A PEP 508 requirement, as far as the version judgement reads it: the name, then a version
# specifier (bare or in parentheses) or a URL, then an environment marker. Read here rather than
# with `packaging.requirements`, whose import (markers, tags) costs a one-file run 35 ms.
_REQUIREMENT = re.compile(
    r"\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:\[[\w\s,.-]*\])?\s*"
    r"(?:@\s*\S+\s*(?=;|$)|\((?P<inner>[^;()]*)\)|(?P<spec>[^;()]*?))\s*(?:;.*)?$",
    re.DOTALL)
_SPEC_CLAUSE = re.compile(r"\s*(?:~=|===|==|!=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+\s*")


def requirement(text: str) -> tuple[str, str] | None:
    """(the lower-case name, its normalised specifier: ``"<0.5,>=0.4.20"``, ``""`` for none)
    of a requirement string, or None when it is not one (``-r other.txt``, a spec that does
    not parse)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    m = _REQUIREMENT.fullmatch(text)
    if m is None:
        return None
    spec = (m.group("spec") or m.group("inner") or "").strip()
    clauses = spec.split(",")
    if len(clauses) > 1 and not clauses[-1].strip():
        clauses.pop()  # (`jax>=0.4,`: a trailing comma is allowed)
    if spec and not all(_SPEC_CLAUSE.fullmatch(c) for c in clauses):
        return None
    try:
        return m.group("name").lower(), str(SpecifierSet(spec))
    except InvalidSpecifier:
        return None


def _from_requirements(files: list[Path], root: Path) -> Stated:
    """package -> (version judged, why, oldest allowed), from one scope's stated requirements."""
    strings = [(t, w) for t, w in _stated_strings(files, root)
               if any(p in t.lower() for p in PACKAGES)]
    python = _newest_python(files, root)
    if not strings and python is None:
        return {}  # (and `packaging` is not even imported: a warm run's start-up)
    try:
        from packaging.specifiers import SpecifierSet
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - a declared dependency
        return {}
    specs: dict[str, list[tuple[str, str, str]]] = {}
    mentioned: dict[str, tuple[str, str]] = {}  # package -> (as written, where): no version
    for text, where in strings:
        req = requirement(text)
        if req is None:
            continue
        name, specifier = req
        if name not in _NAMES:
            continue
        written = re.sub(r"\s+", "", text.split(";", 1)[0])  # as the project wrote it
        if specifier:
            specs.setdefault(name, []).append((specifier, where, written))
        else:
            mentioned.setdefault(name, (written, where))
    out: Stated = {}
    for pkg in PACKAGES:
        found = specs.get(pkg, [])
        pins = [(s.lstrip("="), w) for s, w, _ in found
                if s.startswith(("==", "===")) and "," not in s]
        if pins:
            version, where = pins[0]
            version = version.split("+", 1)[0]
            low = min((v.split("+", 1)[0] for v, _ in pins), key=parse)
            out[pkg] = (version, f"pinned in `{where}`", low)
            continue
        if not found and pkg == "jax" and "jax" in mentioned:
            lib = [(s.lstrip("=").split("+", 1)[0], w, wr) for s, w, wr in specs.get("jaxlib", [])
                   if s.startswith(("==", "===")) and "," not in s]
            if lib:  # `jax @ git+...` beside `jaxlib==0.5.3`: they are released together
                version, where, written = lib[0]
                out[pkg] = (version, f"pinned as `{written}` in `{where}` (jax itself unversioned)",
                            version)
                continue
        if not found:
            # A Python pin bounds the package too: Python 3.10 installs jax 0.6.2 at most.
            newest = _newest_for_python(pkg, python)
            if pkg in mentioned:
                written, where = mentioned[pkg]
                out[pkg] = (newest or CURRENT[pkg], f"the newest release (`{written}` in "
                            f"`{where}` states no version{_python_note(python, newest)})",
                            newest or CURRENT[pkg])
            elif newest is not None:
                out[pkg] = (newest, f"the newest release that Python {python[0]} installs "
                            f"({python[1]}; the project states no {pkg} version)", newest)
            continue
        combined = SpecifierSet(",".join(s for s, _, _ in found))
        wheres = sorted({w for _, w, _ in found})
        shown = ", ".join(f"`{written}`" for _, _, written in found)
        releases = [v for v in RELEASES[pkg] if _allowed(combined, v, Version, InvalidVersion)]
        on_python = [v for v in releases if python is None or _python_allows(pkg, v, python[0])]
        if on_python and on_python[-1] != releases[-1]:
            shown += f" on Python {python[0]} ({python[1]})"  # type: ignore[index]
        releases = on_python or releases
        if releases:
            # The oldest release allowed counts only where a lower bound is written: `jax<0.8` or
            # `jax!=0.7.1` names no oldest version the project means to support.
            lower_bound = any(">" in s or "~=" in s for s, _, _ in found)
            out[pkg] = (releases[-1], f"the newest release that {shown} ({', '.join(wheres)}) "
                        f"allows", releases[0] if lower_bound else releases[-1])
        else:
            out[pkg] = _older_than_known(pkg, found, combined, shown, wheres, Version,
                                         InvalidVersion) or (
                CURRENT[pkg], f"assumed: no release shardlint knows satisfies {shown}",
                CURRENT[pkg])
    return out


def _older_than_known(pkg: str, found: list[tuple[str, str, str]], combined, shown: str,
                      wheres: list[str], Version, InvalidVersion) -> tuple[str, str, str] | None:
    """Where the pins allow only releases older than every release shardlint knows (``jax~=
    0.2.12``; its table starts at 0.3.0): the project runs such an old release, not the newest,
    so the versions the pins write themselves judge it (the newest of them, and the oldest as
    the range's start). Nothing deprecated or removed later is claimed, and advice that needs a
    newer release says so. None where the pins write no such version (``jax<0.3`` alone) or
    allow a newer one (a release after the table's newest: the newest known is assumed)."""
    oldest = parse(RELEASES[pkg][0])
    written = []
    for spec, _, _ in found:
        for part in spec.split(","):
            v = part.strip().lstrip("<>=!~").split("+", 1)[0].removesuffix(".*")
            try:
                if parse(v) < oldest and _allowed(combined, v, Version, InvalidVersion):
                    written.append(v)
            except ValueError:
                continue
    if not written:
        return None
    written.sort(key=parse)
    return (written[-1], f"{written[-1]}, as {shown} ({', '.join(wheres)}) writes it: it allows "
                         f"only releases older than any shardlint knows (from {RELEASES[pkg][0]})",
            written[0])


def _newest_for_python(pkg: str, python: tuple[str, str] | None) -> str | None:
    """The newest release of ``pkg`` that installs on the pinned Python, where that is not the
    newest release there is."""
    if python is None:
        return None
    fits = [v for v in RELEASES[pkg] if _python_allows(pkg, v, python[0])]
    return fits[-1] if fits and fits[-1] != CURRENT[pkg] else None


def _python_note(python: tuple[str, str] | None, newest: str | None) -> str:
    return f"; Python {python[0]}, {python[1]}, installs it at most" if python and newest else ""


def _allowed(spec, version: str, Version, InvalidVersion) -> bool:
    try:
        return Version(version) in spec
    except InvalidVersion:
        return False


@dataclass(frozen=True)
class VersionMap:
    """The versions that judge each file: one :class:`Versions` per folder that states its own
    (the root's first, then the others deepest first); a file takes its nearest folder's."""

    default: Versions
    scopes: tuple[tuple[str, Versions], ...] = ()

    def for_path(self, path: str | Path, root: Path) -> Versions:
        if not self.scopes:
            return self.default
        return self.for_relative(_rel(Path(path), root))

    def for_relative(self, rel: str) -> Versions:
        """:meth:`for_path` of a path already relative to the root (posix separators)."""
        for folder, versions in self.scopes:
            if rel.startswith(folder + "/"):
                return versions
        return self.default

    @classmethod
    def single(cls, versions: Versions) -> VersionMap:
        return cls(versions)


def _environment(root: Path, overrides: dict[str, str]) -> dict[str, tuple[str, str]]:
    """What the project's configuration or its own environment says: it judges every file."""
    out: dict[str, tuple[str, str]] = {}
    own_env = _running_is_the_project_s(root)
    for pkg in PACKAGES:
        if pkg in overrides:
            out[pkg] = (overrides[pkg], "set in `[tool.shardlint]`")
            continue
        found = _venv_version(root, pkg)
        if found is None and own_env:
            installed = _installed(pkg)
            if installed:
                found = (installed, "installed in the project's environment")
        if found is not None:
            out[pkg] = found
    return out


def _versions(env: dict[str, tuple[str, str]], chain: list[Stated],
              installed: Callable[[str], str | None]) -> Versions:
    values: dict[str, str] = {}
    source: dict[str, str] = {}
    low: dict[str, str] = {}
    for pkg in PACKAGES:
        if pkg in env:
            values[pkg], source[pkg] = env[pkg]
            continue
        stated = next((s[pkg] for s in chain if pkg in s), None)
        if stated is not None:
            values[pkg], source[pkg], oldest = stated
            if parse(oldest) < parse(values[pkg]):
                low[pkg] = oldest
        elif installed(pkg):
            values[pkg] = installed(pkg)  # type: ignore[assignment]
            source[pkg] = "installed next to shardlint (the project states no version)"
        else:
            values[pkg] = CURRENT[pkg]
            source[pkg] = "assumed: the newest release (the project states no version)"
    # (`jax>=0.6` beside `flax>=0.12.5` means jax >= 0.8.1; an unversioned flax bounds nothing)
    flax_floor = low.get("flax") or (values["flax"] if "flax" not in env and source["flax"]
                                     .startswith(("pinned", "locked")) else None)
    if "jax" in low and flax_floor:
        # (the oldest jax that flax release requires: its `Requires-Dist: jax>=...`)
        need = facts.flax_needs_jax(flax_floor)
        if need is not None and parse(low["jax"]) < parse(need):
            if parse(need) < parse(values["jax"]):
                low["jax"] = need
            else:
                del low["jax"]
    return Versions(values["jax"], values["flax"], source, low)


def detect_map(root: Path, overrides: dict[str, str] | None = None) -> VersionMap:
    """The versions of every folder of the project that states its own (see the module's doc)."""
    env = _environment(root, overrides or {})
    if all(pkg in env for pkg in PACKAGES):
        return VersionMap(_versions(env, [], _installed))
    scopes = pin_scopes(root)
    stated: dict[str, Stated] = {}
    for folder, files in scopes.items():
        found = _from_requirements(files, root)
        locked = _locked(files)
        if locked and _distributed(files):
            # A package's users install what its ranges allow, not its developers' lock: the
            # lock judges only what the ranges leave unstated.
            for pkg, (version, why) in locked.items():
                if pkg in found and not found[pkg][1].startswith("pinned"):
                    judged, said, oldest = found[pkg]
                    found[pkg] = (judged, f"{said}: what the package's users install "
                                  f"(`{why.split('`')[1]}` locks {version} for its own "
                                  f"development)", oldest)
                else:
                    found[pkg] = (version, why, version)
        else:
            # (a lock file's exact version wins over the ranges beside it)
            found.update({k: (*v, v[0]) for k, v in locked.items()})
        if found:
            stated[folder] = found
    installed = functools.lru_cache(maxsize=None)(_installed)

    def chain(folder: str) -> list[Stated]:
        parts = folder.split("/") if folder else []
        out = [stated[p] for p in ("/".join(parts[:i]) for i in range(len(parts), 0, -1))
               if p in stated]
        if "" in stated:
            out.append(stated[""])
        return out

    default = _versions(env, chain(""), installed)
    nested = sorted((f for f in stated if f), key=lambda f: (-f.count("/"), f))
    return VersionMap(default, tuple((f, _versions(env, chain(f), installed)) for f in nested))


def detect(root: Path, overrides: dict[str, str] | None = None) -> Versions:
    """The versions that judge the project's root folder (and every file without pins nearer)."""
    return detect_map(root, overrides).default


def assume(jax: str | None = None, flax: str | None = None) -> Versions:
    """Fixed versions (tests, examples); ``"0.4.20..0.6.2"``: pins that allow that range, judged
    for its newest release (as ``jax>=0.4.20,<=0.6.2``)."""
    given = {"jax": jax or CURRENT["jax"], "flax": flax or CURRENT["flax"]}
    judged, low, source = {}, {}, {}
    for pkg, text in given.items():
        oldest, dots, newest = text.partition("..")
        judged[pkg] = newest if dots else text
        source[pkg] = "fixed"
        if dots:
            low[pkg] = oldest
            source[pkg] = f"the newest that {pkg} {oldest}..{newest} allows"
    return Versions(judged["jax"], judged["flax"], source, low)
