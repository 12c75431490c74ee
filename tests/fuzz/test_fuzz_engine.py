"""The engine on damaged source: findings or one SHL000, never an exception, in bounded time.

Inputs: every line prefix of every file of the rules' examples (typed in order, through the
incremental parser the language server uses), random line deletions, duplications, indentation
changes, swaps, insertions, character noise, truncations, CRLF/CR/mixed endings and BOMs of
those files and of files of the benchmark corpus (linted inside their package), bytes written
over files on disk (the CLI's path), code nested 5,000 deep in every way Python allows, and a
50,000-line file.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest
from conftest import Tally, scaled
from inputs import byte_noise, deep_inputs, long_file, mutate

from shardlint.config import Config
from shardlint.engine import Engine, mentions_jax
from shardlint.incremental import IncrementalParser
from shardlint.lsp.convert import to_range
from shardlint.rules.base import Finding, all_rules
from shardlint.semantics.catalog.versions import assume
from shardlint.source import SourceText

pytestmark = pytest.mark.fuzz

BOUND_S = 10.0  # per input; far above any real file: only a hang or a blow-up passes it


def _parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def lint_one(engine: Engine, path: Path, text: str, tally: Tally, what: str,
             parser: IncrementalParser | None = None, bound: float = BOUND_S) -> list[Finding]:
    """Lint ``text`` as ``path`` and check what a user may rely on; failures go to ``tally``."""
    tally.tried()
    started = time.perf_counter()
    try:
        findings = engine.lint_text(path, text, parser=parser)
    except BaseException as exc:  # noqa: BLE001  (what the fuzz looks for)
        if isinstance(exc, KeyboardInterrupt):
            raise
        tally.fail(f"{path.name} [{what}]: {type(exc).__name__}: {exc}")
        return []
    took = time.perf_counter() - started
    if took > bound:
        tally.fail(f"{path.name} [{what}]: {took:.1f} s (bound {bound:g} s)")
    if engine.errors:
        tally.fail(f"{path.name} [{what}]: internal error: {engine.errors[0]}")
        engine.errors.clear()
    codes = [f.code for f in findings]
    if "SHL000" in codes and len(codes) != 1:
        tally.fail(f"{path.name} [{what}]: SHL000 with other findings {codes}")
    if mentions_jax(text):
        parses = _parses(text)
        if not parses and codes != ["SHL000"]:
            tally.fail(f"{path.name} [{what}]: does not parse, findings {codes}")
        if parses and any(f.code == "SHL000" and f.severity == "error" for f in findings):
            tally.fail(f"{path.name} [{what}]: parses, yet an SHL000 error")
    lines = max(text.count("\n"), text.count("\r"), len(text.splitlines())) + 1
    source = SourceText(str(path), text)
    for f in findings:
        s = f.span
        if not (1 <= s.line <= s.end_line <= lines and s.col >= 0 and s.end_col >= 0
                and (s.end_line > s.line or s.end_col >= s.col)):
            tally.fail(f"{path.name} [{what}]: {f.code} span {s} outside the text")
        try:  # where an editor shows it (the language server's conversion), and where the CLI does
            for encoding in ("utf-16", "utf-8"):
                to_range(source, s, encoding)
            source.char_col(s.line, s.col)
        except Exception as exc:  # noqa: BLE001
            tally.fail(f"{path.name} [{what}]: {f.code} span {s}: {type(exc).__name__}: {exc}")
    return findings


def _example_projects(tmp_path: Path):
    for rule in all_rules():
        for kind, examples in (("valid", rule.VALID), ("invalid", rule.INVALID)):
            for i, ex in enumerate(examples):
                root = tmp_path / f"{rule.code}-{kind}-{i}"
                for name, text in ex.files.items():
                    p = root / name
                    p.parent.mkdir(parents=True, exist_ok=True)
                    p.write_text(text, encoding="utf-8")
                engine = Engine(Config(root=root), versions=assume(**ex.versions), use_cache=False)
                yield engine, root, ex.files


def test_engine_on_examples(tmp_path, rng, tally):
    mutations = scaled(4)
    for engine, root, files in _example_projects(tmp_path):
        for name, text in files.items():
            path = root / name
            parser = IncrementalParser()
            lines = text.split("\n")
            for k in range(len(lines) + 1):  # typed line by line, as in an editor
                lint_one(engine, path, "\n".join(lines[:k]), tally, f"first {k} lines", parser)
            for m in range(mutations):
                broken, what = mutate(rng, text)
                if rng.random() < 0.5:
                    broken, more = mutate(rng, broken)
                    what += ", " + more
                lint_one(engine, path, broken, tally, what, parser if m % 2 else None)
            engine.lint_text(path, text)  # restore what the other files of the project see
    tally.check()


def test_engine_on_corpus(corpus, rng, tally):
    files_per_package = scaled(3)
    for package in sorted(p for p in corpus.iterdir() if p.is_dir()):
        sources = sorted(package.rglob("*.py"))
        engine = Engine(Config(root=package), use_cache=False)
        # (the package's index first: indexing 673 files is not one input's time, and the bound
        # below catches an input that hangs the engine, not a slow machine's indexing)
        engine.build_index()
        for path in rng.sample(sources, min(files_per_package, len(sources))):
            text = path.read_text(encoding="utf-8")
            lines = text.split("\n")
            parser = IncrementalParser()
            for k in sorted(rng.sample(range(len(lines) + 1), min(scaled(15), len(lines) + 1))):
                lint_one(engine, path, "\n".join(lines[:k]), tally,
                         f"{path.relative_to(corpus)} first {k} lines", parser)
            for m in range(scaled(15)):
                broken, what = mutate(rng, text)
                lint_one(engine, path, broken, tally, f"{path.relative_to(corpus)} {what}",
                         parser if m % 2 else None)
            engine.lint_text(path, text)
    tally.check()


def test_engine_on_deep_and_long_code(tmp_path, tally):
    root = tmp_path / "deep"
    root.mkdir()
    engine = Engine(Config(root=root), use_cache=False)
    for name, text in deep_inputs().items():
        path = root / f"{name.replace(' ', '_')}.py"
        findings = lint_one(engine, path, text, tally, f"nested {name}")
        lint_one(engine, path, text + "x = (\n", tally, f"nested {name}, then broken",
                 IncrementalParser())
        if len(findings) == 1 and findings[0].code == "SHL000":
            assert findings[0].severity in ("error", "info")
    path = root / "long.py"
    text = long_file()
    assert text.count("\n") >= 49_999
    findings = lint_one(engine, path, text, tally, "50,000 lines", bound=120.0)
    assert any(f.code != "SHL000" for f in findings) or not findings
    tally.check()


@pytest.mark.slow
def test_cli_on_bytes(tmp_path, rng, tally):
    """Files on disk with bytes written over them, a BOM, null bytes, lone surrogates (as
    surrogate-escaped bytes), and the deep inputs: `shardlint check` exits 0, 1 or 2 with a
    message, never a traceback, and leaves the files as they were."""
    root = tmp_path / "project"
    root.mkdir()
    seeds = [ex.source for rule in all_rules() for ex in rule.INVALID][::7]
    n = 0
    for text in seeds[:scaled(24)]:
        (root / f"noise{n}.py").write_bytes(byte_noise(rng, text))
        n += 1
    (root / "bom.py").write_bytes(b"\xef\xbb\xbf" + seeds[0].encode())
    (root / "nul.py").write_bytes(seeds[1].encode() + b"\x00\x00")
    (root / "surrogate.py").write_bytes(seeds[2].encode() + b"\xed\xa0\x80\n")
    (root / "latin1.py").write_bytes((
        "# -*- coding: latin-1 -*-\nimport jax\nimport flax.linen as nn\n"
        "from jax.sharding import Mesh\nx = 'é'\nmesh = Mesh(jax.devices(), ('data',))\n"
        "with nn.logical_axis_rules((('batch', 'data'),)), mesh:\n"
        "    y = nn.with_logical_constraint(x, ('batch',))\n").encode("latin-1"))
    for name, text in list(deep_inputs().items())[::3]:
        (root / f"deep_{name.replace(' ', '_')}.py").write_text(text, encoding="utf-8")
    before = {p.name: p.read_bytes() for p in root.iterdir()}
    for args in (["--no-cache"], ["--no-cache", "--jobs", "2"], []):
        tally.tried(len(before))
        proc = subprocess.run([sys.executable, "-m", "shardlint", "check", *args, "."],
                              cwd=root, capture_output=True, text=True, timeout=300)
        errors = [line for line in proc.stderr.splitlines() if line.startswith("shardlint: ")]
        # Exit 2 only for files Python could not read either, each named in a one-line error.
        unreadable = all(("not UTF-8 text" in line or "cannot decode" in line)
                         and "latin1.py" not in line for line in errors)
        if proc.returncode not in (0, 1, 2) or "Traceback" in proc.stderr or not unreadable \
                or (proc.returncode == 2) != bool(errors):
            tally.fail(f"check {args}: exit {proc.returncode}: {proc.stderr[-2000:]}")
        if "latin1.py:" not in proc.stdout:  # read in the encoding its coding line declares
            tally.fail(f"check {args}: no SHL101 in latin1.py")
    after = {p.name: p.read_bytes() for p in root.iterdir() if p.name != ".shardlint_cache"}
    assert after == before
    shutil.rmtree(root / ".shardlint_cache", ignore_errors=True)
    tally.check()
