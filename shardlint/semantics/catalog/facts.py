"""API facts of every jax and flax release, read from the released files (``api_facts.json``,
rebuilt by ``python scripts/api_facts.py``; nothing here is written by hand).

The questions: does a dotted name exist in a release (:func:`exists`: True, False, or None where
the table cannot tell), when it came (:func:`first_release`), when it went
(:func:`removed_in`), when and how it was deprecated (:func:`deprecated_in`, with the release's
own message), its signature (:func:`signature`), the releases themselves (:func:`releases`,
:func:`python_bounds`, :func:`flax_needs_jax`, :func:`flax_runs_with_jax`,
:func:`module_span`, :func:`import_span`).

The table is read lazily: the release lists from its first line (every run needs them), the rest
on the first question about a name. Its layout, per package: ``modules`` and ``names[module]``
map runs of release indices (``"0-12,15"``) to the space-joined names present in exactly those
releases; ``deprecated`` / ``module_deprecated`` and ``signatures`` map a dotted name to
``[[runs, pool index], ...]`` into ``messages`` (``[message, 1 if the name still answers else
0]``) and ``sigs`` (``(a, /, b=, *, c=, **kw)``; `` +w`` a wrapper that passes its arguments
through, `` @d`` another decorator, `` ~how`` another way of being wrapped; ``?why`` unknown).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

TABLE = Path(__file__).with_name("api_facts.json")


# ---- the table -----------------------------------------------------------------------------------
@functools.cache
def _head() -> dict:
    """The first line: ``{"format": 1, "releases": {package: {versions, python, ...}}``."""
    with TABLE.open(encoding="utf-8") as f:
        return json.loads(f.readline() + "}")


@functools.cache
def _table() -> dict:
    return json.loads(TABLE.read_text(encoding="utf-8"))


@functools.cache
def _runs(text: str) -> tuple[tuple[int, int], ...]:
    """``"0-12,30"``: the runs of release indexes a table entry stands for (a few hundred
    distinct entries, each read many times)."""
    out = []
    for part in text.split(","):
        start, _, end = part.partition("-")
        out.append((int(start), int(end or start)))
    return tuple(out)


def _in(text: str, index: int) -> bool:
    return any(a <= index <= b for a, b in _runs(text))


@functools.cache
def _modules(package: str) -> dict[str, str]:
    """module -> runs of the releases that have it."""
    out: dict[str, str] = {}
    for key, names in _table()[package]["modules"].items():
        for name in names.split():
            out[name] = key
    return out


@functools.cache
def _shadowed(package: str) -> dict[str, str]:
    """module -> runs of the releases whose package binds the module's name to an object."""
    return {m: key for key, names in _table()[package].get("shadowed", {}).items()
            for m in names.split()}


@functools.cache
def _names(package: str, module: str) -> dict[str, str] | None:
    """name -> runs, for one module; None where the table keeps no names for it."""
    grouped = _table()[package]["names"].get(module)
    if grouped is None:
        return None
    return {n: key for key, names in grouped.items() for n in names.split()}


def _valued(entries: list | None, index: int) -> int | None:
    for key, value in entries or ():
        if _in(key, index):
            return value
    return None


# ---- releases ------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1024)
def version_key(version: str) -> tuple[int, ...]:
    """A version's leading numbers ("0.4.36.dev2" -> (0, 4, 36)), for ordering releases."""
    out = []
    for part in version.split("."):
        m = re.match(r"\d+", part)
        if m is None:
            break
        out.append(int(m.group()))
    return tuple(out)


def releases(package: str) -> tuple[str, ...]:
    """Every release the table read, oldest first."""
    return tuple(_head()["releases"][package]["versions"])


@functools.lru_cache(maxsize=4096)
def release_index(package: str, version: str) -> int | None:
    """The index of ``version`` among the releases; a version between two releases (a dev
    build, a release the registry no longer lists) is the newest release before it; one older
    than the first or newer than the last is not known (None)."""
    versions = releases(package)
    want = version_key(version)
    if not versions or want < version_key(versions[0]) or want > version_key(versions[-1]):
        return None
    best = None
    for i, v in enumerate(versions):
        if version_key(v) <= want:
            best = i
    return best


def python_bounds(package: str, version: str) -> str | None:
    """The release's ``Requires-Python`` (``">=3.10"``), None where not known."""
    i = release_index(package, version)
    if i is None:
        return None
    return _head()["releases"][package]["python"][i] or None


def allows_python(package: str, version: str, python: str) -> bool | None:
    """Whether the release installs on Python ``python`` (``"3.10"``) by its Requires-Python."""
    spec = python_bounds(package, version)
    if spec is None:
        return None
    have = version_key(python)
    for clause in spec.split(","):
        m = re.match(r"\s*(>=|<=|==|!=|~=|>|<)\s*([0-9][0-9.*]*)", clause)
        if m is None:
            return None
        op, bound = m.group(1), m.group(2).rstrip(".*")
        b = version_key(bound)
        n = len(b)
        ok = {">=": have >= b, "<=": have[:n] <= b, ">": have > b, "<": have < b,
              "==": have[:n] == b, "!=": have[:n] != b, "~=": have >= b}[op]
        if not ok:
            return False
    return True


def flax_needs_jax(flax_version: str) -> str | None:
    """The oldest jax the flax release requires (its ``Requires-Dist: jax>=...``)."""
    i = release_index("flax", flax_version)
    if i is None:
        return None
    return _head()["releases"]["flax"]["needs_jax"][i]


def flax_runs_with_jax(flax_version: str) -> str | None:
    """The newest jax the flax release imports with: everything ``import flax`` imports from
    jax, whatever the branch, exists there (read from the release; None where not known)."""
    i = release_index("flax", flax_version)
    if i is None:
        return None
    found = _head()["releases"]["flax"].get("runs_with_jax")
    return found[i] if found else None


@functools.lru_cache(maxsize=4096)
def module_span(module: str) -> tuple[str, str] | None:
    """The first and the last release that have the module (None: not a module the table read
    in any release, such as a private one)."""
    package = module.split(".", 1)[0]
    if package not in _head()["releases"]:
        return None
    runs = _modules(package).get(module)
    if runs is None:
        return None
    spans = _runs(runs)
    versions = releases(package)
    return versions[min(a for a, _ in spans)], versions[max(b for _, b in spans)]


@functools.lru_cache(maxsize=4096)
def import_span(module: str, name: str | None = None) -> tuple[str, str] | None:
    """The first and the last release in which ``import module`` (``name`` None) or ``from
    module import name`` succeeds: the module exists, and ``name`` is a submodule of it or a name
    it binds (``from jax import config``: the module until jax 0.4.28, the config object after).
    Where the table keeps no names for the module, the module's own span; None where it
    succeeds in none the table read (or the package is not one it read)."""
    package = module.split(".", 1)[0]
    if package not in _head()["releases"]:
        return None
    if name is None:
        return module_span(module)
    own = _modules(package).get(module)
    if own is None:
        return None
    names = _names(package, module)
    if names is None:
        return module_span(module)
    dotted = f"{module}.{name}"
    answers = [r for r in (_modules(package).get(dotted), names.get(name),
                           _shadowed(package).get(dotted)) if r]
    inside = {i for a, b in _runs(own) for i in range(a, b + 1)}
    present = sorted(i for r in answers for a, b in _runs(r) for i in range(a, b + 1)
                     if i in inside)
    if not present:
        return None
    versions = releases(package)
    return versions[present[0]], versions[present[-1]]


# ---- names ---------------------------------------------------------------------------------------
def _split(package: str, dotted: str, index: int) -> tuple[str, list[str]] | None:
    """(the longest module prefix release ``index`` has, the attribute path after it)."""
    modules = _modules(package)
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        runs = modules.get(module)
        if runs is not None and _in(runs, index):
            return module, parts[i:]
    return None


def _exists_at(dotted: str, index: int) -> bool | None:
    package = dotted.split(".", 1)[0]
    if package not in _head()["releases"]:
        return None
    found = _split(package, dotted, index)
    if found is None:
        return False
    module, rest = found
    if not rest:
        return True
    names = _names(package, module)
    if names is None:
        return None  # (a module whose names the table does not keep)
    runs = names.get(rest[0])
    if runs is None or not _in(runs, index):
        shadowed = _shadowed(package).get(module)
        if shadowed is not None and _in(shadowed, index):
            return None  # (`jax.config`: the package binds an object over the submodule)
        return False
    return True if len(rest) == 1 else None  # (an attribute of an object: not read)


def exists(dotted: str, version: str) -> bool | None:
    """Whether ``jax.tree.map`` (a module, or a name a module answers, deprecated names still
    answered included) exists in that release of its package; None where the table cannot tell
    (a version it did not read, an attribute of a class, a module whose names it does not keep)."""
    package = dotted.split(".", 1)[0]
    if package not in _head()["releases"]:
        return None
    index = release_index(package, version)
    return None if index is None else _exists_at(dotted, index)


def _presence(dotted: str) -> list[bool | None]:
    package = dotted.split(".", 1)[0]
    if package not in _head()["releases"]:
        return []
    return [_exists_at(dotted, i) for i in range(len(releases(package)))]


@functools.lru_cache(maxsize=8192)
def first_release(dotted: str) -> str | None:
    """The first release in which the name exists (None: in none the table read). Asked for
    every jax / flax function a file calls (``file/moves.newer_calls``): the module prefixes
    are looked up once, and the releases walked from the oldest until one has the name."""
    package = dotted.split(".", 1)[0]
    if package not in _head()["releases"]:
        return None
    parts = dotted.split(".")
    modules = _modules(package)
    prefixes = [(module, runs, parts[i:]) for i in range(len(parts), 0, -1)
                if (runs := modules.get(module := ".".join(parts[:i]))) is not None]
    # (where the name first exists, something starts: a run of a module prefix or of the
    # name in one, or a longer prefix's run ends; only those releases are tested)
    starts = {0}
    for module, runs, rest in prefixes:
        for a, b in _runs(runs):
            starts.update((a, b + 1))
        names = _names(package, module) if rest else None
        if names is not None and rest[0] in names:
            starts.update(a for a, _ in _runs(names[rest[0]]))
    count = len(releases(package))
    for index in sorted(i for i in starts if i < count):
        # (as _exists_at: the longest module prefix this release has, then the name in it)
        found = next(((m, rest) for m, runs, rest in prefixes if _in(runs, index)), None)
        if found is None:
            continue
        module, rest = found
        if not rest:
            return releases(package)[index]
        names = _names(package, module)
        runs = names.get(rest[0]) if names is not None else None
        if runs is not None and _in(runs, index) and len(rest) == 1:
            return releases(package)[index]
    return None


def removed_in(dotted: str) -> str | None:
    """The release after the last one that has the name, if it is gone from the newest."""
    package = dotted.split(".", 1)[0]
    presence = _presence(dotted)
    if not presence or presence[-1] is not False:
        return None
    last = max((i for i, p in enumerate(presence) if p), default=None)
    return None if last is None else releases(package)[last + 1]


@dataclass(frozen=True)
class Deprecation:
    version: str  # the first release that deprecates it (or says it is gone)
    message: str  # that release's own words
    still_answers: bool  # False: accessing it raises (AttributeError) with the message


def _deprecations(dotted: str) -> list[tuple[int, str, bool]]:
    package = dotted.split(".", 1)[0]
    if package not in _head()["releases"]:
        return []
    table = _table()[package]
    entries = table["deprecated"].get(dotted) or table["module_deprecated"].get(dotted)
    module, _, name = dotted.rpartition(".")
    if not entries and module in table["module_deprecated"] and name in (
            _names(package, module) or {}):
        # (a name of a module whose import warns: using it imports the module)
        entries = table["module_deprecated"][module]
    out = []
    for key, value in entries or ():
        message, answers = table["messages"][value]
        for start, _ in _runs(key):
            out.append((start, message, bool(answers)))
    return sorted(out)


def deprecated_in(dotted: str) -> Deprecation | None:
    """The first release that deprecates the name (it still answers, and warns), with its
    message; None if no release the table read deprecates it."""
    package = dotted.split(".", 1)[0]
    for start, message, answers in _deprecations(dotted):
        if answers:
            return Deprecation(releases(package)[start], message, True)
    return None


def _message_at(dotted: str, version: str, modules: bool) -> tuple[str, bool] | None:
    """The release's deprecation message for a name (``modules``: or for a module), and
    whether the name still answers, or None."""
    package = dotted.split(".", 1)[0]
    index = release_index(package, version)
    if index is None:
        return None
    table = _table()[package]
    entries = table["deprecated"].get(dotted)
    if modules:
        entries = entries or table["module_deprecated"].get(dotted)
    value = _valued(entries, index)
    if value is None:
        return None
    message, answers = table["messages"][value]
    return message, bool(answers)


def removal_message(dotted: str, version: str) -> str | None:
    """What accessing a removed name raises with in that release, where it says so."""
    found = _message_at(dotted, version, modules=False)
    return found[0] if found is not None and not found[1] else None


def deprecation_at(dotted: str, version: str) -> Deprecation | None:
    """The deprecation in force in that release (its message), if any."""
    found = _message_at(dotted, version, modules=True)
    return None if found is None else Deprecation(version, found[0], found[1])


# ---- signatures ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "positional_only" | "positional_or_keyword" | "var_positional" |
    #            "keyword_only" | "var_keyword"
    has_default: bool


@dataclass(frozen=True)
class Signature:
    """A signature as read from the release. ``exact``: the definition is what callers meet
    (no decorator or wrapper the table cannot see through); where it is False the parameters
    are those of the wrapped definition, and ``wrapped`` says how."""

    params: tuple[Param, ...]
    exact: bool
    wrapped: tuple[str, ...] = ()

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)

    def accepts_keyword(self, name: str) -> bool | None:
        """Whether ``f(name=...)`` is accepted; None where the signature is not exact."""
        p = self.param(name)
        if p is not None and p.kind not in ("positional_only", "var_positional",
                                            "var_keyword"):
            return True if self.exact else None
        if any(q.kind == "var_keyword" for q in self.params):
            return None  # (**kwargs takes it, or passes it on)
        return False if self.exact else None

    def positional_only(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.kind == "positional_only")

    def keyword_only(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params if p.kind == "keyword_only")


