"""Precision on real code: hand labels of findings on the benchmark corpus, replayed.

Lints each package of the benchmark corpus (the flax, optax, maxtext, praxis and easydel wheels
that ``bench/lint_speed.py`` fetches, at pinned versions) as its own project, matches each finding
to the hand labels in ``bench/precision/labels.jsonl`` by fingerprint (rule, file, enclosing
symbol and normalised source: line moves do not matter), and prints per rule: findings, labelled,
TP / TP-minor / FP / overclaim, and the share that is wrong (FP + overclaim). Then every labelled
FP or overclaim that is gone (fixed), every labelled finding that is gone, and every finding
without a label, ready to be labelled.

    python bench/precision/replay.py [--packages ...] [--rules SHL101 ...] [--unlabelled N]
                                     [--write-unlabelled FILE]

Labels (one JSON object per line): ``fingerprint``, ``code``, ``path``, ``line`` (where it was
when labelled), ``label`` (TP | TP-minor | FP | overclaim), ``reason`` (one line: why), and
``message`` (its first words, for the reader).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from lint_speed import PACKAGES, fetch  # noqa: E402

LABELS = HERE / "labels.jsonl"
KINDS = ("TP", "TP-minor", "FP", "overclaim")
WRONG = ("FP", "overclaim")


def findings_of(src: Path, packages: list[str]) -> list[dict]:
    from shardlint.config import Config
    from shardlint.engine import Engine
    from shardlint.findings.fingerprint import fingerprints
    from shardlint.source import SourceText

    out: list[dict] = []
    for pkg in packages:
        root = src / pkg
        engine = Engine(Config(root=root), use_cache=False)
        found = engine.lint_paths([root])
        sources = {}
        for f in found:
            if f.path not in sources:
                sources[f.path] = SourceText(f.path, Path(f.path).read_text(encoding="utf-8"))
        for f, fp in zip(found, fingerprints(found, sources, src)):
            out.append({"fingerprint": fp, "code": f.code, "severity": f.severity,
                        "path": Path(f.path).resolve().relative_to(src.resolve()).as_posix(),
                        "line": f.span.line, "message": f.message})
    return out


def load_labels() -> dict[str, dict]:
    out: dict[str, dict] = {}
    if LABELS.is_file():
        for line in LABELS.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rec = json.loads(line)
                out[rec["fingerprint"]] = rec
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", nargs="*", default=PACKAGES)
    parser.add_argument("--rules", nargs="*", default=None, help="only these codes")
    parser.add_argument("--unlabelled", type=int, default=20,
                        help="how many unlabelled findings to list per rule")
    parser.add_argument("--write-unlabelled", type=Path, default=None,
                        help="write every unlabelled finding there (JSON lines) to label")
    args = parser.parse_args()
    src = fetch(args.packages)
    labels = load_labels()
    found = [f for f in findings_of(src, args.packages)
             if args.rules is None or f["code"] in args.rules]
    by_code: dict[str, list[dict]] = defaultdict(list)
    for f in found:
        by_code[f["code"]].append(f)
    seen = {f["fingerprint"] for f in found}
    print(f"{'rule':<8}{'findings':>9}{'labelled':>9}" + "".join(f"{k:>10}" for k in KINDS)
          + f"{'wrong':>8}")
    total = Counter()
    for code in sorted(by_code):
        items = by_code[code]
        counted = Counter(labels[f["fingerprint"]]["label"] for f in items
                          if f["fingerprint"] in labels)
        n = sum(counted.values())
        wrong = sum(counted[k] for k in WRONG)
        share = f"{100.0 * wrong / n:.0f}%" if n else "-"
        print(f"{code:<8}{len(items):>9}{n:>9}" + "".join(f"{counted[k]:>10}" for k in KINDS)
              + f"{share:>8}")
        total.update(counted)
        total["findings"] += len(items)
    n = sum(total[k] for k in KINDS)
    wrong = sum(total[k] for k in WRONG)
    print(f"{'all':<8}{total['findings']:>9}{n:>9}" + "".join(f"{total[k]:>10}" for k in KINDS)
          + (f"{100.0 * wrong / n:>7.0f}%" if n else f"{'-':>8}"))
    gone = [r for fp, r in sorted(labels.items(), key=lambda x: (x[1]["path"], x[1]["line"]))
            if fp not in seen and (args.rules is None or r["code"] in args.rules)
            and r["path"].split("/", 1)[0] in args.packages]
    if gone:
        print(f"\nlabelled findings no longer reported: {len(gone)}")
        for r in gone:
            mark = "fixed" if r["label"] in WRONG else "LOST "
            print(f"  {mark} {r['label']:<9} {r['code']} {r['path']}:{r['line']}  {r['reason']}")
    unlabelled = [f for f in found if f["fingerprint"] not in labels]
    if unlabelled:
        print(f"\nunlabelled findings: {len(unlabelled)}")
        shown: Counter = Counter()
        for f in unlabelled:
            if shown[f["code"]] < args.unlabelled:
                shown[f["code"]] += 1
                print(f"  {f['code']} {f['path']}:{f['line']} [{f['fingerprint']}] "
                      f"{f['message'][:140]}")
    if args.write_unlabelled is not None:
        with args.write_unlabelled.open("w", encoding="utf-8") as fh:
            for f in unlabelled:
                fh.write(json.dumps(f) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
