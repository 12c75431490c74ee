"""Contexts as real projects spell them: meshes from helpers, `self.mesh`, parameters; global
setters scoped to the program that runs them; sibling example folders kept apart.

Each case is a small project; lines that must be flagged end with ``# expect: SHLnnn`` and every
other line must stay clean for that rule (both directions: found, and the quiet look-alike).
"""

from __future__ import annotations

import textwrap
from pathlib import PurePath

import pytest
from helpers import expected_markers, run_example

from shardlint.rules.base import Example
from shardlint.rules.contexts.shl104_bare_partition_spec_without_mesh import GLOBAL_LEGACY_ENV

MODEL = """
    import flax.linen as nn

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.with_logical_constraint(nn.Dense(8)(x), ("batch", "mlp"))
"""


# (an unconstrained model beside MODEL's: the look-alike of tests that apply a model)
PLAIN = """
    class Plain(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(8)(x)
"""


def _case(code: str, files: dict[str, str], id: str):
    files = {k: textwrap.dedent(v).lstrip("\n") for k, v in files.items()}
    return pytest.param(code, Example(files), id=f"{code}-{id}")


CASES = [
    # ---- mesh identity through the value-flow layer (SHL101) --------------------------------------
    _case("SHL101", {
        "meshes.py": """
            import jax
            from jax.sharding import Mesh

            def create_mesh(config):
                devices = jax.devices()
                return Mesh(devices, ("data",))
        """,
        "train.py": """
            import jax
            from meshes import create_mesh

            def main(config):
                mesh = create_mesh(config)
                with mesh:  # expect: SHL101
                    pass
        """,
    }, "mesh-from-a-helper-in-another-file"),
    _case("SHL101", {
        "train.py": """
            import jax

            class Trainer:
                def __init__(self, devices):
                    self.mesh = jax.make_mesh((len(devices),), ("data",))

                def fit(self, batches):
                    with self.mesh:  # expect: SHL101
                        for b in batches:
                            pass
        """,
    }, "mesh-held-on-self"),
    _case("SHL101", {
        "train.py": """
            import jax

            def run(mesh, batches):
                with mesh:  # expect: SHL101
                    return list(batches)

            def main():
                run(jax.make_mesh((8,), ("data",)), [])
                run(jax.make_mesh((4, 2), ("data", "model")), [])
        """,
    }, "every-caller-passes-a-mesh"),
    _case("SHL101", {
        "train.py": """
            import jax
            import contextlib

            def run(ctx, batches):
                with ctx:
                    return list(batches)

            def main():
                run(jax.make_mesh((8,), ("data",)), [])
                run(contextlib.nullcontext(), [])
        """,
    }, "one-caller-passes-something-else"),
    _case("SHL101", {
        "train.py": """
            import jax

            class Trainer:
                def __init__(self, mesh):
                    self.mesh = mesh

                def fit(self):
                    with self.mesh:
                        pass
        """,
    }, "self-attribute-from-an-unknown-parameter"),
    _case("SHL101", {
        "train.py": """
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P

            def shard(x, mesh):
                with mesh:  # expect: SHL101
                    return jax.device_put(x, NamedSharding(mesh, P("data")))
        """,
    }, "a-name-the-function-hands-to-NamedSharding"),
    _case("SHL101", {
        "train.py": """
            def shard(x, mesh):
                with mesh:
                    return x
        """,
    }, "a-name-called-mesh-is-not-evidence"),
    # ---- SHL104: pjit honours a legacy mesh, also one a helper in another file builds -------------
    _case("SHL104", {
        "meshes.py": """
            import jax

            def make_mesh():
                return jax.make_mesh((8,), ("data",))
        """,
        "train.py": """
            import jax
            from jax.experimental.pjit import pjit
            from jax.sharding import PartitionSpec as P
            from meshes import make_mesh

            def main(x):
                mesh = make_mesh()
                step = pjit(lambda a: a * 2, in_shardings=P("data"), out_shardings=P("data"))
                with mesh:
                    return step(x)
        """,
    }, "pjit-under-a-legacy-mesh-from-a-helper"),
    _case("SHL104", {
        "train.py": """
            import jax
            from jax.sharding import PartitionSpec as P

            mesh = jax.make_mesh((8,), ("data",))
            step = jax.jit(lambda a: a * 2, out_shardings=P("data"))  # expect: SHL104

            def main(x):
                return step(x)  # no mesh anywhere

            main(jax.numpy.ones(8))
        """,
    }, "jax-jit-with-a-bare-spec-and-no-mesh-stays-reported-at-the-spec"),
    # ---- a global setter counts for the program that executes it (SHL102) -------------------------
    _case("SHL102", {
        "model.py": MODEL,
        "train.py": """
            import jax
            from model import MLP

            def main():
                with jax.set_mesh(jax.make_mesh((8,), ("data",))):
                    return MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))  # expect: SHL102

            if __name__ == "__main__":
                main()
        """,
        "tools/convert_checkpoint.py": """
            import flax.linen as nn

            nn.set_logical_axis_rules([("batch", "data"), ("mlp", "model")])
            print("converting")
        """,
    }, "a-standalone-script-sets-the-rules-for-itself-only"),
    _case("SHL102", {
        "model.py": MODEL,
        "train.py": """
            import jax
            import flax.linen as nn
            from model import MLP

            nn.set_logical_axis_rules([("batch", "data"), ("mlp", "model")])

            def main():
                with jax.set_mesh(jax.make_mesh((8,), ("data",))):
                    return MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))

            if __name__ == "__main__":
                main()
        """,
    }, "the-program-that-runs-the-setter"),
    # ---- sibling example folders with the same module names (SHL102) ------------------------------
    _case("SHL102", {
        "examples/a/model.py": MODEL,
        "examples/a/train.py": """
            import jax
            import flax.linen as nn
            from model import MLP

            def train_and_evaluate(config):
                rules = (("batch", "data"), ("mlp", "model"))
                with jax.set_mesh(jax.make_mesh((8,), ("data",))), nn.logical_axis_rules(rules):
                    return MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))
        """,
        "examples/b/model.py": MODEL,
        "examples/b/train.py": """
            import jax
            from model import MLP

            def train_and_evaluate(config):
                with jax.set_mesh(jax.make_mesh((8,), ("data",))):
                    return MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))  # expect: SHL102
        """,
    }, "one-example-s-rules-do-not-hide-the-other-s-missing-ones"),
]


@pytest.mark.parametrize("code,ex", CASES)
def test_case(tmp_path, code, ex):
    found = {f for f in run_example(tmp_path, ex, code) if f[2] == code}
    expected = {e for e in expected_markers(ex.files) if e[2] == code}
    assert found == expected


# ---- SHL101: severity by what runs under the `with`, fix safety -----------------------------------
def _lint(tmp_path, files: dict[str, str], code: str):
    from helpers import lint_files

    files = {k: textwrap.dedent(v).lstrip("\n") for k, v in files.items()}
    return [f for f in lint_files(tmp_path, files, select=(code,)) if f.code == code]


def test_shl101_is_an_error_only_where_a_linen_constraint_runs_under_it(tmp_path):
    [constrained, plain] = _lint(tmp_path, {"model.py": MODEL, "train.py": """
        import jax
        from model import MLP

        mesh = jax.make_mesh((8,), ("data",))
        with mesh:
            MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))
        with mesh:
            y = jax.numpy.ones(4) * 2
    """}, "SHL101")
    assert constrained.severity == "error" and "`MLP` runs under it" in constrained.message
    assert plain.severity == "warning" and "deprecated since jax 0.10.1" in plain.message
    # The fix makes the constraints apply: where values live changes, so it is unsafe; for the
    # deprecation alone it is safe (tests/test_safe_fixes_run.py runs both programs).
    assert constrained.fix is not None and constrained.fix.applicability == "unsafe"
    assert plain.fix is not None and plain.fix.applicability == "safe"


