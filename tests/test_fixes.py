"""Every fix of every rule, on every INVALID example: it parses, the finding goes away, no new
finding appears, and fixing again changes nothing. Plus `--fix` on the seed example."""

from __future__ import annotations

import ast
import shutil
from collections import Counter
from pathlib import Path

import pytest
from helpers import lint_files

from shardlint.cli import main
from shardlint.findings.fixes import apply_fixes, fixable
from shardlint.rules.base import Finding, all_rules

ROOT = Path(__file__).resolve().parent.parent
# Fixing one pitfall may reveal the next one: after SHL404 switches to nnx.jit, SHL401 can
# rightly ask for donation. These pairs are allowed; anything else new is a bug in the fix.
# A fix may bring out a finding the first one hid: once SHL404's nnx.jit writes the state back the
# step may lack donation (SHL401); once SHL101's jax.set_mesh makes the mesh real, an eager init
# under it is replicated on every device (SHL301).
REVEALS = {("SHL404", "SHL401"), ("SHL101", "SHL301")}


def _key(f: Finding) -> tuple[str, str, str]:
    return (Path(f.path).name, f.code, f.message)


def _cases():
    for rule in all_rules():
        for i, ex in enumerate(rule.INVALID):
            yield pytest.param(rule, i, id=f"{rule.code}-invalid-{i}")


@pytest.mark.parametrize("rule,index", list(_cases()))
def test_fix_round_trip(tmp_path, rule, index):
    ex = rule.INVALID[index]
    select = ("SHL",)
    before = lint_files(tmp_path / "a", ex.files, select=select, versions=ex.versions)
    mine = [f for f in before if f.code == rule.code and fixable(f, unsafe=True)]
    for f in mine:
        name = Path(f.path).relative_to(tmp_path / "a").as_posix()  # (an example may have folders)
        text = ex.files[name]
        once = apply_fixes(text, [f], unsafe=True)
        assert once.applied == [f] and once.text != text
        ast.parse(once.text)
        after = lint_files(tmp_path / f"b{f.span.line}", {**ex.files, name: once.text},
                           select=select, versions=ex.versions)
        gone = Counter(map(_key, before)) - Counter(map(_key, after))
        new = Counter(map(_key, after)) - Counter(map(_key, before))
        assert _key(f) in gone, f"{rule.code}'s fix did not remove its finding"
        unexpected = [k for k in new if (rule.code, k[1]) not in REVEALS]
        assert not unexpected, f"{rule.code}'s fix created new findings: {unexpected}"
        # applying the fixes of the fixed file again changes nothing of this finding's kind
        again = [g for g in after if g.code == rule.code and fixable(g, unsafe=True)
                 and Path(g.path).relative_to(tmp_path / f"b{f.span.line}").as_posix() == name
                 and g.span.line == f.span.line]
        assert apply_fixes(once.text, again, unsafe=True).text == once.text or not again


def test_fix_on_the_seed_advice(tmp_path):
    copy = tmp_path / "discussion_advice.py"
    shutil.copy(ROOT / "examples" / "seed_ensemble" / "discussion_advice.py", copy)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n")
    main(["check", "--fix", "--no-cache", str(copy)])
    # Flax constraints run under it: the fix makes them apply, so where values live changes
    # (what the user wants, but a change): unsafe, applied only when asked for.
    assert "with nn.logical_axis_rules(rules), mesh:" in copy.read_text()
    main(["check", "--fix", "--unsafe-fixes", "--no-cache", str(copy)])
    text = copy.read_text()
    assert "with nn.logical_axis_rules(rules), jax.set_mesh(mesh):" in text
    assert main(["check", "--no-cache", "--select", "SHL101", str(copy)]) == 0


def test_the_fixing_rules_have_examples_that_fix(tmp_path):
    fixing = set()
    for rule in all_rules():
        for i, ex in enumerate(rule.INVALID):
            found = lint_files(tmp_path / f"{rule.code}{i}", ex.files, select=(rule.code,),
                               versions=ex.versions)
            if any(fixable(f, unsafe=True) for f in found):
                fixing.add(rule.code)
    assert {"SHL101", "SHL102", "SHL105", "SHL204", "SHL401", "SHL404", "SHL405", "SHL501",
            "SHL502"} <= fixing


