"""Run a rule's examples through the real engine, in a real folder."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from shardlint.config import Config
from shardlint.engine import Engine
from shardlint.rules.base import Example, Finding
from shardlint.semantics.catalog.versions import assume


def write_project(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (path -> text, dedented) under ``root``."""
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


def lint_files(root: Path, files: dict[str, str], select: tuple[str, ...] = (),
               versions: dict[str, str] | None = None, **config) -> list[Finding]:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    # (rules and behaviours in preview run here: these helpers test what a rule does)
    config.setdefault("preview", True)
    cfg = Config(root=root, select=select, **config)
    engine = Engine(cfg, versions=assume(**(versions or {})), use_cache=False)
    findings = engine.lint_paths([root / n for n in files])
    assert not engine.errors, engine.errors
    return findings


def run_example(root: Path, ex: Example, code: str) -> set[tuple[str, int, str]]:
    findings = lint_files(root, ex.files, select=(code,), versions=ex.versions)
    out = set()
    for f in findings:
        name = Path(f.path).relative_to(root).as_posix()
        out.add((name, f.span.line, f.code))
    return out


EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9, ]+)$")


def expected_markers(files: dict[str, str]) -> set[tuple[str, int, str]]:
    out = set()
    for name, text in files.items():
        for i, line in enumerate(text.splitlines(), start=1):
            m = EXPECT.search(line)
            if m:
                for code in m.group(1).replace(",", " ").split():
                    out.add((name, i, code))
    return out
