"""SARIF 2.1.0 output (validated in the tests against the official schema)."""

from __future__ import annotations

import json
from pathlib import Path

from shardlint import __version__
from shardlint.findings.fingerprint import fingerprints
from shardlint.findings.fixes import resolve
from shardlint.report.formats import Located, relative_uri
from shardlint.rules.base import Rule
from shardlint.source import SourceText

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
DOCS_URL = "https://github.com/shardlint/shardlint/blob/main/docs/rules.md#{anchor}"


def rule_url(cls: type[Rule]) -> str:
    return DOCS_URL.format(anchor=f"{cls.code.lower()}-{cls.name}")


def to_sarif(located: list[Located], sources: dict[str, SourceText], rules: list[type[Rule]],
             root: Path) -> str:
    rule_index = {r.code: i for i, r in enumerate(rules)}
    results = []
    prints = fingerprints([loc.finding for loc in located], sources, root)
    for loc, fp in zip(located, prints):
        f = loc.finding
        uri = relative_uri(f.path, root)
        src = sources.get(f.path)
        result: dict = {
            "ruleId": f.code,
            "level": _LEVEL[f.severity],
            "message": {"text": f.message},
            "locations": [{"physicalLocation": {
                "artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"},
                "region": {"startLine": loc.line, "startColumn": loc.column,
                           "endLine": loc.end_line, "endColumn": loc.end_column},
            }}],
            "partialFingerprints": {"shardlint/v1": fp},
        }
        if f.code in rule_index:
            result["ruleIndex"] = rule_index[f.code]
        if f.related:
            result["relatedLocations"] = [
                {"id": i, "message": {"text": r.message}, "physicalLocation": {
                    "artifactLocation": {"uri": relative_uri(r.path, root), "uriBaseId": "%SRCROOT%"},
                    "region": {"startLine": r.span.line, "startColumn": r.span.col + 1}}}
                for i, r in enumerate(f.related)
            ]
        if f.fix is not None and src is not None and resolve(f.fix, src.text):
            replacements = []
            for e in resolve(f.fix, src.text):
                s = e.span
                replacements.append({
                    "deletedRegion": {"startLine": s.line, "startColumn": src.char_col(s.line, s.col) + 1,
                                      "endLine": s.end_line,
                                      "endColumn": src.char_col(s.end_line, s.end_col) + 1},
                    "insertedContent": {"text": e.text},
                })
            result["fixes"] = [{"description": {"text": f.fix.description},
                                "artifactChanges": [{"artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"},
                                                     "replacements": replacements}]}]
        if f.saving is not None:  # `check --memory`: the what-if compiles' figures, per probe
            result["properties"] = {**result.get("properties", {}), "saving": f.saving}
        results.append(result)
    driver = {
        "name": "shardlint",
        "version": __version__,
        "informationUri": "https://github.com/shardlint/shardlint",
        "rules": [{
            "id": r.code,
            "name": r.name,
            "shortDescription": {"text": r.summary or r.name},
            "fullDescription": {"text": r.what.strip() or r.summary},
            "helpUri": rule_url(r),
            "help": {"text": r.summary, "markdown": r.docs_markdown()},
            "defaultConfiguration": {"level": _LEVEL[r.severity],
                                     "enabled": r.enabled_by_default and not r.preview},
        } for r in rules],
    }
    doc = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": driver},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": root.resolve().as_uri() + "/"}},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False)