@pytest.mark.parametrize("compiled,name,api", [
    ("@functools.partial(jax.jit, static_argnums=(0,))\n    def step(self, params, x):",
     "step", "jax.jit"),
    ("@jax.jit\n    def step(self, params, x):", "step", "jax.jit"),
    # (named in a jit call, and the `with` in a function nested in the compiled one)
    ("def step(self, params, x):\n        def inner():", "step", "jax.jit"),
    # (bound by a functools.partial the jit compiles)
    ("def run(self, params, x):", "run", "jax.jit"),
])
def test_shl101_inside_a_jitted_function_sets_the_mesh_around_its_calls(tmp_path, compiled,
                                                                         name, api):
    """`jax.set_mesh` raises inside a trace (`set_mesh can only be used outside of jax.jit`, in
    every jax that has it): a `with mesh:` in a function a jit compiles is moved out, around the
    function's calls, and no fix puts `jax.set_mesh` in its place. The same `with` in a method
    no jit compiles keeps its fix (the look-alike)."""
    nested = "def inner" in compiled
    jitted = {"step": "jax.jit(self.step)", "run": "jax.jit(functools.partial(self.run, 1))"}
    body = ("            with self.mesh:\n                return MLP().apply(params, x)\n"
            "        return inner()\n" if nested else
            "        with self.mesh:\n            return MLP().apply(params, x)\n")
    files = {"model.py": MODEL, "serve.py": f"""
import functools
import jax
from model import MLP


class Engine:
    def __init__(self):
        self.mesh = jax.make_mesh((8,), ("data",))
        {"self.jitted = " + jitted[name] if nested or name == "run" else "pass"}

    {compiled}
{body}
    def eager(self, params, x):
        with self.mesh:
            return MLP().apply(params, x)
"""}
    found = _lint(tmp_path, files, "SHL101")
    assert len(found) == 2, [f.message for f in found]
    traced, eager = found
    assert traced.severity == "error" and traced.fix is None
    assert (f"enter `jax.set_mesh(self.mesh)` around the calls of `{name}`, outside the trace "
            f"(`{name}` is compiled by the `{api}` of line") in traced.message, traced.message
    assert "`jax.set_mesh` raises inside a trace) and leave `self.mesh` out of this `with`" \
        in traced.message
    assert "use `with jax.set_mesh(self.mesh):`" in eager.message
    assert eager.fix is not None and eager.fix.applicability == "unsafe"


@pytest.mark.parametrize("jit", [
    "jax.jit(steps.train_step)", "jax.jit(train_step, donate_argnums=0)",
    "jax.jit(functools.partial(train_step, rules=None))", "pjit(train_step)"])
def test_shl101_in_a_function_another_module_jits_sets_the_mesh_around_its_calls(tmp_path,
                                                                                 jit):
    """The jit is in another module (by the module's attribute, an imported name, through a
    `functools.partial`): the function still runs traced, so no `jax.set_mesh` in its place.
    The look-alike: a function of the same module that nothing jits keeps the fix."""
    files = {"model.py": MODEL, "steps.py": """
        import jax
        from model import MLP

        def train_step(params, x, rules=None):
            mesh = jax.make_mesh((8,), ("data",))
            with mesh:
                return MLP().apply(params, x)

        def evaluate(params, x):
            mesh = jax.make_mesh((8,), ("data",))
            with mesh:
                return MLP().apply(params, x)
    """, "train.py": f"""
        import functools
        import jax
        from jax.experimental.pjit import pjit
        import steps
        from steps import train_step

        def main(params, x):
            step = {jit}
            return step(params, x)
    """}
    traced, eager = _lint(tmp_path, files, "SHL101")
    api = "pjit" if jit.startswith("pjit") else "jax.jit"
    assert traced.fix is None and (
        f"around the calls of `train_step`, outside the trace (`train_step` is compiled by the "
        f"`{api}` of line 8 of `train`, and `jax.set_mesh` raises inside a trace)"
    ) in traced.message, traced.message
    assert eager.fix is not None and "use `with jax.set_mesh(mesh):`" in eager.message


@pytest.mark.parametrize("base,forward", [
    ("nn.Module", "@nn.compact\n    def __call__(self, x):"),
    ("nn.Module", "@nn.compact\n    def encode(self, x):"),
    ("nnx.Module", "def __call__(self, x):"),
])
def test_shl101_in_a_flax_modules_forward_pass_sets_the_mesh_where_the_model_runs(
        tmp_path, base, forward):
    """A model's forward pass runs wherever the model is initialised or applied, under a jit as
    a rule, where `jax.set_mesh` raises: the mesh is set where the model runs, and no fix. Any
    other method of the module (a loader) keeps the advice and the fix (the look-alike)."""
    name = forward.rpartition("def ")[2].partition("(")[0]
    [fwd, other, plain] = _lint(tmp_path, {"model.py": f"""
import flax.linen as nn
from flax import nnx
import jax


class Block({base}):
    mesh: jax.sharding.Mesh = None

    {forward}
        with self.mesh:
            return x * 2

    def load(self, path):
        with self.mesh:
            return jax.numpy.load(path)


class Runner:  # (not a Flax module: its `__call__` is no forward pass)
    mesh: jax.sharding.Mesh = None

    def __call__(self, x):
        with self.mesh:
            return x * 2
"""}, "SHL101")
    assert fwd.fix is None and fwd.severity == "warning", fwd.message
    assert fwd.message.endswith(
        f"enter `jax.set_mesh(self.mesh)` where the model is initialised, applied or called, "
        f"outside the trace (`Block.{name}` is part of a Flax module's forward pass, which runs "
        f"traced wherever the model runs under a jit, and `jax.set_mesh` raises inside a trace) "
        f"and leave `self.mesh` out of this `with`"), fwd.message
    for kept in (other, plain):
        assert kept.message.endswith("use `with jax.set_mesh(self.mesh):`") and kept.fix is not None


def test_shl101_inside_a_jitted_function_deprecation_only_is_a_warning_without_a_fix(tmp_path):
    [f] = _lint(tmp_path, {"serve.py": """
        import jax
        mesh = jax.make_mesh((8,), ("data",))

        @jax.jit
        def step(x):
            with mesh:
                return x * 2
    """}, "SHL101")
    assert f.severity == "warning" and f.fix is None
    assert "deprecated since jax 0.10.1" in f.message
    assert f.message.endswith("enter `jax.set_mesh(mesh)` around the calls of `step`, outside "
                              "the trace (`step` is compiled by the `jax.jit` of line 4, and "
                              "`jax.set_mesh` raises inside a trace) and leave `mesh` out of "
                              "this `with`"), f.message


def test_shl101_in_test_code_is_a_warning_even_where_a_linen_constraint_runs_under_it(tmp_path):
    """A test runs toy sizes and checks values, which are the same unsharded: the dropped
    constraints are reported, but nothing there certainly goes wrong."""
    run = """
        import jax
        from model import MLP

        def test_init():
            mesh = jax.make_mesh((8,), ("data",))
            with mesh:
                MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))
    """
    found = _lint(tmp_path, {"model.py": MODEL, "model_test.py": run, "tests/test_mlp.py": run,
                             "check_model.py": run}, "SHL101")
    by_file = {PurePath(f.path).name: f.severity for f in found}
    assert by_file == {"model_test.py": "warning", "test_mlp.py": "warning",
                       "check_model.py": "error"}
    assert all("`MLP` runs under it" in f.message for f in found)


def _lint_at(tmp_path, files: dict[str, str], code: str, **versions: str):
    from helpers import lint_files

    files = {k: textwrap.dedent(v).lstrip("\n") for k, v in files.items()}
    return [f for f in lint_files(tmp_path, files, select=(code,), versions=versions)
            if f.code == code]


TRAIN_UNDER_MESH = {"model.py": MODEL, "train.py": """
    import jax
    from model import MLP

    mesh = jax.make_mesh((8,), ("data",))
    with mesh:
        MLP().init(jax.random.key(0), jax.numpy.ones((8, 4)))
"""}


def test_shl101_is_a_warning_where_the_pins_also_allow_a_flax_that_honours_the_with(tmp_path):
    """flax < 0.12.2 still activates its constraints under `with mesh:`: the no-op is certain
    only where every flax the project can run drops them. And the values may still be sharded
    by other means, so the message says only that the constraints' shardings are not applied."""
    [certain] = _lint_at(tmp_path / "a", TRAIN_UNDER_MESH, "SHL101", jax="0.12.0.1",
                         flax="0.12.12")
    [maybe] = _lint_at(tmp_path / "b", TRAIN_UNDER_MESH, "SHL101", jax="0.8.1..0.12.0.1",
                       flax="0.12.0..0.12.12")
    assert certain.severity == "error" and "since flax 0.12.2" in certain.message
    assert maybe.severity == "warning"
    assert "on flax >= 0.12.2, which the project's pins allow (and also flax 0.12.0" \
        in maybe.message
    for f in (certain, maybe):
        assert "the shardings they name are not applied" in f.message
        assert "stay unsharded" not in f.message


def test_shl101_under_old_jax_pins_says_where_set_mesh_exists_when_flax_drops_constraints(
        tmp_path):
    """Pins that allow jax 0.4.20 cannot use `jax.set_mesh` everywhere; but a flax that drops
    the constraints needs a jax that has it, so the advice is not "keep it" but "add it where
    it exists"."""
    [f] = _lint_at(tmp_path, TRAIN_UNDER_MESH, "SHL101", jax="0.4.20..0.12.0.1",
                   flax="0.7.0..0.12.12")
    assert f.severity == "warning" and f.fix is None
    assert "keep it until" not in f.message
    assert "flax 0.12.2 needs jax >= 0.8.1" in f.message
    assert '(`hasattr(jax, "set_mesh")`) enter `jax.set_mesh(mesh)` as well' in f.message


