"""Code actions: each finding's own fix, "Ignore SHLnnn on this line", "Ignore SHLnnn in this
file", and ``source.fixAll.shardlint`` (safe fixes only, never two that overlap).

Every edit is computed on the text the diagnostics came from and sent as a versioned edit where
the client supports it, so an edit made for an older text is refused instead of misapplied.
"""

from __future__ import annotations

import re

from lsprotocol import types

from shardlint.findings.fixes import resolve
from shardlint.findings.suppress import parse as parse_suppressions
from shardlint.findings.suppress import uncommentable
from shardlint.lsp.client import ClientFeatures
from shardlint.lsp.convert import SOURCE, to_range
from shardlint.lsp.result import Result, View
from shardlint.rules.base import Finding, Fix
from shardlint.source import SourceText, Span

FIX_ALL = "source.fixAll.shardlint"
_CODE = re.compile(r"SHL\d{0,3}", re.IGNORECASE)
_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=]")


def wanted(kind: str, only) -> bool:
    if not only:
        return True
    return any(kind == k or kind.startswith(f"{k}.") for k in only)


def code_actions(res: Result, uri: str, rng: types.Range, only,
                 features: ClientFeatures) -> list[types.CodeAction]:
    view = res.view(uri)
    if view is None:
        return []
    out: list[types.CodeAction] = []
    if wanted(types.CodeActionKind.QuickFix, only):
        out.extend(_quick_fixes(res, view, rng, features))
    if wanted(FIX_ALL, only):
        action = fix_all(res, view, features)
        if action is not None:
            out.append(action)
    return out


def _overlaps(a: types.Range, b: types.Range) -> bool:
    return not ((a.end.line, a.end.character) < (b.start.line, b.start.character)
                or (a.start.line, a.start.character) > (b.end.line, b.end.character))


def _quick_fixes(res: Result, view: View, rng: types.Range,
                 features: ClientFeatures) -> list[types.CodeAction]:
    out = []
    ignored: set[tuple[str, str]] = set()
    for f, diag in res.items(view.uri):
        if not _overlaps(diag.range, rng):
            continue
        fix = f.fix
        edits = _fix_edits(fix, res.source, view, features.encoding) if fix else None
        if fix is not None and edits:
            title = fix.description + (" (unsafe)" if fix.applicability == "unsafe" else "")
            out.append(types.CodeAction(
                title=title, kind=types.CodeActionKind.QuickFix, diagnostics=[diag],
                is_preferred=fix.applicability == "safe",
                edit=_workspace_edit({view.uri: edits}, res, features)))
        if f.code == "SHL000":
            continue  # a syntax error cannot be suppressed
        # (worked out only for a finding at the cursor, once per result: a client asks for
        # code actions at every move of the cursor)
        sup, blocked = _comments_of(res, f)
        if ("line", f.code + str(f.span.line)) not in ignored:
            ignored.add(("line", f.code + str(f.span.line)))
            edit = _ignore_line(f, res.source, view, sup, blocked, features.encoding)
            if edit is not None:
                out.append(types.CodeAction(
                    title=f"Ignore {f.code} on this line", kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diag], edit=_workspace_edit({view.uri: [edit]}, res, features)))
        if ("file", f.code) not in ignored:
            ignored.add(("file", f.code))
            at = _ignore_file(f.code, res, sup, features.encoding)
            if at is not None:
                out.append(types.CodeAction(
                    title=f"Ignore {f.code} in this file", kind=types.CodeActionKind.QuickFix,
                    diagnostics=[diag], edit=_workspace_edit({at[0]: [at[1]]}, res, features)))
    return out


def fix_all(res: Result, view: View, features: ClientFeatures) -> types.CodeAction | None:
    taken: list[Span] = []
    edits: list[types.TextEdit] = []
    text = res.source.text
    fixes = [f for f, _ in res.items(view.uri)
             if f.fix is not None and f.fix.applicability == "safe" and resolve(f.fix, text)]
    fixes.sort(key=lambda f: min((e.span.line, e.span.col) for e in resolve(f.fix, text)))
    for f in fixes:
        spans = [e.span for e in resolve(f.fix, text)]
        if any(_spans_overlap(s, t) for s in spans for t in taken):
            continue  # the next run fixes it
        converted = _fix_edits(f.fix, res.source, view, features.encoding)
        if converted:
            taken.extend(spans)
            edits.extend(converted)
    if not edits:
        return None
    return types.CodeAction(title=f"{SOURCE}: apply all safe fixes", kind=FIX_ALL,
                            edit=_workspace_edit({view.uri: edits}, res, features))


