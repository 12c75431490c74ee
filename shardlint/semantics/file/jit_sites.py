"""What each jit site of a file says: its keywords, donated and static positions, the calls of
the callable it makes, and the module-level names it binds to a compiled callable.

* :func:`jit_keywords` / :func:`resolve_positions`: the ``donate_argnums``/``donate_argnames``
  (and ``static_*``) of a jit site, resolved to positions of the compiled function.
* :func:`donors`: every callable of a file known to donate (a decorated function, a name or
  ``self.attr`` bound to ``jax.jit(f, donate_argnums=...)``, a direct ``jax.jit(f, ...)(x)``);
  :func:`exported_donations` / :func:`exported_jitted`: what the module's summary records of them.
* :func:`calls_of`: the calls of a jit site's callable in the file; :func:`passed`: what a call
  passes at the donated positions.

All of it is read from one file's facts; what crosses files (calls of an imported donating
callable, what a compiled function hands back) lives in ``buffers/donation.py``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from shardlint.semantics.catalog.api import Role
from shardlint.semantics.catalog.names import call_arg
from shardlint.semantics.file.bindings import follow
from shardlint.semantics.file.dataflow import positional_params
from shardlint.semantics.file.execution import compiled_function
from shardlint.semantics.file.facts import CallSite, FileFacts, JitSite, Scope
from shardlint.semantics.file.wrappers import named_jit_sites

NNX_JIT = "flax.nnx.jit"
LINEN_JIT = "flax.linen.jit"
PMAP = "jax.pmap"
DONATE = ("donate_argnums", "donate_argnames")


# ---- jit sites -------------------------------------------------------------------------------------
# Keywords that decide where a compiled function's outputs are placed.
PLACEMENT_KEYWORDS = ("out_shardings", "out_axis_resources", "device", "backend")


def unplaced_jit_sites(facts: FileFacts):
    """Jit sites (not Linen's lifted jit, not under ``jax.eval_shape``) whose keywords are all
    visible and none of which places the outputs: where SHL302 and SHL303 look."""
    for site in facts.jit_sites:
        if site.api_name in (LINEN_JIT, PMAP):
            continue  # (pmap places its outputs on every device by design)
        kws = jit_keywords(facts, site)
        if kws is None or any(k in kws for k in PLACEMENT_KEYWORDS):
            continue
        call = facts.call_at(site.node) if isinstance(site.node, ast.Call) else None
        if call is not None and call.abstract:
            continue  # jax.eval_shape(jax.jit(...)): shapes only
        yield site


def jit_keywords(facts: FileFacts, site: JitSite) -> dict[str, ast.expr] | None:
    """All keywords of a jit site (the partial's and the application's); None with ``**kw``."""
    calls: list[ast.Call] = []
    node = site.node
    if isinstance(node, ast.Call):
        calls.append(node)
        if site.form == "partial" and isinstance(node.func, ast.Call):
            calls.append(node.func)
    out: dict[str, ast.expr] = {}
    for c in calls:
        for kw in c.keywords:
            if kw.arg is None:
                return None
            out[kw.arg] = kw.value
    if site.keywords.keys() - out.keys():
        # (a wrapper's call passing its donation by position: compiled.wrapper_sites)
        if "**" in site.keywords:
            return None
        for k, v in site.keywords.items():
            out.setdefault(k, v)
    return out


def keyword_call(site: JitSite) -> ast.Call | None:
    """The call whose keywords configure the jit (where a keyword is added)."""
    node = site.node
    if not isinstance(node, ast.Call):
        return None
    if site.form == "partial" and isinstance(node.func, ast.Call):
        return node.func
    return node


@dataclass
class Signature:
    """The compiled function's positional parameters, as its callers count them."""

    params: list[str]  # positional parameter names, `self` included for methods
    kwonly: list[str]
    offset: int  # 1 when callers pass `self` implicitly (`self.step(x)` of a jitted method)


def signature(facts: FileFacts, site: JitSite, function: Scope | None) -> Signature | None:
    if function is None:
        return None
    fn = function.node
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    params = positional_params(fn)
    kwonly = [a.arg for a in fn.args.kwonlyargs]
    bound_method = site.form == "call" and isinstance(site.target, ast.Attribute)
    if bound_method and params:
        params = params[1:]  # `jax.jit(self.step)`: self is already bound
    offset = 1 if site.form != "call" and function.enclosing_class is not None and params \
        and not _is_static_method(fn) else 0
    return Signature(params, kwonly, offset)


def _is_static_method(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)


def _ints(value) -> set[int] | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return {value}
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool)
                                                for v in value):
        return set(value)
    return None


