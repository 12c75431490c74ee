"""Regression cases for SHL201-SHL203 beyond the rules' own examples.

Each case is a small project; lines that must be flagged end with ``# expect: SHLnnn`` and every
other line must stay clean for that rule.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from helpers import expected_markers
from helpers import lint_files, run_example

from shardlint.rules.base import Example


def _case(code: str, files: dict[str, str] | str, id: str):
    if isinstance(files, str):
        files = {"example.py": files}
    files = {k: textwrap.dedent(v).lstrip("\n") for k, v in files.items()}
    return pytest.param(code, Example(files), id=f"{code}-{id}")


_GIN_PACKAGES = {
    "pkg_a/__init__.py": "",
    "pkg_a/partitioning.py": """
        import jax
        import flax.linen as nn

        class Partitioner:
            def __init__(self, logical_axis_rules=()):
                self._rules = tuple(logical_axis_rules)

            def run(self, fn, *args):
                with nn.logical_axis_rules(self._rules):
                    return jax.jit(fn)(*args)
    """,
    "pkg_a/model.py": """
        import flax.linen as nn

        class MLP(nn.Module):
            @nn.compact
            def __call__(self, x):
                return nn.with_logical_constraint(x, ("batch", "hidden"))  # expect: SHL201
    """,
    "pkg_b/__init__.py": "",
    "pkg_b/partitioning.py": """
        import jax

        class Partitioner:
            def __init__(self, logical_axis_rules=()):
                self.rules = logical_axis_rules
    """,
}


CASES = [
    # ---- SHL201 ---------------------------------------------------------------------------------
    _case("SHL201", """
        import flax.linen as nn
        from flax.linen import partitioning as nn_partitioning

        class T5Dense(nn.Module):
            @nn.compact
            def __call__(self, x):
                w = nn_partitioning.param_with_axes(
                    "kernel", nn.initializers.lecun_normal(), (4, 8), axes=("embed", "mlpp"))  # expect: SHL201
                return x @ w

        with nn.logical_axis_rules((("embed", None), ("mlp", "model"))):
            pass
    """, "param-with-axes"),
    _case("SHL201", """
        import flax.linen as nn

        AXES = ("embed", "hidden")  # expect: SHL201

        class A(nn.Module):
            @nn.compact
            def __call__(self, x):
                x = nn.with_logical_constraint(x, AXES)
                return nn.with_logical_constraint(x, AXES)

        with nn.logical_axis_rules((("embed", None),)):
            pass
    """, "constant-used-twice-reported-once"),
    _case("SHL201", {
        "model.py": """
            import flax.linen as nn

            class A(nn.Module):
                @nn.compact
                def __call__(self, x):
                    return nn.with_logical_constraint(x, ("batch", "anything"))
        """,
        "train.py": """
            import flax.linen as nn
            from config_loader import load_rules

            with nn.logical_axis_rules((("batch", "data"),)):
                pass
            with nn.logical_axis_rules(load_rules()):
                pass
        """,
    }, "one-unreadable-table-silences"),
    _case("SHL201", """
        import jax
        from flax import nnx

        class B(nnx.Module):
            def __init__(self, rngs, mesh_axes):
                init = nnx.with_partitioning(nnx.initializers.lecun_normal(), ("embed", "mlp"))
                self.linear = nnx.Linear(4, 8, kernel_init=init, rngs=rngs)

        def build(names):
            return jax.make_mesh((2, 4), names)

        with nnx.logical_axis_rules((("batch", "data"),)):
            pass
    """, "nnx-mesh-axes-unknown"),
    _case("SHL201", """
        import jax
        from flax import nnx

        mesh = jax.make_mesh((2, 4), ("data", "model"))

        class B(nnx.Module):
            def __init__(self):
                self.w = nnx.Param(jax.numpy.ones((4,)), out_sharding=("embed",),
                                   sharding_rules=(("embed", "model"),))

        with nnx.logical_axis_rules((("batch", "data"),)):
            pass
    """, "nnx-local-sharding-rules"),
    _case("SHL201", """
        import jax
        import flax.linen as nn

        class A(nn.Module):
            @nn.compact
            def __call__(self, x):
                init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
                return nn.Dense(4, kernel_init=init)(x)

        Stack = nn.scan(A, variable_axes={"params": 0}, split_rngs={"params": True}, length=2,
                        metadata_params={nn.PARTITION_NAME: "layers"})
        specs = nn.logical_to_mesh_sharding(None, None, (("embed", None), ("mlp", "model"), ("layers", None)))
    """, "rules-given-to-logical_to_mesh_sharding"),
    _case("SHL201", """
        import flax.linen as nn

        RULES_FOR_HELPER = (("batch", "data"), ("heads", "model"))

        class A(nn.Module):
            @nn.compact
            def __call__(self, x):
                return nn.with_logical_constraint(x, ("batch", "heads"))

        with nn.logical_axis_rules((("batch", "data"),)):
            pass
    """, "rules-shaped-constant-counts"),
    # ---- SHL202 ---------------------------------------------------------------------------------
    _case("SHL202", """
        import jax
        from jax.sharding import PartitionSpec as P

        mesh = jax.make_mesh((8,), ("data",))
        other = jax.make_mesh((2, 4), ("data", "model"))
        with jax.set_mesh(mesh):
            step = jax.jit(lambda x: x, out_shardings=P("model"))  # expect: SHL202
    """, "context-mesh"),
    _case("SHL202", """
        import jax
        from jax.sharding import PartitionSpec as P

        mesh = jax.make_mesh((8,), ("x",))
        other = jax.make_mesh((8,), ("y",))
        f = jax.shard_map(lambda a: a, mesh=mesh, in_specs=P("x"), out_specs=P("y"))  # expect: SHL202
    """, "shard-map-mesh-keyword"),
    _case("SHL202", """
        import jax
        from jax.sharding import Mesh, PartitionSpec as P

        def run(mesh: Mesh):
            return P("anything")

        known = jax.make_mesh((8,), ("data",))
    """, "annotated-mesh-parameter-is-not-literal"),
    _case("SHL202", """
        import jax
        import flax.linen as nn
        from jax.sharding import PartitionSpec as P

        mesh = jax.make_mesh((8,), ("data",))
        RULES = (("batch", "data"), ("embed", None))
        logical = P("batch", "embed")
        wrong = P("batch", "dta")  # expect: SHL202
    """, "unpaired-logical-names-skipped"),
    _case("SHL202", """
        import jax
        import yaml
        import flax.linen as nn
        from jax.sharding import PartitionSpec as P

        mesh = jax.make_mesh((8,), ("data",))
        with nn.logical_axis_rules(yaml.safe_load(open("r.yaml"))):
            spec = P("activation_batch", None)
    """, "unreadable-rules-unpaired-spec-skipped"),
    _case("SHL202", """
        import jax
        from jax.sharding import AbstractMesh, NamedSharding, PartitionSpec as P

        amesh = AbstractMesh((2, 4), ("data", "model"))
        s = NamedSharding(amesh, P(("data", "model"), "model"))  # expect: SHL202
        t = NamedSharding(amesh, P(None, "expert"))  # expect: SHL202
    """, "abstract-mesh-and-nested-duplicate"),
    _case("SHL202", """
        import jax
        from flax import nnx
        from jax.sharding import PartitionSpec as P

        mesh = jax.make_mesh((8,), ("data",))
        init = nnx.with_partitioning(nnx.initializers.lecun_normal(), P("embed", None))
    """, "nnx-spec-may-be-logical"),
    _case("SHL202", """
        import jax
        from jax.sharding import NamedSharding, PartitionSpec as P

        mesh = jax.make_mesh((8,), ("data",))

        def shard(m, x):
            return jax.device_put(x, NamedSharding(m, P("batch")))  # expect: SHL202
    """, "unresolved-mesh-falls-back-to-project"),
    # ---- SHL203 ---------------------------------------------------------------------------------
    _case("SHL203", """
        import flax.linen as nn

        class A(nn.Module):
            @nn.compact
            def __call__(self, x, _):
                init = nn.with_partitioning(nn.initializers.lecun_normal(), (None, "model"))
                return nn.Dense(4, kernel_init=init)(x), None

        AXES = {"params": 0}
        META = {nn.PARTITION_NAME: None}
        ok = nn.scan(A, variable_axes=AXES, split_rngs={"params": True}, length=2, metadata_params=META)
        bad = nn.scan(A, variable_axes=AXES, split_rngs={"params": True}, length=2)  # expect: SHL203
        everything = nn.vmap(A, variable_axes={True: 0}, split_rngs={"params": True})  # expect: SHL203
        unknown = nn.vmap(A, variable_axes=make_axes(), split_rngs={"params": True})
        forwarded = nn.vmap(A, **lift_options)
        forward = nn.vmap(A, in_axes=0, out_axes=0)
        cache_only = nn.vmap(A, variable_axes={"cache": 0, "params": None}, split_rngs={"params": False})
    """, "linen-variants"),
    _case("SHL203", """
        import functools
        from flax import nnx

        class B(nnx.Module):
            def __init__(self, rngs):
                self.w = nnx.Param(nnx.initializers.lecun_normal()(rngs.params(), (4, 8)),
                                   out_sharding=(None, "model"))

        def make(rngs):
            return B(rngs)

        stacked = nnx.vmap(make, in_axes=0, out_axes=0)(nnx.Rngs(0).split(4))  # expect: SHL203
        shared = nnx.vmap(make, in_axes=0, out_axes=None)(nnx.Rngs(0).split(4))

        @functools.partial(nnx.scan, in_axes=0, out_axes=0)  # expect: SHL203
        def make_scanned(rngs):
            return B(rngs)

        @nnx.vmap  # expect: SHL203
        def make_bare(rngs):
            return B(rngs)

        @nnx.vmap(in_axes=0, out_axes=0)  # expect: SHL203
        def make_linear(rngs):
            init = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, "model"))
            return nnx.Linear(4, 8, kernel_init=init, rngs=rngs)

        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def forward(x, block):
            return block.w @ x

        @nnx.vmap(in_axes=(0, None))
        def build_and_apply(rngs, x):
            block = B(rngs)   # created, used, dropped: nothing stacked leaves the vmap
            return block.w @ x

        @nnx.vmap(in_axes=0, out_axes=0)  # expect: SHL203
        def build_named(rngs):
            block = B(rngs)
            return block

        stacked_class = nnx.vmap(B, in_axes=0, out_axes=0)(nnx.Rngs(0).split(4))  # expect: SHL203
        opaque = nnx.vmap(make, **options)(nnx.Rngs(0).split(4))
        named = nnx.vmap(make, in_axes=0, transform_metadata={"partition_name": None})
    """, "nnx-variants"),
    _case("SHL203", {
        "blocks.py": """
            from flax import nnx

            class B(nnx.Module):
                def __init__(self, rngs):
                    init = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, "model"))
                    self.linear = nnx.Linear(4, 8, kernel_init=init, rngs=rngs)

            def make(rngs):
                return B(rngs)
        """,
        "train.py": """
            from flax import nnx
            from blocks import make

            stacked = nnx.vmap(make, in_axes=0, out_axes=0)(nnx.Rngs(0).split(4))  # expect: SHL203
        """,
    }, "nnx-function-from-another-file"),
    # A builder that makes its table entry by entry from another (the mesh side rewritten) and
    # appends its own: the names of both.
    _case("SHL201", """
        import flax.linen as nn

        def moe_rules(additional=None):
            base = [("batch", "data"), ("mlp", "model")]
            out = []
            for name, axes in base:
                out.append((name, ("expert", "data") if name == "batch" else axes))
            out.append(("expert", "expert"))
            if additional:
                out.extend(additional)
            return out

        class MLP(nn.Module):
            @nn.compact
            def __call__(self, x):
                x = nn.with_logical_constraint(x, ("batch", "mlp", "expert"))
                return nn.with_logical_constraint(x, ("batch", "hidden"))  # expect: SHL201

        def run(x):
            with nn.logical_axis_rules(moe_rules()):
                return MLP().init(None, x)
    """, "builder-rewrites-entries-in-a-loop"),
    # `scan_with_axes` of a local bound to the class or to `remat` of itself, whose layers are
    # built through a module's attributes (`layers.Dense`): their `param_with_axes` is reached.
    _case("SHL201", {
        "pkg/__init__.py": "",
        "pkg/layers.py": """
            import flax.linen as nn
            from flax.linen import partitioning as nn_partitioning

            class Dense(nn.Module):
                @nn.compact
                def __call__(self, x):
                    w = nn_partitioning.param_with_axes(
                        "kernel", nn.initializers.lecun_normal(), (4, 4), axes=("embed", "mlp"))
                    return x @ w
        """,
        "pkg/network.py": """
            import flax.linen as nn
            from flax.linen import partitioning as nn_partitioning
            from pkg import layers

            class Block(nn.Module):
                @nn.compact
                def __call__(self, x, _):
                    return layers.Dense()(x), None

            class Encoder(nn.Module):
                remat: bool = False

                @nn.compact
                def __call__(self, x):
                    BlockLayer = Block
                    if self.remat:
                        BlockLayer = nn_partitioning.remat(BlockLayer)
                    x, _ = nn_partitioning.scan_with_axes(
                        BlockLayer, variable_axes={"params": 0}, split_rngs={"params": True},
                        in_axes=(nn.broadcast,), length=2,
                        axis_name="stack")(name="blocks")(x, None)  # expect: SHL201
                    return x

            with nn_partitioning.axis_rules((("embed", None), ("mlp", "model"))):
                pass
        """,
    }, "scan-with-axes-through-module-attributes"),
    # ---- SHL201: a partitioner configured by gin files -------------------------------------------
    # The selector `partitioning.Partitioner` names a class of two packages: the import that
    # says which is in the file the binding's file includes.
    _case("SHL201", {**_GIN_PACKAGES, "configs/base.gin": """
        from __gin__ import dynamic_registration
        from pkg_a import partitioning
    """, "configs/run.gin": """
        include 'configs/base.gin'
        partitioning.Partitioner.logical_axis_rules = [('batch', 'data')]
    """}, "gin-import-in-an-included-file"),
    # No import says which: gin would match either, and the binding's table is not known.
    _case("SHL201", {**_GIN_PACKAGES, "configs/run.gin": """
        partitioning.Partitioner.logical_axis_rules = [('batch', 'data')]
    """, "pkg_a/model.py": _GIN_PACKAGES["pkg_a/model.py"].replace("  # expect: SHL201", "")},
        "gin-selector-of-several-classes"),
]


@pytest.mark.parametrize("code,ex", CASES)
def test_case(tmp_path, code, ex):
    found = {f for f in run_example(tmp_path, ex, code) if f[2] == code}
    expected = {e for e in expected_markers(ex.files) if e[2] == code}
    assert found == expected


# ---- SHL201 messages: what NNX does with a name that is neither a rule nor a mesh axis ------------
_NNX_PROJECT = {
    "layers.py": """
        import jax
        from flax import nnx

        class Dense(nnx.Module):
            def __init__(self, kernel_axes, *, rngs):
                self.kernel_axes = kernel_axes
                self.w = nnx.Param(jax.numpy.zeros((4, 4)), out_sharding=self.kernel_axes)
    """,
    "model.py": """
        from flax import nnx
        from layers import Dense

        def build(rngs: nnx.Rngs):
            return Dense(("embed", "fused"), rngs=rngs)
    """,
    "train.py": """
        import jax
        from flax import nnx
        from jax.sharding import Mesh
        from model import build

        def main(config):
            mesh = Mesh(jax.devices(), config.mesh_axes)
            with jax.set_mesh(mesh), nnx.logical_axis_rules(config.logical_axis_rules):
                return build(nnx.Rngs(0))
    """,
    "base.yml": """
        mesh_axes: ['data', 'model']
        logical_axis_rules: [['embed', 'data']]
    """,
}


def _shl201_messages(tmp_path, files):
    files = {k: textwrap.dedent(v).lstrip("\n") for k, v in files.items()}
    return [(Path(f.path).name, f.span.line, f.message)
            for f in lint_files(tmp_path, files, select=("SHL201",))]


def test_shl201_nnx_name_raises_where_variables_are_sharded_when_created(tmp_path):
    [(name, line, msg)] = _shl201_messages(tmp_path, _NNX_PROJECT)
    assert (name, line) == ("model.py", 5)
    assert "'fused'" in msg and "raises `ValueError: Resource axis: fused" in msg
    assert "read from `base.yml`:2 key `logical_axis_rules`" in msg
    assert "`mesh_axes` lists included" in msg


def test_shl201_nnx_name_with_eager_sharding_off_claims_no_error_at_creation(tmp_path):
    files = dict(_NNX_PROJECT)
    files["wrappers.py"] = """
        from flax import config as flax_config
        flax_config.update("flax_always_shard_variable", False)
    """
    [(_, _, msg)] = _shl201_messages(tmp_path, files)
    assert "`flax_always_shard_variable` is off (wrappers.py)" in msg
    assert "does not shard the variable when it is created" in msg
    assert "Resource axis: fused" not in msg  # (no certain error at creation)


def test_shl202_against_configured_axes_is_a_warning_that_says_why(tmp_path):
    files = {
        "train.py": """
            import jax
            from jax.sharding import Mesh, PartitionSpec as P

            def constrain(x):
                return jax.lax.with_sharding_constraint(x, P("batch"))

            def main(config, x):
                with jax.set_mesh(Mesh(jax.devices(), tuple(config.mesh_axes))):
                    return constrain(x)
        """,
        "base.yml": "mesh_axes: ['data', 'model']\n",
    }
    files = {k: textwrap.dedent(v).lstrip("\n") for k, v in files.items()}
    [f] = lint_files(tmp_path, files, select=("SHL202",))
    assert (f.severity, f.span.line) == ("warning", 5)
    assert "('data', 'model')" in f.message and "overrides `mesh_axes`" in f.message
    # literal axes: certain, an error
    files["train.py"] = files["train.py"].replace("tuple(config.mesh_axes)", '("data", "model")')
    [f] = lint_files(tmp_path, files, select=("SHL202",))
    assert f.severity == "error" and "overrides" not in f.message


BIG_VISION_LIKE = {
    "configs/base.py": """
        import ml_collections

        def get_config():
            config = ml_collections.ConfigDict()
            config.sharding_rules = [("act_batch", ("replica", "fsdp"))]  # jax mesh axes
            return config
    """,
    "configs/other.py": """
        import ml_collections

        def get_config():
            config = ml_collections.ConfigDict()
            config.sharding_rules = [("act_batch", "data")]  # for jax.sharding
            return config
    """,
    "models/vit.py": """
        import flax.linen as nn

        class Block(nn.Module):
            @nn.compact
            def __call__(self, x):
                x = nn.with_logical_constraint(x, ("act_batch", "act_len", "act_emb"))
                return nn.Dense(8)(x)
    """,
    "train.py": """
        import jax
        import numpy as np
        import flax.linen as nn
        from jax.sharding import Mesh
        from models.vit import Block

        def main(config):
            sharding_rules = config.get("sharding_rules", [("act_batch", "data")])
            mesh = Mesh(np.array(jax.devices()), ("replica", "fsdp"))
            with mesh, nn.logical_axis_rules(sharding_rules):
                return Block().init(jax.random.key(0), jax.numpy.ones((2, 8)))
    """,
}


def test_shl201_one_finding_per_annotation_its_consequence_from_the_context(tmp_path):
    """Both unmapped names in one finding; tables counted once each; under a project that
    enters its meshes only by a legacy `with mesh:` (flax >= 0.12.2) the constraint does
    nothing at all, so "replicated" is only what follows once the mesh is entered right."""
    files = {k: textwrap.dedent(v).lstrip("\n") for k, v in BIG_VISION_LIKE.items()}
    found = [f for f in lint_files(tmp_path / "a", files, select=("SHL201",))
             if f.path.endswith("vit.py")]
    assert len(found) == 1, [f.message for f in found]
    f = found[0]
    assert "names 'act_len' and 'act_emb' have no rule" in f.message
    assert "and 1 more table)" in f.message
    assert f.severity == "info" and "applies no logical constraint at all (SHL101)" in f.message
    # With jax.set_mesh the constraint applies: the names are replicated, a warning.
    files["train.py"] = files["train.py"].replace("with mesh,", "with jax.set_mesh(mesh),")
    found = [f for f in lint_files(tmp_path / "b", files, select=("SHL201",))
             if f.path.endswith("vit.py")]
    assert [f.severity for f in found] == ["warning"]
    assert "replicated on every device" in found[0].message
    assert "SHL101" not in found[0].message


def test_shl203_handed_classes_some_of_which_box_nothing_is_a_warning(tmp_path):
    """A class the callers hand in: an error where every class they may hand boxes its params
    (init raises whichever runs), a warning that says so where some box none."""
    from shardlint.rules.partitioning.shl203_stacked_axis_unnamed import (
        _HANDED_LINEN,
        _LINEN_LAYERS,
    )

    def lint(layers: str):
        files = {"layers.py": _LINEN_LAYERS,
                 "decoder.py": _HANDED_LINEN.format(layer=layers, mark="here")}
        root = tmp_path / layers.replace(", ", "_")
        root.mkdir()
        return lint_files(root, files, select=("SHL203",))

    (mixed,) = lint("Boxed, Plain")
    assert mixed.severity == "warning" and "when it is the class scanned" in mixed.message
    (boxed,) = lint("Boxed")
    assert boxed.severity == "error" and "when it is the class scanned" not in boxed.message
    assert not lint("Plain")
