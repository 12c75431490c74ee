"""Recall on real code: delete what the authors wrote to avoid a pitfall, lint, count what is noticed.

Each *kind* finds the places in the benchmark corpus (the flax, optax, maxtext, praxis and
easydel wheels that ``bench/lint_speed.py`` fetches, at pinned versions) where the authors wrote
the remedy of a pitfall, and undoes one of them at a time: the mutated file is linted inside its
whole package (the other files as they are, through the project index, as an editor would see
it), and the site counts as found when the rule reports it there.

    python bench/recall.py [--kinds donation ...] [--packages ...] [--findings] [--verbose]

Prints, per kind: the sites, how many were found, recall, and every miss with its reason class
from ``bench/recall_reasons.toml`` (hand-written: why the analysis cannot or does not see it);
a miss with no reason there is printed as UNEXPLAINED. Sites that are not a remedy the authors
chose (a wrapper forwarding its own ``donate_argnums`` parameter) are listed apart, not counted.
``--findings`` also prints the kind's findings on the unmutated corpus, to check precision by
hand in the same run.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import time
import tomllib
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lint_speed import PACKAGES, fetch  # noqa: E402

from shardlint.semantics.catalog import facts  # noqa: E402

REASONS = Path(__file__).with_name("recall_reasons.toml")


@dataclass
class Site:
    """One remedy the authors wrote, and the text of its file without it."""

    kind: str
    path: Path  # the file
    rel: str  # its path in the corpus ("maxtext/maxtext/utils/train_utils.py")
    key: str  # stable id: "rel:enclosing.qualname:what#n"
    line: int
    end_line: int
    what: str  # as written ("donate_argnums=(0,)")
    mutated: str
    codes: tuple[str, ...]  # the rules that should report it
    excluded: str | None = None  # why this is not a site (not counted)


# ---- text edits ----------------------------------------------------------------------------------
class Offsets:
    """Character offsets of (line, UTF-8 column) positions of one text."""

    def __init__(self, text: str):
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for ln in self.lines:
            self.starts.append(self.starts[-1] + len(ln))

    def at(self, line: int, col: int) -> int:
        raw = self.lines[line - 1].encode("utf-8")[:col]
        return self.starts[line - 1] + len(raw.decode("utf-8", errors="replace"))

    def start(self, node: ast.AST) -> int:
        return self.at(node.lineno, node.col_offset)  # type: ignore[attr-defined]

    def end(self, node: ast.AST) -> int:
        return self.at(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]


def remove_keyword(text: str, call: ast.Call, kw: ast.keyword) -> str:
    """``call`` without the keyword argument ``kw`` (and the comma that separated it)."""
    off = Offsets(text)
    items: list[ast.AST] = sorted([*call.args, *call.keywords],
                                  key=lambda n: (n.lineno, n.col_offset))  # type: ignore[attr-defined]
    i = next(j for j, n in enumerate(items) if n is kw)
    if i > 0:
        start, end = off.end(items[i - 1]), off.end(kw)
    elif i + 1 < len(items):
        start, end = off.start(kw), off.start(items[i + 1])
    else:
        start, end = off.start(kw), off.end(kw)
        # a trailing comma after the only argument: `f(\n  donate_argnums=0,\n)`
        rest = text[end:]
        stripped = rest.lstrip()
        if stripped.startswith(","):
            end += len(rest) - len(stripped) + 1
    return text[:start] + text[end:]


def scopes(tree: ast.Module) -> Iterator[tuple[ast.AST, str, list[ast.AST]]]:
    """Every node with the qualified name of its enclosing function/class and that chain."""
    todo: list[tuple[ast.AST, str, list[ast.AST]]] = [(tree, "", [])]
    while todo:
        node, qual, chain = todo.pop()
        yield node, qual, chain
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = f"{qual}.{child.name}" if qual else child.name
                todo.append((child, q, [*chain, child]))
            else:
                todo.append((child, qual, chain))


# ---- kinds ---------------------------------------------------------------------------------------
DONATE = ("donate_argnums", "donate_argnames")


def donation_sites(path: Path, rel: str, text: str, tree: ast.Module) -> Iterator[Site]:
    """Every ``donate_argnums=``/``donate_argnames=`` keyword of a call (jit, pjit, pmap,
    ``partial(jax.jit, ...)``, nnx.jit, a wrapper): removing it should give SHL401."""
    seen: Counter[str] = Counter()
    found = []
    for node, qual, chain in scopes(tree):
        if not isinstance(node, ast.Call):
            continue
        for kw in node.keywords:
            if kw.arg not in DONATE:
                continue
            what = f"{kw.arg}={ast.unparse(kw.value)}"
            found.append((node.lineno, node.col_offset, node, kw, qual, chain, what))
    for line, _, node, kw, qual, chain, what in sorted(found, key=lambda x: x[:2]):
        base = f"{rel}:{qual or '<module>'}:{kw.arg}"
        seen[base] += 1
        excluded = None
        params = {a.arg for fn in chain if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]}
        if isinstance(kw.value, ast.Name) and kw.value.id in params:
            excluded = "forwards a parameter of its function (a jit wrapper's implementation)"
        value = kw.value
        if isinstance(value, (ast.Tuple, ast.List)) and not value.elts:
            excluded = "donates nothing"
        yield Site("donation", path, rel, f"{base}#{seen[base]}", line, node.end_lineno or line,
                   what, remove_keyword(text, node, kw), ("SHL401",), excluded)


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def legacy_mesh_sites(path: Path, rel: str, text: str, tree: ast.Module) -> Iterator[Site]:
    """Every ``with jax.set_mesh(m):`` (or ``jax.sharding.use_mesh(m)``) item: put back as the
    legacy ``with m:``, it should give SHL101."""
    off = Offsets(text)
    seen: Counter[str] = Counter()
    for node, qual, _ in sorted(scopes(tree), key=lambda x: (getattr(x[0], "lineno", 0),
                                                           getattr(x[0], "col_offset", 0))):
        if not isinstance(node, (ast.With, ast.AsyncWith)):
            continue
        for item in node.items:
            e = item.context_expr
            name = _dotted(e.func) if isinstance(e, ast.Call) else None
            if name is None or name.rsplit(".", 1)[-1] not in ("set_mesh", "use_mesh") \
                    or len(e.args) != 1 or e.keywords:
                continue
            arg = ast.get_source_segment(text, e.args[0])
            if arg is None:
                continue
            base = f"{rel}:{qual or '<module>'}:with {name}"
            seen[base] += 1
            mutated = text[:off.start(e)] + arg + text[off.end(e):]
            yield Site("legacy-mesh", path, rel, f"{base}#{seen[base]}", e.lineno,
                       e.end_lineno or e.lineno, f"with {ast.get_source_segment(text, e)}",
                       mutated, ("SHL101",))


_LIFTS = ("vmap", "scan", "remat_scan", "map", "pmap")


def partition_name_sites(path: Path, rel: str, text: str, tree: ast.Module) -> Iterator[Site]:
    """Every partition name given to a lifted transform (``metadata_params={nn.PARTITION_NAME:
    ...}`` of ``nn.vmap``/``nn.scan``, ``transform_metadata={nnx.PARTITION_NAME: ...}`` of
    ``nnx.vmap``/``nnx.scan``): removed, it should give SHL203."""
    seen: Counter[str] = Counter()
    found = []
    for node, qual, _ in scopes(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Call):  # partial(nn.scan, ...)(...)
            continue
        name = _dotted(func) or ""
        inner = _dotted(node.args[0]) if name.endswith("partial") and node.args else None
        last = (inner or name).rsplit(".", 1)[-1]
        if last not in _LIFTS:
            continue
        for kw in node.keywords:
            if kw.arg not in ("metadata_params", "transform_metadata") \
                    or not isinstance(kw.value, ast.Dict):
                continue
            keys = [_dotted(k) or (k.value if isinstance(k, ast.Constant) else "")
                    for k in kw.value.keys if k is not None]
            if not any(str(k).endswith(("PARTITION_NAME", "partition_name")) for k in keys):
                continue
            found.append((node, kw, qual))
    for node, kw, qual in sorted(found, key=lambda x: (x[0].lineno, x[0].col_offset)):
        base = f"{rel}:{qual or '<module>'}:{kw.arg}"
        seen[base] += 1
        yield Site("partition-name", path, rel, f"{base}#{seen[base]}", node.lineno,
                   node.end_lineno or node.lineno,
                   f"{kw.arg}={ast.get_source_segment(text, kw.value)}",
                   remove_keyword(text, node, kw), ("SHL203",))


# jax.tree.X -> the top-level alias jax.tree_X that jax removed (0.6.0), where one ever existed:
# the release table says `jax.tree_reduce` and `jax.tree_all` never did, so writing them back
# makes code no release ran, not a pitfall.
_TREE_ALIASES = {short: alias for short, alias in {
    "map": "tree_map", "leaves": "tree_leaves", "flatten": "tree_flatten",
    "unflatten": "tree_unflatten", "structure": "tree_structure", "reduce": "tree_reduce",
    "transpose": "tree_transpose", "all": "tree_all"}.items()
    if facts.first_release(f"jax.{alias}") is not None}


def tree_api_sites(path: Path, rel: str, text: str, tree: ast.Module) -> Iterator[Site]:
    """Every ``jax.tree.map(...)`` (and the other ``jax.tree.*`` with a removed ``jax.tree_*``
    alias), written back as the alias: SHL501."""
    off = Offsets(text)
    seen: Counter[str] = Counter()
    for node, qual, _ in sorted(scopes(tree), key=lambda x: (getattr(x[0], "lineno", 0),
                                                           getattr(x[0], "col_offset", 0))):
        if not (isinstance(node, ast.Attribute) and node.attr in _TREE_ALIASES
                and isinstance(node.value, ast.Attribute) and node.value.attr == "tree"
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "jax"):
            continue
        alias = _TREE_ALIASES[node.attr]
        base = f"{rel}:{qual or '<module>'}:jax.tree.{node.attr}"
        seen[base] += 1
        mutated = text[:off.start(node)] + f"jax.{alias}" + text[off.end(node):]
        yield Site("tree-api", path, rel, f"{base}#{seen[base]}", node.lineno,
                   node.end_lineno or node.lineno, f"jax.tree.{node.attr} -> jax.{alias}",
                   mutated, ("SHL501",))


def _yaml_entries(text: str):
    """(key, logical name, [(start, end) character spans of its entries]) of each YAML table."""
    import yaml

    off = Offsets(text)
    out = []
    try:
        docs = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError:
        return out
    todo = [d for d in docs if d is not None]
    while todo:
        node = todo.pop()
        if not isinstance(node, yaml.MappingNode):
            continue
        for k, v in node.value:
            if isinstance(v, yaml.MappingNode):
                todo.append(v)
            if not (isinstance(k, yaml.ScalarNode) and isinstance(v, yaml.SequenceNode)
                    and "rules" in k.value):
                continue
            spans: dict[str, list] = {}
            for e in v.value:
                if isinstance(e, yaml.SequenceNode) and len(e.value) == 2 \
                        and isinstance(e.value[0], yaml.ScalarNode):
                    start = off.starts[e.start_mark.line] + e.start_mark.column
                    end = off.starts[e.end_mark.line] + e.end_mark.column
                    spans.setdefault(e.value[0].value, []).append((start, end))
            out.extend((k.value, name, sp) for name, sp in spans.items())
    return out


def _without(text: str, spans) -> str:
    """``text`` without the entries at ``spans`` and the comma after each."""
    for start, end in sorted(spans, reverse=True):
        rest = text[end:]
        stripped = rest.lstrip(" ")
        if stripped.startswith(","):
            end += len(rest) - len(stripped) + 1
        text = text[:start] + text[end:]
    return text


def _axes_side(node: ast.expr) -> bool:
    """The mesh side of a rule: an axis name, None, or a tuple/list of them."""
    if isinstance(node, ast.Constant):
        return node.value is None or isinstance(node.value, str)
    return isinstance(node, (ast.Tuple, ast.List)) and all(
        isinstance(e, ast.Constant) and (e.value is None or isinstance(e.value, str))
        for e in node.elts)


def removed_rule_sites(root: Path, src: Path):
    """Each logical name ruled in exactly one table of a package (a YAML ``*rules*`` key, a rules
    table in Python): that table without its entries for the name. Counted only where the name
    is written in the package's code (an annotation that then has no rule): SHL201 there."""
    tables = []  # (path, key, name, spans, text)
    for path in sorted([*root.rglob("*.yml"), *root.rglob("*.yaml")]):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "rules" in text:
            tables.extend((path, key, name, sp, text) for key, name, sp in _yaml_entries(text))
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "rules" not in text.lower():
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        off = Offsets(text)
        named: list[ast.expr] = []  # tables under a name that says so: `RULES = (...)`
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any("rule" in (_dotted(t) or "").lower() for t in targets):
                    named.append(node.value)
            elif isinstance(node, ast.keyword) and node.arg and "rule" in node.arg.lower():
                named.append(node.value)
        for node in named:
            if not isinstance(node, (ast.Tuple, ast.List)) or len(node.elts) < 2:
                continue
            # (a logical axis rule: an identifier-like name and a mesh side of axis names or
            # None; axlearn's `mesh_rules=(("tpu-v5p-(16|32)", mesh_shape_from_axes(...)), ...)`
            # and a learner's `rules=[(".*stats", "inner")]` of regexes are other tables)
            pairs = [e for e in node.elts if isinstance(e, (ast.Tuple, ast.List))
                     and len(e.elts) == 2 and isinstance(e.elts[0], ast.Constant)
                     and isinstance(e.elts[0].value, str)
                     and re.fullmatch(r"[A-Za-z_][\w.]*", e.elts[0].value)
                     and _axes_side(e.elts[1])]
            if len(pairs) != len(node.elts):
                continue
            spans: dict[str, list] = {}
            for e in pairs:
                spans.setdefault(e.elts[0].value, []).append((off.start(e), off.end(e)))
            tables.extend((path, f"line {node.lineno}", name, sp, text)
                          for name, sp in spans.items())
    count = Counter(name for _, _, name, _, _ in tables)
    code = {p: p.read_text(encoding="utf-8", errors="replace") for p in root.rglob("*.py")}
    # (a module constant holding the name, `LENGTH = "length"`: the files that write the
    # constant's name use it too, and SHL201 reports there, where it is written in a spec)
    constants: dict[str, set[str]] = {}
    for t in code.values():
        for m in re.finditer(r"^([A-Z][A-Z0-9_]*)\s*=\s*['\"]([^'\"\n]+)['\"]\s*$", t, re.M):
            constants.setdefault(m.group(2), set()).add(m.group(1))
    for path, key, name, spans, text in tables:
        if count[name] != 1:
            continue  # other tables still map it: no table-free name to find
        users = [p for p, t in code.items() if f"'{name}'" in t or f'"{name}"' in t or any(
            re.search(rf"\b{c}\b", t) for c in constants.get(name, ()))]
        if not any(p != path for p in users) and not users:
            continue
        rel = path.relative_to(src).as_posix()
        line = text.count("\n", 0, spans[0][0]) + 1
        yield Site("removed-rule", path, rel, f"{rel}:{key}:{name}", line, line,
                   f"rule for '{name}' ({key})", _without(text, spans), ("SHL201",)), name, users