def _strs(value) -> set[str] | None:
    if isinstance(value, str):
        return {value}
    if isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
        return set(value)
    return None


@dataclass
class Positions:
    """Resolved ``*_argnums`` / ``*_argnames`` of a jit site."""

    positions: set[int] = field(default_factory=set)  # indices into Signature.params
    names: set[str] = field(default_factory=set)  # parameter names (keyword-only included)


def resolve_positions(facts: FileFacts, site: JitSite, sig: Signature | None,
                      kind: str) -> Positions | None:
    """``kind`` "donate" or "static": the parameters a site names, None when not literal."""
    kws = jit_keywords(facts, site)
    if kws is None:
        return None
    out = Positions()
    nums = kws.get(f"{kind}_argnums")
    if kind == "static" and site.api_name == PMAP:
        nums = kws.get("static_broadcasted_argnums")
    if nums is not None:
        value = _ints(facts.literal(nums, site.scope))
        start = _range_start(facts, nums, site.scope) if value is None and kind == "static" \
            and sig is not None else None
        if start is not None:  # `tuple(range(5, 5 + len(names)))`: from 5 on, all static
            value = list(range(start, max(start, len(sig.params))))  # type: ignore[union-attr]
        if value is None:
            return None
        out.positions |= {v for v in value if v >= 0} | \
            ({v + len(sig.params) for v in value if v < 0} if sig else set())
        if any(v < 0 for v in value) and sig is None:
            return None
        if sig is not None:
            out.names |= {sig.params[v] for v in out.positions if v < len(sig.params)}
    names = kws.get(f"{kind}_argnames")
    if names is not None:
        value_s = _strs(facts.literal(names, site.scope))
        if value_s is None:
            return None
        out.names |= value_s
        if sig is not None:
            out.positions |= {i for i, p in enumerate(sig.params) if p in value_s}
    return out


def _range_start(facts: FileFacts, node: ast.expr, scope) -> int | None:
    """``k`` of positions computed as ``range(k, ...)`` (in ``tuple(...)`` or ``list(...)``):
    every position they name is ``k`` or above, however many there are."""
    for _ in range(2):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("tuple", "list") and len(node.args) == 1:
            node = node.args[0]
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "range" and node.args and not node.keywords):
        return None
    if len(node.args) == 1:
        return 0
    start = facts.literal(node.args[0], scope)
    return start if isinstance(start, int) and not isinstance(start, bool) and start >= 0 \
        else None


# ---- donors ----------------------------------------------------------------------------------------
@dataclass
class Donor:
    """A callable of this file that donates arguments."""

    site: JitSite
    positions: set[int]  # indices of the call's own positional arguments
    names: set[str]  # keyword names of donated parameters
    how: str  # the donation keywords as written: "donate_argnums=(0,)"


def donors(facts: FileFacts) -> list[Donor]:
    """Callables of this file that donate."""
    out: list[Donor] = []
    for site in [*facts.jit_sites, *named_jit_sites(facts)]:
        if site.api_name in (NNX_JIT, LINEN_JIT):
            continue  # nnx.jit writes the new state back into the objects passed
        kws = jit_keywords(facts, site)
        if kws is None or not any(k in kws for k in DONATE):
            continue
        fn = compiled_function(facts, site)
        sig = signature(facts, site, fn)
        pos = resolve_positions(facts, site, sig, "donate")
        if pos is None or (not pos.positions and not pos.names):
            continue
        if kws.get("donate_argnames") is not None and sig is None:
            continue  # names without the signature: positions unknown
        offset = sig.offset if sig else 0
        positions = {p - offset for p in pos.positions if p - offset >= 0}
        how = ", ".join(f"{k}={ast.unparse(kws[k])}" for k in DONATE if k in kws)
        out.append(Donor(site, positions, set(pos.names), how))
    return out