_READER = """
    from jax.interpreters import pxla

    def current_mesh():
        return pxla.thread_resources.env.physical_mesh

    def shard(x):
        return current_mesh(), x

    class Model:
        def __init__(self, n):
            self.n = n

        def __call__(self, x):
            return shard(x)
"""


@pytest.mark.parametrize("body,says", [
    # a call under the `with` reaches the reader: both are named
    ("from helpers import shard\nwith mesh:\n    shard(1)",
     "but `shard` runs under it and reaches `helpers.current_mesh`, which reads the legacy "
     "resource environment (`pxla.thread_resources`)"),
    # building an object runs its `__init__`, not the `__call__` that reaches the reader;
    # shardlint does not follow every call, so the project's readers stand in the way
    ("from helpers import Model\nwith mesh:\n    m = Model(2)",
     "but the project reads the legacy resource environment (`pxla.thread_resources`) in "
     "`helpers`"),
    ("from eformer import escale as es\nwith mesh:\n    es.get_corrected_named_sharding((8,), None)",
     "but the project reads the legacy resource environment (`pxla.thread_resources`) in "
     "`helpers`"),
])
def test_shl101_gives_no_fix_when_the_project_reads_the_legacy_environment(tmp_path, body, says):
    [f] = _lint(tmp_path, {"train.py": "import jax\nmesh = jax.make_mesh((8,), (\"data\",))\n"
                           + body + "\n", "helpers.py": _READER}, "SHL101")
    assert f.fix is None and f.severity == "warning"
    assert says in f.message and "migrate that first" in f.message, f.message


_ALIASED_READER = """
    import jax
    from jax.interpreters import pxla

    _RESOURCES = pxla.thread_resources


    def current_mesh():
        mesh = _RESOURCES.env.physical_mesh
        {fallback}
        return mesh


    def shard(x):
        return current_mesh(), x
"""


@pytest.mark.parametrize("fallback,blocks", [
    ("", True),
    # TransformerEngine's `_get_mesh`: the legacy mesh if one is entered, else the one
    # `jax.set_mesh` sets -- it keeps working once `with mesh:` is replaced
    ("if mesh.empty:\n            mesh = jax.sharding.get_abstract_mesh()", False),
    ("if mesh.empty:\n            mesh = jax.sharding.get_mesh()", False),
    # a project function named `get_mesh` is not jax's
    ("if mesh.empty:\n            mesh = get_mesh()", True),
])
def test_shl101_a_legacy_reader_through_a_module_level_alias_and_one_that_falls_back(
        tmp_path, fallback, blocks):
    reader = _ALIASED_READER.replace("{fallback}", fallback)
    if "= get_mesh()" in fallback:
        reader += "\n\n    def get_mesh():\n        return None\n"
    [f] = _lint(tmp_path, {"train.py": "import jax\nfrom helpers import shard\n"
                           "mesh = jax.make_mesh((8,), (\"data\",))\nwith mesh:\n    shard(1)\n",
                           "helpers.py": reader}, "SHL101")
    assert ("migrate that first" in f.message) == blocks, f.message
    if blocks:  # (the read is the function's, through the alias: named as such)
        assert "reaches `helpers.current_mesh`, which reads the legacy" in f.message, f.message
    else:
        assert f.message.endswith("use `with jax.set_mesh(mesh):`"), f.message


@pytest.mark.parametrize("jax,severity", [("0.4.30..0.12.0.1", "info"), (None, "warning")])
def test_shl101_keep_it_advice_is_an_info_even_where_something_reads_the_legacy_mesh(
        tmp_path, jax, severity):
    """Pins that allow a jax without `jax.set_mesh`: the advice is to keep the `with` for now,
    nothing to do today -- what reads the legacy environment is said for the day the pins move,
    and does not make it a warning (it did: the same message was an info beside it)."""
    files = {"train.py": "import jax\nfrom helpers import shard\n"
             "mesh = jax.make_mesh((8,), (\"data\",))\nwith mesh:\n    shard(1)\n",
             "helpers.py": _READER}
    [f] = _lint_at(tmp_path, files, "SHL101", **({"jax": jax} if jax else {}))
    assert f.severity == severity, f.message
    if jax:
        assert "keep it until they require jax >= 0.7.1 (then migrate first what needs the " \
            "legacy resource environment, which `jax.set_mesh` does not set: `shard` runs under " \
            "it and reaches `helpers.current_mesh`" in f.message, f.message
    else:
        assert "migrate that first" in f.message, f.message


_PJIT = """
    from jax.experimental.pjit import pjit

    def compile_step(step, specs):
        return pjit(step, in_shardings=specs, out_shardings=None)

    def compile_replicated(step):
        return pjit(step, in_shardings=None, out_shardings=None)
"""


@pytest.mark.parametrize("call,says", [
    # the pjit's shardings are a parameter: bare specs would read the legacy mesh
    ("compile_step(f, specs)",
     "use `with jax.set_mesh(mesh):` once nothing under it needs the legacy resource "
     "environment, which `jax.set_mesh` does not set: `compile_step` runs under it and reaches "
     "`steps.compile_step`, which calls a `pjit` given shardings shardlint cannot read"),
    # None shardings read no mesh: nothing to wait for
    ("compile_replicated(f)", "use `with jax.set_mesh(mesh):`"),
])
def test_shl101_advice_waits_for_a_pjit_whose_shardings_are_not_known(tmp_path, call, says):
    [f] = _lint(tmp_path, {"train.py": "import jax\nfrom steps import compile_step, "
                           "compile_replicated\nmesh = jax.make_mesh((8,), (\"data\",))\n"
                           "def f(x):\n    return x\nspecs = None\nwith mesh:\n    " + call + "\n",
                           "steps.py": _PJIT}, "SHL101")
    assert f.message.endswith(says) or says + " " in f.message or says in f.message, f.message
    assert ("once nothing" in f.message) == ("compile_step" in call)
    # (a project module calling pjit runs under it either way: the fix is unsafe)
    assert f.fix is not None and f.fix.applicability == "unsafe"


def test_shl101_follows_overrides_constructors_and_inherited_methods_to_a_pjit(tmp_path):
    """saxml's shape: a base class's `self.init_method` runs as a subclass's override, which
    builds a method object whose `__init__` calls `super().__init__`, whose `self.load()` is
    inherited, and compiles a pjit whose shardings are a parameter."""
    files = {
        "methods.py": """
            from jax.experimental.pjit import pjit

            class Method:
                def load(self):
                    self.fn = self._compile(self.specs)

                def _compile(self, specs):
                    return pjit(lambda x: x, in_shardings=specs, out_shardings=None)

            class PaxMethod(Method):
                def __init__(self, specs):
                    self.specs = specs
                    self.load()
        """,
        "server.py": """
            import jax

            class Server:
                def init_method(self, specs):
                    raise NotImplementedError

                def load_methods(self, specs):
                    mesh = jax.make_mesh((8,), ("data",))
                    with mesh:
                        self.init_method(specs)
        """,
        "lm.py": """
            import jax
            from methods import PaxMethod
            from server import Server

            class ScoreMethod(PaxMethod):
                def __init__(self, specs):
                    super().__init__(specs)

            class LMServer(Server):
                def init_method(self, specs):
                    return ScoreMethod(specs)
        """,
    }
    [f] = _lint(tmp_path, files, "SHL101")
    assert "`self.init_method` runs under it and reaches `methods.Method._compile`, which calls a " \
           "`pjit` given shardings shardlint cannot read" in f.message, f.message
    assert f.fix is not None and f.fix.applicability == "unsafe"


def test_shl101_next_to_set_mesh_is_a_warning_without_a_fix(tmp_path):
    [f] = _lint(tmp_path, {"train.py": """
        import jax
        mesh = jax.make_mesh((8,), ("data",))
        with jax.set_mesh(mesh), mesh:
            pass
    """}, "SHL101")
    assert f.severity == "warning" and f.fix is None
    assert "legacy resource environment" in f.message


_SHAPED = """
    import flax.linen as nn
    from flax import nnx

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.w = nnx.Param(nnx.initializers.lecun_normal()(rngs.params(), (4, 4)),
                               sharding=("embed", "mlp"))

    def abstract_model():
        return nnx.eval_shape(lambda: Block(nnx.Rngs(0)))
"""


