"""The incremental parser gives exactly the tree ``ast.parse`` gives, for any edit."""

from __future__ import annotations

import ast
import random
from pathlib import Path

import pytest

from shardlint.incremental import IncrementalParser
from shardlint.syntax import parse

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("examples/**/*.py"), *ROOT.glob("shardlint/semantics/**/*.py"),
                  *ROOT.glob("shardlint/rules/contexts/shl1*.py")])
SNIPPETS = ["#", "x", "\n", "\n\n", "(", ")", "'", '"""', "    ", "\n    y = 1\n", "def f(:",
            ":", "@dec\n", "\\\n", "; z = 2", "class C:\n    pass\n", "",
            "from __future__ import annotations\n", "else:\n", "\t", "é", "😀", "= =", "}", "f'{",
            "\x00"]


def dump(text: str, parser: IncrementalParser | None = None) -> str | None:
    """The tree with positions, or None for text that does not parse."""
    try:
        tree = parser.parse(text, "f.py") if parser is not None else parse(text, "f.py")
    except (SyntaxError, ValueError):
        return None
    return ast.dump(tree, include_attributes=True)


def outcome(text: str, parser: IncrementalParser | None = None) -> tuple:
    """The tree with positions, or the syntax error with its position (and, from ``parser``,
    the lines it split, made from the last version's where it could, are the text's)."""
    try:
        if parser is None:
            tree = parse(text, "f.py")
        else:
            try:
                tree = parser.parse(text, "f.py")
            finally:
                if parser.last_lines is not None:
                    assert parser.last_lines[0] is text
                    assert parser.last_lines[1] == text.split("\n")
    except SyntaxError as e:
        return type(e).__name__, e.msg, e.lineno, e.offset, e.end_lineno, e.end_offset
    except ValueError as e:
        return ("ValueError", str(e))
    return ("ok", ast.dump(tree, include_attributes=True))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_random_edits_match_a_full_parse(path: Path) -> None:
    rng = random.Random(path.name)
    text = path.read_text(encoding="utf-8")
    parser = IncrementalParser()
    parser.parse(text, "f.py")
    for _ in range(25):
        a = rng.randrange(len(text) + 1)
        b = min(len(text), a + rng.choice([0, 0, 1, 3, 20, 200]))
        new = text[:a] + rng.choice(SNIPPETS) + text[b:]
        expected = outcome(new)
        assert outcome(new, parser) == expected, (path, a, b, new[max(a - 40, 0):a + 40])
        if expected[0] == "ok":
            text = new


BASE = '''import jax


@jax.jit
def f(x):
    return x + 1

a = 1; b = 2


class C:
    def m(self):
        return (1,
                2)
'''


def test_an_edit_inside_one_statement_reparses_only_it() -> None:
    parser = IncrementalParser()
    first = parser.parse(BASE, "f.py")
    assert parser.full
    tree = parser.parse(BASE.replace("x + 1", "x + 2"), "f.py")
    assert not parser.full and parser.reparsed == 1
    assert tree.body[0] is first.body[0] and tree.body[-1] is first.body[-1]
    assert tree.body[1] is not first.body[1]


@pytest.mark.parametrize("old, new, same", [
    ("return x + 1", "return x + 1  # one more", True),  # a comment
    ("return x + 1", "return x + 1 ", True),  # blank space after the last token
    ("a = 1; b = 2", "a = 1; b = 2  # two", True),  # statements sharing a line
    ("                2)", "                2)  # two", True),  # in a method
    ("return (1,\n", "return (1,  # one\n", True),  # inside brackets
    ("return x + 1", "return x  + 1", False),  # a space that moves a node
    ("return x + 1", "return x + 2", False),
    ("return x + 1", "return x + 1\n", False),  # a line added: the statements after move
    ("        return (1,", "        # one\n        return (1,", False),
])
def test_an_edit_that_moves_no_node_hands_back_the_same_tree(old: str, new: str,
                                                             same: bool) -> None:
    parser = IncrementalParser()
    first = parser.parse(BASE, "f.py")
    text = BASE.replace(old, new, 1)
    tree = parser.parse(text, "f.py")
    assert (tree is first) == same == parser.same_tree
    assert not parser.full
    assert ast.dump(tree, include_attributes=True) == dump(text)
    parser.parse(text, "f.py")
    assert parser.same_tree  # (the same text)


def test_lines_added_move_the_statements_after() -> None:
    parser = IncrementalParser()
    parser.parse(BASE, "f.py")
    new = BASE.replace("x + 1", "x + 1\n\n\n")
    tree = parser.parse(new, "f.py")
    assert not parser.full
    assert ast.dump(tree, include_attributes=True) == dump(new)
    assert tree.body[-1].lineno == 14


@pytest.mark.parametrize("old, new", [
    ("a = 1; b = 2", "a = 1; b = 3"),  # statements sharing a line are reparsed together
    ("class C:", "    class C:"),  # indents into the previous statement: a full parse decides
    ("return (1,", "return (1,,"),  # syntax error: reported by the full parse
    ("import jax", "from __future__ import annotations\nimport jax"),
    ("\n@jax.jit\n", "\n"),  # decorator removed
    ("def m(self):", "def m(self):\n        '''"),  # an unclosed string runs into the next lines
])
def test_edits_that_need_care(old: str, new: str) -> None:
    parser = IncrementalParser()
    parser.parse(BASE, "f.py")
    text = BASE.replace(old, new, 1)
    assert dump(text, parser) == dump(text)


def test_syntax_error_is_the_full_parse_error() -> None:
    parser = IncrementalParser()
    parser.parse(BASE, "f.py")
    broken = BASE.replace("return x + 1", "return x +")
    with pytest.raises(SyntaxError) as got:
        parser.parse(broken, "f.py")
    with pytest.raises(SyntaxError) as want:
        ast.parse(broken)
    assert (got.value.lineno, got.value.offset, got.value.msg) == \
        (want.value.lineno, want.value.offset, want.value.msg)
    assert dump(BASE, parser) == dump(BASE)  # and it recovers on the next version
    assert not parser.full  # from the last version that parsed: the repair is incremental


def test_carriage_returns_take_the_full_parse() -> None:
    parser = IncrementalParser()
    text = BASE.replace("\n", "\r\n")
    parser.parse(text, "f.py")
    assert dump(text.replace("x + 1", "x + 2"), parser) == dump(text.replace("x + 1", "x + 2"))
    assert parser.full