def exported_donations(facts: FileFacts) -> dict[str, list]:
    """Module-level callables that donate, for the project index: ``{"train_step":
    [positions, keyword names, "donate_argnums=0"]}`` (positions of the call's own arguments)."""
    out: dict[str, list] = {}
    for d in donors(facts):
        site = d.site
        if site.form in ("call", "partial") and site.target is not None:
            name = site.bound_name if site.scope.kind == "module" else None
        else:
            fn = site.function
            name = fn.name if fn is not None and fn.parent is facts.module_scope else None
        if name is not None and len(facts.module_scope.bindings.get(name, [])) == 1:
            out[name] = [sorted(d.positions), sorted(d.names), d.how]
    return out


def calls_of(facts: FileFacts, site: JitSite) -> list[CallSite]:
    """Calls of the callable a jit site produces, in this file: by the name or ``self``
    attribute it is bound to, and through a local name bound to what a function of this file
    returns it from (``step = make_train_step(cfg)``, ``compiled = compile_step(s, b)``) or to
    the attribute of an instance of its class (``step = Trainer().step``)."""
    out: list[CallSite] = []
    name = site.bound_name
    owner = _binding_owner(site)
    attr = _self_attr_binding(facts, site)
    maker = _returned_from(facts, site)
    calls = facts.calls
    # (the calls any branch below can take, from the file's calls grouped by callee once per
    # build: a keystroke asks for each jit site of a 3,000-call file)
    groups = _call_groups(facts)
    wanted = set(groups.by_node.get(id(site.node), ()))
    if name is not None:
        wanted.update(groups.by_name.get(name, ()))
    if maker is not None or attr is not None:
        wanted.update(groups.named)
        wanted.update(groups.called)
        if attr is not None:
            wanted.update(groups.by_attr.get(attr[1], ()))
    if attr is not None:
        wanted.update(groups.by_self.get(attr[1], ()))
    if site.form != "call" and site.function is not None:
        wanted.update(groups.by_self.get(site.function.name, ()))
    for c in (calls[i] for i in sorted(wanted)):
        func = c.node.func
        if func is site.node:  # `jax.jit(f, ...)(x)`
            out.append(c)
        elif name is not None and isinstance(func, ast.Name) and func.id == name \
                and (found := c.scope.lookup(name)) is not None and found[0] is owner:
            out.append(c)
        elif (maker is not None or attr is not None) and _made_here(c, maker, attr):
            out.append(c)
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id == "self":
            cls = _class_of(c.scope)
            if cls is None:
                continue
            bound_here = attr is not None and attr == (cls, func.attr)  # self.step = jax.jit(...)
            decorated_method = site.form != "call" and site.function is not None \
                and site.function.parent is cls and site.function.name == func.attr
            if bound_here or decorated_method:
                out.append(c)
    return out


@dataclass
class _CallGroups:
    """A file's calls (their indexes in ``facts.calls``) by what they call."""

    by_node: dict[int, list[int]]  # id of the callee expression
    by_name: dict[str, list[int]]  # a plain name called
    by_self: dict[str, list[int]]  # ``self.<attr>(...)``
    by_attr: dict[str, list[int]]  # ``<anything>.<attr>(...)``
    named: list[int]  # every call of a plain name
    called: list[int]  # every call of a call's result (``make()(x)``)


def _call_groups(facts: FileFacts) -> _CallGroups:
    found = facts.derived.get("call_groups")
    if found is None:
        found = facts.derived["call_groups"] = _CallGroups({}, {}, {}, {}, [], [])
        for i, c in enumerate(facts.calls):
            func = c.node.func
            found.by_node.setdefault(id(func), []).append(i)
            tp = type(func)
            if tp is ast.Name:
                found.by_name.setdefault(func.id, []).append(i)  # type: ignore[attr-defined]
                found.named.append(i)
            elif tp is ast.Attribute:
                found.by_attr.setdefault(func.attr, []).append(i)  # type: ignore[attr-defined]
                if type(func.value) is ast.Name and func.value.id == "self":  # type: ignore[attr-defined]
                    found.by_self.setdefault(func.attr, []).append(i)  # type: ignore[attr-defined]
            elif tp is ast.Call:
                found.called.append(i)
    return found  # type: ignore[return-value]


