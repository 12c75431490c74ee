#!/usr/bin/env bash
# Estimate vs measured peak on one real GPU, for the seed ensemble and the ~1B decoder.
#
#   OUT=gpu-out bash bench/gpu_check.sh
#
# Runs `shardlint memory` twice from the repository root, with nothing installed (the package is
# imported from the checkout): once simulating 1 CPU device (the estimate CI gets) and once on the
# GPU, where the compiler gives its own figures and the step runs once so each device's
# peak_bytes_in_use is read. Writes cpu.json, gpu.json, gpu.html and summary.txt to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
PY=${PYTHON:-python3}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PROBES="examples/seed_ensemble/probes.py examples/decoder_1b/probe.py"

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
"$PY" -c "import sys, jax, flax, optax; print(sys.version.split()[0], 'jax', jax.__version__, 'flax',
flax.__version__, 'optax', optax.__version__, jax.devices())" >> "$OUT/gpu.txt" 2>&1
cat "$OUT/gpu.txt"

time "$PY" -m shardlint.memory $PROBES --platform native --devices 1 --hardware H200-141GB \
    --timeout 240 --format json --html "$OUT/gpu.html" > "$OUT/gpu.json" 2> "$OUT/gpu.log"
echo "gpu run exit code $?"
time "$PY" -m shardlint.memory $PROBES --platform cpu --devices 1 --hardware H200-141GB \
    --timeout 240 --format json > "$OUT/cpu.json" 2> "$OUT/cpu.log"
echo "cpu run exit code $?"
tail -n 5 "$OUT/gpu.log" "$OUT/cpu.log"

"$PY" - "$OUT/cpu.json" "$OUT/gpu.json" <<'PYEOF' | tee "$OUT/summary.txt"
import json, sys

def runs(path):
    try:
        data = json.load(open(path))
    except (OSError, ValueError) as exc:
        print(f"{path}: {exc}")
        return {}
    return {p["function"]: p["runs"][0] for p in data["probes"]}

gib = lambda n: "-" if n is None else f"{n / 2**30:8.3f}"
cpu, gpu = runs(sys.argv[1]), runs(sys.argv[2])
print("GiB per device, 1 device          args+out-alias  temp(cpu) est(cpu)  temp(gpu) est(gpu)  measured  limit")
for name in cpu.keys() | gpu.keys():
    c, g = cpu.get(name, {}), gpu.get(name, {})
    if g.get("error") or c.get("error"):
        print(name, "ERROR", (g.get("error") or c.get("error"))["message"][:300])
        continue
    cp, gp = c.get("per_device", {}), g.get("per_device", {})
    limit = max((d.get("bytes_limit") or 0 for d in (g.get("measured") or {}).get("devices", [])), default=None)
    print(f"{name:34s} {gib(gp.get('state'))}      {gib(cp.get('temp'))} {gib(cp.get('peak_estimate'))}  "
          f"{gib(gp.get('temp'))} {gib(gp.get('peak_estimate'))}  {gib(g.get('measured_peak'))}  {gib(limit)}")
    if (g.get("measured") or {}).get("error"):
        print("   measured run error:", g["measured"]["error"])
PYEOF