@pytest.mark.parametrize("name", ["original.py", "discussion_advice.py", "fixed.py"])
def test_findings_through_the_incremental_parser_match_a_full_lint(tmp_path: Path, name: str) -> None:
    from shardlint.config import load
    from shardlint.engine import Engine

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n", encoding="utf-8")
    text = (ROOT / "examples" / "seed_ensemble" / name).read_text(encoding="utf-8")
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    live = Engine(load(tmp_path), use_cache=False)
    parser = IncrementalParser()
    rng = random.Random(name)
    seen_codes: set[str] = set()
    for _ in range(30):
        a = rng.randrange(len(text) + 1)
        b = min(len(text), a + rng.choice([0, 1, 3, 20]))
        new = text[:a] + rng.choice(SNIPPETS) + text[b:]
        fresh = Engine(load(tmp_path), use_cache=False)
        want = [(f.code, f.span, f.message) for f in fresh.lint_text(path, new)]
        got = [(f.code, f.span, f.message) for f in live.lint_text(path, new, parser=parser)]
        assert got == want, (a, b, new[max(a - 40, 0):a + 40])
        seen_codes |= {c for c, _, _ in got}
        if not any(c == "SHL000" for c, _, _ in want):
            text = new
    assert seen_codes  # the edits met findings, not only clean code


REPLAY_BASE = '''import jax
import numpy as np
import flax.linen as nn
from jax.sharding import Mesh

AXES = ("data", "model")
RULES = (("batch", "data"), ("mlp", "model"))


def train_step(state, batch):
    return state + batch.sum()


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = nn.with_logical_constraint(x, ("batch", "mlp"))
        return nn.Dense(4)(x)


step = jax.jit(train_step)
mesh = Mesh(np.array(jax.devices()).reshape(1, -1), AXES)


def main(state, batches):
    model = MLP()
    with mesh, nn.logical_axis_rules(RULES):
        params = model.init(jax.random.key(0), np.ones((2, 4)))
    for b in batches:
        state = step(state, b)
    return state, params
'''


@pytest.mark.parametrize("old, new", [
    ("def train_step(state, batch):", "def train_step2(state, batch):"),  # the jitted name goes
    ("train_step(state, batch):\n    return state + batch.sum()",
     "train_step(state, batch):\n    return state, batch.sum()"),  # body only
    ('AXES = ("data", "model")', 'AXES = ("data", "tensor")'),  # a constant a later mesh reads
    ("mesh = Mesh(", "mesh2 = Mesh("),  # the mesh a later `with` names
    ("import flax.linen as nn", "import flax.linen as linen"),  # an import later code resolves
    ("from jax.sharding import Mesh", "from jax.sharding import Mesh as M"),
    ('x = nn.with_logical_constraint(x, ("batch", "mlp"))', "pass"),  # a constraint goes
    ("step = jax.jit(train_step)", "step = jax.jit(train_step, donate_argnums=0)"),
])
def test_replayed_statements_match_a_full_build(tmp_path: Path, old: str, new: str) -> None:
    """Statements after an edit are replayed only when what they read still holds."""
    import json

    from shardlint.config import load
    from shardlint.engine import Engine

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n", encoding="utf-8")
    path = tmp_path / "train.py"
    live = Engine(load(tmp_path), use_cache=False)
    parser = IncrementalParser()
    live.lint_text(path, REPLAY_BASE, parser=parser)
    for text in (REPLAY_BASE.replace(old, new, 1), REPLAY_BASE):  # the edit, then undone
        assert text != REPLAY_BASE or old in REPLAY_BASE
        fresh = Engine(load(tmp_path), use_cache=False)
        want = [(f.code, f.span, f.message) for f in fresh.lint_text(path, text)]
        got = [(f.code, f.span, f.message) for f in live.lint_text(path, text, parser=parser)]
        assert got == want
        assert not parser.full
        summaries = [json.dumps(e.index.summaries["train"].to_json(), sort_keys=True)
                     for e in (fresh, live)]
        assert summaries[0] == summaries[1]


GUARD_BASE = '''import jax
from jax.interpreters import pxla
from jax.sharding import PartitionSpec as P


def partitioning_active():
    return pxla.thread_resources.env.physical_mesh.devices.shape != ()


def shard(x):
    if not partitioning_active():
        return x
    y = x * 2
    return jax.lax.with_sharding_constraint(y, P("data"))


out = shard(jax.numpy.ones((8, 4)))
'''


@pytest.mark.parametrize("old, new", [
    ("if not partitioning_active():", "if not x.ndim:"),  # the guard asks something else
    ("        return x\n", "        pass\n"),  # it no longer returns early
    ("shape != ()", "shape[0] > 1"),  # the helper no longer asks for a mesh
    ("physical_mesh.devices", "devices"),
])
def test_code_past_an_edited_guard_matches_a_full_build(tmp_path: Path, old: str,
                                                        new: str) -> None:
    """The statements past an early return unless a mesh is there run under it: an edit to
    the guard (or to the helper it asks) is not replayed with the contexts of before."""
    from shardlint.config import load
    from shardlint.engine import Engine

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n", encoding="utf-8")
    path = tmp_path / "shard.py"
    live = Engine(load(tmp_path), use_cache=False)
    parser = IncrementalParser()
    assert not [f for f in live.lint_text(path, GUARD_BASE, parser=parser)
                if f.code == "SHL104"]
    for text in (GUARD_BASE.replace(old, new, 1), GUARD_BASE):  # the edit, then undone
        assert old in GUARD_BASE
        fresh = Engine(load(tmp_path), use_cache=False)
        want = [(f.code, f.span, f.message) for f in fresh.lint_text(path, text)]
        got = [(f.code, f.span, f.message) for f in live.lint_text(path, text, parser=parser)]
        assert got == want
        assert any(c == "SHL104" for c, _, _ in want) == (text != GUARD_BASE)


def test_statements_are_replayed_unless_what_they_read_changed(tmp_path: Path) -> None:
    from shardlint.config import load
    from shardlint.engine import Engine

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n", encoding="utf-8")
    path = tmp_path / "train.py"
    engine = Engine(load(tmp_path), use_cache=False)
    parser = IncrementalParser()

    def logs(text: str) -> dict:
        engine.lint_text(path, text, parser=parser)
        return {ast.unparse(s).split("\n")[0]: log
                for s, log in parser.memo.statements.items()}  # type: ignore[attr-defined]

    before = logs(REPLAY_BASE)
    body = logs(REPLAY_BASE.replace("return state + batch.sum()", "return state - batch.sum()"))
    assert body["class MLP(nn.Module):"] is before["class MLP(nn.Module):"]
    assert body["def main(state, batches):"] is before["def main(state, batches):"]
    assert body["mesh = Mesh(np.array(jax.devices()).reshape(1, -1), AXES)"] is \
        before["mesh = Mesh(np.array(jax.devices()).reshape(1, -1), AXES)"]
    # `step = jax.jit(train_step)` holds the edited function's scope: visited again.
    assert body["step = jax.jit(train_step)"] is not before["step = jax.jit(train_step)"]
    # A new mesh statement: the `with mesh` in main read it, so main is visited again.
    axes = logs(REPLAY_BASE.replace('AXES = ("data", "model")', 'AXES = ("data", "tensor")'))
    assert axes["def main(state, batches):"] is not body["def main(state, batches):"]
    assert axes["class MLP(nn.Module):"] is before["class MLP(nn.Module):"]