def references_of(facts: FileFacts, site: JitSite) -> list[tuple[ast.expr, Scope]]:
    """Loads of the callable a jit site produces that are not calls of it, with their scope:
    the callable handed on (``functools.partial(self.step, ...)``, ``lax.while_loop(c, step,
    s)``, ``return step``). Module-level code and each function body are read on their own."""
    name = site.bound_name
    owner = _binding_owner(site)
    attr = _self_attr_binding(facts, site)
    method = site.function.name if site.form != "call" and site.function is not None \
        and site.function.parent is not None and site.function.parent.kind == "class" else None
    cls = site.function.parent if method is not None else attr[0] if attr is not None else None
    attr_name = method if method is not None else attr[1] if attr is not None else None
    if name is None and attr_name is None:
        return []
    out: list[tuple[ast.expr, Scope]] = []
    called: set[int] | None = None
    dot = f"{name}."  # (a name read only as a chain's head, `step.lower`: visitor._chain)
    for scope in {id(x): x for x in [facts.module_scope, *facts.scopes.values()]}.values():
        by_name = name is not None and (name in scope.references or any(
            r.startswith(dot) for r in scope.references))
        by_attr = attr_name is not None and scope.kind == "function" and _class_of(scope) is cls
        if not by_name and not by_attr:
            continue
        if called is None:
            called = {id(c.node.func) for c in facts.calls}
        for n in _body_nodes(scope.node):
            if id(n) in called:
                continue
            if by_name and isinstance(n, ast.Name) and n.id == name \
                    and isinstance(n.ctx, ast.Load):
                found = scope.lookup(name)
                if found is not None and found[0] is owner:
                    out.append((n, scope))
            elif by_attr and isinstance(n, ast.Attribute) and n.attr == attr_name \
                    and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name) \
                    and n.value.id == "self":
                out.append((n, scope))
    return out


def _body_nodes(node: ast.AST):
    """The nodes of a scope's body, lambdas included (they belong to it), not nested functions
    or classes (nor the decorators of a function: they run in the enclosing scope)."""
    todo: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if name != "decorator_list":
            todo.extend([value] if isinstance(value, ast.AST) else
                        [v for v in value if isinstance(v, ast.AST)] if isinstance(value, list)
                        else [])
    while todo:
        n = todo.pop()
        yield n
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            todo.extend(n.decorator_list)  # (run here; the body is a scope of its own)
            continue
        todo.extend(ast.iter_child_nodes(n))


def _returned_from(facts: FileFacts, site: JitSite) -> Scope | None:
    """The function of this file whose result is the jit site's callable: ``return
    jax.jit(step)``, ``return jax.jit(step).lower(*a).compile()``, or the name it is bound to
    returned (a decorated inner function, ``step = jax.jit(f); return step``)."""
    scope = site.scope if site.form == "call" else \
        site.function.parent if site.function is not None else None
    if scope is None or scope.kind != "function":
        return None
    for r in scope.returns:
        node = r
        while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("compile", "lower"):
            node = node.func.value
        if node is site.node or isinstance(node, ast.Name) and node.id == site.bound_name:
            return scope
    return None


def wrapped_callable(facts: FileFacts, node: ast.expr | None, scope: Scope,
                     depth: int = 0) -> ast.Name | ast.Attribute | None:
    """The name of the callable an expression runs: a name or attribute as it is, or what a
    ``functools.partial``, jit or pmap wraps (``jax.jit(functools.partial(run, m=m))``: ``run``),
    written in place or a local name bound to it once. None for any other value."""
    if isinstance(node, ast.Name) and depth < 4:
        value = bound_once(scope, node.id)
        return wrapped_callable(facts, value, scope, depth + 1) \
            if isinstance(value, ast.Call) else node
    if isinstance(node, ast.Attribute):
        return node
    if isinstance(node, ast.Call) and node.args and depth < 4:
        known = facts.resolve(node.func)
        if known is not None and known.role in (Role.PARTIAL, Role.JIT, Role.PMAP):
            return wrapped_callable(facts, node.args[0], scope, depth + 1)
    return None


