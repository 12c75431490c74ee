"""Reads of a value after a point of a function body: what a donation would break.

:func:`use_after` follows one argument of a call (``step(state, batch)``) through the rest of
the body -- branches, loops (including the next iteration, back to the call itself), ``break``,
``continue``, ``return`` -- and reports the first read of it, of an attribute chain rooted at
it (``state.params``) or of an alias taken before the call (``old = state.params``), before it
is rebound. What touches no buffer does not count: metadata (``.shape``, ``.dtype``,
``.sharding``, also through a computed index: ``batch["x"][k].shape``), freeing it
(``x.delete()``, also leaf by leaf: ``jax.tree.map(lambda h: h.delete(), batch)``, ``for v in
batch.values(): v.delete()``), and what asks about a container, not its arrays (``.keys()``,
``len(d)``, ``"mask" in batch``, ``x is None``, ``isinstance``).
Where paths disagree (rebound on one branch only) the name is no longer followed: a read is
only reported when no path to it rebinds the name.
"""

from __future__ import annotations

import ast
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

from shardlint.semantics.file.facts import CallSite, FileFacts, Scope
from shardlint.syntax import code_fields

# Reading these of a deleted array is fine: they are metadata, not the buffer.
METADATA = frozenset({"shape", "dtype", "ndim", "size", "sharding", "is_deleted", "aval",
                      "weak_type", "itemsize", "nbytes"})

# Nor these: freeing a buffer (a no-op on a deleted array), a container's keys.
NOT_DATA = METADATA | {"delete", "keys"}
# Builtins that look at a container or an object, never at an array's buffer: `len` reads the
# shape, `isinstance`/`id`/`type` the object.
_NOT_DATA_CALLS = frozenset({"len", "isinstance", "id", "type", "callable"})
# Leaf-wise maps: a leaf is read only where the function reads it.
_TREE_MAPS = frozenset({"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map"})
# What hands out the leaves of a container one by one (`for v in batch.values():`).
_LEAVES = frozenset({"jax.tree.leaves", "jax.tree_util.tree_leaves", "jax.tree_leaves"})
LEAF = "[*]"  # a path part: any leaf of what comes before

Path = tuple[str, ...]