REUSE_BASE = '''import functools
import jax
import numpy as np
import flax.linen as nn
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

KERNEL_AXES = ("embed", "hiden")
BATCH = "batch"
ACT_AXES = (BATCH, "hidden")
RULES = (("batch", "data"), ("embed", None), ("hidden", "model"))
SPEC = P("data", "modle")


def train_step(state, batch):
    return state + batch.sum()


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), KERNEL_AXES)
        x = nn.with_logical_constraint(x, ACT_AXES)
        return nn.Dense(4, kernel_init=init)(x)


def main(state, batches):
    mesh = Mesh(np.array(jax.devices()).reshape(1, -1), ("data", "model"))
    model = MLP()
    sharding = NamedSharding(mesh, SPEC)
    with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
        params = model.init(jax.random.key(0), np.ones((2, 4)))
    for b in batches:
        state = train_step(state, b)
    return state, params, sharding


if __name__ == "__main__":
    main(0, [])
'''


def _as_fresh(tmp_path: Path, live, path: Path, text: str, got: list) -> None:
    """The live engine's findings of ``text`` (``got``: code, span, message) and its summary of
    ``train`` are a fresh build's."""
    import json

    from shardlint.config import load
    from shardlint.engine import Engine

    fresh = Engine(load(tmp_path), use_cache=False)
    assert got == [(f.code, f.span, f.message) for f in fresh.lint_text(path, text)]
    summaries = [json.dumps(e.index.summaries["train"].to_json(), sort_keys=True)
                 for e in (fresh, live)]
    assert summaries[0] == summaries[1]


def _live(tmp_path: Path, base: str, warm: str | None = None):
    """An engine that lints ``train.py`` through an incremental parser, as the language server
    does, after a first build of ``base``: (engine, parser, path). ``warm``: a line of ``base``
    (an expression statement) typed into (an operand added) and back before: the first edit
    of a method after a file is opened asks about the method whole once, and keeps its
    statements' results apart from then on (reuse.py). (A comment would not do: an edit that
    leaves the tree as it was keeps the last build whole.)"""
    from shardlint.config import load
    from shardlint.engine import Engine

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n", encoding="utf-8")
    path = tmp_path / "train.py"
    live = Engine(load(tmp_path), use_cache=False)
    parser = IncrementalParser()
    live.lint_text(path, base, parser=parser)
    if warm is not None:
        assert warm in base
        live.lint_text(path, base.replace(warm, warm + " + 0", 1), parser=parser)
        live.lint_text(path, base, parser=parser)
    return live, parser, path


def _asked_while_editing(tmp_path: Path, monkeypatch, module, name: str, label,
                         base: str, warm: str, old: str, new: str):
    """``label(*args)`` of each call of ``module.name`` while the live engine lints the edit
    ``old`` -> ``new`` of ``base`` through the incremental parser (see ``_live``); the edit and
    its undo both give a fresh build's findings and summary. Returns those labels (asked
    during the edit) and the live engine."""
    seen: list[str] = []
    real = getattr(module, name)

    def asked(*args, **kwargs):
        seen.append(label(*args, **kwargs))
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, asked)
    live, parser, path = _live(tmp_path, base, warm=warm)
    assert old in base
    during: set[str] = set()
    for step, text in enumerate((base.replace(old, new, 1), base)):  # edit, undo
        seen.clear()
        got = [(f.code, f.span, f.message) for f in live.lint_text(path, text, parser=parser)]
        if step == 0:
            during = set(seen)  # (before the fresh build, which asks everything)
        _as_fresh(tmp_path, live, path, text, got)
    return during, live


@pytest.mark.parametrize("old, new, changed", [
    # Inside one function body: no module-level name changes, every other statement's results
    # are reused.
    ("return state + batch.sum()", "return state - batch.sum()", set()),
    ("for b in batches:", "for b in batches[1:]:", set()),
    ("x = nn.with_logical_constraint(x, ACT_AXES)",
     'x = nn.with_logical_constraint(x, ("batch", "hiden"))', set()),
    # (The facts bind a name assigned under `global` in the function: no other statement sees it.)
    ("    model = MLP()\n", "    model = MLP()\n    global RULES\n    RULES = ()\n", set()),
    # What other statements read: the statements that mention the name are computed again.
    ('KERNEL_AXES = ("embed", "hiden")', 'KERNEL_AXES = ( "embed", "hiden")', {"KERNEL_AXES"}),
    ('KERNEL_AXES = ("embed", "hiden")', 'KERNEL_AXES = ("embed", "hidden")', {"KERNEL_AXES"}),
    ('SPEC = P("data", "modle")', 'SPEC = P("data", "model")', {"SPEC"}),
    # MLP mentions ACT_AXES, whose value mentions BATCH: both count as changed.
    ('BATCH = "batch"', 'BATCH = "bach"', {"BATCH", "ACT_AXES"}),
    ('SPEC = P("data", "modle")', 'SPEC = P(AXIS, "modle")\nAXIS = "data"',
     {"SPEC", "AXIS"}),
    ("def train_step(state, batch):",
     "@functools.partial(jax.jit, donate_argnums=0)\ndef train_step(state, batch):",
     {"train_step"}),
    ("def train_step(state, batch):", "def train_step(state, batch, extra=None):", {"train_step"}),
    ("from jax.sharding import Mesh, NamedSharding, PartitionSpec as P",
     "from jax.sharding import Mesh, NamedSharding\nP = tuple", None),  # another import map
    # A function defined twice: the last definition is the symbol, both definitions' sites count.
    ("def train_step(state, batch):",
     "def train_step(state, batch):\n    return nn.with_logical_constraint(state, ('batch',))\n\n\n"
     "def train_step(state, batch):", {"train_step"}),
    # Lines added above: kept statements move, and the summary's lines move with them.
    ("class MLP(nn.Module):", "\n\nclass MLP(nn.Module):", set()),
    ("    model = MLP()\n", "    model = MLP()\n\n\n", set()),
])
def test_reused_results_match_a_full_build(tmp_path: Path, old: str, new: str,
                                           changed: set[str] | None) -> None:
    """Results carried from the previous keystroke (semantics/file/reuse.py) give the findings and
    summary of a build from scratch; the module-level names found changed are those the edit
    rebinds (None: every result is made again)."""
    import json

    from shardlint.config import load
    from shardlint.engine import Engine

    live, parser, path = _live(tmp_path, REUSE_BASE)
    assert old in REUSE_BASE
    for step, text in enumerate((REUSE_BASE.replace(old, new, 1), REUSE_BASE)):  # edit, undo
        fresh = Engine(load(tmp_path), use_cache=False)
        want = [(f.code, f.span, f.message) for f in fresh.lint_text(path, text)]
        got = [(f.code, f.span, f.message) for f in live.lint_text(path, text, parser=parser)]
        assert got == want
        if step == 1:  # the base text has findings of the rules whose results are reused
            assert {"SHL201", "SHL202", "SHL301"} <= {c for c, _, _ in want}
        summaries = [json.dumps(e.index.summaries["train"].to_json(), sort_keys=True)
                     for e in (fresh, live)]
        assert summaries[0] == summaries[1]
        if step == 0:
            found = parser.memo.reuse.changed  # type: ignore[union-attr]
            assert (None if found is None else set(found)) == changed