def bound_once(scope: Scope, name: str) -> ast.expr | None:
    """The value a name of a function body is bound to, when bound exactly once there."""
    values = scope.assigned.get(name) if scope.kind == "function" else None
    if values is None or len(values) != 1 or values[0].index:
        return None
    return values[0].value


def _made_here(call: CallSite, maker: Scope | None, attr: tuple[Scope, str] | None) -> bool:
    """``call`` runs what ``maker`` returns, or the ``attr`` of an instance of its class,
    through a name of the caller's body bound once."""
    func = call.node.func
    value: ast.expr | None = func
    if isinstance(func, ast.Name):
        value = bound_once(call.scope, func.id)
    if maker is not None and isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
            and value.func.id == maker.name:
        found = call.scope.lookup(maker.name)
        return found is not None and found[0] is maker.parent
    if attr is None or not isinstance(value, ast.Attribute) or value.attr != attr[1]:
        return False
    made = value.value
    if isinstance(made, ast.Name):
        made = bound_once(call.scope, made.id)
    cls = attr[0]
    return isinstance(made, ast.Call) and isinstance(made.func, ast.Name) \
        and made.func.id == cls.name and (found := call.scope.lookup(cls.name)) is not None \
        and found[0] is cls.parent


def remote_names(facts: FileFacts, site: JitSite) -> list[str]:
    """How another module calls the compiled callable, in the spelling of the module summaries'
    ``kept`` calls: ``module:step`` (bound at module level, or a decorated module-level
    function), ``module:make_step()`` (what a module-level function returns: ``step =
    make_step(cfg)``), ``module:Trainer().step`` (the attribute of an instance: ``self.step =
    jax.jit(...)`` in a method, or a decorated method)."""
    out: list[str] = []
    owner = _binding_owner(site)
    if owner is not None and owner.kind == "module" and site.bound_name:
        out.append(f"{facts.module}:{site.bound_name}")
    maker = _returned_from(facts, site)
    if maker is not None and maker.parent is not None and maker.parent.kind == "module":
        out.append(f"{facts.module}:{maker.qualname}()")
    attr = _self_attr_binding(facts, site)
    if attr is None and site.form != "call" and site.function is not None \
            and site.function.parent is not None and site.function.parent.kind == "class":
        attr = (site.function.parent, site.function.name)
    if attr is not None and attr[0].parent is not None and attr[0].parent.kind == "module":
        out.append(f"{facts.module}:{attr[0].qualname}().{attr[1]}")
    return out


def _binding_owner(site: JitSite) -> Scope | None:
    if site.form == "call" or (site.form == "partial" and site.target is not None):
        return site.scope
    fn = site.function
    return fn.parent if fn is not None else None


def _self_attr_binding(facts: FileFacts, site: JitSite) -> tuple[Scope, str] | None:
    """``self.step = jax.jit(self._step, ...)`` in a method: (class, "step")."""
    if not isinstance(site.node, ast.Call):
        return None
    call = facts.call_at(site.node)
    stmt = call.stmt if call is not None else None
    if isinstance(stmt, ast.Assign) and stmt.value is site.node and len(stmt.targets) == 1:
        t = stmt.targets[0]
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
            cls = _class_of(site.scope)
            if cls is not None:
                return cls, t.attr
    return None


def _class_of(scope: Scope) -> Scope | None:
    s: Scope | None = scope
    while s is not None and s.kind != "module":
        if s.kind == "class":
            return s
        s = s.parent
    return None


def passed(call: ast.Call, positions: set[int], names: set[str]) -> list[tuple[int | str, ast.expr]]:
    """The argument expressions a call passes at donated positions or keywords."""
    out: list[tuple[int | str, ast.expr]] = []
    for i, a in enumerate(call.args):
        if isinstance(a, ast.Starred):
            break
        if i in positions:
            out.append((i, a))
    for kw in call.keywords:
        if kw.arg is not None and kw.arg in names:
            out.append((kw.arg, kw.value))
    return out


