"""Regression cases for SHL305, SHL306, SHL403, SHL404, SHL405, SHL501 and SHL502, and the
round trip of their fixes: apply, parse, re-lint (the finding is gone, nothing new appears),
apply again (nothing changes)."""

from __future__ import annotations

import ast
import itertools
import textwrap
from collections import Counter
from pathlib import Path

import pytest
from helpers import expected_markers, lint_files

from shardlint.findings.fixes import apply_fixes, fixable
from shardlint.rules.base import Finding, get_rule
from shardlint.rules.contexts.shl103_constraint_without_mesh import _MODEL as _SHL103_MODEL
from shardlint.semantics.flow.summary import ModuleSummary

_counter = itertools.count()


def _dedent(src: str) -> str:
    return textwrap.dedent(src).lstrip("\n")


def lint(tmp_path: Path, files: dict[str, str] | str, codes: tuple[str, ...] = (),
         **versions: str) -> list[Finding]:
    """Lint in a fresh folder: ``codes`` selected, or every default rule plus SHL405."""
    files = {"example.py": files} if isinstance(files, str) else files
    root = tmp_path / f"p{next(_counter)}"
    root.mkdir()
    if codes:
        return lint_files(root, files, select=codes, versions=versions)
    return lint_files(root, files, versions=versions, extend_select=("SHL405",))


def flagged(tmp_path: Path, code: str, src: str | dict[str, str], **versions: str) -> set:
    src = {"example.py": src} if isinstance(src, str) else src
    files = {k: _dedent(v) for k, v in src.items()}
    return {(Path(f.path).name, f.line) for f in lint(tmp_path, files, (code,), **versions)}


def marked(code: str, src: str | dict[str, str]) -> set:
    src = {"example.py": src} if isinstance(src, str) else src
    files = {k: _dedent(v) for k, v in src.items()}
    return {(name, line) for name, line, c in expected_markers(files) if c == code}


def _key(f: Finding) -> tuple[str, str, str]:
    return (Path(f.path).name, f.code, f.message)


# ---- fixes: every fix of every INVALID example, one at a time ---------------------------------------
FIXING = ("SHL404", "SHL405", "SHL501", "SHL502")  # the rules that offer fixes


def _fix_cases():
    for code in FIXING:
        rule = get_rule(code)
        for i, ex in enumerate(rule.INVALID):
            yield pytest.param(code, i, id=f"{code}-invalid-{i}")


@pytest.mark.parametrize("code,index", list(_fix_cases()))
def test_fix_round_trip(tmp_path, code, index):
    ex = get_rule(code).INVALID[index]
    before = lint(tmp_path, ex.files, **ex.versions)
    mine = [f for f in before if f.code == code and fixable(f, unsafe=True)]
    if not mine:
        # e.g. an xmap use: there is no automatic edit; the finding must still be there
        assert any(f.code == code for f in before)
        return
    for f in mine:
        name = Path(f.path).name
        text = ex.files[name]
        fixed = apply_fixes(text, [f], unsafe=True)
        assert fixed.applied == [f]
        assert fixed.text != text
        ast.parse(fixed.text)  # still a Python file
        files = {**ex.files, name: fixed.text}
        after = lint(tmp_path, files, **ex.versions)
        gone = Counter(map(_key, before)) - Counter(map(_key, after))
        new = Counter(map(_key, after)) - Counter(map(_key, before))
        assert _key(f) in gone, f"{code} still reported after its fix:\n{fixed.text}"
        if code == "SHL404":
            # nnx.jit writes the updated objects back: SHL401 then rightly asks to donate them.
            new = Counter({k: n for k, n in new.items() if k[1] != "SHL401"})
        assert not new, f"the fix created new findings: {list(new)}\n{fixed.text}"
        # Applying the fixes again changes nothing: the finding, and its edit, are gone.
        again = [g for g in after if Path(g.path).name == name and g.code == code
                 and _key(g) == _key(f)]
        assert apply_fixes(fixed.text, again, unsafe=True).text == fixed.text


def _fix_all(tmp_path: Path, code: str, text: str, unsafe: bool, **versions: str) -> str:
    findings = lint(tmp_path, text, (code,), **versions)
    return apply_fixes(text, findings, unsafe).text


@pytest.mark.parametrize("code", ["SHL501", "SHL502", "SHL404", "SHL405"])
def test_fixing_twice_changes_nothing_the_second_time(tmp_path, code):
    for ex in get_rule(code).INVALID:
        if len(ex.files) != 1:
            continue
        text = ex.source
        once = _fix_all(tmp_path, code, text, True, **ex.versions)
        twice = _fix_all(tmp_path, code, once, True, **ex.versions)
        assert twice == once


