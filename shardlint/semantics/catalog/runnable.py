"""The releases a file can run at: its folder's range (the pins), narrowed by what it imports.

A module-level import outside ``if`` / ``try`` runs whenever the file is imported, so the file
runs only at releases that have the module (read from the releases: ``catalog/facts``):

- ``from flax import optim``: ``flax.optim`` is in flax 0.3.0 to 0.5.3, so the file runs at flax
  0.5.3 at most; and the newest jax any of those releases imports with is 0.4.23 (flax 0.4.0
  imports ``jax.linear_util``, gone in jax 0.4.24; flax 0.5.3 does ``from jax import
  ShapedArray``, gone in 0.4.14), where ``jax.tree.map`` does not exist yet
  (:func:`facts.flax_runs_with_jax`).
- ``from flax import nnx``: flax 0.8.4 or newer, and the jax that release requires.
- ``import jax.linear_util``: jax 0.4.23 at most, and the flax releases that install beside it.

Only a range is narrowed, or a guess (the project states no version): an exact pin, a lock file,
``[tool.shardlint]`` or the project's environment is what runs. An import the range excludes
entirely (``flax.optim`` under ``flax>=0.8``) narrows nothing: the file cannot run under those
pins, and the pins judge it. A module the table does not know (a private one, another package)
narrows nothing either.

An import of an API that SHL501 reports as moved (``from jax.experimental import maps``,
``from jax import tree_leaves``) narrows nothing: the file is told to migrate it, and what shardlint
says of the rest of the file holds once it has (a fix of the import must not turn another finding
into an error).
"""

from __future__ import annotations

import ast
from dataclasses import replace

from shardlint.semantics.catalog import api, facts
from shardlint.semantics.catalog.names import EXTERNAL_PACKAGES, ImportMap
from shardlint.semantics.catalog.versions import PACKAGES, RELEASES, STALE_PIN, Versions, parse

# how an exact version is learned (versions.py): that version runs, whatever the file imports
_EXACT = ("pinned", "locked", "set in", "installed in the project", "fixed")
# ... but a pin or a lock file can be older than the code it sits beside, and so can a range
# the requirements write (versions.py's "the newest release that `jax<0.5` (...) allows")
STALE_SOURCES = ("pinned", "locked")
_STALE_RANGE = "the newest release that `"


def _imported(tree: ast.Module) -> list[tuple[str, str | None, int]]:
    """(module, name or None, line) for each jax / flax import the module level runs in every
    case: ``import jax.experimental.maps`` and ``from flax import optim`` (a submodule or a name
    of ``flax``)."""
    out: list[tuple[str, str | None, int]] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            out.extend((a.name, None, stmt.lineno) for a in stmt.names
                       if a.name.split(".", 1)[0] in PACKAGES)
        elif isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module \
                and stmt.module.split(".", 1)[0] in PACKAGES:
            out.extend((stmt.module, a.name, stmt.lineno) for a in stmt.names if a.name != "*")
    return out


def spans(tree: ast.Module) -> list[tuple[str, int, str, str]]:
    """(what is imported, line, first release, last release) for each jax / flax import of the
    module level that only some releases answer (``from jax import config`` answers in every
    one: the module, then the config object)."""
    out = []
    for module, name, line in _imported(tree):
        known = api.lookup(module if name is None else f"{module}.{name}")
        if known is not None and (known.removed or known.deprecated):
            # (a moved API SHL501 reports: the file is told to migrate it, and what it says
            # of the rest of the file holds for the file once migrated -- fixing the import
            # must not turn another finding of it into an error)
            continue
        span = facts.import_span(module, name)
        pkg = module.split(".", 1)[0]
        if span is not None and span != (RELEASES[pkg][0], RELEASES[pkg][-1]):
            out.append((module if name is None else f"{module}.{name}", line, *span))
    return out


def loads(tree: ast.Module, imports: ImportMap) -> list[tuple[str, int]]:
    """(module, line) for each module of the project the module-level imports may load in every
    case (``from a import b``: ``a.b``, a submodule or not, and ``a``; packages outside the
    project are left out by name)."""
    out: list[tuple[str, int]] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            names = [a.name for a in stmt.names]
        elif isinstance(stmt, ast.ImportFrom):
            base = imports.absolute(stmt)
            if not base:
                continue
            names = [f"{base}.{a.name}" for a in stmt.names if a.name != "*"] + [base]
        else:
            continue
        out.extend((n, stmt.lineno) for n in names
                   if n.split(".", 1)[0] not in EXTERNAL_PACKAGES)
    return out