@pytest.mark.parametrize("body,caveat", [
    # nnx.eval_shape under it, directly or through project code in another module
    ("with mesh:\n    m = nnx.eval_shape(lambda: Block(nnx.Rngs(0)))", "`nnx.eval_shape` runs under it"),
    ("with mesh:\n    m = abstract_model()",
     "`abstract_model` runs under it and reaches `shapes.abstract_model`, which calls it"),
    # the rules the models' names need entered with it, or inside it: they must map them all
    ("with mesh, nn.logical_axis_rules(RULES):\n    m = abstract_model()", "rules"),
    ("with mesh:\n    with nn.logical_axis_rules(RULES):\n        m = abstract_model()", "rules"),
])
def test_shl101_where_a_model_is_built_with_eval_shape_set_mesh_needs_the_rules(
        tmp_path, body, caveat):
    """Under `jax.set_mesh`, `nnx.eval_shape` places a model's parameters by their logical axis
    names and raises where no rules map them to the mesh's axes (`Resource axis ... not found in
    mesh`; the legacy `with` leaves the names alone, with `flax_always_shard_variable` off as
    maxtext and maxdiffusion set it): the advice says to enter the rules too, and the fix is
    unsafe."""
    [f] = _lint(tmp_path, {"shapes.py": _SHAPED, "train.py": (
        "import jax\nimport flax.linen as nn\nfrom flax import nnx\n"
        "from shapes import Block, abstract_model\n"
        "RULES = ((\"embed\", \"data\"), (\"mlp\", None))\n"
        "mesh = jax.make_mesh((8,), (\"data\",))\n" + body + "\n")}, "SHL101")
    if caveat == "rules":  # (whether the rules map every name is not known: the fix is unsafe)
        assert ("use `with jax.set_mesh(mesh):`, provided the logical axis rules entered with "
                "it map every logical axis name that the parameters of a model built under it "
                "with `nnx.eval_shape` carry (`abstract_model` runs under it and reaches "
                "`shapes.abstract_model`, which calls it): under `jax.set_mesh`, "
                "`nnx.eval_shape` (flax >= 0.12.6) places parameters by those names and raises "
                "for a name no rule maps") in f.message, f.message
        assert f.fix is not None and f.fix.applicability == "unsafe"
        return
    assert ("use `with jax.set_mesh(mesh):`, and where a model is built under it with "
            f"`nnx.eval_shape` ({caveat}), enter logical axis rules that map its parameters' "
            "names as well (`nn.logical_axis_rules(rules)`)") in f.message, f.message
    assert f.fix is not None and f.fix.applicability == "unsafe"


def test_shl101_a_function_beside_one_that_calls_eval_shape_gets_no_proviso(tmp_path):
    """A call under the `with` reaches a module that calls `nnx.eval_shape`, but not the
    function that does (maxtext's `create_model`, beside `create_nnx_abstract_model`): the
    message has no proviso about it; the fix stays unsafe (what the call reaches is not all
    followed)."""
    shapes = _SHAPED + "\n    def concrete_model():\n        return Block(nnx.Rngs(0))\n"
    [f] = _lint(tmp_path, {"shapes.py": shapes, "train.py": (
        "import jax\nimport flax.linen as nn\nfrom shapes import concrete_model\n"
        "RULES = ((\"embed\", \"data\"), (\"mlp\", None))\n"
        "mesh = jax.make_mesh((8,), (\"data\",))\n"
        "with mesh, nn.logical_axis_rules(RULES):\n    m = concrete_model()\n")}, "SHL101")
    assert "eval_shape" not in f.message, f.message
    assert f.fix is not None and f.fix.applicability == "unsafe"


def test_shl101_eval_shape_needs_the_rules_under_set_mesh_only_from_flax_0_12_6(tmp_path):
    """flax 0.12.5 builds the same model under `jax.set_mesh` (run with jax 0.8.1): a project
    that runs only older flax keeps the plain advice and the safe fix."""
    files = {"shapes.py": _SHAPED, "train.py": (
        "import jax\nfrom shapes import abstract_model\nmesh = jax.make_mesh((8,), (\"data\",))\n"
        "with mesh:\n    m = abstract_model()\n")}
    [old] = _lint_at(tmp_path / "old", files, "SHL101", jax="0.12.0.1", flax="0.12.5")
    [new] = _lint_at(tmp_path / "new", files, "SHL101", jax="0.12.0.1", flax="0.12.6")
    assert old.message.endswith("use `with jax.set_mesh(mesh):`") and old.fix.applicability == "safe"
    assert "(flax >= 0.12.6) places parameters by their logical axis names" in new.message
    assert new.fix.applicability == "unsafe"


def test_shl101_fix_is_unsafe_when_a_library_runs_under_the_with(tmp_path):
    [f] = _lint(tmp_path, {"train.py": """
        import jax
        from eformer import escale as es
        mesh = jax.make_mesh((8,), ("data",))
        with mesh:
            sharding = es.get_corrected_named_sharding((8, 4), None)
    """}, "SHL101")
    assert f.fix is not None and f.fix.applicability == "unsafe"


def test_a_long_rebinding_chain_keeps_summaries_small():
    """``x = layer_i(x)`` rebinding chains (a decoder's forward pass) once made the kinds of the
    arguments a call passes exponential in the chain's length: each ``x`` re-read every binding
    of ``x``. A name already being read on the way adds nothing, so the summary stays small and
    still says what the last call passes."""
    import ast
    import json

    from shardlint.semantics.flow.summary import summarise
    from shardlint.semantics.file.visitor import build_facts
    from shardlint.semantics.file.wrappers import Wrappers

    layers = "".join(f"def layer{i}(x):\n    return x\n\n\n" for i in range(6))
    chain = "".join(f"    x = layer{i}(x)\n" for i in range(6))
    src = f"import jax\n\n\n{layers}def use(x):\n    return x\n\n\ndef run(x):\n{chain}" \
          "    return use(x)\n"
    facts = build_facts("m.py", "m", ast.parse(src), False, Wrappers())
    text = json.dumps(summarise(facts).to_json())
    assert len(text) < 20_000, len(text)
    assert '"m:layer5"' in text  # (what `use` is passed: what `layer5` returns)


def test_contexts_reach_the_end_of_a_long_call_chain_whatever_the_order_of_definition():
    """The contexts a function runs under come down every caller, however long the chain and in
    whichever order its functions are defined (the fixed point used to stop after 50 rounds: a
    chain defined callee first narrowed one link per round, and its far end kept "every
    context"). What each function needs goes up the same chain."""
    import ast

    from shardlint.semantics.file.facts import ALL, MESH, MESH_SET
    from shardlint.semantics.flow.project import ProjectIndex
    from shardlint.semantics.flow.summary import summarise
    from shardlint.semantics.file.visitor import build_facts
    from shardlint.semantics.file.wrappers import Wrappers

    depth = 120
    defs = "".join(f"def f{i}(x):\n    return f{i + 1}(x)\n\n\n" for i in reversed(range(depth)))
    src = ("import jax\nimport flax.linen as nn\n\n\n"
           f"def f{depth}(x):\n    return nn.with_logical_constraint(x, ('batch',))\n\n\n"
           f"{defs}")

    def context(entry: str) -> int | None:
        index = ProjectIndex()
        index.add(summarise(build_facts("m.py", "m", ast.parse(src + entry), False, Wrappers())))
        assert index.needs("m:f0") == index.needs(f"m:f{depth}") != 0
        return index.context_of("m", f"f{depth}")

    assert context("f0(None)\n") == 0  # (run at import, under no context)
    # (a mesh jax reads: `MESH_SET` beside `MESH`, which a legacy `with mesh:` gives alone)
    assert context("with jax.set_mesh(jax.make_mesh((1,), ('data',))):\n    f0(None)\n") \
        == MESH | MESH_SET
    assert context("with jax.make_mesh((1,), ('data',)):\n    f0(None)\n") == MESH
    assert context("def main(x):\n    return f0(x)\n") == ALL  # (an entry: any context)


def test_a_re_export_changed_in_place_resolves_to_its_new_source():
    """A package's ``__init__`` that re-exports a name from another module, edited to take it
    from a third (the editor's unsaved text: same symbols, other imports): references through
    the package follow the edit, not what was resolved before it."""
    import ast

    from shardlint.semantics.flow.project import ProjectIndex
    from shardlint.semantics.flow.summary import summarise
    from shardlint.semantics.file.visitor import build_facts
    from shardlint.semantics.file.wrappers import Wrappers

    def summary(module: str, src: str, package: bool = False):
        return summarise(build_facts(f"{module}.py", module, ast.parse(src), package, Wrappers()))

    index = ProjectIndex()
    for name in ("a", "b"):
        index.add(summary(f"pkg.{name}", "import jax\n\n\ndef step(x):\n    return x\n"))
    index.add(summary("pkg", "import jax\nfrom pkg.a import step\n", package=True))
    assert index.resolve("ext:pkg.step") == "pkg.a:step"
    index.add(summary("pkg", "import jax\nfrom pkg.b import step\n", package=True))
    assert index.resolve("ext:pkg.step") == "pkg.b:step"