@pytest.mark.parametrize("returned,made", [
    ('variables["cache"]', "the `cache` variables go wherever"),  # a decoding cache
    ('variables["params"]', "the parameters go wherever"),
    ("variables", "the parameters go wherever"),
])
def test_shl302_names_the_collection_the_init_returns(tmp_path, returned, made):
    """algorithmic-efficiency's `initialize_cache` jits `Transformer(config).init(...)` and
    returns `initial_variables['cache']`: what goes wherever propagation puts it is the
    decoding cache, not the parameters."""
    src = f"""
import functools
import jax
import flax.linen as nn

class Decoder(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(4)(x)

@jax.jit
def initialize_cache(inputs):
    variables = Decoder().init(jax.random.PRNGKey(0), inputs)
    return {returned}

mesh = jax.make_mesh((8,), ("data",))
"""
    [f] = lint(tmp_path, _dedent(src), ("SHL302",))
    assert made in f.message, f.message


# ---- SHL501 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call,stack", [
    ("jax.device_put_replicated(params, jax.local_devices())", "jnp.stack([x] * len(devices))"),
    ("jax.device_put_sharded(shards, jax.local_devices())", "jnp.stack(shards)"),
])
def test_shl501_device_put_replicated_keeps_the_pmap_leading_axis(tmp_path, call, stack):
    """Both made the layout pmap takes, a new leading axis with one slice per device (jax
    0.8.1's docstring). The advice stacks that axis and splits it over a 1-D mesh: run on jax
    0.4.30 and 0.8.1, that array has the same shape, values and device of each shard, and
    `pmap` gives the same result. `PartitionSpec()` (the earlier advice) would replicate the
    array whole, without the axis."""
    src = f"""
        import jax

        def replicate(params, shards):
            return {call}
    """
    [f] = lint(tmp_path, _dedent(src), ("SHL501",))
    assert f"`jax.device_put` (of " in f.message and stack in f.message, f.message
    assert "NamedSharding(Mesh(devices, ('d',)), PartitionSpec('d'))" in f.message
    assert "PartitionSpec()" not in f.message


def test_shl501_multiline_import_keeps_comments_and_other_names(tmp_path):
    src = _dedent("""
        import jax
        from jax.sharding import (
            use_mesh,  # entered once in main()
            PartitionSpec as P,
        )

        with use_mesh(mesh):
            spec = P("data")
    """)
    [f] = lint(tmp_path, src, ("SHL501",))
    assert f.severity == "error" and "removed in jax 0.7.1" in f.message
    assert f.fix is not None and f.fix.applicability == "safe"
    out = apply_fixes(src, [f]).text
    assert "# entered once in main()" in out
    assert "PartitionSpec as P," in out
    assert "from jax import set_mesh as use_mesh" in out
    ast.parse(out)
    assert not lint(tmp_path, out, ("SHL501",))


def test_shl501_adds_the_import_its_replacement_needs(tmp_path):
    src = _dedent("""
        from flax import nnx

        def f(x, spec):
            return nnx.with_sharding_constraint(x, spec)
    """)
    [f] = lint(tmp_path, src, ("SHL501",))
    assert f.fix is not None and f.fix.applicability == "unsafe"
    out = apply_fixes(src, [f], unsafe=True).text
    assert out.startswith("import jax\nfrom flax import nnx\n")
    assert "return jax.lax.with_sharding_constraint(x, spec)" in out
    assert not lint(tmp_path, out, ("SHL501",))


def test_shl501_uses_the_files_alias(tmp_path):
    src = "import jax as j\nleaves = j.tree_leaves({'a': 1})\nj.tree_map(abs, leaves)\n"
    out = _fix_all(tmp_path, "SHL501", src, unsafe=False)
    assert out == "import jax as j\nleaves = j.tree.leaves({'a': 1})\nj.tree.map(abs, leaves)\n"


def test_shl501_pjit_with_positional_shardings_is_display_only(tmp_path):
    src = _dedent("""
        from jax.experimental.pjit import pjit
        step = pjit(lambda x: x, in_spec, out_spec)
    """)
    [f] = lint(tmp_path, src, ("SHL501",))
    assert f.severity == "warning" and "deprecated since jax 0.8.0" in f.message
    assert f.fix is not None and f.fix.applicability == "display-only"
    assert apply_fixes(src, [f], unsafe=True).text == src


def test_shl501_jax_jit_takes_the_function_by_position_in_every_release():
    # The pjit fix writes `jax.jit(f, ...)` for every version range: the table shows the function
    # is jit's first parameter, positional, in every jax release; `fun=` raises from 0.7.0 (0.6's
    # wrapper still took it, with a warning).
    from shardlint.rules.versions.shl501_deprecated_api import jit_fun_positional_only_from
    from shardlint.semantics.catalog import facts

    for v in facts.releases("jax"):
        sig = facts.signature("jax.jit", v)
        assert sig is not None and sig.params[0].name == "fun", v
        assert sig.params[0].kind in ("positional_only", "positional_or_keyword"), v
    assert jit_fun_positional_only_from() == "0.7.0"
    assert facts.signature("jax.jit", "0.7.0").accepts_keyword("fun") is False
    assert facts.signature("jax.jit", "0.5.3").accepts_keyword("fun") is True


