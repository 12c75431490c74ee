"""What a jit site compiles, wherever it is defined; and the jit sites of in-house wrappers.

:func:`compiled` follows a jit site's callable to a function of the project: one defined in this
file (decorated, or named: ``jax.jit(step)``, ``jax.jit(self.step)``), one imported from another
module (``from train_lib import train_step``), ``functools.partial(f, ...)`` of one (positions
shift by what the partial binds), a local name bound to any of those, or the callable a project
function returns (``step = make_step(cfg)``, ``fn, *_ = get_functional_train(train_step, ...)``
returning ``partial(train_step, ...)``), through the value-flow layer (``valueflow.py``).

:func:`wrapper_sites` finds the jit sites the facts pass cannot know: calls and decorators of an
in-house jit wrapper, either defined in the project (``def my_jit(fn, **kw): return jax.jit(fn,
**kw)``) or named like one (``ejit(step, static_argnums=...)``, a callable from outside the
project whose name ends in ``jit``); they are assumed to take ``jax.jit``'s keywords.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field, replace

from shardlint.semantics.catalog.api import Role
from shardlint.semantics.catalog.names import dotted
from shardlint.semantics.file.dataflow import LocalFlow, positional_params
from shardlint.semantics.file.execution import function_named
from shardlint.semantics.file.facts import FileFacts, JitSite, Scope
from shardlint.semantics.file.wrappers import jit_name, jit_wrapper_sites
from shardlint.semantics.flow.summary import reference
from shardlint.semantics.flow.valueflow import Flowing, Resolver, slot, terms_json

from shardlint.semantics.flow.project import ProjectIndex, project_cached

_MAX_DEPTH = 8


@dataclass
class Compiled:
    """The function a jit site compiles, as the compiled callable's callers count its
    arguments (what ``donate_argnums``/``static_argnums`` index)."""

    key: str | None  # "module:qual" in the project index; None for a lambda
    name: str  # for messages
    params: list[str] | None  # positional parameters, as callers count them; None: unknown
    kwonly: list[str] = field(default_factory=list)
    offset: int = 0  # callers pass the first `offset` of `params` implicitly (a method's self)
    scope: Scope | None = None  # the function, when it is defined in this file
    node: ast.Lambda | None = None  # the lambda compiled
    # positions (as callers count them) that a `jax.vmap` around the function does not map
    # (`in_axes=(0, None)`): they come back with a new leading axis, no update in place
    unmapped: frozenset[int] = frozenset()

    def bind(self, positional: int, keywords: list[str]) -> Compiled:
        """What ``functools.partial(self, <positional args>, **keywords)`` leaves to callers."""
        if self.params is None:
            return self
        params = self.params[positional:]
        kwonly = [k for k in self.kwonly if k not in keywords]
        for k in keywords:
            if k in params:
                # After a parameter bound by keyword, the rest can only be passed by keyword.
                i = params.index(k)
                kwonly = [*params[i + 1:], *kwonly]
                params = params[:i]
        return replace(self, params=params, kwonly=kwonly, offset=0)


# ---- the compiled function --------------------------------------------------------------------------
def compiled(facts: FileFacts, project: ProjectIndex, site: JitSite) -> Compiled | None:
    """What ``site`` compiles; None when it cannot be followed (a callable from outside the
    project, a parameter, a value built at run time)."""
    fn = site.function
    if fn is not None and isinstance(fn.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        params = positional_params(fn.node)
        method = fn.enclosing_class is not None and params and not _static(fn.node)
        return Compiled(_key(facts, fn), fn.name, params,
                        [a.arg for a in fn.node.args.kwonlyargs], 1 if method else 0, fn)
    if site.target is None:
        return None
    return _callable(facts, project, site.target, site.scope, 0)


def compiled_at(project: ProjectIndex, key: str) -> Compiled | None:
    """What the project callable ``key`` (``"module:qual"``) compiles: the function itself, or
    the one a module-level alias wraps (``train_step = jax.jit(_step, donate_argnums=0)``)."""
    found = project.flows.function(key)
    return _remote(project, *found) if found is not None else None


class RebindFacts:
    """What a loop that rebinds an argument of a compiled function (``x = step(x, ...)``) may
    conclude, from the function's body in this file or its summary in another module: whether
    the parameter is computed into the result (not handed back as it came), and whether the
    part of the result a caller rebinds is visibly of another shape."""

    def __init__(self, project: ProjectIndex, target: Compiled, facts: FileFacts):
        self._local = LocalFlow(facts, target.scope) if target.scope is not None else None
        sym = project.symbol(target.key) if target.key is not None and self._local is None \
            else None
        flow = (sym.flow or {}) if sym is not None else {}
        self._computed = set(flow.get("rb", ()))
        self._shaped = set(flow.get("rs", ()))

    def computed(self, param: str) -> bool:
        if self._local is not None:
            return self._local.flows_to_return(param) and not self._local.returned_as_is(param)
        return param in self._computed

    def reshaped(self, index: tuple[int, ...]) -> bool:
        if self._local is not None:
            return self._local.reshaped(index)
        return (slot(index[0]) if index else "") in self._shaped if len(index) <= 1 else False


def rebind_facts(project: ProjectIndex, target: Compiled | None,
                 facts: FileFacts) -> RebindFacts | None:
    """:class:`RebindFacts` of a compiled function known here or in the project index."""
    if target is None or (target.scope is None and target.key is None):
        return None
    return RebindFacts(project, target, facts)


def _key(facts: FileFacts, scope: Scope) -> str:
    return f"{facts.module}:{scope.qualname}"


def _static(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)


def _local(facts: FileFacts, fn: Scope, bound_method: bool) -> Compiled | None:
    node = fn.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    params = positional_params(node)
    drop = 1 if bound_method and params and fn.enclosing_class is not None \
        and not _static(node) else 0
    return Compiled(_key(facts, fn), fn.name, params[drop:],
                    [a.arg for a in node.args.kwonlyargs], 0, fn)


def _remote(project: ProjectIndex, key: str, flow: dict) -> Compiled:
    name = key.partition(":")[2].rsplit(".", 1)[-1]
    params = flow.get("params")
    return Compiled(key, name, list(params) if params is not None else None,
                    list(flow.get("kwonly", [])))


def _callable(facts: FileFacts, project: ProjectIndex, expr: ast.expr, scope: Scope,
              depth: int) -> Compiled | None:
    if depth > _MAX_DEPTH:
        return None
    fn = function_named(facts, expr, scope)
    if fn is not None:
        return _local(facts, fn, isinstance(expr, ast.Attribute))
    if isinstance(expr, ast.Lambda):
        a = expr.args
        return Compiled(None, "<lambda>", positional_params(expr), [x.arg for x in a.kwonlyargs],
                        node=expr)
    if isinstance(expr, ast.Call):
        wrapped = _through_wrapper(facts, project, expr, scope, depth)
        if wrapped is not _NOT_A_WRAPPER:
            return wrapped  # type: ignore[return-value]
        known = facts.resolve(expr.func) if isinstance(expr.func, (ast.Name, ast.Attribute)) \
            else None
        if known is not None and known.role == Role.PARTIAL and expr.args:
            inner = _callable(facts, project, expr.args[0], scope, depth + 1)
            return inner.bind(len(expr.args) - 1, [k.arg for k in expr.keywords if k.arg]) \
                if inner is not None else None
        if known is None:
            return _returned(facts, project, expr, (), scope, depth)
        return None
    if isinstance(expr, ast.Name):
        found = scope.lookup(expr.id)
        if found is not None:
            owner, values = found
            assigned = owner.assigned.get(expr.id) if owner.kind == "function" else None
            if assigned is not None:
                if len(assigned) != 1 or assigned[0].value is None:
                    return None
                value, index = assigned[0].value, assigned[0].index
                if index:
                    return _returned(facts, project, value, index, owner, depth) \
                        if isinstance(value, ast.Call) else None
                return _callable(facts, project, value, owner, depth + 1)
            if len(values) == 1 and isinstance(values[0], ast.expr) \
                    and not _opaque(values[0]):
                return _callable(facts, project, values[0], owner, depth + 1)
            return None
    if isinstance(expr, (ast.Name, ast.Attribute)):
        ref = reference(facts, expr, scope)
        target = project.flows.function(ref, facts.module) if ref is not None else None
        if target is None:
            return _self_attribute(facts, project, expr, scope, depth)
        return _remote(project, *target)
    return None


def _self_attribute(facts: FileFacts, project: ProjectIndex, expr: ast.expr, scope: Scope,
                    depth: int) -> Compiled | None:
    """``self.train_step`` where the class's methods assign it (``self.train_step =
    jax.vmap(_train_step, ...)`` in ``__init__``, or one value in each branch): the function
    every assignment compiles, where they agree."""
    if not (isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name)
            and expr.value.id == "self"):
        return None
    cls = scope
    while cls is not None and cls.kind != "class":
        cls = cls.parent
    if cls is None:
        return None
    found: list[Compiled] = []
    for method in facts.scopes.values():
        if method.parent is not cls or method.kind != "function":
            continue
        for node in ast.walk(method.node):
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            t = node.targets[0]
            if isinstance(t, ast.Attribute) and t.attr == expr.attr and \
                    isinstance(t.value, ast.Name) and t.value.id == "self":
                if node.value is expr or len(found) > 3:
                    return None
                inner = _callable(facts, project, node.value, method, depth + 1)
                if inner is None:
                    return None
                found.append(inner)
    if not found or any(c.key != found[0].key or c.key is None or c.params != found[0].params
                        for c in found):
        return None
    return replace(found[0], unmapped=frozenset().union(*(c.unmapped for c in found)))


# Wrappers whose result takes the function's arguments at the same positions and hands back its
# results, mapped or rematerialised: what a jit of the wrapper does with its arguments is what the
# function does with them (a `shard_map` is left out: its in and out specs may differ)
_SAME_ARGUMENTS = frozenset({
    "jax.vmap", "jax.checkpoint", "jax.remat", "jax.ad_checkpoint.checkpoint", "jax.named_call",
})
_NOT_A_WRAPPER = object()


def _through_wrapper(facts: FileFacts, project: ProjectIndex, call: ast.Call, scope: Scope,
                     depth: int) -> Compiled | None | object:
    """``jax.vmap(step, in_axes=(0, None, 0))`` and the like: the function inside, with the
    positions the map leaves unmapped; ``_NOT_A_WRAPPER`` for any other call."""
    if not call.args or not isinstance(call.func, (ast.Name, ast.Attribute)):
        return _NOT_A_WRAPPER
    q = facts.qualify(call.func)
    if q not in _SAME_ARGUMENTS:
        return _NOT_A_WRAPPER
    unmapped: set[int] = set()
    if q == "jax.vmap":
        axes = {k.arg: k.value for k in call.keywords}
        if len(call.args) > 1:
            axes.setdefault("in_axes", call.args[1])
        if len(call.args) > 2:
            axes.setdefault("out_axes", call.args[2])
        out = axes.get("out_axes")
        if out is not None and not (isinstance(out, ast.Constant) and out.value == 0):
            return None  # (results moved to another axis: not the argument's layout)
        given = axes.get("in_axes")
        if isinstance(given, (ast.Tuple, ast.List)):
            for i, e in enumerate(given.elts):
                if not isinstance(e, ast.Constant) or e.value not in (0, None):
                    return None
                if e.value is None:
                    unmapped.add(i)
        elif given is not None and not (isinstance(given, ast.Constant) and given.value == 0):
            return None
    inner = _callable(facts, project, call.args[0], scope, depth + 1)
    if inner is None or not unmapped:
        return inner
    return replace(inner, unmapped=frozenset(i + inner.offset for i in unmapped))


def _opaque(node: ast.AST) -> bool:
    return type(node).__name__ == "Opaque"


def _returned(facts: FileFacts, project: ProjectIndex, call: ast.Call, index: tuple[int, ...],
              scope: Scope, depth: int) -> Compiled | None:
    """The callable a project function's call returns (at ``index`` of its result)."""
    if not isinstance(call.func, (ast.Name, ast.Attribute)):
        return None
    ref = reference(facts, call.func, scope)
    target = project.flows.function(ref, facts.module) if ref is not None else None
    if target is None:
        return None
    key, flow = target
    kind = flow.get("fn", {}).get(str(index[0]) if index else "")
    if kind is None or (index and len(index) > 1):
        return None
    what, name, bound, keywords = kind[0], kind[1], kind[2], kind[3] if len(kind) > 3 else []
    if "**" in keywords:
        # `partial(fn, **kwargs)` of its own `**kwargs`: the keywords our call passes there
        named = {*flow.get("params", ()), *flow.get("kwonly", ())}
        keywords = sorted({*keywords, *(k.arg for k in call.keywords
                                         if k.arg is not None and k.arg not in named)} - {"**"})
    if what == "fn":
        inner_target = project.flows.function(name, key.partition(":")[0])
        inner = _remote(project, *inner_target) if inner_target is not None else None
    elif what == "param":
        # It hands back (a partial of) its own parameter: what our call passes there.
        arg = _argument(call, flow, name, isinstance(call.func, ast.Attribute))
        inner = _callable(facts, project, arg, scope, depth + 1) if arg is not None else None
    else:
        return None
    return inner.bind(bound, keywords) if inner is not None else None


