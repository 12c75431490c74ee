"""docs/rules.md is generated from the rule files; a stale copy fails here."""

from __future__ import annotations

from pathlib import Path

from shardlint.rules.base import all_rules, reference_markdown

ROOT = Path(__file__).resolve().parent.parent


def test_rules_reference_is_current():
    current = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert current == reference_markdown(), (
        "docs/rules.md is stale: run `shardlint rules --format markdown > docs/rules.md`")


def test_every_rule_is_documented():
    text = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    for r in all_rules():
        assert f"## {r.code} {r.name}" in text