def test_shl501_pjit_fun_keyword_is_moved_to_the_first_argument(tmp_path):
    src = _dedent("""
        from jax.experimental.pjit import pjit
        from jax.sharding import NamedSharding

        def build(mesh, spec, body):
            s = NamedSharding(mesh, spec)
            first = pjit(fun=body, in_shardings=s, out_shardings=s)
            last = pjit(in_shardings=s, out_shardings=s, fun=(lambda v: v))
            middle = pjit(
                in_shardings=s,
                fun=body,  # the step
                out_shardings=s,
            )
            return first, last, middle
    """)
    for versions in ({}, {"jax": "0.4.20..0.8.0"}):
        [f] = lint(tmp_path, src, ("SHL501",), **versions)
        assert "by position from jax 0.7.0" in f.message and "lines 6, 7, 8" in f.message
        assert f.fix is not None and f.fix.applicability == "unsafe"
        assert "pass the function first" in f.fix.description
        out = apply_fixes(src, [f], unsafe=True).text
        ast.parse(out)
        assert "fun=" not in out
        assert "first = pjit(body, in_shardings=s, out_shardings=s)" in out
        assert "last = pjit((lambda v: v), in_shardings=s, out_shardings=s)" in out
        assert "pjit(\n        body, in_shardings=s,\n        # the step\n" in out
        assert not lint(tmp_path, out, ("SHL501",), **versions)


def test_shl501_pjit_fun_keyword_by_attribute(tmp_path):
    src = _dedent("""
        import jax.experimental.pjit

        step = jax.experimental.pjit.pjit(out_shardings=None, fun=abs)
    """)
    [f] = lint(tmp_path, src, ("SHL501",))
    assert "the `fun=` passed in this call raises `TypeError`" in f.message
    out = apply_fixes(src, [f], unsafe=True).text
    assert "step = jax.jit(abs, out_shardings=None)" in out


def test_shl501_pjit_with_bare_specs_names_set_mesh_and_is_display_only(tmp_path):
    src = _dedent("""
        import jax
        from jax.experimental.pjit import pjit
        from jax.sharding import Mesh, PartitionSpec as P

        mesh = Mesh(jax.devices(), ("data",))
        step = pjit(fun=lambda x: x + 1, in_shardings=P("data"), out_shardings=P("data"))
        with mesh:
            y = step(1.0)
    """)
    [f] = lint(tmp_path, src, ("SHL501",))
    assert "the bare `PartitionSpec`s passed on line 6 (`P(\"data\")`)" in f.message
    assert "`jax.jit` only the one `jax.set_mesh(mesh)` sets and raises without it" in f.message
    assert "`NamedSharding(mesh, spec)`s" in f.message
    assert "by position from jax 0.7.0" in f.message
    assert f.fix is not None and f.fix.applicability == "display-only"
    assert apply_fixes(src, [f], unsafe=True).text == src


@pytest.mark.parametrize("jax,set_mesh_advised,jit_needs", [
    (None, True, None),
    # `jax.set_mesh` is from 0.7.1: where the pins allow older releases, the advice that holds
    # in all of them is `NamedSharding`s
    ("0.6.0..0.12.0.1", False, None),
    # and `jax.jit` takes shardings only from 0.4.4: before, only pjit does
    ("0.4.1..0.12.0.1", False, "0.4.4"),
])
def test_shl501_pjit_advice_holds_at_every_release_the_pins_allow(tmp_path, jax,
                                                                    set_mesh_advised, jit_needs):
    bare = _dedent("""
        import jax
        from jax.experimental.pjit import pjit
        from jax.sharding import Mesh, PartitionSpec as P

        mesh = Mesh(jax.devices(), ("data",))
        step = pjit(lambda x: x + 1, in_shardings=P("data"), out_shardings=P("data"))
        with mesh:
            y = step(1.0)
    """)
    legacy = _dedent("""
        from jax.experimental import pjit
        from jax.sharding import Mesh

        def restore(devices, layout, tree):
            with Mesh(devices, ("model",)):
                return pjit.pjit(lambda t: t, in_shardings=None, out_shardings=layout)(tree)
    """)
    unseen = _dedent("""
        from jax.experimental.pjit import pjit

        def compile_step(step, layout):
            return pjit(step, in_shardings=layout, out_shardings=layout)
    """)
    versions = {"jax": jax} if jax else {}
    for src in (bare, legacy, unseen):
        [f] = lint(tmp_path, src, ("SHL501",), **versions)
        m = f.message
        assert ("enter that" in m or "mesh set by `jax.set_mesh` (a legacy" in m) \
            == set_mesh_advised, m
        assert "`NamedSharding(mesh, spec)`s" in m or src is unseen and set_mesh_advised, m
        if not set_mesh_advised:
            assert "needs jax >= 0.7.1, and the project's pins allow jax " + jax.split("..")[0] \
                in m, m
        assert (f"use `jax.jit` once the project requires jax >= {jit_needs} (`jax.jit` takes "
                f"no `in_shardings`/`out_shardings` before it" in m) == (jit_needs is not None), m
        if jit_needs is not None:  # (no edit to `jax.jit` offered where it takes no shardings)
            assert f.fix is not None and f.fix.applicability == "display-only"
        elif src is unseen:
            assert f.fix is not None and f.fix.applicability == "unsafe"