def _argument(call: ast.Call, flow: dict, param: str, via_attr: bool) -> ast.expr | None:
    params = flow.get("params", [])
    for kw in call.keywords:
        if kw.arg == param:
            return kw.value
    if param not in params:
        return None
    i = params.index(param) - (flow.get("method", 0) if via_attr else 0)
    if 0 <= i < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:i + 1]):
        return call.args[i]
    return None


# ---- what it does with its arguments ----------------------------------------------------------------
def flowing(facts: FileFacts, project: ProjectIndex, target: Compiled,
            in_place: bool = False) -> tuple[dict[str, Flowing], dict[str, Flowing]]:
    """The compiled function's parameters its result holds (SAME / UPDATED, with the chain),
    and with ``in_place`` those it changes where they are (``nnx.jit`` writes them back)."""
    flows = project.flows
    if target.key is not None:
        return flows.returns(target.key), flows.mutates(target.key) if in_place else {}
    if target.node is None:
        return {}, {}
    scope = _enclosing(facts, target.node)
    local = LocalFlow(facts, None, node=target.node,
                      callee=Resolver(facts, scope, lambda n, s: reference(facts, n, s)))
    terms = terms_json(local.returned_terms())
    return flows.resolve_terms(terms, (), facts.module, facts.path), {}


