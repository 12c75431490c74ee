"""Uses of moved or removed APIs, and how a file can spell a replacement.

* :func:`api_moves`: every use of an API the project's jax/flax deprecated or removed, with the
  version it changed in: an attribute chain (``jax.tree_map``), a ``from x import y`` alias, a
  keyword of ``api.KEYWORD_MOVES`` in a call of its owner (``nnx.Param(..., sharding=...)``),
  and -- when asked, it walks the tree -- reads of a moved attribute (``v.sharding_names``).
* :func:`replacement_for`: the replacement to advise and write, where the catalogue's does not
  exist at every release the project's pins allow (``jax.tree.flatten`` first came in jax 0.4.25):
  another spelling that does (``jax.tree_util.tree_flatten``, which the release's own
  deprecation message names), or none.
* :func:`spell`: how this file can name a dotted API at a place (``jax.tree.map`` is
  ``j.tree.map`` after ``import jax as j``), or the ``import`` to add when nothing names it.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

from shardlint.semantics.catalog import api, facts as releases
from shardlint.semantics.catalog.versions import Versions
from shardlint.semantics.file.facts import FileFacts, Scope


@dataclass
class MoveUse:
    """One use of a moved API."""

    node: ast.AST  # the attribute chain, import alias, keyword or attribute read
    kind: str  # "attribute" | "import" | "keyword" | "attribute-read"
    old: str  # "jax.tree_map", or the keyword / attribute name
    new: str | None  # the replacement (dotted name, keyword or attribute name)
    package: str
    version: str  # the version it changed in
    removed: bool  # removed (it fails) rather than deprecated (it warns)
    note: str
    scope: Scope
    api: api.Api | None = None  # for attribute / import uses
    call: ast.Call | None = None  # for keyword uses: the owner's call
    # Where the catalogue's replacement is missing from a release the project may run
    # (:func:`replacement_for`): that replacement, the release its package needs for it, and
    # whether ``new`` -- the stand-in, or None -- is the same thing as ``old`` at every release.
    wanted: str | None = None
    needs: str | None = None
    same: bool = True


_GUARD_ERRORS = frozenset({"AttributeError", "ImportError", "ModuleNotFoundError"})


IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})


def swallows(handler: ast.excepthandler) -> bool:
    """The handler's body does nothing (``pass``, ``...``, ``continue``): no fallback. Where the
    API is gone, what the ``try`` body does silently stops happening -- except for an optional
    import (``except ImportError: pass``), which is what that spelling means."""
    return all(isinstance(st, (ast.Pass, ast.Continue)) or isinstance(st, ast.Expr)
               and isinstance(st.value, ast.Constant) for st in handler.body)  # type: ignore[attr-defined]


def _feature_guards(facts: FileFacts) -> list[tuple[int, int, str | None]]:
    """(first line, last line, attribute) of the code that runs only where an API exists:
    the body of ``if hasattr(jax.sharding, "use_mesh"):`` (that attribute) and of a ``try:``
    whose ``except`` catches ``AttributeError`` or ``ImportError`` (any attribute)."""
    found = facts.derived.get("feature_guards")
    if found is not None:
        return found
    out: list[tuple[int, int, str | None]] = []
    for node in ast.walk(facts.tree):
        if isinstance(node, ast.If) and node.body:
            tests = node.test.values if isinstance(node.test, ast.BoolOp) else [node.test]
            for t in tests:
                if isinstance(t, ast.Call) and isinstance(t.func, ast.Name) \
                        and t.func.id == "hasattr" and len(t.args) == 2 \
                        and isinstance(t.args[1], ast.Constant) and isinstance(t.args[1].value, str):
                    out.append((node.body[0].lineno, node.body[-1].end_lineno or node.lineno,
                                t.args[1].value))
        elif isinstance(node, ast.Try) and node.body:
            caught: set[str] = set()
            for h in node.handlers:
                types = h.type.elts if isinstance(h.type, ast.Tuple) else [h.type]
                mine = {t.id if isinstance(t, ast.Name) else
                        t.attr if isinstance(t, ast.Attribute) else "" for t in types if t}
                if mine & IMPORT_ERRORS or not swallows(h):
                    caught |= mine
            if caught & _GUARD_ERRORS:
                out.append((node.body[0].lineno, node.body[-1].end_lineno or node.lineno, None))
    facts.derived["feature_guards"] = out
    return out


def _feature_guarded(facts: FileFacts, node: ast.AST, name: str) -> bool:
    line = getattr(node, "lineno", None)
    if line is None:
        return False
    last = name.rpartition(".")[2]
    return any(first <= line <= end and (attr is None or attr == last)
               for first, end, attr in _feature_guards(facts))


def api_moves(facts: FileFacts, versions: Versions, attribute_reads: bool = False) -> list[MoveUse]:
    out: list[MoveUse] = []
    for ref in facts.references:
        a = ref.api
        pkg = a.package
        if a.removed and versions.at_least(pkg, a.removed):
            version, removed = a.removed, True
        elif a.deprecated and versions.at_least(pkg, a.deprecated):
            version, removed = a.deprecated, False
        else:
            continue
        if _feature_guarded(facts, ref.node, a.name):
            continue  # a compatibility shim: used only where this jax has it
        kind = "import" if isinstance(ref.node, ast.alias) else "attribute"
        r = replacement_for(a.name, a.replacement, versions)
        out.append(MoveUse(ref.node, kind, a.name, r.name, pkg, version, removed, a.note,
                           ref.scope, api=a, wanted=r.wanted, needs=r.needs, same=r.same))
    moves = [m for m in api.KEYWORD_MOVES if versions.at_least(m.owners[0].split(".")[0],
                                                               m.deprecated)]
    if not moves:
        return out
    owners = {o for m in moves for o in m.owners}
    for c in facts.calls:
        if c.api is None or c.api.name not in owners:
            continue
        for kw in c.node.keywords:
            for m in moves:
                if kw.arg == m.keyword and c.api.name in m.owners and m.call_keyword:
                    out.append(MoveUse(kw, "keyword", m.keyword, m.replacement,
                                       m.owners[0].split(".")[0], m.deprecated, False, "",
                                       c.scope, call=c.node))
    if attribute_reads and facts.uses_flax:
        watched = {m.keyword: m for m in moves if m.attribute}
        for node in ast.walk(facts.tree):
            if isinstance(node, ast.Attribute) and node.attr in watched \
                    and isinstance(node.ctx, ast.Load):
                m = watched[node.attr]
                out.append(MoveUse(node, "attribute-read", m.keyword, m.replacement,
                                   m.owners[0].split(".")[0], m.deprecated, False, "",
                                   facts.module_scope))
    return out


# ---- a replacement that exists where the project runs --------------------------------------------
@dataclass(frozen=True)
class Replacement:
    name: str | None  # what to advise and write; None: nothing exists at every release
    same: bool = True  # ``name`` is the same thing as the old name (same arguments) throughout
    wanted: str | None = None  # the catalogue's replacement, where it is not ``name``
    needs: str | None = None  # the release of its package that has it from then on


def _span(package: str, oldest: str, judged: str) -> list[str] | None:
    """The releases from the oldest the project's pins allow to the one judged; None where the
    table does not know them."""
    every = releases.releases(package)
    lo = releases.release_index(package, oldest)
    hi = releases.release_index(package, judged)
    if lo is None and every and releases._key(oldest) < releases._key(every[0]):
        lo = 0  # (pins that allow a release older than any read: the oldest read stands for it)
    if lo is None or hi is None:
        return None
    return list(every[min(lo, hi):hi + 1])


def _holds(name: str, span: list[str]) -> bool | None:
    """True: ``name`` exists in every release of ``span``; False: it is missing from one;
    None: the table cannot tell."""
    seen = [releases.exists(name, v) for v in span]
    if any(x is False for x in seen):
        return False
    return True if all(seen) else None


def _needs(name: str, judged: str) -> str | None:
    """The release from which ``name`` exists without a gap up to ``judged`` (or, where the
    judged release lacks it, the first one after it that has it)."""
    package = name.split(".", 1)[0]
    every = releases.releases(package)
    hi = releases.release_index(package, judged)
    if hi is None:
        return releases.first_release(name)
    if releases.exists(name, every[hi]):
        i = hi
        while i > 0 and releases.exists(name, every[i - 1]):
            i -= 1
        return every[i]
    return next((v for v in every[hi + 1:] if releases.exists(name, v)), None)


_DOTTED = re.compile(r"\b((?:jax|flax)(?:\.[A-Za-z_]\w*)+)")


def _advised(old: str, span: list[str]) -> list[str]:
    """The names a release's own deprecation message of ``old`` advises instead (the words after
    its "use": `jax.tree_flatten is deprecated: use jax.tree_util.tree_flatten.`)."""
    messages = []
    first = releases.deprecated_in(old)
    if first is not None:
        messages.append(first.message)
    for v in span:
        at = releases.deprecation_at(old, v)
        if at is not None:
            messages.append(at.message)
    out: list[str] = []
    for m in dict.fromkeys(messages):
        cut = re.search(r"\buse\b", m, flags=re.I)
        if cut is not None:
            out += _DOTTED.findall(m[cut.end():])
    return out


def _params(name: str, version: str) -> str | None:
    text = releases.signature_text(name, version)
    if text is None or text.startswith("?"):
        return None
    return text


def _same(old: str, new: str, span: list[str]) -> bool:
    """``new`` takes the same parameters as ``old`` in every release of ``span`` that has both
    (and in one at least): the table's evidence that a rename keeps the program as it was."""
    compared = 0
    for v in span:
        a, b = _params(old, v), _params(new, v)
        if a is None or b is None:
            if releases.exists(old, v) and releases.exists(new, v):
                return False  # (both there, and a signature the table could not read)
            continue
        if a != b:
            return False
        compared += 1
    return compared > 0


