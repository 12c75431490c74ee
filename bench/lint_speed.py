"""Lint real JAX code nobody here wrote and compare with a bare `ast.parse` of the same files.

Fetches the sources of the flax, optax, maxtext, praxis and easydel wheels once
(`pip download --no-deps --only-binary=:all: --python-version 3.12`, at the pinned
versions of ``VERSIONS``) into a cache outside the
repository (default ~/.cache/shardlint-bench, or $SHARDLINT_BENCH_CACHE), then prints wall
seconds, CPU seconds and peak RSS as a user meets them (`shardlint check .` subprocesses on a
copy of the corpus, one project) for: a bare single-process `ast.parse`; `ruff check --select
F,B` when ruff is installed (a peer, same files); shardlint cold (no cache), warm (nothing
changed), one file edited in place (a comment: its summary is unchanged) and one file with a
line added (its summary changes), with the default jobs (the number of cores) and with
`--jobs 1`; and a one-file `shardlint check` (as pre-commit runs it) in a 300-file project with
a warm cache. Each cold run is compared with a bare parse run right before it (the median of
the rounds' ratios: a machine that drifts makes a best-of-N of each, minutes apart, compare two
machines). Targets (issue 15): warm <= 10% of cold; cold <= 1.5x the bare parse; one file
changed <= 1.5 s; peak RSS <= 600 MiB.

A run whose inputs are all as the last run of the same command read them is replayed
(``shardlint/warm.py``): "warm (replayed)" is that (the analysis not imported), "warm, full
path" a warm run with the run records removed (the analysis answering from the cache, as every
warm run did before the replay).

    python bench/lint_speed.py [--packages flax optax ...] [--repeat 3] [--fetch-only]
    python bench/lint_speed.py --tree ~/.cache/shardlint-corpus/google-research+scenic [--rounds 5]

``--tree`` measures a materialised project (e.g. one of ``bench/corpus.py``'s) instead of the
wheels: a copy of it, round after round, cold (no cache), warm full path and warm (replayed),
each round's warm / cold and cold / bare parse taken within the round, and their medians.
"""

from __future__ import annotations

import argparse
import ast
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
import zipfile
from pathlib import Path

RUNS = "runs-v1"  # (shardlint.warm.RUNS: the run records in the cache folder)
PACKAGES = ["flax", "optax", "maxtext", "praxis", "easydel"]
DEFAULT_EDITED = "maxtext/maxtext/layers/attentions.py"
# The corpus is fixed, so figures compare across sessions: 1,472 files, 695,142 lines.
# What is taken from each wheel: the Python sources and the YAML configs next to them (where
# projects keep their logical axis rules and mesh shapes).
SOURCES = (".py", ".yml", ".yaml")
VERSIONS = {"flax": "0.12.12", "optax": "0.2.8", "maxtext": "0.2.5", "praxis": "1.4.0",
            "easydel": "0.3.0"}


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
        marker = target / ".shardlint-bench-extracted"
        if marker.is_file():
            continue
        pattern = f"{pkg.replace('-', '_')}-{VERSIONS.get(pkg, '*')}-*.whl"
        have = list(wheels.glob(pattern))
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
                f"{pkg}=={VERSIONS[pkg]}" if pkg in VERSIONS else pkg,
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                print(
                    f"  could not download {pkg}: {proc.stderr.strip().splitlines()[-1:]}",
                    file=sys.stderr,
                )
                continue
            have = list(wheels.glob(pattern))
        if not have:
            continue
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(sorted(have)[-1]) as zf:
            for name in zf.namelist():
                if name.endswith(SOURCES):
                    zf.extract(name, target)
        marker.write_text("")
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


# What an installed shardlint runs with: its modules' bytecode compiled once (pip does that at
# install time). Environments that set PYTHONDONTWRITEBYTECODE would otherwise compile ~100
# modules from source in every run measured (about 0.16 s each time).
USER_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def compile_shardlint() -> None:
    import compileall

    import shardlint

    compileall.compile_dir(str(Path(shardlint.__file__).parent), quiet=1)


