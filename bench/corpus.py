"""The real-code corpus: 17 public projects at pinned commits, linted whole as a user would.

``../shared/corpus/`` says which projects, at which commits, and how to materialise them
(``materialise.sh`` writes plain trees, each its own git root, under ``~/.cache/shardlint-corpus``
by default; ``SHARDLINT_CORPUS`` points elsewhere). This module finds those trees and lints each
one with ``shardlint check`` run in its root (its own ``pyproject.toml``, pins and configs count),
from any source tree of shardlint: the working tree, or an earlier commit checked out apart
(``bench/primer.py``).

A finding is a dict of the JSON format plus ``project`` (``owner+name``); its key for labels is
``(project, path, line, code)``: the trees are pinned, so a line names one place.

``materialise.sh`` keeps Python, YAML and pin files; projects configured with gin (T5X binds its
partitioner's rules table and its models there) also need their ``.gin`` files, which shardlint
reads as data. ``python bench/corpus.py --add-gin SNAPSHOTS`` writes each pinned commit's
``*.gin`` files into the trees (once; ``.gin-done`` marks a tree that has them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHARED = REPO.parent / "shared" / "corpus"


def corpus_dir() -> Path:
    env = os.environ.get("SHARDLINT_CORPUS")
    return Path(env) if env else Path.home() / ".cache" / "shardlint-corpus"


def projects(only: list[str] | None = None) -> list[Path]:
    """The materialised trees, in the order of ``repos.tsv`` (or of the folder where it is absent)."""
    root = corpus_dir()
    names: list[str] = []
    listing = SHARED / "repos.tsv"
    if listing.is_file():
        for line in listing.read_text(encoding="utf-8").splitlines()[1:]:
            if line.strip():
                names.append(line.split("\t")[0].replace("/", "+"))
    else:
        names = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    out = []
    for name in names:
        if only and not any(o.lower() in name.lower() for o in only):
            continue
        tree = root / name
        if (tree / ".done").is_file():
            out.append(tree)
        else:
            print(f"corpus: {name} is not materialised under {root} "
                  f"(see {SHARED / 'README.md'})", file=sys.stderr)
    return out


def lint(tree: Path, source: Path = REPO, jobs: int | None = None) -> list[dict]:
    """``shardlint check`` of one whole project, with the shardlint package found in *source*."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(source)
    env.pop("SHARDLINT_FUZZ_CORPUS", None)
    cmd = [sys.executable, "-m", "shardlint", "check", "--no-cache", "--format", "json",
           "--exit-zero", "."]
    if jobs:
        cmd[4:4] = ["--jobs", str(jobs)]
    proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"shardlint check in {tree.name} exited {proc.returncode}:\n"
                           f"{proc.stderr[-2000:]}")
    found = json.loads(proc.stdout or "[]")
    for f in found:
        f["project"] = tree.name
    return found


def lint_all(trees: list[Path], source: Path = REPO) -> list[dict]:
    """Every project's findings, in the order of *trees* (two projects at a time)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(lambda t: lint(t, source, jobs=1), trees))
    return [f for found in results for f in found]


def key(f: dict) -> tuple[str, str, int, str]:
    return (f["project"], f["path"], int(f["line"]), f["code"])


def add_gin(snapshots: Path) -> int:
    """Write the ``*.gin`` files of each project's pinned commit into its tree, from the fetched
    snapshots (``SNAPSHOTS/<owner>+<name>/repo``); the number of files written."""
    written = 0
    listing = SHARED / "repos.tsv"
    for line in listing.read_text(encoding="utf-8").splitlines()[1:]:
        if not line.strip():
            continue
        repo, commit = line.split("\t")[:2]
        name = repo.replace("/", "+")
        tree = corpus_dir() / name
        if not (tree / ".done").is_file() or (tree / ".gin-done").is_file():
            continue
        gd = snapshots / name / "repo"
        if (gd / ".git").is_dir():
            gd = gd / ".git"
        git = ["git", f"--git-dir={gd}"]
        listed = subprocess.run([*git, "ls-tree", "-r", "--name-only", commit],
                                capture_output=True, text=True)
        if listed.returncode != 0:
            print(f"corpus: no snapshot of {repo}@{commit[:12]} under {snapshots}",
                  file=sys.stderr)
            continue
        for rel in listed.stdout.splitlines():
            if not rel.endswith(".gin"):
                continue
            blob = subprocess.run([*git, "show", f"{commit}:{rel}"], capture_output=True)
            if blob.returncode == 0:
                dest = tree / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(blob.stdout)
                written += 1
        (tree / ".gin-done").touch()
    return written


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--add-gin", metavar="SNAPSHOTS", type=Path, required=True,
                        help="the folder that holds the fetched snapshots")
    args = parser.parse_args()
    print(f"corpus: {add_gin(args.add_gin)} gin files written under {corpus_dir()}")