def _enclosing(facts: FileFacts, node: ast.AST) -> Scope:
    line = getattr(node, "lineno", 0)
    qual = facts.symbol_at(line)
    return facts.scopes.get(qual, facts.module_scope)


# ---- jit sites of wrappers ---------------------------------------------------------------------------
def wrapper_sites(facts: FileFacts, project: ProjectIndex) -> list[JitSite]:
    """Calls and decorators of in-house jit wrappers in this file (see the module docstring)."""
    found = facts.derived.get("wrapper_sites")
    if found is None:
        found = facts.derived["wrapper_sites"] = [
            _with_forwarded(facts, project, site) for site in jit_wrapper_sites(
                facts, wrapper_names(project),
                lambda func, scope: _is_wrapper(facts, project, func, scope))
            if not _on_a_local(site) or _callable(facts, project, site.target, site.scope, 0)
            is not None]
    return found  # type: ignore[return-value]


def _with_forwarded(facts: FileFacts, project: ProjectIndex, site: JitSite) -> JitSite:
    """A wrapper site whose call passes the wrapper's donation parameter by position
    (``jit_and_compile(f, args, ..., donate_argnums, ...)``): that argument is its
    ``donate_argnums`` (which of jit's two keywords matters not: something is donated)."""
    call = site.node if isinstance(site.node, ast.Call) else None
    if call is None or any(k in site.keywords for k in ("donate_argnums", "donate_argnames")):
        return site
    positions = _forwarded_positions(facts, project, call, site.scope)
    for i in sorted(positions):
        if any(isinstance(a, ast.Starred) for a in call.args[:i + 1]):
            return replace(site, keywords={**site.keywords, "**": call.args[i]})
        if i < len(call.args):
            return replace(site, keywords={**site.keywords, "donate_argnums": call.args[i]})
    return site


