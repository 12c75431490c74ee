"""Rebuild ``shardlint/semantics/catalog/api_facts.json``: the API facts of every jax and flax
release, read from the released files themselves, never imported.

    python scripts/api_facts.py [--wheels DIR] [--offline] [--jobs N] [--out PATH]

1. The release lists come from the package registry (``pip index versions PKG``), from jax 0.3.0
   and flax 0.3.0 on, final releases only, oldest first.
2. Each release is downloaded once into a cache outside the repository (default
   ``~/.cache/shardlint-api-wheels``; ``--wheels DIR`` to choose or reuse one) with
   ``pip download --no-deps --only-binary=:all: PKG==V``. A release with no wheel (jax before
   0.4.16) is downloaded as its sdist (``--no-binary=:all:``; pip prepares its metadata, which
   runs the sdist's build script in pip's own subprocess, as any install would) and read the
   same way. ``--offline`` reads what the cache holds and asks the registry nothing.
3. Each file is read with ``zipfile`` / ``tarfile`` and ``ast`` only: the package's modules, the
   public names each binds (definitions, assignments, imports, ``from m import *`` through the
   imported module's own names, ``__all__``), the names a module-level ``_deprecations`` table
   deprecates (jax; flax's own ``_deprecations`` and unconditional ``warnings.warn(...,
   DeprecationWarning)`` in a public function's body), the signatures of the names listed in
   :data:`SIGNATURE_MODULES` and of every API in ``shardlint/semantics/catalog/api.py`` (the
   definition found through the chain of ``from ... import ... as ...`` re-exports), and the
   metadata (``Requires-Python``; for flax, its ``jax>=`` requirement). For flax also what
   ``import flax`` imports from jax whatever the branch, and from that the newest jax release
   each flax release imports with (a module or name it imports is gone after it).
4. The table (see :mod:`shardlint.semantics.catalog.facts` for its layout and reader) is written
   compact: versions as indices into the release list, presence as runs of indices.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import warnings
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "shardlint" / "semantics" / "catalog" / "api_facts.json"
PACKAGES = ("jax", "flax")
SINCE = {"jax": (0, 3, 0), "flax": (0, 3, 0)}
FORMAT = 1


def cache_dir() -> Path:
    env = os.environ.get("SHARDLINT_API_WHEELS")
    return Path(env) if env else Path.home() / ".cache" / "shardlint-api-wheels"


def vkey(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def is_final(version: str) -> bool:
    return re.fullmatch(r"\d+(\.\d+)*", version) is not None


# ---- 1. and 2.: the release lists and the files --------------------------------------------------
def pip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True,
                          env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})


def registry_versions(package: str) -> list[str]:
    """Every final release of ``package`` the registry lists, whatever Python it needs."""
    run = pip("index", "versions", package, "--ignore-requires-python")
    for line in run.stdout.splitlines():
        if line.startswith("Available versions:"):
            found = [v.strip() for v in line.partition(":")[2].split(",")]
            keep = [v for v in found if is_final(v) and vkey(v) >= SINCE[package]]
            return sorted(keep, key=vkey)
    raise SystemExit(f"pip index versions {package}: no version list\n{run.stdout}{run.stderr}")


def cached_file(folder: Path, package: str, version: str) -> Path | None:
    for name in (f"{package}-{version}-py3-none-any.whl",
                 f"{package}-{version}-py2.py3-none-any.whl", f"{package}-{version}.tar.gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def download(folder: Path, package: str, version: str) -> tuple[Path | None, str]:
    """The release's file in the cache (downloaded if missing), or None and why not."""
    have = cached_file(folder, package, version)
    if have is not None:
        return have, ""
    spec = f"{package}=={version}"
    common = ("download", "--no-deps", "--ignore-requires-python", "-d", str(folder), spec)
    wheel = pip(*common, "--only-binary=:all:")
    if wheel.returncode != 0:
        sdist = pip(*common, "--no-binary=:all:")
        if sdist.returncode != 0:
            tail = (sdist.stderr or sdist.stdout).strip().splitlines()[-1:]
            return None, f"neither a wheel nor an sdist downloads ({' '.join(tail)})"
    have = cached_file(folder, package, version)
    return (have, "") if have else (None, "pip saved no file of a known kind")


# ---- 3.: reading one file ------------------------------------------------------------------------
@dataclass
class Source:
    """The Python modules of one release (dotted name -> text) and its metadata."""

    modules: dict[str, str]
    packages: set[str]  # the dotted names that are packages (an __init__.py)
    metadata: str
    kind: str  # "wheel" | "sdist"


def read_dist(path: Path, package: str) -> Source:
    modules: dict[str, str] = {}
    packages: set[str] = set()
    metadata = ""

    def take(rel: str, data: bytes) -> None:
        if not rel.endswith(".py") or not rel.startswith(package + "/"):
            return
        parts = rel[:-3].split("/")
        if any(p in ("tests", "test") for p in parts):
            return  # test files shipped beside the code are no API
        if parts[-1] == "__init__":
            parts = parts[:-1]
            packages.add(".".join(parts))
        modules[".".join(parts)] = data.decode("utf-8", "replace")

    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                if name.endswith(".dist-info/METADATA"):
                    metadata = z.read(name).decode("utf-8", "replace")
                else:
                    take(name, z.read(name) if name.endswith(".py") else b"")
        return Source(modules, packages, metadata, "wheel")
    with tarfile.open(path) as t:
        for member in t.getmembers():
            if not member.isfile():
                continue
            top, _, rel = member.name.partition("/")
            data = t.extractfile(member)
            if data is None:
                continue
            if rel == "PKG-INFO":
                metadata = data.read().decode("utf-8", "replace")
            elif rel.endswith(".py"):
                take(rel, data.read())
    return Source(modules, packages, metadata, "sdist")


# ---- what one module binds -----------------------------------------------------------------------
@dataclass
class Binding:
    """What a module-level name is bound to (the last binding wins, as when the module runs).

    kind: "def" / "class" (``node``), "import" (``target``: a module, ``attr``: a name in it or
    None for the module itself), "expr" (``node``: a Name or Attribute to follow), "partial"
    (``node``: what ``functools.partial`` wraps), "call" (``node``: ``w(f, ...)``, a wrapper of
    ``f`` when ``w`` passes its arguments through), "value" (anything else)."""

    kind: str
    node: ast.AST | None = None
    target: str = ""
    attr: str | None = None
    # what the name the value reads was bound to before (``jit = api_boundary(jit)``)
    prior: Binding | None = None