def same_sharding(facts: FileFacts, site: JitSite) -> list[tuple[int, str]]:
    """Arguments that leave the jit at their own position with the sharding they came in with:
    the same expression at position ``i`` of ``in_shardings`` and of ``out_shardings``
    (``in_shardings=(state_sh, batch_sh), out_shardings=(state_sh, None)``). A sharding that
    says nothing (``None``, a replicated ``P()``, a literal) is no evidence, and neither is one
    at another position (``out_shardings=params_sh`` of a gradient: the gradients have the
    parameters' sharding, the parameters are not updated)."""
    kws = jit_keywords(facts, site)
    if kws is None:
        return []
    ins = _sharding_items(facts, kws.get("in_shardings"), site.scope)
    outs = _sharding_items(facts, kws.get("out_shardings"), site.scope)
    if not ins or not outs:
        return []
    found = []
    for i, (a, b) in enumerate(zip(ins, outs)):
        if a is not None and b is not None and ast.dump(a) == ast.dump(b) \
                and _says_something(facts, a, site.scope):
            found.append((i, ast.unparse(a)))
    return found


def leaves_replicated(facts: FileFacts, site: JitSite) -> set[int]:
    """Positions of arguments that come in sharded (``in_shardings``) while every output is
    declared replicated (``out_shardings=replicated``, ``(P(), NamedSharding(mesh, P()))``): such
    an argument is not returned in its layout, so its buffers cannot be reused (the eval twin of
    a train step: the same function, ``is_training=False``, returning only metrics)."""
    kws = jit_keywords(facts, site)
    if kws is None or kws.get("out_shardings") is None:
        return set()
    out = kws["out_shardings"]
    outs = _sharding_items(facts, out, site.scope)
    if outs is None:
        outs = [out]
    if not outs or not all(o is not None and _replicated(facts, o, site.scope) for o in outs):
        return set()
    ins = _sharding_items(facts, kws.get("in_shardings"), site.scope) or []
    return {i for i, e in enumerate(ins) if e is not None and _says_something(facts, e, site.scope)}


def _replicated(facts: FileFacts, node: ast.expr, scope: Scope) -> bool:
    """``P()``, ``PartitionSpec()``, ``NamedSharding(mesh, P())`` (through a name)."""
    if isinstance(node, ast.Name):
        value = facts.value_of(node.id, scope)
        return value is not None and _replicated(facts, value, scope)
    if not isinstance(node, ast.Call):
        return False
    known = facts.resolve(node.func) if isinstance(node.func, (ast.Name, ast.Attribute)) else None
    if known is None:
        return False
    if known.role == Role.PARTITION_SPEC:
        return not node.args and not node.keywords
    if known.role == Role.NAMED_SHARDING:
        spec = call_arg(node, 1, "spec")
        return spec is not None and _replicated(facts, spec, scope)
    return False


