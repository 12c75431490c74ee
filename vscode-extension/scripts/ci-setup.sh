#!/usr/bin/env bash
# What CI needs for the VS Code extension's tests (tests/e2e/test_vscode.py), on Debian 12 with
# Node 20 and network access to the package registries only:
#   1. OS packages: chromium (the browser playwright-core drives), fonts, and what code-server's
#      native modules build with;
#   2. npm ci, then `npm run package` -> vscode-extension/shardlint-<version>.vsix;
#   3. code-server from the npm registry into a cache outside the checkout
#      (${XDG_CACHE_HOME:-~/.cache}/shardlint-e2e/code-server-<version>, where the test looks).
# env: SHARDLINT_BUNDLE_PYTHON  the Python whose pip fills bundled/libs (default: the
#      repository's .venv/bin/python when there is one, else python3)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SHARDLINT_BUNDLE_PYTHON:-}" ] && [ -x ../.venv/bin/python ]; then
  export SHARDLINT_BUNDLE_PYTHON="$PWD/../.venv/bin/python"
fi
CODE_SERVER_VERSION=4.100.3   # the newest code-server that runs on Node 20
t0=$SECONDS

need=()
for p in chromium fonts-dejavu-core build-essential python3 libkrb5-dev ripgrep; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "ci-setup: missing OS packages (run as root): ${need[*]}" >&2; exit 1; fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
major=$(node -p 'process.versions.node.split(".")[0]')
[ "$major" -ge 20 ] || { echo "ci-setup: needs Node >= 20, found $(node --version)" >&2; exit 1; }

npm ci --no-audit --no-fund
npm run package
echo "ci-setup: built $(ls shardlint-*.vsix)"

dest="${XDG_CACHE_HOME:-$HOME/.cache}/shardlint-e2e/code-server-$CODE_SERVER_VERSION"
home=$(mktemp -d)  # code-server writes a config file into HOME on its first run
if ! HOME=$home XDG_CONFIG_HOME=$home/.config XDG_DATA_HOME=$home/.local/share "$dest/code-server" --version >/dev/null 2>&1; then
  # One retry: code-server's post-install builds native modules and has failed once in a while.
  bash test/e2e/install-code-server.sh "$CODE_SERVER_VERSION" "$dest" \
    || { rm -rf "$dest"; bash test/e2e/install-code-server.sh "$CODE_SERVER_VERSION" "$dest"; }
fi
rm -rf "$home"
echo "ci-setup: code-server at $dest/code-server; ready in $((SECONDS - t0)) s"