def chain(node: ast.expr) -> Path | None:
    """``state.params["w"]`` -> ("state", "params", "['w']"); None when not rooted at a name."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Subscript):
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, (str, int)):
                parts.append(f"[{key.value!r}]")
            else:
                parts.clear()  # `x[i]`: only the part before a computed index is known
            node = node.value
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            return tuple(reversed(parts))
        else:
            return None


def show(path: Path) -> str:
    """``("state", "params", "['w']")`` -> ``state.params['w']``."""
    out = path[0]
    for p in path[1:]:
        out += p if p.startswith("[") else f".{p}"
    return out


def _not_data(expr: ast.expr) -> bool:
    """An access chain that stops at metadata, a free or a container's keys (``x.shape[0]``,
    ``batch["x"][k].dtype``, ``x.delete``, ``d.keys``)."""
    node = expr
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Attribute) and node.attr in NOT_DATA:
            return True
        node = node.value
    return False


def _parts_reads(parts: list[ast.expr], containers, shadowed, facts):
    """The reads of a call's arguments or a comparison's operands: of the containers among them
    (``containers``) only the index reads, of the others every read."""
    for part in parts:
        if part in containers:
            yield from _index_reads(part, shadowed, facts)
        else:
            yield from _reads(part, shadowed, facts)


def _index_reads(expr: ast.expr, shadowed: frozenset[str],
                 facts: FileFacts | None) -> Iterator[tuple[ast.Name, ast.expr]]:
    """The reads of the computed indices of an access chain (``k`` in ``d[k].shape``)."""
    node = expr
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript):
            yield from _reads(node.slice, shadowed, facts)
        node = node.value
    if not isinstance(node, ast.Name):
        yield from _reads(node, shadowed, facts)


_CHAIN = (ast.Name, ast.Attribute, ast.Subscript)


def _reads_leaf(fn: ast.Lambda, i: int, facts: FileFacts | None) -> bool:
    """Whether a lambda mapped over trees reads the buffer of its ``i``-th leaf."""
    a = fn.args
    params = [x.arg for x in [*a.posonlyargs, *a.args]]
    if a.vararg is not None or i >= len(params):
        return True
    p = params[i]
    return any(n.id == p and not _not_data(e) for n, e in _reads(fn.body, frozenset(), facts))


def _related(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


@dataclass(frozen=True)
class Tracked:
    local: Path  # the expression as written after the call (`state`, `old`)
    target: Path  # what it denotes (`state`, `state.params`)


@dataclass
class Use:
    node: ast.Name  # the name read
    expr: ast.expr  # the whole expression read (`state.params["w"]`)
    alias_of: str | None  # what the alias read stands for (`state.params`), if through one
    next_iteration: bool  # read when the loop comes round again
    leaf: bool = False  # the alias is a loop variable over its leaves (`for v in d.values()`)


class _Found(Exception):
    def __init__(self, use: Use):
        self.use = use


class _Exit(Exception):
    """A return or raise: nothing after it runs."""


def _value_of(s: ast.stmt) -> ast.AST | None:
    """What a statement evaluates before it binds (its reads)."""
    if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Return)):
        return s.value
    return s


_DEFERRED = (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _reads(node: ast.AST, shadowed: frozenset[str] = frozenset(),
           facts: FileFacts | None = None) -> Iterator[tuple[ast.Name, ast.expr]]:
    """Names a node reads when it runs. Lambda bodies count (``jax.lax.cond(c, lambda: state,
    ...)`` calls them at once); their parameters, comprehension targets and the bodies of
    functions and classes defined here do not. An access chain handed to a builtin that looks
    at the container only (``len(d)``), tested with ``in`` for a string key or with ``is``, or
    mapped by ``jax.tree.map`` with a lambda that never reads that leaf's buffer
    (``lambda h: h.delete()``), is not read (its computed indices are)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return
    if isinstance(node, ast.Call):
        skip = _container_args(node, facts)
        if skip:
            yield from _reads(node.func, shadowed, facts)
            yield from _parts_reads([*node.args, *(k.value for k in node.keywords)], skip,
                                    shadowed, facts)
            return
    if isinstance(node, ast.Compare):
        skip = _compared_containers(node)
        if skip:
            yield from _parts_reads([node.left, *node.comparators], skip, shadowed, facts)
            return
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Load) and node.id not in shadowed:
            yield node, node
        return
    if isinstance(node, (ast.Attribute, ast.Subscript)):
        # `state.params["w"].shape`: judged once, at its root name, with the whole chain.
        link: ast.expr = node
        inner: list[ast.AST] = []
        while isinstance(link, (ast.Attribute, ast.Subscript)):
            if isinstance(link, ast.Subscript):
                inner.append(link.slice)
            link = link.value
        if isinstance(link, ast.Name):
            if isinstance(link.ctx, ast.Load) and link.id not in shadowed:
                yield link, node
        else:
            yield from _reads(link, shadowed, facts)
        for part in inner:
            yield from _reads(part, shadowed, facts)
        return
    if isinstance(node, ast.Lambda):
        a = node.args
        for d in [*a.defaults, *(x for x in a.kw_defaults if x is not None)]:
            yield from _reads(d, shadowed, facts)
        bound = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
        bound |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        yield from _reads(node.body, shadowed | bound, facts)
        return
    if isinstance(node, _COMPREHENSIONS):
        bound = {n.id for g in node.generators for n in ast.walk(g.target)
                 if isinstance(n, ast.Name)}
        for i, g in enumerate(node.generators):
            # the first iterable is evaluated outside the comprehension's own scope
            yield from _reads(g.iter, shadowed if i == 0 else shadowed | bound, facts)
            for cond in g.ifs:
                yield from _reads(cond, shadowed | bound, facts)
        parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        for part in parts:
            yield from _reads(part, shadowed | bound, facts)
        return
    for child in ast.iter_child_nodes(node):
        yield from _reads(child, shadowed, facts)