def _spans_overlap(a: Span, b: Span) -> bool:
    return not ((a.end_line, a.end_col) <= (b.line, b.col) or (b.end_line, b.end_col) <= (a.line, a.col))


def _fix_edits(fix: Fix | None, source: SourceText, view: View,
               encoding: str) -> list[types.TextEdit] | None:
    if fix is None or fix.applicability == "display-only":
        return None
    edits = resolve(fix, source.text)  # (a recipe is built here, when the client asks)
    if not edits:
        return None
    out = []
    for e in edits:
        if not view.holds(e.span.line, e.span.end_line):
            return None  # an edit outside this document (or cell): not offered here
        out.append(types.TextEdit(to_range(source, e.span, encoding, view.shift), e.text))
    return out


def _workspace_edit(edits: dict[str, list[types.TextEdit]], res: Result,
                    features: ClientFeatures) -> types.WorkspaceEdit:
    if features.document_changes:
        return types.WorkspaceEdit(document_changes=[
            types.TextDocumentEdit(types.OptionalVersionedTextDocumentIdentifier(
                uri=uri, version=res.versions.get(uri)), list(e))
            for uri, e in edits.items()])
    return types.WorkspaceEdit(changes=edits)


# ---- suppression comments ----------------------------------------------------------------------------
def _comments_of(res: Result, f: Finding):
    """The suppression comments a finding's lines need (theirs and the file-wide ones) and
    which of its lines a comment cannot end; kept with the result. Only the statements that
    hold them are tokenized, found with the analysis's syntax tree (``Result.spans``)."""
    lines = tuple(dict.fromkeys((f.span.line, f.span.end_line)))
    key = ("comments", lines)
    found = res.derived.get(key)
    if found is None:
        text = res.source.text
        found = res.derived[key] = (parse_suppressions(text, wanted=lines, spans=res.spans),
                                    uncommentable(text, lines, res.spans))
    return found


def _insert(source: SourceText, line: int, utf8_col: int, text: str, view: View,
            encoding: str) -> types.TextEdit:
    return types.TextEdit(to_range(source, Span(line, utf8_col, line, utf8_col), encoding,
                                   view.shift), text)


def _ignore_line(f: Finding, source: SourceText, view: View, sup, blocked: set[int],
                 encoding: str) -> types.TextEdit | None:
    for line in dict.fromkeys((f.span.line, f.span.end_line)):
        if line in blocked or not view.holds(line):
            continue
        comments = [c for c in sup.comments if c[0] == line]
        if any(kind == "file" for _, _, _, kind in comments):
            continue  # a second comment after a file-ignore one would not be read
        raw = source.line_text(line).encode("utf-8")
        for _, start, end, kind in comments:
            if kind == "line":  # extend `# shardlint: ignore[...]` before its `]`
                return _insert(source, line, end - 1, f", {f.code}", view, encoding)
            if kind == "noqa":  # extend a noqa comment after its last code
                segment = raw[start:end].decode("utf-8", "replace")
                last = list(_CODE.finditer(segment))[-1]
                col = start + len(segment[:last.end()].encode("utf-8"))
                return _insert(source, line, col, f", {f.code}", view, encoding)
        stripped = len(raw.rstrip())
        return types.TextEdit(
            to_range(source, Span(line, stripped, line, len(raw)), encoding, view.shift),
            f"  # shardlint: ignore[{f.code}]")
    return None


def _ignore_file(code: str, res: Result, sup, encoding: str) -> tuple[str, types.TextEdit] | None:
    source = res.source
    for line, _, end, kind in sup.comments:
        if kind == "file":
            view = _view_of_line(res, line)
            if view is not None:
                return view.uri, _insert(source, line, end - 1, f", {code}", view, encoding)
    view = res.first_view()
    if view is None:
        return None
    line = view.first  # after a shebang and an encoding cookie, which must stay first
    if source.line_text(line).startswith("#!"):
        line += 1
    if line <= min(view.last, view.first + 1) and _CODING.match(source.line_text(line)):
        line += 1
    comment = f"# shardlint: file-ignore[{code}]"
    if line > view.last:  # nothing after the header lines: add a line at the end
        end = len(source.line_text(view.last).encode("utf-8"))
        return view.uri, _insert(source, view.last, end, "\n" + comment, view, encoding)
    return view.uri, _insert(source, line, 0, comment + "\n", view, encoding)


def _view_of_line(res: Result, line: int) -> View | None:
    if res.cells is None:
        return res.first_view()
    found = res.cells.locate(line)
    return res.view(found[0].uri) if found else None