def test_fixes_of_several_rules_compose_and_skip_suppressed_lines(tmp_path):
    f = tmp_path / "t.py"
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n")
    f.write_text(
        "import jax\n"
        "from jax.sharding import Mesh\n"
        "mesh = Mesh(jax.devices(), ('data',))\n"
        "with mesh:\n"
        "    a = jax.tree_map(lambda p: p, {})\n"
        "    b = jax.tree_map(lambda p: p, {})  # shardlint: ignore[SHL501]\n")
    assert main(["check", "--fix", "--no-cache", str(f)]) == 0
    assert f.read_text().splitlines()[3:] == [
        "with jax.set_mesh(mesh):",
        "    a = jax.tree.map(lambda p: p, {})",
        "    b = jax.tree_map(lambda p: p, {})  # shardlint: ignore[SHL501]",
    ]


def test_a_costly_fix_is_built_only_when_asked_for(tmp_path):
    """SHL102's fix rewrites the statement with libcst: the finding carries a recipe, not the
    edit, so linting (every keystroke in the editor) never runs libcst; applying builds it."""
    import shardlint.findings.fixes as fixes

    rule = next(r for r in all_rules() if r.code == "SHL102")
    ex = next(e for e in rule.INVALID
              if any(f.code == "SHL102" and f.fix is not None
                     for f in lint_files(tmp_path / "probe", e.files, select=("SHL102",),
                                         versions=e.versions)))
    calls = []
    fixes._BUILT.clear()
    real = fixes.wrap_in_with
    fixes.wrap_in_with = lambda *a: calls.append(a) or real(*a)
    try:
        found = [f for f in lint_files(tmp_path / "p", ex.files, select=("SHL102",),
                                       versions=ex.versions) if f.fix is not None]
        assert found and calls == []
        assert all(f.fix.recipe is not None and f.fix.edits == () for f in found)
        text = Path(found[0].path).read_text(encoding="utf-8")
        edits = fixes.resolve(found[0].fix, text)
        assert len(edits) == 1 and len(calls) == 1
        assert "with " in edits[0].text
        fixes.resolve(found[0].fix, text)
        assert len(calls) == 1  # (remembered for the same text)
    finally:
        fixes.wrap_in_with = real


def test_fix_runs_until_nothing_changes(tmp_path):
    """SHL404's fix (nnx.jit) brings out SHL401 (donation) with a fix of its own: one `--fix`
    applies both, and a second run changes nothing."""
    from shardlint.rules.base import all_rules as rules

    rule = next(r for r in rules() if r.code == "SHL404")
    ex = rule.INVALID[0]
    for name, text in ex.files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n")
    paths = [str(tmp_path / n) for n in ex.files]
    main(["check", "--fix", "--unsafe-fixes", "--no-cache", "--exit-zero", *paths])
    once = {n: (tmp_path / n).read_text() for n in ex.files}
    assert once != ex.files
    assert "donate" in "".join(once.values())  # the revealed SHL401 was fixed in the same run
    main(["check", "--fix", "--unsafe-fixes", "--no-cache", "--exit-zero", *paths])
    assert {n: (tmp_path / n).read_text() for n in ex.files} == once


@pytest.mark.parametrize("versions,advice,writes,applicability", [
    ("0.4.20", "jax.tree_util.tree_flatten", "jax.tree_util.tree_flatten", "safe"),
    ("0.4.20..0.6.2", "jax.tree_util.tree_flatten", "jax.tree_util.tree_flatten", "safe"),
    ("0.4.25..0.6.2", "jax.tree.flatten", "jax.tree.flatten", "safe"),
])
def test_shl501_writes_a_replacement_every_allowed_jax_has(tmp_path, versions, advice, writes,
                                                           applicability):
    """`jax.tree.flatten` first came in jax 0.4.25: where the project may run an older jax the
    advice and the fix are `jax.tree_util.tree_flatten`, which every release has (and which the
    release's own deprecation message names)."""
    from shardlint.semantics.catalog import facts
    from shardlint.semantics.catalog.versions import assume

    text = 'import jax\nleaves, treedef = jax.tree_flatten({"w": 1.0})\n'
    found = [f for f in lint_files(tmp_path, {"a.py": text}, select=("SHL501",),
                                   versions={"jax": versions}) if f.code == "SHL501"]
    assert len(found) == 1 and f"use `{advice}`" in found[0].message, found
    fix = found[0].fix
    assert fix is not None and fix.applicability == applicability
    fixed = apply_fixes(text, [found[0]], unsafe=True).text
    assert f"{writes}(" in fixed
    v = assume(jax=versions)
    key = facts.version_key
    span = [r for r in facts.releases("jax") if key(v.oldest("jax")) <= key(r) <= key(v.jax)]
    assert span and all(facts.exists(writes, r) for r in span)


