"""bench/recall.py on a small project of its own root (the --corpus path): a remedy the authors
wrote is found when undone, a site in test code is not counted, and the reasons file parses."""

from __future__ import annotations

import sys
import textwrap
import tomllib
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import recall  # noqa: E402

STEP = textwrap.dedent("""
    import jax

    @jax.jit(donate_argnums=0)
    def smooth(x, k):
        return x * 0.9 + k

    def run(x, steps):
        for _ in range(steps):
            x = smooth(x, 3)
        return x
""")


def test_donation_site_in_a_project_root(tmp_path: Path) -> None:
    root = tmp_path / "owner+proj"
    (root / "pkg").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'proj'\n")
    (root / "pkg" / "loop.py").write_text(STEP)
    (root / "tests" / "test_loop.py").write_text(STEP)
    project = recall.Project(root.name, root, tmp_path, corpus=True)
    out = recall.run_kind("donation", project, {}, verbose=False)
    counted = {site.rel: hit for site, hit in out["results"]}
    assert counted == {"owner+proj/pkg/loop.py": True}
    excluded = [s for s in out["sites"] if s.excluded]
    assert [s.rel for s in excluded] == ["owner+proj/tests/test_loop.py"]
    assert out["sites"][0].key.startswith("owner+proj/pkg/loop.py:smooth:donate_argnums#")


def test_reasons_file_parses() -> None:
    with recall.REASONS.open("rb") as fh:
        reasons = tomllib.load(fh)
    for kind, entries in reasons.items():
        for key, entry in entries.items():
            assert "note" in entry, key
            assert kind == "not-a-site" or "class" in entry, key
