"""Open the seed example, see its findings, edit them away: as in VS Code and in Neovim."""

from __future__ import annotations

import pytest
from conftest import codes_lines, position_of
from lsprotocol import types

from shardlint.config import load
from shardlint.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")

SEED_FINDINGS = {("SHL102", 64), ("SHL103", 64), ("SHL501", 68), ("SHL102", 81), ("SHL103", 81)}


async def test_open_seed_example_shows_its_findings(editor, seed_project):
    root = seed_project("original.py")
    uri = editor.open(root / "original.py")
    diags = await editor.diagnostics(uri)

    assert SEED_FINDINGS <= codes_lines(diags)
    # The project was indexed first, with a progress report.
    reports = [r for r in editor.client.progress_reports.values()
               if r and getattr(r[0], "message", "") == f"indexing {root}"]
    assert reports and [r.kind for r in reports[0]] == ["begin", "end"]
    assert reports[0][1].message.startswith("indexed 1 module of")
    # The editor shows exactly what `shardlint check` reports, at the same positions.
    engine = Engine(load(root), use_cache=False)
    expected = {(f.code, f.span.line - 1, f.span.col, f.span.end_line - 1, f.span.end_col, f.message)
                for f in engine.lint_paths([root / "original.py"])}
    got = {(d.code, d.range.start.line, d.range.start.character, d.range.end.line,
            d.range.end.character, d.message) for d in diags}
    assert got == expected
    assert all(d.source == "shardlint" for d in diags)

    by_code = {str(d.code): d for d in diags}
    assert by_code["SHL501"].severity == types.DiagnosticSeverity.Error
    assert by_code["SHL102"].severity == types.DiagnosticSeverity.Warning
    assert list(by_code["SHL501"].tags) == [types.DiagnosticTag.Deprecated]
    # A missing context points at the constraints and at where the model is run.
    (init,) = [d for d in diags if d.code == "SHL102" and d.range.start.line == 63]
    related = init.related_information
    assert related and all(r.location.uri == uri for r in related)
    lines = {r.location.range.start.line + 1: r.message for r in related}
    assert {26, 30, 34, 76} <= set(lines) and "without it" in lines[76]
    if editor.name == "vscode":  # Neovim 0.7 does not declare codeDescriptionSupport
        assert by_code["SHL501"].code_description.href.endswith("#shl501-deprecated-or-removed-api")
    else:
        assert by_code["SHL501"].code_description is None


async def test_editing_the_fix_in_clears_the_findings(editor, seed_project):
    root = seed_project("original.py", "fixed.py")
    uri = editor.open(root / "original.py")
    assert SEED_FINDINGS <= codes_lines(await editor.diagnostics(uri))

    editor.replace(uri, "jax.tree_map(", "jax.tree.map(")
    diags = await editor.diagnostics(uri)
    assert ("SHL501", 68) not in codes_lines(diags)
    assert SEED_FINDINGS - {("SHL501", 68)} <= codes_lines(diags)

    # Now type in the fixed program (unsaved): the context findings go too.
    text = editor.texts[uri]
    fixed = (root / "fixed.py").read_text(encoding="utf-8")
    end = position_of(text + "\0", "\0", editor.encoding)
    editor.edit(uri, [types.TextEdit(types.Range(types.Position(0, 0), end), fixed)])
    codes = {c for c, _ in codes_lines(await editor.diagnostics(uri))}
    assert not codes & {"SHL101", "SHL102", "SHL103", "SHL501"}


async def test_close_clears_pushed_diagnostics(editor, seed_project):
    root = seed_project("original.py")
    uri = editor.open(root / "original.py")
    assert await editor.diagnostics(uri)
    if editor.pull:
        pytest.skip("a pull client drops a closed document's diagnostics itself")
    mark = editor.mark()
    editor.close(uri)
    cleared = await editor.wait_push(lambda p: p.uri == uri and not p.diagnostics, since=mark[1])
    assert list(cleared.diagnostics) == []


@pytest.mark.parametrize("name", ["vscode", "neovim"])
async def test_a_burst_of_edits_reports_only_the_last_version(name, seed_project, fresh):
    root = seed_project("original.py")
    async with fresh(name) as editor:
        # A debounce far longer than the burst takes, so a slow CI machine cannot split it.
        await editor.start(root, options={"shardlint": {"debounceMs": 1000}})
        uri = editor.open(root / "original.py")
        await editor.diagnostics(uri)
        mark = editor.mark()
        for i in range(100):  # type a comment line above everything, line by line
            editor.edit(uri, [types.TextEdit(types.Range(types.Position(i, 0), types.Position(i, 0)),
                                             f"#{i % 10}\n")])
        assert editor.versions[uri] == 101
        diags = await editor.diagnostics(uri)
        assert {(c, line + 100) for c, line in SEED_FINDINGS} <= codes_lines(diags)
        later = editor.client.published[mark[1]:]
        if editor.pull:
            assert later == []  # a pull client is never pushed to
        else:
            assert [p.version for p in later if p.uri == uri] == [101]


async def test_non_ascii_text_gets_exact_columns(editor, project):
    # Before the finding: 2-byte, 3-byte and 4-byte (surrogate pair in UTF-16) characters.
    src = ('import jax\n'
           'def f(ü, x):\n'
           '    s = "日本😀"; y = jax.tree_map(lambda a: a, x)  # ☃\n'
           '    return y\n')
    root = project({"m.py": src})
    uri = editor.open(root / "m.py")
    (d,) = [d for d in await editor.diagnostics(uri) if d.code == "SHL501"]
    assert d.range.start == position_of(src, "jax.tree_map", "utf-16")
    assert d.range.end == position_of(src, "(lambda", "utf-16")

    # An incremental edit after the emoji, in UTF-16 units, lands where the user typed it.
    editor.replace(uri, "日本😀", "日本😀😀é")
    (d,) = [d for d in await editor.diagnostics(uri) if d.code == "SHL501"]
    assert d.range.start == position_of(editor.texts[uri], "jax.tree_map", "utf-16")


@pytest.mark.parametrize("encoding", ["utf-8", "utf-32"])
async def test_other_position_encodings_are_negotiated(encoding, project, fresh):
    src = 'import jax\ny = ("é😀", jax.tree_map(abs, [1]))\n'
    root = project({"m.py": src})
    async with fresh("vscode") as ed:
        await ed.start(root, encodings=[encoding, "utf-16"])
        assert ed.encoding == encoding
        uri = ed.open(root / "m.py")
        (d,) = [d for d in await ed.diagnostics(uri) if d.code == "SHL501"]
        assert d.range.start == position_of(src, "jax.tree_map", encoding)
        ed.replace(uri, "é😀", "é😀ü")
        (d,) = [d for d in await ed.diagnostics(uri) if d.code == "SHL501"]
        assert d.range.start == position_of(ed.texts[uri], "jax.tree_map", encoding)
