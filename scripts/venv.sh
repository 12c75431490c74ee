#!/usr/bin/env bash
# Create .venv with shardlint and everything its tests need (idempotent).
# jax >= 0.11 needs Python >= 3.12: use the first python3.13 / python3.12 that runs (pyenv
# shims count: PYENV_VERSION picks the installed 3.x.y for them).
set -euo pipefail
cd "$(dirname "$0")/.."
pick() {
  for v in 3.13 3.12; do
    if PYENV_VERSION="$v" "python$v" -c 'import sys' >/dev/null 2>&1; then
      echo "env PYENV_VERSION=$v python$v"; return 0
    fi
  done
  if python3 -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    echo python3; return 0
  fi
  echo "shardlint: needs Python >= 3.12 for jax (found $(python3 --version 2>&1))" >&2
  return 1
}
PY="$(pick)"
if [ ! -x .venv/bin/python ]; then
  $PY -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
.venv/bin/python -m pip install --quiet -e '.[memory,test]' -c scripts/constraints.txt
echo "ready: $(.venv/bin/python --version) in .venv" >&2
