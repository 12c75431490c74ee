"""Buffer donation across calls: the calls of callables that donate (defined in this file or
imported from a project module) and which donated arguments the compiled function hands back.

What each jit site asks for (``donate_argnums``...) is read in ``jit_sites.py``; what is read
after a call lives in ``liveness.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from shardlint.semantics.file.dataflow import SAME, UPDATED
from shardlint.semantics.file.facts import CallSite, FileFacts, JitSite
from shardlint.semantics.file.jit_sites import calls_of, donors
from shardlint.semantics.flow.compiled import Compiled, compiled, compiled_at, flowing
from shardlint.semantics.flow.project import ProjectIndex, project_callees


@dataclass
class DonatingCall:
    """A call of a callable that donates: what it donates and how that was asked for."""

    call: CallSite
    positions: set[int]
    names: set[str]
    how: str  # "donate_argnums=0"
    defined_in: str | None = None  # another module's path, when imported
    site: JitSite | None = None  # the jit site, when it is in this file
    key: str | None = None  # "module:qual" of the donating callable, when imported


def donating_calls(facts: FileFacts, project: ProjectIndex) -> list[DonatingCall]:
    """Calls of donating callables: defined in this file, or imported from a project module
    (``from train_lib import train_step`` with ``train_step`` donating there)."""
    out = [DonatingCall(c, d.positions, d.names, d.how, site=d.site)
           for d in donors(facts) for c in calls_of(facts, d.site)]
    for c, summary, qual in project_callees(facts, project):
        if qual not in summary.donating:
            continue
        positions, names, how = summary.donating[qual]
        out.append(DonatingCall(c, set(positions), set(names), how, summary.path,
                                key=f"{summary.module}:{qual}"))
    return out


def handed_back(facts: FileFacts, project: ProjectIndex, d: DonatingCall) -> set[int | str]:
    """The donated arguments (call positions, keyword names) the compiled function returns as
    they came in or as an updated version of the same structure (``state.apply_gradients``,
    ``optax.apply_updates``, a cache written with ``.at[].set``): outputs of their own shapes
    and dtypes, so XLA certainly reuses their buffers and the arrays passed are deleted.

    For any other donated argument no output is known to fit: its buffers are deleted only
    where XLA finds an output of the same shape and dtype to alias them to (else "Some donated
    buffers were not usable" and the array stays valid) -- which depends on shapes shardlint
    does not know. An unknown callee hands back nothing known."""
    target: Compiled | None = None
    if d.site is not None:
        target = compiled(facts, project, d.site)
    elif d.key is not None:
        target = compiled_at(project, d.key)
    if target is None or target.params is None:
        return set()
    returned, _ = flowing(facts, project, target)
    kept = {p for p, f in returned.items() if f.kind in (SAME, UPDATED)}
    out: set[int | str] = {n for n in d.names if n in kept}
    for i in d.positions:
        j = i + target.offset
        if j < len(target.params) and target.params[j] in kept:
            out.add(i)
    return out