def _forwarded_positions(facts: FileFacts, project: ProjectIndex, call: ast.Call,
                         scope: Scope) -> frozenset[int]:
    """Where the callers of the wrapper ``call`` calls pass its donation parameters."""
    func = call.func
    ref = reference(facts, func, scope) if isinstance(func, (ast.Name, ast.Attribute)) else None
    target = project.flows.function(ref, facts.module) if ref is not None else None
    if target is not None:
        flow = target[1]
        params = flow.get("params", [])
        offset = flow.get("method", 0) if isinstance(func, ast.Attribute) else 0
        return frozenset(params.index(p) - offset for p in flow.get("jfwd", ())
                         if p in params and params.index(p) >= offset)
    last = func.attr if isinstance(func, ast.Attribute) else None
    return forwarding_names(project).get(last, frozenset()) if last else frozenset()


def _on_a_local(site: JitSite) -> bool:
    """A wrapper called as a method of a local value (``self._partitioner.partition(...)``):
    taken for one only when what it is handed is a function shardlint can follow (`str.partition`
    is not one)."""
    func = site.node.func if isinstance(site.node, ast.Call) else None
    parts = dotted(func) if func is not None else None
    if parts is None or len(parts) < 2:
        return False
    found = site.scope.lookup(parts[0])
    return found is not None and found[0].kind != "module"


