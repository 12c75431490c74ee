"""Fixtures for the memory check: a real jax, real worker subprocesses, probe files in tmp."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from shardlint.memory.__main__ import main

from .memory_support import CliResult


@pytest.fixture
def shardlint_memory(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Callable[..., CliResult]:
    """Run `shardlint memory ARGS` in this process (the workers are real subprocesses)."""

    def run(*args: str, cwd: Path | None = None) -> CliResult:
        monkeypatch.chdir(cwd or tmp_path)
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture
def write_probe(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write a probe file (dedented) under tmp_path and return its path."""

    def write(name: str, source: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
        return path

    return write
