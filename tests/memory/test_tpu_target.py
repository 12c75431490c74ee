"""`shardlint memory --target tpu-...`: the TPU compiler's figures from a CPU host.

The figures of `tests/memory/data/tpu_chip.json` were measured on one TPU v5e chip
(`bench/tpu_chip.py`). With the same jax/libtpu pair (`.venv-chip`, made by
`scripts/tpu-env.sh`) the target must give them byte for byte; with another pair only what
depends on shapes and layouts alone (arguments, outputs, aliased bytes) must agree.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

import pytest

from shardlint.errors import UsageError
from shardlint.memory.hardware import find_accelerator
from shardlint.memory.targets import check_counts, parse_target, target_for

from .memory_support import DECODER_PROBE, REPO, SEED_PROBES, CliResult, needs_flax

CHIP = json.loads((Path(__file__).parent / "data" / "tpu_chip.json").read_text())
FIELDS = ("argument", "output", "alias", "temp", "generated_code")
SHAPE_FIELDS = ("argument", "output", "alias")


def _libtpu() -> str | None:
    for dist in ("libtpu", "libtpu-nightly"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return None


needs_libtpu = pytest.mark.skipif(
    _libtpu() is None or importlib.util.find_spec("jax") is None,
    reason="libtpu is not installed in the test interpreter (bash scripts/tpu-env.sh installs "
    "the one its jax pins)",
)


def _chip_python() -> str | None:
    """An interpreter with the chip's jax/libtpu pair: SHARDLINT_CHIP_PYTHON, else .venv-chip."""
    candidate = os.environ.get("SHARDLINT_CHIP_PYTHON") or str(REPO / ".venv-chip/bin/python")
    if not Path(candidate).is_file():
        return None
    want = CHIP["versions"]
    code = ("import importlib.metadata as m, json; print(json.dumps({d: m.version(d) for d in "
            "('jax', 'jaxlib', 'libtpu', 'flax', 'optax')}))")
    try:
        got = json.loads(subprocess.run([candidate, "-c", code], capture_output=True, text=True,
                                        timeout=60, check=True).stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return candidate if all(got[d] == want[d] for d in got) else None


def _runs(result: CliResult) -> dict[str, dict[int, dict]]:
    out: dict[str, dict[int, dict]] = {}
    for probe in result.json()["probes"]:
        out[probe["function"]] = {run["devices"]: run for run in probe["runs"]}
    return out


# --- parsing, no jax ----------------------------------------------------------------------------


def test_target_names_and_errors() -> None:
    t = parse_target("TPU-v5e:16x16")
    assert (t.spec, t.topology, t.devices) == ("tpu-v5e:16x16", "v5e:16x16", 256)
    assert t.accelerator.bytes_per_device == CHIP["bytes_limit"]  # the chip's own bytes_limit
    assert parse_target("tpu-v5p:2x2x2").devices == 8
    assert parse_target("tpu-v4:2x2x1").devices == 8  # libtpu's v4: a device a core
    for bad, says in (("v5e:2x2", "expected tpu-<generation>:<topology>"),
                      ("tpu-v9z:2x2", "unknown TPU generation"),
                      ("tpu-v5p:2x2", "three sides"), ("tpu-v5e:2x2x1", "two sides"),
                      ("tpu-v5e:0x2", "at least 1")):
        with pytest.raises(UsageError, match=says):
            parse_target(bad)
    with pytest.raises(UsageError, match="has 4 devices"):
        check_counts(parse_target("tpu-v5e:2x2"), (1, 8))
    assert target_for(find_accelerator("TPU-v5e"), 16).spec == "tpu-v5e:4x4"
    assert target_for(find_accelerator("TPU-v5e"), 5).spec == "tpu-v5e:2x4"
    assert target_for(find_accelerator("v5p"), 8).spec == "tpu-v5p:2x2x2"


def test_target_in_the_settings_table(tmp_path: Path) -> None:
    from shardlint.errors import ConfigError
    from shardlint.memory.settings import MemorySettings

    s = MemorySettings.from_table({"target": "tpu-v6e:2x2"})
    assert (s.target, s.devices, s.hardware) == ("tpu-v6e:2x2", (4,), "TPU-v6e")
    s = MemorySettings.from_table({"target": "tpu-v5e:4x4", "devices": [1, 16],
                                   "capacity": "8GiB"})
    assert (s.devices, s.capacity, s.hardware) == ((1, 16), 8 * 1024**3, None)
    with pytest.raises(ConfigError, match="'target'.*has 4 devices"):
        MemorySettings.from_table({"target": "tpu-v5e:2x2", "devices": [8]})
    with pytest.raises(ConfigError, match="native"):
        MemorySettings.from_table({"target": "tpu-v5e:2x2", "platform": "native"})


# --- the worker's side: libtpu present, pinned, missing ------------------------------------------


def _worker_target():
    spec = importlib.util.spec_from_file_location(
        "_test_worker_target", REPO / "shardlint/memory/worker/target.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")
def test_the_compilers_refusal_is_read_with_its_figures() -> None:
    target = _worker_target()
    message = ("RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: Ran out of memory on HBM, the total "
               "memory required for HLO temporaries (19.14G) exceeds available HBM (15.75G). HLO "
               "module: jit_train_step.")
    got = target.compiler_refusal(message)
    assert got == {"what": "HLO temporaries", "needs": "19.14GiB", "available": "15.75GiB",
                   "needs_bytes": int(19.14 * 2**30), "available_bytes": int(15.75 * 2**30)}
    # 15.75G is a v5e's bytes_limit to two decimals (the chip: 16,909,336,064 B).
    assert abs(got["available_bytes"] - CHIP["bytes_limit"]) < 0.005 * 2**30
    assert target.compiler_refusal("RESOURCE_EXHAUSTED: out of memory while running") is None


@pytest.mark.memory
@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")
def test_missing_or_mismatched_libtpu_says_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    target = _worker_target()
    real = target.metadata.version

    def without(dist: str) -> str:
        if dist.startswith("libtpu"):
            raise metadata.PackageNotFoundError(dist)
        return real(dist)

    monkeypatch.setattr(target.metadata, "version", without)
    status = target.libtpu_status()
    assert not status["ok"]
    import jax

    assert f"pip install 'jax[tpu]=={jax.__version__}'" in status["message"]
    with pytest.raises(target.TargetError, match="libtpu is not installed"):
        target.Topology("v5e:2x2", 1)
    monkeypatch.setattr(target.metadata, "version",
                        lambda d: "0.0.1" if d == "libtpu" else real(d))
    monkeypatch.setattr(target, "libtpu_pin", lambda: "0.0.50.*")
    status = target.libtpu_status()
    assert not status["ok"] and "libtpu 0.0.1 is installed" in status["message"]
    assert "pins libtpu==0.0.50.*" in status["message"]


# --- the TPU compiler on this host ----------------------------------------------------------------


@pytest.mark.memory
@pytest.mark.slow
@needs_flax
@needs_libtpu
def test_chip_figures_byte_for_byte(shardlint_memory: Callable[..., CliResult],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # What jax's TPU start-up writes into a process that looked for a TPU (shardlint's own,
    # here the test's): a worker that inherited it loaded this interpreter's libtpu, not its
    # own, and gave another compiler's figures under the chip pair's name.
    libtpu = importlib.util.find_spec("libtpu")
    assert libtpu is not None and libtpu.submodule_search_locations
    monkeypatch.setenv("TPU_LIBRARY_PATH",
                       str(Path(list(libtpu.submodule_search_locations)[0]) / "libtpu.so"))
    python = _chip_python()
    if python is None:
        pytest.skip(f"no interpreter with the chip's pair {CHIP['versions']} (.venv-chip: bash "
                    "scripts/tpu-env.sh, or SHARDLINT_CHIP_PYTHON)")
    result = shardlint_memory(
        str(SEED_PROBES), f"{DECODER_PROBE}:shardlint_probe_decoder_470m_train_step",
        f"{DECODER_PROBE}:shardlint_probe_decoder_1b_train_step",
        "--target", "tpu-v5e:1x1", "--python", python, "--no-whatif",
        "--format", "json", "--quiet", cwd=REPO)
    runs = _runs(result)
    compared = 0
    for name, row in CHIP["probes"].items():
        run = runs[name][1]
        if "error" in row:  # decoder_1b: the chip's compiler refuses it, and so does the target
            needs, available = re.search(r"\(([\d.]+)G\) exceeds available HBM \(([\d.]+)G\)",
                                         row["error"]).groups()
            assert not run["ok"] and run["error"]["kind"] == "does-not-fit"
            assert f"need {needs}GiB of the {available}GiB a device has" in run["error"]["message"]
            continue
        assert run["ok"], run["error"]
        assert run["environment"]["target"]["target"] == "v5e:1x1"  # the chip: one v5e
        got = {f: run["per_device"][f] for f in FIELDS}
        assert got == row["memory"], name
        compared += 1
    assert compared == 4
    assert result.json()["capacity"] == CHIP["bytes_limit"]
    # Refused by the compiler for want of room is "does not fit" (exit 1, SHL904), not a failure.
    assert result.code == 1
    (refused,) = [f for f in result.json()["findings"] if f["code"] == "SHL904"]
    assert refused["probe"] == "shardlint_probe_decoder_1b_train_step"


@pytest.mark.memory
@pytest.mark.slow
@needs_flax
@needs_libtpu
def test_target_with_the_installed_pair(shardlint_memory: Callable[..., CliResult]) -> None:
    result = shardlint_memory(str(SEED_PROBES), "--target", "tpu-v5e:2x2", "--devices", "1,4",
                              "--no-whatif", "--format", "json", "--quiet", cwd=REPO)
    assert result.code == 0, result.err
    data = result.json()
    assert data["hardware"] == "TPU-v5e" and data["capacity"] == CHIP["bytes_limit"]
    for name, by_count in _runs(result).items():
        one, four = by_count[1], by_count[4]
        assert one["backend"] == "tpu" and one["environment"]["target"]["libtpu"] == _libtpu()
        assert four["environment"]["device_count"] == 4
        assert four["environment"]["target"]["target"] == "v5e:2x2"
        # The posted init leaves its parameters on one device, as on the CPU (its pitfall).
        assert four["devices_used"] == (1 if name == "shardlint_probe_original" else 4)
        # What depends on shapes and TPU layouts alone is the chip's, whatever libtpu compiled it.
        assert {f: one["per_device"][f] for f in SHAPE_FIELDS} == \
            {f: CHIP["probes"][name]["memory"][f] for f in SHAPE_FIELDS}, name
    text = shardlint_memory(f"{SEED_PROBES}:shardlint_probe_fixed", "--target", "tpu-v5e:2x2",
                            "--devices", "4", "--no-whatif", "--quiet", cwd=REPO)
    assert f"tpu-v5e:2x2 (TPU compiler, libtpu {_libtpu()}, on this host)" in text.out
    assert "fits TPU-v5e (15.75 GiB)" in text.out


@pytest.mark.memory
@needs_flax
@needs_libtpu
def test_a_concrete_value_under_the_target_mesh_names_its_line(
        shardlint_memory: Callable[..., CliResult], write_probe: Callable[[str, str], Path]
) -> None:
    path = write_probe("concrete_probe.py", """\
        import jax
        import jax.numpy as jnp


        def shardlint_probe_concrete():
            mesh = jax.make_mesh((jax.device_count(),), ("data",))
            with jax.set_mesh(mesh):
                key = jax.random.key(0)
                return jax.jit(lambda k: jax.random.normal(k, (8,))).lower(key)


        def shardlint_probe_abstract():
            mesh = jax.make_mesh((jax.device_count(),), ("data",))
            key = jax.eval_shape(lambda: jax.random.key(0))
            with jax.set_mesh(mesh):
                return jax.jit(lambda k: jax.random.normal(k, (8,))).lower(key)
        """)
    result = shardlint_memory(str(path), "--target", "tpu-v5e:2x2", "--no-whatif",
                              "--format", "json", "--quiet")
    runs = _runs(result)
    error = runs["shardlint_probe_concrete"][4]["error"]
    assert error["kind"] == "concrete-on-target"
    assert "concrete_probe.py:8 makes a concrete value" in error["message"]
    assert "jax.ShapeDtypeStruct" in error["message"]
    assert runs["shardlint_probe_abstract"][4]["ok"]
    assert result.code == 2


@pytest.mark.memory
@pytest.mark.slow
@needs_libtpu
def test_capacities_are_the_compilers() -> None:
    """The TPU table's figures are read from the compiler, not written from a datasheet."""
    code = f"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("t", {str(REPO / 'shardlint/memory/worker/target.py')!r})
t = importlib.util.module_from_spec(spec); spec.loader.exec_module(t)
print(json.dumps({{g: t.compiler_limit(t.Topology(g + ":2x2", 1)) for g in ("v5e", "v6e")}}))
"""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
    got = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                    env=env, timeout=300, check=True).stdout.splitlines()[-1])
    # v5e: the chip's bytes_limit, 52,736 B above what libtpu lets one program hold.
    assert 0 <= CHIP["bytes_limit"] - got["v5e"] < 1 << 20
    assert abs(find_accelerator("TPU-v6e").bytes_per_device - got["v6e"]) < 1 << 20


# --- `--fit` from a step the TPU compiler refuses ----------------------------------------------
_WIDE = """\
    \"\"\"One 20480 x 65536 fp32 kernel (5 GiB) trained with Adam, data-parallel: the kernel, its
    moments and its gradients on every device. The TPU compiler refuses it on a v5e.\"\"\"
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    import optax
    from jax.sharding import AxisType, NamedSharding, PartitionSpec

    RULES = (("batch", "data"), ("embed", None), ("mlp", None))


    class Wide(nn.Module):
        @nn.compact
        def __call__(self, x):
            init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
            return nn.Dense(65536, kernel_init=init, use_bias=False)(x)


    def step_for(rules):
        model, tx = Wide(), optax.adam(1e-3)
        n = jax.device_count()
        mesh = jax.make_mesh((n,), ("data",), axis_types=(AxisType.Auto,))
        x = jax.ShapeDtypeStruct((2 * n, 20480), jnp.float32,
                                 sharding=NamedSharding(mesh, PartitionSpec("data")))
        key = jax.eval_shape(lambda: jax.random.key(0))

        def init(key):
            params = model.init(key, jnp.zeros((1, 20480)))["params"]
            return params, tx.init(params)

        def step(state, x):
            params, opt = state
            grads = jax.grad(lambda p: jnp.mean(model.apply({"params": p}, x) ** 2))(params)
            updates, opt = tx.update(grads, opt, params)
            return optax.apply_updates(params, updates), opt

        with jax.set_mesh(mesh), nn.logical_axis_rules(rules):
            boxed = jax.eval_shape(init, key)
            shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(boxed), mesh, rules)
            is_box = lambda b: isinstance(b, nn.Partitioned)
            raw = jax.tree.map(lambda b: b.value if is_box(b) else b, boxed, is_leaf=is_box)
            state = jax.tree.map(lambda b, s: jax.ShapeDtypeStruct(b.shape, b.dtype, sharding=s),
                                 raw, shardings)
            return jax.jit(step, in_shardings=(shardings, x.sharding), out_shardings=shardings,
                           donate_argnums=0).lower(state, x)


    def shardlint_probe_wide_step():
        return step_for(RULES)
    """


@pytest.mark.memory
@pytest.mark.slow
@needs_flax
@needs_libtpu
def test_fit_starts_from_a_step_the_tpu_compiler_refuses(
        shardlint_memory: Callable[..., CliResult], write_probe: Callable[[str, str], Path]
) -> None:
    from shardlint.memory.plan.table import paste

    path = write_probe("wide.py", _WIDE)
    result = shardlint_memory(str(path), "--target", "tpu-v5e:2x2", "--fit", "--no-whatif",
                              "--format", "json", "--quiet")
    assert result.code == 1, result.err  # the probe as written still does not fit
    run = _runs(result)["shardlint_probe_wide_step"][4]
    assert run["error"]["kind"] == "does-not-fit"
    fit = run["fit"]
    base = fit["baseline"]
    assert fit["status"] == "plans" and base["refused"] is True and base["fits"] is False
    # A floor from what is known without the compile: the 5 GiB kernel and its two Adam moments
    # as arguments (and outputs, aliased), and the temporaries the compiler counted.
    gib = 1 << 30
    assert base["peak_bytes"] >= 15 * gib + 15.75 * gib
    plan = fit["plans"][0]
    assert plan["fits"] and plan["peak_bytes"] < CHIP["bytes_limit"] and not plan.get("refused")
    assert [(c["name"], c["to"]) for c in plan["changes"]] in ([("mlp", "data")],
                                                               [("embed", "data")])
    # The plan's table pasted into the probe compiles, with the same compiler, to its figure.
    path.write_text(paste(path.read_text(encoding="utf-8"), fit["table"], plan["code"]),
                    encoding="utf-8")
    again = shardlint_memory(str(path), "--target", "tpu-v5e:2x2", "--no-whatif",
                             "--format", "json", "--quiet")
    assert again.code == 0, again.err
    fresh = _runs(again)["shardlint_probe_wide_step"][4]
    assert fresh["per_device"]["peak_estimate"] == plan["peak_bytes"]