CARRIER_LAYERS = """\
import flax.linen as nn


class Dense(nn.Module):
    features: int
    kernel_axes: tuple = ()

    @nn.compact
    def __call__(self, x):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), self.kernel_axes)
        return nn.Dense(self.features, kernel_init=init)(x)
"""

CARRIER_MODEL = """\
import jax
import flax.linen as nn
from layers import Dense

RULES = (("embed", "data"), ("mlp", "model"))


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = Dense(8, kernel_axes=("embed", "hiden"))(x)
        scale = 1
        return Dense(8, kernel_axes=("mlp", "embd"))(x)

    def other(self):  # (a class of one member is parsed again whole)
        return self


with jax.set_mesh(jax.make_mesh((2, 2), ("data", "model"))), nn.logical_axis_rules(RULES):
    pass
"""


def test_carrier_arguments_are_kept_while_the_index_holds(tmp_path: Path, monkeypatch) -> None:
    """SHL201 keeps which arguments of a call reach a project layer's annotation (``Dense(8,
    kernel_axes=(...))``) across keystrokes that leave the project index as it was, and asks
    again once another module changes what the layer does with them."""
    from shardlint.config import load
    from shardlint.engine import Engine
    from shardlint.semantics.sharding import partitioning

    asked: list[int] = []
    real = partitioning.call_names

    def counted(project, facts, c):
        found = real(project, facts, c)
        if found:
            asked.append(c.node.lineno)
        return found

    monkeypatch.setattr(partitioning, "call_names", counted)
    from shardlint.rules.partitioning import shl201_logical_axis_without_rule as shl201
    monkeypatch.setattr(shl201, "call_names", counted)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n", encoding="utf-8")
    layers, model = tmp_path / "layers.py", tmp_path / "model.py"
    layers.write_text(CARRIER_LAYERS, encoding="utf-8")
    model.write_text(CARRIER_MODEL, encoding="utf-8")
    live = Engine(load(tmp_path), use_cache=False)
    lparser, mparser = IncrementalParser(), IncrementalParser()
    live.lint_text(layers, CARRIER_LAYERS, parser=lparser)

    live_asked: list[int] = []

    def step(text: str) -> list[tuple[str, int]]:
        asked.clear()
        got = [(f.code, f.span.line) for f in live.lint_text(model, text, parser=mparser)
               if f.code == "SHL201"]
        live_asked[:] = sorted(asked)
        fresh = Engine(load(tmp_path), use_cache=False)
        assert got == [(f.code, f.span.line) for f in fresh.lint_text(model, text)
                       if f.code == "SHL201"]
        return got

    assert step(CARRIER_MODEL) == [("SHL201", 11), ("SHL201", 13)]
    assert live_asked == [11, 13]
    # Typing in the method, between the two calls: the index is the same, nothing is asked
    # (after the first keystroke into the method, which asks about it whole: see _live); the
    # calls that read a name bound differently now (`x`) are asked again.
    for i, typed in enumerate(("scale = 2", "scale = 23", "scale = 2", "x = x * 2")):
        assert step(CARRIER_MODEL.replace("scale = 1", typed)) == [("SHL201", 11), ("SHL201", 13)]
        assert live_asked == ([11, 13] if i == 0 or typed[0] == "x" else []), typed
    assert step(CARRIER_MODEL) == [("SHL201", 11), ("SHL201", 13)]
    # The layer annotates with another field than `kernel_axes`, and a keystroke follows in
    # the model: its calls are asked again, and hand no names.
    plain = CARRIER_LAYERS.replace(
        "    kernel_axes: tuple = ()\n", "    kernel_axes: tuple = ()\n    bias_axes: tuple = ()\n"
    ).replace("lecun_normal(), self.kernel_axes)", "lecun_normal(), self.bias_axes)")
    layers.write_text(plain, encoding="utf-8")
    live.lint_text(layers, plain, parser=lparser)
    assert step(CARRIER_MODEL.replace("scale = 1", "scale = 2")) == []
    # ... and back: asked again, both findings.
    layers.write_text(CARRIER_LAYERS, encoding="utf-8")
    live.lint_text(layers, CARRIER_LAYERS, parser=lparser)
    assert step(CARRIER_MODEL) == [("SHL201", 11), ("SHL201", 13)]
    assert live_asked == [11, 13]


