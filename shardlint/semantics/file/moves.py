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
* :func:`version_guarded`: compatibility code, which runs only on some releases (below).

Compatibility code: a project that supports several releases selects the spelling at run time,
and each branch runs only on the releases the test selects:

* ``if hasattr(jax, "set_mesh"):`` (or ``getattr(jax, "set_mesh", None) is not None``): its body
  runs where the attribute exists, its ``else`` -- and, where the body always leaves (``return``,
  ``raise``, ``continue``, ``break``), the rest of the block after it -- where it does not;
  ``if not hasattr(...)`` the other way round;
* ``if jax.__version_info__ >= (0, 4, 25):`` / ``version.parse(jax.__version__) < ...``: each
  branch (and the rest of the block after a body that leaves) on some releases only;
* ``try: ... except ImportError / ModuleNotFoundError / AttributeError:``: the body, and the
  handler that runs where the body's spelling is missing.

:func:`version_guarded` gives their line ranges, each with the attribute a ``hasattr`` tested and
whether the range runs where it exists (True), where it does not (False), or on some releases
the analysis does not name (None). A rule does not tell the old spelling to move where only the
releases that still have it run it (SHL501), nor ``with mesh:`` to become ``jax.set_mesh`` in the
branch for the releases without ``jax.set_mesh`` (SHL101).
"""

from __future__ import annotations

import ast
import bisect
import functools
import re
from dataclasses import dataclass

from shardlint.semantics.catalog import api, facts as releases
from shardlint.semantics.catalog.versions import RELEASES, Versions
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
    versions: Versions | None = None  # what judged it (the pins, for an import that narrowed)


def api_moves(facts: FileFacts, versions: Versions, attribute_reads: bool = False) -> list[MoveUse]:
    """Every use of a moved API but those in compatibility code (``version_guards``): the old
    spelling where only the releases that still have it run it."""
    found = _moves(facts, versions, attribute_reads)
    if not found:
        return found
    guards = version_guarded(facts.tree, [getattr(u.node, "lineno", 0) for u in found])
    if not guards:
        return found
    return [u for u in found if not guarded_at(guards, getattr(u.node, "lineno", 0),
                                               u.old.rpartition(".")[2])]


def _moves(facts: FileFacts, versions: Versions, attribute_reads: bool) -> list[MoveUse]:
    out: list[MoveUse] = []
    for ref in facts.references:
        out.extend(_moves_of(ref, versions))
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


def _moves_of(ref, versions: Versions) -> list[MoveUse]:
    a = ref.api
    pkg = a.package
    if a.removed and versions.at_least(pkg, a.removed):
        version, removed = a.removed, True
    elif a.deprecated and versions.at_least(pkg, a.deprecated):
        version, removed = a.deprecated, False
    else:
        return []
    kind = "import" if isinstance(ref.node, ast.alias) else "attribute"
    r = replacement_for(a.name, a.replacement, versions)
    return [MoveUse(ref.node, kind, a.name, r.name, pkg, version, removed, a.note, ref.scope,
                    api=a, wanted=r.wanted, needs=r.needs, same=r.same, versions=versions)]


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
    if lo is None and every and releases.version_key(oldest) < releases.version_key(every[0]):
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


# ---- compatibility code: what runs only on some releases ----------------------------------------
_TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)  # (3.11+)
IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})
# A handler that catches one of these runs where the body's spelling is missing.
_MISSING = IMPORT_ERRORS | {"AttributeError"}
# (`except Exception:` is error handling, not a spelling chosen by release: a removed API
# under it fails all the same)
_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
_PACKAGES = ("jax", "flax", "optax")
TRIGGERS = ("hasattr", "getattr(", "__version", "ImportError", "AttributeError")


@dataclass(frozen=True)
class Guarded:
    first: int
    last: int
    attr: str | None  # the attribute a `hasattr` tested (None: a version compare, a `try`)
    exists: bool | None  # runs where it exists (True), where it does not (False), or unnamed
    try_body: bool = False  # the body of a `try` (which also runs where nothing is missing)


def swallows(handler: ast.excepthandler) -> bool:
    """The handler's body does nothing (``pass``, ``...``, ``continue``): no fallback. Where the
    API is gone, what the ``try`` body does silently stops happening -- except for an optional
    import (``except ImportError: pass``), which is what that spelling means."""
    return all(isinstance(st, (ast.Pass, ast.Continue)) or isinstance(st, ast.Expr)
               and isinstance(st.value, ast.Constant) for st in handler.body)  # type: ignore[attr-defined]


def _caught(handler: ast.excepthandler) -> set[str]:
    if handler.type is None:
        return {"Exception"}
    out: set[str] = set()
    for n in ast.walk(handler.type):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
    return out


def may_have_guards(text: str) -> bool:
    """Whether the file's text can hold a version guard at all (a cheap test before the walk)."""
    return any(t in text for t in TRIGGERS)