def measured(cmd: list[str], cwd: Path | None = None) -> tuple[float, float, float, int]:
    """Run ``cmd``: (wall s, CPU s of it and the processes it waited for, their largest peak
    RSS in MiB, exit code)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env=USER_ENV)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    rss = usage.ru_maxrss / 1024 if sys.platform != "darwin" else usage.ru_maxrss / 2**20
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.stderr.close()
    if code not in (0, 1):
        print(f"  {' '.join(cmd[:4])}... exited {code}: {err.strip()[-300:]}", file=sys.stderr)
    return wall, cpu, rss, code


def best(runs: list[tuple[float, float, float, int]]) -> tuple[float, float, float]:
    """The fastest run's wall and CPU seconds, and the largest peak RSS of all."""
    fastest = min(runs, key=lambda r: r[0])
    return fastest[0], fastest[1], max(r[2] for r in runs)


def one_file_run(src: Path, files: list[Path], repeat: int) -> tuple[float, float]:
    """`shardlint check ONE_FILE` in a 300-file project whose cache is warm: the first run
    (the full path, from the cache: what pre-commit meets after a change) and the best of the
    repeats (replayed)."""
    project = cache_dir() / "project300"
    if not project.is_dir():
        for f in files[:300]:
            dst = project / f.relative_to(src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(f.read_bytes())
        (project / "pyproject.toml").write_text("[project]\nname = 'bench'\n")
    inside = sorted(project.rglob("*.py"))
    target = inside[len(inside) // 2]
    cmd = [sys.executable, "-m", "shardlint", "check", "--exit-zero", str(target)]
    subprocess.run([sys.executable, "-m", "shardlint", "check", "--exit-zero", str(project)],
                   capture_output=True, cwd=project)  # warms the cache
    shutil.rmtree(project / ".shardlint_cache" / RUNS, ignore_errors=True)
    first = measured(cmd, project)[0]
    return first, min(measured(cmd, project)[0] for _ in range(repeat))


def edit_in_place(path: Path) -> None:
    """A keystroke's worth of change that leaves the file's summary as it was: a comment at
    the end of a code line in the middle of the file (no line moves)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    tree = ast.parse("\n".join(lines))
    simple = sorted({n.lineno for n in ast.walk(tree)
                     if isinstance(n, (ast.Assign, ast.Return, ast.Expr))
                     and n.lineno == n.end_lineno and not isinstance(getattr(n, "value", None),
                                                                     ast.Constant)})
    line = simple[len(simple) // 2] - 1
    lines[line] += "  # edited"
    path.write_text("\n".join(lines), encoding="utf-8")


def add_a_line(path: Path) -> None:
    """An edit the summary sees: a statement added at the top of the file (every line moves)."""
    path.write_text("import jax  # added\n" + path.read_text(encoding="utf-8"), encoding="utf-8")


def tree_figures(tree: Path, rounds: int) -> int:
    """Cold, first warm and replayed warm runs of ``shardlint check --exit-zero .`` on a copy of
    ``tree``, ``rounds`` times; ratios within each round, medians printed."""
    tree = tree.expanduser()
    if not tree.is_dir():
        print(f"{tree}: no such folder", file=sys.stderr)
        return 2
    files = sorted(tree.rglob("*.py"))
    lines = sum(f.read_text(encoding="utf-8", errors="replace").count("\n") for f in files)
    lint = [sys.executable, "-m", "shardlint", "check", "--exit-zero", "."]
    bare = [sys.executable, "-c", "pass"]
    rows: dict[str, list[float]] = {}
    # The one-file edits go into the largest file that imports jax or flax (issue 40: "one file
    # edited in a 250k-line package").
    edited = max((f for f in files if b"import jax" in f.read_bytes()
                  or b"from jax" in f.read_bytes() or b"flax" in f.read_bytes()),
                 key=lambda f: f.stat().st_size, default=None)
    with tempfile.TemporaryDirectory(prefix="shardlint-tree-") as tmp:
        work = Path(tmp) / tree.name
        shutil.copytree(tree, work, symlinks=True)
        for _ in range(rounds):
            shutil.rmtree(work / ".shardlint_cache", ignore_errors=True)
            parse = bare_parse(files)
            cold = measured(lint, work)[0]
            shutil.rmtree(work / ".shardlint_cache" / RUNS, ignore_errors=True)
            first = measured(lint, work)[0]  # (records the run again)
            warm = statistics.median(measured(lint, work)[0] for _ in range(3))
            start = statistics.median(measured(bare, work)[0] for _ in range(3))
            in_place = added = float("nan")
            if edited is not None:
                copy = work / edited.relative_to(tree)
                edit_in_place(copy)
                in_place = measured(lint, work)[0]
                add_a_line(copy)
                added = measured(lint, work)[0]
                shutil.copyfile(edited, copy)
                measured(lint, work)  # (back to the warm cache of the tree as it was)
            for name, value in (("bare parse", parse), ("cold", cold), ("warm, full path", first),
                                ("warm (replayed)", warm), ("python -c pass", start),
                                ("one file edited (comment)", in_place),
                                ("one file, a line added", added),
                                ("cold / bare parse", cold / parse), ("warm / cold", warm / cold),
                                ("warm, full path / cold", first / cold)):
                rows.setdefault(name, []).append(value)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{tree.name}: {len(files)} files, {lines:,} lines; {rounds} rounds, medians "
          f"(range); load average {load:.2f}")
    if edited is not None:
        print(f"  (edited: {edited.relative_to(tree)})")
    for name, values in rows.items():
        def shown(v: float, name: str = name) -> str:
            return f"{v:.0%}" if name.startswith("warm") and "/" in name else \
                f"{v:.2f}x" if "/" in name else f"{v:.3f} s"
        print(f"  {name:<27}{shown(statistics.median(values)):>10}  "
              f"({shown(min(values))} - {shown(max(values))})")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", nargs="*", default=PACKAGES)
    parser.add_argument("--repeat", type=int, default=3, help="take the best of N runs")
    parser.add_argument("--edited", default=None,
                        help="the file the one-file-changed runs edit (relative to the corpus; "
                        f"default: {DEFAULT_EDITED} when maxtext is measured, else the "
                        "largest file of the first package)")
    parser.add_argument("--fetch-only", action="store_true",
                        help="fetch the corpus into the cache and stop (the fuzz suite reads it)")
    parser.add_argument("--tree", type=Path, action="append", default=[],
                        help="measure this project folder (a copy of it) instead of the wheels")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of --tree's figures")
    args = parser.parse_args()
    if args.tree:
        compile_shardlint()
        return max(tree_figures(tree, args.rounds) for tree in args.tree)
    src = fetch(args.packages)
    if not args.fetch_only:
        compile_shardlint()
    if args.fetch_only:
        missing = [p for p in args.packages if not (src / p / ".shardlint-bench-extracted").exists()]
        print(f"corpus in {src}" + (f"; not fetched: {', '.join(missing)}" if missing else ""))
        return 1 if missing else 0
    files = sorted(p for pkg in args.packages for p in (src / pkg).rglob("*.py"))
    if not files:
        print("no sources fetched", file=sys.stderr)
        return 2
    lines = sum(f.read_text(encoding="utf-8", errors="replace").count("\n") for f in files)
    cores = os.cpu_count() or 1
    print(f"corpus: {', '.join(args.packages)} -> {len(files)} files, {lines:,} lines; "
          f"{cores} cores; best of {args.repeat}")
    rows: list[tuple[str, float, float, float | None]] = []
    # The bare parse runs right before each cold run, and each cold run is compared with the
    # parse next to it: these machines drift (the same parse took 6.1 s and 10.5 s in one
    # hour), and a best-of-N taken minutes apart compares two different machines.
    parses: list[tuple[float, float]] = []

    def paired_parse() -> float:
        c0 = time.process_time()
        wall = bare_parse(files)
        parses.append((wall, time.process_time() - c0))
        return wall

    here = Path(sys.executable).parent / "ruff"
    ruff = shutil.which("ruff") or (str(here) if here.is_file() else None)
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="shardlint-speed-") as tmp:
        # A copy of the corpus, one project: the edits below must not touch the cached sources.
        work = Path(tmp) / "corpus"
        for pkg in args.packages:
            shutil.copytree(src / pkg, work / pkg)
        if args.edited is None:
            args.edited = DEFAULT_EDITED if "maxtext" in args.packages else max(
                (p for p in files if p.is_relative_to(src / args.packages[0])),
                key=lambda p: (p.stat().st_size, str(p))).relative_to(src).as_posix()
        edited = work / args.edited
        if ruff:
            rows.append(("ruff check --select F,B", *best([
                measured([ruff, "check", "--select", "F,B", "--no-cache", "--exit-zero",
                          "--quiet", "."], work) for _ in range(args.repeat)])))
        lint = [sys.executable, "-m", "shardlint", "check", "--exit-zero", "."]
        for label, jobs in ((f"default jobs ({cores})", []), ("--jobs 1", ["--jobs", "1"])):
            cache = work / ".shardlint_cache"
            cold, ratios = [], []
            for _ in range(args.repeat):
                shutil.rmtree(cache, ignore_errors=True)
                floor = paired_parse()
                cold.append(measured([*lint, *jobs], work))
                ratios.append(cold[-1][0] / floor)
            figures[label + " ratio"] = statistics.median(ratios)
            figures[label + " ratio range"] = (min(ratios), max(ratios))  # type: ignore[assignment]
            shutil.rmtree(cache / RUNS, ignore_errors=True)
            first = measured([*lint, *jobs], work)  # (the full path, from the cache; recorded)
            warm = best([measured([*lint, *jobs], work) for _ in range(args.repeat)])
            original = edited.read_bytes()
            changed, moved = [], []
            for edit, out in ((edit_in_place, changed), (add_a_line, moved)):
                for _ in range(args.repeat):
                    edit(edited)
                    out.append(measured([*lint, *jobs], work))
                    edited.write_bytes(original)
                    measured([*lint, *jobs], work)  # (back to the warm state)
            rows += [(f"shardlint cold, {label}", *best(cold)),
                     (f"shardlint warm, full path, {label}", *best([first])),
                     (f"shardlint warm (replayed), {label}", *warm),
                     ("  one file edited in place", *best(changed)),
                     ("  one file, a line added", *best(moved))]
            figures[label] = best(cold)[0]
            figures[label + " warm"] = warm[0]
            figures[label + " edited"] = best(changed)[0]
    one_t, one_replayed = one_file_run(src, files, args.repeat)
    parse_t, parse_cpu = min(parses)
    rows.insert(0, ("ast.parse (bare, 1 process)", parse_t, parse_cpu, None))
    print(f"{'':<48}{'wall s':>8}{'CPU s':>8}{'peak RSS MiB':>14}{'lines/s':>12}")
    for name, wall, cpu, rss in rows:
        rss_s = f"{rss:>14.0f}" if rss is not None else f"{'':>14}"
        print(f"{name:<48}{wall:>8.2f}{cpu:>8.2f}{rss_s}{lines / wall:>12,.0f}")
    print(f"{'one file, 300-file project (pre-commit)':<48}{one_t:>8.2f}")
    print(f"{'  the same again (replayed)':<48}{one_replayed:>8.2f}")
    d = f"default jobs ({cores})"
    lo, hi = figures[d + " ratio range"]  # type: ignore[misc]
    print(f"cold / bare parse run next to it: {figures[d + ' ratio']:.2f}x (default jobs; "
          f"{lo:.2f}-{hi:.2f} over {args.repeat} rounds), "
          f"{figures['--jobs 1 ratio']:.2f}x (--jobs 1); warm / cold: "
          f"{figures[d + ' warm'] / figures[d]:.0%} (default jobs), "
          f"{figures['--jobs 1 warm'] / figures['--jobs 1']:.0%} (--jobs 1); one file edited: "
          f"{figures[d + ' edited']:.2f} s; one-file run: {one_t:.2f} s")
    print(f"(edited: {args.edited}; peak RSS: the largest of the run's processes)")
    return 0


if __name__ == "__main__":
    with tempfile.TemporaryDirectory():
        raise SystemExit(main())
