"""`shardlint check --fix --unsafe-fixes` on the rules' examples and on the benchmark corpus:
every fixed file parses, its tree differs from what it was before each round of fixes only in
statements a fix of that round touched, a second run changes nothing, and no file outside the
given paths changes.
"""

from __future__ import annotations

import ast
import hashlib
import shutil
import warnings
from collections import Counter
from pathlib import Path
from unittest import mock

import pytest
from conftest import Tally

from shardlint import check as check_module
from shardlint.cli import main
from shardlint.config import Config
from shardlint.engine import Engine
from shardlint.findings.fixes import fixable, resolve
from shardlint.rules.base import all_rules

pytestmark = [pytest.mark.fuzz, pytest.mark.slow]


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): hashlib.sha1(p.read_bytes()).digest()
            for p in sorted(root.rglob("*")) if p.is_file() and ".shardlint_cache" not in p.parts}


def _parse(text: str) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _statements(tree: ast.AST) -> list[ast.stmt]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]


def _first_line(s: ast.stmt) -> int:
    """Where a statement starts, its decorators included (``lineno`` is the ``def`` line)."""
    return min([s.lineno, *(d.lineno for d in getattr(s, "decorator_list", ()))])


def _fix_lines(root: Path, paths: list[Path]) -> dict[str, list[tuple[int, int]]]:
    """Per file (relative to ``root``), the line ranges of every fix a run could apply."""
    engine = Engine(Config(root=root), use_cache=False)
    out: dict[str, list[tuple[int, int]]] = {}
    texts: dict[str, str] = {}
    for f in engine.lint_paths(paths):
        if not fixable(f, unsafe=True):
            continue
        rel = Path(f.path).resolve().relative_to(root.resolve()).as_posix()
        text = texts.setdefault(rel, (root / rel).read_text(encoding="utf-8"))
        for e in resolve(f.fix, text):
            out.setdefault(rel, []).append((e.span.line, e.span.end_line))
    return out


def _fix_and_check(root: Path, given: list[str], tally: Tally) -> int:
    """Fix ``given`` (paths under ``root``), check the four properties; the number of files
    the run changed. A fix can bring out another (check.MAX_FIX_ROUNDS: `pjit` made `jax.jit`,
    then the legacy `with mesh:` around it can be fixed), so the run is taken one round at a
    time, each round's changes held to the fixes that round's findings offer."""
    paths = [root / g for g in given]
    first = _snapshot(root)
    inside = tuple(g.rstrip("/") + "/" if (root / g).is_dir() else g for g in given)
    tally.tried(len([rel for rel in first if rel.endswith(".py")]))
    changed_files: set[str] = set()
    with mock.patch.object(check_module, "MAX_FIX_ROUNDS", 1):
        for _ in range(ROUNDS):
            before_bytes = _snapshot(root)
            before = {rel: (root / rel).read_text(encoding="utf-8", errors="replace")
                      for rel in before_bytes if rel.endswith(".py")}
            ranges = _fix_lines(root, paths)
            main(["check", "--no-cache", "--fix", "--unsafe-fixes", "--exit-zero",
                  *map(str, paths)])
            after_bytes = _snapshot(root)
            changed = [rel for rel in after_bytes if after_bytes[rel] != before_bytes.get(rel)]
            if not changed:
                break
            changed_files.update(changed)
            for rel in changed:
                _check_round(root, rel, given, inside, before, ranges, tally)
    settled = _snapshot(root)
    for rel in sorted(first.keys() - settled.keys()):
        tally.fail(f"{rel}: deleted by the fix run")
    # A second run changes nothing.
    main(["check", "--no-cache", "--fix", "--unsafe-fixes", "--exit-zero", *map(str, paths)])
    again = _snapshot(root)
    for rel in sorted(set(again) | set(settled)):
        if again.get(rel) != settled.get(rel):
            tally.fail(f"{rel}: changed again by a second run")
    return len(changed_files)


# (as many rounds as `check --fix` takes: check.MAX_FIX_ROUNDS)
ROUNDS = check_module.MAX_FIX_ROUNDS


def _check_round(root: Path, rel: str, given: list[str], inside: tuple[str, ...],
                 before: dict[str, str], ranges: dict[str, list[tuple[int, int]]],
                 tally: Tally) -> None:
    """One file one round changed: inside the given paths, still parsing, and different from
    what it was before the round only in statements a fix of that round touched."""
    if not (rel in given or rel.startswith(tuple(i for i in inside if i.endswith("/")))):
        tally.fail(f"{rel}: changed, outside the given paths {given}")
        return
    old, new = before.get(rel), (root / rel).read_text(encoding="utf-8")
    old_tree, new_tree = _parse(old or ""), _parse(new)
    if old_tree is not None and new_tree is None:
        tally.fail(f"{rel}: does not parse after the fix")
        return
    if old_tree is None or new_tree is None:
        return
    spans = ranges.get(rel, [])
    if not spans:
        tally.fail(f"{rel}: changed without a fix that could apply to it")
        return
    kept = Counter(ast.dump(s) for s in _statements(old_tree)
                   if not any(_first_line(s) <= b and a <= (s.end_lineno or s.lineno)
                              for a, b in spans))
    lost = kept - Counter(ast.dump(s) for s in _statements(new_tree))
    if lost:
        tally.fail(f"{rel}: {sum(lost.values())} statement(s) no fix touched changed")


def test_fixes_on_examples(tmp_path, tally):
    root = tmp_path / "examples"
    given = []
    for rule in all_rules():
        for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID)):
            for i, ex in enumerate(examples):
                folder = f"{rule.code.lower()}_{kind}_{i}"
                for name, text in ex.files.items():
                    p = root / folder / name
                    p.parent.mkdir(parents=True, exist_ok=True)
                    p.write_text(text, encoding="utf-8")
                # every third example stays outside the given paths: it must not change
                if (len(given) + i) % 3:
                    given.append(folder)
    (root / "pyproject.toml").write_text("[project]\nname = 'examples'\n", encoding="utf-8")
    changed = _fix_and_check(root, given, tally)
    tally.note(f"{changed} files fixed")
    assert changed >= 20, f"only {changed} files fixed: the examples' fixes did not apply"
    tally.check()


def test_fixes_on_corpus(corpus, tmp_path, tally):
    root = tmp_path / "corpus"
    shutil.copytree(corpus, root, ignore=shutil.ignore_patterns(".shardlint*", "*.pyc"))
    (root / "pyproject.toml").write_text("[project]\nname = 'corpus'\n", encoding="utf-8")
    given = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != "praxis")
    changed = _fix_and_check(root, given, tally)
    tally.note(f"{changed} files fixed")
    assert changed >= 1, "no file of the corpus was fixed"
    tally.check()