def _roots(tree: ast.Module) -> set[str]:
    """Names the module's top-level imports bind to jax, flax or optax modules."""
    out: set[str] = set()
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in _PACKAGES:
                    out.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level \
                and node.module.split(".")[0] in _PACKAGES:
            out.update(a.asname or a.name for a in node.names)
        elif isinstance(node, (ast.If, *_TRY)):
            stack.extend(node.body)
            stack.extend(getattr(node, "orelse", ()))
            for h in getattr(node, "handlers", ()):
                stack.extend(h.body)
    return out


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _has_attr(node: ast.expr, roots: set[str]) -> tuple[str, bool] | None:
    """(attribute, True) for ``hasattr(jax..., "a")`` / ``getattr(jax..., "a", None)`` used as a
    truth value or tested ``is not None``; False for ``not ...`` / ``is None``."""
    positive = True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node, positive = node.operand, False
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(
            node.comparators[0], ast.Constant) and node.comparators[0].value is None:
        if isinstance(node.ops[0], ast.Is):
            positive = not positive
        elif not isinstance(node.ops[0], ast.IsNot):
            return None
        node = node.left
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("hasattr", "getattr") and len(node.args) >= 2):
        return None
    name = node.args[1]
    if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
        return None
    if node.func.id == "getattr" and len(node.args) < 3:
        return None
    if _root(node.args[0]) not in roots:
        return None
    return name.value, positive


_VERSION_ATTRS = ("__version__", "__version_info__")
# id(test) -> (test, whether it reads a version): a keystroke's parse keeps the nodes of every
# statement it did not touch, so a test is walked once, not at every keystroke (the node is held
# with its answer, so its id is not reused while the entry lives)
_VERSION_TESTS: dict[int, tuple[ast.expr, bool]] = {}


def _tests_version(test: ast.expr) -> bool:
    """Whether an ``if`` test reads ``__version__`` / ``__version_info__`` (a version compare)."""
    held = _VERSION_TESTS.get(id(test))
    if held is not None and held[0] is test:
        return held[1]
    found = False
    stack: list = [test]
    while stack:
        n = stack.pop()
        if type(n) is ast.Attribute and n.attr in _VERSION_ATTRS:
            found = True
            break
        for name in n._fields:
            v = getattr(n, name, None)
            if type(v) is list:
                stack.extend(x for x in v if isinstance(x, ast.AST))
            elif isinstance(v, ast.AST):
                stack.append(v)
    if len(_VERSION_TESTS) > 50_000:
        _VERSION_TESTS.clear()
    _VERSION_TESTS[id(test)] = (test, found)
    return found


def _leaves(body: list[ast.stmt]) -> bool:
    """The block always leaves (its last statement returns or raises, also inside a ``with``
    or in both branches of an ``if``)."""
    if not body:
        return False
    last = body[-1]
    if isinstance(last, _EXITS):
        return True
    if isinstance(last, (ast.With, ast.AsyncWith)):
        return _leaves(last.body)
    if isinstance(last, ast.If):
        return _leaves(last.body) and _leaves(last.orelse)
    return False


def _lines_of(stmts: list[ast.stmt]) -> tuple[int, int]:
    return stmts[0].lineno, stmts[-1].end_lineno or stmts[-1].lineno