@dataclass
class ModuleInfo:
    name: str
    bindings: dict[str, Binding] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)
    all: list[str] | None = None
    # name -> (message, what it still returns, None: it raises AttributeError); a name is taken
    # as bound when the table is written (jax deletes the module's own binding after it)
    deprecations: dict[str, tuple[str, Binding | None]] = field(default_factory=dict)
    getattr: str | None = None  # "deprecations" | "lazy" | "custom": names it answers beyond these
    lazy: list[str] = field(default_factory=list)  # names a lazy loader attaches


def _const_str(node: ast.AST | None) -> str | None:
    """A string literal, implicit concatenations and ``+`` of literals; an f-string with its
    placeholders kept as ``{...}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _const_str(node.left), _const_str(node.right)
        return a + b if a is not None and b is not None else None
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            else:
                out.append("{" + ast.unparse(part.value) + "}")  # type: ignore[attr-defined]
        return "".join(out)
    return None


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _is_type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` under any import of typing (``_typing.TYPE_CHECKING``, ``_tp.``)."""
    return (_dotted(test) or "").rpartition(".")[2] == "TYPE_CHECKING"


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    if level == 0:
        return target or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([target] if target else []))


def read_module(name: str, text: str, is_package: bool) -> ModuleInfo:
    info = ModuleInfo(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return info
    for stmt in _runtime_statements(tree.body):
        _bind(info, stmt, is_package)
    return info


def _runtime_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements in order, the branches of ``if`` / ``try`` included (either may
    run), ``if TYPE_CHECKING:`` bodies left out (they bind nothing when the module runs)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            if not _is_type_checking(stmt.test):
                yield from _runtime_statements(stmt.body)
            yield from _runtime_statements(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _runtime_statements(stmt.body)
            for handler in stmt.handlers:
                yield from _runtime_statements(handler.body)
            yield from _runtime_statements(stmt.orelse)
            yield from _runtime_statements(stmt.finalbody)
        elif isinstance(stmt, ast.With):
            yield from _runtime_statements(stmt.body)
        else:
            yield stmt


def _bind(info: ModuleInfo, stmt: ast.stmt, is_package: bool) -> None:
    b = info.bindings
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        if not any(_dotted(d) in ("overload", "typing.overload") for d in stmt.decorator_list):
            b[stmt.name] = Binding("def", stmt)
            if stmt.name == "__getattr__":
                info.getattr = info.getattr or "custom"
    elif isinstance(stmt, ast.ClassDef):
        b[stmt.name] = Binding("class", stmt)
    elif isinstance(stmt, ast.ImportFrom):
        source = _absolute(info.name, is_package, stmt.level, stmt.module)
        for alias in stmt.names:
            if alias.name == "*":
                info.stars.append(source)
            else:
                b[alias.asname or alias.name] = Binding("import", target=source, attr=alias.name)
    elif isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.asname:
                b[alias.asname] = Binding("import", target=alias.name)
            # (`import a.b` binds `a`: the package's own name, no public re-export)
    elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        value = stmt.value
        for target in targets:
            names = [target] if isinstance(target, ast.Name) else \
                [e for e in getattr(target, "elts", []) if isinstance(e, ast.Name)]
            if len(names) > 1 and "__getattr__" in [t.id for t in names] and \
                    isinstance(value, ast.Call) and (_dotted(value.func) or "").endswith("attach"):
                # __getattr__, __dir__, __all__ = lazy_loader.attach(__name__, [submodules])
                info.getattr = "lazy"
                info.lazy += _str_list(value.args[1]) or [] if len(value.args) > 1 else []
                info.all = list(info.lazy)
                continue
            for t in names:
                _assign(info, t.id, value if len(names) == 1 else None)
    elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
        if stmt.target.id == "__all__" and info.all is not None:
            info.all += _str_list(stmt.value) or []
    elif isinstance(stmt, ast.Delete):
        for target in stmt.targets:
            if isinstance(target, ast.Name):
                b.pop(target.id, None)
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        call = stmt.value
        func = _dotted(call.func) or ""
        # __all__.extend([...]) / _deprecations.update({...})
        if func == "__all__.extend" and info.all is not None and call.args:
            info.all += _str_list(call.args[0]) or []
        elif func == "_deprecations.update" and call.args and isinstance(call.args[0], ast.Dict):
            _deprecation_table(info, call.args[0])


def _str_list(node: ast.AST | None) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out = [_const_str(e) for e in node.elts]
        return [s for s in out if s is not None]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _str_list(node.left), _str_list(node.right)
        return (a or []) + (b or []) if a is not None or b is not None else None
    return None


def _deprecation_table(info: ModuleInfo, node: ast.Dict) -> None:
    for key, value in zip(node.keys, node.values):
        name = _const_str(key)
        if name is None or not isinstance(value, ast.Tuple) or not value.elts:
            continue
        message = _const_str(value.elts[0]) or ""
        obj = value.elts[1] if len(value.elts) > 1 else None
        if obj is None or isinstance(obj, ast.Constant) and obj.value is None:
            info.deprecations[name] = (message, None)
        elif isinstance(obj, ast.Name) and obj.id in info.bindings:
            info.deprecations[name] = (message, info.bindings[obj.id])
        else:
            info.deprecations[name] = (message, Binding("expr", obj))


def _assign(info: ModuleInfo, name: str, value: ast.expr | None) -> None:
    b = info.bindings
    if name == "__all__":
        info.all = _str_list(value)
        return
    if name == "_deprecations" and isinstance(value, ast.Dict):
        info.deprecations = {}
        _deprecation_table(info, value)
    if name == "__getattr__":
        func = _dotted(value.func) if isinstance(value, ast.Call) else None
        info.getattr = "deprecations" if func and func.endswith("deprecation_getattr") else "custom"
    if isinstance(value, ast.Call):
        func = _dotted(value.func) or ""
        first = value.args[0] if value.args else None
        prior = b.get(first.id) if isinstance(first, ast.Name) else None
        if func.endswith("partial") and first is not None:
            b[name] = Binding("partial", first, prior=prior)
            return
        if isinstance(first, (ast.Name, ast.Attribute)):
            # maybe a wrapper of a function: wrapper(f, ...)
            b[name] = Binding("call", value, prior=prior)
            return
    if isinstance(value, (ast.Name, ast.Attribute)):
        b[name] = Binding("expr", value, prior=b.get(value.id) if isinstance(value, ast.Name)
                          and value.id == name else None)
    else:
        b[name] = Binding("value", value)


def _is_deprecation_warning(call: ast.AST) -> str | None:
    """The message of ``warnings.warn(msg, DeprecationWarning)`` (any warn-like call whose
    category is a ``DeprecationWarning`` / ``FutureWarning``), else None."""
    if not isinstance(call, ast.Call):
        return None
    func = _dotted(call.func) or ""
    if func.endswith("deprecations.warn") and len(call.args) > 1:
        return _const_str(call.args[1])  # jax's deprecations.warn(id, message)
    if not func.endswith("warn"):
        return None
    category = call.args[1] if len(call.args) > 1 else next(
        (k.value for k in call.keywords if k.arg == "category"), None)
    if (_dotted(category) or "").rpartition(".")[2] not in ("DeprecationWarning", "FutureWarning"):
        return None
    return _const_str(call.args[0]) if call.args else ""


def unconditional_warning(body: list[ast.stmt]) -> str | None:
    """A deprecation warning the body always gives (a statement of the body itself, before any
    ``return``), not one under an ``if`` (a deprecated keyword or value, not the name)."""
    for stmt in body:
        if isinstance(stmt, ast.Return):
            return None
        if isinstance(stmt, ast.Expr):
            message = _is_deprecation_warning(stmt.value)
            if message is not None:
                return message
    return None


def getattr_deprecations(node: ast.FunctionDef) -> dict[str, tuple[str, bool]]:
    """A hand-written module ``__getattr__`` (flax): ``if name == "X": warnings.warn(msg,
    DeprecationWarning); return Y`` deprecates X (still answered); a branch that raises with a
    message says X is gone."""
    out: dict[str, tuple[str, bool]] = {}
    for stmt in ast.walk(node):
        if not isinstance(stmt, ast.If) or not isinstance(stmt.test, ast.Compare):
            continue
        names = [_const_str(c) for c in stmt.test.comparators] + [_const_str(stmt.test.left)]
        names = [n for n in names if n]
        if isinstance(stmt.test.ops[0], ast.In):
            names = _str_list(stmt.test.comparators[0]) or []
        message = unconditional_warning(stmt.body)
        returns = any(isinstance(s, ast.Return) for s in stmt.body)
        raises = next((s for s in stmt.body if isinstance(s, ast.Raise)), None)
        for name in names:
            if message is not None and returns:
                out[name] = (message, True)
            elif raises is not None and isinstance(raises.exc, ast.Call) and raises.exc.args:
                out[name] = (_const_str(raises.exc.args[0]) or "", False)
    return out


# ---- one release: resolving names to what they are -----------------------------------------------
@dataclass
class Target:
    """What a public name is: kind "def" / "class" (``node`` in ``module``), "module" (``module``),
    "value", "unknown" (``why``). ``wrappers``: how it was reached when not directly (a
    ``partial``, a deprecated alias made by a function)."""

    kind: str
    module: str = ""
    node: ast.AST | None = None
    why: str = ""
    wrappers: tuple[str, ...] = ()


class Release:
    def __init__(self, package: str, source: Source) -> None:
        self.package = package
        self.source = source
        self.infos: dict[str, ModuleInfo] = {}
        self._public: dict[str, frozenset[str]] = {}
        self._resolved: dict[tuple[str, str], Target] = {}

    def info(self, module: str) -> ModuleInfo | None:
        if module not in self.source.modules:
            return None
        if module not in self.infos:
            self.infos[module] = read_module(module, self.source.modules[module],
                                             module in self.source.packages)
        return self.infos[module]

    def public_modules(self) -> list[str]:
        return sorted(m for m in self.source.modules
                      if not any(p.startswith("_") for p in m.split(".")))

    def names(self, module: str, _seen: frozenset[str] = frozenset()) -> frozenset[str]:
        """Every name ``module`` answers when it runs (private ones included)."""
        if module in self._public:
            return self._public[module]
        info = self.info(module)
        if info is None or module in _seen:
            return frozenset()
        out = set(info.bindings)
        for star in info.stars:
            star_info = self.info(star)
            if star_info is not None and star_info.all is not None:
                out.update(star_info.all)
            else:
                out.update(n for n in self.names(star, _seen | {module}) if not n.startswith("_"))
        out.update(n for n, (_, obj) in info.deprecations.items() if obj is not None)
        out.update(info.lazy)
        out.update(n for n, (_, present) in self.getattr_table(module).items() if present)
        if not _seen:
            self._public[module] = frozenset(out)
        return frozenset(out)

    def getattr_table(self, module: str) -> dict[str, tuple[str, bool]]:
        info = self.info(module)
        if info is None:
            return {}
        b = info.bindings.get("__getattr__")
        if b is not None and b.kind == "def" and isinstance(b.node, ast.FunctionDef):
            return getattr_deprecations(b.node)
        return {}

    def deprecations(self, module: str) -> dict[str, tuple[str, bool]]:
        """name -> (the release's message, still answered) for the module's deprecated names."""
        info = self.info(module)
        if info is None:
            return {}
        out = {n: (m, obj is not None) for n, (m, obj) in info.deprecations.items()}
        out.update(self.getattr_table(module))
        for name, b in info.bindings.items():
            # old = deprecated(new) (flax): a wrapper that warns on every call, then calls new
            if b.kind == "call" and isinstance(b.node, ast.Call):
                wrapper = self.wrapper(module, b.node.func)
                inner = next((s for s in wrapper.body if isinstance(s, ast.FunctionDef)), None) \
                    if wrapper is not None else None
                message = unconditional_warning(inner.body) if inner is not None else None
                if message is not None:
                    wrapped = (_dotted(b.node.args[0]) or "?").rpartition(".")[2]
                    first = [*wrapper.args.posonlyargs,  # type: ignore[union-attr]
                             *wrapper.args.args][0].arg  # type: ignore[union-attr]
                    for attr in ("__qualname__", "__name__"):
                        message = message.replace("{" + f"{first}.{attr}" + "}", wrapped)
                    out[name] = (message, True)
        return out

    def reexported_deprecation(self, module: str, name: str) -> tuple[str, bool] | None:
        """The deprecation of the name a re-export (``from m import x as y``) hands on."""
        for _ in range(20):
            info = self.info(module)
            b = info.bindings.get(name) if info is not None else None
            if b is None or b.kind != "import" or b.attr is None:
                return None
            module, name = b.target, b.attr
            fact = self.deprecations(module).get(name)
            if fact is not None:
                return fact
        return None

    def module_deprecation(self, module: str) -> str | None:
        """A warning the module gives when it is imported."""
        text = self.source.modules.get(module)
        if text is None or "eprecat" not in text:
            return None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                tree = ast.parse(text)
            except SyntaxError:
                return None
        strings: dict[str, str] = {}  # module-level `_msg = "..."` handed to the warning
        for stmt in _runtime_statements(tree.body):
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                    isinstance(stmt.targets[0], ast.Name):
                text_ = _const_str(stmt.value)
                if text_ is not None:
                    strings[stmt.targets[0].id] = text_
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                call = stmt.value
                if call.args and isinstance(call.args[0], ast.Name) and \
                        call.args[0].id in strings:
                    call = ast.Call(call.func, [ast.Constant(strings[call.args[0].id]),
                                                *call.args[1:]], call.keywords)
                message = _is_deprecation_warning(call)
                func = _dotted(stmt.value.func) or ""
                if message is None and func in ("logging.warning", "logging.warn") and \
                        stmt.value.args:
                    text_ = _const_str(stmt.value.args[0]) or ""
                    message = text_ if "deprecated" in text_.lower() else None
                if message is not None:
                    return message
        return None

    # -- following a name to its definition --
    def resolve(self, module: str, name: str, depth: int = 0) -> Target:
        key = (module, name)
        if key in self._resolved:
            return self._resolved[key]
        self._resolved[key] = Target("unknown", why="a cycle of imports")
        target = self._resolve(module, name, depth)
        self._resolved[key] = target
        return target

    def _resolve(self, module: str, name: str, depth: int) -> Target:
        if depth > 30:
            return Target("unknown", why="too many re-exports")
        info = self.info(module)
        if info is None:
            if module.split(".")[0] != self.package:
                return Target("unknown", why=f"defined outside {self.package} ({module})")
            return Target("unknown", why=f"no module {module}")
        b = info.bindings.get(name)
        if b is None:
            kept = info.deprecations.get(name, ("", None))[1]
            if kept is not None:
                return self._binding(module, kept, depth)
            for star in info.stars:
                if name in self.names(star):
                    return self.resolve(star, name, depth + 1)
            if f"{module}.{name}" in self.source.modules:
                return Target("module", f"{module}.{name}")
            return Target("unknown", why=f"{module} does not bind {name}")
        return self._binding(module, b, depth)

    def _binding(self, module: str, b: Binding, depth: int) -> Target:
        if b.kind in ("def", "class"):
            return Target(b.kind, module, b.node)
        if b.kind == "import":
            if b.attr is None:
                return Target("module", b.target) if b.target in self.source.modules else \
                    Target("unknown", why=f"module {b.target}")
            inner = self.info(b.target)
            if inner is not None and (b.attr in inner.bindings or b.attr in self.names(b.target)):
                return self.resolve(b.target, b.attr, depth + 1)
            if f"{b.target}.{b.attr}" in self.source.modules:
                return Target("module", f"{b.target}.{b.attr}")
            return self.resolve(b.target, b.attr, depth + 1)
        if b.prior is not None and depth < 30:
            inner = self._binding(module, b.prior, depth + 1)
        elif b.kind in ("expr", "partial") and isinstance(b.node, (ast.Name, ast.Attribute)):
            inner = self._expr(module, b.node, depth)
        elif b.kind == "call" and isinstance(b.node, ast.Call):
            inner = self._expr(module, b.node.args[0], depth)  # type: ignore[arg-type]
        else:
            inner = Target("unknown", why="an expression")
        if b.kind == "expr":
            return inner
        if b.kind == "partial":
            return Target("unknown", inner.module, inner.node, why="a functools.partial",
                          wrappers=inner.wrappers + ("~partial",))
        if b.kind == "call" and isinstance(b.node, ast.Call):
            wrapper = self.wrapper(module, b.node.func)
            if wrapper is None:
                return Target("value", module, why=f"made by {ast.unparse(b.node.func)}(...)")
            return Target(inner.kind, inner.module, inner.node, inner.why,
                          inner.wrappers + (f"+{wrapper.name}",))
        return Target("value", module)

    def wrapper(self, module: str, func: ast.expr) -> ast.FunctionDef | None:
        """The definition of ``func`` (a decorator, or what ``x = func(f, ...)`` calls; a
        ``partial(w, ...)`` of one counts as ``w``) when it passes its arguments through: it
        returns a function of ``(*args, **kwargs)`` that calls the wrapped function with exactly
        those and changes neither (so the wrapped function's signature is the one callers
        meet), else None."""
        if isinstance(func, ast.Call) and (_dotted(func.func) or "").endswith("partial") and \
                func.args:
            func = func.args[0]
        if not isinstance(func, (ast.Name, ast.Attribute)):
            return None
        target = self._expr(module, func, 0)
        node = target.node
        if target.kind != "def" or not isinstance(node, ast.FunctionDef):
            return None
        return node if passes_through(node) else None

    def _expr(self, module: str, node: ast.expr, depth: int) -> Target:
        if isinstance(node, ast.Name):
            return self.resolve(module, node.id, depth + 1)
        if isinstance(node, ast.Attribute):
            base = self._expr(module, node.value, depth + 1)
            if base.kind == "module":
                return self.resolve(base.module, node.attr, depth + 1)
            return Target("unknown", why=f"an attribute of {ast.unparse(node.value)}")
        return Target("unknown", why="an expression")


# ---- signatures ----------------------------------------------------------------------------------
def _params(args: ast.arguments, drop_first: bool) -> list[str]:
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    out: list[str] = []
    kinds = ["p"] * len(args.posonlyargs) + ["n"] * len(args.args)
    items = list(zip(positional, defaults, kinds))
    if drop_first and items:
        items = items[1:]
    for arg, default, kind in items:
        out.append(arg.arg + ("=" if default is not None else ""))
        if kind == "p" and (arg is args.posonlyargs[-1]):
            out.append("/")
    if args.vararg:
        out.append("*" + args.vararg.arg)
    elif args.kwonlyargs:
        out.append("*")
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        out.append(arg.arg + ("=" if default is not None else ""))
    if args.kwarg:
        out.append("**" + args.kwarg.arg)
    return out


def _marks(release: Release, module: str, node: ast.FunctionDef | ast.ClassDef) -> list[str]:
    """`` +name`` for a decorator that passes its arguments through, `` @name`` for another."""
    out = []
    for name, d in zip(_decorators(node), node.decorator_list):
        if name in ("classmethod", "staticmethod"):
            continue
        out.append(f" +{name}" if release.wrapper(module, d) is not None else f" @{name}")
    return out


def _decorators(node: ast.FunctionDef | ast.ClassDef) -> list[str]:
    out = []
    for d in node.decorator_list:
        call = d.func if isinstance(d, ast.Call) else d
        name = _dotted(call) or "?"
        if name.rpartition(".")[2] == "partial" and isinstance(d, ast.Call) and d.args:
            name = f"partial({_dotted(d.args[0]) or '?'})"
        out.append(name)
    return out


def signature(release: Release, target: Target, depth: int = 0) -> str:
    """The pool text of a signature: ``(a, /, b=, *, c=, **kw)`` read from the definition;
    `` @deco`` for each decorator and `` ~how`` for each wrapper it was reached through (the
    reader counts those as not exact); ``?why`` where nothing can be read."""
    if target.kind == "def" and isinstance(target.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        text = "(" + ", ".join(_params(target.node.args, False)) + ")"
        marks = _marks(release, target.module, target.node)
    elif target.kind == "class" and isinstance(target.node, ast.ClassDef):
        found = _class_init(release, target, depth)
        if isinstance(found, str):
            return "?" + found
        text, marks = found
    elif target.kind == "unknown" and target.node is not None:
        inner = signature(release, Target("def" if isinstance(target.node, ast.FunctionDef)
                                          else "class", target.module, target.node), depth)
        return inner if inner.startswith("?") else inner + "".join(f" {w}" for w in target.wrappers)
    else:
        return "?" + (target.why or target.kind)
    return text + "".join(marks) + "".join(f" {w}" for w in target.wrappers)


def _class_init(release: Release, target: Target, depth: int) -> tuple[str, list[str]] | str:
    """A class's ``__init__`` (else ``__new__``), from the class or the nearest base class in the
    package that defines one; a class made a dataclass (by a decorator or a base) is marked."""
    node = target.node
    assert isinstance(node, ast.ClassDef)
    marks = [f" @{d}" for d in _decorators(node)]
    if any(k.arg == "metaclass" for k in node.keywords):
        marks.append(" ~metaclass")
    for stmt in node.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name in ("__init__", "__new__") and not any(
                _dotted(d) in ("overload", "typing.overload") for d in stmt.decorator_list):
            text = "(" + ", ".join(_params(stmt.args, True)) + ")"
            return text, marks + _marks(release, target.module, stmt)
    # (a dataclass keeps an __init__ of the class's own, and makes one otherwise)
    if any("dataclass" in d for d in _decorators(node)) or any(
            isinstance(s, ast.FunctionDef) and s.name == "__init_subclass__" and any(
                "dataclass" in (_dotted(n) or "") for n in ast.walk(s)) for s in node.body):
        return "a dataclass: its __init__ is made from the fields"
    if depth > 8:
        return "too deep a class hierarchy"
    for base in node.bases:
        if isinstance(base, ast.Subscript):  # Variable[A], Generic[T]
            base = base.value
        if not isinstance(base, (ast.Name, ast.Attribute)):
            continue
        resolved = release._expr(target.module, base, 0)
        if resolved.kind == "class" and _makes_dataclasses(resolved.node):  # type: ignore[arg-type]
            return "a dataclass: its __init__ is made from the fields (as its base's subclasses)"
        if resolved.kind == "class":
            found = _class_init(release, resolved, depth + 1)
            if isinstance(found, str):
                return found
            base_name = getattr(resolved.node, "name", "?")
            return found[0], marks + found[1] + [f" ~inherited from {resolved.module}.{base_name}"]
        name = _dotted(base) or ""
        if name.rpartition(".")[2] not in ("object", "Generic", "ABC", "Protocol"):
            return f"a base class read nowhere ({name}: {resolved.why or resolved.kind})"
    return "no __init__ of its own or of a base class in the package"


# ---- 4.: the table -------------------------------------------------------------------------------
# Modules whose every public function and class gets its signature read (besides every API of the
# catalogue): what rules advise and fixes write.
SIGNATURE_MODULES = (
    "jax", "jax.sharding", "jax.lax", "jax.tree", "jax.tree_util", "jax.experimental.pjit",
    "jax.experimental.shard_map", "jax.experimental.shard", "jax.experimental.mesh_utils",
    "jax.experimental.multihost_utils", "jax.ad_checkpoint",
    "flax.linen", "flax.linen.partitioning", "flax.linen.spmd", "flax.core.meta",
    "flax.core.spmd", "flax.nnx", "flax.nnx.spmd", "flax.training.train_state", "flax.jax_utils",
)
# Callables the rules name that the catalogue may not list by that spelling (a method's
# signature and the deprecation warning its body always gives are read too).
EXTRA_SIGNATURES = (
    "jax.sharding.Mesh.__enter__",  # (deprecated: `with mesh:`)
    "jax.jit", "jax.pmap", "jax.experimental.pjit.pjit", "jax.shard_map",
    "jax.experimental.shard_map.shard_map", "jax.make_mesh", "jax.set_mesh", "jax.device_put",
    "jax.sharding.use_mesh", "jax.sharding.Mesh", "jax.sharding.NamedSharding",
    "flax.nnx.jit", "flax.linen.jit", "flax.linen.with_logical_constraint",
    "flax.training.train_state.TrainState.create",
)


# Modules whose names are not kept (their modules are): kernels, TF export, sparse arrays --
# nothing a sharding rule asks about, and a tenth of the table. `exists` answers "not known".
NAMES_LEFT_OUT = ("jax.experimental.mosaic", "jax.experimental.pallas", "jax.experimental.jax2tf",
                  "jax.experimental.sparse", "jax.experimental.array_api")


def catalogue_names() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from shardlint.semantics.catalog.api import APIS

    return sorted({s for a in APIS for s in (a.name, *a.spellings)
                   if s.split(".")[0] in PACKAGES})


def metadata_facts(metadata: str) -> tuple[str, str | None]:
    """(Requires-Python, the lowest jax an unconditional Requires-Dist on jax allows)."""
    python, jax_floor = "", None
    for line in metadata.splitlines():
        if not line.strip():
            break  # (the headers end; the description follows)
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "Requires-Python":
            python = value
        elif key == "Requires-Dist" and re.match(r"jax\b(?!lib)", value) and ";" not in value:
            m = re.search(r">=\s*([0-9][0-9.]*)", value)
            if m:
                jax_floor = m.group(1).rstrip(".")
    return python, jax_floor


@dataclass
class ReleaseFacts:
    version: str
    kind: str
    python: str
    needs_jax: str | None
    modules: list[str]
    names: dict[str, list[str]]
    deprecated: dict[str, tuple[str, bool]]
    module_deprecated: dict[str, str]
    signatures: dict[str, str]
    warnings: dict[str, list[str]]  # module -> every deprecation message its code can give
    shadowed: list[str]  # submodules whose package binds their name to something else
    # (flax) what `import flax` imports from jax whatever the branch: ``jax.a.b`` a module, or
    # ``jax.a:b`` for ``from jax.a import b`` (a module or a name of jax.a, decided against jax)
    jax_imports: list[str] = field(default_factory=list)


def split_dotted(release: Release, dotted: str) -> tuple[str, str] | None:
    """(the longest module prefix the release has, the rest) for ``a.b.c``."""
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:i])
        if module in release.source.modules:
            return module, ".".join(parts[i:])
    return None


def read_release(package: str, version: str, path: Path, wanted: list[str]) -> ReleaseFacts:
    source = read_dist(path, package)
    release = Release(package, source)
    python, needs_jax = metadata_facts(source.metadata)
    modules = release.public_modules()
    names: dict[str, list[str]] = {}
    deprecated: dict[str, tuple[str, bool]] = {}
    module_deprecated: dict[str, str] = {}
    signatures: dict[str, str] = {}
    module_warnings: dict[str, list[str]] = {}
    shadowed: list[str] = []
    for module in modules:
        public = sorted(n for n in release.names(module) if not n.startswith("_"))
        names[module] = public
        for name, fact in release.deprecations(module).items():
            if not name.startswith("_"):
                deprecated[f"{module}.{name}"] = fact
        for name in public:
            if f"{module}.{name}" in deprecated:
                continue
            fact = release.reexported_deprecation(module, name)
            if fact is not None:
                deprecated[f"{module}.{name}"] = fact
                continue
            message = _body_warning(release.resolve(module, name))
            if message is not None:
                deprecated[f"{module}.{name}"] = (message, True)
        message = release.module_deprecation(module)
        if message is not None:
            module_deprecated[module] = message
        found = all_warnings(source.modules[module])
        if found:
            module_warnings[module] = found
        parent, _, last = module.rpartition(".")
        if parent and last in release.names(parent) and \
                release.resolve(parent, last).kind not in ("module", "unknown"):
            shadowed.append(module)  # (`jax.config`: the config object, not the submodule)
    want = set(wanted)
    for module in SIGNATURE_MODULES:
        if module in source.modules:
            want.update(f"{module}.{n}" for n in names.get(module, ()))
    for dotted in sorted(want):
        if not dotted.startswith(package + "."):
            continue
        found = split_dotted(release, dotted)
        if found is None:
            continue
        module, rest = found
        if "." in rest:  # a method: Class.method
            cls_name, _, method = rest.partition(".")
            target = release.resolve(module, cls_name)
            if target.kind != "class" or "." in method:
                continue
            node = next((s for s in target.node.body  # type: ignore[union-attr]
                         if isinstance(s, ast.FunctionDef) and s.name == method), None)
            if node is None:
                continue
            static = any(_dotted(d) in ("staticmethod",) for d in node.decorator_list)
            text = "(" + ", ".join(_params(node.args, not static)) + ")"
            marks = [f" @{d}" for d in _decorators(node)
                     if d not in ("classmethod", "staticmethod")]
            signatures[dotted] = text + "".join(marks)
            message = unconditional_warning(node.body)
            if message is not None:
                deprecated[dotted] = (message, True)
            continue
        if rest not in release.names(module):
            continue
        target = release.resolve(module, rest)
        if target.kind in ("module", "value"):
            continue
        signatures[dotted] = signature(release, target)
    return ReleaseFacts(version, source.kind, python, needs_jax, modules, names, deprecated,
                        module_deprecated, signatures, module_warnings, shadowed,
                        unconditional_imports(source, package, "jax") if package == "flax" else [])


def unconditional_imports(source: Source, package: str, other: str) -> list[str]:
    """What ``import <package>`` imports from ``other`` in every case: the module-level import
    statements outside ``if`` / ``try`` of the modules it loads (its own imports followed,
    ``a.b.c`` loading ``a`` and ``a.b`` first). ``other.a.b`` is a module; ``other.a:b`` is
    ``from other.a import b``, a module or a name of ``other.a``."""
    out: set[str] = set()
    seen: set[str] = set()
    todo = [package]
    while todo:
        module = todo.pop()
        if module in seen or module not in source.modules:
            continue
        seen.add(module)
        parts = module.split(".")
        todo.extend(".".join(parts[:i]) for i in range(1, len(parts)))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                tree = ast.parse(source.modules[module])
            except SyntaxError:
                continue
        for stmt in tree.body:
            if isinstance(stmt, ast.Import):
                targets = [(a.name, None) for a in stmt.names]
            elif isinstance(stmt, ast.ImportFrom):
                base = _absolute(module, module in source.packages, stmt.level, stmt.module)
                targets = [(base, a.name) for a in stmt.names if a.name != "*"] or [(base, None)]
            else:
                continue
            for base, name in targets:
                if base == package or base.startswith(package + "."):
                    todo.append(base)
                    if name is not None:
                        todo.append(f"{base}.{name}")
                elif base == other or base.startswith(other + "."):
                    out.add(base if name is None else f"{base}:{name}")
    return sorted(out)


def runs_with(facts: list[ReleaseFacts], other: list[ReleaseFacts]) -> list[str | None]:
    """Per release of ``facts``, the newest release of ``other`` at which everything it imports
    from ``other`` whatever the branch exists (a module, or a name a module binds); None where
    even the oldest ``other`` lacks one (a release newer than the table's)."""
    known = {m for f in other for m in f.modules}
    named = {(m, n) for f in other for m, ns in f.names.items() for n in ns}
    out: list[str | None] = []
    for f in facts:
        needs: list[tuple[str, str | None]] = []
        for item in f.jax_imports:
            base, _, name = item.partition(":")
            if name and f"{base}.{name}" in known:
                base, name = f"{base}.{name}", ""
            if base not in known or (name and (base, name) not in named):
                continue  # (a private module, a name no release lists: not known, no bound)
            needs.append((base, name or None))
        newest = None
        for o in other:
            have = set(o.modules)
            if all(base in have and (name is None or name in o.names.get(base, ()))
                   for base, name in needs):
                newest = o.version
        out.append(newest)
    return out


def all_warnings(text: str) -> list[str]:
    """Every deprecation message the module's code can give, under any condition (a deprecated
    keyword, value or behaviour: what names alone cannot show)."""
    if "eprecat" not in text:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            return []
    found = {m for node in ast.walk(tree) if (m := _is_deprecation_warning(node))}
    return sorted(found)


def _body_warning(target: Target) -> str | None:
    if target.kind == "def" and isinstance(target.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return unconditional_warning(target.node.body)
    if target.kind == "class" and isinstance(target.node, ast.ClassDef):
        init = next((s for s in target.node.body if isinstance(s, ast.FunctionDef)
                     and s.name == "__init__"), None)
        return unconditional_warning(init.body) if init is not None else None
    return None


def runs(indices: list[int]) -> str:
    """Sorted release indices as runs: ``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    out: list[str] = []
    start = prev = None
    for i in sorted(indices):
        if prev is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = prev = i
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ",".join(out)


def _grouped(presence: dict[str, list[int]]) -> dict[str, str]:
    """name -> indices, as runs -> the names present in exactly those releases (space-joined)."""
    by_runs: dict[str, list[str]] = {}
    for name, indices in presence.items():
        by_runs.setdefault(runs(indices), []).append(name)
    return {key: " ".join(sorted(v)) for key, v in sorted(by_runs.items())}


def _valued(values: dict[str, dict[int, object]], pool: list, index: dict) -> dict[str, list]:
    """dotted -> [[runs, pool index], ...] for a value that may change from release to release."""
    out: dict[str, list] = {}
    for dotted in sorted(values):
        per_value: dict[object, list[int]] = {}
        for i, value in values[dotted].items():
            per_value.setdefault(value, []).append(i)
        entry = []
        for value, indices in sorted(per_value.items(), key=lambda kv: min(kv[1])):
            if value not in index:
                index[value] = len(pool)
                pool.append(value if not isinstance(value, tuple) else list(value))
            entry.append([runs(indices), index[value]])
        out[dotted] = entry
    return out


def package_table(package: str, facts: list[ReleaseFacts],
                  skipped: dict[str, str]) -> tuple[dict, dict]:
    modules: dict[str, list[int]] = {}
    names: dict[str, dict[str, list[int]]] = {}
    deprecated: dict[str, dict[int, object]] = {}
    module_deprecated: dict[str, dict[int, object]] = {}
    signatures: dict[str, dict[int, object]] = {}
    module_warnings: dict[str, dict[str, list[int]]] = {}
    shadowed: dict[str, list[int]] = {}
    for i, f in enumerate(facts):
        for module in f.shadowed:
            shadowed.setdefault(module, []).append(i)
        for module, found in f.warnings.items():
            for message in found:
                module_warnings.setdefault(module, {}).setdefault(message, []).append(i)
        for module in f.modules:
            modules.setdefault(module, []).append(i)
            for name in f.names[module]:
                names.setdefault(module, {}).setdefault(name, []).append(i)
        for dotted, (message, present) in f.deprecated.items():
            deprecated.setdefault(dotted, {})[i] = (message, int(present))
        for module, message in f.module_deprecated.items():
            module_deprecated.setdefault(module, {})[i] = (message, 1)
        for dotted, sig in f.signatures.items():
            signatures.setdefault(dotted, {})[i] = sig
    messages: list = []
    message_index: dict = {}
    sigs: list = []
    sig_index: dict = {}
    dep = _valued(deprecated, messages, message_index)
    mod_dep = _valued(module_deprecated, messages, message_index)
    warned: dict[str, list] = {}
    for module, per_message in sorted(module_warnings.items()):
        for message, indices in per_message.items():
            key = (message, 1)
            if key not in message_index:
                message_index[key] = len(messages)
                messages.append(list(key))
            warned.setdefault(module, []).append([runs(indices), message_index[key]])
    releases = {
        "versions": [f.version for f in facts],
        "sdist": runs([i for i, f in enumerate(facts) if f.kind == "sdist"]),
        "skipped": skipped,
        "python": [f.python for f in facts],
        **({"needs_jax": [f.needs_jax for f in facts]} if package == "flax" else {}),
    }
    return releases, {
        "modules": _grouped(modules),
        # submodules whose package binds their name to another object (`jax.config`): an
        # attribute chain through them reads the object
        "shadowed": _grouped(shadowed),
        "names": {m: _grouped(n) for m, n in sorted(names.items())
                  if not m.startswith(NAMES_LEFT_OUT)},
        # message pool entries are [message, 1 if the name still answers else 0]
        "deprecated": {k: [[r, i] for r, i in v] for k, v in dep.items()},
        "module_deprecated": mod_dep,
        # module -> [[runs, message], ...]: every deprecation warning its code can give
        "warnings": warned,
        "messages": messages,
        "signatures": _valued(signatures, sigs, sig_index),
        "sigs": sigs,
    }


def _read_one(job: tuple[str, str, str, list[str]]) -> ReleaseFacts:
    package, version, path, wanted = job
    return read_release(package, version, Path(path), wanted)


def catalogue_section() -> dict[str, list[str | None]]:
    """Canonical name of every jax/flax API of the catalogue -> [the first release that has it
    (None: the oldest read has it, or none does), the first that deprecates it, the first that no
    longer has it], read through the reader from the table just written: what ``api.py`` takes
    without decoding the whole table at start-up."""
    sys.path.insert(0, str(ROOT))
    from shardlint.semantics.catalog import api, facts

    for cached in (facts._head, facts._table, facts._modules, facts._names, facts._shadowed,
                   facts.release_index):
        cached.cache_clear()
    out: dict[str, list[str | None]] = {}
    for a in api.APIS:
        if a.package not in PACKAGES:
            continue
        first = facts.first_release(a.name)
        deprecation = facts.deprecated_in(a.name)
        out[a.name] = [first if first != facts.releases(a.package)[0] else None,
                       deprecation.version if deprecation else None, facts.removed_in(a.name)]
    return out


def write(path: Path, head: dict, tables: dict) -> int:
    """The release lists (and the catalogue's facts) alone on the first line: the reader takes
    them at every lint's start-up without decoding the rest; the file is one JSON document."""
    compact = {"separators": (",", ":")}
    first = json.dumps(head, **compact)  # type: ignore[arg-type]
    text = first[:-1] + "\n," + json.dumps(tables, **compact)[1:] + "\n"  # type: ignore[arg-type]
    path.write_text(text, encoding="utf-8")
    return len(text.encode())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wheels", type=Path, default=cache_dir(),
                        help="where the downloaded releases are kept (default %(default)s)")
    parser.add_argument("--offline", action="store_true",
                        help="read the releases the folder holds; ask the registry nothing")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1),
                        help="downloads and readers at once")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--catalogue-only", action="store_true",
                        help="only refresh the catalogue's facts on the first line from the table "
                             "as it is (after a name is added to catalog/api.py)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if args.catalogue_only:
        text = args.out.read_text(encoding="utf-8")
        line, _, rest = text.partition("\n")
        head = json.loads(line + "}")
        tables = json.loads("{" + rest[1:])
        head["catalogue"] = catalogue_section()
        size = write(args.out, head, tables)
        print(f"wrote the catalogue's facts to {args.out} ({size / 1024:.0f} KiB)", file=sys.stderr)
        return 0
    folder: Path = args.wheels.expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    wanted = sorted(set(catalogue_names()) | set(EXTRA_SIGNATURES))
    releases: dict = {}
    tables: dict = {}
    read: dict[str, list[ReleaseFacts]] = {}
    for package in PACKAGES:
        if args.offline:
            found = {m.group(1) for p in folder.iterdir()
                     if (m := re.match(rf"{package}-([0-9][0-9.]*?)(?:-py[0-9.]+-none-any\.whl|"
                                       rf"\.tar\.gz)$", p.name))}
            versions = sorted((v for v in found if vkey(v) >= SINCE[package]), key=vkey)
        else:
            versions = registry_versions(package)
        skipped: dict[str, str] = {}
        with ThreadPoolExecutor(args.jobs) as pool:
            got = list(pool.map(lambda v: download(folder, package, v), versions))
        jobs = []
        for version, (path, why) in zip(versions, got):
            if path is None:
                skipped[version] = why
            else:
                jobs.append((package, version, str(path), wanted))
        if args.jobs > 1:
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(args.jobs) as pool:
                facts = list(pool.map(_read_one, jobs))
        else:
            facts = [_read_one(j) for j in jobs]
        releases[package], tables[package] = package_table(package, facts, skipped)
        read[package] = facts
        kinds = {k: sum(f.kind == k for f in facts) for k in ("wheel", "sdist")}
        print(f"{package}: {len(facts)} releases read ({facts[0].version} .. {facts[-1].version};"
              f" {kinds['wheel']} wheels, {kinds['sdist']} sdists), {len(skipped)} skipped",
              file=sys.stderr)
        for version, why in skipped.items():
            print(f"  skipped {package} {version}: {why}", file=sys.stderr)
    # the newest jax each flax release imports with: what it imports from jax exists there
    releases["flax"]["runs_with_jax"] = runs_with(read["flax"], read["jax"])
    head = {"format": FORMAT, "releases": releases}
    write(args.out, head, tables)
    head["catalogue"] = catalogue_section()
    size = write(args.out, head, tables)
    print(f"wrote {args.out} ({size / 1024:.0f} KiB) in {time.monotonic() - started:.0f} s",
          file=sys.stderr)
    return 0