def may_call_a_wrapper(facts: FileFacts, project: ProjectIndex) -> bool:
    """Whether the file names a jit wrapper at all (a cheap test before :func:`wrapper_sites`):
    an imported callee or a function of its own named like one or like a project wrapper."""
    names = wrapper_names(project)
    if any(_wrapper_like(q.rsplit(".", 1)[-1], names) for q in facts.called_names()) \
            or any(_wrapper_like(s.name, names) for s in facts.function_scopes()):
        return True
    # (a bare decorator is no call: `@hax.named_jit`)
    if any(type(d) in (ast.Name, ast.Attribute) and _wrapper_like(
            d.attr if type(d) is ast.Attribute else d.id, names)  # type: ignore[union-attr]
           for s in facts.function_scopes() for d in s.decorators):
        return True
    forwarding = forwarding_names(project)  # (`self._partitioner.partition(...)`)
    return bool(forwarding) and any(
        isinstance(c.node.func, ast.Attribute) and c.node.func.attr in forwarding
        for c in facts.calls if c.api is None)


def _wrapper_like(last: str, names: frozenset[str]) -> bool:
    return jit_name(last) or last in names


@project_cached
def wrapper_names(project: ProjectIndex) -> frozenset[str]:
    """The names of the project's functions that return ``jax.jit`` of their first parameter,
    or compile it forwarding their own donation keyword (``partitioner.partition(fn, ...,
    donate_argnums=...)``)."""
    out = set()
    for summary in project.summaries.values():
        for qual, sym in summary.symbols.items():
            kind = sym.flow.get("fn", {}).get("") if sym.flow else None
            if kind is not None and kind[0] == "jit" or sym.flow and "jfwd" in sym.flow:
                out.add(qual.rsplit(".", 1)[-1])
    return frozenset(out)


@project_cached
def forwarding_names(project: ProjectIndex) -> dict[str, frozenset[int]]:
    """Method names every project method of that name is a donation-forwarding jit wrapper
    of (abstract stubs aside), with the positions its callers pass the donation at:
    ``x.partition(fn, donate_argnums=...)`` on an object of a class shardlint cannot name is
    one of them, whichever it is."""
    forwards: dict[str, set[int]] = {}
    other: set[str] = set()
    for summary in project.summaries.values():
        symbols = summary.symbols
        for qual, sym in symbols.items():
            owner = symbols.get(qual.rpartition(".")[0]) if "." in qual else None
            if sym.kind != "function" or owner is None or owner.kind != "class":
                continue  # (methods only: a function nested in a test is no partitioner's)
            flow = sym.flow or {}
            last = qual.rsplit(".", 1)[-1]
            if "jfwd" in flow:
                params, offset = flow.get("params", []), flow.get("method", 0)
                forwards.setdefault(last, set()).update(
                    params.index(p) - offset for p in flow["jfwd"]
                    if p in params and params.index(p) >= offset)
            elif not flow.get("stub"):
                other.add(last)
    return {name: frozenset(at) for name, at in forwards.items() if name not in other}


def _is_wrapper(facts: FileFacts, project: ProjectIndex, func: ast.expr, scope: Scope) -> bool:
    parts = dotted(func)
    if parts is None or facts.resolve(func) is not None:
        return False
    found = scope.lookup(parts[0])
    if found is not None and found[0].kind != "module":
        # a local value; a method of it every project method of that name is a donation-
        # forwarding wrapper (`self._partitioner.partition(step, donate_argnums=...)`)
        return len(parts) > 1 and parts[-1] in forwarding_names(project)
    ref = reference(facts, func, scope)
    target = project.flows.function(ref, facts.module) if ref is not None else None
    if target is None:
        return jit_name(parts[-1])
    # Defined in the project: a wrapper when it returns `jax.jit` of its first parameter.
    _, flow = target
    if "jfwd" in flow:
        return True
    kind = flow.get("fn", {}).get("")
    params = flow.get("params", [])
    first = flow.get("method", 0)
    return kind is not None and kind[0] == "jit" and kind[1][0] == "param" \
        and len(params) > first and kind[1][1] == params[first]