def test_a_call_through_a_wrapper_defined_in_a_later_module_reaches_what_it_wraps():
    """``step = jax.jit(train_step)`` in one module, called from a module that comes before it
    in the index: the call runs ``train_step`` under the caller's context. (The wrappers were
    collected module by module as the call edges were, so one defined in a later module was not
    seen through, and what it wraps kept an unknown context.)"""
    import ast

    from shardlint.semantics.file.facts import MESH, MESH_SET
    from shardlint.semantics.flow.project import ProjectIndex
    from shardlint.semantics.flow.summary import summarise
    from shardlint.semantics.file.visitor import build_facts
    from shardlint.semantics.file.wrappers import Wrappers

    caller = ("import jax\nfrom b_model import step\n\n"
              "with jax.set_mesh(jax.make_mesh((1,), ('data',))):\n    step(None)\n")
    model = ("import jax\nimport flax.linen as nn\n\n\n"
             "def train_step(x):\n    return nn.with_logical_constraint(x, ('batch',))\n\n\n"
             "step = jax.jit(train_step)\n")

    def summary(module: str, src: str):
        return summarise(build_facts(f"{module}.py", module, ast.parse(src), False, Wrappers()))

    for order in (("a_main", "b_model"), ("b_model", "a_main")):
        index = ProjectIndex()
        for module in order:
            index.add(summary(module, caller if module == "a_main" else model))
        assert index.context_of("b_model", "train_step") == MESH | MESH_SET, order


@pytest.mark.parametrize("call, expected", [
    # what a call hands a project function: each argument that may be a mesh, by position or
    # keyword, and how many arguments there are (99: not known)
    ("helper(mesh, cfg=mesh)", {"0": [["p", "mesh"]], "cfg": [["p", "mesh"]], "#n": 1}),
    ("helper(1, mesh)", {"1": [["p", "mesh"]], "#n": 2}),
    # after `*rest` the positions are not known, and neither is anything after it
    ("helper(mesh, *rest, cfg=mesh)", {"0": [["p", "mesh"]], "#n": 99}),
    ("helper(*rest, mesh)", None),
    # `**kw` may pass anything: the count is not known, the arguments written still count
    ("helper(mesh, **kw)", {"0": [["p", "mesh"]], "#n": 99}),
    ("helper(cfg=mesh, **kw)", {"cfg": [["p", "mesh"]], "#n": 99}),
    # a call that passes nothing worth a kind still says how many it passes (the defaults it
    # leaves in use), and None is kept: `rules=None` hands on the callee's default table
    ("helper(1, 'a', None)", {"2": [["none"]], "#n": 3}),
    ("helper(1, axes=('a', 'b'))", {"#n": 1, "#kw": ["axes"]}),
    ("super().helper(1)", {"#n": 1, "self": [["implicit"]]}),
    # the other keywords it passes are named (a default it leaves unused)
    ("helper(mesh, axes=('a', 'b'))", {"0": [["p", "mesh"]], "#n": 1, "#kw": ["axes"]}),
    ("self.helper(mesh)", {"0": [["p", "mesh"]], "#n": 1, "self": [["implicit"]]}),
])
def test_a_call_edge_keeps_what_each_argument_may_be(call, expected):
    import ast

    from shardlint.semantics.flow.summary import summarise
    from shardlint.semantics.file.visitor import build_facts
    from shardlint.semantics.file.wrappers import Wrappers

    src = ("from pkg.lib import helper\n\n\n"
           "class Model:\n"
           f"    def run(self, mesh, rest, kw):\n        {call}\n")
    summary = summarise(build_facts("m.py", "m", ast.parse(src), False, Wrappers()))
    (edge,) = [e for e in summary.calls if e.caller == "Model.run"]
    assert edge.args == expected


NNX_BLOCK = """
    import flax.linen as nn
    from flax import nnx

    class Block(nnx.Module):
        def __init__(self, dim, *, rngs):
            self.proj = nnx.Linear(dim, dim, rngs=rngs)

        def __call__(self, x):
            return nn.with_logical_constraint(self.proj(x), ("batch", "embed"))
"""


# Where a model handed in is applied (`model.apply` of a parameter), how the model gets there,
# and where what applies it runs under the `with`.
HANDED_MODEL = """
    import functools
    import flax.linen as nn
    import jax

    class {cls}(nn.Module):
        @classmethod
        def from_config(cls, cfg):
            return cls(**cfg)

        @nn.compact
        def __call__(self, x):
            return {body}

    def body(i, carry, model):
        params, x = carry
        return params, model.apply(params, x)

    def run(params, x, model, mesh, rules):
        with mesh, nn.logical_axis_rules(rules):
            {under}
"""


@pytest.mark.parametrize("hand,under", [
    # a partial's keyword, the partial handed to lax control flow
    ("functools.partial(run, model=model, mesh=mesh, rules=rules)",
     "return jax.lax.fori_loop(0, 4, functools.partial(body, model=model), (params, x))"),
    # by position, the partial bound to a local first
    ("functools.partial(run, model=model, mesh=mesh, rules=rules)",
     "loop = functools.partial(body, 0, model=model)\n            return loop((params, x))"),
    # called directly, by position; `run` called through a jit of a partial
    ("jax.jit(functools.partial(run, model=model, mesh=mesh, rules=rules))",
     "return body(0, (params, x), model)"),
])
@pytest.mark.parametrize("made", ["Model()", "Model.from_config({})"])
def test_shl101_is_an_error_where_a_model_handed_in_runs_under_it(tmp_path, hand, under,
                                                                  made):
    """A model reaches the function that applies it as an argument (a call's, a
    `functools.partial`'s keyword or position, through a function it is handed to), built by
    its class or by a classmethod that returns `cls(...)`: its Linen constraints run under the
    `with` and are no-ops -- the error, naming the model and where it is applied."""
    files = {"model.py": HANDED_MODEL.format(
        cls="Model", body='nn.with_logical_constraint(x, ("batch", "embed"))', under=under),
        "main.py": f"""
        import functools
        import jax
        from model import Model, run

        def main(params, x, rules):
            mesh = jax.make_mesh((8,), ("data",))
            model = {made}
            step = {hand}
            return step(params, x)
    """}
    [found] = _lint(tmp_path, files, "SHL101")
    assert found.severity == "error", found.message
    assert "and `Model`, applied in `body` (handed in as `model`), runs under it" \
        in found.message


def test_shl101_a_model_handed_in_without_constraints_is_only_deprecated(tmp_path):
    """Look-alikes: the model handed in applies no constraint; a function handed two models,
    one of them unconstrained (which one this call runs is not known): the deprecation only."""
    plain = HANDED_MODEL.format(cls="Plain", body="x * 2",
                                under="return body(0, (params, x), model)")
    files = {"model.py": plain, "main.py": """
        import jax
        from model import Plain, run

        def main(params, x, rules):
            mesh = jax.make_mesh((8,), ("data",))
            return run(params, x, Plain(), mesh, rules)
    """}
    [found] = _lint(tmp_path, files, "SHL101")
    assert found.severity == "warning" and "is deprecated since" in found.message, found.message
    files = {"model.py": plain + """
    class Constrained(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.with_logical_constraint(x, ("batch", "embed"))
""", "main.py": """
        import jax
        from model import Constrained, Plain, run

        def main(params, x, rules):
            mesh = jax.make_mesh((8,), ("data",))
            run(params, x, Plain(), mesh, rules)
            return run(params, x, Constrained(), mesh, rules)
    """}
    [found] = _lint(tmp_path, files, "SHL101")
    assert found.severity == "warning" and "is deprecated since" in found.message, found.message


@pytest.mark.parametrize("under,error", [
    ("return jax.lax.fori_loop(0, 4, body, (params, x))", "`body` (handed to `jax.lax.fori_loop`)"),
    ("return lax.scan(functools.partial(body, 0), (params, x), None)",
     "`functools.partial(body, 0)` (handed to `lax.scan`)"),
    ("return jax.jit(step)(params, x)", "`step` (handed to `jax.jit`)"),
    # the look-alike: a jit made under the `with` and called after it traces there
    ("fn = jax.jit(step)\nreturn fn", None),
])
def test_shl101_a_function_handed_to_a_call_that_runs_it_runs_under_the_with(tmp_path, under,
                                                                             error):
    """A function handed to what runs it there (lax control flow, a jit called in place) runs
    under the `with`: its Linen constraints are no-ops, the error. A jit only made there runs
    where it is called: the deprecation alone."""
    [found] = _lint(tmp_path, {"model.py": MODEL, "train.py": f"""
import functools
import jax
from jax import lax
from model import MLP


def body(i, carry):
    params, x = carry
    return params, MLP().apply(params, x)


def step(params, x):
    return MLP().apply(params, x)


def run(params, x):
    mesh = jax.make_mesh((8,), ("data",))
    with mesh:
        {under.replace(chr(10), chr(10) + "        ")}
"""}, "SHL101")
    if error is None:
        assert found.severity == "warning" and "is deprecated since" in found.message
    else:
        assert found.severity == "error" and f"and {error} runs under it" in found.message, \
            found.message


