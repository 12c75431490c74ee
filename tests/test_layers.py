"""The layers of ``shardlint/`` hold (docs/architecture.md): no import in ``semantics/`` points
up a layer or across the two topic packages, no import closes a cycle anywhere in ``shardlint/``,
no folder of ``shardlint/`` holds more than 15 modules, each rule sits in the package of its
code's family, and every package's docstring says what it holds and what it may import.

Imports are read with ``ast``, everywhere in a file: at the top, inside functions, under
``if TYPE_CHECKING:``. A function-level import hides a cycle from Python, not from this test.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "shardlint"
SEMANTICS = "shardlint.semantics"
# Each sub-package of shardlint.semantics and its layer: a module may import its own package
# and packages of a lower layer only (two packages of the same layer: neither imports the other).
LAYERS = {"catalog": 0, "file": 1, "flow": 2, "buffers": 3, "sharding": 3}
MAX_MODULES = 15


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int]]:
    """The shardlint modules ``name`` imports (``from pkg import module`` names the module), with
    the line of each import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            for a in node.names:
                full = f"{module}.{a.name}"
                out.append((full if full in known else module, node.lineno))
    return [(m, line) for m, line in out if m.split(".")[0] == "shardlint"]


def graph() -> dict[str, list[tuple[str, int]]]:
    known = modules()
    return {name: [(m, line) for m, line in imports(name, path, known) if m in known and m != name]
            for name, path in known.items()}


def layer_of(module: str) -> str | None:
    """The semantics sub-package a module belongs to (None: outside, or the package itself)."""
    parts = module.split(".")
    if parts[:2] != ["shardlint", "semantics"] or len(parts) < 3:
        return None
    return parts[2]


def layer_violations(edges: dict[str, list[tuple[str, int]]]) -> list[str]:
    bad = []
    for module, targets in edges.items():
        mine = layer_of(module)
        for target, line in targets:
            theirs = layer_of(target)
            if module.startswith(SEMANTICS) and target.startswith("shardlint.") \
                    and not target.startswith(SEMANTICS) and target not in ALLOWED_BELOW:
                bad.append(f"{module}:{line} imports {target}, which is not below semantics")
            if mine is None or theirs is None or mine == theirs:
                continue
            if mine not in LAYERS or theirs not in LAYERS:
                bad.append(f"{module}:{line} imports {target}: a package with no layer")
            elif LAYERS[theirs] >= LAYERS[mine]:
                bad.append(f"{module}:{line} imports {target}: {mine} may not import {theirs}")
    return bad


# What shardlint.semantics may import of shardlint outside itself: the syntax helpers only.
ALLOWED_BELOW = {"shardlint.syntax"}


def cycles(edges: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), and self-imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w, _ in edges.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_every_semantics_folder_is_a_layer():
    folders = {p.name for p in (PACKAGE / "semantics").iterdir()
               if p.is_dir() and p.name != "__pycache__"}
    assert folders == set(LAYERS), "a semantics sub-package without a layer in LAYERS"
    loose = [p.name for p in (PACKAGE / "semantics").glob("*.py") if p.name != "__init__.py"]
    assert not loose, f"modules outside the layers: {loose}"


def test_no_import_points_up_a_layer():
    assert layer_violations(graph()) == []


def test_no_import_cycle():
    assert cycles(graph()) == []


def folders() -> list[Path]:
    return sorted([PACKAGE, *[p for p in PACKAGE.rglob("*") if p.is_dir()
                             and (p / "__init__.py").exists()]], key=str)


@pytest.mark.parametrize("folder", folders(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_folder_size(folder: Path):
    where = folder.relative_to(ROOT).as_posix()
    count = len([p for p in folder.glob("*.py") if p.name != "__init__.py"])
    assert count <= MAX_MODULES, f"{where} has {count} modules (at most {MAX_MODULES})"


@pytest.mark.parametrize("folder", folders(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_package_says_what_it_holds_and_may_import(folder: Path):
    init = folder / "__init__.py"
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    assert "Holds:" in doc and "May import:" in doc, f"{init.relative_to(ROOT)}"


# The family package of each hundred of rule codes (SHL000, a file that does not parse, sits in
# rules/ itself next to the framework).
FAMILIES = {"0": "", "1": "contexts", "2": "partitioning", "3": "placement", "4": "buffers",
            "5": "versions"}


def test_each_rule_sits_in_its_family():
    rules = PACKAGE / "rules"
    for path in sorted(rules.rglob("shl*.py")):
        where = path.parent.relative_to(rules).as_posix().replace(".", "")
        family = FAMILIES.get(path.name[3])
        assert where == family, f"{path.relative_to(ROOT)}: its family is rules/{family}"
    families = {p.name for p in rules.iterdir() if (p / "__init__.py").exists()}
    assert families == set(FAMILIES.values()) - {""}


# -- the checks themselves -------------------------------------------------------------------------
def test_a_function_level_cycle_is_found():
    edges = {"shardlint.a": [("shardlint.b", 1)], "shardlint.b": [("shardlint.a", 9)]}
    assert cycles(edges) == [["shardlint.a", "shardlint.b"]]


def test_an_upward_import_is_found(tmp_path):
    down = "shardlint.semantics.file.facts"
    up = "shardlint.semantics.flow.project"
    assert layer_violations({down: [(up, 3)]}) == [
        f"{down}:3 imports {up}: file may not import flow"]
    assert layer_violations({up: [(down, 3)]}) == []
    sibling = "shardlint.semantics.sharding.usage"
    assert layer_violations({"shardlint.semantics.buffers.jitted": [(sibling, 1)]})
    assert layer_violations({down: [("shardlint.engine", 1)]})


def test_imports_are_read_inside_functions(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from shardlint.semantics.flow import project\n")
    known = {"shardlint.semantics.flow.project": path}
    assert imports("shardlint.x", path, known) == [("shardlint.semantics.flow.project", 2)]
