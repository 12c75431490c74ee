"""Suppression comments found through the syntax tree (only the statements that hold one are
tokenized) are exactly those a tokenizer finds in the whole file."""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path

import pytest

from shardlint.findings.suppress import candidate_lines, parse, statement_spans, uncommentable

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("shardlint/semantics/flow/*.py"), *ROOT.glob("shardlint/lsp/*.py"),
                  *ROOT.glob("examples/**/*.py")])
COMMENTS = ["  # noqa: SHL501", "  # shardlint: ignore[SHL2]", "  # see #3  # noqa: SHL401, SHL1",
            "  # shardlint: file-ignore[SHL3]", "#noqa:SHL5"]
STRINGS = ["'# noqa: SHL501'", '"# shardlint: file-ignore[SHL1]"', 'f"{x!r}  # noqa: SHL2"',
           'f"{d["# noqa: SHL3"]}"', '"""\n# noqa: SHL4\n"""', "('a'  # noqa: SHL402\n 'b')"]


def _agree(text: str, rng: random.Random) -> None:
    tree = ast.parse(text)
    full = parse(text)
    lines = text.count("\n") + 1
    for wanted in (set(full.lines), {rng.randrange(1, lines + 1) for _ in range(5)},
                   set(range(1, lines + 1))):
        got = parse(text, tree, wanted)
        # (the lines wanted as the whole file has them, and any other found the same too)
        for line in wanted | set(got.lines):
            assert got.lines.get(line) == full.lines.get(line), (line, sorted(wanted)[:10])
        assert got.file == full.file


def _edited(text: str, rng: random.Random) -> str:
    lines = text.split("\n")
    for _ in range(rng.randrange(1, 4)):
        i = rng.randrange(len(lines))
        kind = rng.random()
        if kind < 0.5:
            lines[i] += rng.choice(COMMENTS)  # (inside a string, it is part of the string)
        elif kind < 0.75:
            indent = re.match(r"[ \t]*", lines[i]).group(0)
            lines.insert(i, indent + rng.choice(COMMENTS).strip())
        else:
            m = re.search(r"'[^'\\\n]*'|\"[^\"\\\n]*\"", lines[i])
            if m:
                lines[i] = lines[i][:m.start()] + rng.choice(STRINGS) + lines[i][m.end():]
    return "\n".join(lines)


def _parsing_edits(path: Path, rng: random.Random, tries: int) -> list[str]:
    """Random edits of a file (suppression comments and look-alikes added) that still parse."""
    base = path.read_text(encoding="utf-8")
    out = []
    for _ in range(tries):
        text = _edited(base, rng)
        try:
            ast.parse(text)
        except SyntaxError:
            continue
        out.append(text)
    return out


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_suppressions_through_the_tree_are_the_tokenizers(path: Path) -> None:
    rng = random.Random(path.name)
    texts = _parsing_edits(path, rng, 20)
    for text in texts:
        _agree(text, rng)
    assert len(texts) >= 5


TRICKY = [
    # A string ends where the next statement starts: that statement's line is not its own.
    'x = """\nabc"""; y = """# noqa: SHL401"""\nz = 1  # noqa: SHL501\n',
    # Pieces of one string across lines, a comment between them.
    "x = ('a'  # noqa: SHL402\n     'b')\n",
    # Nested quotes in an f-string (Python 3.12+), a decorator written `@ name`.
    'import jax\n\n\n@ jax.jit\ndef f(d):  # shardlint: ignore[SHL1]\n    return f"{d["# noqa: SHL3"]}"\n',
    # A body on its header's line, and a signature over two lines.
    "class A: x = 1  # noqa: SHL501\n\n\ndef g(a,\n      b): return a  # noqa: SHL2\n",
]


@pytest.mark.parametrize("text", TRICKY)
def test_look_alike_comments_in_strings(text: str) -> None:
    body = "\n".join(f"    v{i} = {i}  # noqa: SHL50{i % 9}" for i in range(60))
    # (each inside a large class too, where the statement that holds it is looked for)
    indented = "\n".join("    " + line if line else line for line in text.split("\n"))
    for source in (text, f"class Big:\n    def m(self):\n{body}\n\n{indented}\n"):
        try:
            ast.parse(source)
        except SyntaxError:
            continue  # (nested quotes before 3.12, or the indented copy)
        _agree(source, random.Random(0))