def test_a_model_handed_in_is_applied_where_the_function_runs(tmp_path):
    """`model.apply` of a parameter: under a legacy `with` in the same function, the error
    (SHL101); called with a mesh and no rules, SHL102 names the model and the parameter."""
    files = {"model.py": MODEL, "train.py": """
        import jax
        import flax.linen as nn
        from model import MLP

        def run(model, params, x, rules):
            mesh = jax.make_mesh((8,), ("data",))
            with mesh, nn.logical_axis_rules(rules):
                return model.apply(params, x)

        def step(model, params, x):
            return model.apply(params, x)

        def main(params, x, rules):
            run(MLP(), params, x, rules)
            with jax.set_mesh(jax.make_mesh((8,), ("data",))):
                return step(MLP(), params, x)

        main(None, None, None)
    """}
    [legacy] = _lint(tmp_path, files, "SHL101")
    assert legacy.severity == "error" and \
        "and `MLP` (handed in as `model`) runs under it" in legacy.message, legacy.message
    files["train.py"] = files["train.py"].replace("run(MLP(), params, x, rules)", "")
    files["train.py"] = files["train.py"].replace(
        "with mesh, nn.logical_axis_rules(rules):", "with jax.set_mesh(mesh):")
    [norules] = _lint(tmp_path, files, "SHL102")
    assert norules.span.line == 11 and norules.message.startswith(
        "this applies `MLP` (handed in as `model`), whose logical constraints run with no "
        "`nn.logical_axis_rules` in context"), norules.message


def test_a_model_handed_in_beside_another_object_with_apply_is_left_alone(tmp_path):
    """The look-alike of SHL102 on a handed model: callers hand `step` a Linen model and an
    object of another class with an `apply` method; which one a call runs is not known."""
    files = {"model.py": MODEL, "train.py": """
        import jax
        from model import MLP

        class Scaler:
            def apply(self, params, x):
                return x * 2

        def step(model, params, x):
            return model.apply(params, x)

        def main(params, x):
            with jax.set_mesh(jax.make_mesh((8,), ("data",))):
                return step(MLP(), params, x), step(Scaler(), params, x)

        main(None, None)
    """}
    assert _lint(tmp_path, files, "SHL102") == []
    files["train.py"] = files["train.py"].replace(", step(Scaler(), params, x)", "")
    [found] = _lint(tmp_path, files, "SHL102")
    assert "this applies `MLP` (handed in as `model`)" in found.message


@pytest.mark.parametrize("model,error", [("MLP()", True), ("Plain()", False)])
def test_a_model_kept_on_self_is_applied_where_the_method_runs(tmp_path, model, error):
    """`self.model.apply` in a method: the classes the class's methods store there (here from
    the constructor's parameter). Applied under the legacy `with`, in place or by a method a
    jit called there compiles, its constraints are no-ops: the error; an unconstrained model
    kept there (the look-alike) leaves the deprecation alone."""
    files = {"model.py": MODEL + PLAIN, "train.py": f"""
        import jax
        import flax.linen as nn
        from model import MLP, Plain

        class Trainer:
            def __init__(self, model, rules):
                self.model = model
                self.rules = rules
                self.mesh = jax.make_mesh((8,), ("data",))

            def step(self, params, x):
                return self.model.apply(params, x)

            def run(self, params, x):
                with self.mesh, nn.logical_axis_rules(self.rules):
                    return jax.jit(self.step)(params, x)

            def run_here(self, params, x):
                with self.mesh, nn.logical_axis_rules(self.rules):
                    return self.model.apply(params, x)

        Trainer({model}, ()).run(None, None)
    """}
    through, here = _lint(tmp_path, files, "SHL101")
    if not error:
        assert through.severity == here.severity == "warning"
        return
    assert through.severity == here.severity == "error"
    assert "and `MLP`, applied in `Trainer.step` (kept in `self.model`), runs under it" \
        in through.message, through.message
    assert "and `MLP` (kept in `self.model`) runs under it" in here.message, here.message


@pytest.mark.parametrize("bind,legacy", [
    ("functools.partial(run, x=1)", True),  # (the mesh is passed by the partial's call)
    ("functools.partial(run, 3)", False),  # (the partial binds the mesh: a number)
    ("functools.partial(run, mesh=3)", False),
])
def test_a_partial_is_a_caller_of_the_parameters_it_binds(tmp_path, bind, legacy):
    """Every caller must pass a mesh for a parameter to be one: a `functools.partial` counts
    as a caller of what it binds, whatever the value (a number here), and not of what it
    leaves to the partial's own calls (here made where shardlint does not see them)."""
    found = _lint(tmp_path, {"train.py": f"""
        import functools
        import jax

        def run(mesh, x):
            with mesh:
                return x * 2

        def main():
            mesh = jax.make_mesh((8,), ("data",))
            return run(mesh, 1), jax.tree.map({bind}, [mesh])
    """}, "SHL101")
    assert bool(found) is legacy, [f.message for f in found]


def test_the_classes_a_parameter_may_be_walk_each_hop_once_per_question(tmp_path, monkeypatch):
    """Callers that hand a model on in a cycle (`a_i` and `b_i` each call both of level i+1,
    and the last calls the first): an answer cut at the cycle is kept for the rest of the
    walk, so each hop is walked once per question -- not once per path (2**levels: a real
    project's evaluation step took minutes). The answer is whole all the same."""
    from helpers import lint_files

    from shardlint.config import Config
    from shardlint.engine import Engine
    from shardlint.semantics.flow import valueflow

    levels = 6  # (deep enough for 2**levels, within the hops an answer may take)
    code = ["import flax.linen as nn", "", "class Net(nn.Module):", "    pass", ""]
    for i in range(levels):
        nxt = (i + 1) % levels
        for name in "ab":
            code += [f"def {name}{i}(model, x):", f"    a{nxt}(model, x)", f"    b{nxt}(model, x)",
                     "    return model.apply({}, x)", ""]
    code += ["def main(x):", "    return a0(Net(), x)", ""]
    lint_files(tmp_path, {"loop.py": "\n".join(code)})
    engine = Engine(Config(root=tmp_path), use_cache=False)
    index = engine.build_index(save=False)
    hops = []
    walk = valueflow.FlowIndex._param_classes
    monkeypatch.setattr(valueflow.FlowIndex, "_param_classes",
                        lambda self, *a: hops.append(a[:2]) or walk(self, *a))
    found = index.applied_models(f"loop:a{levels - 1}")
    assert found == {"loop:Net"}
    assert len(hops) <= 3 * levels, len(hops)


def test_shl101_building_an_nnx_model_does_not_run_its_forward_pass(tmp_path):
    """Under the legacy mesh, building the module (directly, or in a helper through
    nnx.eval_shape) runs `__init__` only: only the deprecation holds. Built and called there,
    its Linen constraint runs and is a no-op: the error."""
    found = _lint(tmp_path, {"block.py": NNX_BLOCK, "train.py": """
        import jax
        from flax import nnx
        from block import Block

        def create_sharded(rngs):
            abstract = nnx.eval_shape(lambda: Block(8, rngs=rngs))
            return nnx.split(abstract)

        def main():
            mesh = jax.make_mesh((8,), ("data",))
            with mesh:
                graphdef, state = create_sharded(nnx.Rngs(0))
            with mesh:
                block = Block(8, rngs=nnx.Rngs(0))
            y = block(jax.numpy.ones((2, 8)))
            with mesh:
                block = Block(8, rngs=nnx.Rngs(0))
                y = block(jax.numpy.ones((2, 8)))
            return y
    """}, "SHL101")
    assert [(f.span.line, f.severity) for f in found] == [(11, "warning"), (13, "warning"),
                                                          (16, "error")]


# ---- SHL104: how to enter a mesh, at every jax the pins allow --------------------------------------
_BARE_PJIT = {"utils.py": """
    import jax
    from jax.experimental.pjit import pjit
    from jax.sharding import Mesh, PartitionSpec as PS

    def make_mesh():
        return Mesh(jax.devices(), ("data",))  # built, never entered

    def put(x, sharding):
        shard = pjit(lambda y: y, in_shardings=PS(), out_shardings=sharding)
        return shard(x)
"""}