def _parse_signature(text: str) -> Signature | None:
    if text.startswith("?"):
        return None
    close = text.index(")")  # (the parameters hold no parenthesis; a mark may: partial(w))
    items = [x.strip() for x in text[1:close].split(",") if x.strip()]
    slash = items.index("/") if "/" in items else -1
    params = []
    keyword_only = False
    for i, item in enumerate(items):
        if item == "/":
            continue
        if item == "*":
            keyword_only = True
        elif item.startswith("**"):
            params.append(Param(item[2:], "var_keyword", False))
        elif item.startswith("*"):
            params.append(Param(item[1:], "var_positional", False))
            keyword_only = True
        else:
            kind = "positional_only" if i < slash else \
                "keyword_only" if keyword_only else "positional_or_keyword"
            params.append(Param(item.rstrip("="), kind, item.endswith("=")))
    wrapped = tuple(m for m in text[close + 1:].split(" ") if m)
    return Signature(tuple(params), all(m.startswith("+") for m in wrapped), wrapped)


def signature(dotted: str, version: str) -> Signature | None:
    """The signature of a function (a class: its ``__init__``) in that release, as read from
    the release's source; None where it was not read or cannot be (the name does not exist,
    is not a function or class, or is made at run time)."""
    package = dotted.split(".", 1)[0]
    index = release_index(package, version)
    if index is None or package not in _head()["releases"]:
        return None
    table = _table()[package]
    value = _valued(table["signatures"].get(dotted), index)
    return None if value is None else _parse_signature(table["sigs"][value])