def passes_through(outer: ast.FunctionDef) -> bool:
    """Whether ``outer(fun, ...)`` returns a function ``(*args, **kwargs)`` that only ever calls
    ``fun(*args, **kwargs)`` and touches neither (a traceback filter, a deprecation warning)."""
    params = [*outer.args.posonlyargs, *outer.args.args]
    if not params:
        return False
    fun = params[0].arg
    inner = next((s for s in outer.body if isinstance(s, ast.FunctionDef)), None)
    if inner is None or inner.args.args or inner.args.posonlyargs or inner.args.kwonlyargs \
            or inner.args.vararg is None or inner.args.kwarg is None:
        return False
    star, kw = inner.args.vararg.arg, inner.args.kwarg.arg
    calls = 0
    for node in ast.walk(inner):
        if isinstance(node, ast.Name) and node.id in (star, kw) and \
                not isinstance(node.ctx, ast.Load):
            return False
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id in (star, kw):
            return False  # kwargs.pop(...), args.count ...
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == fun:
            exact = (len(node.args) == 1 and isinstance(node.args[0], ast.Starred)
                     and isinstance(node.args[0].value, ast.Name) and node.args[0].value.id == star
                     and len(node.keywords) == 1 and node.keywords[0].arg is None
                     and isinstance(node.keywords[0].value, ast.Name)
                     and node.keywords[0].value.id == kw)
            if not exact:
                return False
            calls += 1
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and \
                node.value.id in (star, kw):
            return False  # args[0], kwargs["fun"]
    returns = [r for r in ast.walk(outer) if isinstance(r, ast.Return)
               and not _inside(r, inner)]
    for r in returns:
        value = r.value
        if isinstance(value, ast.Call) and (_dotted(value.func) or "").endswith("cast"):
            value = value.args[-1] if value.args else None
        if not (isinstance(value, ast.Name) and value.id == inner.name):
            return False
    return calls > 0 and bool(returns)


def _inside(node: ast.AST, tree: ast.AST) -> bool:
    return any(n is node for n in ast.walk(tree))


def _makes_dataclasses(node: ast.ClassDef) -> bool:
    """Whether the subclasses of this class are dataclasses (``typing.dataclass_transform``, or
    an ``__init_subclass__`` that makes one)."""
    return any("dataclass_transform" in d for d in _decorators(node)) or any(
        isinstance(s, ast.FunctionDef) and s.name == "__init_subclass__" and any(
            "dataclass" in (_dotted(n) or "") for n in ast.walk(s)) for s in node.body)


if __name__ == "__main__":
    sys.exit(main())