# package -> (first or last release, the module that has only those, the project module whose
# imports reach it): what a module of the project bounds, transitively (flow/runs.py)
Inherited = dict[str, tuple[str, str, str]]


def _exact(versions: Versions, pkg: str) -> bool:
    return pkg not in versions.low and versions.source.get(pkg, "").startswith(_EXACT)


def _judged(versions: Versions, pkg: str) -> str:
    return versions.jax if pkg == "jax" else versions.flax


def runnable(tree: ast.Module, versions: Versions,
             inherited: list[tuple[int, str, Inherited, Inherited]] = (),  # type: ignore[assignment]
             calls: list[tuple[str, int, str, str]] = (),  # type: ignore[assignment]
             folder: Inherited | None = None) -> Versions:
    """``versions`` narrowed to the releases the file's module-level imports exist in: its own
    (``tree``) and those of the project's modules they load (``inherited``: per import line,
    the module it loads and what that module's imports and calls bound, newest and oldest);
    and to the releases that have the jax / flax functions it calls outside compatibility code
    (``calls``: ``file/moves.newer_calls``), the oldest it runs at. A pin or a lock older than
    what the code imports or calls is stale (the code cannot run there): the range starts
    where the code can run instead; ``folder``: what the code of every file the same pins judge
    needs (``flow/runs.oldest_in``), so that a stale pin is stale for all of them."""
    if versions.pinned is not None:
        return versions
    hi: dict[str, tuple[str, str, int]] = {}  # package -> (newest, what, line)
    lo: dict[str, tuple[str, str, int]] = {}  # package -> (oldest, what, line)
    stale: dict[str, tuple[str, str, int]] = {}  # package -> (oldest, what, line): past the pin

    def bound(pkg: str, first: str | None, last: str | None, what: str, line: int) -> None:
        if _exact(versions, pkg):
            if first and versions.source.get(pkg, "").startswith(STALE_SOURCES) \
                    and parse(first) > parse(_judged(versions, pkg)) \
                    and (pkg not in stale or parse(first) > parse(stale[pkg][0])):
                stale[pkg] = (first, what, line)
            return
        if last and last != RELEASES[pkg][-1] and (pkg not in hi or parse(last) < parse(
                hi[pkg][0])):
            hi[pkg] = (last, what, line)
        if first and first != RELEASES[pkg][0] and (pkg not in lo or parse(first) > parse(
                lo[pkg][0])):
            lo[pkg] = (first, what, line)

    for module, line, first, last in spans(tree):
        bound(module.split(".", 1)[0], first, last, f"`{module}`", line)
    for name, line, first, _ in calls:
        bound(name.split(".", 1)[0], first, None, f"`{name}`", line)
    for pkg, (first, name, module) in (folder or {}).items():
        if _exact(versions, pkg):  # (a range's lower bound stays the file's own evidence)
            bound(pkg, first, None, f"`{name}` (in `{module}`)", 0)
    for line, via, newest, oldest in inherited:
        for pkg, (last, module, origin) in newest.items():
            bound(pkg, None, last, _via(module, origin, via), line)
        for pkg, (first, module, origin) in oldest.items():
            bound(pkg, first, None, _via(module, origin, via), line)
    for pkg, (first, what, line) in lo.items():
        # (a range of the pins that ends before what the code uses: as stale as an exact pin)
        if parse(first) > parse(_judged(versions, pkg)) \
                and versions.source.get(pkg, "").startswith(_STALE_RANGE):
            stale[pkg] = (first, what, line)
    if not hi and not lo and not stale:
        return versions
    judged = {pkg: _judged(versions, pkg) for pkg in PACKAGES}
    low = dict(versions.low)
    source = dict(versions.source)
    narrowed: set[str] = set()
    for pkg, (first, what, line) in stale.items():
        # (judged as the project states no version: the newest release, from the oldest the
        # code runs at)
        uses = f"line {line} uses {what}" if line else f"the folder's code uses {what}"
        source[pkg] = f"{STALE_PIN}{source[pkg]} is older than the code ({uses}, {pkg} {first} " \
            "or newer)"
        judged[pkg] = RELEASES[pkg][-1]
        low[pkg] = first
        narrowed.add(pkg)
    for pkg in PACKAGES:
        was_newest = judged[pkg]
        was_oldest = low.get(pkg, was_newest)
        newest = hi[pkg][0] if pkg in hi and parse(hi[pkg][0]) < parse(was_newest) \
            else was_newest
        # (where the pins name no oldest, a narrowed range starts at the first release)
        oldest = was_oldest if pkg in low or newest == was_newest else RELEASES[pkg][0]
        if pkg in lo and parse(lo[pkg][0]) > parse(oldest):
            oldest = lo[pkg][0]
        if parse(oldest) > parse(newest) or (newest, oldest) == (was_newest, was_oldest):
            continue  # (or imports the pins exclude: the file does not run under them at all)
        narrowed.add(pkg)
        if newest != was_newest:
            _, what, line = hi[pkg]
            source[pkg] = f"the newest release with {what}, which line {line} imports"
            judged[pkg] = newest
        if oldest != newest:
            low[pkg] = oldest
        else:
            low.pop(pkg, None)
    if not narrowed:
        return versions
    _couple(versions, judged, low, source, narrowed, hi)
    return replace(versions, jax=judged["jax"], flax=judged["flax"], source=source, low=low,
                   pinned=versions)


