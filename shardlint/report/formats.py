"""Output formats for findings: concise, full, json, github (workflow annotations), sarif.

Columns in every text format are 1-based code points; ``end_column`` is exclusive.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from shardlint.findings.fixes import resolve
from shardlint.rules.base import Finding
from shardlint.source import SourceText


@dataclass(frozen=True)
class Located:
    """A finding with display positions (1-based character columns)."""

    finding: Finding
    path: str  # as shown to the user (relative to cwd when inside it)
    line: int
    column: int
    end_line: int
    end_column: int


def display_path(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def locate(findings: list[Finding], sources: dict[str, SourceText]) -> list[Located]:
    out = []
    for f in findings:
        src = sources.get(f.path)
        s = f.span
        col = src.char_col(s.line, s.col) if src else s.col
        end_col = src.char_col(s.end_line, s.end_col) if src else s.end_col
        path = display_path(f.path)
        shift = 0
        if f.cell is not None:  # notebooks: lines count from the start of the cell
            path = f"{path}:cell {f.cell[0]}"
            shift = f.cell[1]
        out.append(Located(f, path, s.line - shift, col + 1, s.end_line - shift, end_col + 1))
    return out


def _fix_json(f: Finding, sources: dict[str, SourceText]) -> dict | None:
    if f.fix is None:
        return None
    src = sources.get(f.path)
    shift = f.cell[1] if f.cell is not None else 0
    edits = []
    for e in resolve(f.fix, src.text if src is not None else ""):
        s = e.span
        c = (src.char_col(s.line, s.col) if src else s.col) + 1
        ec = (src.char_col(s.end_line, s.end_col) if src else s.end_col) + 1
        edits.append({"content": e.text, "location": {"line": s.line - shift, "column": c},
                      "end_location": {"line": s.end_line - shift, "column": ec}})
    return {"message": f.fix.description, "applicability": f.fix.applicability, "edits": edits}


def to_json(located: list[Located], sources: dict[str, SourceText]) -> str:
    items = []
    for loc in located:
        f = loc.finding
        item = {
            "code": f.code, "name": f.name, "severity": f.severity, "message": f.message,
            "path": display_path(f.path), "line": loc.line, "column": loc.column,
            "cell": f.cell[0] if f.cell is not None else None,
            "end_line": loc.end_line, "end_column": loc.end_column,
            "fix": _fix_json(f, sources),
            "related": [
                {"path": display_path(r.path), "line": r.span.line, "column": r.span.col + 1,
                 "message": r.message} for r in f.related
            ],
        }
        if f.saving is not None:  # `check --memory`: what fixing it saved, per probe
            item["saving"] = f.saving
        items.append(item)
    return json.dumps(items, indent=2, ensure_ascii=False)


_COLORS = {"error": "\x1b[31m", "warning": "\x1b[33m", "info": "\x1b[36m"}


def concise(located: list[Located], color: bool = False) -> str:
    lines = []
    for loc in located:
        f = loc.finding
        code = f"{_COLORS[f.severity]}{f.code}\x1b[0m" if color else f.code
        lines.append(f"{loc.path}:{loc.line}:{loc.column}: {code} [{f.severity}] {f.message}")
    return "\n".join(lines)


def full(located: list[Located], sources: dict[str, SourceText], color: bool = False) -> str:
    blocks = []
    for loc in located:
        f = loc.finding
        head = concise([loc], color)
        src = sources.get(f.path)
        body = [head]
        if src is not None:
            width = len(str(loc.end_line))
            shift = loc.line - f.span.line
            for ln in range(f.span.line, min(f.span.end_line, f.span.line + 3) + 1):
                body.append(f"  {str(ln + shift).rjust(width)} | {src.line_text(ln)}")
                if ln == f.span.line:
                    end = loc.end_column if loc.end_line == loc.line else len(src.line_text(ln)) + 1
                    marks = "^" * max(1, end - loc.column)
                    body.append(f"  {' ' * width} | {' ' * (loc.column - 1)}{marks}")
        for r in f.related:
            body.append(f"  note: {display_path(r.path)}:{r.span.line}: {r.message}")
        if f.fix is not None:
            body.append(f"  fix ({f.fix.applicability}): {f.fix.description}")
        blocks.append("\n".join(body))
    return "\n\n".join(blocks)


def _gh_escape(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def github(located: list[Located]) -> str:
    level = {"error": "error", "warning": "warning", "info": "notice"}
    out = []
    for loc in located:
        f = loc.finding
        where = f"cell {f.cell[0]}: " if f.cell is not None else ""
        props = (f"file={_gh_escape(display_path(f.path), True)},line={loc.line},col={loc.column},"
                 f"endLine={loc.end_line},endColumn={loc.end_column},"
                 f"title={_gh_escape(f.code + ' ' + f.name, True)}")
        out.append(f"::{level[f.severity]} {props}::{_gh_escape(where + f.code + ' ' + f.message)}")
    return "\n".join(out)


def statistics(findings: list[Finding]) -> str:
    counts = Counter((f.code, f.name) for f in findings)
    fixable = Counter(f.code for f in findings if f.fix is not None)
    rows = []
    for (code, name), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0])):
        mark = "*" if fixable.get(code) else " "
        rows.append(f"{n:>5}  {code}  {mark} {name}")
    rows.append(f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''}.")
    return "\n".join(rows)


def relative_uri(path: str, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return Path(path).resolve().as_uri()
