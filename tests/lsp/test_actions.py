"""Quick fixes, fix-all, suppression actions and hovers, applied the way an editor applies them."""

from __future__ import annotations

import pytest
from conftest import codes_lines, position_of
from lsprotocol import types

pytestmark = pytest.mark.asyncio(loop_scope="session")

FIX_ALL = "source.fixAll.shardlint"
TWO_LEGACY_MESHES = '''import jax
import flax.linen as nn
from jax.experimental import mesh_utils
from jax.sharding import Mesh

mesh = Mesh(mesh_utils.create_device_mesh((2, 1)), ("model", "data"))
with nn.logical_axis_rules((("batch", "data"),)), mesh:
    pass
with mesh:
    pass
'''


def at(diag: types.Diagnostic) -> types.Range:
    return types.Range(diag.range.start, diag.range.start)


async def test_quick_fix_replaces_the_legacy_mesh_context(editor, seed_project):
    root = seed_project("discussion_advice.py")
    uri = editor.open(root / "discussion_advice.py")
    (legacy,) = [d for d in await editor.diagnostics(uri) if d.code == "SHL101"]
    assert legacy.range.start.line + 1 == 80

    actions = await editor.code_actions(uri, at(legacy))
    # Flax constraints run under it: the fix makes them apply (where values live changes), so
    # it is offered as unsafe, not preferred.
    fix = next(a for a in actions if a.title.startswith("Replace `mesh`"))
    assert fix.kind == types.CodeActionKind.QuickFix and not fix.is_preferred
    assert fix.title == "Replace `mesh` with `jax.set_mesh(mesh)` (unsafe)"
    assert [d.code for d in fix.diagnostics] == ["SHL101"]
    editor.apply(fix.edit)

    assert "with nn.logical_axis_rules(rules), jax.set_mesh(mesh):" in editor.texts[uri]
    assert "SHL101" not in {d.code for d in await editor.diagnostics(uri)}


async def test_fix_all_applies_every_safe_fix_at_once(editor, project):
    root = project({"meshes.py": TWO_LEGACY_MESHES})
    uri = editor.open(root / "meshes.py")
    assert [line for c, line in sorted(codes_lines(await editor.diagnostics(uri)))
            if c == "SHL101"] == [7, 9]

    whole = types.Range(types.Position(0, 0), types.Position(0, 0))
    (fix_all,) = await editor.code_actions(uri, whole, only=[FIX_ALL])
    assert fix_all.kind == FIX_ALL
    editor.apply(fix_all.edit)

    assert editor.texts[uri].count("jax.set_mesh(mesh)") == 2
    assert "SHL101" not in {d.code for d in await editor.diagnostics(uri)}
    # Nothing left to fix: no fix-all offered.
    assert await editor.code_actions(uri, whole, only=[FIX_ALL]) == []


async def test_ignore_on_this_line_and_in_this_file(editor, seed_project):
    root = seed_project("original.py")
    uri = editor.open(root / "original.py")
    diags = await editor.diagnostics(uri)
    (removed,) = [d for d in diags if d.code == "SHL501"]

    actions = await editor.code_actions(uri, at(removed), only=[types.CodeActionKind.QuickFix])
    by_title = {a.title: a for a in actions}
    assert {"Ignore SHL501 on this line", "Ignore SHL501 in this file"} <= set(by_title)
    editor.apply(by_title["Ignore SHL501 on this line"].edit)
    assert "    variables = jax.tree_map(  # shardlint: ignore[SHL501]\n" in editor.texts[uri]
    diags = await editor.diagnostics(uri)
    assert "SHL501" not in {d.code for d in diags}

    init = next(d for d in diags if d.code == "SHL102" and d.range.start.line == 63)
    actions = await editor.code_actions(uri, at(init))
    by_title = {a.title: a for a in actions}
    editor.apply(by_title["Ignore SHL102 in this file"].edit)
    assert editor.texts[uri].startswith("# shardlint: file-ignore[SHL102]\n")
    left = codes_lines(await editor.diagnostics(uri))
    assert {c for c, _ in left} & {"SHL102", "SHL501"} == set()
    assert {("SHL103", 65), ("SHL103", 82)} <= left  # every line moved down by one

    actions = await editor.code_actions(uri, types.Range(types.Position(64, 16), types.Position(64, 16)))
    editor.apply({a.title: a for a in actions}["Ignore SHL103 in this file"].edit)
    assert editor.texts[uri].startswith("# shardlint: file-ignore[SHL102, SHL103]\n")


async def test_ignore_on_this_line_extends_an_existing_comment(editor, project):
    src = ("import jax\n"
           "y = jax.tree_map(abs, [1]), jax.tree_util.tree_map(abs, [1])  # shardlint: ignore[SHL9]\n")
    root = project({"m.py": src})
    uri = editor.open(root / "m.py")
    (d,) = [d for d in await editor.diagnostics(uri) if d.code == "SHL501"]
    actions = await editor.code_actions(uri, at(d))
    editor.apply(next(a for a in actions if a.title == "Ignore SHL501 on this line").edit)
    assert editor.texts[uri].endswith("# shardlint: ignore[SHL9, SHL501]\n")
    assert not [d for d in await editor.diagnostics(uri) if d.code == "SHL501"]


async def test_hover_shows_the_rule_docs(editor, seed_project):
    root = seed_project("original.py")
    uri = editor.open(root / "original.py")
    text = editor.texts[uri]
    await editor.diagnostics(uri)

    hover = await editor.hover(uri, position_of(text, "tree_map(\n", editor.encoding))
    assert hover.contents.kind == types.MarkupKind.Markdown
    assert hover.contents.value.startswith("# SHL501 deprecated-or-removed-api")
    assert "## Why is this bad?" in hover.contents.value
    assert hover.range.start == position_of(text, "jax.tree_map(\n", editor.encoding)

    # Two findings on one range: both rules' docs.
    both = await editor.hover(uri, position_of(text, "model.init(rng", editor.encoding))
    assert "# SHL102 constraint-without-rules" in both.contents.value
    assert "# SHL103 constraint-without-mesh" in both.contents.value

    assert await editor.hover(uri, position_of(text, "class MLP", editor.encoding)) is None


async def test_hover_over_a_code_in_a_suppression_comment(editor, project):
    src = ("import jax  # shardlint: file-ignore[SHL4]\n"
           "y = jax.tree_map(abs, [1])  # noqa: SHL501\n")
    root = project({"m.py": src})
    uri = editor.open(root / "m.py")
    assert "SHL501" not in {d.code for d in await editor.diagnostics(uri)}  # suppressed

    hover = await editor.hover(uri, position_of(src, "501", editor.encoding))
    assert hover.contents.value.startswith("# SHL501 deprecated-or-removed-api")
    start = position_of(src, "SHL501", editor.encoding)
    assert (hover.range.start, hover.range.end) == (
        start, types.Position(start.line, start.character + 6))

    prefix = await editor.hover(uri, position_of(src, "SHL4", editor.encoding))
    assert prefix.contents.value.startswith("# SHL4: ")
    assert "**SHL401**" in prefix.contents.value
