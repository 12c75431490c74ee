"""`shardlint memory --fit` on a ~60B-parameter fp32 decoder that does not fit H100-80GB at 64
simulated devices: how long the search takes, how many compiles, the peak before and after, and
the peak of a fresh compile of the probe with the plan's table pasted in.

    python bench/fit_large.py [--probe bench/fit_large_probe.py] [--devices 64]
    python bench/fit_large.py --probe examples/decoder_1b/data_parallel.py --target tpu-v5e:16x16

Fails (exit 1) when no plan fits, when the whole run takes more than --limit (120 s), or when the
fresh compile's peak is more than 5% away from the plan's. With --target every compile, the fresh
one too, is the TPU compiler's for that topology (libtpu installed, no TPU needed). Prints the load
average before and after: the machine may be shared.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shardlint.memory.plan import describe  # noqa: E402
from shardlint.memory.plan.table import paste  # noqa: E402
from shardlint.memory.units import format_bytes  # noqa: E402


def memory(probe: Path, where: list[str], *extra: str) -> tuple[dict, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "shardlint", "memory", str(probe), *where,
         "--format", "json", "--quiet", *extra],
        capture_output=True, text=True, env=env, cwd=probe.parent, check=False)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"shardlint memory failed ({done.returncode}):\n{done.stderr[-3000:]}")
    (run,) = json.loads(done.stdout)["probes"][0]["runs"]
    return run, wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--probe", default=str(ROOT / "bench" / "fit_large_probe.py"))
    parser.add_argument("--devices", type=int, default=None,
                        help="device count (default 64; with --target, the whole topology)")
    parser.add_argument("--hardware", default="H100-80GB")
    parser.add_argument("--target", default=None,
                        help="compile for a TPU topology with libtpu (tpu-v5e:16x16): the "
                        "TPU compiler's figures and the target's capacity, not --hardware")
    parser.add_argument("--limit", type=float, default=120.0,
                        help="fail when the --fit command takes longer (seconds; default 120)")
    args = parser.parse_args()
    probe = Path(args.probe).resolve()
    if args.target:
        where = ["--target", args.target] + (["--devices", str(args.devices)]
                                             if args.devices else [])
        shown = f"{args.target} (TPU compiler)"
    else:
        where = ["--devices", str(args.devices or 64), "--hardware", args.hardware]
        shown = f"{args.devices or 64} simulated devices, {args.hardware}"
    load = os.getloadavg()
    print(f"machine          {os.cpu_count()} cores, load average {load[0]:.2f} before")
    run, wall = memory(probe, where, "--fit")
    fit = run["fit"]
    base = fit["baseline"]["peak_bytes"]
    floor = "at least " if fit["baseline"].get("refused") else ""
    print(f"probe            {probe.relative_to(ROOT)} @ {run['devices']} devices, {shown}")
    print(f"--fit wall time  {wall:.1f} s (whole command: worker start, baseline compile, "
          f"search {fit['seconds']:.1f} s)")
    print(f"compiles         {fit['compiles']} in the search ({fit['failed_compiles']} failed)")
    print(f"peak before      {floor}{format_bytes(base)} per device"
          + (" (the TPU compiler refuses the step)" if floor else ""))
    if not fit["plans"]:
        print(f"no plan fits: {fit.get('status')}; best "
              f"{format_bytes((fit.get('best') or {}).get('peak_bytes') or 0)}")
        return 1
    plan = fit["plans"][0]
    print(f"plan 1           {describe(plan['changes'])}; peak {format_bytes(plan['peak_bytes'])}"
          f" ({len(fit['plans'])} plan(s) fit)")
    status = 0 if wall <= args.limit else 1
    if any(c["kind"] == "mesh" for c in plan["changes"]):
        print("plan 1 changes the mesh shape: the pasted table alone does not reproduce it")
        return 1
    with tempfile.TemporaryDirectory(prefix="shardlint-fit-") as folder:
        for sibling in probe.parent.glob("*.py"):  # a probe may import its neighbours
            (Path(folder) / sibling.name).write_bytes(sibling.read_bytes())
        copy = Path(folder) / probe.name
        copy.write_text(paste(probe.read_text(encoding="utf-8"), fit["table"], plan["code"]),
                        encoding="utf-8")
        again, wall2 = memory(copy, where)
    peak = again["per_device"]["peak_estimate"]
    off = abs(peak - plan["peak_bytes"]) / plan["peak_bytes"]
    print(f"pasted, compiled {format_bytes(peak)} per device ({off:.2%} from the plan's; "
          f"{wall2:.1f} s)")
    print(f"machine          load average {os.getloadavg()[0]:.2f} after")
    if off > 0.05:
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
