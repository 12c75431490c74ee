"""The server's own document store: LSP line breaks, every position encoding, notebooks."""

from __future__ import annotations

import pytest
from lsprotocol import types

from shardlint.findings.suppress import uncommentable
from shardlint.lsp.documents import DocumentStore, apply_change


def change(l1: int, c1: int, l2: int, c2: int, text: str) -> types.TextDocumentContentChangePartial:
    return types.TextDocumentContentChangePartial(
        types.Range(types.Position(l1, c1), types.Position(l2, c2)), text)


def test_form_feed_and_other_unicode_breaks_are_not_line_breaks():
    # str.splitlines would see 4 lines here; LSP (and Python) see 2.
    text = "a = 1\x0c  # \u2028 x\x1c\nb = 2\n"
    assert apply_change(text, change(1, 0, 1, 1, "c"), "utf-16") == "a = 1\x0c  # \u2028 x\x1c\nc = 2\n"


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
def test_every_lsp_line_break(eol):
    text = f"x = 1{eol}y = 2{eol}z = 3{eol}"
    assert apply_change(text, change(2, 0, 2, 1, "w"), "utf-16") == f"x = 1{eol}y = 2{eol}w = 3{eol}"


@pytest.mark.parametrize(("encoding", "col"), [("utf-8", 11), ("utf-16", 8), ("utf-32", 7)])
def test_columns_after_an_emoji(encoding, col):
    text = 's = "é😀x"\n'  # the `x`: byte 11, UTF-16 unit 8, code point 7
    assert apply_change(text, change(0, col, 0, col + 1, "y"), encoding) == 's = "é😀y"\n'


def test_positions_past_the_end_clamp():
    assert apply_change("ab\ncd", change(0, 99, 7, 0, "!"), "utf-16") == "ab!"
    assert apply_change("ab", change(5, 0, 5, 0, "?"), "utf-16") == "ab?"


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16", "utf-32"])
def test_lf_text_takes_the_same_positions_as_crlf(encoding):
    """Text without a carriage return has its own fast path: it must find what the general one
    finds in the same text written with CRLF."""
    import random

    from shardlint.lsp.documents import offset_at

    rng = random.Random(encoding)
    for _ in range(3000):
        text = "".join(rng.choice(["a", "é", "😀", "\n", " "]) for _ in range(rng.randrange(40)))
        line, col = rng.randrange(-1, 12), rng.randrange(12)
        crlf = text.replace("\n", "\r\n")
        breaks = text.count("\n", 0, offset_at(text, line, col, encoding))
        assert offset_at(crlf, line, col, encoding) == offset_at(text, line, col, encoding) + breaks


def test_a_range_applied_from_its_start_is_the_range_of_both_positions() -> None:
    """A keystroke's end is found from its start (a few lines below at most, or the same
    line); every range, clamped, inverted or past the end, edits what the two positions name."""
    import random

    from shardlint.lsp.documents import offset_at

    rng = random.Random(5)
    texts = ["", "a", "abc\n", "x\ny\n\nzzz", "héllo\nwörld 😀 x\n\nend", "\n\n\n",
             "a\r\nb\rc\n", "ab\n\ncd\n"]
    for text in texts:
        lines = text.count("\n") + 1
        for _ in range(600):
            l1 = rng.randrange(0, lines + 2)
            l2 = max(0, l1 + rng.choice([0, 0, 1, 2, -1, 9, 12]))
            c1, c2 = rng.randrange(0, 12), rng.randrange(0, 12)
            for encoding in ("utf-16", "utf-8", "utf-32"):
                a, b = sorted((offset_at(text, l1, c1, encoding), offset_at(text, l2, c2, encoding)))
                got = apply_change(text, change(l1, c1, l2, c2, "Q"), encoding)
                assert got == text[:a] + "Q" + text[b:], (text, l1, c1, l2, c2, encoding)


def test_a_document_line_index_finds_what_a_split_finds() -> None:
    """A document keeps where its lines start across edits (the lines before each edit keep
    theirs): every edit, however long, wherever it starts, gives what the same edit gives
    without the index. Whole-text changes and carriage returns come and go among them."""
    import random

    from shardlint.lsp.documents import LineIndex

    rng = random.Random(11)
    pieces = ["a", "é", "😀", "\n", " ", "\n\n", "xy\nz", "\r\n", "\r", ""]
    for encoding in ("utf-16", "utf-8", "utf-32"):
        index = LineIndex()
        text = "".join(rng.choice(pieces[:6]) for _ in range(300))
        for step in range(1500):
            if step % 200 == 199:
                text = "".join(rng.choice(pieces) for _ in range(rng.randrange(300)))
                continue  # (a whole-text change: the index is of another text now)
            lines = text.count("\n") + 1
            l1 = rng.choice([rng.randrange(lines + 2), lines // 2, max(lines - 2, 0)])
            l2 = max(0, l1 + rng.choice([0, 0, 0, 1, 3, -1, 40]))
            c1, c2 = rng.randrange(0, 8), rng.randrange(0, 8)
            new = rng.choice(pieces) if rng.random() < 0.9 else rng.choice(pieces) * 3
            edit = change(l1, c1, l2, c2, new)
            want = apply_change(text, edit, encoding)
            got = apply_change(text, edit, encoding, index)
            assert got == want, (step, l1, c1, l2, c2, new)
            # The next edit is of the text the index knows (the last one it made), or now and
            # then of the same text without its carriage returns.
            text = got if rng.random() < 0.95 else got.replace("\r", "")


def test_full_change_replaces_the_text():
    full = types.TextDocumentContentChangeWholeDocument(text="new\n")
    assert apply_change("old\n", full, "utf-16") == "new\n"


def test_notebook_cells_join_and_map_back():
    store = DocumentStore()
    nb = "file:///w/n.ipynb"
    cells = [("c0", "import jax\n%time x = 1\nif x:\n    !ls\n", "python", types.NotebookCellKind.Code),
             ("c1", "# Title", "markdown", types.NotebookCellKind.Markup),
             ("c2", "%%bash\necho hi", "python", types.NotebookCellKind.Code),
             ("c3", "y = jax.numpy.ones(3)", "python", types.NotebookCellKind.Code)]
    store.open_notebook(types.DidOpenNotebookDocumentParams(
        types.NotebookDocument(nb, "jupyter-notebook", 1,
                               [types.NotebookCell(kind=k, document=u) for u, _, _, k in cells]),
        [types.TextDocumentItem(u, lang, 1, t) for u, t, lang, _ in cells]))
    src = store.notebook(nb).source(store.docs)
    assert src.text.split("\n") == ["import jax", "", "if x:", "    pass", "", "", "",
                                    "y = jax.numpy.ones(3)", ""]
    assert [(c.uri, c.start, c.count) for c in src.cells] == [("c0", 1, 5), ("c2", 6, 2), ("c3", 8, 1)]
    cell, line = src.locate(8)
    assert (cell.uri, line) == ("c3", 0)
    assert store.unit("c3") is store.notebook(nb)


def test_comments_cannot_go_inside_strings_or_after_a_backslash():
    text = 'x = """doc\nmore"""\ny = 1 + \\\n    2\nz = f"""{x}\n"""\n'
    assert uncommentable(text, range(1, 8)) == {1, 3, 5}
