"""Client settings: ``initializationOptions`` and ``workspace/didChangeConfiguration``.

Accepted either flat or under a ``shardlint`` key (VS Code sends its settings section)::

    {"shardlint": {"select": ["SHL1"], "ignore": ["SHL103"], "extendSelect": [],
                   "severity": {"SHL501": "warning"}, "debounceMs": 150}}

``select``/``ignore``/``extendSelect``/``severity`` override ``[tool.shardlint]`` of the project;
``debounceMs`` is how long the server waits after an edit before it analyses and pushes.

``memory`` turns on the memory code lens (``memory_lens.py``)::

    {"memory": {"enabled": true, "trusted": true, "devices": [1, 2], "hardware": "H100-80GB",
                "capacity": "24GiB", "python": "/path/to/.venv/bin/python",
                "target": "tpu-v5e:2x2"}}

It runs the workspace's code, so it needs both ``enabled`` and ``trusted``: the server cannot
know whether the editor trusts the folder, the client says so. Absent or malformed: off.
``devices``/``hardware``/``capacity``/``python``/``target`` override ``[tool.shardlint.memory]``
(``target``: compile for a TPU topology with libtpu, as ``shardlint memory --target``).

Workspace trust: ``{"trusted": true}`` (top level of the section), or else ``memory.trusted``
(what the VS Code extension sends from ``vscode.workspace.isTrusted``). Absent, malformed or
false: untrusted, and the server writes nothing into the workspace (its cache goes to the user's
cache directory, see ``analyzer.py``). A top-level ``"trusted": false`` also turns the memory
check off; ``true`` counts for ``memory`` when it does not say ``trusted`` itself. Like every
setting it is read from each settings payload in full: one without it means untrusted.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from shardlint.errors import ConfigError, UsageError
from shardlint.memory.hardware import find_accelerator
from shardlint.memory.settings import parse_devices
from shardlint.memory.units import parse_size

DEFAULT_DEBOUNCE_MS = 150
_ALIASES = {
    "select": "select", "ignore": "ignore", "extendSelect": "extend_select",
    "extend_select": "extend_select", "extend-select": "extend_select", "severity": "severity",
}
_DEBOUNCE_KEYS = ("debounceMs", "debounce_ms", "debounce-ms")


@dataclass(frozen=True)
class MemoryClientSettings:
    enabled: bool = False
    trusted: bool = False
    devices: tuple[int, ...] | None = None
    hardware: str | None = None  # canonical accelerator name
    capacity: int | None = None  # bytes per device
    python: str | None = None
    target: str | None = None  # `tpu-v5e:2x2`, normalised

    @property
    def active(self) -> bool:
        return self.enabled and self.trusted


@dataclass
class ClientSettings:
    overrides: dict = field(default_factory=dict)  # keyword arguments of Config.with_overrides
    debounce_ms: int | None = None
    memory: MemoryClientSettings = field(default_factory=MemoryClientSettings)
    trusted: bool = False  # the client declared the workspace trusted
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
        elif key == "memory" and value is not None:
            out.memory = _memory(value, out.problems)
        elif key == "trusted" and value is not None and not isinstance(value, bool):
            out.problems.append("`trusted` must be true or false")
    declared = section.get("trusted")
    if declared is not None and not isinstance(declared, bool):
        declared = False  # malformed: untrusted, whatever `memory` says
    if isinstance(declared, bool):
        out.trusted = declared
        memory = section.get("memory")
        says = isinstance(memory, dict) and memory.get("trusted") is not None
        if not declared or not says:
            out.memory = replace(out.memory, trusted=declared)
    else:
        out.trusted = out.memory.trusted
    return out


def _memory(raw, problems: list[str]) -> MemoryClientSettings:
    if not isinstance(raw, dict):
        problems.append("`memory` must be an object")
        return MemoryClientSettings()
    kw: dict = {"enabled": raw.get("enabled") is True, "trusted": raw.get("trusted") is True}
    try:
        if raw.get("devices"):
            kw["devices"] = parse_devices(raw["devices"], key="memory.devices")
        if raw.get("hardware"):
            acc = find_accelerator(str(raw["hardware"]))
            kw["hardware"], kw["capacity"] = acc.name, acc.bytes_per_device
        if raw.get("capacity"):
            kw["capacity"], kw["hardware"] = parse_size(raw["capacity"]), None
        if isinstance(raw.get("target"), str) and raw["target"].strip():
            from shardlint.memory.targets import parse_target

            kw["target"] = parse_target(raw["target"]).spec
    except (ConfigError, KeyError, ValueError, UsageError) as exc:
        problems.append(f"`memory`: {exc.args[0] if exc.args else exc}")
    python = raw.get("python")
    if isinstance(python, str) and python.strip():
        kw["python"] = python.strip()
    return MemoryClientSettings(**kw)
