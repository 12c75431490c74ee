"""Suppression comments found through the syntax tree (only the statements that hold one are
tokenized) are exactly those a tokenizer finds in the whole file."""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path

import pytest

from shardlint.findings.suppress import parse

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


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_suppressions_through_the_tree_are_the_tokenizers(path: Path) -> None:
    rng = random.Random(path.name)
    base = path.read_text(encoding="utf-8")
    tried = 0
    for _ in range(20):
        text = _edited(base, rng)
        try:
            ast.parse(text)
        except SyntaxError:
            continue
        tried += 1
        _agree(text, rng)
    assert tried >= 5


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


def test_code_actions_and_hovers_tokenize_only_where_a_finding_or_a_comment_is(
        tmp_path: Path, monkeypatch) -> None:
    """An editor asks for code actions at every move of the cursor: the file is tokenized (for
    its suppression comments and the lines a comment cannot end) only for a cursor on a
    finding, once per result; a hover, only on a line with a comment."""
    from lsprotocol import types

    from shardlint.lsp import actions, hover
    from shardlint.lsp.analyzer import Analyzer
    from shardlint.lsp.client import ClientFeatures
    from shardlint.lsp.convert import DiagnosticSupport
    from shardlint.lsp.result import analyse

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n", encoding="utf-8")
    path = tmp_path / "train.py"
    text = "import jax\n\n\ndef f(t):\n    return jax.tree_map(abs, t)  # noqa: SHL4\n"
    path.write_text(text, encoding="utf-8")
    uri = path.as_uri()
    res = analyse(Analyzer(), key=uri, revision=1, path=path, text=text, cells=None, uri=uri,
                  versions={uri: 1}, others={}, encoding="utf-16", support=DiagnosticSupport())
    (finding,) = res.findings
    tokenized: list[str] = []
    real = actions._uncommentable_lines
    monkeypatch.setattr(actions, "_uncommentable_lines",
                        lambda t: (tokenized.append("actions"), real(t))[1])
    features = ClientFeatures(code_action_literals=True)

    def asked(line: int) -> list[str]:
        rng = types.Range(types.Position(line - 1, 0), types.Position(line - 1, 80))
        return [a.title for a in actions.code_actions(res, uri, rng, None, features)]

    assert not any(t.startswith("Ignore") for t in asked(2)) and tokenized == []
    titles = asked(finding.span.line)
    assert "Ignore SHL501 on this line" in titles and tokenized == ["actions"]
    asked(finding.span.line)
    assert tokenized == ["actions"]  # (kept with the result)

    parsed: list[str] = []
    real_parse = hover.parse_suppressions
    monkeypatch.setattr(hover, "parse_suppressions",
                        lambda t, **k: (parsed.append("hover"), real_parse(t, **k))[1])
    assert hover.hover(res, uri, types.Position(3, 2), "utf-16", True, None) is None
    assert parsed == []
    found = hover.hover(res, uri, types.Position(4, text.split("\n")[4].index("SHL4") + 1),
                        "utf-16", True, None)
    assert parsed == ["hover"] and found is not None
