"""The probe's own call: context findings that exist only because the worker calls a probe bare.

The worker calls a probe with no axis rules and no mesh, so the probe file is linted once more
with that call appended; a context finding (SHL101-SHL103) whose chain of callers ends at that
call is the probe's own. Both the reasons (``reasons.py``) and the what-if plans (``whatif.py``)
ask this; it sits below both so that neither imports the other for it.
"""

from __future__ import annotations

import re
from typing import Any

from shardlint.memory.probes import Probe

CONTEXT_CODES = {"SHL101": "a mesh", "SHL102": "axis rules", "SHL103": "a mesh"}


def own_call_findings(engine: Any, probe: Probe) -> list[tuple[Any, str]]:
    """Context findings that exist because the worker calls the probe with no context, each
    with the message that says so."""
    try:
        text = probe.path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    body = text if text.endswith("\n") else text + "\n"
    call_line = body.count("\n") + 2
    said = re.compile(rf" \(`[^`]+` is called at [^\s()]+:{call_line} without it\)")
    try:
        found = engine.lint_text(probe.path, f"{body}\n{probe.function}()\n")
    finally:
        engine.update_file(probe.path, text)  # the index holds the file as it is on disk again
    own = []
    for f in found:
        if f.code in CONTEXT_CODES and any(r.span.line == call_line for r in f.related):
            message = said.sub("", f.message) + " (the memory worker calls the probe with none)"
            own.append((f, message))
    return own
