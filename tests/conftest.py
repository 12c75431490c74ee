from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture
def project(tmp_path: Path):
    """Write files into a fresh project folder: project({"a.py": src, ...}) -> root."""

    def make(files: dict[str, str], pyproject: str | None = None) -> Path:
        for name, text in files.items():
            p = tmp_path / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text, encoding="utf-8")
        (tmp_path / "pyproject.toml").write_text(pyproject or "[project]\nname='t'\n")
        return tmp_path

    return make


