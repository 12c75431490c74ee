#!/usr/bin/env bash
# The wheel round trip: build the sdist and the wheel from a clean copy of this checkout (its
# tracked and untracked-but-not-ignored files), install the wheel into a fresh venv and run
# `check`, `rule`, `server` and `memory` from a temporary folder, with no source tree on sys.path.
#
#   bash scripts/wheel_roundtrip.sh [PYTHON]
#
# PYTHON (default: .venv/bin/python, as scripts/venv.sh makes it) builds without build isolation
# (it needs the test extra's `build` and `setuptools`) and lends its site-packages to the fresh
# venv through a .pth file, so nothing is downloaded: the wheel is installed with --no-deps, and
# the other environment's .pth files (its editable shardlint) are not read. With
# SHARDLINT_ROUNDTRIP_DEPS=registry the wheel's dependencies are installed from the package
# registry instead, as a user's `pip install shardlint-*.whl` would.
# SHARDLINT_ROUNDTRIP_KEEP=1 keeps the temporary folder and prints where it is.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${1:-$root/.venv/bin/python}"
[ -x "$py" ] || { echo "wheel_roundtrip: no interpreter at $py (run: bash scripts/venv.sh)" >&2; exit 2; }
command -v git >/dev/null || { echo "wheel_roundtrip: needs git to list the checkout's files" >&2; exit 2; }

work="$(mktemp -d "${TMPDIR:-/tmp}/shardlint-wheel.XXXXXX")"
if [ "${SHARDLINT_ROUNDTRIP_KEEP:-}" = 1 ]; then
  echo "wheel_roundtrip: keeping $work" >&2
else
  trap 'rm -rf "$work"' EXIT
fi
step() { echo "wheel_roundtrip: $*" >&2; }
fail() { echo "wheel_roundtrip: FAILED: $*" >&2; exit 1; }

# 1. A clean copy: what a fresh clone of this working tree holds, no build outputs or caches.
git -C "$root" ls-files -z --cached --others --exclude-standard >"$work/files"
"$py" - "$root" "$work/src" "$work/files" <<'EOF' || fail "copying the checkout"
import shutil, sys
from pathlib import Path
root, dest, listing = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
for name in filter(None, listing.read_bytes().decode().split("\0")):
    src = root / name
    if src.is_file():  # a tracked file deleted in the working tree is not in a clone of it
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / name)
EOF
[ -f "$work/src/pyproject.toml" ] || fail "the copy has no pyproject.toml"

# 2. The sdist, then the wheel built from the sdist (so the sdist must hold all the wheel needs).
step "building the sdist and the wheel with $("$py" --version)"
"$py" -m build --no-isolation --outdir "$work/dist" "$work/src" >"$work/build.log" 2>&1 \
  || { tail -n 40 "$work/build.log" >&2; fail "python -m build"; }
version="$("$py" -c 'import ast, sys; t = ast.parse(open(sys.argv[1]).read()); print(next(n.value.value for n in t.body if isinstance(n, ast.Assign) and n.targets[0].id == "__version__"))' "$work/src/shardlint/__init__.py")"
sdist="$work/dist/shardlint-$version.tar.gz"
wheel="$work/dist/shardlint-$version-py3-none-any.whl"
[ -f "$sdist" ] || fail "no $(basename "$sdist") in dist/: $(ls "$work/dist")"
[ -f "$wheel" ] || fail "no $(basename "$wheel") in dist/: $(ls "$work/dist")"
"$py" - "$sdist" "$wheel" "$version" <<'EOF' || fail "the archives' contents"
import sys, tarfile, zipfile
sdist, wheel, version = sys.argv[1:]
names = set(tarfile.open(sdist).getnames())
top = f"shardlint-{version}/"
for need in ("pyproject.toml", "README.md", "shardlint/__init__.py", "shardlint/py.typed"):
    assert top + need in names, f"the sdist lacks {need}"
w = zipfile.ZipFile(wheel)
files = set(w.namelist())
for need in ("shardlint/__init__.py", "shardlint/py.typed", "shardlint/memory/worker/worker.py",
             "shardlint/lsp/server.py", f"shardlint-{version}.dist-info/entry_points.txt"):
    assert need in files, f"the wheel lacks {need}"
assert not any(n.startswith(("tests/", "bench/", "examples/")) for n in files), "stray files"
meta = w.read(f"shardlint-{version}.dist-info/METADATA").decode()
assert f"\nVersion: {version}\n" in meta, "the wheel's metadata has another version"
print(f"wheel_roundtrip: sdist {len(names)} entries, wheel {len(files)} files", file=sys.stderr)
EOF

# 3. A fresh venv with the wheel alone.
step "installing $(basename "$wheel") into a fresh venv"
"$py" -m venv "$work/venv"
venv_py="$work/venv/bin/python"
if [ "${SHARDLINT_ROUNDTRIP_DEPS:-}" = registry ]; then
  "$venv_py" -m pip install --quiet --disable-pip-version-check "$wheel[memory]"
else
  "$venv_py" -m pip install --quiet --disable-pip-version-check --no-deps --no-index "$wheel"
  purelib="$("$venv_py" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
  "$py" -c 'import sysconfig; print(sysconfig.get_path("purelib")); print(sysconfig.get_path("platlib"))' \
    | sort -u >"$purelib/_shardlint_roundtrip_deps.pth"
fi

# 4. Run it from a folder outside the source tree, on a copy of the shipped examples.
mkdir -p "$work/run"
cp -R "$root/examples" "$work/run/examples"
cd "$work/run"
bin="$work/venv/bin"
where="$("$venv_py" -c 'import shardlint; print(shardlint.__file__)')"
case "$where" in
  "$work/venv/"*) step "shardlint imported from $where" ;;
  *) fail "shardlint was imported from $where, not from the wheel" ;;
esac

[ "$("$bin/shardlint" --version)" = "shardlint $version" ] || fail "shardlint --version"

set +e
"$bin/shardlint" check --no-cache examples/ >"$work/check.txt"
code=$?
set -e
[ "$code" = 1 ] || { cat "$work/check.txt" >&2; fail "check examples/ exited $code, not 1"; }
grep -q '^examples/seed_ensemble/original.py:.* SHL102 ' "$work/check.txt" || fail "check: no SHL102"
"$py" -m shardlint check --no-cache examples/ >"$work/check-source.txt" || true
diff -u "$work/check-source.txt" "$work/check.txt" >&2 \
  || fail "the wheel's findings differ from the source tree's"
step "check: $(tail -n 1 "$work/check.txt")"

"$bin/shardlint" rule SHL401 >"$work/rule.txt" || fail "rule SHL401"
grep -q 'SHL401' "$work/rule.txt" || fail "rule SHL401 does not name the rule"
step "rule: $(head -n 1 "$work/rule.txt")"

info="$("$venv_py" "$root/scripts/lsp_hello.py" --root "$work/run" --expect-version "$version" \
  -- "$bin/shardlint" server)" || fail "the server's initialize round trip"
step "server: serverInfo $info"

"$bin/shardlint" memory examples/seed_ensemble/probes.py:shardlint_probe_fixed --devices 1,2 \
  --quiet >"$work/memory.txt" || { cat "$work/memory.txt" >&2; fail "memory"; }
grep -q "out\['params'\].*0.50x (ideal 0.50x) ideal" "$work/memory.txt" \
  || { cat "$work/memory.txt" >&2; fail "memory: the fixed probe's parameters do not halve"; }
step "memory: $(grep -m1 "out\['params'\]" "$work/memory.txt" | tr -s ' ')"
echo "wheel round trip: ok (shardlint $version)"