KINDS: dict[str, Callable[[Path, str, str, ast.Module], Iterator[Site]]] = {
    "donation": donation_sites,
    "legacy-mesh": legacy_mesh_sites,
    "partition-name": partition_name_sites,
    "tree-api": tree_api_sites,
    "removed-rule": removed_rule_sites,  # (run by run_removed_rules)
}
KIND_CODES = {"donation": ("SHL401",), "legacy-mesh": ("SHL101",),
              "partition-name": ("SHL203",), "tree-api": ("SHL501",),
              "removed-rule": ("SHL201",)}


# ---- running -------------------------------------------------------------------------------------
def load_reasons() -> dict[str, dict[str, dict]]:
    if not REASONS.is_file():
        return {}
    with REASONS.open("rb") as fh:
        return tomllib.load(fh)


@dataclass
class Project:
    """One tree linted as its own project: a wheel's package (``src/<pkg>``) or a corpus
    project (``~/.cache/shardlint-corpus/<owner+name>``, its own root, pyproject and pins)."""

    name: str  # the first part of every site's ``rel``
    root: Path
    src: Path  # the folder ``rel`` is relative to (the root's parent)
    corpus: bool  # config from the tree (config.load): its [tool.shardlint] and pins count

    def config(self):
        from shardlint import config as config_mod
        from shardlint.config import Config

        cached = self.__dict__.get("_config")
        if cached is None:
            cached = self.__dict__["_config"] = (
                config_mod.load(self.root) if self.corpus else Config(root=self.root))
        return cached

    def engine(self, index: bool = True):
        from shardlint.engine import Engine

        engine = self.__dict__.get("_engine")
        if engine is None:
            engine = self.__dict__["_engine"] = Engine(self.config(), use_cache=False)
        if index:
            engine.build_index()
        return engine

    def python_files(self) -> list[Path]:
        """The files ``shardlint check`` lints here: the corpus as the engine walks it
        (excluded paths, hidden and tool folders left out); a wheel's every ``*.py``."""
        if not self.corpus:
            return sorted(self.root.rglob("*.py"))
        return [p for p in self.engine(index=False).project_files() if p.suffix == ".py"]

    def release(self) -> None:
        self.__dict__.pop("_engine", None)