def test_shl501_gives_the_condition_where_no_spelling_exists_in_every_allowed_jax(tmp_path):
    """`jax.sharding.use_mesh` (deprecated in 0.7.1) -> `jax.set_mesh` (0.7.1): with pins that
    allow jax 0.6.2 no spelling of it exists in all of them: no fix, and the message says when."""
    text = "import jax\nwith jax.sharding.use_mesh(m):\n    pass\n"
    found = [f for f in lint_files(tmp_path, {"a.py": text}, select=("SHL501",),
                                   versions={"jax": "0.6.2..0.8.0"}) if f.code == "SHL501"]
    assert len(found) == 1, found
    assert "use `jax.set_mesh` once the project requires jax >= 0.7.1" in found[0].message
    assert found[0].fix is None


def test_shl501_a_stand_in_not_shown_to_be_the_same_is_an_unsafe_fix(tmp_path, monkeypatch):
    """Where the releases do not show the stand-in takes what the old name takes, a rename's fix
    is unsafe, and says what to check."""
    from shardlint.semantics.file import moves

    monkeypatch.setattr(moves, "_same", lambda old, new, span: False)
    moves._replacement.cache_clear()
    try:
        text = 'import jax\nleaves, treedef = jax.tree_flatten({"w": 1.0})\n'
        [f] = [f for f in lint_files(tmp_path, {"a.py": text}, select=("SHL501",),
                                     versions={"jax": "0.4.20"}) if f.code == "SHL501"]
        assert "use `jax.tree_util.tree_flatten`" in f.message
        assert f.fix is not None and f.fix.applicability == "unsafe"
        assert "stands in for `jax.tree.flatten`" in f.fix.description
    finally:
        moves._replacement.cache_clear()


def test_shl501_pins_older_than_any_release_read_count_as_the_oldest_read(tmp_path):
    from shardlint.semantics.catalog.versions import Versions
    from shardlint.semantics.file.moves import replacement_for

    v = Versions("0.6.2", "0.8.0", {}, {"jax": "0.2.0"})  # (jax>=0.2,<0.7)
    r = replacement_for("jax.tree_flatten", "jax.tree.flatten", v)
    assert (r.name, r.wanted, r.needs) == ("jax.tree_util.tree_flatten", "jax.tree.flatten",
                                           "0.4.25")


@pytest.mark.parametrize("serve_calls,applicability", [
    ("jax.experimental.pjit.pjit(lambda x: x, in_shardings=P('x'), out_shardings=P('x'))(x)",
     "unsafe"),
    ("jax.jit(lambda x: x * 2)(x)", "safe"),
])
def test_shl101_fix_is_unsafe_where_the_body_reaches_a_pjit_in_another_module(
        tmp_path, serve_calls, applicability):
    """saxml's `load_methods`: `with self._global_mesh:` around a method that, in another
    module, lowers a pjit given bare PartitionSpecs. Under `jax.set_mesh` alone such a pjit
    raises (`pjit requires a non-empty mesh in context`): replacing the `with` is no safe fix
    where project code it calls reaches a module that calls pjit."""
    files = {
        "backend.py": f"""
import jax
import jax.experimental.pjit
from jax.sharding import PartitionSpec as P


def serve(x):
    return {serve_calls}
""",
        "server.py": """
import jax
import numpy as np
from backend import serve


def load(x):
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("x",))
    with mesh:
        return serve(x)
""",
    }
    found = [f for f in lint_files(tmp_path, files, select=("SHL101",),
                                   versions={"jax": "0.12.0.1"}) if f.code == "SHL101"]
    assert len(found) == 1 and found[0].fix is not None, found
    assert found[0].fix.applicability == applicability
