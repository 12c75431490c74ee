"""SHL000 on code for a newer Python than the one shardlint runs on: an `info` that names the
Python and the feature, never an `error`; a broken file stays an error."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from shardlint.grammar import newer_syntax

REPO = Path(__file__).resolve().parents[1]

# (source, the Python and feature it needs): all of them parse on Python 3.14.
NEWER = [
    ('x = f"{\'\\n\'.join(rows)}"\n', "3.12", "PEP 701 f-string"),
    ('x = f"{cfg["name"]}"\n', "3.12", "PEP 701 f-string"),
    ('x = f"{", ".join(names)}"\n', "3.12", "PEP 701 f-string"),
    ("x = f'{d['a']!r:>{w}} and {b}'\n", "3.12", "PEP 701 f-string"),
    ('x = f"""{a  # a comment\n}"""\n', "3.12", "PEP 701 f-string"),
    ('x = f"{a +\n b}"\n', "3.12", "PEP 701 f-string"),
    ("type Params = dict[str, int]\n", "3.12", "PEP 695 type alias"),
    ("type Pair[T] = tuple[T, T]\n", "3.12", "PEP 695 type alias"),
    ("def first[T](xs: list[T]) -> T:\n    return xs[0]\n", "3.12", "PEP 695 generic"),
    ("class Box[T]:\n    pass\n", "3.12", "PEP 695 generic"),
    ("def f[T = int](x: T) -> T:\n    return x\n", "3.13", "PEP 696 type parameter default"),
    ("try:\n    pass\nexcept* ValueError:\n    pass\n", "3.11", "PEP 654 except*"),
    ("x[*idx]\n", "3.11", "PEP 646 unpacking in a subscript or annotation"),
    ("try:\n    pass\nexcept ValueError, KeyError:\n    pass\n", "3.14",
     "PEP 758 except without parentheses"),
    ('x = t"{a}"\n', "3.14", "PEP 750 template string"),
]
# Broken on every Python: no newer one is named.
BROKEN = ["x = (1\n", 'x = f"{}"\n', 'x = f"{a"\n', 'x = f"a}"\n', 'x = f"{a!z}"\n',
          'x = f"{a b}"\n', "x = [1, *]\n", "x = {a: *b}\n", "def f(:\n    pass\n",
          "try:\n    pass\nexcept ValueError, KeyError as e:\n    pass\n"]

# What Python 3.11 says for a few of NEWER (its f-string errors; the rest it reports at the
# statement, as every Python does), so the classification is checked on any interpreter.
ON_311 = {
    0: ("f-string expression part cannot include a backslash", 1, 22),
    1: ("f-string: unmatched '['", 1, 11),
    2: ("f-string: expecting '}'", 1, 9),
    3: ("f-string: unmatched '['", 1, 11),
    4: ("f-string expression part cannot include '#'", 2, 5),
    5: ("unterminated string literal (detected at line 1)", 1, 5),
    6: ("invalid syntax", 1, 6),
    7: ("invalid syntax", 1, 6),
    8: ("expected '('", 1, 6),
    9: ("invalid syntax", 1, 8),
    10: ("expected '('", 1, 6),
    13: ("multiple exception types must be parenthesized", 3, 8),
    14: ("invalid syntax", 1, 6),
}


def _error(msg: str, line: int, offset: int) -> SyntaxError:
    exc = SyntaxError(msg)
    exc.lineno, exc.offset = line, offset
    return exc


@pytest.mark.parametrize("index", sorted(ON_311))
def test_what_python_3_11_rejects_is_named(index):
    source, python, feature = NEWER[index]
    found = newer_syntax(source, _error(*ON_311[index]), running=(3, 11))
    assert found is not None and (found.python, found.feature) == (python, feature)


@pytest.mark.parametrize("index", sorted(ON_311))
def test_a_python_that_has_the_feature_names_nothing(index):
    """(Where the running Python has the feature, the parse failure is the file's own.)"""
    source, python, _ = NEWER[index]
    running = tuple(int(p) for p in python.split("."))
    assert newer_syntax(source, _error(*ON_311[index]), running=running) is None