def quiet_in_tests(sites: list[Site], project: Project) -> None:
    """Sites in test code whose rules are quiet there by default (``test-ignore``) are not
    counted: the project would have to turn them on to see them."""
    config = project.config()
    for site in sites:
        full = str(project.src / site.rel)
        if site.excluded is None and config.is_test_file(full) and all(
                not config.is_selected(code, True, full) for code in site.codes):
            site.excluded = "test code, where its rules are quiet by default (test-ignore)"
        elif site.excluded is None and all(
                not config.is_selected(code, True, full) for code in site.codes):
            site.excluded = "its rules are turned off here by the project's configuration"


def found_at(findings, site: Site) -> bool:
    return any(f.code in site.codes and site.line <= f.span.line <= site.end_line
               for f in findings)


def run_removed_rules(project: Project, reasons: dict, verbose: bool) -> dict:
    """The removed-rule kind: the finding is looked for in every file that writes the name."""
    sites: list[Site] = []
    results: list[tuple[Site, bool]] = []
    for site, name, users in removed_rule_sites(project.root, project.src):
        sites.append(site)
        quiet_in_tests([site], project)
        if site.excluded is not None or site.key in reasons.get("not-a-site", {}):
            continue
        engine = project.engine()
        original = site.path.read_text(encoding="utf-8")
        yaml_file = site.path.suffix in (".yml", ".yaml")
        _replace(engine, site.path, site.mutated, yaml_file)
        try:
            hit = False
            for p in users:
                text = site.mutated if p == site.path else p.read_text(encoding="utf-8")
                if any(f.code == "SHL201" and f"'{name}'" in f.message
                       for f in engine.lint_text(p, text)):
                    hit = True
                    break
        finally:
            _replace(engine, site.path, original, yaml_file)
        results.append((site, hit))
        if verbose:
            print(f"  {'found' if hit else 'MISS '} {site.rel}:{site.line} {site.what}", flush=True)
    return {"sites": sites, "results": results}