def _sharding_items(facts: FileFacts, node: ast.expr | None, scope: Scope,
                    depth: int = 0) -> list[ast.expr | None] | None:
    """The items of a tuple of shardings (through names and ``+``); None when not a tuple."""
    if node is None or depth > 4:
        return None
    if isinstance(node, ast.Name):
        value = facts.value_of(node.id, scope)
        return _sharding_items(facts, value, scope, depth + 1) if value is not None else None
    if isinstance(node, (ast.Tuple, ast.List)):
        if any(isinstance(e, ast.Starred) for e in node.elts):
            return None
        return list(node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = _sharding_items(facts, node.left, scope, depth + 1)
        right = _sharding_items(facts, node.right, scope, depth + 1)
        return left + right if left is not None and right is not None else None
    return None


def _says_something(facts: FileFacts, node: ast.expr, scope: Scope) -> bool:
    """Not ``None``, not a literal, not replicated (``P()``, ``NamedSharding(mesh, P())``)."""
    if isinstance(node, ast.Name):
        value = facts.value_of(node.id, scope)
        if isinstance(value, ast.Call):
            return _says_something(facts, value, scope)
        return True
    if isinstance(node, ast.Constant):
        return False
    if isinstance(node, ast.Call):
        if not node.args and not node.keywords:
            return False  # P(), PartitionSpec()
        known = facts.resolve(node.func) if isinstance(node.func, (ast.Name, ast.Attribute)) \
            else None
        if known is not None and known.role == Role.NAMED_SHARDING:
            spec = call_arg(node, 1, "spec")
            return spec is None or _says_something(facts, spec, scope)
    return isinstance(node, (ast.Attribute, ast.Subscript, ast.Call))


def exported_jitted(facts: FileFacts) -> list[str]:
    """Module-level names bound (once) to a compiled callable, for the project index."""
    out: set[str] = set()
    for site in facts.jit_sites:
        if site.scope is not facts.module_scope or site.api_name == "jax.pmap":
            continue
        decorated = site.form in ("decorator", "factory") or \
            (site.form == "partial" and site.target is None)
        if decorated:
            name = site.function.name if site.function is not None \
                and site.function.parent is facts.module_scope else None
        else:
            name = site.bound_name
        if name is not None and len(facts.module_scope.bindings.get(name, [])) == 1:
            out.add(name)
    return sorted(out)


# ---- jits that place their values on a mesh --------------------------------------------------------
# Keywords that shard a compiled function's inputs or outputs (pjit's older spellings too).
SHARDING_KEYWORDS = ("in_shardings", "out_shardings", "in_axis_resources", "out_axis_resources")
PJIT = "jax.experimental.pjit.pjit"


def is_sharded(facts: FileFacts, site: JitSite) -> bool:
    """Whether a jit is given ``in_shardings``/``out_shardings`` (or pjit's
    ``*_axis_resources``)."""
    return any(k in (jit_keywords(facts, site) or site.keywords) for k in SHARDING_KEYWORDS)


def sharded_jit_calls(facts: FileFacts) -> list[tuple[JitSite, CallSite]]:
    """The calls, in this file, of a jit given ``in_shardings``/``out_shardings`` (or pjit's
    ``*_axis_resources``): what they are handed is traced for arrays placed on a mesh."""
    found = facts.derived.get("sharded_jit_calls")
    if found is None:
        found = facts.derived["sharded_jit_calls"] = [
            (site, c) for site in facts.jit_sites if is_sharded(facts, site)
            for c in calls_of(facts, site)]
    return found  # type: ignore[return-value]


def sharded_jit_params(facts: FileFacts) -> list[list]:
    """``[function key, parameter, line, col, end_line, end_col]`` (the jit's place) for each
    parameter a function hands, as it came, to a call of a jit with shardings
    (``pjit(init_fn, out_shardings=s)(prng_key)``): what the function's callers pass there is
    traced for a sharded program (the summary keeps it; ``FlowIndex.sharded_jit_params``
    follows it to the callers')."""
    out: list[list] = []
    for site, c in sharded_jit_calls(facts):
        params = c.scope.params if c.scope.kind == "function" else ()
        for a in [*c.node.args, *(k.value for k in c.node.keywords)]:
            if isinstance(a, ast.Name) and a.id in params:
                n = site.node
                entry = [f"{facts.module}:{c.scope.qualname}", a.id, n.lineno, n.col_offset,
                         n.end_lineno or n.lineno, n.end_col_offset or 0]
                if entry not in out:
                    out.append(entry)
    return out


def specs_may_be_bare(facts: FileFacts, site: JitSite) -> bool:
    """Whether a ``pjit`` may be given bare ``PartitionSpec``s (which it resolves against the
    legacy mesh of ``with mesh:``): a sharding keyword whose value is not ``None`` or a
    ``NamedSharding`` (or a tuple, list or dict of them), as far as this file shows."""
    kws = jit_keywords(facts, site) or site.keywords
    return any(_may_be_bare(facts, v, site.scope, 0)
               for k, v in kws.items() if k in SHARDING_KEYWORDS)


def _may_be_bare(facts: FileFacts, node: ast.expr | None, scope: Scope, depth: int) -> bool:
    if depth > 8:
        return True
    if isinstance(node, ast.Name):
        value, vscope = follow(facts, node, scope)
        return value is None or _may_be_bare(facts, value, vscope, depth + 1)
    if isinstance(node, ast.Constant):
        return node.value is not None
    if isinstance(node, (ast.Tuple, ast.List)):
        return any(_may_be_bare(facts, e.value if isinstance(e, ast.Starred) else e, scope,
                                depth + 1) for e in node.elts)
    if isinstance(node, ast.Dict):
        return any(_may_be_bare(facts, v, scope, depth + 1) for v in node.values)
    if isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute)):
        known = facts.resolve(node.func)
        return known is None or known.role is not Role.NAMED_SHARDING
    return True