@pytest.mark.parametrize("source", BROKEN)
def test_a_broken_file_names_no_newer_python(source):
    with pytest.raises(SyntaxError) as err:
        ast.parse(source)
    assert newer_syntax(source, err.value, running=(3, 10)) is None


@pytest.mark.parametrize("source,python,feature", NEWER[6:11])
def test_statements_rejected_for_an_older_feature_version(source, python, feature):
    """The running parser, told to accept only 3.10's grammar, points where 3.10 does."""
    with pytest.raises(SyntaxError) as err:
        ast.parse(source, feature_version=(3, 10))
    found = newer_syntax(source, err.value, running=(3, 10))
    assert found is not None and (found.python, found.feature) == (python, feature)


def _older_pythons() -> list[str]:
    out = []
    for minor in (10, 11):
        exe = shutil.which(f"python3.{minor}")
        if exe:
            out.append(f"3.{minor}")
    return out


@pytest.mark.parametrize("python", _older_pythons() or [pytest.param("3.11", marks=pytest.mark.skip(
    reason="no Python 3.10/3.11 on PATH"))])
def test_on_an_older_interpreter(python):
    """The real parser of an older Python, its own messages and positions."""
    script = (
        "import ast, json, sys\n"
        "from shardlint.grammar import newer_syntax\n"
        "out = []\n"
        "for src in json.loads(sys.stdin.read()):\n"
        "    try:\n"
        "        ast.parse(src); out.append('parses')\n"
        "    except SyntaxError as e:\n"
        "        f = newer_syntax(src, e); out.append(f and [f.python, f.feature])\n"
        "print(json.dumps(out))\n")
    import json

    env = dict(os.environ, PYTHONPATH=str(REPO), PYENV_VERSION=python)
    sources = [s for s, _, _ in NEWER] + BROKEN
    run = subprocess.run([f"python{python}", "-c", script], input=json.dumps(sources), env=env,
                         capture_output=True, text=True, timeout=60)
    if run.returncode != 0 and "not installed" in run.stderr:
        pytest.skip(run.stderr.strip())
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    running = tuple(int(p) for p in python.split("."))
    for (src, need, feature), result in zip(NEWER, got):
        if tuple(int(p) for p in need.split(".")) <= running:
            assert result == "parses", src
        else:
            assert result == [need, feature], src
    assert all(r is None for r in got[len(NEWER):]), got[len(NEWER):]


def test_the_engine_reports_newer_syntax_as_info_without_requires_python(tmp_path, monkeypatch):
    """shardlint on an older Python (here: the running one held to 3.10's grammar)."""
    import functools

    from shardlint import engine as E
    from shardlint.config import Config

    monkeypatch.setattr(E, "parse_module",
                        lambda text, path: ast.parse(text, path, feature_version=(3, 10)))
    monkeypatch.setattr(E, "newer_syntax", functools.partial(newer_syntax, running=(3, 10)))
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "a.py").write_text("import jax\ntype Params = dict[str, jax.Array]\n")
    (tmp_path / "b.py").write_text("import jax\nx = (\n")
    found = E.Engine(Config(root=tmp_path), use_cache=False).lint_paths([tmp_path])
    by_file = {Path(f.path).name: f for f in found if f.code == "SHL000"}
    assert by_file["a.py"].severity == "info"
    assert by_file["a.py"].message.startswith("needs Python >= 3.12 (PEP 695 type alias); "
                                              "shardlint runs on ")
    assert by_file["b.py"].severity == "error"


@pytest.mark.skipif(sys.version_info < (3, 12), reason="PEP 695 and 701 need Python 3.12")
def test_no_finding_where_the_running_python_parses_it(tmp_path):
    from shardlint.config import Config
    from shardlint.engine import Engine

    (tmp_path / "a.py").write_text(
        "import jax\ntype Params = dict[str, jax.Array]\n"
        "def show[T](rows: list[T]) -> str:\n    return f\"{'\\n'.join(map(str, rows))}\"\n")
    assert Engine(Config(root=tmp_path), use_cache=False).lint_paths([tmp_path]) == []
