"""How long the memory check takes and how much host memory its worker needs.

    python bench/memory_speed.py [--devices 8] [--probe examples/decoder_1b/probe.py]

Prints wall time (worker start, jax import, trace, lower, compile) and the worker's peak RSS for
the ~1B-parameter decoder. The global training state is 12 GiB; a peak RSS far below it shows that
no parameter was materialised. Targets on a 2-core CI machine: <= 30 s and <= 3 GiB.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from shardlint.memory.probes import resolve
from shardlint.memory.runner import WorkerOptions, run_probes
from shardlint.memory.units import format_bytes


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--probe", default="examples/decoder_1b/probe.py")
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    probes = resolve([args.probe], ROOT)
    options = WorkerOptions(python=args.python, cwd=ROOT, timeout=120, memory_limit=8 * 1024**3)
    started = time.perf_counter()
    runs = run_probes(probes, args.devices, options)
    wall = time.perf_counter() - started
    status = 0
    for run in runs:
        if run.error is not None or run.facts is None:
            print(f"{run.probe.function}: FAILED {run.error.message if run.error else ''}")
            status = 1
            continue
        facts, env = run.facts, run.environment
        state = sum(leaf["bytes"] for leaf in facts["leaves"] if leaf["role"] == "arg")
        t = facts["timings"]
        print(f"probe            {run.probe.display(ROOT)} @ {args.devices} simulated devices")
        print(
            f"wall time        {wall:.1f} s (jax import {env.get('import_s', 0):.1f} s, "
            f"probe call {t.get('call_s', 0):.1f} s, trace {t.get('trace_s', 0):.1f} s, "
            f"lower {t.get('lower_s', 0):.1f} s, compile {t.get('compile_s', 0):.1f} s, "
            f"inspect {t.get('inspect_s', 0):.1f} s, probe total {t.get('probe_s', 0):.1f} s)"
        )
        print(f"worker peak RSS  {format_bytes(run.worker_max_rss)}")
        print(f"global state     {format_bytes(state)} (arguments, all devices together)")
        print(
            f"per device       arguments {format_bytes(facts['memory']['argument'])}, "
            f"temporaries {format_bytes(facts['memory']['temp'])}"
        )
        materialised = run.worker_max_rss is not None and run.worker_max_rss >= state
        print(f"materialised     {'YES: the worker held the state' if materialised else 'no'}")
        print(
            f"targets          wall <= 30 s: {'ok' if wall <= 30 else 'MISSED'}; "
            f"RSS <= 3 GiB: {'ok' if (run.worker_max_rss or 0) <= 3 * 1024**3 else 'MISSED'}"
        )
    return status


if __name__ == "__main__":
    raise SystemExit(main())