def _replace(engine, path: Path, text: str, yaml_file: bool) -> None:
    if yaml_file:
        engine.update_config_file(path, text)
    else:
        engine.update_file(path, text)


def run_kind(kind: str, project: Project, reasons: dict, verbose: bool) -> dict:
    """One kind's sites in one project, each undone alone and linted in the whole project."""
    if kind == "removed-rule":
        return run_removed_rules(project, reasons, verbose)
    finder = KINDS[kind]
    sites: list[Site] = []
    for path in project.python_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        sites.extend(finder(path, path.relative_to(project.src).as_posix(), text, tree))
    quiet_in_tests(sites, project)
    counted = [s for s in sites if s.excluded is None and s.key not in reasons.get("not-a-site", {})]
    results: list[tuple[Site, bool]] = []
    for site in counted:
        engine = project.engine()
        original = site.path.read_text(encoding="utf-8", errors="replace")
        engine.update_file(site.path, site.mutated)
        try:
            findings = engine.lint_text(site.path, site.mutated)
        finally:
            engine.update_file(site.path, original)
        hit = found_at(findings, site)
        results.append((site, hit))
        if verbose:
            print(f"  {'found' if hit else 'MISS '} {site.rel}:{site.line} {site.what}", flush=True)
    return {"sites": sites, "results": results}