def test_shl501_pjit_under_a_legacy_mesh_with_unseen_shardings(tmp_path):
    # The specs come from the caller: not seen, but the call runs under a legacy `with mesh:`,
    # which only pjit reads. Shardings seen to be NamedShardings, `.sharding`s or None keep the
    # catalogue's note and the unsafe edit.
    src = _dedent("""
        from jax.experimental import pjit
        from jax.sharding import Mesh, NamedSharding

        def restore(devices, layout, tree, like):
            with Mesh(devices, ("model",)):
                placed = pjit.pjit(fun=lambda t: t, in_shardings=None, out_shardings=layout)(tree)
                same = pjit.pjit(lambda t: t, out_shardings=(like.sharding, None))(tree)
            return placed, same
    """)
    first, second = lint(tmp_path, src, ("SHL501",))
    assert "this pjit runs under a legacy `with mesh:`, which pjit reads" in first.message
    assert "unless `jax.set_mesh(mesh)` is around the call" in first.message
    assert first.fix is not None and first.fix.applicability == "display-only"
    assert "legacy `with mesh:` no longer counts" in second.message
    assert second.fix is not None and second.fix.applicability == "unsafe"


def test_shl501_pjit_bound_then_called_under_a_legacy_mesh(tmp_path):
    src = _dedent("""
        from jax.experimental.pjit import pjit
        from jax.sharding import Mesh

        def evaluate(devices, batches, body, batch_layout):
            step = pjit(body, in_shardings=(batch_layout,), out_shardings=None)
            with Mesh(devices, ("batch",)):
                return [step(b) for b in batches]
    """)
    [f] = lint(tmp_path, src, ("SHL501",))
    assert "the pjit on line 5 runs under a legacy `with mesh:`" in f.message
    assert f.fix is not None and f.fix.applicability == "display-only"


def test_shl501_pjit_partial_with_bare_specs(tmp_path):
    src = _dedent("""
        import functools
        from jax.experimental import pjit
        from jax.sharding import PartitionSpec as P

        @functools.partial(pjit.pjit, in_shardings=(P("data"),), out_shardings=P())
        def step(x):
            return x
    """)
    [f] = lint(tmp_path, src, ("SHL501",))
    assert "bare `PartitionSpec`s passed in this call" in f.message


def test_shl501_pjit_with_named_shardings_keeps_the_catalogue_note(tmp_path):
    from shardlint.semantics.catalog.api import lookup

    src = _dedent("""
        from jax.experimental.pjit import pjit
        step = pjit(lambda x: x, in_shardings=named, out_shardings=named)
    """)
    [f] = lint(tmp_path, src, ("SHL501",))
    assert f.message.endswith(f"use `jax.jit` ({lookup('jax.experimental.pjit.pjit').note})")
    assert f.fix is not None and f.fix.applicability == "unsafe"
    out = apply_fixes(src, [f], unsafe=True).text
    assert out.startswith("from jax import jit as pjit\n")


def test_shl501_shard_map_with_check_rep_is_display_only(tmp_path):
    src = _dedent("""
        from jax.experimental.shard_map import shard_map
        f = shard_map(g, mesh=mesh, in_specs=P(), out_specs=P(), check_rep=False)
    """)
    [f] = lint(tmp_path, src, ("SHL501",))
    assert f.fix is not None and f.fix.applicability == "display-only"


def test_shl501_versions_gate_each_move(tmp_path):
    src = "import jax\nfrom flax import nnx\nx = jax.tree_map(abs, 1)\np = nnx.Param(1, sharding=('a',))\n"
    assert flagged(tmp_path, "SHL501", src, jax="0.4.25", flax="0.12.3") == set()
    assert flagged(tmp_path, "SHL501", src, jax="0.5.0", flax="0.12.3") == {("example.py", 3)}
    found = lint(tmp_path, src, ("SHL501",), jax="0.5.0", flax="0.12.6")
    assert {(f.line, f.severity) for f in found} == {(3, "warning"), (4, "warning")}
    found = lint(tmp_path, src, ("SHL501",), jax="0.6.0")
    assert {(f.line, f.severity) for f in found} == {(3, "error"), (4, "warning")}