@functools.lru_cache(maxsize=512)
def _replacement(old: str, new: str, oldest: str, judged: str) -> Replacement:
    package = new.split(".", 1)[0]
    span = _span(package, oldest, judged)
    if span is None or _holds(new, span) is not False:
        return Replacement(new)
    needs = _needs(new, judged)
    same_package = old.split(".", 1)[0] == package
    # What the releases themselves advise instead of `old` (jax's message names the spelling
    # every release has: `jax.tree_util.tree_flatten`); then the catalogue's other spellings of
    # the replacement -- the same object where the replacement exists, but not shown to be one
    # where it does not, so only where they take what `old` takes (a rename).
    advised = dict.fromkeys(_advised(old, span))
    wanted = api.lookup(new)
    listed = dict.fromkeys(wanted.spellings if wanted is not None else ())
    for c in [*advised, *listed]:
        if c in (old, new) or c.split(".", 1)[0] != package or _holds(c, span) is not True:
            continue
        if releases.deprecation_at(c, judged) is not None:
            continue  # (deprecated itself where the project runs)
        same = same_package and _same(old, c, span)
        if c in advised or same:
            return Replacement(c, same, new, needs)
    return Replacement(None, False, new, needs)


def replacement_for(old: str, new: str | None, versions: Versions) -> Replacement:
    """What to advise instead of ``old``: its catalogue replacement ``new`` where that exists in
    every release from the oldest the project's pins allow to the one judged; else another
    spelling that does -- one a release's own deprecation message of ``old`` names, or one the
    catalogue lists for the replacement that takes what ``old`` takes -- with whether it is the
    same thing as ``old`` (the same signature, as the table reads it, in every release of the
    range that has both: a rename stays safe); else None, with the release the replacement
    needs."""
    if not new:
        return Replacement(new)
    package = new.split(".", 1)[0]
    if package not in ("jax", "flax"):
        return Replacement(new)
    judged = versions.jax if package == "jax" else versions.flax
    return _replacement(old, new, versions.oldest(package), judged)