def _container_args(call: ast.Call, facts: FileFacts | None) -> list[ast.expr]:
    """The arguments of a call that it does not read the buffers of (see :func:`_reads`)."""
    func = call.func
    if isinstance(func, ast.Name) and func.id in _NOT_DATA_CALLS:
        return [a for a in call.args if isinstance(a, _CHAIN)]
    if facts is None or not isinstance(func, (ast.Name, ast.Attribute)) or len(call.args) < 2 \
            or not isinstance(call.args[0], ast.Lambda) or facts.qualify(func) not in _TREE_MAPS:
        return []
    fn = call.args[0]
    return [a for i, a in enumerate(call.args[1:]) if isinstance(a, _CHAIN)
            and not _reads_leaf(fn, i, facts)]


def _compared_containers(node: ast.Compare) -> list[ast.expr]:
    """``x is None`` (the object, not its buffer), ``"mask" in batch`` (a key of a dict)."""
    if all(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops):
        return [p for p in [node.left, *node.comparators] if isinstance(p, _CHAIN)]
    if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) \
            and isinstance(node.left, ast.Constant) and isinstance(node.left.value, str) \
            and isinstance(node.comparators[0], _CHAIN):
        return [node.comparators[0]]
    return []


_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _blocks(owner: ast.stmt) -> list[list[ast.stmt]]:
    out = []
    for name in ("body", "orelse", "finalbody"):
        block = getattr(owner, name, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            out.append(block)
    for h in getattr(owner, "handlers", []) or []:
        out.append(h.body)
    for c in getattr(owner, "cases", []) or []:
        out.append(c.body)
    return out


def _locations(body: list[ast.stmt]) -> dict[ast.stmt, tuple[list[ast.stmt], int, ast.stmt | None]]:
    """Each statement of a body (not of nested functions) -> (its block, index, owner stmt)."""
    out: dict[ast.stmt, tuple[list[ast.stmt], int, ast.stmt | None]] = {}
    todo: list[tuple[list[ast.stmt], ast.stmt | None]] = [(body, None)]
    while todo:
        block, owner = todo.pop()
        for i, s in enumerate(block):
            out[s] = (block, i, owner)
            if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                todo.extend((b, s) for b in _blocks(s))
    return out


_SIMPLE = (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)


def use_after(facts: FileFacts, site: CallSite, arg: ast.expr) -> Use | None:
    """The first read of ``arg``'s value after ``site`` donated it, before it is rebound."""
    donated = chain(arg)
    stmt = site.stmt
    if donated is None or not isinstance(stmt, _SIMPLE):
        return None
    if _host_value(facts, site.scope, donated[0]):
        return None
    index = _scope_index(facts, site.scope.node)
    if index is None:
        return None
    where = index.locations
    if stmt not in where:
        return None
    scanner = _Scanner(donated, stmt, facts)
    scanner.live = {Tracked(donated, donated), *_aliases(index, stmt, donated)}
    for t in (stmt.targets if isinstance(stmt, ast.Assign) else
              [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []):
        scanner.store(t)
    try:
        _continue_after(scanner, stmt, where)
    except _Found as found:
        return found.use
    except _Exit:
        return None
    return None


def _continue_after(scanner: _Scanner, stmt: ast.stmt, where) -> None:
    """Scan what runs after ``stmt``: the rest of its block, then of each enclosing block; at
    an enclosing loop, its next iteration up to the call (and again for each `continue` taken
    on a branch), then what follows the loop."""
    pending: str | None = None  # a break/continue/return on its way out
    cur = stmt
    while scanner.live or scanner.jumps:
        block, idx, owner = where[cur]
        if pending is None:
            try:
                r = scanner.stmts(block[idx + 1:])
            except _Exit:
                r = "exit"
                scanner.live = set()
            if r in ("break", "continue", "exit"):
                pending = r
        if owner is None:
            return
        if isinstance(owner, _LOOPS) and block is owner.body:
            jumps, scanner.jumps = scanner.jumps, []
            if pending in (None, "continue"):
                _next_iteration(scanner, owner)
            for kind, live in jumps:
                if kind == "continue":  # a `continue` taken after the call, before a rebind
                    _next_iteration(scanner, owner, live)
            if pending == "exit":
                return
            if pending is None and owner.orelse:
                r = scanner.stmts(owner.orelse)
                pending = r if r in ("break", "continue") else None
            else:
                pending = None
        cur = owner


def _next_iteration(scanner: _Scanner, loop: ast.stmt, live: set[Tracked] | None = None) -> None:
    saved = set(scanner.live)
    if live is not None:
        scanner.live = set(live)
    scanner.next_iteration = True
    try:
        if isinstance(loop, ast.While):
            scanner.loads(loop.test)
        else:
            scanner.store(loop.target)  # type: ignore[attr-defined]
        if scanner.live:
            scanner.stmts(loop.body, stop=True)  # type: ignore[attr-defined]
    except _Exit:
        pass
    finally:
        scanner.live = saved
        scanner.next_iteration = False
        scanner.jumps = []


def _host_value(facts: FileFacts, scope: Scope, name: str) -> bool:
    """Bound to a NumPy array or a Python literal: donation copies it, the value stays valid."""
    return _is_host(facts, facts.value_of(name, scope))


def _is_host(facts: FileFacts, value: ast.expr | None) -> bool:
    if isinstance(value, ast.Constant):
        return True
    if isinstance(value, (ast.List, ast.Tuple)):
        return bool(value.elts) and all(_is_host(facts, e) for e in value.elts)
    if isinstance(value, ast.Dict):
        return bool(value.values) and all(_is_host(facts, v) for v in value.values)
    if isinstance(value, ast.Call) and isinstance(value.func, (ast.Name, ast.Attribute)):
        q = facts.qualify(value.func)
        return q is not None and (q.split(".", 1)[0] == "numpy" or q == "jax.device_get")
    return False


@dataclass(frozen=True)
class _ScopeIndex:
    """What :func:`use_after` reads of a function body whatever the call: where each statement
    sits, the lines each name is stored at, and each ``name = value`` alias assignment."""

    locations: dict[ast.stmt, tuple[list[ast.stmt], int, ast.stmt | None]]
    stores: dict[str, list[int]]
    assigns: list[tuple[int, Path, Path]]  # (end line, the name's part, what it holds)


def _scope_index(facts: FileFacts, scope_node: ast.AST) -> _ScopeIndex | None:
    """The body of ``scope_node`` indexed once per build of the file (a body with several
    donating calls, or one call with several donated arguments, asks again)."""
    memo: dict = facts.derived.setdefault("liveness_scopes", {})  # type: ignore[assignment]
    found = memo.get(scope_node, _MISSING)
    if found is _MISSING:
        body = getattr(scope_node, "body", None)
        found = memo[scope_node] = _index(body, facts.reuse is not None) \
            if isinstance(body, list) else None
    return found  # type: ignore[return-value]


_MISSING = object()


def _index(body: list[ast.stmt], keep: bool = False) -> _ScopeIndex:
    """``keep`` (the language server): each statement's part is kept with it for the next
    build, where the parser keeps an untouched statement's node (moved as a whole, in place:
    its lines are kept relative to its first)."""
    stores: dict[str, list[int]] = {}
    assigns: list[tuple[int, Path, Path]] = []
    for stmt in body:
        if type(stmt) in _DEFERRED_TYPES:
            continue
        span = stmt.end_lineno - stmt.lineno  # type: ignore[operator]
        entry = _KEPT.get(stmt) if keep else None
        if entry is None or entry[0] != span:
            entry = (span, *_statement_index(stmt))
            if keep:
                _KEPT[stmt] = entry
        base = stmt.lineno
        for name, rel in entry[1]:
            stores.setdefault(name, []).append(base + rel)
        for rel, local, source in entry[2]:
            assigns.append((base + rel, local, source))
    return _ScopeIndex(_locations(body), stores, assigns)


# statement -> (its lines - 1, its stores and alias assignments with lines relative to its first)
_KEPT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _statement_index(stmt: ast.stmt) -> tuple[list[tuple[str, int]],
                                              list[tuple[int, Path, Path]]]:
    """The names ``stmt`` stores and its ``name = value`` alias assignments, lines relative to
    its first: one pass over its nodes but the deferred ones (lambdas, nested functions and
    classes run later), without generators."""
    base = stmt.lineno
    stores: list[tuple[str, int]] = []
    assigns: list[tuple[int, Path, Path]] = []
    todo: list = [stmt]
    push = todo.append
    while todo:
        n = todo.pop()
        t = type(n)
        if t is ast.Name:
            if type(n.ctx) is not ast.Load:
                stores.append((n.id, n.lineno - base))
            continue
        if t is ast.Assign and n.end_lineno is not None:
            pairs: list[tuple[ast.expr, ast.expr]] = []
            for target in n.targets:
                if type(target) is ast.Name:
                    pairs.append((target, n.value))
                elif type(target) is ast.Tuple and type(n.value) is ast.Tuple \
                        and len(target.elts) == len(n.value.elts):
                    pairs.extend(zip(target.elts, n.value.elts))
            for target, v in pairs:
                if type(target) is ast.Name:
                    assigns.extend((n.end_lineno - base, (target.id, *part), c)
                                   for part, c in shared_parts(v))
        for f in code_fields(t):
            v = getattr(n, f, None)
            if type(v) is list:
                for x in v:
                    if isinstance(x, ast.AST) and type(x) not in _DEFERRED_TYPES:
                        push(x)
            elif isinstance(v, ast.AST) and type(v) not in _DEFERRED_TYPES:
                push(v)
    return stores, assigns


_DEFERRED_TYPES = frozenset(_DEFERRED)


def _aliases(index: _ScopeIndex, call_stmt: ast.stmt, donated: Path) -> set[Tracked]:
    """Names bound before the call to the donated value or a part of it (``old = state.params``),
    or that the donated name was taken from (``s = state; step(s)``), and not rebound since."""
    line = call_stmt.lineno
    stores = index.stores
    out: set[Tracked] = set()
    for end, local, source in index.assigns:
        if end >= line:
            continue
        name = local[0]
        if any(end < ln < line for x in (name, source[0]) for ln in stores.get(x, [])):
            continue  # rebound between the alias and the call: it holds something else
        if name != donated[0] and _related(source, donated):
            out.add(Tracked(local, source))  # old = state.params; step(state)
        elif _related(local, donated) and source[0] != name:
            out.add(Tracked(source, local))  # s = state; step(s)
    return out


_REPLACE = ("dataclasses.replace", "flax.struct.replace")


def shared_parts(value: ast.expr) -> list[tuple[Path, Path]]:
    """What a value assigned to a name shares with others, as (part of the name, what it
    holds): ``state.params`` -> [((), state.params)]; a record copied with some fields replaced
    (``dataclasses.replace(cache, pos=p)``, ``cache.replace(...)``) holds the other fields'
    arrays -> [((), cache)]; a dict of names (``{"params": params}``) holds them ->
    [(("['params']",), params)]."""
    if isinstance(value, (ast.Name, ast.Attribute, ast.Subscript)):
        c = chain(value)
        return [((), c)] if c is not None else []
    # (below, only values named whole: `x[:, a:b]` is a new array, not x)
    if isinstance(value, ast.Call):
        func = value.func
        source: ast.expr | None = None
        if isinstance(func, ast.Attribute) and func.attr in ("replace", "_replace") \
                and not value.args:
            source = func.value
        elif isinstance(func, (ast.Name, ast.Attribute)) and value.args \
                and ".".join(_dotted(func)) in (*_REPLACE, "replace"):
            source = value.args[0]
        elif isinstance(func, ast.Name) and func.id == "dict" and not value.args:
            return [((f"[{k.arg!r}]",), c) for k in value.keywords if k.arg is not None
                    and (c := _whole(k.value)) is not None]
        c = _whole(source)
        return [((), c)] if c is not None else []
    if isinstance(value, ast.Dict):
        return [((f"[{k.value!r}]",), c) for k, v in zip(value.keys, value.values)
                if isinstance(k, ast.Constant) and isinstance(k.value, (str, int))
                and (c := _whole(v)) is not None]
    return []


def _whole(node: ast.expr | None) -> Path | None:
    """The chain of a value named whole (``state.params["w"]``), not a slice of one."""
    if not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        return None
    c = chain(node)
    return c if c is not None and len(c) == _links(node) else None


def _links(node: ast.expr) -> int:
    n = 1
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        n += 1
        node = node.value
    return n


def _dotted(node: ast.expr) -> list[str]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return list(reversed(parts))


class _Scanner:
    def __init__(self, donated: Path, call_stmt: ast.stmt, facts: FileFacts | None = None):
        self.donated = donated
        self.facts = facts
        self.call_stmt = call_stmt
        self.live: set[Tracked] = set()
        self.next_iteration = False
        # break/continue taken on one branch while another falls through: (kind, live set)
        self.jumps: list[tuple[str, set[Tracked]]] = []

    # -- reads and writes --
    def loads(self, node: ast.AST | None) -> None:
        if node is None:
            return
        for name, expr in _reads(node, facts=self.facts):
            self._read(name, expr)

    def _read(self, name: ast.Name, expr: ast.expr) -> None:
        c = chain(expr)
        if c is None or _not_data(expr):
            return
        found = self._denoted(c)
        if found is not None:
            t, _ = found
            leaf = t.target[-1] == LEAF
            target = t.target[:-1] if leaf else t.target
            alias = show(target) if t.local != t.target else None
            raise _Found(Use(name, expr, alias, self.next_iteration, leaf))

    def _denoted(self, c: Path) -> tuple[Tracked, Path] | None:
        """The tracked value an access chain reaches, and what it denotes there, when that is
        the donated value or a part of it."""
        for t in self.live:
            if c[: len(t.local)] == t.local:
                denoted = t.target + c[len(t.local):]  # reads the tracked value or a part of it
            elif t.local[: len(c)] == c and c != ("self",):
                denoted = t.target[: len(t.target) - (len(t.local) - len(c))]  # the whole holder
            else:
                continue
            if _related(denoted, self.donated):
                return t, denoted
        return None

    def _leaf_loop(self, s: ast.For | ast.AsyncFor) -> bool:
        """``for v in d.values():``, ``for k, v in d.items():``, ``for v in jax.tree.leaves(d):``
        over a tracked value: the loop variable is followed as a leaf of it (``v.delete()`` is no
        read, ``print(v)`` is), and handing out the leaves reads no buffer."""
        it, value_target = s.iter, s.target
        if not isinstance(it, ast.Call) or it.keywords:
            return False
        func = it.func
        if isinstance(func, ast.Attribute) and func.attr in ("values", "items") and not it.args:
            container = func.value
            if func.attr == "items":
                if not (isinstance(value_target, ast.Tuple) and len(value_target.elts) == 2):
                    return False
                value_target = value_target.elts[1]
        elif self.facts is not None and isinstance(func, (ast.Name, ast.Attribute)) \
                and len(it.args) == 1 and self.facts.qualify(func) in _LEAVES:
            container = it.args[0]
        else:
            return False
        c = chain(container) if isinstance(container, _CHAIN) else None
        found = self._denoted(c) if c is not None else None
        if found is None or not isinstance(value_target, ast.Name):
            return False
        for name, expr in _index_reads(container, frozenset(), self.facts):
            self._read(name, expr)
        self.store(s.target)
        self.live.add(Tracked((value_target.id,), found[1] + (LEAF,)))
        return True

    def store(self, target: ast.expr) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                self.store(e)
            return
        if isinstance(target, ast.Starred):
            self.store(target.value)
            return
        c = chain(target)
        if c is not None:
            self.live = {t for t in self.live if t.local[: len(c)] != c}

    # -- statements --
    def stmts(self, body: list[ast.stmt], stop: bool = False) -> str:
        """Scan a block in order: "fell" off its end, "stop" (came round to the call again),
        "break" or "continue". Raises _Exit at a return/raise and _Found at a read."""
        for s in body:
            if not self.live:
                return "fell"
            if stop and s is self.call_stmt:
                self.loads(_value_of(s))
                return "stop"
            r = self.stmt(s, stop)
            if r != "fell":
                return r
        return "fell"

    def stmt(self, s: ast.stmt, stop: bool) -> str:
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            self.loads(s.value)
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                self.store(t)
        elif isinstance(s, ast.AugAssign):
            self.loads(s.target if isinstance(s.target, ast.Name) else None)
            self.loads(s.value)
            self.store(s.target)
        elif isinstance(s, ast.Delete):
            for t in s.targets:
                self.store(t)
        elif isinstance(s, (ast.Return, ast.Raise)):
            self.loads(s.value if isinstance(s, ast.Return) else s.exc)
            raise _Exit
        elif isinstance(s, ast.Break):
            return "break"
        elif isinstance(s, ast.Continue):
            return "continue"
        elif isinstance(s, ast.If):
            self.loads(s.test)
            return self._alternatives([s.body, s.orelse], stop)
        elif isinstance(s, _LOOPS):
            if isinstance(s, ast.While):
                self.loads(s.test)
            elif not self._leaf_loop(s):
                self.loads(s.iter)
                self.store(s.target)
            outer_jumps = len(self.jumps)
            r = self._alternatives([s.body], stop, loop=True)
            del self.jumps[outer_jumps:]  # this loop's own break/continue
            if r == "stop" or not s.orelse:
                return r
            return self._alternatives([s.orelse], stop)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self.loads(item.context_expr)
                if item.optional_vars is not None:
                    self.store(item.optional_vars)
            return self.stmts(s.body, stop)
        elif isinstance(s, ast.Try) or type(s).__name__ == "TryStar":
            r = self.stmts(s.body, stop)  # type: ignore[attr-defined]
            if r != "fell":
                return r
            handlers = [h.body for h in s.handlers]  # type: ignore[attr-defined]
            if handlers:
                try:
                    r = self._alternatives([*handlers, []], stop)
                except _Exit:
                    r = "fell"
                if r != "fell":
                    return r
            r = self.stmts(s.orelse, stop)  # type: ignore[attr-defined]
            if r != "fell":
                return r
            return self.stmts(s.finalbody, stop)  # type: ignore[attr-defined]
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in s.decorator_list:
                self.loads(d)
            self.store(ast.Name(id=s.name, ctx=ast.Store()))
        elif isinstance(s, (ast.Import, ast.ImportFrom)):
            for a in s.names:
                self.store(ast.Name(id=(a.asname or a.name.split(".", 1)[0]), ctx=ast.Store()))
        elif isinstance(s, ast.Match):
            self.loads(s.subject)
            return self._alternatives([c.body for c in s.cases] + [[]], stop)
        elif isinstance(s, (ast.Global, ast.Nonlocal, ast.Pass)):
            pass
        else:
            self.loads(s)
        return "fell"

    def _alternatives(self, bodies: list[list[ast.stmt]], stop: bool, loop: bool = False) -> str:
        """Blocks of which one runs (if/else, match cases; a loop body that may not run).

        A read in any of them is reported. Afterwards a name stays tracked only when no path
        that falls through rebinds it: a maybe-rebound name is not followed (precision first).
        A break/continue on one branch is kept in ``jumps`` for the loop it leaves.
        """
        start = set(self.live)
        fell: set[Tracked] | None = None
        jumps: list[tuple[str, set[Tracked]]] = []
        for body in bodies:
            self.live = set(start)
            try:
                r = self.stmts(body, stop)
            except _Exit:
                continue
            if r == "stop":
                return r
            if loop and r in ("break", "continue"):
                r = "fell"
            if r == "fell":
                fell = set(self.live) if fell is None else fell & self.live
            else:
                jumps.append((r, set(self.live)))
        if fell is not None:
            self.jumps.extend(jumps)
            self.live = fell
            return "fell"
        if jumps:
            (kind, live), rest = jumps[0], jumps[1:]
            self.jumps.extend(rest)
            self.live = live
            return kind
        if loop:  # the body may also not run at all
            self.live = start
            return "fell"
        raise _Exit
