"""Precision on the 17 projects of the real-code corpus: hand labels replayed, per rule and project.

Lints each project of ``../shared/corpus`` whole, as a user would (``bench/corpus.py``), and
matches each finding to hand labels by project, file, line and rule (the trees are pinned):

- the shared labels, ``../shared/corpus/labels/precision.tsv`` (167 findings of earlier builds);
- this repository's own, ``bench/precision/corpus_labels.tsv`` (same columns plus ``drawn``:
  ``random`` for a finding drawn at random to label, ``picked`` for one chosen by hand, ``rejudged`` for a shared label judged wrong on reading the
  code again, at a place with no finding now). A label
  holds while the finding has the labelled severity and its message starts with the labelled
  ``message``: a reworded finding is labelled again. Where both have a label, the own one counts.

Prints per rule and per project: findings, labelled, TP / TP-minor / FP / OVERCLAIM, the share
wrong (FP + OVERCLAIM of the labelled), the share TP-minor, unlabelled; then how the shared labels
replay (FPs gone, overclaims gone or relabelled, TPs kept) with each one not as it should be.

    python bench/precision/corpus.py [--projects ...] [--rules ...]
                                     [--sample N --seed S --write-sample FILE]

``--sample`` draws N unlabelled findings per rule at random (seeded) and writes them as TSV rows
with an empty verdict, ready to label by reading the code and append to ``corpus_labels.tsv``.
"""

from __future__ import annotations

import argparse
import csv
import random
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from corpus import SHARED, corpus_dir, key, lint_all, projects  # noqa: E402

SHARED_LABELS = SHARED / "labels" / "precision.tsv"
OWN_LABELS = HERE / "corpus_labels.tsv"
COLUMNS = ["repo", "path", "line", "code", "severity", "verdict", "drawn", "reason", "message"]
KINDS = ("TP", "TP-minor", "FP", "OVERCLAIM")
WRONG = ("FP", "OVERCLAIM")


def flat(message: str) -> str:
    """A message on one line (a quoted multi-line expression), as a TSV cell keeps it."""
    return " ".join(message.replace("\t", " ").split())


