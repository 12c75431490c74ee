"""The value-flow layer, tested by composition (tests/compose.py): every way of jitting a step,
times every update shape the missing-donation rule knows, times every hop between the step and
the update, linted as a small project of its own. Each pitfall must be reported where the user
writes the missing keyword, and each look-alike (already donated, the old value read after
the call, a step that returns a loss and not the state) must stay quiet.

One test per jit style and case; a failure lists every combination that went wrong.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from compose import (
    HOPS,
    JITS,
    NNX_HOPS,
    NNX_JITS,
    NNX_LOOKALIKES,
    NNX_UPDATES,
    UPDATES,
    Project,
    build,
    build_nnx,
)
from helpers import lint_files


def found(root: Path, project: Project) -> set[tuple[str, int]]:
    return {(Path(f.path).relative_to(root).as_posix(), f.span.line)
            for f in lint_files(root, project.files, select=("SHL401",))}


def wrong(tmp_path: Path, projects) -> list[str]:
    out = []
    for i, (label, project, want) in enumerate(projects):
        root = tmp_path / f"p{i}"
        root.mkdir()
        got = found(root, project)
        if got != want:
            out.append(f"{label}: reported {sorted(got)}, expected {sorted(want)}")
    return out


# (driver: where the training loop lives, beside the step or in another module)
CASES = [(None, "other_module"), (None, "same_module"), ("donated", "other_module"),
         ("no_replace", "other_module"), ("read_after", "same_module"),
         ("read_after", "other_module")]


@pytest.mark.parametrize("lookalike, driver", CASES, ids=[f"{c or 'pitfall'}-{d}" for c, d in CASES])
@pytest.mark.parametrize("jit", JITS, ids=[j.name for j in JITS])
def test_every_update_through_every_hop(tmp_path, jit, lookalike, driver):
    projects = []
    for update in UPDATES:
        for hop in HOPS:
            p = build(jit, update, hop, driver=driver, lookalike=lookalike)
            want = p.expected()
            if lookalike is None:
                assert len(want) == 1  # (the generator marks the jit site once)
            projects.append((f"{update.name} via {hop.name}", p, want))
    assert not wrong(tmp_path, projects)


@pytest.mark.parametrize("lookalike", (None, *NNX_LOOKALIKES))
@pytest.mark.parametrize("jit", list(NNX_JITS))
def test_every_nnx_in_place_update(tmp_path, jit, lookalike):
    projects = []
    for update in NNX_UPDATES:
        for hop in NNX_HOPS:
            p = build_nnx(jit, update, hop, lookalike)
            projects.append((f"{update} via {hop}", p, p.expected()))
    assert not wrong(tmp_path, projects)


def test_the_generator_covers_what_it_claims():
    """The counts the issue asks for: hundreds of combinations, each a distinct project."""
    combos = len(JITS) * len(UPDATES) * len(HOPS)
    nnx = len(NNX_JITS) * len(NNX_UPDATES) * len(NNX_HOPS)
    assert combos >= 600 and nnx >= 60
    texts = {tuple(sorted(build(j, u, h).files.items())) for j in JITS for u in UPDATES
             for h in HOPS}
    assert len(texts) == combos