def test_shl501_keyword_fix_leaves_a_call_with_both_keywords_alone(tmp_path):
    src = "from flax import nnx\np = nnx.Param(1, sharding=('a',), out_sharding=('a',))\n"
    [f] = lint(tmp_path, src, ("SHL501",))
    assert f.fix is None


# ---- SHL305 ------------------------------------------------------------------------------------------
_MESH = """
import jax
import jax.numpy as jnp
mesh = jax.make_mesh((8,), ("data",))
step = jax.jit(lambda s, x: s + x.mean())
"""


@pytest.mark.parametrize("src", [
    _MESH + """
def run(s):
    for count in {3990, 4000, 4010}:
        s = step(s, jnp.array(count))
    for n, expected in zip([0, 10, 20], [0.1, 0.2, 0.3]):
        s = step(s, jnp.array(n + 1))
    for i in range(10):
        s = step(s, jnp.asarray(i * 2))
""",
    _MESH + """
def run(s, batches, sharding):
    for b in batches:
        x = jnp.asarray(b, device=sharding)
        s = step(s, x)
        print(jnp.asarray(b).sum())   # not fed to the step
""",
], ids=["loop counters", "placed or unused"])
def test_shl305_quiet(tmp_path, src):
    assert flagged(tmp_path, "SHL305", src) == set()


def test_shl305_decorated_step_and_rebinding(tmp_path):
    src = _MESH + """
@jax.jit
def train_step(state, batch):
    return state + batch.sum()

def run(state, loader):
    for raw in loader:
        batch = jax.device_put(raw)  # expect: SHL305
        state = train_step(state, batch)
    return state
"""
    assert flagged(tmp_path, "SHL305", src) == marked("SHL305", src)


# ---- SHL306 ------------------------------------------------------------------------------------------
def test_shl306_small_array_placed_by_name(tmp_path):
    src = """
import jax
from jax.sharding import NamedSharding, PartitionSpec
x = jax.random.normal(jax.random.key(0), (8, 20))
x = jax.device_put(x, NamedSharding(mesh, PartitionSpec()))

@jax.jit
def f():
    return x * 2
"""
    assert flagged(tmp_path, "SHL306", src) == set()


def test_shl306_parameter_defaults_size_the_array(tmp_path):
    src = """
import jax

def test_hessian(dim=16, big=4096):
    x = jax.random.normal(jax.random.key(0), (dim,))
    w = jax.random.normal(jax.random.key(1), (big, big))

    @jax.jit
    def loss(p):
        return (p * x).sum() + (w @ w).sum()  # expect: SHL306
    return loss
"""
    assert flagged(tmp_path, "SHL306", src) == marked("SHL306", src)


# ---- SHL403 ------------------------------------------------------------------------------------------
def test_shl403_donated_value_used_in_a_branch_function(tmp_path):
    src = """
import jax

@jax.jit(donate_argnames=("state",))
def update(state, x, decode):
    def fast(_):
        return state.at[0].set(x)
    def slow(_):
        return state * 0
    return jax.lax.cond(decode, fast, slow, operand=None)
"""
    assert flagged(tmp_path, "SHL403", src) == set()


def test_shl403_static_and_self_are_not_donations(tmp_path):
    src = """
from functools import partial
import jax

class Runner:
    @partial(jax.jit, static_argnums=0, donate_argnums=(1,))
    def step(self, cache, tokens):
        return cache.at[tokens].set(1)
"""
    assert flagged(tmp_path, "SHL403", src) == set()


@pytest.mark.parametrize("put,flagged_", [
    ("holder.load(state)", False),  # into the object returned
    ("holder.tree[0] = state", False),
    ("holder.params = state", False),
    ("logger.log(state)", True),  # into something not returned
])
def test_shl403_a_donated_argument_put_into_what_is_returned(tmp_path, put, flagged_):
    """openpi donates the loaded weights to an init that puts them into the model's state
    (`state.replace_by_pure_dict(partial_params)`) and returns the model's state: the buffers
    can go to the parameters of the same shapes. Put into something not returned, they
    cannot."""
    src = f"""
import jax

@jax.jit(donate_argnums=(1,))
def init(make, state, logger):
    holder = make()
    {put}
    return holder.export()
"""
    assert bool(flagged(tmp_path, "SHL403", src)) is flagged_