def _couple(versions: Versions, judged: dict[str, str], low: dict[str, str],
            source: dict[str, str], narrowed: set[str],
            hi: dict[str, tuple[str, str, int]]) -> None:
    """What one package's narrowed range means for the other: flax 0.5.3 imports with jax
    0.4.23 at most; flax 0.8.0 requires jax 0.4.19; jax 0.4.30 installs flax 0.10.x at most."""
    if "flax" in narrowed and not _exact(versions, "jax"):
        flax_releases = [v for v in RELEASES["flax"]
                         if parse(low.get("flax", judged["flax"])) <= parse(v)
                         <= parse(judged["flax"])]
        caps = [facts.flax_runs_with_jax(v) for v in flax_releases]
        if caps and all(caps):
            cap = max(caps, key=parse)  # type: ignore[arg-type]
            if parse(cap) < parse(judged["jax"]):  # type: ignore[arg-type]
                span = judged["flax"] if len(flax_releases) == 1 else \
                    f"{flax_releases[0]} to {flax_releases[-1]}"
                source["jax"] = f"the newest jax that flax {span} imports with" + (
                    f" (line {hi['flax'][2]} imports {hi['flax'][1]})" if "flax" in hi else "")
                low.setdefault("jax", RELEASES["jax"][0])
                judged["jax"] = cap  # type: ignore[assignment]
        need = facts.flax_needs_jax(low.get("flax", judged["flax"]))
        oldest = low.get("jax", judged["jax"])
        if need and parse(oldest) < parse(need) <= parse(judged["jax"]):
            low["jax"] = need
        if parse(low.get("jax", judged["jax"])) > parse(judged["jax"]):
            low.pop("jax", None)
        if low.get("jax") == judged["jax"]:
            low.pop("jax")
    if "jax" in narrowed and not _exact(versions, "flax"):
        fits = [v for v in RELEASES["flax"]
                if parse(v) <= parse(judged["flax"])
                and parse(facts.flax_needs_jax(v) or "0") <= parse(judged["jax"])]
        if fits and parse(fits[-1]) < parse(judged["flax"]) and \
                parse(fits[-1]) >= parse(low.get("flax", fits[-1])):
            source["flax"] = (f"the newest flax that installs beside jax {judged['jax']} "
                              f"(line {hi['jax'][2]} imports {hi['jax'][1]})" if "jax" in hi
                              else f"the newest flax that installs beside jax {judged['jax']}")
            judged["flax"] = fits[-1]


def _via(module: str, origin: str, via: str) -> str:
    """How the file reaches the module: ``flax.optim`` through the project's ``train_utils``."""
    if origin == via:
        return f"`{module}` through `{via}`"
    return f"`{module}` through `{via}` (`{origin}` imports it)"
