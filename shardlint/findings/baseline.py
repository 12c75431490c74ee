"""Baselines: record today's findings, then report only new ones.

A baseline file holds fingerprints (see ``shardlint.findings.fingerprint``), not line numbers,
so inserting lines above an old finding does not bring it back.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from shardlint import __version__
from shardlint.errors import UsageError
from shardlint.findings.fingerprint import fingerprints, relative
from shardlint.fsio import write_atomic
from shardlint.rules.base import Finding
from shardlint.source import SourceText

FORMAT = 1


def write(path: Path, findings: list[Finding], sources: dict[str, SourceText], root: Path) -> None:
    prints = fingerprints(findings, sources, root)
    entries = [{"fingerprint": fp, "code": f.code, "path": relative(f.path, root),
                "symbol": f.symbol, "message": f.message}
               for f, fp in zip(findings, prints)]
    data = {"shardlint": __version__, "format": FORMAT, "findings": entries}
    try:
        write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", newline=None)
    except OSError as exc:
        raise UsageError(f"cannot write baseline {path}: {exc.strerror}") from None


def load(path: Path) -> Counter[str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read baseline {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise UsageError(f"baseline {path} is not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or \
            not isinstance(data.get("findings"), list):
        raise UsageError(f"{path} is not a shardlint baseline (format {FORMAT})")
    return Counter(e["fingerprint"] for e in data["findings"]
                   if isinstance(e, dict) and "fingerprint" in e)


def new_findings(findings: list[Finding], sources: dict[str, SourceText], root: Path,
                 known: Counter[str]) -> list[Finding]:
    remaining = Counter(known)
    out = []
    for f, fp in zip(findings, fingerprints(findings, sources, root)):
        if remaining[fp] > 0:
            remaining[fp] -= 1
        else:
            out.append(f)
    return out