def test_code_actions_and_hovers_tokenize_only_the_statements_they_need(
        tmp_path: Path, monkeypatch) -> None:
    """An editor asks for code actions at every move of the cursor, on the event loop: nothing is
    tokenized for a cursor away from any finding, and for one on a finding only the statements
    that hold its lines and the file-wide comments (found with the analysis's syntax tree), once
    per result; a hover, only on a line with a comment, and again only its statement."""
    from lsprotocol import types

    from shardlint.findings import suppress
    from shardlint.lsp import actions, hover
    from shardlint.lsp.analyzer import Analyzer
    from shardlint.lsp.client import ClientFeatures
    from shardlint.lsp.convert import DiagnosticSupport
    from shardlint.lsp.result import analyse

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n", encoding="utf-8")
    path = tmp_path / "train.py"
    filler = "".join(f"\n\ndef g{i}(x):\n    return x + {i}\n" for i in range(30))
    text = ("# shardlint: file-ignore[SHL9]\nimport jax\n\n\ndef f(t):\n    s = \"\"\"a\nb\"\"\"\n"
            "    return jax.tree_map(abs, t)  # noqa: SHL4\n" + filler)
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    res = analyse(Analyzer(), key=uri, revision=1, path=path, text=text, cells=None, uri=uri,
                  versions={uri: 1}, others={}, encoding="utf-16", support=DiagnosticSupport())
    (finding,) = res.findings
    scanned: list[str] = []
    real = suppress._scan
    monkeypatch.setattr(suppress, "_scan", lambda t, *a: (scanned.append(t), real(t, *a))[1])
    suppress._REGIONS.clear()
    features = ClientFeatures(code_action_literals=True)

    def asked(line: int) -> list[str]:
        rng = types.Range(types.Position(line - 1, 0), types.Position(line - 1, 80))
        return [a.title for a in actions.code_actions(res, uri, rng, None, features)]

    assert not any(t.startswith("Ignore") for t in asked(3)) and scanned == []
    titles = asked(finding.span.line)
    assert "Ignore SHL501 on this line" in titles and "Ignore SHL501 in this file" in titles
    # (the function that holds the finding, and the import whose region the file-wide comment
    # before it is in)
    function = text[text.index("def f"):text.index("\n\n\ndef g0")] + "\n\n\n"
    assert sorted(scanned) == sorted([text[:text.index("def f")], function])
    scanned.clear()
    asked(finding.span.line)
    assert scanned == []  # (kept with the result)

    monkeypatch.setattr(hover, "parse_suppressions",
                        lambda t, **k: (scanned.append("hover"), suppress.parse(t, **k))[1])
    assert hover.hover(res, uri, types.Position(4, 2), "utf-16", True, None) is None
    assert scanned == []
    line = finding.span.line - 1
    found = hover.hover(res, uri, types.Position(line, text.split("\n")[line].index("SHL4") + 1),
                        "utf-16", True, None)
    assert scanned == ["hover"] and found is not None  # (the statements' scans are kept)


def _spans_agree(text: str, rng: random.Random) -> None:
    """Suppressions and the lines a comment cannot end, found through ``statement_spans``, are
    the whole file's for the lines asked."""
    tree = ast.parse(text)
    lines = text.split("\n")
    full = parse(text)
    blocked = uncommentable(text, range(1, len(lines) + 1))
    for wanted in ({rng.randrange(1, len(lines) + 1) for _ in range(5)}, set(full.lines)):
        spans = statement_spans(text, tree, {*wanted, *candidate_lines(text)})
        got = parse(text, wanted=wanted, spans=spans)
        for line in wanted:
            assert got.lines.get(line) == full.lines.get(line), line
        assert got.file == full.file
        assert uncommentable(text, wanted, spans) == blocked & wanted, sorted(wanted)


@pytest.mark.parametrize("path", SOURCES[::3], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_suppressions_and_uncommentable_lines_through_spans_are_the_whole_files(path: Path) -> None:
    rng = random.Random(path.name + "spans")
    texts = _parsing_edits(path, rng, 12)
    for text in texts:
        _spans_agree(text, rng)
    assert len(texts) >= 3


@pytest.mark.parametrize("text", [
    *TRICKY, 'x = f"""{1}\n"""  # noqa: SHL1\ny = 1 + \\\n    2\n',
    'def f():\n    """doc\n    more"""\n    return 1  # noqa: SHL2\n'])
def test_uncommentable_lines_of_tricky_statements(text: str) -> None:
    try:
        ast.parse(text)
    except SyntaxError:
        return  # (nested quotes before 3.12)
    _spans_agree(text, random.Random(1))
