"""Rule tables: what each ``nn.logical_axis_rules(...)``, ``set_logical_axis_rules(...)``,
``rules=`` argument and ``logical_to_mesh*`` call is handed, as literal entries where they can be
read, with the nodes of their logical (left) and mesh (right) names."""

from __future__ import annotations

import ast

from shardlint.semantics.catalog.api import Role
from shardlint.semantics.catalog.names import is_unknown, literal_or_unknown
from shardlint.semantics.file.facts import FileFacts, RulesTable, Scope


def collect_rule_tables(facts: FileFacts) -> None:
    """The rule tables handed to contexts, setters and ``logical_to_mesh*`` (after the pass,
    when every binding is known)."""
    for site in facts.calls:
        known = site.api
        if known is None:
            continue
        expr: ast.expr | None = None
        local = True
        if known.role in (Role.RULES_CONTEXT, Role.RULES_SETTER):
            expr = site.arg(0, "rules")
            local = False
        elif site.kwarg("rules") is not None:
            expr = site.kwarg("rules")
        elif known.name in ("flax.linen.logical_to_mesh_sharding",):
            expr = site.arg(2, "rules")
        elif known.name in ("flax.linen.logical_to_mesh",):
            expr = site.arg(1, "rules")
        if expr is None:
            continue
        table = _rules_table(facts, expr, site.scope)
        table.local = local
        facts.rule_tables.append(table)

def _rules_table(facts: FileFacts, expr: ast.expr, scope: Scope) -> RulesTable:
    consts = facts.consts_for(scope)
    node = expr
    seen = 0
    while isinstance(node, ast.Name) and node.id in consts and seen < 8:
        node = consts[node.id]
        seen += 1
    value = literal_or_unknown(expr, consts)
    entries = None
    lhs: list[tuple[str, ast.expr]] = []
    rhs: list[tuple[str, ast.expr]] = []
    if not is_unknown(value) and isinstance(value, (tuple, list)) and all(
        isinstance(e, (tuple, list)) and len(e) == 2 and isinstance(e[0], str) for e in value
    ):
        entries = tuple((e[0], e[1]) for e in value)
        if isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                if isinstance(elt, (ast.Tuple, ast.List)) and len(elt.elts) == 2:
                    k, v = elt.elts
                    if isinstance(k, ast.Constant) and isinstance(k.value, str):
                        lhs.append((k.value, k))
                    targets = v.elts if isinstance(v, (ast.Tuple, ast.List)) else [v]
                    for t in targets:
                        if isinstance(t, ast.Constant) and isinstance(t.value, str):
                            rhs.append((t.value, t))
    return RulesTable(expr, entries, scope, tuple(lhs), tuple(rhs))