# ---- spelling a name in this file ----------------------------------------------------------------
def module_imports(facts: FileFacts) -> dict[str, str]:
    """Local names bound by import statements of the module body (not inside functions)."""
    found = facts.derived.get("module_imports")
    if found is None:
        names: dict[str, str] = {}
        todo: list[ast.stmt] = list(facts.tree.body)
        while todo:
            s = todo.pop()
            if isinstance(s, (ast.Import, ast.ImportFrom)):
                for alias in s.names:
                    local = alias.asname or alias.name.split(".", 1)[0]
                    q = facts.imports.names.get(local)
                    if q is not None:
                        names[local] = q
            elif isinstance(s, (ast.If, ast.Try)):
                todo.extend(s.body)
                todo.extend(s.orelse)
                todo.extend(getattr(s, "finalbody", []))
                for h in getattr(s, "handlers", []):
                    todo.extend(h.body)
        found = facts.derived["module_imports"] = names
    return found  # type: ignore[return-value]


@dataclass(frozen=True)
class Spelling:
    text: str  # the expression naming the API here
    add_import: str | None  # "import jax" when the file must import it first


def spell(facts: FileFacts, dotted: str, scope: Scope) -> Spelling | None:
    """How code in ``scope`` names ``dotted``: through the longest imported prefix that nothing
    shadows there; else through a new ``import <package>``; None when that name is taken."""
    best: tuple[int, int, str, str] | None = None
    for local, q in module_imports(facts).items():
        if q != dotted and not dotted.startswith(q + "."):
            continue
        if scope.lookup(local) is not None or local in facts.module_scope.bindings:
            continue  # rebound or shadowed: not the module
        key = (len(q), -len(local), local, q)
        if best is None or key > best:
            best = key
    if best is not None:
        _, _, local, q = best
        return Spelling(local + dotted[len(q):], None)
    root = dotted.split(".", 1)[0]
    if root in facts.imports.names or root in facts.module_scope.bindings \
            or scope.lookup(root) is not None:
        return None
    return Spelling(dotted, f"import {root}")


def import_line(facts: FileFacts) -> int | None:
    """The line before which a new top-level ``import`` goes: the first import of the module
    body after any ``from __future__`` import; None when the module body has no import."""
    for s in facts.tree.body:
        if isinstance(s, ast.ImportFrom) and s.module == "__future__":
            continue
        if isinstance(s, (ast.Import, ast.ImportFrom)):
            return s.lineno
    return None


def import_statement(facts: FileFacts, alias: ast.alias) -> ast.ImportFrom | None:
    """The ``from x import ...`` statement that holds ``alias``."""
    for node in ast.walk(facts.tree):
        if isinstance(node, ast.ImportFrom) and any(a is alias for a in node.names):
            return node
    return None


def uses_of_name(facts: FileFacts, name: str) -> list[ast.Name]:
    """Loads of a name anywhere in the file (a local of the same name counts too: callers use
    this to require that *every* use fits, which a shadowing local only makes stricter)."""
    out: list[ast.Name] = []
    for node in ast.walk(facts.tree):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            out.append(node)
    return out