def test_shl104_names_the_mesh_context_each_pinned_jax_has(tmp_path):
    """`jax.set_mesh` exists from jax 0.7.1: a project pinned below it is told `with mesh:`, one
    whose pins span both is told both, and only a project on 0.7.1 or newer `jax.set_mesh` alone."""
    old = _lint_at(tmp_path / "old", _BARE_PJIT, "SHL104", jax="0.4.7", flax="0.6.9")
    both = _lint_at(tmp_path / "both", _BARE_PJIT, "SHL104", jax="0.4.7..0.12.0.1",
                    flax="0.6.9..0.12.12")
    new = _lint_at(tmp_path / "new", _BARE_PJIT, "SHL104", jax="0.12.0.1", flax="0.12.12")
    assert old and both and new
    assert all("enter `with mesh:` around it" in f.message and "set_mesh" not in f.message
               for f in old)
    assert all("`with jax.set_mesh(mesh):`, or `with mesh:` on the jax < 0.7.1" in f.message
               and "(jax 0.4.7)" in f.message for f in both)
    assert all("enter `with jax.set_mesh(mesh):` around it" in f.message for f in new)


@pytest.mark.parametrize("jax,advice", [
    # `jax.jit` resolves a bare spec only against the mesh `jax.set_mesh` sets: before 0.7.1
    # nothing but NamedShardings holds (0.4.7's and 0.4.34's `jax.jit` raise under `with mesh:`)
    ("0.4.7", "pass NamedShardings (`jax.set_mesh`, whose mesh it reads, needs jax >= 0.7.1"),
    ("0.4.7..0.12.0.1", "pass NamedShardings (`jax.set_mesh`, whose mesh it reads, needs jax >= "
                        "0.7.1"),
    ("0.12.0.1", "enter `with jax.set_mesh(mesh):` around it or pass NamedShardings"),
])
def test_shl104_a_jax_jit_spec_is_not_told_the_legacy_mesh(tmp_path, jax, advice):
    files = {"utils.py": _BARE_PJIT["utils.py"].replace(
        "    from jax.experimental.pjit import pjit\n", "").replace("pjit(", "jax.jit(")}
    found = _lint_at(tmp_path, files, "SHL104", jax=jax, flax="0.6.9..0.12.12")
    assert found
    for f in found:
        assert advice in f.message, f.message
        assert "`with mesh:`" not in f.message or "does not count" in f.message, f.message
        assert "enter enter" not in f.message and "enter pass" not in f.message, f.message


@pytest.mark.parametrize("jax", ["0.4.30", "0.12.0.1"])
def test_shl104_a_jax_jit_spec_under_a_legacy_mesh_raises_at_every_release(tmp_path, jax):
    """`jax.jit` never resolved a bare spec against the legacy `with mesh:` (0.4.7's and
    0.4.34's sources raise for one; 0.6-0.7 read only the concrete mesh): an error on old pins
    too, where the quoted words of jax >= 0.7.1's error are left out. pjit honours it."""
    src = """
        import jax
        import numpy as np
        from jax.sharding import Mesh, PartitionSpec as P

        mesh = Mesh(np.array(jax.devices()), ("data",))
        step = jax.jit(lambda x: x * 2, in_shardings=P("data"), out_shardings=P("data"))
        with mesh:
            y = step(np.ones((8, 4)))
    """
    [f] = _lint_at(tmp_path / "jit", {"train.py": src}, "SHL104", jax=jax)
    assert f.severity == "error" and "(a legacy `with mesh:` does not count here)" in f.message
    assert ("\"requires a non-empty mesh in context\"" in f.message) == (jax == "0.12.0.1")
    assert f.message.endswith("when this runs; pass NamedShardings (`jax.set_mesh`, whose mesh it "
                              "reads, needs jax >= 0.7.1, and the project's pins allow jax 0.4.30; "
                              "a legacy `with mesh:` does not count for it)") \
        if jax == "0.4.30" else f.message.endswith(
            "when this runs; enter `with jax.set_mesh(mesh):` around it or pass NamedShardings"), \
        f.message
    pjit = src.replace("import jax\n", "import jax\n        from jax.experimental.pjit import pjit\n", 1) \
        .replace("jax.jit(", "pjit(")
    assert not _lint_at(tmp_path / "pjit", {"train.py": pjit}, "SHL104", jax=jax)


@pytest.mark.parametrize("jax", ["0.4.30", "0.6.2", "0.4.30..0.12.0.1", "0.12.0.1"])
def test_shl104_a_device_put_spec_under_a_legacy_mesh_raises_at_every_release(tmp_path, jax):
    """`device_put` never resolves a bare spec against the legacy `with mesh:`: run under only
    `with mesh:`, it raises on jax 0.4.30 (which takes no PartitionSpec there at all), 0.6.2
    ("Please set a mesh via `jax.sharding.use_mesh`"), 0.8.1, 0.10.2 and 0.12. An error at
    every pin; `with_sharding_constraint` beside it, which honours the legacy mesh, is not."""
    src = """
        import jax
        import numpy as np
        from jax.sharding import Mesh, PartitionSpec as P

        mesh = Mesh(np.array(jax.devices()), ("data",))
        with mesh:
            y = jax.device_put(np.ones((8, 4)), P("data"))
            z = jax.lax.with_sharding_constraint(y, P("data"))
    """
    [f] = _lint_at(tmp_path, {"train.py": src}, "SHL104", jax=jax)
    assert f.line == 7 and f.severity == "error", f
    assert "`device_put` with no mesh in context (a legacy `with mesh:` does not count here)" \
        in f.message, f.message
    assert ("pass NamedShardings (`jax.set_mesh`" in f.message) == (jax != "0.12.0.1"), f.message


_ONE_DEVICE_EXAMPLE = """
    import jax
    import flax.linen as nn
    {imports}

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dense(10)(x)

    def main():
        params = CNN().init(jax.random.key(0), jax.numpy.ones((8, 784)))
        return params

    if __name__ == "__main__":
        main()
"""


@pytest.mark.parametrize("imports,sharded", [
    ("", False),  # a standalone script beside the one that builds a mesh
    ("from common import batches", False),  # a helper both import, which shards nothing
    ("from distributed import make_mesh\n    MESH = make_mesh()", True),  # the sharding one's mesh
])
def test_a_one_device_example_beside_a_sharded_one_is_its_own_program(tmp_path, imports,
                                                                        sharded):
    """`examples/deep_learning/` holds standalone scripts: jaxopt's `plot_sgd_solvers.py` (a
    one-device MNIST CNN) beside `distributed_flax_imagenet.py` (a mesh). The folder is
    programs by what imports what: the one-device script's eager init is not told that it
    lands on one device "before it can be sharded" -- unless it imports the script that
    builds the mesh."""
    files = {
        "examples/deep_learning/distributed.py": """
            import jax
            from common import batches

            def make_mesh():
                return jax.make_mesh((jax.device_count(),), ("data",))

            if __name__ == "__main__":
                with jax.set_mesh(make_mesh()):
                    batches()
        """,
        "examples/deep_learning/common.py": """
            import jax

            def batches():
                return jax.numpy.ones((8, 784))
        """,
        "examples/deep_learning/plot_mnist.py": _ONE_DEVICE_EXAMPLE.replace("{imports}", imports),
    }
    found = {(f.path.rsplit("/", 1)[-1], f.line)
             for f in _lint_at(tmp_path, files, "SHL301")}
    line = 1 + textwrap.dedent(files["examples/deep_learning/plot_mnist.py"]).lstrip("\n").split(
        "\n").index("    params = CNN().init(jax.random.key(0), jax.numpy.ones((8, 784)))")
    assert found == ({("plot_mnist.py", line)} if sharded else set())


@pytest.mark.parametrize("jit,error", [("pjit", False), ("jax.jit", True)])
def test_a_global_legacy_resource_env_is_the_mesh_pjit_reads(tmp_path, jit, error):
    """jaxopt's `setup_data_parallel_mesh` sets the legacy environment itself:
    `maps.thread_resources.env = maps.ResourceEnv(physical_mesh=mesh, loops=())`, before
    `pjit(..., in_shardings=PartitionSpec('data'))` runs. pjit reads it (no SHL104 error);
    `jax.jit` never resolves a bare spec against the legacy mesh (still an error)."""
    src = GLOBAL_LEGACY_ENV.replace("{jit}", jit)
    found = _lint_at(tmp_path, {"train.py": src}, "SHL104", jax="0.4.30")
    assert bool([f for f in found if f.severity == "error"]) is error, \
        [(f.severity, f.message) for f in found]