def test_shl403_never_claims_the_callers_arrays_are_deleted(tmp_path):
    """A donated argument no output can take is not deleted (measured on a TPU v5e with jax
    0.10.2 and on CPU with jax 0.12: `is_deleted()` stays False after the step), and XLA aliases
    by shape and dtype: an unrelated output of the same shape may still take the buffer. The
    message says so for a step that returns something, and that nothing is saved for one that
    returns nothing."""
    src = """
import jax

@jax.jit(donate_argnums=(0,))
def log_step(state, batch):
    jax.debug.print("{}", state.sum())
    return batch * 2

@jax.jit(donate_argnums=(0,))
def record(state, batch):
    print(state, batch)
"""
    by_line = {f.span.line: f.message for f in lint(tmp_path, src, ("SHL403",))}
    assert sorted(by_line) == [4, 9]
    returns, returns_nothing = by_line[4], by_line[9]
    assert "deleted" not in returns and "deleted" not in returns_nothing
    assert "unless another one happens to match" in returns
    assert "Some donated buffers were not usable" in returns
    assert "the step has no output for XLA to write into" in returns_nothing
    assert "happens to match" not in returns_nothing


# ---- SHL404 ------------------------------------------------------------------------------------------
def test_shl404_one_finding_per_statement_naming_both_objects(tmp_path):
    src = """
import jax
from flax import nnx

@jax.jit
def step(model, optimizer, grads):
    optimizer.update(model, grads)  # expect: SHL404
"""
    found = lint(tmp_path, _dedent(src), ("SHL404",))
    assert [(f.line, f.severity) for f in found] == [(6, "error")]
    assert "`optimizer` and `model`" in found[0].message
    assert found[0].related and "jax.jit" in found[0].related[0].message


def test_shl404_fix_keeps_keywords_and_switches_to_nnx_jit(tmp_path):
    src = _dedent("""
        from functools import partial
        import jax
        from flax import nnx

        @partial(jax.jit, donate_argnums=(0, 1))
        def step(model, optimizer, grads):
            optimizer.update(model, grads)
    """)
    [f] = lint(tmp_path, src, ("SHL404",))
    out = apply_fixes(src, [f], unsafe=True).text
    assert "@partial(nnx.jit, donate_argnums=(0, 1))" in out
    assert not lint(tmp_path, out)


def test_shl404_no_fix_for_keywords_nnx_jit_lacks(tmp_path):
    src = _dedent("""
        import jax
        from flax import nnx

        @jax.jit(compiler_options={"xla_cpu_enable_fast_math": False})
        def step(model, optimizer, grads):
            optimizer.update(model, grads)
    """)
    [f] = lint(tmp_path, src, ("SHL404",))
    assert f.fix is None


def test_shl404_not_before_flax_0_11(tmp_path):
    src = """
import jax
from flax import nnx

@jax.jit
def step(model, optimizer, grads):
    optimizer.update(model, grads)
"""
    assert flagged(tmp_path, "SHL404", src, flax="0.10.7") == set()


# ---- SHL405 ------------------------------------------------------------------------------------------
def test_shl405_is_off_by_default(tmp_path):
    src = get_rule("SHL405").INVALID[0].source
    assert not [f for f in lint_files(tmp_path, {"example.py": src}) if f.code == "SHL405"]


def test_shl405_fix_wraps_the_scanned_class(tmp_path):
    src = get_rule("SHL405").INVALID[0].source
    [f] = lint(tmp_path, src, ("SHL405",))
    assert f.severity == "info"
    out = apply_fixes(src, [f], unsafe=True).text
    assert "nn.scan(nn.remat(Block, prevent_cse=False), variable_axes" in out
    assert not lint(tmp_path, out, ("SHL405",))


def test_shl405_remat_elsewhere_in_the_project_counts_for_loops(tmp_path):
    files = {
        "blocks.py": """
            import flax.linen as nn

            class Block(nn.Module):
                @nn.compact
                def __call__(self, x):
                    return nn.Dense(8)(x)

            class Stack(nn.Module):
                num_layers: int = 32

                @nn.compact
                def __call__(self, x):
                    for _ in range(self.num_layers):
                        x = Block()(x)
                    return x
        """,
        "train.py": """
            import jax
            import flax.linen as nn
            from blocks import Stack

            Remat = nn.remat(Stack)
            g = jax.grad(lambda p, x: Remat().apply(p, x).sum())
        """,
    }
    assert flagged(tmp_path, "SHL405", files) == set()


# ---- SHL502 ------------------------------------------------------------------------------------------
def test_shl502_quiet_in_test_modules(tmp_path):
    files = {
        "mesh.py": "import jax\nmesh = jax.make_mesh((8,), ('x',))\n",
        "rng_test.py": "import jax\njax.config.update('jax_threefry_partitionable', False)\n",
    }
    assert flagged(tmp_path, "SHL502", files) == set()


_SHARDED_RANDOM = """
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = jax.make_mesh((8,), ("model",))
    init = jax.jit(lambda k: jax.random.normal(k, (8192, 4096)),
                   out_shardings=NamedSharding(mesh, P("model")))
"""


