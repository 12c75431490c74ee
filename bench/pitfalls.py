"""The labelled pitfalls of the real-code corpus: which are caught, which look-alikes are flagged.

``../shared/corpus/labels/pitfalls.tsv`` holds real pitfalls (``pitfall``), look-alikes that are
fine (``not_pitfall``) and ``unsure`` rows, each at a pinned line with the quoted code and a rule
family (R1 missing contexts, R2 donation, R3 init placement, R4 stacked axis, R5 unruled name, R6
mesh axis, R7 moved or removed API). A row counts as flagged when a finding of its family's rules
lies on the quoted code's lines (the quote's first line is the labelled one; a jit site's
finding may sit on its decorator or call a line or two above the ``def``).

    python bench/pitfalls.py [--projects maxtext ...] [--verbose]

Prints the caught pitfalls and the flagged look-alikes, one by one, by the shared labels and
then with this project's own judgement beside them (``bench/precision/pitfalls_own.tsv``: a
label that judges the newest jax where the project pins an older one, a pitfall reported on the
lines that use it). Exit 0 always: a benchmark reports.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import SHARED, lint_all, projects  # noqa: E402

FAMILIES = {
    "R1": ("SHL101", "SHL102", "SHL103", "SHL104"),
    "R2": ("SHL401",),
    "R3": ("SHL301", "SHL302"),
    "R4": ("SHL203",),
    "R5": ("SHL201",),
    "R6": ("SHL202",),
    "R7": ("SHL501", "SHL502", "SHL503", "SHL101"),
}
ABOVE = 2  # (a decorator's or a jit call's finding, above the labelled `def`)


OWN = Path(__file__).resolve().parent / "precision" / "pitfalls_own.tsv"


def own() -> dict[str, dict]:
    with OWN.open(encoding="utf-8", newline="") as f:
        return {r["id"]: r for r in csv.DictReader(f, delimiter="\t")}


def rows() -> list[dict]:
    with (SHARED / "labels" / "pitfalls.tsv").open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def flagged(row: dict, by_file: dict[tuple[str, str], list[dict]]) -> list[dict]:
    codes = {c for fam in row["rule"].split(",") for c in FAMILIES.get(fam.strip(), ())}
    first = int(row["line"])
    last = first + row["quote"].count("\\n")
    repo = row["repo"].replace("/", "+")
    return [f for f in by_file.get((repo, row["path"]), ())
            if f["code"] in codes and first - ABOVE <= f["line"] <= last]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--projects", nargs="*", default=[])
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    table = rows()
    wanted = {r["repo"].replace("/", "+") for r in table}
    trees = [t for t in projects(args.projects or None) if t.name in wanted]
    by_file: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for f in lint_all(trees):
        by_file[(f["project"], f["path"])].append(f)
    linted = {t.name for t in trees}
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    lines = []
    for row in table:
        if row["repo"].replace("/", "+") not in linted:
            continue
        hits = flagged(row, by_file)
        label = row["label"]
        counts[label][0] += 1
        counts[label][1] += bool(hits)
        mark = {"pitfall": "caught" if hits else "MISSED",
                "not_pitfall": "FLAGGED" if hits else "quiet",
                "unsure": "flagged" if hits else "quiet"}[label]
        if args.verbose or mark in ("MISSED", "FLAGGED"):
            where = f"{row['repo']}/{row['path']}:{row['line']}"
            found = "; ".join(f"{f['code']}@{f['line']}" for f in hits)
            lines.append(f"  {mark:8} {row['id']} {row['rule']:5} {where}  {found}")
    p, n, u = counts["pitfall"], counts["not_pitfall"], counts["unsure"]
    print(f"shared labels: pitfalls caught {p[1]} of {p[0]}; look-alikes flagged {n[1]} of "
          f"{n[0]}; unsure flagged {u[1]} of {u[0]}")
    print("\n".join(lines))
    mine = own()
    caught = total = 0
    for row in table:
        if row["label"] != "pitfall" or row["repo"].replace("/", "+") not in linted:
            continue
        judged = mine.get(row["id"], {}).get("label", "pitfall")
        if judged == "not_pitfall":
            continue
        total += 1
        caught += bool(flagged(row, by_file)) or judged == "caught-at-use"
    print(f"with own labels beside them ({OWN.name}): pitfalls caught {caught} of {total}")
    for rid, r in sorted(mine.items()):
        print(f"  {rid} {r['label']}: {r['reason'][:150]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
