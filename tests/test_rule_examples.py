"""Every rule's VALID and INVALID examples are its tests (and its documentation)."""

from __future__ import annotations

import pytest
from helpers import expected_markers, run_example

from shardlint.rules.base import all_rules

RULES = [r for r in all_rules() if r.code != "SHL000"]
CASES = [
    pytest.param(rule, kind, i, id=f"{rule.code}-{kind}-{i}")
    for rule in RULES
    for kind in ("valid", "invalid")
    for i in range(len(rule.VALID if kind == "valid" else rule.INVALID))
]


@pytest.mark.parametrize("rule,kind,index", CASES)
def test_example(tmp_path, rule, kind, index):
    ex = (rule.VALID if kind == "valid" else rule.INVALID)[index]
    found = {f for f in run_example(tmp_path, ex, rule.code) if f[2] == rule.code}
    expected = {e for e in expected_markers(ex.files) if e[2] == rule.code}
    if kind == "valid":
        assert not found, f"{rule.code} fired on a VALID example: {sorted(found)}"
        assert not expected, "VALID examples carry no `# expect:` markers"
    else:
        assert expected, "an INVALID example marks the lines it expects with `# expect: SHLnnn`"
        assert found == expected


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_has_enough_examples(rule):
    assert len(rule.VALID) >= 3, f"{rule.code} needs at least 3 VALID examples"
    assert len(rule.INVALID) >= 3, f"{rule.code} needs at least 3 INVALID examples"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_docs_complete(rule):
    assert rule.code.startswith("SHL") and len(rule.code) == 6
    assert rule.name and rule.name == rule.name.lower() and " " not in rule.name
    assert rule.severity in ("error", "warning", "info")
    for section in ("summary", "what", "why"):
        assert getattr(rule, section).strip(), f"{rule.code} lacks `{section}`"
    md = rule.docs_markdown()
    for heading in ("## What it does", "## Why is this bad?", "## Fix safety", "## Versions"):
        assert heading in md