def test_shl502_before_the_flag_exists_says_to_require_it_first(tmp_path):
    """`jax_threefry_partitionable` exists from jax 0.3.24 (0.3.23's `jax/_src/config.py` has
    no such flag): on an older jax, updating it raises, so the advice asks for the release
    first; where the pins allow older releases as well, it says so beside the opt-in."""
    from shardlint.config import Config
    from shardlint.engine import Engine

    [old] = lint(tmp_path, {"example.py": _dedent(_SHARDED_RANDOM)}, ("SHL502",), jax="0.3.10")
    assert old.message.startswith("jax 0.3.10 has no `jax_threefry_partitionable` flag"), \
        old.message
    assert "the flag that opts in needs jax >= 0.3.24: require it, then opt in" in old.message
    [new] = lint(tmp_path, {"example.py": _dedent(_SHARDED_RANDOM)}, ("SHL502",), jax="0.4.30")
    assert new.message.startswith("jax 0.4.30 defaults `jax_threefry_partitionable` to False")
    assert "0.3.24" not in new.message
    root = tmp_path / "ranged"
    root.mkdir()
    (root / "requirements.txt").write_text("jax>=0.3.10,<0.5\n")
    (root / "example.py").write_text(_dedent("""
        import jax
        import numpy as np
        from jax.experimental import PartitionSpec as P
        from jax.experimental.maps import Mesh
        from jax.experimental.pjit import pjit
        mesh = Mesh(np.array(jax.devices()), ("model",))
        init = pjit(lambda k: jax.random.normal(k, (8192, 4096)), in_axis_resources=None,
                    out_axis_resources=P("model"))
    """))  # (what the file calls exists from jax 0.3.0: the pins' range stays whole)
    [ranged] = Engine(Config(root=root, select=("SHL502",)), use_cache=False).lint_paths(
        [root / "example.py"])
    assert ("the default since jax 0.5.0); the flag exists from jax 0.3.24, and the project's "
            "pins allow jax 0.3.10, where updating it raises: require jax >= 0.3.24 as well") \
        in ranged.message, ranged.message


# ---- the project index ---------------------------------------------------------------------------------
def test_summary_keeps_jitted_names_and_flags():
    from shardlint.semantics.flow.summary import summarise
    from shardlint.semantics.file.visitor import build_facts

    src = _dedent("""
        import jax
        from functools import partial
        jax.config.update("jax_threefry_partitionable", False)

        @partial(jax.jit, donate_argnums=0)
        def train_step(state, batch):
            return state

        eval_step = jax.jit(lambda s, b: s)

        def helper():
            inner = jax.jit(lambda x: x)
            return inner
    """)
    summary = summarise(build_facts("m.py", "m", ast.parse(src)))
    assert summary.jitted == ["eval_step", "train_step"]
    assert summary.flags == {"jax_threefry_partitionable": [False]}
    again = ModuleSummary.from_json(summary.to_json())
    assert again.jitted == summary.jitted and again.flags == summary.flags


def test_shl403_shl404_object_handed_to_a_constructor_in_the_return(tmp_path):
    src = """
import jax
from flax import nnx

@jax.jit(donate_argnums=(0, 1))
def step(model, optimizer, x):
    loss, grads = nnx.value_and_grad(lambda m: (m(x) ** 2).mean())(model)
    optimizer.update(model, grads)
    return StepOutput(model=model, optimizer=optimizer, loss=loss)
"""
    assert flagged(tmp_path, "SHL403", src) == set()
    assert flagged(tmp_path, "SHL404", src) == set()


# (SHL103's model: a Linen MLP with partitioned parameters and a constraint, and its rules)
_OLD_INIT = _SHL103_MODEL + """
with nn.logical_axis_rules(RULES):
    variables = jax.jit(MLP().init)(jax.random.PRNGKey(0), jax.numpy.ones((8, 4)))
"""