def version_guarded(tree: ast.Module, lines: list[int] | None = None) -> list[Guarded]:
    """Every compatibility range of the file (see the module's doc). ``lines``: only the blocks
    around these lines are walked (a keystroke's lint does not walk a 5,000-line file for two
    uses)."""
    out: list[Guarded] = []
    wanted = sorted(set(lines)) if lines is not None else None
    roots = _roots(tree)

    def holds(node: ast.AST) -> bool:
        if wanted is None:
            return True
        a, b = node.lineno, getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
        k = bisect.bisect_left(wanted, a)
        return k < len(wanted) and wanted[k] <= b

    def after(node: ast.stmt, stmts: list[ast.stmt]) -> bool:
        """A line asked for comes after ``node`` in its block (where a branch that leaves
        guards the rest)."""
        if wanted is None:
            return True
        end = node.end_lineno or node.lineno
        k = bisect.bisect_right(wanted, end)
        return k < len(wanted) and wanted[k] <= (stmts[-1].end_lineno or stmts[-1].lineno)

    def block(stmts: list[ast.stmt]) -> None:
        for i, node in enumerate(stmts):
            if not holds(node) and not (isinstance(node, ast.If) and after(node, stmts)):
                continue
            if isinstance(node, ast.If):
                test = _has_attr(node.test, roots)
                if test is None and isinstance(node.test, ast.BoolOp) \
                        and isinstance(node.test.op, ast.And):
                    found = [t for t in map(lambda v: _has_attr(v, roots), node.test.values)
                             if t is not None and t[1]]
                    test = (found[0][0], True) if found else None  # the body only: see below
                    if test is not None and node.body:
                        out.append(Guarded(*_lines_of(node.body), test[0], True))
                    test = None
                version = test is None and _tests_version(node.test)
                if test is not None or version:
                    attr, positive = test if test is not None else (None, None)
                    other = None if positive is None else not positive
                    if node.body:
                        out.append(Guarded(*_lines_of(node.body), attr, positive))
                    if node.orelse:
                        out.append(Guarded(*_lines_of(node.orelse), attr, other))
                    elif _leaves(node.body) and i + 1 < len(stmts):
                        out.append(Guarded(*_lines_of(stmts[i + 1:]), attr, other))
            elif isinstance(node, _TRY) and node.body:
                # (a handler that swallows an AttributeError is no fallback: see `swallows`)
                kept = [(h, _caught(h)) for h in node.handlers]
                kept = [(h, c) for h, c in kept if c & IMPORT_ERRORS or not swallows(h)]
                if any(c & _MISSING for _, c in kept):
                    out.append(Guarded(*_lines_of(node.body), None, None, try_body=True))
                for h, c in kept:
                    if c & _MISSING and h.body:  # the spelling for where the body's is missing
                        out.append(Guarded(*_lines_of(h.body), None, None))
            if not holds(node):
                continue
            for field in ("body", "orelse", "finalbody"):
                child = getattr(node, field, None)
                if child and isinstance(child, list) and isinstance(child[0], ast.stmt):
                    block(child)
            for h in getattr(node, "handlers", None) or ():
                block(h.body)
            for case in getattr(node, "cases", None) or ():
                block(case.body)

    block(tree.body)
    out.sort(key=lambda g: (g.first, g.last))
    return out


def guarded_at(guards: list[Guarded], line: int, name: str | None = None,
               try_bodies: bool = True) -> bool:
    """Whether ``line`` is compatibility code: in a version-compare branch, in the handler for
    where a spelling is missing, in the branch for the releases a ``hasattr`` found lacking
    something, or in the branch where the attribute ``name`` (the API's last part: `use_mesh`)
    is found to exist; ``try_bodies``: in a guarded ``try`` body too (its first choice of
    spelling, tried on every release)."""
    for g in guards:
        if g.first <= line <= g.last and (not g.try_body or try_bodies) and (
                g.exists is None or g.exists is False or (name is not None and g.attr == name)):
            return True
    return False


# ---- what the calls of a file need ---------------------------------------------------------------
def newer_calls(facts: FileFacts) -> list[tuple[str, int, str, str]]:
    """(API, line, the first release that has it, the newest release) for each jax / flax
    function the file calls, outside compatibility code, that only later releases have
    (``jax.set_mesh(mesh)``: jax 0.7.1): the code was written for those releases, whatever a
    pin says (``semantics/catalog/runnable.py`` takes them as the oldest the file runs at).
    Deprecated and removed APIs are left out: SHL501 reports them, and what is said of the
    rest of the file holds once they are migrated. The first call of each API stands for it."""
    found = facts.derived.get("newer_calls")
    if found is not None:
        return found  # type: ignore[return-value]
    first: dict[str, int] = {}
    for c in facts.calls:
        q = c.qualified
        if q is None or q in first or q.split(".", 1)[0] not in ("jax", "flax"):
            continue
        first[q] = c.node.lineno
    out: list[tuple[str, int, str, str]] = []
    candidates = []
    for q, line in first.items():
        pkg = q.split(".", 1)[0]
        since = releases.first_release(q)
        if since is None or since == RELEASES[pkg][0]:
            continue
        known = api.lookup(q)
        if known is not None and (known.removed or known.deprecated):
            continue
        candidates.append((q, line, since, RELEASES[pkg][-1]))
    if candidates:
        lines = [c[1] for c in candidates]
        guarded = version_guarded(facts.tree, lines)
        out = [c for c in candidates
               if not any(g.first <= c[1] <= g.last for g in guarded)]
    facts.derived["newer_calls"] = out
    return out
