"""Primer: what a change does to the findings on the 17 projects of the real-code corpus.

Lints every project of ``../shared/corpus`` (see ``bench/corpus.py``) twice, with shardlint as it
was at BASE (any commit, checked out apart with ``git worktree``) and as it is in this working
tree, and prints the findings the change removes, adds and rewords, per rule and then one by one,
as Ruff's ecosystem check and mypy_primer do: every change's effect on real code is read, not
guessed.

    python bench/primer.py BASE [--projects maxtext flax ...] [--rules SHL101 ...] [--limit N]
                                [--json FILE]

A finding is matched by project, file, line and rule; the same place with another message or
severity is "changed". BASE's findings are kept in ``~/.cache/shardlint-primer/<commit>.json``
(a commit does not change), so a second primer against the same BASE lints only the working tree.
Exit 0 always: a primer reports, it does not judge.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import REPO, key, lint_all, projects  # noqa: E402


def cache_dir() -> Path:
    return Path.home() / ".cache" / "shardlint-primer"


def resolve(base: str) -> str:
    proc = subprocess.run(["git", "rev-parse", "--verify", f"{base}^{{commit}}"], cwd=REPO,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"primer: {base!r} is not a commit of this repository")
    return proc.stdout.strip()


def findings_at(commit: str, trees: list[Path]) -> list[dict]:
    names = sorted(t.name for t in trees)
    cached = cache_dir() / f"{commit}.json"
    if cached.is_file():
        data = json.loads(cached.read_text(encoding="utf-8"))
        if all(n in data["projects"] for n in names):
            return [f for f in data["findings"] if f["project"] in names]
    with tempfile.TemporaryDirectory(prefix="shardlint-primer-") as tmp:
        tree = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(tree), commit],
                       cwd=REPO, check=True)
        try:
            found = lint_all(trees, source=tree)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=REPO,
                           check=False)
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_text(json.dumps({"projects": names, "findings": found}), encoding="utf-8")
    return found


def show(f: dict) -> str:
    return (f"{f['project'].split('+', 1)[-1]}/{f['path']}:{f['line']} {f['code']} "
            f"[{f['severity']}] {f['message'][:160]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", help="the commit to compare with (a hash, a tag, HEAD~3)")
    parser.add_argument("--projects", nargs="*", default=None, help="only these (substrings)")
    parser.add_argument("--rules", nargs="*", default=None, help="only these codes")
    parser.add_argument("--limit", type=int, default=40,
                        help="findings listed per rule and direction (default 40)")
    parser.add_argument("--json", type=Path, default=None, help="also write the diff there")
    args = parser.parse_args()
    commit = resolve(args.base)
    trees = projects(args.projects)
    if not trees:
        raise SystemExit("primer: no materialised project (see ../shared/corpus/README.md)")
    before = findings_at(commit, trees)
    after = lint_all(trees)
    if args.rules:
        before = [f for f in before if f["code"] in args.rules]
        after = [f for f in after if f["code"] in args.rules]

    def by_key(found: list[dict]) -> dict[tuple, list[dict]]:
        out: dict[tuple, list[dict]] = defaultdict(list)
        for f in found:
            out[key(f)].append(f)
        return out

    old, new = by_key(before), by_key(after)
    removed: list[dict] = []
    added: list[dict] = []
    changed: list[tuple[dict, dict]] = []
    for k in sorted(set(old) | set(new)):
        a = sorted(old.get(k, []), key=lambda f: (f["message"], f["severity"]))
        b = sorted(new.get(k, []), key=lambda f: (f["message"], f["severity"]))
        same = [(x, y) for x, y in zip(a, b)]
        for x, y in same:
            if (x["message"], x["severity"]) != (y["message"], y["severity"]):
                changed.append((x, y))
        removed.extend(a[len(same):])
        added.extend(b[len(same):])

    print(f"primer: {commit[:12]} -> working tree, {len(trees)} projects: "
          f"{len(before)} -> {len(after)} findings; {len(removed)} removed, {len(added)} added, "
          f"{len(changed)} changed")
    codes = sorted({f["code"] for f in removed + added} | {x["code"] for x, _ in changed})
    if codes:
        print(f"\n{'rule':<8}{'before':>8}{'after':>8}{'removed':>9}{'added':>7}{'changed':>9}")
        count_b = Counter(f["code"] for f in before)
        count_a = Counter(f["code"] for f in after)
        for code in codes:
            print(f"{code:<8}{count_b[code]:>8}{count_a[code]:>8}"
                  f"{sum(f['code'] == code for f in removed):>9}"
                  f"{sum(f['code'] == code for f in added):>7}"
                  f"{sum(x['code'] == code for x, _ in changed):>9}")
        per_project = Counter()
        for f in removed:
            per_project[(f["project"], "-")] += 1
        for f in added:
            per_project[(f["project"], "+")] += 1
        print("\nper project: " + ", ".join(
            f"{p.split('+', 1)[-1]} -{per_project[(p, '-')]} +{per_project[(p, '+')]}"
            for p in sorted({p for p, _ in per_project})))
    for title, items in (("removed", removed), ("added", added)):
        for code in codes:
            mine = [f for f in items if f["code"] == code]
            if not mine:
                continue
            print(f"\n{title} {code} ({len(mine)}):")
            for f in mine[:args.limit]:
                print(f"  - {show(f)}" if title == "removed" else f"  + {show(f)}")
            if len(mine) > args.limit:
                print(f"  ... {len(mine) - args.limit} more")
    for code in codes:
        mine = [(x, y) for x, y in changed if x["code"] == code]
        if not mine:
            continue
        print(f"\nchanged {code} ({len(mine)}):")
        for x, y in mine[:args.limit]:
            print(f"  - {show(x)}\n  + {show(y)}")
        if len(mine) > args.limit:
            print(f"  ... {len(mine) - args.limit} more")
    if args.json is not None:
        args.json.write_text(json.dumps({"base": commit, "removed": removed, "added": added,
                                         "changed": [[x, y] for x, y in changed]}, indent=1),
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
