"""The code a probe reaches, read with stdlib `ast`: which definitions its call can run.

A static finding is tied to a measured leaf only when it lies in code the probe runs, so a
`model.init` without axis rules in some other script of the project never explains this probe's
leaves. The walk is by name: from the probe function to the top-level functions, classes and
module-level assignments it mentions, in its own file and in project modules it imports
(`from pkg.model import Transformer`, `import pkg.model as m; m.Transformer`). Names that resolve
outside the project (jax, flax) end the walk.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

_MAX_DEFINITIONS = 5000  # a probe that reaches more than this is a whole program; stop there


@dataclass
class _Module:
    path: Path
    package: str  # dotted package the file belongs to ("" at a root)
    definitions: dict[str, list[ast.stmt]]  # top-level name -> statements that bind it
    imports: dict[str, tuple[str, str | None]]  # local name -> (module, attribute or None)


@dataclass
class Reach:
    """Definitions the probe reaches, as line ranges per file (1-based, inclusive)."""

    spans: dict[Path, list[tuple[int, int]]] = field(default_factory=dict)

    @property
    def files(self) -> list[Path]:
        return sorted(self.spans)

    def contains(self, path: Path, line: int) -> bool:
        return any(start <= line <= end for start, end in self.spans.get(path, ()))


def _package_of(path: Path) -> tuple[Path, str]:
    """(folder the top package sits in, dotted package of the file)."""
    parts: list[str] = []
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.insert(0, folder.name)
        folder = folder.parent
    return folder, ".".join(parts)


def _parse(path: Path) -> _Module | None:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return None
    _, package = _package_of(path)
    definitions: dict[str, list[ast.stmt]] = {}
    imports: dict[str, tuple[str, str | None]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            definitions.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        definitions.setdefault(name.id, []).append(node)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    imports[alias.asname] = (alias.name, None)
                else:
                    top = alias.name.split(".")[0]
                    imports[top] = (top, None)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".") if package else []
                parent = parent[: len(parent) - (node.level - 1)] if node.level > 1 else parent
                base = ".".join([*parent, base] if base else parent)
            for alias in node.names:
                imports[alias.asname or alias.name] = (base, alias.name)
    return _Module(path, package, definitions, imports)


def _referenced(nodes: list[ast.stmt]) -> Iterator[tuple[str, tuple[str, ...]]]:
    """(name, attribute chain) of every name read in the statements: `m.f.g` -> ("m", ("f", "g"))."""
    for stmt in nodes:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Attribute):
                chain: list[str] = []
                inner: ast.expr = node
                while isinstance(inner, ast.Attribute):
                    chain.insert(0, inner.attr)
                    inner = inner.value
                if isinstance(inner, ast.Name):
                    yield inner.id, tuple(chain)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                yield node.id, ()


class _Walker:
    def __init__(self, roots: list[Path]) -> None:
        self.roots = roots
        self.modules: dict[Path, _Module | None] = {}

    def module(self, path: Path) -> _Module | None:
        if path not in self.modules:
            self.modules[path] = _parse(path)
        return self.modules[path]

    def find(self, dotted: str) -> Path | None:
        """The project file of a dotted module name, or None outside the project."""
        if not dotted:
            return None
        rel = Path(*dotted.split("."))
        for root in self.roots:
            for candidate in (root / rel.with_suffix(".py"), root / rel / "__init__.py"):
                if candidate.is_file():
                    return candidate.resolve()
        return None


def probe_reach(path: Path, function: str, project_root: Path) -> Reach:
    """What calling `function` of `path` can run, as far as names tell."""
    path = path.resolve()
    package_root, _ = _package_of(path)
    walker = _Walker([package_root, path.parent, project_root, project_root / "src"])
    reach = Reach()
    seen: set[tuple[Path, str]] = set()
    work: list[tuple[Path, str]] = [(path, function)]
    while work and len(seen) < _MAX_DEFINITIONS:
        file, name = work.pop()
        if (file, name) in seen:
            continue
        seen.add((file, name))
        module = walker.module(file)
        if module is None:
            continue
        nodes = module.definitions.get(name)
        if nodes is None:
            target = module.imports.get(name)  # re-exported through this module
            if target is not None:
                work.extend(_resolve(walker, target, ()))
            continue
        spans = reach.spans.setdefault(file, [])
        for node in nodes:
            # (a decorator belongs to its definition: `@jax.jit` is where SHL401 points)
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
            span = (first, node.end_lineno or node.lineno)
            if span not in spans:  # `A, B = ...` binds two names in one statement
                spans.append(span)
        for ref, chain in _referenced(nodes):
            if ref in module.definitions:
                work.append((file, ref))
            elif ref in module.imports:
                work.extend(_resolve(walker, module.imports[ref], chain))
    reach.spans.setdefault(path, [])
    return reach


def _resolve(
    walker: _Walker, target: tuple[str, str | None], chain: tuple[str, ...]
) -> list[tuple[Path, str]]:
    module, attribute = target
    if attribute is not None:
        file = walker.find(module)
        if file is not None:
            return [(file, attribute)]
        sub = walker.find(f"{module}.{attribute}")  # `from pkg import model` is a module
        return [(sub, chain[0])] if sub is not None and chain else []
    # `import pkg.model as m` then `m.Transformer`, or `import pkg` then `pkg.model.Transformer`.
    for depth in range(len(chain), -1, -1):
        file = walker.find(".".join([module, *chain[:depth]]))
        if file is not None and depth < len(chain):
            return [(file, chain[depth])]
    return []