def report(kind: str, outs: dict[str, dict], reasons: dict) -> int:
    """The kind's figures over the projects in ``outs`` (name -> ``run_kind``'s answer): the
    total, a line per project, the misses by reason class, the sites not counted and why."""
    results = [r for out in outs.values() for r in out["results"]]
    all_sites = [s for out in outs.values() for s in out["sites"]]
    found = sum(1 for _, hit in results if hit)
    total = len(results)
    pct = 100.0 * found / total if total else 0.0
    print(f"\n== {kind}: {found} of {total} sites found ({pct:.0f}%)", flush=True)
    not_a_site = reasons.get("not-a-site", {})
    width = max((len(name) for name in outs), default=0)
    for name, out in outs.items():
        n = len(out["results"])
        hits = sum(1 for _, hit in out["results"] if hit)
        skipped = sum(1 for s in out["sites"] if s.excluded is not None or s.key in not_a_site)
        share = f"{100.0 * hits / n:3.0f}%" if n else "   -"
        print(f"  {name:<{width}}  {hits:4d} of {n:4d} found  {share}"
              + (f"  ({skipped} not counted)" if skipped else ""))
    kind_reasons = reasons.get(kind, {})
    by_reason: dict[str, list[Site]] = {}
    for site, hit in results:
        if hit:
            continue
        label = kind_reasons.get(site.key, {}).get("class", "UNEXPLAINED")
        by_reason.setdefault(label, []).append(site)
    for label in sorted(by_reason, key=lambda k: (k == "UNEXPLAINED", k)):
        print(f"  missed, {label}: {len(by_reason[label])}")
        for site in by_reason[label]:
            note = kind_reasons.get(site.key, {}).get("note", "")
            print(f"    {site.rel}:{site.line}  {site.what}  [{site.key}]" + (f"  -- {note}" if note else ""))
    excluded = [s for s in all_sites if s.excluded is not None]
    hand = [s for s in all_sites if s.excluded is None and s.key in not_a_site]
    if excluded or hand:
        print(f"  not counted: {len(excluded) + len(hand)}")
        for s in excluded:
            print(f"    {s.rel}:{s.line}  {s.what}  ({s.excluded})")
        for s in hand:
            print(f"    {s.rel}:{s.line}  {s.what}  (not a site: {not_a_site[s.key].get('note', '')})")
    return len(by_reason.get("UNEXPLAINED", []))


