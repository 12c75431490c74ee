"""Measure the shipped probes on a TPU chip, and record what the chip's compiler and runtime say.

    python bench/tpu_chip.py --out chip.json [--peak PROBE ...] [--skip-peak]

Run on a machine whose JAX sees a TPU (JAX_PLATFORMS unset). For every probe function of the
shipped examples (`examples/*/probe*.py`, 1 device) it lowers and compiles the step as JAX
would, timing both, and records the compiler's figures (`Compiled.memory_analysis()`: argument,
output, alias, temp, generated code) with the jax, jaxlib and libtpu versions and the chip's
`bytes_limit`. For the probes named by `--peak` it also measures the step's true peak by
headroom (`shardlint/memory/worker/device_peak.py`, loaded by path: the same code
`shardlint memory --platform native` runs) and reads `peak_bytes_in_use` after one plain run
for comparison.

The figures recorded in `tests/memory/data/tpu_chip.json` came from this script;
`tests/memory/test_tpu_target.py` holds `shardlint memory --target` on a CPU host to them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE_FILES = ("examples/seed_ensemble/probes.py", "examples/decoder_1b/probe.py")
# decoder_1b itself needs 19 GiB of temporaries on one chip: the chip refuses it at compile.
DEFAULT_PEAK = ("shardlint_probe_fixed_train_step", "shardlint_probe_decoder_470m_train_step")
FIELDS = {"argument": "argument_size_in_bytes", "output": "output_size_in_bytes",
          "alias": "alias_size_in_bytes", "temp": "temp_size_in_bytes",
          "generated_code": "generated_code_size_in_bytes"}


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _lower(value):
    import jax

    if isinstance(value, jax.stages.Lowered):
        return value
    fn, args = value[0], value[1]
    kwargs = value[2] if len(value) == 3 else {}
    return fn.lower(*args, **kwargs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--peak", nargs="*", default=list(DEFAULT_PEAK))
    parser.add_argument("--skip-peak", action="store_true")
    args = parser.parse_args(argv)

    import jax

    peak = _load("_chip_device_peak", ROOT / "shardlint/memory/worker/device_peak.py")
    device = jax.devices()[0]
    stats = device.memory_stats() or {}
    record = {
        "how": "bench/tpu_chip.py on the chip: lower + compile per probe at 1 device, "
               "Compiled.memory_analysis(); peak by headroom (device_peak.py)",
        "date": time.strftime("%Y-%m-%d"),
        "backend": jax.default_backend(), "device_kind": device.device_kind,
        "bytes_limit": stats.get("bytes_limit"),
        "versions": {d: _version(d) for d in ("jax", "jaxlib", "libtpu", "libtpu-nightly",
                                                "flax", "optax")},
        "probes": {},
    }
    print(json.dumps({k: v for k, v in record.items() if k != "probes"}), flush=True)
    for index, rel in enumerate(PROBE_FILES):
        module = _load(f"_chip_probe_{index}", ROOT / rel)
        for name in sorted(n for n in dir(module) if n.startswith("shardlint_probe_")):
            row: dict = {"file": rel}
            try:
                t0 = time.perf_counter()
                lowered = _lower(getattr(module, name)())
                t1 = time.perf_counter()
                compiled = lowered.compile()
                t2 = time.perf_counter()
            except Exception as exc:  # noqa: BLE001 - a step that does not fit is a result
                row["error"] = f"{type(exc).__name__}: {str(exc)[:600]}"
                record["probes"][name] = row
                print(name, row["error"][:300], flush=True)
                continue
            analysis = compiled.memory_analysis()
            row["memory"] = {k: int(getattr(analysis, f)) for k, f in FIELDS.items()}
            m = row["memory"]
            row["compiler_total"] = m["argument"] + m["output"] - m["alias"] + m["temp"]
            row["lower_s"], row["compile_s"] = round(t1 - t0, 3), round(t2 - t1, 3)
            if not args.skip_peak and name in args.peak:
                t3 = time.perf_counter()
                row["headroom"] = peak.measure_peak(compiled)
                row["headroom_s"] = round(time.perf_counter() - t3, 3)
                row["allocator"] = peak._allocator_peak(compiled, peak._step_devices(compiled))
            record["probes"][name] = row
            print(name, json.dumps({k: v for k, v in row.items() if k != "headroom"}),
                  flush=True)
            if "headroom" in row:
                h = row["headroom"]
                print("  headroom", {k: h.get(k) for k in ("lower", "upper", "compiler_bound",
                                                          "bytes_limit", "baseline", "seconds",
                                                          "error")},
                      len(h.get("trials", ())), "trials", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
