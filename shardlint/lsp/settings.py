"""Client settings: ``initializationOptions`` and ``workspace/didChangeConfiguration``.

Accepted either flat or under a ``shardlint`` key (VS Code sends its settings section)::

    {"shardlint": {"select": ["SHL1"], "ignore": ["SHL103"], "extendSelect": [],
                   "severity": {"SHL501": "warning"}, "debounceMs": 150}}

``select``/``ignore``/``extendSelect``/``severity`` override ``[tool.shardlint]`` of the project;
``debounceMs`` is how long the server waits after an edit before it analyses and pushes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_DEBOUNCE_MS = 150
_ALIASES = {
    "select": "select", "ignore": "ignore", "extendSelect": "extend_select",
    "extend_select": "extend_select", "extend-select": "extend_select", "severity": "severity",
}
_DEBOUNCE_KEYS = ("debounceMs", "debounce_ms", "debounce-ms")


@dataclass
class ClientSettings:
    overrides: dict = field(default_factory=dict)  # keyword arguments of Config.with_overrides
    debounce_ms: int | None = None
    problems: list[str] = field(default_factory=list)


def parse(raw) -> ClientSettings:
    out = ClientSettings()
    if not isinstance(raw, dict):
        return out
    section = raw.get("shardlint", raw)
    if not isinstance(section, dict):
        out.problems.append("`shardlint` settings must be an object")
        return out
    for key, value in section.items():
        if key in _ALIASES:
            name = _ALIASES[key]
            if value is None:
                continue
            if name == "severity":
                if isinstance(value, dict):
                    out.overrides[name] = {str(k): v for k, v in value.items()}
                else:
                    out.problems.append("`severity` must map codes to error/warning/info")
            elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                out.overrides[name] = list(value)
            else:
                out.problems.append(f"`{key}` must be a list of rule codes or prefixes")
        elif key in _DEBOUNCE_KEYS:
            if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 10_000:
                out.debounce_ms = int(value)
            else:
                out.problems.append(f"`{key}` must be a number of milliseconds (0 to 10000)")
    return out
