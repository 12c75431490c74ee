#!/usr/bin/env bash
# The TPU compiler (libtpu) for `shardlint memory --target` and its tests (idempotent):
# 1. into .venv, the libtpu that .venv's jax pins (`jax[tpu]==<that jax>`);
# 2. .venv-chip: the jax, libtpu, flax and optax that measured tests/memory/data/tpu_chip.json on
#    a TPU v5e chip, so tests/memory/test_tpu_target.py can hold the figures byte for byte.
# Without a registry that has libtpu, it says so and exits 0: those tests then skip, saying why.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/venv.sh
jax=$(.venv/bin/python -c 'import jax; print(jax.__version__)')
if ! .venv/bin/python -m pip install --quiet "jax[tpu]==$jax"; then
  echo "tpu-env: no libtpu for jax $jax here: the TPU target tests skip" >&2
  exit 0
fi
pins=$(.venv/bin/python - <<'PY'
import json
v = json.load(open("tests/memory/data/tpu_chip.json"))["versions"]
print(f"jax=={v['jax']} jaxlib=={v['jaxlib']} libtpu=={v['libtpu']} flax=={v['flax']} optax=={v['optax']}")
PY
)
if [ ! -x .venv-chip/bin/python ]; then
  py=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
  "$py" -m venv .venv-chip
fi
# shellcheck disable=SC2086
if ! .venv-chip/bin/python -m pip install --quiet $pins; then
  echo "tpu-env: cannot install the chip's pair ($pins): the byte-for-byte test skips" >&2
  rm -rf .venv-chip
  exit 0
fi
echo "ready: jax $jax + libtpu in .venv; $pins in .venv-chip" >&2