def print_findings(kind: str, projects: list[Project]) -> None:
    codes = KIND_CODES[kind]
    print(f"\n== {kind}: {', '.join(codes)} findings on the unmutated projects")
    n = 0
    for project in projects:
        engine = project.engine(index=False)
        for f in engine.lint_paths([project.root]):
            if f.code in codes:
                n += 1
                rel = Path(f.path).resolve().relative_to(project.src.resolve()).as_posix()
                print(f"  {rel}:{f.span.line}:{f.span.col + 1} {f.code} {f.message}")
        project.release()
    print(f"  ({n} findings)")


def select_projects(args: argparse.Namespace) -> list[Project]:
    if args.corpus:
        from corpus import corpus_dir, projects

        trees = projects(args.projects or None)
        return [Project(t.name, t, corpus_dir(), True) for t in trees]
    packages = [p for p in args.packages
                if not args.projects or any(o.lower() in p.lower() for o in args.projects)]
    src = fetch(packages)
    return [Project(p, src / p, src, False) for p in packages]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="*", default=list(KINDS), choices=list(KINDS))
    parser.add_argument("--packages", nargs="*", default=PACKAGES,
                        help="the benchmark wheels to run on (without --corpus)")
    parser.add_argument("--corpus", action="store_true",
                        help="run on the 17 projects of the real-code corpus (bench/corpus.py), "
                             "each linted in its own root with its own configuration and pins")
    parser.add_argument("--projects", nargs="*", default=[],
                        help="only the projects (or wheels) whose name contains one of these")
    parser.add_argument("--findings", action="store_true",
                        help="also print the kind's findings on the unmutated projects")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore", SyntaxWarning)  # (a project's "\$" in ast.parse)
    projects = select_projects(args)
    if not projects:
        print("no project to run on", file=sys.stderr)
        return 2
    reasons = load_reasons()
    unexplained = 0
    start = time.perf_counter()
    # Project by project (one project's index in memory at a time), every kind in each.
    outs: dict[str, dict[str, dict]] = {kind: {} for kind in args.kinds}
    for project in projects:
        t0 = time.perf_counter()
        for kind in args.kinds:
            outs[kind][project.name] = run_kind(kind, project, reasons, args.verbose)
        project.release()
        n = sum(len(outs[k][project.name]["results"]) for k in args.kinds)
        print(f"({project.name}: {n} sites linted, {time.perf_counter() - t0:.1f} s)",
              file=sys.stderr, flush=True)
    for kind in args.kinds:
        unexplained += report(kind, outs[kind], reasons)
        if args.findings:
            print_findings(kind, projects)
    print(f"\n({time.perf_counter() - start:.1f} s; {unexplained} misses without a reason)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