def test_lines_added_in_another_module_move_its_related_locations(tmp_path: Path) -> None:
    """An edit that only moves a module's lines keeps the project's needs (ProjectIndex.add), and
    the findings of the files that depend on it still point at the moved lines."""
    from shardlint.config import load
    from shardlint.engine import Engine

    model = '''import flax.linen as nn


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.with_logical_constraint(nn.Dense(4)(x), ("batch", "mlp"))
'''
    train = '''import jax
from model import MLP

with jax.set_mesh(jax.make_mesh((1,), ("data",))):
    params = MLP().init(jax.random.key(0), jax.numpy.ones((2, 4)))
'''
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n", encoding="utf-8")
    (tmp_path / "model.py").write_text(model, encoding="utf-8")
    (tmp_path / "train.py").write_text(train, encoding="utf-8")
    live = Engine(load(tmp_path), use_cache=False)
    parser = IncrementalParser()
    live.lint_text(tmp_path / "model.py", model, parser=parser)
    before = live.lint_text(tmp_path / "train.py", train)
    assert any(f.code == "SHL102" for f in before)
    needs = live.index._needs
    moved = model.replace("\n\nclass MLP", "\n\n# a comment\n\n\nclass MLP")
    live.lint_text(tmp_path / "model.py", moved, parser=parser)
    got = live.lint_text(tmp_path / "train.py", train)
    assert live.index._needs is needs  # not computed again

    (tmp_path / "model.py").write_text(moved, encoding="utf-8")
    want = Engine(load(tmp_path), use_cache=False).lint_text(tmp_path / "train.py", train)
    key = [(f.code, f.span, f.message, [(r.path, r.span) for r in f.related]) for f in want]
    assert [(f.code, f.span, f.message, [(r.path, r.span) for r in f.related]) for f in got] == key
    lines = {r.span.line for f in got for r in f.related if r.path.endswith("model.py")}
    assert lines == {10}  # the constraint, three lines further down

    # The same in the module with the calls: where the model's function is called moves too.
    train = ("import jax\nfrom model import MLP\n\n\ndef create():\n"
             "    return MLP().init(jax.random.key(0), jax.numpy.ones((2, 4)))\n\n\n"
             "with jax.set_mesh(jax.make_mesh((1,), (\"data\",))):\n    create()\n")
    tparser = IncrementalParser()
    live.lint_text(tmp_path / "train.py", train, parser=tparser)
    moved_train = train.replace("\n\n\nwith", "\n\n\n# a comment\n\nwith")
    got = live.lint_text(tmp_path / "train.py", moved_train, parser=tparser)
    (tmp_path / "train.py").write_text(moved_train, encoding="utf-8")
    want = Engine(load(tmp_path), use_cache=False).lint_text(tmp_path / "train.py", moved_train)
    key = [(f.code, f.span, f.message, [(r.path, r.span) for r in f.related]) for f in want]
    assert [(f.code, f.span, f.message, [(r.path, r.span) for r in f.related]) for f in got] == key
    assert {r.span.line for f in got for r in f.related if r.path.endswith("train.py")} == {12}


CLASS = """\
import jax


class Model:
    '''A docstring.'''

    size: int = 4

    @jax.jit
    def first(self, x):
        return x + 1

    def second(self, x):
        s = '''a string
  that dedents'''
        return x * 2

    def last(self, x):
        return x


y = 1
"""


@pytest.mark.parametrize("old,new,member", [
    ("return x + 1", "return x + 2", True),  # inside a method
    ("return x * 2", "return (x *\n            2)", True),  # lines added
    ("        return x\n", "        return x\n\n    def more(self):\n        pass\n", True),
    ("'''A docstring.'''", "'''Another.'''", True),  # a member that is not a method
    ("  that dedents'''", "that dedents'''", True),  # a string's own line, column 0
    ("    def second", "  def second", False),  # indented unlike the other members
    ("    def second", "def second", False),  # dedented out of the class
    ("        return x + 1", "        return (x", False),  # does not parse alone
    ("class Model:", "class Model(object):", False),  # the header
])
def test_an_edit_inside_one_member_reparses_only_it(old, new, member):
    parser = IncrementalParser()
    parser.parse(CLASS, "f.py")
    text = CLASS.replace(old, new, 1)
    assert text != CLASS
    assert dump(text, parser) == dump(text)
    if member:
        assert not parser.full and parser.reparsed <= 2
    # and the next edit, from this base, still gives ast.parse's tree
    again = text.replace("y = 1", "y = 2")
    assert dump(again, parser) == dump(again)


LONG_METHOD = """\
import jax


class Layer:
    def setup(self):
        pass

    def call(self, x):
        '''A long method: its statements are reparsed one by one.'''
        def inner(y):
            z = y + 1
            return z

        async def waits(q):
            return await q

        def gen():
            yield 1
            for i in range(3):
                if i:
                    break

        a = inner(x)
        b = [a for _ in range(2)]
        return a + b[0]

    def after(self):
        return 2


y = 1
"""


@pytest.mark.parametrize("old,new,statements", [
    ("        a = inner(x)", "        a = inner(x) * 2", 1),  # a statement of the method
    ("        a = inner(x)", "        a = inner(\n            x)", 1),  # lines added
    ("            z = y + 1", "            z = y + 2", 1),  # inside a nested function
    ("            return await q", "            return await (q)", 1),  # await, in an async def
    ("                    break", "                    continue", 1),  # break, in a generator
    ("        return a + b[0]", "        return a + b[0]\n        c = 3", 2),  # after the last
    ("'''A long method", "'''The long method", 1),  # the docstring
    ("        a = inner(x)", "    a = inner(x)", None),  # dedented to the class's members
    ("        a = inner(x)", "a = inner(x)", None),  # dedented out of the class
    ("        a = inner(x)", "          a = inner(x)", None),  # indented unlike the others
    ("        a = inner(x)", "        a = inner((x)", None),  # does not parse alone
    ("    def call(self, x):", "    def call(self, x, w=1):", None),  # the signature
    ("        a = inner(x)\n        b", "        a = inner(x); b", None),  # two statements
    ("            return z\n", "            return z\n        else:\n            pass\n",
     None),  # a clause that cannot start a statement
])
def test_an_edit_inside_one_statement_of_a_method_reparses_only_it(old, new, statements):
    parser = IncrementalParser()
    method = parser.parse(LONG_METHOD, "f.py").body[1].body[1]
    kept = list(method.body)
    text = LONG_METHOD.replace(old, new, 1)
    assert text != LONG_METHOD
    assert outcome(text, parser) == outcome(text)
    if statements is not None:
        assert not parser.full and parser.reparsed == statements
        # the method's other statements are the old tree's (moved when lines were added)
        now = parser.parse(text, "f.py").body[1].body[1].body
        assert sum(any(s is k for k in kept) for s in now) == len(kept) - 1
    again = text.replace("y = 1", "y = 2")  # (the next edit, from this base)
    assert outcome(again, parser) == outcome(again)


JOINED = """\
def shape(x):
  if x:
    return x
  return (x,)


class Test:

  def test_it(self):
    return 1
"""


