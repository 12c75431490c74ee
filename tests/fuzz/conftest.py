"""The fuzz suite (`pytest -m fuzz`): random inputs from a fixed seed, a CI-sized budget.

    SHARDLINT_FUZZ_BUDGET=20 pytest -m fuzz      # nightly: 20x the inputs
    SHARDLINT_FUZZ_SEED=7 pytest -m fuzz         # another sequence (the default seed is fixed)

Each target counts the inputs it tried and the failures it found; the counts are printed at the
end of the run (also when every input passed), so a run says how much it tried.
"""

from __future__ import annotations

import os
import random
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SEED = int(os.environ.get("SHARDLINT_FUZZ_SEED", "20261201"))
BUDGET = float(os.environ.get("SHARDLINT_FUZZ_BUDGET", "1"))

_TRIED: dict[str, list[int]] = defaultdict(lambda: [0, 0])
_NOTES: dict[str, list[str]] = defaultdict(list)


def scaled(n: int) -> int:
    """``n`` inputs at the CI budget, scaled by SHARDLINT_FUZZ_BUDGET."""
    return max(1, round(n * BUDGET))


class Tally:
    """Inputs tried by one target; ``failed`` collects descriptions of those that failed."""

    def __init__(self, target: str):
        self.target = target
        self.failed: list[str] = []

    def tried(self, n: int = 1) -> None:
        _TRIED[self.target][0] += n

    def fail(self, what: str) -> None:
        _TRIED[self.target][1] += 1
        self.failed.append(what)

    def note(self, text: str) -> None:
        """A figure printed with the target's counts."""
        _NOTES[self.target].append(text)

    def check(self) -> None:
        assert not self.failed, (f"{len(self.failed)} of {_TRIED[self.target][0]} inputs failed "
                                 f"(seed {SEED}):\n" + "\n".join(self.failed[:20]))


@pytest.fixture
def rng(request) -> random.Random:
    """A generator seeded by the run's seed and the test's name: each test's inputs are fixed."""
    return random.Random(f"{SEED}:{request.node.nodeid}")


@pytest.fixture
def tally(request) -> Tally:
    return Tally(request.node.originalname.removeprefix("test_"))


def pytest_terminal_summary(terminalreporter):
    if not _TRIED:
        return
    terminalreporter.write_sep("-", f"fuzz (seed {SEED}, budget x{BUDGET:g})")
    for target in sorted(_TRIED):
        tried, failed = _TRIED[target]
        notes = "".join(f"; {n}" for n in _NOTES.get(target, ()))
        terminalreporter.write_line(f"{target}: {tried} inputs tried, {failed} failed{notes}")


def corpus_root() -> Path | None:
    """The benchmark corpus (bench/lint_speed.py fetches it), when it is in the cache."""
    env = os.environ.get("SHARDLINT_BENCH_CACHE")
    root = (Path(env) if env else Path.home() / ".cache" / "shardlint-bench") / "src"
    return root if any(root.glob("*/.shardlint-bench-extracted")) else None


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The corpus sources; CI fetches them first (.ci/run). Elsewhere a missing corpus skips
    the corpus half of a target, saying how to fetch it, unless SHARDLINT_FUZZ_CORPUS=1 makes
    it an error."""
    found = corpus_root()
    if found is None:
        message = "the benchmark corpus is not fetched: python bench/lint_speed.py --fetch-only"
        if os.environ.get("SHARDLINT_FUZZ_CORPUS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return found
