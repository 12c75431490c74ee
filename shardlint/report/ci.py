"""CI report formats: JUnit XML and GitLab Code Quality."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from shardlint.findings.fingerprint import fingerprints
from shardlint.report.formats import Located
from shardlint.source import SourceText

_GITLAB_SEVERITY = {"error": "major", "warning": "minor", "info": "info"}


def junit(located: list[Located], files: list[str]) -> str:
    """One test case per finding, grouped in a suite per file; clean files pass one case."""
    # (imported here: xml.sax.saxutils imports urllib.request, ~10 ms of every run's start-up)
    from xml.sax.saxutils import escape, quoteattr

    by_file: dict[str, list[Located]] = defaultdict(list)
    for loc in located:
        by_file[loc.path].append(loc)
    names = sorted(set(files) | set(by_file))
    total = sum(max(1, len(by_file.get(n, []))) for n in names)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="shardlint" tests="{total}" failures="{len(located)}">']
    for name in names:
        items = by_file.get(name, [])
        out.append(f'  <testsuite name={quoteattr(name)} tests="{max(1, len(items))}" '
                   f'failures="{len(items)}">')
        if not items:
            out.append(f'    <testcase name="shardlint" classname={quoteattr(name)}/>')
        for loc in items:
            f = loc.finding
            case = f"{f.code} {f.name} at {loc.line}:{loc.column}"
            out.append(f'    <testcase name={quoteattr(case)} classname={quoteattr(name)} '
                       f'file={quoteattr(name)} line="{loc.line}">')
            out.append(f'      <failure message={quoteattr(f.message)} type={quoteattr(f.code)}>'
                       f'{escape(f"{name}:{loc.line}:{loc.column}: {f.code} {f.message}")}'
                       f'</failure>')
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out)


def gitlab(located: list[Located], sources: dict[str, SourceText], root: Path) -> str:
    prints = fingerprints([loc.finding for loc in located], sources, root)
    items = []
    for loc, fp in zip(located, prints):
        f = loc.finding
        items.append({
            "description": f"{f.code} {f.message}",
            "check_name": f"{f.code} {f.name}",
            "fingerprint": fp,
            "severity": _GITLAB_SEVERITY[f.severity],
            "location": {"path": loc.path, "lines": {"begin": loc.line, "end": loc.end_line}},
        })
    return json.dumps(items, indent=2, ensure_ascii=False)
