"""``shardlint server`` with two planted faults, to show the server survives them:
a rule (SHL998) whose check raises, and a hover handler that raises on the first line."""

from __future__ import annotations

from shardlint.lsp import hover as hover_module
from shardlint.lsp.server import run_stdio
from shardlint.rules.base import Rule, all_rules, register

all_rules()


@register
class ExplodingRule(Rule):
    code = "SHL998"
    name = "exploding-rule"
    summary = "A rule with a bug."

    def check(self):
        raise RuntimeError("this rule has a bug")


_hover = hover_module.hover


def exploding_hover(res, uri, pos, encoding, markdown, *rest):
    if pos.line == 0:
        raise RuntimeError("this hover has a bug")
    return _hover(res, uri, pos, encoding, markdown, *rest)


hover_module.hover = exploding_hover

if __name__ == "__main__":
    run_stdio()
