"""A notebook's Python cells are analysed together; each diagnostic lands in its own cell."""

from __future__ import annotations

import pytest
from conftest import codes_lines, position_of
from lsprotocol import types

pytestmark = pytest.mark.asyncio(loop_scope="session")

SETUP = '''import jax
import flax.linen as nn
%matplotlib inline

RULES = (("batch", "data"), ("embed", None), ("mlp", None))
mesh = jax.make_mesh((2,), ("data",))


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        y = nn.Dense(512)(x)
        return nn.with_logical_constraint(y, ("batch", "mlp"))
'''
RUN = "variables = MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))\n"
TREE = "leaves = jax.tree_map(abs, [1, -2])  # ü\n"
CONTEXT = "nn.set_logical_axis_rules(RULES)\njax.set_mesh(mesh)\n"


WATCHED = {"SHL102", "SHL103", "SHL501"}  # other rules may flag this code too: not this test's business


def watched(diags) -> set[tuple[str, int]]:
    return {(c, line) for c, line in codes_lines(diags) if c in WATCHED}


def cell(uri: str, kind=types.NotebookCellKind.Code) -> types.NotebookCell:
    return types.NotebookCell(kind=kind, document=uri)


async def test_notebook_cells_are_analysed_together(editor, project):
    if editor.name != "vscode":
        pytest.skip("Neovim 0.7 has no notebook support (no notebookDocument capability)")
    root = project({})
    nb = (root / "analysis.ipynb").as_uri()
    uris = [f"vscode-notebook-cell:{root / 'analysis.ipynb'}#C{i}" for i in range(4)]
    texts = [SETUP, "# Notes\nThe model runs below.", RUN, TREE]
    langs = ["python", "markdown", "python", "python"]
    kinds = [types.NotebookCellKind.Code, types.NotebookCellKind.Markup,
             types.NotebookCellKind.Code, types.NotebookCellKind.Code]
    editor.client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        types.NotebookDocument(nb, "jupyter-notebook", 1, [cell(u, k) for u, k in zip(uris, kinds)]),
        [types.TextDocumentItem(u, lang, 1, t) for u, lang, t in zip(uris, langs, texts)]))
    for u, t in zip(uris, texts):
        editor.texts[u], editor.versions[u] = t, 1

    # The model defined in cell 0 is run without context in cell 2: reported there, line 1.
    assert watched(await editor.diagnostics(uris[2])) == {("SHL102", 1), ("SHL103", 1)}
    (removed,) = [d for d in await editor.diagnostics(uris[3]) if d.code in WATCHED]
    assert removed.code == "SHL501"
    assert removed.range.start == position_of(TREE, "jax.tree_map", editor.encoding)
    assert await editor.diagnostics(uris[1]) == []
    assert watched(await editor.diagnostics(uris[0])) == set()

    # Hover and quick fixes work in a cell.
    hover = await editor.hover(uris[3], position_of(TREE, "tree_map", editor.encoding))
    assert hover.contents.value.startswith("# SHL501")
    actions = await editor.code_actions(uris[3], removed.range)
    assert "Ignore SHL501 on this line" in [a.title for a in actions]

    # A new cell before the run enters rules and mesh globally: cell 2 is clean (refreshed).
    mark = editor.mark()
    new = f"vscode-notebook-cell:{root / 'analysis.ipynb'}#C9"
    editor.client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        types.VersionedNotebookDocumentIdentifier(2, nb),
        types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
            structure=types.NotebookDocumentCellChangeStructure(
                array=types.NotebookCellArrayChange(start=1, delete_count=0, cells=[cell(new)]),
                did_open=[types.TextDocumentItem(new, "python", 1, CONTEXT)])))))
    await editor.refreshed(uris[2], lambda d: watched(d) == set(), mark)

    # Editing the last cell's text fixes its finding.
    editor.client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        types.VersionedNotebookDocumentIdentifier(3, nb),
        types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(
            text_content=[types.NotebookDocumentCellContentChanges(
                types.VersionedTextDocumentIdentifier(2, uris[3]),
                [types.TextDocumentContentChangePartial(
                    types.Range(position_of(TREE, "tree_map", editor.encoding),
                                position_of(TREE, "(abs", editor.encoding)), "tree.map")])]))))
    assert watched(await editor.diagnostics(uris[3])) == set()

    editor.client.notebook_document_did_close(types.DidCloseNotebookDocumentParams(
        types.NotebookDocumentIdentifier(nb),
        [types.TextDocumentIdentifier(u) for u in uris + [new]]))
    assert await editor.diagnostics(uris[2]) == []
    for u in uris:
        del editor.texts[u], editor.versions[u]
