"""Configuration flags a file sets: ``jax.config.update("name", value)``, ``flax.config.update``.

Only literal flag names count; the value is the literal (``True``, ``"rbg"``) or
:data:`UNKNOWN` when it is computed. :func:`exported_flags` is what a module contributes to the
project index, so a flag set once in ``main.py`` is known when linting ``model.py``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from shardlint.semantics.catalog.names import is_unknown, literal_or_unknown
from shardlint.semantics.file.facts import CallSite, FileFacts

UPDATERS = ("jax.config.update", "flax.config.update")
UNKNOWN = "<unknown>"


@dataclass
class FlagSetting:
    name: str
    value: object  # the literal value, or UNKNOWN
    value_node: ast.expr
    call: CallSite


def flag_settings(facts: FileFacts) -> list[FlagSetting]:
    found = facts.derived.get("flag_settings")
    if found is None:
        settings: list[FlagSetting] = []
        found = settings
        for c in facts.calls_of(*UPDATERS):
            name_node, value_node = c.arg(0, "name"), c.arg(1, "val")
            if not (isinstance(name_node, ast.Constant) and isinstance(name_node.value, str)) \
                    or value_node is None:
                continue
            value = literal_or_unknown(value_node, facts.consts_for(c.scope))
            settings.append(FlagSetting(name_node.value, UNKNOWN if is_unknown(value) else value,
                                     value_node, c))
        facts.derived["flag_settings"] = found
    return found  # type: ignore[return-value]


def exported_flags(facts: FileFacts) -> dict[str, list]:
    """``{"jax_threefry_partitionable": [False]}``: each literal flag set in the file and its
    values (``"<unknown>"`` for a computed one)."""
    out: dict[str, list] = {}
    for s in flag_settings(facts):
        value = s.value if isinstance(s.value, (bool, int, float, str)) or s.value is None \
            else UNKNOWN
        values = out.setdefault(s.name, [])
        if value not in values:
            values.append(value)
    return out
