"""The CPU-simulated figure against the TPU compiler's, for the shipped probes, beside the peaks
measured on a TPU v5e chip.

    python bench/memory_targets.py [--devices 1,4,16] [--target tpu-v5e:4x4] [--python PY]

Runs `shardlint memory` twice on `examples/` (what-ifs off): once on N simulated CPU devices,
once with `--target` (libtpu must be installed: `bash scripts/tpu-env.sh`). Prints per probe and
device count the peak each gives (arguments + outputs - aliased + temporaries, or the compiler's
own peak where it is larger), the CPU figure's error against the TPU compiler's, and at one
device the chip's measured bracket from `tests/memory/data/tpu_chip.json` (measured by headroom
on the chip; `bench/tpu_chip.py`).

What each figure is: the TPU compiler's peak is an upper bound (on the chip it was 0.4% to 11%
above the measured peak); the CPU figure is an estimate (another compiler's fusion and
scheduling); the chip's bracket is a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBES = ("examples/seed_ensemble/probes.py", "examples/decoder_1b/probe.py")
MB = 1e6


def memory(python: str, *extra: str) -> tuple[dict, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "shardlint", "memory", *PROBES, "--no-whatif", "--format",
         "json", "--quiet", "--python", python, *extra],
        capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1, 2) or not done.stdout.strip():
        sys.exit(f"shardlint memory failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout), wall


def peaks(report: dict) -> dict[tuple[str, int], int | str]:
    out: dict[tuple[str, int], int | str] = {}
    for probe in report["probes"]:
        for run in probe["runs"]:
            key = (probe["function"].removeprefix("shardlint_probe_"), run["devices"])
            if run["ok"]:
                out[key] = run["per_device"]["peak_estimate"]
            else:
                message = (run.get("error") or {}).get("message", "failed")
                out[key] = "does not fit" if "RESOURCE_EXHAUSTED" in message else "failed"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", default="1,4,16")
    parser.add_argument("--target", default="tpu-v5e:4x4")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter with jax and libtpu that runs the probes")
    args = parser.parse_args()
    chip = json.loads((ROOT / "tests/memory/data/tpu_chip.json").read_text())
    cpu, cpu_s = memory(args.python, "--devices", args.devices)
    tpu, tpu_s = memory(args.python, "--devices", args.devices, "--target", args.target)
    cpu_peaks, tpu_peaks = peaks(cpu), peaks(tpu)
    env = tpu["probes"][0]["runs"][0].get("environment", {})
    print(f"CPU-simulated ({cpu_s:.0f} s) against the TPU compiler for {args.target} "
          f"(libtpu {env.get('target', {}).get('libtpu', '?')}, jax {env.get('jax', '?')}; "
          f"{tpu_s:.0f} s); chip: {chip['device_kind']}, jax {chip['versions']['jax']}, "
          f"libtpu {chip['versions']['libtpu']}")
    header = f"{'probe':28s} {'devices':>7s} {'CPU-simulated':>14s} {'TPU compiler':>13s} " \
             f"{'CPU error':>9s}  chip: compiler / measured peak"
    print(header)
    print("-" * len(header))
    for key in sorted(tpu_peaks, key=lambda k: (k[0], k[1])):
        name, devices = key
        c, t = cpu_peaks.get(key, "-"), tpu_peaks[key]
        show = lambda v: f"{v / MB:,.1f} MB" if isinstance(v, int) else str(v)
        error = f"{100 * (c - t) / t:+.0f}%" if isinstance(c, int) and isinstance(t, int) else "-"
        row = chip["probes"].get(f"shardlint_probe_{name}", {})
        on_chip = ""
        if devices == 1 and row:
            head = row.get("headroom") or {}
            measured = f"{head['lower'] / MB:,.1f}-{head['upper'] / MB:,.1f} MB" \
                if head.get("lower") else "not run"
            on_chip = f"{row['compiler_total'] / MB:,.1f} MB / {measured}" \
                if "compiler_total" in row else "does not fit"
        print(f"{name:28s} {devices:7d} {show(c):>14s} {show(t):>13s} {error:>9s}  {on_chip}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