@pytest.mark.parametrize("jax,flax,context,set_mesh,out_shardings,get_sharding", [
    (None, None, "(`jax.set_mesh`)", "under `jax.set_mesh`;", False, False),
    # a project that runs only a jax without `jax.set_mesh`: the legacy `with mesh:` is its mesh
    # context, and flax before 0.12.2 honours it
    ("0.4.20", "0.7.5", "(`with mesh:`)", None, False, False),
    ("0.4.1..0.12.0.1", "0.6.4..0.12.12", "(`jax.set_mesh`, or `with mesh:` on jax < 0.7.1)",
     "under `jax.set_mesh` (jax >= 0.7.1; the project's pins allow jax 0.4.1)", True, True),
])
def test_shl103_shl302_advice_holds_at_every_release_the_pins_allow(
        tmp_path, jax, flax, context, set_mesh, out_shardings, get_sharding):
    versions = {k: v for k, v in (("jax", jax), ("flax", flax)) if v}
    found = {f.code: f.message for f in lint(tmp_path, _OLD_INIT, ("SHL103", "SHL302"),
                                             **versions)}
    assert f"whose Flax constraints run with no mesh in context {context}:" in found["SHL103"]
    m = found["SHL302"]
    assert ("jax.set_mesh" in m) == (set_mesh is not None), m
    if set_mesh is not None:
        assert set_mesh in m, m
    # `jax.jit` takes `out_shardings` from jax 0.4.4, `nn.get_sharding` is from flax 0.6.9
    assert ("pass `out_shardings=` (jax >= 0.4.4;" in m) == out_shardings, m
    assert ("`nn.get_sharding(abstract, mesh)`, flax >= 0.6.9;" in m) == get_sharding, m


@pytest.mark.parametrize("jax,noted", [(None, False), ("0.4.1..0.12.0.1", True)])
def test_shl205_shl301_name_the_release_their_advice_needs(tmp_path, jax, noted):
    """`jax.make_array_from_process_local_data` is from jax 0.4.29, `jax.jit`'s
    `out_shardings` from 0.4.4 (the table of releases): where the pins allow older releases,
    the advice says so and what to use there."""
    versions = {"jax": jax} if jax else {}
    [local] = lint(tmp_path, _dedent("""
        import jax
        import numpy as np
        from jax.sharding import Mesh

        jax.distributed.initialize()
        mesh = Mesh(np.array(jax.local_devices()), ("data",))
    """), ("SHL205",), **versions)
    assert ("`jax.make_array_from_process_local_data` (jax >= 0.4.29; the project's pins allow "
            "jax 0.4.1; before it, `jax.make_array_from_single_device_arrays`)"
            in local.message) == noted, local.message
    [eager] = lint(tmp_path, _dedent("""
        import jax
        import numpy as np
        import flax.linen as nn
        from jax.sharding import Mesh

        class MLP(nn.Module):
            @nn.compact
            def __call__(self, x):
                return nn.Dense(4096)(x)

        mesh = Mesh(np.array(jax.devices()), ("data",))
        variables = MLP().init(jax.random.PRNGKey(0), jax.numpy.ones((8, 4096)))
    """), ("SHL301",), **versions)
    assert ("(shardings from `jax.eval_shape`) (jax >= 0.4.4; the project's pins allow jax "
            "0.4.1, where only pjit takes shardings, as `out_axis_resources=`)"
            in eager.message) == noted, eager.message


@pytest.mark.parametrize("code,index,keyword", [
    ("SHL303", 0, "out_shardings"), ("SHL305", 2, "in_shardings")])
@pytest.mark.parametrize("jax", [None, "0.4.1..0.12.0.1"])
def test_jit_sharding_keywords_are_advised_with_the_release_that_has_them(
        tmp_path, code, index, keyword, jax):
    ex = get_rule(code).INVALID[index]
    # (`jax.set_mesh` or `jax.make_mesh` in it would narrow the range the code runs at)
    assert "set_mesh" not in "".join(ex.files.values())
    assert "make_mesh" not in "".join(ex.files.values())
    f = lint(tmp_path, ex.files, (code,), **({"jax": jax} if jax else {}))[0]
    old = "out_axis_resources" if keyword == "out_shardings" else "in_axis_resources"
    assert (f"(jax >= 0.4.4; the project's pins allow jax 0.4.1, where only pjit takes "
            f"shardings, as `{old}=`)" in f.message) == (jax is not None), f.message


def test_shl405_advises_the_remat_of_the_stack_it_found(tmp_path):
    """`nn.scan` of Linen layers: `nn.remat`; `nnx.scan`: `nnx.remat`; `jax.lax.scan` of a
    function: `jax.checkpoint` -- not the three at once."""
    seen = set()
    for ex in get_rule("SHL405").INVALID:
        for f in lint(tmp_path, ex.files, ("SHL405",), **ex.versions):
            remat = f.message.split("wrap the layer in ", 1)[1].split(", possibly", 1)[0]
            if f.message.startswith("`nnx.scan`"):
                kind = "nnx.scan"
            elif f.message.startswith("`jax.lax.scan`"):
                kind = "lax.scan"
            elif f.message.startswith("this loop"):
                kind = "loop"
            else:
                kind = "nn.scan"
            assert remat == {"nn.scan": "`nn.remat`", "nnx.scan": "`nnx.remat`",
                             "lax.scan": "`jax.checkpoint`",
                             "loop": "`nn.remat`/`nnx.remat`/`jax.checkpoint`"}[kind], f.message
            seen.add(kind)
    assert {"nn.scan", "nnx.scan"} <= seen, seen
