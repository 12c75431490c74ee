"""Stable fingerprints of findings, shared by SARIF output and baselines.

A fingerprint is built from the rule code, the file's path relative to the project root, the
enclosing symbol (``Trainer.step``) and the normalised source text of the finding, never from
line numbers: edits above a finding do not change it. Identical findings in one symbol are told
apart by their order.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from shardlint.rules.base import Finding
from shardlint.source import SourceText


def relative(path: str, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return Path(path).as_posix()


def _normalised(f: Finding, source: SourceText | None) -> str:
    if source is None:
        return f.message
    text = source.segment(f.span) if f.span.end_line - f.span.line < 20 else \
        source.line_text(f.span.line)
    if not text.strip():
        text = source.line_text(f.span.line)
    return " ".join(text.split())


def fingerprints(findings: list[Finding], sources: dict[str, SourceText], root: Path) -> list[str]:
    """One fingerprint per finding, in the same order."""
    out: list[str] = []
    seen: dict[str, int] = {}
    for f in findings:
        key = "\0".join((f.code, relative(f.path, root), f.symbol,
                         _normalised(f, sources.get(f.path))))
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        n = seen.get(digest, 0)
        seen[digest] = n + 1
        out.append(f"{digest}:{n}")
    return out
