"""The language server's shortcuts against a lint from scratch, on random edits of real code.

The server parses only the statements an edit touched (``incremental.py``), replays the facts of
the others (``semantics/file/replay.py``) and reuses what the summary and the rules derived from them
(``semantics/file/reuse.py``). Each shortcut must give exactly what a fresh lint gives. This types
random snippets at random places in each file (kept when they parse, 7 times in 10) and after
every edit compares, for the edited file, the findings and the module summary of the server's
path with a fresh engine's; with ``--cross`` it also lints other files of the same folder through
the live index and through a fresh one.

    python bench/differential.py [FOLDER ...] [--examples] [--edits 12] [--files 300] [--seed 7]
                                 [--cross] [--typing N [--with-index]]

``--typing N``: instead of random edits, N statements typed character by character at random
places inside function bodies (the commonest keystroke in an editor), every keystroke checked,
each statement deleted again after a while: the replay of a method's other statements, of the
functions nested in it and of what they contribute, across many builds in a row. Each file is a
project of its own; with ``--with-index`` it is typed into inside a copy of its folders, both
engines holding their index (what a keystroke reads of other modules is then tested too).

The folders are any Python code (``bench/lint_speed.py`` downloads flax, optax, maxtext, praxis
and easydel into ~/.cache/shardlint-bench/src). Prints each mismatch and a count; exit 1 on any.
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

from shardlint.config import load
from shardlint.engine import Engine, mentions_jax
from shardlint.incremental import IncrementalParser

SNIPPETS = [
    "#", "x", "\n", "(", ")", "    ", "\n    y = 1\n", ":", "; z = 2", "", "jax.jit(", "mesh",
    "with jax.set_mesh(mesh):\n    pass\n", "import jax\n", "P = jax.sharding.PartitionSpec\n",
    "def f(x):\n    return x\n", "\n\n", "from flax import linen as nn\n",
    "\n    global MESH\n    MESH = jax.make_mesh((1,), ('x',))\n", "@jax.jit\n",
    ", donate_argnums=0", "nn.with_logical_constraint(x, ('batch', 'mlp'))", "P('x', 'y')",
    "jax.sharding.NamedSharding(mesh, P('data'))", "with nn.logical_axis_rules(RULES):\n    pass\n",
    "RULES = (('batch', 'data'),)\n", "model.init(key, x)", "jax.jit(lambda x: x)", "app.run(main)",
    "main()",
    # the value-flow layer: updates, calls of helpers, wrappers
    "\n    return state.apply_gradients(grads=g)\n", "state = step(state, b)",
    "\n    return {'pos': s['pos'] + 1, 'k': s['k'].at[0].set(1)}\n",
    "\n    state, _ = jax.lax.scan(body, state, xs)\n", "functools.partial(train_step, cfg)",
    "ejit(step, static_argnums=(1,))", "\n    optimizer.update(model, grads)\n",
    "\n    return helper(state, batch)\n",
    "  # shardlint: ignore[SHL5]", "  # a note",
]


def findings(engine: Engine, path: Path, text: str, parser: IncrementalParser | None = None):
    return [(f.code, f.span, f.message, [(r.path, r.span) for r in f.related])
            for f in engine.lint_text(path, text, parser=parser)]


def summary(engine: Engine, module: str) -> str | None:
    s = engine.index.summaries.get(module)
    return json.dumps(s.to_json(), sort_keys=True) if s is not None else None


def edit(rng: random.Random, text: str) -> str:
    if rng.random() < 0.3:  # a letter after a quote: mostly a changed string, such as an axis name
        quotes = [i for i, ch in enumerate(text) if ch in "\"'"]
        if quotes:
            i = rng.choice(quotes) + 1
            return text[:i] + rng.choice("xyz") + text[i:]
    a = rng.randrange(len(text) + 1)
    b = min(len(text), a + rng.choice([0, 0, 1, 3, 20]))
    return text[:a] + rng.choice(SNIPPETS) + text[b:]


class Project:
    """A project of one module, ``mod.py``, linted live (through an incremental parser, as the
    language server does) and from scratch."""

    def __init__(self, tmp: str) -> None:
        self.root = Path(tmp)
        (self.root / "pyproject.toml").write_text("[project]\nname = 'd'\n", encoding="utf-8")
        self.path = self.root / "mod.py"

    def start(self, text: str) -> None:
        self.live, self.parser = Engine(load(self.root), use_cache=False), IncrementalParser()
        self.live.lint_text(self.path, text, parser=self.parser)

    def compare(self, new: str) -> tuple[str | None, bool]:
        """(what differs between the live lint of ``new`` and a fresh one: "findings",
        "summary" or None; whether ``new`` is broken: it does not parse)."""
        fresh = Engine(load(self.root), use_cache=False)
        want = findings(fresh, self.path, new)
        got = findings(self.live, self.path, new, self.parser)
        broken = any(f[0] == "SHL000" for f in want) or not mentions_jax(new)
        if got != want:
            return "findings", broken
        if not broken and summary(fresh, "mod") != summary(self.live, "mod"):
            return "summary", broken
        return None, broken


def one_file(files: list[Path], edits: int, rng: random.Random) -> tuple[int, int]:
    """Each file as ``mod.py`` of a project of its own."""
    checked = bad = 0
    with tempfile.TemporaryDirectory(prefix="shardlint-differential-") as tmp:
        project = Project(tmp)
        for source in files:
            text = source.read_text(encoding="utf-8", errors="replace")
            if not mentions_jax(text):
                continue
            project.start(text)
            for _ in range(edits):
                new = edit(rng, text)
                differs, broken = project.compare(new)
                checked += 1
                if differs:
                    bad += 1
                    print(f"MISMATCH {source}: {differs} after {new[:200]!r}...", flush=True)
                if not broken and rng.random() < 0.7:
                    text = new
    return checked, bad


TYPED = [
    "h = jnp.einsum('bd,df->bf', x, self.kernel) * scale",
    "mesh = jax.make_mesh((1,), ('data',))", "x = nn.with_logical_constraint(x, ('batch', 'mlp'))",
    "state = state.apply_gradients(grads=grads)", "return state, loss",
    "with jax.set_mesh(mesh):", "step = jax.jit(train_step, donate_argnums=0)",
    "def inner(y):", "spec = P('data', None)", "for i in range(3):", "x = helper(x)",
    "params = model.init(key, x)", "if flag:", "y = x",
    # comments typed after code: keystrokes that leave the tree as it was (a suppression
    # among them, which the rules' filter reads from the new text)
    "state = step(state, b)  # noqa: SHL401", "x = helper(x)  # the helper",
]


def body_lines(text: str) -> list[tuple[int, int]]:
    """(0-based line, indent) of the first line of every statement of every function body."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for s in node.body:
                if s.lineno > node.lineno:
                    out.append((s.lineno - 1, s.col_offset))
    return out


