"""Lint real JAX code nobody here wrote and compare with a bare `ast.parse` of the same files.

Fetches the sources of the flax, optax, maxtext, praxis and easydel wheels once
(`pip download --no-deps --only-binary=:all: --python-version 3.12`) into a cache outside the
repository (default ~/.cache/shardlint-bench, or $SHARDLINT_BENCH_CACHE), then prints files,
lines, wall seconds and lines/s for each. Target: shardlint cold within 2x of the bare parse,
single process.

    python bench/lint_speed.py [--packages flax optax ...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from pathlib import Path

PACKAGES = ["flax", "optax", "maxtext", "praxis", "easydel"]


def cache_dir() -> Path:
    env = os.environ.get("SHARDLINT_BENCH_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "shardlint-bench"


def fetch(packages: list[str]) -> Path:
    root = cache_dir()
    wheels = root / "wheels"
    src = root / "src"
    wheels.mkdir(parents=True, exist_ok=True)
    for pkg in packages:
        target = src / pkg
        if target.is_dir() and any(target.rglob("*.py")):
            continue
        have = list(wheels.glob(f"{pkg.replace('-', '_')}-*.whl"))
        if not have:
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--python-version",
                "3.12",
                "-d",
                str(wheels),
                pkg,
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print(
                    f"  could not download {pkg}: {proc.stderr.strip().splitlines()[-1:]}",
                    file=sys.stderr,
                )
                continue
            have = list(wheels.glob(f"{pkg.replace('-', '_')}-*.whl"))
        if not have:
            continue
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(sorted(have)[-1]) as zf:
            for name in zf.namelist():
                if name.endswith(".py"):
                    zf.extract(name, target)
    return src


def bare_parse(files: list[Path]) -> float:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for f in files:
            text = f.read_text(encoding="utf-8", errors="replace")
            try:
                ast.parse(text)
            except SyntaxError:
                pass
    return time.perf_counter() - start


def shardlint_cold(root: Path, files: list[Path]) -> tuple[float, int]:
    from shardlint.config import Config
    from shardlint.engine import Engine

    start = time.perf_counter()
    engine = Engine(Config(root=root), use_cache=False)
    findings = engine.lint_paths(files)
    return time.perf_counter() - start, len(findings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", nargs="*", default=PACKAGES)
    parser.add_argument("--repeat", type=int, default=3, help="take the best of N runs")
    args = parser.parse_args()
    src = fetch(args.packages)
    files = sorted(p for pkg in args.packages for p in (src / pkg).rglob("*.py"))
    if not files:
        print("no sources fetched", file=sys.stderr)
        return 2
    lines = sum(f.read_text(encoding="utf-8", errors="replace").count("\n") for f in files)
    print(f"corpus: {', '.join(args.packages)} -> {len(files)} files, {lines:,} lines")
    parse_t = min(bare_parse(files) for _ in range(args.repeat))
    runs = [shardlint_cold(src, files) for _ in range(args.repeat)]
    lint_t = min(r[0] for r in runs)
    print(f"{'':<18}{'wall s':>8}{'lines/s':>12}")
    print(f"{'ast.parse (bare)':<18}{parse_t:>8.2f}{lines / parse_t:>12,.0f}")
    print(f"{'shardlint cold':<18}{lint_t:>8.2f}{lines / lint_t:>12,.0f}   ({runs[0][1]} findings)")
    print(f"ratio shardlint / parse: {lint_t / parse_t:.2f}x (target <= 2.0x)")
    return 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory():
        raise SystemExit(main())
