"""The releases the project's own modules run at, followed through their imports.

A module-level import outside ``if`` / ``try`` loads its module whenever the importing module is
imported, so a module runs only at the releases every module it loads that way runs at:
``trainer.py`` doing ``from . import train_utils``, where ``train_utils.py`` does ``from flax
import optim``, runs at flax 0.5.3 at most too. Each summary keeps what its own imports bound
(``ModuleSummary.runs``) and the modules they load (``ModuleSummary.loads``);
:func:`inherited` joins them for one file (``semantics/catalog/runnable.py`` narrows its range).
"""

from __future__ import annotations

from shardlint.semantics.catalog.versions import RELEASES, parse
from shardlint.semantics.catalog.runnable import Inherited
from shardlint.semantics.flow.project import ProjectIndex, project_cached


def _parents(name: str) -> list[str]:
    """``a.b.c`` loads ``a`` and ``a.b`` first."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _loaded(project: ProjectIndex, name: str, module: str) -> list[str]:
    """The project modules ``import name`` in ``module`` loads: ``a.b.c`` loads ``a`` and
    ``a.b`` first; where no module of the project has that name, a script's ``import utils``
    loads its sibling (``examples.lm1b.utils``: the script's folder is on ``sys.path``)."""
    summaries = project.summaries
    found = [p for p in _parents(name) if p in summaries]
    if found and found[-1] == name:
        return found
    folder = module.rpartition(".")[0]
    if folder and f"{folder}.{name}" in summaries:
        return [f"{folder}.{p}" for p in _parents(name) if f"{folder}.{p}" in summaries]
    return found


def _raise(oldest: Inherited, pkg: str, first: str, name: str, module: str) -> None:
    """Keep ``first`` as the oldest release of ``pkg`` where it is newer than what is kept
    (and not the first release there is, which bounds nothing)."""
    if first != RELEASES[pkg][0] and (pkg not in oldest or parse(first) > parse(oldest[pkg][0])):
        oldest[pkg] = (first, name, module)


@project_cached
def bounds_of(project: ProjectIndex, module: str) -> tuple[Inherited, Inherited]:
    """What bounds ``module``, through every module of the project it loads: package ->
    (newest, the jax / flax module, the project module importing it), and the same for the
    oldest."""
    newest: Inherited = {}
    oldest: Inherited = {}
    seen = {module}
    todo = [module]
    while todo:
        current = todo.pop()
        summary = project.summaries.get(current)
        if summary is None:
            continue
        for name, first, last in summary.runs:
            pkg = name.split(".", 1)[0]
            if last != RELEASES[pkg][-1] and (pkg not in newest
                                             or parse(last) < parse(newest[pkg][0])):
                newest[pkg] = (last, name, current)
            _raise(oldest, pkg, first, name, current)
        for loaded in summary.loads:
            for name in _loaded(project, loaded, current):
                if name not in seen:
                    seen.add(name)
                    todo.append(name)
    return newest, oldest


def inherited(project: ProjectIndex, loads: list[tuple[str, int]],
              module: str) -> list[tuple[int, str, Inherited, Inherited]]:
    """Per module-level import of the file (``loads``: module, line) that loads a module of the
    project: (line, that module, what bounds it)."""
    out = []
    done: set[str] = {module}
    for loaded, line in loads:
        for name in _loaded(project, loaded, module):
            if name in done:
                continue
            done.add(name)
            newest, oldest = bounds_of(project, name)
            if newest or oldest:
                out.append((line, name, newest, oldest))
    return out


def oldest_in(project: ProjectIndex, modules: list[str]) -> Inherited:
    """What the code of these modules (a folder the same pins judge) needs at least: package ->
    (the newest first release among what their module-level imports load and their calls use
    outside compatibility code, that import or call, the module). A pin older than it is stale
    for the whole folder (``runnable``)."""
    oldest: Inherited = {}
    for module in sorted(modules):
        summary = project.summaries.get(module)
        for name, first, _ in summary.runs if summary is not None else ():
            _raise(oldest, name.split(".", 1)[0], first, name, module)
    return oldest

