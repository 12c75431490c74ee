"""The rule framework: findings, fixes, the rule base class, examples and the registry.

A rule is one file under ``shardlint/rules/`` holding its code, name, severity, docs, VALID and
INVALID examples (which are its tests and its documentation) and ``check``. Rules query facts
(``RuleContext.facts``, ``RuleContext.project``); they never read files or configuration.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import ClassVar, Iterable, Iterator

from shardlint.semantics.catalog.versions import Versions, parse
from shardlint.semantics.file.facts import FileFacts
from shardlint.semantics.flow.project import ProjectIndex
from shardlint.source import SourceText, Span

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Edit:
    """Replace ``span`` (UTF-8 columns) with ``text``."""

    span: Span
    text: str


@dataclass(frozen=True)
class Fix:
    description: str
    applicability: str  # "safe" | "unsafe" | "display-only"
    edits: tuple[Edit, ...] = ()
    # A fix whose edit is costly to build (libcst) carries what it needs instead, and is built
    # only when asked for -- a code action, `--fix`, a report with edits (``fixes.resolve``):
    # ("wrap_in_with", line, context)
    recipe: tuple | None = None


@dataclass(frozen=True)
class Related:
    path: str
    span: Span
    message: str


@dataclass
class Finding:
    code: str
    name: str
    severity: str
    message: str
    path: str
    span: Span
    fix: Fix | None = None
    related: tuple[Related, ...] = ()
    tags: tuple[str, ...] = ()  # "deprecated", "unnecessary"
    symbol: str = ""  # the enclosing function or class ("Trainer.step"); "" at module level
    # Notebooks: the span is in the joined code cells; (cell number, lines to subtract) for display.
    cell: tuple[int, int] | None = None
    # `check --memory`: what fixing it saved in the memory check's what-if compiles, one entry
    # per probe that reaches it (never cached: it comes with the measurement).
    saving: list[dict] | None = None

    @property
    def line(self) -> int:
        return self.span.line

    def sort_key(self) -> tuple:
        s = self.span
        return (self.path, s.line, s.col, self.code, s.end_line, s.end_col, self.message)


@dataclass(frozen=True)
class Example:
    """A rule example. ``files`` maps file names to sources (one file: ``{"example.py": src}``).

    In INVALID examples a line that must be flagged ends with ``# expect: SHLnnn``.
    """

    files: dict[str, str]
    versions: dict[str, str] = field(default_factory=dict)
    title: str = ""

    @property
    def source(self) -> str:
        return next(iter(self.files.values()))


def example(source: str | dict[str, str], title: str = "", **versions: str) -> Example:
    files = {"example.py": source} if isinstance(source, str) else dict(source)
    return Example({k: _dedent(v) for k, v in files.items()}, versions, title)


def _dedent(text: str) -> str:
    import textwrap

    return textwrap.dedent(text).lstrip("\n")


@dataclass
class RuleContext:
    facts: FileFacts
    project: ProjectIndex
    versions: Versions
    source: SourceText
    _findings: list[Finding] = field(default_factory=list)
    preview: bool = False  # preview mode: behaviours not yet right often enough on real code
    test_code: bool = False  # the file is test code (``test-files``)


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    severity: ClassVar[str] = "warning"
    enabled_by_default: ClassVar[bool] = True
    # Why the rule is in preview (runs only with `--preview` or `preview = true`): it is not
    # yet right often enough on real code (bench/precision/corpus.py). Empty: stable.
    preview: ClassVar[str] = ""
    # Docs, in the fixed sections a reader expects (markdown).
    summary: ClassVar[str] = ""
    what: ClassVar[str] = ""
    why: ClassVar[str] = ""
    use_instead: ClassVar[str] = ""
    fix_safety: ClassVar[str] = "This rule has no automatic fix."
    versions: ClassVar[str] = "All versions."
    # The packages and lowest versions the pitfall exists in, e.g. {"flax": "0.12.2"}.
    applies_from: ClassVar[dict[str, str]] = {}
    applies_until: ClassVar[dict[str, str]] = {}
    VALID: ClassVar[list[Example]] = []
    INVALID: ClassVar[list[Example]] = []

    def __init__(self, ctx: RuleContext):
        self.ctx = ctx
        self.facts = ctx.facts
        self.project = ctx.project

    @classmethod
    def relevant(cls, facts: FileFacts, project: ProjectIndex) -> bool:
        """Cheap test: can this file hold a finding at all? (Most files of a project cannot.)"""
        return True

    @classmethod
    def applies(cls, versions: Versions) -> bool:
        for pkg, v in cls.applies_from.items():
            if not versions.at_least(pkg, v):
                return False
        for pkg, v in cls.applies_until.items():
            if versions.at_least(pkg, v):
                return False
        return True

    def check(self) -> Iterable[Finding]:
        raise NotImplementedError

    # ---- helpers for rules -----------------------------------------------------------------------
    def span(self, node: ast.AST) -> Span:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        return Span(line, col, getattr(node, "end_lineno", None) or line,
                    getattr(node, "end_col_offset", None) or col)

    def finding(self, node: ast.AST | Span, message: str, *, severity: str | None = None,
                fix: Fix | None = None, related: Iterable[Related] = (),
                tags: Iterable[str] = ()) -> Finding:
        span = node if isinstance(node, Span) else self.span(node)
        return Finding(self.code, self.name, severity or self.severity, message,
                       self.facts.path, span, fix, tuple(related), tuple(tags))

    def related(self, node: ast.AST | Span, message: str, path: str | None = None) -> Related:
        span = node if isinstance(node, Span) else self.span(node)
        return Related(path or self.facts.path, span, message)

    def text(self, node: ast.AST) -> str:
        return self.ctx.source.segment(self.span(node))

    @classmethod
    def docs_markdown(cls) -> str:
        parts = [f"# {cls.code} {cls.name}", "", cls.summary, ""]
        meta = f"Default severity: **{cls.severity}**"
        if not cls.enabled_by_default:
            meta += " (off by default: enable with `select`)"
        if cls.preview:
            meta += (" (preview: runs only with `--preview` or `preview = true`)\n\n"
                     f"**Why in preview.** {cls.preview.strip()}")
        parts += [meta, "", "## What it does", cls.what.strip(), "", "## Why is this bad?",
                  cls.why.strip(), ""]
        if cls.INVALID:
            parts += ["## Example", "```python", strip_markers(cls.INVALID[0].source).rstrip(),
                      "```", ""]
        if cls.use_instead:
            parts += ["## Use instead", cls.use_instead.strip(), ""]
        elif cls.VALID:
            parts += ["## Use instead", "```python", cls.VALID[0].source.rstrip(), "```", ""]
        parts += ["## Fix safety", cls.fix_safety.strip(), "", "## Versions",
                  cls.versions.strip(), ""]
        return "\n".join(parts)


def reference_markdown() -> str:
    """The whole rule reference (docs/rules.md), generated from the rule files."""
    rules = all_rules()
    out = ["# shardlint rules", "",
           "<!-- Generated by `shardlint rules --format markdown`: do not edit by hand. -->", "",
           "| code | name | severity | on by default | summary |", "|---|---|---|---|---|"]
    for r in rules:
        anchor = f"{r.code.lower()}-{r.name}"
        on = "preview" if r.preview else "yes" if r.enabled_by_default else "no"
        out.append(f"| [{r.code}](#{anchor}) | {r.name} | {r.severity} | {on} | {r.summary} |")
    out.append("")
    for r in rules:
        doc = r.docs_markdown().replace(f"# {r.code} {r.name}", f"## {r.code} {r.name}", 1)
        doc = doc.replace("\n## ", "\n### ")
        doc = doc.replace(f"### {r.code} {r.name}", f"## {r.code} {r.name}", 1)
        out.append(doc.rstrip() + "\n")
    return "\n".join(out).rstrip() + "\n"


def strip_markers(source: str) -> str:
    import re

    return re.sub(r"\s*# expect: [A-Z0-9, ]+$", "", source, flags=re.M)


_REGISTRY: dict[str, type[Rule]] = {}


def register(cls: type[Rule]) -> type[Rule]:
    if cls.code in _REGISTRY:
        raise RuntimeError(f"duplicate rule code {cls.code}")
    _REGISTRY[cls.code] = cls
    return cls


def all_rules() -> list[type[Rule]]:
    from shardlint import rules as _pkg  # noqa: F401  (imports every rule module)

    _pkg.load_all()
    return [_REGISTRY[k] for k in sorted(_REGISTRY)]


def get_rule(code: str) -> type[Rule] | None:
    all_rules()
    return _REGISTRY.get(code.upper())


def version_tuple(v: str) -> tuple[int, ...]:
    return parse(v)


def iter_findings(rules: list[type[Rule]], ctx: RuleContext) -> Iterator[Finding]:
    for cls in rules:
        if cls.applies(ctx.versions):
            yield from cls(ctx).check()
