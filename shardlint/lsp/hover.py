"""Hover: the rule's documentation over a finding, or over a code in a suppression comment."""

from __future__ import annotations

import re
from collections.abc import Callable

from lsprotocol import types

from shardlint.findings.suppress import parse as parse_suppressions
from shardlint.lsp.convert import to_range, utf8_col
from shardlint.lsp.result import Result
from shardlint.rules.base import Finding, all_rules, get_rule
from shardlint.source import Span

_CODE = re.compile(r"SHL\d{0,3}", re.IGNORECASE)


def rule_docs(code: str) -> str | None:
    """Markdown docs of a code; for a prefix such as ``SHL4``, the rules it covers."""
    rule = get_rule(code)
    if rule is not None:
        return rule.docs_markdown()
    matching = [r for r in all_rules() if r.code.startswith(code.upper())]
    if not matching:
        return None
    lines = [f"# {code.upper()}: {len(matching)} rules", ""]
    lines += [f"- **{r.code}** `{r.name}`: {r.summary}" for r in matching]
    return "\n".join(lines)


def hover(res: Result, uri: str, pos: types.Position, encoding: str,
          markdown: bool, saving: Callable[[Finding], str | None] | None = None
          ) -> types.Hover | None:
    """``saving``: what fixing a finding saved in the memory check's what-if compiles (shown
    above the rule's documentation), or None."""
    view = res.view(uri)
    if view is None:
        return None
    line = view.first + pos.line
    if not view.holds(line):
        return None
    source = res.source
    col = utf8_col(source, line, pos.character, encoding)
    found = _in_suppression(res, line, col)
    if found is None:
        found = _on_finding(res, uri, line, col, saving)
    if found is None:
        return None
    text, span = found
    kind = types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText
    return types.Hover(contents=types.MarkupContent(kind=kind, value=text),
                       range=to_range(source, span, encoding, view.shift))


def _in_suppression(res: Result, line: int, col: int) -> tuple[str, Span] | None:
    text = res.source.line_text(line)
    if "#" not in text:
        return None  # (looked for only on a line that may hold a suppression)
    raw = text.encode("utf-8")
    found = parse_suppressions(res.source.text, wanted={line}, spans=res.spans)
    for c_line, start, end, _ in found.comments:
        if c_line != line or not start <= col <= end:
            continue
        segment = raw[start:end].decode("utf-8", "replace")
        for m in _CODE.finditer(segment):
            a = start + len(segment[:m.start()].encode("utf-8"))
            b = start + len(segment[:m.end()].encode("utf-8"))
            if a <= col <= b:
                docs = rule_docs(m.group(0))
                if docs is not None:
                    return docs, Span(line, a, line, b)
    return None


def _on_finding(res: Result, uri: str, line: int, col: int,
                saving: Callable[[Finding], str | None] | None = None
                ) -> tuple[str, Span] | None:
    hits = []
    for f, _ in res.items(uri):
        s = f.span
        if (s.line, s.col) <= (line, col) <= (s.end_line, s.end_col):
            hits.append(f)
    if not hits:
        return None
    docs = []
    for code in dict.fromkeys(f.code for f in hits):
        text = rule_docs(code)
        if text is not None:
            docs.append(text)
    if not docs:
        return None
    saved = [t for f in hits if saving is not None and (t := saving(f))]
    if saved:
        docs.insert(0, "**Memory check**: " + " ".join(dict.fromkeys(saved)))
    return "\n\n---\n\n".join(docs), hits[0].span