class InFolder:
    """The files of copies of ``folders`` in one project, each engine holding the index of all
    of it: a file typed into is linted live (incremental parser, the live index) and by an
    engine that parses and analyses it whole (no parser: nothing reused from the keystroke
    before) against the same index, so that what a keystroke keeps and what it reads of
    other modules (a layer's annotation through ``Dense(kernel_axes=...)``) are both tested."""

    def __init__(self, tmp: str, folders: list[Path]) -> None:
        self.root = Path(tmp)
        self.copies = {}
        for folder in folders:
            folder = folder.resolve()
            dest = self.root / folder.name
            shutil.copytree(folder, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            self.copies[folder] = dest
        (self.root / "pyproject.toml").write_text("[project]\nname = 'd'\n", encoding="utf-8")
        self.live, self.fresh = (Engine(load(self.root), use_cache=False) for _ in range(2))
        self.live.build_index()
        self.fresh.build_index()
        self.path: Path | None = None

    def start(self, text: str, source: Path) -> None:
        if self.path is not None:  # (the last file back as it was, in both indexes)
            self.live.lint_text(self.path, self.text, parser=self.parser)
            self.fresh.lint_text(self.path, self.text)
        source = source.resolve()
        folder = next(f for f in self.copies if source.is_relative_to(f))
        self.path = self.copies[folder] / source.relative_to(folder)
        self.text, self.parser = text, IncrementalParser()
        self.module = self.live.module_name(self.path)[0]
        self.live.lint_text(self.path, text, parser=self.parser)

    def compare(self, new: str) -> tuple[str | None, bool]:
        assert self.path is not None
        got = findings(self.live, self.path, new, self.parser)
        want = findings(self.fresh, self.path, new)
        broken = any(f[0] == "SHL000" for f in want) or not mentions_jax(new)
        if got != want:
            return "findings", broken
        if not broken and summary(self.fresh, self.module) != summary(self.live, self.module):
            return "summary", broken
        return None, broken


def typing(files: list[Path], statements: int, rng: random.Random,
           folders: list[Path] | None = None) -> tuple[int, int]:
    """Statements typed into function bodies, a keystroke at a time (see ``--typing``);
    ``folders``: inside copies of them, with their index (see ``InFolder``)."""
    checked = bad = 0
    with tempfile.TemporaryDirectory(prefix="shardlint-differential-") as tmp:
        project: Project | InFolder = InFolder(tmp, folders) if folders else Project(tmp)
        for source in files:
            text = source.read_text(encoding="utf-8", errors="replace")
            places = body_lines(text) if mentions_jax(text) else []
            if not places:
                continue
            if isinstance(project, InFolder):
                project.start(text, source)
            else:
                project.start(text)
            base = text
            for _ in range(statements):
                line, indent = rng.choice(body_lines(base) or places)
                lines = base.split("\n")
                typed = rng.choice(TYPED)
                states = [" " * indent]
                states += [" " * indent + typed[:k] for k in range(1, len(typed) + 1)]
                if typed.endswith(":"):  # a block header: its body too
                    states.append(states[-1] + "\n" + " " * (indent + 4) + "pass")
                for state in states:
                    new = "\n".join([*lines[:line], state, *lines[line:]])
                    differs, _ = project.compare(new)
                    checked += 1
                    if differs:
                        bad += 1
                        print(f"MISMATCH {source}:{line + 1}: {differs} typing {state.strip()!r}",
                              flush=True)
                if rng.random() < 0.5:  # keep it (when it parses), else delete it again
                    try:
                        ast.parse(new)
                        base = new
                    except SyntaxError:
                        pass
    return checked, bad


def cross_file(folder: Path, edits: int, rng: random.Random) -> tuple[int, int]:
    """Edit files of a copy of ``folder`` live; lint others through the live and a fresh index."""
    checked = bad = 0
    with tempfile.TemporaryDirectory(prefix="shardlint-differential-") as tmp:
        root = Path(tmp)
        shutil.copytree(folder, root / folder.name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        (root / "pyproject.toml").write_text("[project]\nname = 'd'\n", encoding="utf-8")
        files = sorted(p for p in root.rglob("*.py")
                       if mentions_jax(p.read_text(encoding="utf-8", errors="replace")))[:40]
        if len(files) < 2:
            return 0, 0
        live = Engine(load(root), use_cache=False)
        live.build_index()
        for target in rng.sample(files, min(6, len(files))):
            text, parser = target.read_text(encoding="utf-8"), IncrementalParser()
            live.lint_text(target, text, parser=parser)
            others = rng.sample(files, min(5, len(files)))
            for _ in range(edits):
                new = edit(rng, text)
                kept = not any(f[0] == "SHL000" for f in findings(live, target, new, parser))
                target.write_text(new, encoding="utf-8")
                fresh = Engine(load(root), use_cache=False)
                fresh.build_index()
                for other in others:
                    o = other.read_text(encoding="utf-8")
                    checked += 1
                    if findings(fresh, other, o) != findings(live, other, o):
                        bad += 1
                        print(f"MISMATCH {other.name} after an edit of {target.name}", flush=True)
                if kept and rng.random() < 0.7:
                    text = new
                else:  # back to the last text that parsed, on disk and in the live engine
                    target.write_text(text, encoding="utf-8")
                    live.lint_text(target, text, parser=parser)
    return checked, bad


def rule_examples(folder: Path) -> list[Path]:
    """Every one-file example of the rules' docs, as files: small, and dense with the patterns
    the rules read across statements (constants, meshes, rules tables)."""
    from shardlint.rules.base import all_rules

    out = []
    for rule in all_rules():
        for i, ex in enumerate([*rule.VALID, *rule.INVALID]):
            if len(ex.files) == 1:
                path = folder / f"{rule.code.lower()}_{i}.py"
                path.write_text(next(iter(ex.files.values())), encoding="utf-8")
                out.append(path)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="*", type=Path)
    ap.add_argument("--examples", action="store_true",
                    help="also the rules' documented examples (each alone)")
    ap.add_argument("--edits", type=int, default=12, help="edits per file")
    ap.add_argument("--files", type=int, default=300, help="files sampled from the folders")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cross", action="store_true", help="also the cross-file check, per folder")
    ap.add_argument("--typing", type=int, default=0, metavar="N",
                    help="instead: N statements per file typed into function bodies")
    ap.add_argument("--with-index", action="store_true",
                    help="with --typing: type into the files inside a copy of their folders, "
                         "both engines holding the folders' index")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    files = sorted(p for folder in args.folders for p in folder.rglob("*.py"))
    files = rng.sample(files, min(args.files, len(files)))
    if args.typing:
        checked, bad = typing(files, args.typing, rng,
                              args.folders if args.with_index else None)
        print(f"typing: {checked} keystrokes, {bad} mismatches")
        return 1 if bad else 0
    with tempfile.TemporaryDirectory(prefix="shardlint-examples-") as tmp:
        if args.examples:
            files += rule_examples(Path(tmp))
        checked, bad = one_file(files, args.edits, rng)
    print(f"one file: {checked} edits, {bad} mismatches")
    if args.cross:
        c, b = 0, 0
        for folder in args.folders:
            n, m = cross_file(folder, max(args.edits // 2, 1), rng)
            c, b = c + n, b + m
        print(f"cross-file: {c} checks, {b} mismatches")
        bad += b
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