def test_a_region_that_joins_the_statement_before_it():
    """Deleting a class's header line makes its methods part of the function before it: a full
    parse accepts that, so the incremental parser must not report the region's own error."""
    for old, new in [("class Test:\n", ""), ("class Test:\n", "else:\n"),
                     ("class Test:\n", "  # a comment\n")]:
        parser = IncrementalParser()
        parser.parse(JOINED, "f.py")
        text = JOINED.replace(old, new)
        assert outcome(text, parser) == outcome(text)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_random_line_edits_match_a_full_parse(path: Path) -> None:
    """Lines deleted, duplicated, indented, dedented, swapped: what a user does to whole lines."""
    rng = random.Random("lines:" + path.name)
    text = path.read_text(encoding="utf-8")
    parser = IncrementalParser()
    parser.parse(text, "f.py")
    for _ in range(25):
        lines = text.split("\n")
        i = rng.randrange(len(lines))
        kind = rng.choice(("delete", "duplicate", "indent", "dedent", "swap"))
        if kind == "delete":
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "indent":
            lines[i] = rng.choice(("  ", "    ", "\t")) + lines[i]
        elif kind == "dedent":
            lines[i] = lines[i][rng.randint(1, 4):]
        else:
            j = rng.randrange(len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        new = "\n".join(lines)
        expected = outcome(new)
        assert outcome(new, parser) == expected, (path, kind, i + 1)
        if expected[0] == "ok":
            text = new


MEMBERS_BASE = '''import functools
import jax
import flax.linen as nn
import optax

RULES = (("batch", "data"), ("mlp", "model"))
tx = optax.adam(1e-3)


class Trainer:
    scale: float = 2.0

    @functools.partial(jax.jit, static_argnums=0)
    def step(self, params, grads):
        updates, _ = tx.update(grads, tx.init(params), params)
        return optax.apply_updates(params, updates)

    def helper(self, x):
        return x * self.scale

    def run(self, params, batches):
        for b in batches:
            params = self.step(params, self.helper(b))
        return params


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.with_logical_constraint(nn.Dense(4)(x), ("batch", "mlp"))

    def encode(self, x):
        return self(x) * 2
'''


@pytest.mark.parametrize("old, new", [
    ("        return x * self.scale", "        return x * self.scale + 1"),  # one method's body
    ("    def helper(self, x):", "    def helper(self, x, y=0):"),
    ("        return self(x) * 2", "        with nn.logical_axis_rules(RULES):\n"
                                  "            return self(x) * 2"),
    ("    scale: float = 2.0", "    scale: float = 3.0"),  # a class attribute the others read
    ("@functools.partial(jax.jit, static_argnums=0)", "@jax.jit"),
])
def test_class_members_are_replayed_and_match_a_full_build(tmp_path: Path, old: str,
                                                             new: str) -> None:
    """An edit inside one member of a class visits that member again; the others are replayed
    into the class's reused scope, and findings and summary equal a fresh build's."""
    import json

    from shardlint.config import load
    from shardlint.engine import Engine

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n", encoding="utf-8")
    path = tmp_path / "train.py"
    live = Engine(load(tmp_path), use_cache=False)
    parser = IncrementalParser()
    live.lint_text(path, MEMBERS_BASE, parser=parser)
    before = dict(parser.memo.members)  # type: ignore[attr-defined]
    for text in (MEMBERS_BASE.replace(old, new, 1), MEMBERS_BASE):  # the edit, then undone
        assert old in MEMBERS_BASE
        fresh = Engine(load(tmp_path), use_cache=False)
        want = [(f.code, f.span, f.message) for f in fresh.lint_text(path, text)]
        got = [(f.code, f.span, f.message) for f in live.lint_text(path, text, parser=parser)]
        assert got == want
        summaries = [json.dumps(e.index.summaries["train"].to_json(), sort_keys=True)
                     for e in (fresh, live)]
        assert summaries[0] == summaries[1]
    after = parser.memo.members  # type: ignore[attr-defined]
    replayed = {m.name for m, log in after.items() if before.get(m) is log
                and isinstance(m, ast.FunctionDef)}
    # `run` is never edited: replayed from the first build through the edit and its undo
    # (inside its class, or with its class when the class was not touched).
    assert "run" in replayed, replayed


def test_a_tab_in_a_method_body_indentation_is_the_full_parse_tab_error() -> None:
    """A tab is consistent or not depending on the enclosing blocks' indentation, which the
    body-level reparse's stand-in header lacks: the full parse decides (`TabError`)."""
    text = ("class A:\n    def f(self):\n        x = 1\n        y = 2\n        return x\n\n"
            "    def g(self):\n        pass\n")
    parser = IncrementalParser()
    parser.parse(text, "f.py")
    new = text.replace("        y = 2", " \t      y = 2")
    assert outcome(new)[0] == "TabError"
    assert outcome(new, parser) == outcome(new)


NESTED_BASE = '''import jax
import flax.linen as nn

RULES = (("batch", "data"),)


class Engine:
    def run(self, params, batch):
        count = 0
        base = jax.make_mesh((1,), ("data",))
        mesh = base
        spec = ("batch",)

        def helper():
            return nn.with_logical_constraint(batch, spec)

        def mesh_of():
            return mesh

        def step(p):
            with jax.set_mesh(mesh_of()):
                return helper() + p

        return jax.jit(step)(params)

    def other(self):
        return RULES
'''


@pytest.mark.parametrize("old, new, made_again", [
    # Typing into a statement of the method that no nested function reads (the statement an
    # edit is in is parsed again: a new node): its nested functions are kept.
    ("        count = 0\n", "        count = 0 + len(batch)\n", set()),
    ("        return jax.jit(step)(params)", "        return jax.jit(step)(params) + 0", set()),
    # The value a nested function reads changes, directly or through another name; `step`
    # calls `mesh_of` by its name, which is bound as before.
    ("        mesh = base\n", "        mesh = None\n", {"mesh_of"}),
    ('        base = jax.make_mesh((1,), ("data",))', "        base = None", {"mesh_of"}),
    ('        spec = ("batch",)', '        spec = ("batch", "mlp")', {"helper"}),
    # Lines added above: the kept functions move, their summaries with them.
    ("        count = 0\n", "        count = (\n            0)\n", set()),
    # An edit inside a nested function makes that one again; a comment, nothing.
    ("            return mesh\n", "            return (mesh)\n", {"mesh_of"}),
    ("            return mesh\n", "            return mesh  # the mesh\n", set()),
    # A sibling it calls renamed: what the call refers to changes.
    ("        def helper():", "        def helper2():", {"helper2", "step"}),
])
def test_nested_functions_of_an_edited_method_are_reused_unless_what_they_read_changed(
        tmp_path: Path, monkeypatch, old: str, new: str, made_again: set[str]) -> None:
    """A method's nested functions keep their flows and call results across an edit of the
    method when the values they read from it are bound as before; the summary and findings are
    a fresh build's either way."""

    from shardlint.semantics.flow import summary as summary_mod

    made: list[str] = []
    real = summary_mod.function_flow

    def counting(facts, scope, *args, **kwargs):
        made.append(scope.qualname.rpartition(".")[2])
        return real(facts, scope, *args, **kwargs)

    monkeypatch.setattr(summary_mod, "function_flow", counting)
    live, parser, path = _live(tmp_path, NESTED_BASE, warm="        count = 0")
    assert old in NESTED_BASE
    for step, text in enumerate((NESTED_BASE.replace(old, new, 1), NESTED_BASE)):  # edit, undo
        made.clear()
        got = [(f.code, f.span, f.message) for f in live.lint_text(path, text, parser=parser)]
        nested_made = set(made) - {"run"}
        _as_fresh(tmp_path, live, path, text, got)
        if step == 0:
            assert nested_made == made_again


@pytest.mark.parametrize("path", SOURCES[::4], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_typing_into_nested_blocks_gives_the_full_parse_error_at_every_keystroke(
        path: Path) -> None:
    """A statement typed one character at a time into a method's or a nested function's body:
    most states do not parse, and their error (found from the edited block to the end of the
    file, under stand-in headers) is the whole file's, message and position."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    spots = [fn.body[0] for fn in ast.walk(tree)
             if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(fn.body) > 1
             and fn.col_offset > 0][:6]
    typed = "h = jnp.einsum('bd,df->bf', x, [self.k(1), {'a': (2,"
    lines = text.split("\n")
    for stmt in spots:
        parser = IncrementalParser()
        parser.parse(text, "f.py")
        indent = " " * stmt.col_offset
        for k in range(len(typed) + 1):
            new_lines = [*lines[:stmt.lineno - 1], indent + typed[:k], *lines[stmt.lineno - 1:]]
            new = "\n".join(new_lines)
            assert outcome(new, parser) == outcome(new), (path, stmt.lineno, typed[:k])


@pytest.mark.parametrize("tail", ["", "\n", "\n\n# the end\n", "\n    # indented comment\n"])
def test_the_last_member_deleted_at_the_end_of_the_file(tail: str) -> None:
    """Deleting a class's last method, with nothing (or only comments) after it: the edited
    region holds no code any more, and the file parses (found by the fuzz suite: the stand-in
    header of the region's error path was reported, "expected an indented block after 'if'
    statement")."""
    text = ("class Decoder:\n    def __init__(self, config):\n        self.stage = config\n\n"
            "    def pick(self, config):\n        table = {'dense': 1}\n        return table\n")
    parser = IncrementalParser()
    parser.parse(text + tail, "f.py")
    new = text[:text.index("    def pick")] + tail
    assert outcome(new, parser) == outcome(new)
    assert outcome(new)[0] == "ok"


BODY_BASE = '''import jax
import flax.linen as nn


class Engine:
    def run(self, params, batch):
        count = 0
        mesh = jax.make_mesh((1,), ("data",))
        spec = ("batch",)

        def helper():
            x = nn.with_logical_constraint(batch, spec)
            return x

        with mesh:
            out = helper()
        step = jax.jit(helper)
        return out, step

    def other(self):
        return self
'''


@pytest.mark.parametrize("old, new, visited", [
    # Typing into one statement: only it is visited again; the others (`def helper` and all
    # inside it among them) are replayed.
    ("        count = 0\n", "        count = 0 + len(batch)\n", {"count = 0 + len(batch)"}),
    # An edit inside a nested function: the statement that defines it, and its own edited one.
    ("            return x\n", "            return (x)\n",
     {"def helper():", "return x"}),
    # A comment: the tree is as it was, and the last build is kept whole.
    ("            return x\n", "            return x  # the value\n", set()),
    # Another mesh: the `with` that reads it is visited again.
    ('        mesh = jax.make_mesh((1,), ("data",))', "        mesh = jax.make_mesh((2,), ('x',))",
     {"mesh = jax.make_mesh((2,), ('x',))", "with mesh:"}),
    # The jitted function renamed: its definition (a new statement, all of it) and the jit of
    # the old name.
    ("        def helper():", "        def helper2():",
     {"def helper2():", "x = nn.with_logical_constraint(batch, spec)", "return x",
      "step = jax.jit(helper)"}),
])
def test_statements_of_an_edited_function_are_replayed(tmp_path: Path, monkeypatch, old: str,
                                                        new: str, visited: set[str]) -> None:
    """An edit inside one statement of a method visits that statement again (and, inside a
    nested function, that function's edited statement), and the statements whose reads changed;
    the method's other statements are replayed into its reused scope, and findings and summary
    equal a fresh build's."""

    from shardlint.semantics.file import visitor

    seen, _ = _asked_while_editing(tmp_path, monkeypatch, visitor, "record_body",
                                   lambda b, stmt, owner: ast.unparse(stmt).split("\n")[0],
                                   BODY_BASE, "        count = 0", old, new)
    assert seen == visited


FLOW_BASE = '''import jax
import optax


class Trainer:
    def step(self, state, batch, scale):
        grads = jax.grad(lambda p: (p * batch).sum())(state.params)
        updates, opt_state = self.tx.update(grads, state.opt_state)
        extra = scale * 2

        new_state = state.replace(params=optax.apply_updates(state.params, updates),
                                  opt_state=opt_state)
        return new_state, extra

    def other(self):
        return self
'''


@pytest.mark.parametrize("old, new, made", [
    # (Each edit lies in the region of the statement `extra = ...`, a blank line included: the
    # parser parses that region again, and the statements after it are kept.)
    # A statement that binds a name nothing else reads: the method's flow is the last build's.
    ("        extra = scale * 2\n\n", "        extra = scale * 2\n        h = jax.numpy.ones(3)\n\n",
     False),
    # ... moved down by the lines added above what it points at.
    ("        extra = scale * 2\n\n", "        extra = scale * 2\n        h = 1\n\n\n", False),
    # A name the return reads bound differently, a return changed, a parameter rebound, a call
    # handed a parameter: made again.
    ("        extra = scale * 2\n\n", "        extra = state\n\n", True),
    ("        return new_state, extra\n", "        return new_state, extra, 1\n", True),
    ("        extra = scale * 2\n\n", "        extra = scale * 2\n        batch = 2\n\n", True),
    ("        extra = scale * 2\n\n", "        extra = scale * 2\n        jax.jit(self.f)(state)\n\n",
     True),
])
def test_the_flow_of_an_edited_function_is_reused_unless_what_it_reads_changed(
        tmp_path: Path, monkeypatch, old: str, new: str, made: bool) -> None:
    """Typing into one statement of a long method: its flow summary (what it returns, updates,
    hands on) is the last build's, positions moved, unless the statement is one it reads; the
    summary and findings equal a fresh build's either way."""

    from shardlint.semantics.flow import summary as summary_mod

    seen, _ = _asked_while_editing(tmp_path, monkeypatch, summary_mod, "function_flow",
                                   lambda facts, scope, *args, **kwargs: scope.qualname,
                                   FLOW_BASE, "        extra = scale * 2", old, new)
    assert ("Trainer.step" in seen) == made


KEPT_BASE = '''import jax


def step(state, batch):
    return state + batch


class Loop:
    def first(self, state, batches):
        for batch in batches:
            old = state
            state = step(state, batch)
            print(old)
        return state

    def second(self, state, batches):
        for batch in batches:
            before = state
            state = step(state, batch)
            print(before)
        return state

    def third(self, x):
        y = x * 2
        return y

    def fourth(self, state, batches, scale):
        total = scale
        n = len(batches)

        def inner(state):
            for batch in batches:
                old = state
                state = step(state, batch)
                print(old, n)
            return state

        return inner(state) * total
'''


@pytest.mark.parametrize("old, new, asked", [
    # Typing into a method with no rebinding call: the other methods' answers are kept.
    ("        y = x * 2\n", "        y = x * 3\n", set()),
    ("        y = x * 2\n", "        y = x * 2\n        z = y\n\n\n", set()),  # (lines added)
    # Into a method with one: asked again there only.
    ("            print(old)\n", "            print(state)\n", {"Loop.first"}),
    ("            print(before)\n", "            print(before.shape)\n", {"Loop.second"}),
    # (no longer an alias of the rebound name: not asked at all, and nothing kept there)
    ("            before = state\n", "            before = batch\n", set()),
    # A module-level name bound differently: asked again everywhere.
    ("def step(state, batch):\n", "def step(state, batch, k=1):\n",
     {"Loop.first", "Loop.second", "Loop.fourth.inner"}),
    # Typing into a method around a nested function: asked again in the nested function only
    # when it is edited, or a name it mentions is bound differently around it.
    ("        total = scale\n", "        total = scale * 2\n", set()),
    ("        n = len(batches)\n", "        n = len(batches) + 1\n", {"Loop.fourth.inner"}),
    ("                print(old, n)\n", "                print(old.shape, n)\n",
     {"Loop.fourth.inner"}),
])
def test_the_kept_arguments_of_an_untouched_function_are_reused(
        tmp_path: Path, monkeypatch, old: str, new: str, asked: set[str]) -> None:
    """``ModuleSummary.kept`` (a rebinding call whose old value a later read reaches) asks the
    liveness walk again only in the functions an edit touched, and equals a fresh build's."""
    from shardlint.semantics.flow import summary as summary_mod

    seen, live = _asked_while_editing(tmp_path, monkeypatch, summary_mod, "use_after",
                                      lambda facts, site, arg: site.scope.qualname,
                                      KEPT_BASE, "        y = x * 2", old, new)
    assert seen == asked
    assert live.index.summaries["train"].kept  # (the case is one the walk answers)


COMMENT_BASE = '''import jax


def scale(params):
    return jax.tree_map(
        lambda p: p * 2,  # doubled
        params)
'''


def test_an_edit_of_a_comment_keeps_the_build_and_runs_the_rules(tmp_path: Path,
                                                                monkeypatch) -> None:
    """A keystroke that leaves the tree as it was keeps the file's facts and summary; the
    rules run again on the new text (a suppression comment counts at once), and the findings
    are a fresh build's."""
    from shardlint import engine as engine_mod

    made: list[str] = []
    real = engine_mod.summarise

    def counting(facts):
        made.append(facts.module)
        return real(facts)

    monkeypatch.setattr(engine_mod, "summarise", counting)
    live, parser, path = _live(tmp_path, COMMENT_BASE)
    edits = [COMMENT_BASE.replace("# doubled", "# twice", 1),
             COMMENT_BASE.replace("jax.tree_map(\n", "jax.tree_map(  # shardlint: ignore[SHL501]\n"),
             COMMENT_BASE]
    counts = []
    for text in edits:
        made.clear()
        found = live.lint_text(path, text, parser=parser)
        assert parser.same_tree and not made
        got = [(f.code, f.span, f.message) for f in found]
        _as_fresh(tmp_path, live, path, text, got)
        counts.append(len(got))
    assert counts == [1, 0, 1]
    made.clear()
    text = COMMENT_BASE.replace("p * 2", "p * 3")
    got = [(f.code, f.span, f.message) for f in live.lint_text(path, text, parser=parser)]
    assert not parser.same_tree and made == ["train"]
    _as_fresh(tmp_path, live, path, text, got)


DONATED_BASE = '''import functools

import jax


def helper(x):
    return x


@functools.partial(jax.jit, donate_argnums=(0,))
def step(state, batch):
    return state.apply_gradients(grads=batch)


def train(state, batches):
    for batch in batches:
        old = state.params
        state = step(state, batch)
        print(jax.tree.map(lambda a, b: a - b, state.params, old))
    return state
'''


@pytest.mark.parametrize("old, new", [
    # Lines added above the loop: its statements are kept and moved, and so are the lines the
    # liveness walk keeps with them (the alias, the stores).
    ("    return x\n", "    y = x\n\n    return y\n"),
    ("        old = state.params\n", "        old = state.params\n\n\n"),
    # The alias rebound after the read, and before it (no finding then).
    ("        print(jax", "        old = None\n        print(jax"),
    ("        state = step(state, batch)\n", "        state = step(state, batch)\n        state = 1\n"),
    ("    return state\n", "\n\n    return state\n"),
])
def test_use_after_donation_through_kept_statements_matches_a_full_build(
        tmp_path: Path, old: str, new: str) -> None:
    """SHL402's walk of a body keeps each statement's stores and aliases with the statement,
    relative to its first line (liveness._index): after an edit that moves or replaces
    statements, its findings are a fresh build's."""
    live, parser, path = _live(tmp_path, DONATED_BASE, warm="    return x")
    assert old in DONATED_BASE
    first = [f.code for f in live.lint_text(path, DONATED_BASE, parser=parser)]
    assert "SHL402" in first
    for text in (DONATED_BASE.replace(old, new, 1), DONATED_BASE):  # edit, undo
        got = [(f.code, f.span, f.message) for f in live.lint_text(path, text, parser=parser)]
        _as_fresh(tmp_path, live, path, text, got)


def test_a_dedented_else_under_a_method_is_the_full_parse_error() -> None:
    """``else:`` typed at a method's column inside its body, the line after it left less
    indented than the block it was in: the file's error is at that ``else`` (a ``def`` takes
    none), not the indentation error further down that a stand-in ``if`` header, taking the
    ``else``, would have let the parser reach."""
    base = ("class A:\n    def f(self, xs):\n        out = []\n        for x in xs:\n"
            "            if x:\n                y = 1\n                z = 2\n"
            "            elif y:\n                w = 3\n        return out\n\n"
            "    def g(self):\n        return 1\n")
    parser = IncrementalParser()
    assert outcome(base, parser)[0] == "ok"
    at = base.index("                z = 2")
    new = base[:at] + "    else:\n" + base[at + 5:]  # (the line now starts at column 11)
    expected = outcome(new)
    assert expected[:3] == ("SyntaxError", "invalid syntax", 7)
    assert outcome(new, parser) == expected