@functools.lru_cache(maxsize=64)
def first_accepting(dotted: str, keyword: str) -> str | None:
    """The first release whose ``dotted`` takes ``keyword`` by name (`jax.jit`'s
    `out_shardings`: 0.4.4; `donate_argnames`: 0.4.14); None where no release read does."""
    package = dotted.split(".", 1)[0]
    for v in releases(package):
        sig = signature(dotted, v)
        if sig is not None and sig.accepts_keyword(keyword):
            return v
    return None


def signature_text(dotted: str, version: str) -> str | None:
    """The table's text of the signature (``?why`` where it could not be read)."""
    package = dotted.split(".", 1)[0]
    index = release_index(package, version)
    if index is None or package not in _head()["releases"]:
        return None
    table = _table()[package]
    value = _valued(table["signatures"].get(dotted), index)
    return None if value is None else table["sigs"][value]


# ---- the catalogue's facts (catalog/api.py) ------------------------------------------------------
def catalogue(name: str) -> tuple[str | None, str | None, str | None]:
    """(added, deprecated, removed) of a canonical name of ``catalog/api.py``, as the build step
    computed them with :func:`first_release` (None where the oldest release read has it),
    :func:`deprecated_in` and :func:`removed_in`; kept on the table's first line, so that the
    catalogue does not decode the whole table at start-up. All None for a name the table was
    not built for (``python scripts/api_facts.py --catalogue-only`` adds it)."""
    found = _head().get("catalogue", {}).get(name)
    return (found[0], found[1], found[2]) if found else (None, None, None)


def warnings_in(module: str, version: str) -> tuple[str, ...]:
    """Every deprecation message the module's code can give in that release, under any
    condition (a deprecated keyword or value: ``'sharding' is deprecated, use 'out_sharding'``)."""
    package = module.split(".", 1)[0]
    index = release_index(package, version)
    if index is None or package not in _head()["releases"]:
        return ()
    table = _table()[package]
    return tuple(table["messages"][value][0]
                 for key, value in table.get("warnings", {}).get(module, ()) if _in(key, index))


def first_warning(module: str, text: str) -> str | None:
    """The first release whose ``module`` can give a deprecation message containing ``text``."""
    package = module.split(".", 1)[0]
    for version in releases(package):
        if any(text in m for m in warnings_in(module, version)):
            return version
    return None