def read_labels(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    for r in rows:
        r["verdict"] = r["verdict"].strip()
        if r["verdict"] and r["verdict"] not in KINDS:
            raise SystemExit(f"{path}: unknown verdict {r['verdict']!r} at {r['path']}:{r['line']}")
    return [r for r in rows if r["verdict"]]


def label_key(r: dict) -> tuple[str, str, int, str]:
    return (r["repo"], r["path"], int(r["line"]), r["code"])


def holds(label: dict, finding: dict) -> bool:
    """A label holds while the finding says what was labelled: the same severity, and the
    message starting as labelled (a reworded finding is judged again)."""
    sev = label.get("severity", "").strip()
    if sev and sev != finding["severity"]:
        return False
    msg = flat(label.get("message", ""))
    return not msg or flat(finding["message"]).startswith(msg)


def quiet_in_tests(label: dict) -> bool:
    """A finding in test code of a rule quiet there by default (``test-files``/``test-ignore``)."""
    from shardlint.config import Config

    config = Config(root=corpus_dir() / label["repo"])
    path = str(corpus_dir() / label["repo"] / label["path"])
    return config.is_test_file(path) and not config.is_selected(label["code"], True, path)


_NEEDS_PYTHON = re.compile(r"needs Python >= (\d+)\.(\d+) .*shardlint runs on \d+\.\d+")


def parsed_here(label: dict) -> bool:
    """A notice that shardlint's own Python could not parse a file the code's newer Python
    can (``SHL000 needs Python >= 3.12 ...; shardlint runs on 3.11``): on a Python that has
    the grammar the file is analysed instead, and the notice has nothing to say."""
    m = _NEEDS_PYTHON.search(label.get("message", ""))
    return label["code"] == "SHL000" and m is not None and \
        sys.version_info[:2] >= (int(m.group(1)), int(m.group(2)))


def verdict_of(f: dict, own: dict, shared: dict) -> str | None:
    """The own label that holds, else the shared one. Where several hold (a message that grew:
    new advice after the labelled words), the one that labelled the most of it; of equals,
    the latest written."""
    for table in (own, shared):
        found = [r for r in table.get(key(f), []) if holds(r, f)]
        if found:
            best = max(range(len(found)), key=lambda i: (len(flat(found[i].get("message", ""))), i))
            return found[best]["verdict"]
    return None


def table(title: str, groups: dict[str, list[tuple[dict, str | None]]]) -> None:
    print(f"\n{title:<26}{'findings':>9}{'labelled':>9}" + "".join(f"{k:>10}" for k in KINDS)
          + f"{'wrong':>7}{'minor':>7}{'unlab.':>8}")
    total: Counter = Counter()
    for name in sorted(groups):
        items = groups[name]
        c = Counter(v for _, v in items if v)
        n = sum(c.values())
        total.update(c)
        total["findings"] += len(items)
        print(f"{name:<26}{len(items):>9}{n:>9}" + "".join(f"{c[k]:>10}" for k in KINDS)
              + (f"{100 * sum(c[k] for k in WRONG) / n:>6.0f}%{100 * c['TP-minor'] / n:>6.0f}%"
                 if n else f"{'-':>7}{'-':>7}") + f"{len(items) - n:>8}")
    n = sum(total[k] for k in KINDS)
    print(f"{'all':<26}{total['findings']:>9}{n:>9}" + "".join(f"{total[k]:>10}" for k in KINDS)
          + (f"{100 * sum(total[k] for k in WRONG) / n:>6.0f}%{100 * total['TP-minor'] / n:>6.0f}%"
             if n else f"{'-':>7}{'-':>7}") + f"{total['findings'] - n:>8}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--projects", nargs="*", default=None, help="only these (substrings)")
    parser.add_argument("--rules", nargs="*", default=None, help="only these codes")
    parser.add_argument("--sample", type=int, default=0,
                        help="draw this many unlabelled findings per rule at random")
    parser.add_argument("--seed", type=int, default=28)
    parser.add_argument("--write-sample", type=Path, default=None)
    parser.add_argument("--verbose", action="store_true",
                        help="list every labelled wrong finding still reported")
    args = parser.parse_args()
    trees = projects(args.projects)
    names = {t.name for t in trees}
    found = [f for f in lint_all(trees) if args.rules is None or f["code"] in args.rules]

    shared: dict[tuple, list[dict]] = defaultdict(list)
    for r in read_labels(SHARED_LABELS):
        if r["repo"] in names and (args.rules is None or r["code"] in args.rules):
            shared[label_key(r)].append(r)
    own: dict[tuple, list[dict]] = defaultdict(list)
    for r in read_labels(OWN_LABELS):
        if r["repo"] in names and (args.rules is None or r["code"] in args.rules):
            own[label_key(r)].append(r)

    judged = [(f, verdict_of(f, own, shared)) for f in found]
    by_rule: dict[str, list] = defaultdict(list)
    by_project: dict[str, list] = defaultdict(list)
    for f, v in judged:
        by_rule[f["code"]].append((f, v))
        by_project[f["project"].split("+", 1)[-1]].append((f, v))
    print(f"{len(trees)} projects, {len(found)} findings; labels: {sum(map(len, shared.values()))}"
          f" shared, {sum(map(len, own.values()))} own "
          f"({sum(r.get('drawn') == 'random' for rs in own.values() for r in rs)} drawn at random)")
    table("rule", by_rule)
    table("project", by_project)

    # How the shared labels replay.
    present: dict[tuple, list[dict]] = defaultdict(list)
    for f in found:
        present[key(f)].append(f)
    outcome: Counter = Counter()
    notes: list[str] = []
    for k, rows in sorted(shared.items()):
        for r in rows:
            now = present.get(k, [])
            where = f"{r['code']} {r['repo'].split('+', 1)[-1]}/{r['path']}:{r['line']}"
            if r["verdict"] == "FP":
                if now and not any(v != "TP" and v != "TP-minor"
                                   for v in (verdict_of(f, own, {}) for f in now)) and all(
                        verdict_of(f, own, {}) for f in now):
                    outcome["FP relabelled right"] += 1
                elif now:
                    outcome["FP still reported"] += 1
                    notes.append(f"  FP still reported: {where}  {r['reason'][:150]}")
                else:
                    outcome["FP gone"] += 1
            elif r["verdict"] == "OVERCLAIM":
                relabelled = [verdict_of(f, own, {}) for f in now]
                if not now:
                    outcome["OVERCLAIM gone"] += 1
                elif all(v in ("TP", "TP-minor") for v in relabelled):
                    outcome["OVERCLAIM reworded, relabelled right"] += 1
                else:
                    outcome["OVERCLAIM still claimed"] += 1
                    notes.append(f"  OVERCLAIM as before: {where}  {r['reason'][:150]}")
            else:
                rejudged = [o for o in own.get(k, ()) if o.get("drawn") == "rejudged"]
                if now:
                    outcome[f"{r['verdict']} kept"] += 1
                elif rejudged:
                    outcome["TP label re-judged wrong"] += 1
                    notes.append(f"  re-judged {rejudged[0]['verdict']}: {where}  "
                                 f"{rejudged[0]['reason'][:150]}")
                elif quiet_in_tests(r):
                    outcome["TP quiet in tests"] += 1
                elif parsed_here(r):
                    outcome["TP notice of an older Python"] += 1
                else:
                    outcome[f"{r['verdict']} lost"] += 1
                    notes.append(f"  {r['verdict']} LOST: {where}  {r['reason'][:150]}")
    fp = sum(v for k, v in outcome.items() if k.startswith("FP "))
    oc = sum(v for k, v in outcome.items() if k.startswith("OVERCLAIM "))
    tp = sum(v for k, v in outcome.items() if k.startswith("TP"))  # (all TP and TP-minor)
    print("\nshared labels replayed:")
    if fp:
        print(f"  FP: {fp}, gone {outcome['FP gone']}, relabelled right "
              f"{outcome['FP relabelled right']} -> "
              f"{100 * (outcome['FP gone'] + outcome['FP relabelled right']) / fp:.0f}%")
    if oc:
        fixed = outcome["OVERCLAIM gone"] + outcome["OVERCLAIM reworded, relabelled right"]
        print(f"  OVERCLAIM: {oc}, gone {outcome['OVERCLAIM gone']}, reworded and relabelled "
              f"{outcome['OVERCLAIM reworded, relabelled right']} -> {100 * fixed / oc:.0f}%")
    if tp:
        kept = outcome["TP kept"] + outcome["TP-minor kept"]
        older = outcome["TP notice of an older Python"]
        aside = outcome["TP quiet in tests"] + outcome["TP label re-judged wrong"] + older
        print(f"  TP and TP-minor: {tp}, kept {kept} -> {100 * kept / tp:.0f}%; quiet in test code "
              f"by default {outcome['TP quiet in tests']}, label re-judged wrong "
              f"{outcome['TP label re-judged wrong']}, a notice that only an older Python than "
              f"this one ({sys.version_info[0]}.{sys.version_info[1]}) gives {older}: kept "
              f"{kept} of {tp - aside} -> {100 * kept / max(1, tp - aside):.0f}%")
    if args.verbose or len(notes) <= 40:
        print("\n".join(notes))
    else:
        print(f"  ({len(notes)} not as they should be: --verbose lists them)")

    if args.sample:
        rng = random.Random(args.seed)
        rows = []
        for code in sorted(by_rule):
            pool = [f for f, v in by_rule[code] if v is None]
            for f in rng.sample(pool, min(args.sample, len(pool))):
                rows.append({"repo": f["project"], "path": f["path"], "line": f["line"],
                             "code": f["code"], "severity": f["severity"], "verdict": "",
                             "drawn": "random", "reason": "",
                             "message": flat(f["message"])})
        out = args.write_sample
        if out is None:
            w = csv.DictWriter(sys.stdout, COLUMNS, delimiter="\t", lineterminator="\n")
            print()
        else:
            fh = out.open("w", encoding="utf-8", newline="")
            w = csv.DictWriter(fh, COLUMNS, delimiter="\t", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        if out is not None:
            fh.close()
            print(f"\n{len(rows)} findings drawn to label: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
