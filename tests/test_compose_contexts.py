"""The context rules, tested by composition (tests/compose_contexts.py): every way of entering
the mesh and the axis rules, times every hop from the contexts to the model, times what the
model constrains, and separately every place the mesh and the rules table are made, each linted
as a small project of its own. Each pitfall must be reported where the generator marks it (the
legacy ``with``, the call that runs the model without a context, the ``jax.make_mesh`` without
``axis_types``), with its severity, and each look-alike (both contexts entered, in any order or
spelling, in the caller or the callee, as global setters; a model that needs only a mesh; a
``NamedSharding`` for a bare spec) must stay quiet.

One test per way of entering; a failure lists every combination that went wrong.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from compose_contexts import (
    CODES,
    CONSTRAINTS,
    ENTERS,
    HOPS,
    MESHES,
    SPEC_HOPS,
    SPEC_MESHES,
    SPEC_SITES,
    TABLES,
    Project,
    applies,
    build,
    build_spec,
    spec_applies,
    spec_combinations,
)
from helpers import lint_files


def found(root: Path, project: Project) -> set[tuple[str, int, str, str]]:
    return {(Path(f.path).relative_to(root).as_posix(), f.span.line, f.code, f.severity)
            for f in lint_files(root, project.files, select=CODES, versions=project.versions)}


def wrong(tmp_path: Path, projects) -> list[str]:
    out = []
    for i, (label, project) in enumerate(projects):
        root = tmp_path / f"p{i}"
        root.mkdir()
        got, want = found(root, project), project.expected()
        if got != want:
            out.append(f"{label}: reported {sorted(got - want)}, missed {sorted(want - got)}")
    return out


@pytest.mark.parametrize("enter", ENTERS, ids=[e.name for e in ENTERS])
def test_every_hop_and_constraint(tmp_path, enter):
    """The mesh and the table made the plain way; every hop, every constraint."""
    mesh, table = MESHES[0], TABLES[0]
    projects = [(f"{c.name} via {h.name}", build(c, mesh, table, enter, h))
                for c in CONSTRAINTS for h in HOPS if applies(enter, h)]
    assert not wrong(tmp_path, projects)


@pytest.mark.parametrize("enter", ENTERS, ids=[e.name for e in ENTERS])
def test_every_mesh_and_table(tmp_path, enter):
    """Every place the mesh and the rules table are made, run through a helper in another
    module (the contexts then reach the model across a call and a file)."""
    constraint = CONSTRAINTS[0]
    hops = [h for h in HOPS if h.name in ("jit_init", "helper_module")]
    projects = [(f"{m.name} mesh, {t.name} table via {h.name}", build(constraint, m, t, enter, h))
                for m in MESHES for t in TABLES for h in hops if applies(enter, h, m)]
    assert not wrong(tmp_path, projects)


@pytest.mark.parametrize("site", SPEC_SITES, ids=[s.name for s in SPEC_SITES])
def test_every_bare_spec(tmp_path, site):
    """SHL104: every way of entering the mesh around every hop to the spec, and the
    NamedSharding look-alike of each."""
    projects = [(f"{mesh} via {hop}{' (named)' if named else ''}",
                 build_spec(site, mesh, hop, named))
                for mesh in SPEC_MESHES for hop in SPEC_HOPS for named in (False, True)
                if spec_applies(site, mesh, hop)]
    assert not wrong(tmp_path, projects)


def test_the_generator_covers_what_it_claims():
    """Hundreds of distinct projects, each pitfall marked where it must be reported."""
    linen = [build(c, MESHES[0], TABLES[0], e, h) for e in ENTERS for c in CONSTRAINTS
             for h in HOPS if applies(e, h)]
    linen += [build(CONSTRAINTS[0], m, t, e, h) for e in ENTERS for m in MESHES for t in TABLES
              for h in HOPS if h.name in ("jit_init", "helper_module") and applies(e, h, m)]
    specs = [build_spec(*combo, named) for combo in spec_combinations() for named in (False, True)]
    assert len(linen) >= 1000 and len(specs) >= 100
    texts = {tuple(sorted(p.files.items())) + tuple(sorted(p.versions.items()))
             for p in linen + specs}
    assert len(texts) >= 0.9 * len(linen + specs)
    pitfalls = [p for p in linen + specs if p.expected()]
    assert len(pitfalls) >= 400 and len(linen + specs) - len(pitfalls) >= 400