@pytest.mark.parametrize("read,error", [
    ("Trainer.tokenize(d)", False),  # a static member that applies nothing
    ("Trainer.tokenize", False),  # (handed on, not called)
    ("Trainer.step(self, d, d)", True),  # the member that applies the model, through the class
    ("Trainer.inherited(self, d)", True),  # defined in a base: the class stands for it
    ("Trainer.Inner", False),  # a nested class that applies nothing
    ("Trainer.make(d)", True),  # a classmethod builds the class: the class stands for it
])
def test_a_member_read_through_its_class_is_that_member(tmp_path, read, error):
    """`Trainer.tokenize` in a method references the member, not every method of the class:
    the legacy `with` around `self.load(...)` is an error only where what `load` reads
    through the class applies the constrained model (a member the class inherits, or a
    classmethod, stands for the class, as before)."""
    files = {"model.py": MODEL, "train.py": f"""
        import jax
        from model import MLP

        class Base:
            def inherited(self, x):
                return MLP().apply({{}}, x)

        class Trainer(Base):
            class Inner:
                pass

            @staticmethod
            def tokenize(x):
                return x

            @classmethod
            def make(cls, x):
                return cls().step({{}}, x)

            def step(self, params, x):
                return MLP().apply(params, x)

            def load(self, data):
                return [{read} for d in data]

            def run(self, data):
                with jax.make_mesh((8,), ("data",)):
                    return self.load(data)

        Trainer().run([])
    """}
    [found] = _lint(tmp_path, files, "SHL101")
    assert (found.severity == "error") is error, found.message
    assert ("`self.load` runs under it" in found.message) is error, found.message


def test_a_jitted_name_read_only_as_a_chain_head_is_a_reference_of_it():
    """`step.lower(...)` in another function hands the jitted callable on (to be compiled
    there): ``references_of`` finds it where the name is read only as a chain's head (the
    visitor records `step.lower` for it, not `step`), as it finds a plain `step`."""
    import ast

    from shardlint.semantics.file.jit_sites import references_of
    from shardlint.semantics.file.visitor import build_facts
    from shardlint.semantics.file.wrappers import Wrappers

    src = textwrap.dedent("""
        import jax

        def train_step(s):
            return s

        step = jax.jit(train_step)

        def compiled(s):
            return step.lower(s).compile()

        def handed(s):
            return run(step, s)
    """)
    facts = build_facts("m.py", "m", ast.parse(src), False, Wrappers())
    [site] = facts.jit_sites
    assert sorted((scope.name, n.lineno) for n, scope in references_of(facts, site)) == [
        ("compiled", 10), ("handed", 13)]


_UNBOXES = """
    import jax
    import flax.linen as nn
    from flax.linen import spmd

    RULES = (("embed", "data"),)

    def unbox_leaf(x):
        return x.unbox() if isinstance(x, spmd.LogicallyPartitioned) else x

    def load(mesh, abstract):
        {body}

    @jax.jit
    def unbox_jitted(tree):
        return nn.unbox(tree)

    load(jax.make_mesh((8,), ("data",)), None)
"""


@pytest.mark.parametrize("body,caveat", [
    # an unbox outside a jit, with the rules entered with the `with`: in a function written
    # there, a function of the file mapped over the tree, a lambda, a tree's own unbox
    ("with mesh, nn.logical_axis_rules(RULES):\n"
     "            def leaf(x):\n"
     "                return x.unbox() if isinstance(x, spmd.LogicallyPartitioned) else x\n"
     "            return jax.tree_util.tree_map(leaf, abstract)", "`x.unbox` (line 13)"),
    ("with mesh, nn.logical_axis_rules(RULES):\n"
     "            return jax.tree.map(unbox_leaf, abstract)", "`x.unbox` (line 8)"),
    ("with mesh, nn.logical_axis_rules(RULES):\n"
     "            return jax.tree.map(lambda x: x.unbox(), abstract)", "`x.unbox` (line 12)"),
    ("with mesh, nn.logical_axis_rules(RULES):\n"
     "            return nn.unbox(abstract)", "`nn.unbox` (line 12)"),
    ("with mesh:\n"
     "            with nn.logical_axis_rules(RULES):\n"
     "                return nn.meta.unbox(abstract)", "`nn.meta.unbox` (line 13)"),
    # the look-alikes: no rules (a logically partitioned box constrains nothing without
    # them), no constraint asked for, the unbox handed to a jit (traced: the constraint holds)
    ("with mesh:\n"
     "            return nn.unbox(abstract)", None),
    ("with mesh, nn.logical_axis_rules(RULES):\n"
     "            return jax.tree.map(lambda x: x.unbox(apply_constraint=False), abstract)", None),
    ("with mesh, nn.logical_axis_rules(RULES):\n"
     "            return jax.jit(unbox_leaf)(abstract)", None),
    ("with mesh, nn.logical_axis_rules(RULES):\n"
     "            return jax.jit(lambda t: nn.unbox(t))(abstract)", None),
    ("with mesh, nn.logical_axis_rules(RULES):\n"
     "            return unbox_jitted(abstract)", None),
    ("with mesh, nn.logical_axis_rules(RULES):\n"
     "            return jax.eval_shape(lambda: jax.tree.map(unbox_leaf, abstract))", None),
])
def test_shl101_set_mesh_waits_for_an_unbox_of_unplaced_values(tmp_path, body, caveat):
    """With logical axis rules entered, `jax.set_mesh` makes Flax's `unbox` apply
    `with_sharding_constraint` (flax reads the abstract mesh), which raises outside a jit for
    a value not placed with a `NamedSharding` (`jax.eval_shape`'s abstract values included);
    under the legacy mesh it does nothing. Run on jax 0.12.0.1 / flax 0.12.12: `nn.unbox`,
    `nn.meta.unbox` and a box's `.unbox()` of eval_shape outputs or fresh arrays raise
    TypeError under `jax.set_mesh` + rules, pass under the legacy `with`; without rules, or
    under `jax.jit`, they pass under both. The advice waits for it and the fix is unsafe."""
    [f] = _lint(tmp_path, {"train.py": _UNBOXES.replace("{body}", body)}, "SHL101")
    if caveat is None:
        assert "unboxes only values already placed" not in f.message, f.message
        return
    assert (f"use `with jax.set_mesh(mesh):` once {caveat} under it unboxes only values "
            "already placed: with logical axis rules entered, under `jax.set_mesh` Flax's "
            "`unbox` (flax >= 0.12.2) applies `with_sharding_constraint`") in f.message, f.message
    assert f.fix is not None and f.fix.applicability == "unsafe"


@pytest.mark.parametrize("store", ["self.flux = flux", "self.register_modules(flux=flux)"])
@pytest.mark.parametrize("model,error", [("MLP()", True), ("Plain()", False)])
def test_a_model_kept_in_an_attribute_of_what_is_handed_in_is_followed(tmp_path, model, error,
                                                                       store):
    """`pipeline.flux.apply(...)` in a step that gets `pipeline` through a partial's keyword:
    the classes callers hand in as `pipeline` (here a tuple's first item, returned by a method
    the trainer inherits from a base in another module), then what those classes keep in
    `flux` (their constructor's parameter; or what a diffusers-style `register_modules` sets
    from its keywords). Under the legacy `with` that calls the jitted step, a constrained model
    there is the error; an unconstrained one (the look-alike) leaves the deprecation alone."""
    files = {"model.py": MODEL + PLAIN + f"""
    class Pipeline:
        def register_modules(self, **kwargs):
            for name, module in kwargs.items():
                setattr(self, name, module)

        def __init__(self, flux, mesh=None):
            {store}
            self.mesh = mesh
""", "ckpt.py": f"""
        import jax
        from model import MLP, Pipeline, Plain

        class Checkpointer:
            def __init__(self):
                self.mesh = jax.make_mesh((8,), ("data",))

            def load_checkpoint(self):
                pipeline, params = None, {{}}
                pipeline = Pipeline({model}, mesh=self.mesh)
                return pipeline, params
    """, "train.py": """
        import functools
        import jax
        import flax.linen as nn
        from ckpt import Checkpointer

        def _train_step(state, batch, pipeline):
            return pipeline.flux.apply(state, batch)

        class Trainer(Checkpointer):
            def start(self, rules):
                with self.mesh, nn.logical_axis_rules(rules):
                    pipeline, params = self.load_checkpoint()
                    step = jax.jit(functools.partial(_train_step, pipeline=pipeline))
                    return step(params, None)

        Trainer().start(())
    """}
    [found] = _lint(tmp_path, files, "SHL101")
    assert (found.severity == "error") is error, found.message
    if error:
        assert ("and `MLP`, applied in `_train_step` (kept in `pipeline.flux`, `pipeline` handed "
                "in), runs under it") in found.message, found.message
