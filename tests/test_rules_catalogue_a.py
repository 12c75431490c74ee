"""Regression cases for SHL104, SHL105, SHL204, SHL205, SHL206, SHL303 and SHL304 beyond the
rules' own examples, and round trips of their fixes.

Each case is a small project; lines that must be flagged end with ``# expect: SHLnnn`` and every
other line must stay clean for that rule. A fix is applied with
``shardlint.findings.fixes.apply_fixes``: the result must parse, lint without that finding and
without a new one, and applying the fixes again must change nothing.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from helpers import expected_markers, lint_files, run_example

from shardlint.config import Config
from shardlint.findings.fixes import apply_fixes
from shardlint.rules.base import Example, Finding, get_rule

CODES = ("SHL104", "SHL105", "SHL204", "SHL205", "SHL206", "SHL303", "SHL304")


def _files(files: dict[str, str] | str) -> dict[str, str]:
    if isinstance(files, str):
        files = {"example.py": files}
    return {k: textwrap.dedent(v).lstrip("\n") for k, v in files.items()}


def _case(code: str, files: dict[str, str] | str, id: str, **versions: str):
    return pytest.param(code, Example(_files(files), versions), id=f"{code}-{id}")


def lint(tmp_path: Path, code: str, files: dict[str, str] | str, **versions: str) -> list[Finding]:
    return lint_files(tmp_path, _files(files), select=(code,), versions=versions)


CASES = [
    # ---- SHL104 ---------------------------------------------------------------------------------
    _case("SHL104", """
        import contextlib
        import jax
        from jax.sharding import PartitionSpec as P

        @contextlib.contextmanager
        def activate(mesh):
            with jax.set_mesh(mesh):
                yield

        mesh = jax.make_mesh((8,), ("data",))
        step = jax.jit(lambda x: x, out_shardings=P("data"))
        with activate(mesh):
            step(1)
    """, "a project context manager may enter the mesh"),
    _case("SHL104", """
        import jax
        from jax.sharding import PartitionSpec as P

        mesh = jax.make_mesh((8,), ("data",))
        step = jax.jit(lambda x: x, out_shardings=P("data"))  # expect: SHL104
        with jax.set_mesh(mesh):
            step(1)
        with open("log.txt") as fh:
            step(2)
    """, "one call of several lacks the mesh"),
    _case("SHL104", """
        import jax
        import flax.linen as nn
        from jax.sharding import PartitionSpec as P

        class Block(nn.Module):
            @nn.compact
            def __call__(self, x):
                return jax.lax.with_sharding_constraint(x, P("data"))

        model = Block()
        params = model.init(jax.random.key(0), jax.numpy.ones(8))
    """, "model code is SHL103's business"),
    _case("SHL104", """
        import jax
        from jax.sharding import PartitionSpec as P

        step = jax.jit(lambda x: x, in_shardings=P("data"))  # expect: SHL104
        lowered = step.lower(jax.ShapeDtypeStruct((8,), jax.numpy.float32))
    """,
      "lowering reads the specs too"),
    # (jax.jit never resolved a bare spec against the legacy mesh: run, it raises on jax 0.7.0,
    # 0.10.0 and 0.12.0.1, and the 0.4.7, 0.4.34, 0.8.0 and 0.9.0 sources raise; pjit works)
    _case("SHL104", """
        import jax
        from jax.experimental.pjit import pjit
        from jax.sharding import Mesh, PartitionSpec as P

        mesh = Mesh(jax.devices(), ("data",))
        step = jax.jit(lambda x: x, out_shardings=P("data"))  # expect: SHL104
        legacy = pjit(lambda x: x, out_shardings=P("data"))
        with mesh:
            step(1)
            legacy(1)
    """, "on old jax the legacy mesh counts for pjit, never for jax.jit", jax="0.9.0"),
    _case("SHL104", """
        import jax
        from jax.sharding import PartitionSpec as P

        spec = P("data")
        shapes = jax.eval_shape(jax.jit(lambda x: x, out_shardings=spec), 1.0)
    """, "abstract evaluation"),
    _case("SHL104", """
        import jax
        from jax.sharding import PartitionSpec as P

        def run(x):
            with jax.set_mesh(jax.make_mesh((8,), ("data",))):
                return shard(x)

        def shard(x):
            return jax.device_put(x, P("data"))

        run(1)
    """, "the caller enters the mesh"),
    # ---- SHL105 ---------------------------------------------------------------------------------
    _case("SHL105", """
        import jax
        import flax.linen as nn

        mesh = jax.make_mesh((8,), ("data",))
        y = nn.with_logical_constraint(jax.numpy.ones(8), ("batch",))
    """, "older jax: Auto by default", jax="0.8.2"),
    _case("SHL105", """
        import jax

        mesh = jax.make_mesh((8,), ("data",))
        y = jax.numpy.ones(8)
    """, "no constraints anywhere"),
    _case("SHL105", """
        import jax
        import flax.linen as nn
        from jax.sharding import AxisType

        TYPES = (AxisType.Auto, AxisType.Explicit)
        mesh = jax.make_mesh((4, 2), ("data", "model"), axis_types=TYPES)
        init = nn.with_partitioning(nn.initializers.lecun_normal(), (None, "model"))
    """, "mixed axis types"),
    # ---- SHL204 ---------------------------------------------------------------------------------
    _case("SHL204", """
        import jax
        import flax.linen as nn

        def specs(tree):
            for _ in range(2):
                s = nn.get_partition_spec(tree)
                tree = nn.unbox(tree)
            return s
    """, "unboxed after the read in a loop"),
    _case("SHL204", """
        import flax.linen as nn

        ABSTRACT = None

        def specs():
            unboxed = nn.unbox(ABSTRACT)
            other = ABSTRACT
            return nn.get_partition_spec(other)
    """, "another name"),
    _case("SHL204", """
        import flax.linen as nn

        def specs(abstract, mesh):
            tree = nn.unbox(abstract)
            try:
                return nn.get_sharding(tree, mesh)  # expect: SHL204
            except ValueError:
                return None
    """, "inside a try"),
    # ---- SHL205 ---------------------------------------------------------------------------------
    _case("SHL205", """
        import jax

        per_device = 32
        batch = per_device * jax.local_device_count()
        mesh = jax.make_mesh((jax.device_count(),), ("data",))
    """, "local count sizes the batch only"),
    _case("SHL205", """
        import jax
        from jax.sharding import Mesh

        def eval_mesh():
            devices = jax.local_devices()
            return Mesh(devices, ("data",))  # expect: SHL205

        print(jax.process_index())
    """, "through a local name, multi-process"),
    # ---- SHL206 ---------------------------------------------------------------------------------
    _case("SHL206", """
        import jax

        if jax.device_count() != 8:
            raise SystemExit("needs 8 devices")
        mesh = jax.make_mesh((2, 4), ("data", "model"))
    """, "device count checked with an if"),
    _case("SHL206", """
        import jax
        import numpy as np
        from jax.sharding import Mesh

        def sub_mesh(n):
            devices = jax.devices()
            return Mesh(np.array(devices[:n]), ("data",))  # expect: SHL206
    """, "a slice through a name"),
    # ---- SHL303 ---------------------------------------------------------------------------------
    _case("SHL303", """
        import jax
        import optax
        from jax.sharding import AxisType, Mesh

        auto = Mesh(jax.devices(), ("data",))
        explicit = jax.make_mesh((8,), ("data",), axis_types=(AxisType.Explicit,))
        tx = optax.adam(1e-3)
        state = jax.jit(tx.init)({"w": jax.numpy.zeros(8)})
    """, "an Explicit mesh somewhere: cannot tell"),
    _case("SHL303", """
        import jax
        import optax
        from jax.sharding import Mesh

        mesh = Mesh(jax.devices(), ("data",))

        def make_tx():
            return optax.adam(1e-3)

        tx = make_tx()
        state = jax.jit(tx.init)({"w": jax.numpy.zeros(8)})
    """, "tx from a helper: not resolved"),
    _case("SHL303", """
        import jax
        import optax
        from jax.sharding import Mesh

        mesh = Mesh(jax.devices(), ("data",))
        tx = optax.adam(1e-3)

        @jax.jit
        def init(params):
            state = tx.init(params)
            return params, state
    """, "a function that does more than tx.init"),
    _case("SHL303", """
        import jax
        import optax
        from jax.sharding import Mesh

        mesh = Mesh(jax.devices(), ("data",))
        tx = optax.adam(1e-3)
        shapes = jax.eval_shape(tx.init, {"w": jax.numpy.zeros(8)})
        state = tx.init({"w": jax.numpy.zeros(8)})
    """, "eval_shape and eager init"),
    # ---- SHL304 ---------------------------------------------------------------------------------
    _case("SHL304", """
        import jax
        import jax.numpy as jnp

        mesh = jax.make_mesh((8,), ("data",))

        def build(dtype):
            return jnp.zeros((65536, 65536), dtype=dtype)  # expect: SHL304

        build(jnp.float32)
    """, "unknown dtype: a lower bound"),
    _case("SHL304", """
        import jax
        import jax.numpy as jnp
        import numpy as np

        mesh = jax.make_mesh((8,), ("data",))
        small = jax.device_put(np.zeros((1024, 1024)))
        big_later = jnp.zeros_like(small)
        host = np.zeros((65536, 65536))      # stays on the host
    """, "small, zeros_like, host only"),
    _case("SHL304", """
        import jax
        import jax.numpy as jnp

        mesh = jax.make_mesh((8,), ("data",))

        class Tables:
            def build(self):
                return jnp.zeros((65536, 65536))   # a method nobody here calls: unknown
    """, "execution unknown"),
]


@pytest.mark.parametrize("code,ex", CASES)
def test_case(tmp_path, code, ex):
    found = {f for f in run_example(tmp_path, ex, code) if f[2] == code}
    expected = {e for e in expected_markers(ex.files) if e[2] == code}
    assert found == expected


# ---- messages and severities ----------------------------------------------------------------------
def test_shl104_info_when_no_caller_and_no_mesh_entered(tmp_path):
    [f] = lint(tmp_path, "SHL104", """
        import jax
        from jax.sharding import PartitionSpec as P

        mesh = jax.make_mesh((8,), ("data",))

        def shard(x):
            return jax.lax.with_sharding_constraint(x, P("data"))
    """)
    assert f.severity == "info" and "nothing in the project enters one" in f.message


def test_shl104_names_the_legacy_context(tmp_path):
    [f] = lint(tmp_path, "SHL104", """
        import jax
        import numpy as np
        from jax.sharding import Mesh, PartitionSpec as P

        mesh = Mesh(jax.devices(), ("data",))
        with mesh:
            x = jax.device_put(np.ones(8), P("data"))
    """)
    assert f.severity == "error" and "legacy `with mesh:` does not count" in f.message


def test_shl205_severity_follows_multi_process_evidence(tmp_path):
    src = """
        import jax
        import numpy as np
        from jax.sharding import Mesh

        mesh = Mesh(np.array(jax.local_devices()), ("data",))
    """
    [single] = lint(tmp_path / "a", "SHL205", src)
    [multi] = lint(tmp_path / "b", "SHL205", {
        "train.py": src, "launch.py": "import jax\njax.distributed.initialize()\n"})
    assert single.severity == "info" and multi.severity == "warning"


def test_shl206_is_off_by_default(tmp_path):
    files = _files("""
        import jax
        mesh = jax.make_mesh((2, 2), ("data", "model"))
    """)
    assert not get_rule("SHL206").enabled_by_default
    found = lint_files(tmp_path, files)
    assert not [f for f in found if f.code == "SHL206"]


def test_shl304_says_at_least_when_the_dtype_is_unknown(tmp_path):
    [f] = lint(tmp_path, "SHL304", """
        import jax
        import jax.numpy as jnp

        mesh = jax.make_mesh((8,), ("data",))
        table = jnp.zeros((16384, 4096), dtype=jax.config.dtype)
    """)
    assert "at least 64 MiB" in f.message


# ---- fixes ---------------------------------------------------------------------------------------
def _fixable(code: str, only: tuple[int, ...] | None = None) -> list:
    rule = get_rule(code)
    indices = only if only is not None else range(len(rule.INVALID))
    return [pytest.param(code, i, id=f"{code}-{i}") for i in indices]


def _all_findings(root: Path, files: dict[str, str], versions: dict[str, str]) -> list[Finding]:
    codes = tuple(sorted({r for r in CODES} | {"SHL1", "SHL2", "SHL3", "SHL4", "SHL5"}))
    return lint_files(root, files, select=codes, versions=versions)


def _key(f: Finding) -> tuple:
    return (Path(f.path).name, f.code, f.message)


# SHL204 offers a fix only where the specs are read straight from `nn.unbox(tree)` (example 0).
@pytest.mark.parametrize("code,index", [*_fixable("SHL105"), *_fixable("SHL204", (0,))])
def test_fix_round_trip(tmp_path, code, index):
    ex = get_rule(code).INVALID[index]
    before = _all_findings(tmp_path / "before", ex.files, ex.versions)
    mine = [f for f in before if f.code == code and f.fix is not None]
    assert mine, "the example offers a fix"
    files = dict(ex.files)
    for f in mine:
        name = Path(f.path).name
        if f.fix.applicability == "display-only":
            # Not applied by --fix; applying its edits by hand must still be sound.
            applied = apply_fixes(files[name], [_as_unsafe(f)], unsafe=True).text
        else:
            result = apply_fixes(files[name], [f], unsafe=True)
            assert result.applied == [f]
            applied = result.text
        ast.parse(applied)
        files[name] = applied
    after = _all_findings(tmp_path / "after", files, ex.versions)
    assert not [f for f in after if f.code == code], [f.message for f in after]
    new = {_key(f) for f in after} - {_key(f) for f in before}
    assert not new, new
    # Applying the fixes again changes nothing.
    for name, text in files.items():
        again = [f for f in after if Path(f.path).name == name]
        assert apply_fixes(text, again, unsafe=True).text == text


def _as_unsafe(f: Finding) -> Finding:
    from dataclasses import replace

    from shardlint.rules.base import Fix

    return replace(f, fix=Fix(f.fix.description, "unsafe", f.fix.edits))


def test_shl105_fix_spellings(tmp_path):
    cases = {
        "from jax.sharding import AxisType\n": "axis_types=(AxisType.Auto,) * 2",
        "import jax.sharding as shd\n": "axis_types=(shd.AxisType.Auto,) * 2",
        "": "axis_types=(jax.sharding.AxisType.Auto,) * 2",
    }
    for i, (extra, expected) in enumerate(cases.items()):
        src = ("import jax\nimport flax.linen as nn\n" + extra +
               "mesh = jax.make_mesh((4, 2), ('data', 'model'))\n"
               "y = nn.with_logical_constraint(jax.numpy.ones(8), ('batch',))\n")
        [f] = lint(tmp_path / str(i), "SHL105", src)
        assert f.fix is not None and f.fix.applicability == "unsafe"
        fixed = apply_fixes(src, [f], unsafe=True).text
        assert expected in fixed, fixed
        assert apply_fixes(fixed, [f], unsafe=False).text == fixed  # unsafe: not applied by --fix


def test_shl105_fix_adds_the_import_and_uses_len_of_names(tmp_path):
    src = ("from jax import make_mesh\nimport flax.linen as nn\n\n"
           "def build(shape, names):\n    return make_mesh(shape, names)\n\n"
           "y = nn.with_logical_constraint(1, ('batch',))\n")
    [f] = lint(tmp_path, "SHL105", src)
    fixed = apply_fixes(src, [f], unsafe=True).text
    assert "import flax.linen as nn\nfrom jax.sharding import AxisType\n" in fixed
    assert "make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(names))" in fixed
    ast.parse(fixed)


def test_safe_fixes_only_leave_unsafe_edits_alone(tmp_path):
    ex = get_rule("SHL204").INVALID[0]
    [f] = [f for f in lint_files(tmp_path, ex.files, select=("SHL204",)) if f.fix]
    assert f.fix.applicability == "unsafe"
    text = next(iter(ex.files.values()))
    assert apply_fixes(text, [f], unsafe=False).text == text


def test_config_selects_shl206_explicitly(tmp_path):
    cfg = Config(root=tmp_path, select=("SHL206",))
    assert cfg.is_selected("SHL206", False)
