"""How code runs: eagerly (op by op, on concrete arrays) or traced (under jit, eval_shape, a transform).

A call runs *traced* when it sits in a function compiled by a jit site, in a lambda or function
handed to a JAX/Flax transform (``jax.jit(lambda: ...)``, ``jax.eval_shape(f, ...)``,
``jax.lax.scan(body, ...)``), or inside ``jax.eval_shape(...)``'s arguments. It runs *eagerly
for certain* when it is module-level code or in a function that module-level code of the same
file reaches through direct calls (``if __name__ == "__main__": main()``, ``app.run(main)``)
without passing through anything traced. Everything else is unknown: a function nobody in the
file calls may be jitted by a caller elsewhere, so rules stay silent there.
"""

from __future__ import annotations

import ast
from functools import cached_property

from shardlint.semantics.catalog.api import PACKAGES
from shardlint.semantics.file.facts import CallSite, FileFacts, JitSite, Scope
from shardlint.semantics.file.reuse import each_call, each_statement

# A function handed to these runs eagerly, as if called.
_RUNNERS = ("absl.app.run",)
# Parts of jax that decorate or wrap code without tracing it (names for profiles, flags).
_NOT_TRANSFORMS = ("jax.named_scope", "jax.profiler.annotate_function", "jax.profiler.trace",
                   "jax.profiler.TraceAnnotation", "jax.profiler.StepTraceAnnotation",
                   "jax.default_device", "jax.default_matmul_precision", "jax.disable_jit",
                   "jax.ensure_compile_time_eval", "jax.debug_nans", "jax.debug_infs",
                   "jax.log_compiles", "jax.transfer_guard", "jax.checking_leaks")
# Parts of jax that take a function and call it eagerly, not traced.
EAGER_HIGHER_ORDER = ("jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map",
                       "jax.tree.map_with_path", "jax.tree_util.tree_map_with_path")


# The transforms that trace the function handed to them (the last part of the name, of jax or
# flax): a jitted function run inside one is traced there, its own donation ignored. Not
# `nnx.cached_partial`, `functools.partial` and the like, which call it as it is.
_TRACING = frozenset({"jit", "pjit", "pmap", "vmap", "xmap", "shard_map", "grad",
                      "value_and_grad", "jacfwd", "jacrev", "hessian", "checkpoint", "remat",
                      "scan", "while_loop", "fori_loop", "cond", "switch", "map",
                      "custom_vjp", "custom_jvp", "eval_shape", "filter_jit"})


class Execution:
    """Answers "traced or eager?" for one file; each part is computed on first use."""

    def __init__(self, facts: FileFacts):
        self.facts = facts

    @cached_property
    def _traced(self) -> set[Scope]:
        return self._traced_functions()

    @cached_property
    def _eager(self) -> set[Scope]:
        return self._eager_scopes()

    @cached_property
    def _traced_lambdas(self) -> list[tuple[int, int, int, int]]:
        """Spans of the lambdas handed to a JAX/Flax transform (``jax.jit(lambda: ...)``)."""
        return [_span(lam) for _, lambdas in each_call(self.facts, "traced_lambdas", self._lambdas,
                                                           local=True)
                for lam in lambdas]

    def _lambdas(self, c: CallSite) -> tuple[ast.Lambda, ...]:
        n = c.node
        lam = ast.Lambda
        for a in n.args:  # (loops, not generators: this runs for every call of a file)
            if type(a) is lam:
                break
        else:
            for k in n.keywords:
                if type(k.value) is lam:
                    break
            else:
                return ()
        if not self._is_transform(n):
            return ()
        return tuple(a for a in [*n.args, *(k.value for k in n.keywords)]
                     if isinstance(a, ast.Lambda))

    # ---- traced ------------------------------------------------------------------------------
    def _is_transform(self, call: ast.Call) -> bool:
        q = self.facts.qualify(call.func) if isinstance(call.func, (ast.Name, ast.Attribute)) \
            else None
        if q is None:
            # `partial(jax.jit, ...)(f)` and `jax.jit(...)(f)` factories.
            if isinstance(call.func, ast.Call):
                return self._is_transform(call.func)
            return False
        if q in EAGER_HIGHER_ORDER or q in _RUNNERS or q in _NOT_TRANSFORMS:
            return False
        if q == "functools.partial" and call.args:
            inner = call.args[0]
            return isinstance(inner, (ast.Name, ast.Attribute)) and self._qualifies_to_package(inner)
        return q.split(".", 1)[0] in PACKAGES

    def _qualifies_to_package(self, node: ast.expr) -> bool:
        q = self.facts.qualify(node)
        return q is not None and q.split(".", 1)[0] in PACKAGES and q not in EAGER_HIGHER_ORDER

    @cached_property
    def _calls(self) -> dict[Scope, list[CallSite]]:
        """The calls of each scope."""
        out: dict[Scope, list[CallSite]] = {}
        for part in each_statement(self.facts, "calls_by_scope", lambda log: _by_scope(log.calls),
                                   local=True):
            for scope, calls in part.items():
                out.setdefault(scope, []).extend(calls)
        return out

    def _traced_functions(self) -> set[Scope]:
        f = self.facts
        traced: set[Scope] = {site.function for site in f.jit_sites if site.function is not None}
        functions = [s for s in f.scopes.values() if s.kind == "function"]
        # A function of this file handed to a transform: `jax.jit(step)`, `jax.grad(self.loss)`.
        handed: dict[str, list[tuple[CallSite, ast.expr]]] = {}
        for part in each_statement(f, "handed_to_transforms",
                                   lambda log: self._handed_to_transforms(log.calls), local=True):
            for name, args in part.items():
                handed.setdefault(name, []).extend(args)
        for s in functions:
            for c, a in handed.get(s.name, ()):
                if self.function_named(a, c.scope) is s:
                    traced.add(s)
                    break
        final = set(functions)  # (a function defined again: the last definition counts)
        for decorated in each_statement(f, "transform_decorated", lambda log: [
                s for _, s in log.scopes if s.kind == "function" and self._transform_decorated(s)],
                                        local=True):
            traced.update(s for s in decorated if s in final)
        # Nested functions of traced functions are traced too.
        changed = True
        while changed:
            changed = False
            for s in f.scopes.values():
                if s.kind == "function" and s not in traced and s.parent in traced:
                    traced.add(s)
                    changed = True
        return traced

    def _handed_to_transforms(
            self, calls: list[CallSite]) -> dict[str, list[tuple[CallSite, ast.expr]]]:
        """The names (``f``, ``self.f``) handed to a JAX/Flax transform by ``calls``, with the
        call and the argument."""
        out: dict[str, list[tuple[CallSite, ast.expr]]] = {}
        for c in calls:
            n = c.node
            transform = None
            for a in [*n.args, *(k.value for k in n.keywords)] if n.keywords else n.args:
                tp = type(a)
                if tp is ast.Name:
                    name = a.id  # type: ignore[attr-defined]
                elif tp is ast.Attribute and type(a.value) is ast.Name:  # type: ignore[attr-defined]
                    name = a.attr  # type: ignore[attr-defined]
                else:
                    continue
                if transform is None:
                    transform = self._is_transform(n)
                if transform:
                    out.setdefault(name, []).append((c, a))
        return out

    def _transform_decorated(self, s: Scope) -> bool:
        return any(self._is_transform(d) if isinstance(d, ast.Call) else
                   isinstance(d, (ast.Name, ast.Attribute)) and self._qualifies_to_package(d)
                   for d in s.decorators)

    def function_named(self, node: ast.expr | None, scope: Scope) -> Scope | None:
        return function_named(self.facts, node, scope)

    def handed_to_transform(self, node: ast.AST) -> bool:
        """``node`` is an argument of a JAX/Flax transform that traces it (`jax.pmap(step,
        ...)`, `jax.vmap(step)`, `lax.scan(step, ...)`): what it names runs traced inside it."""
        return id(node) in self._transform_arguments

    @cached_property
    def _transform_arguments(self) -> set[int]:
        out: set[int] = set()
        for c in self.facts.calls:
            n = c.node
            args = [*n.args, *(k.value for k in n.keywords)]
            if any(type(a) in (ast.Name, ast.Attribute) for a in args) and self._traces(n):
                out.update(id(a) for a in args)
        return out

    def _traces(self, call: ast.Call) -> bool:
        func = call.func
        if type(func) is ast.Call:  # (`jax.jit(...)(f)`, `partial(jax.jit, ...)(f)`)
            inner = func.args[0] if func.args and self.facts.qualify(func.func) == \
                "functools.partial" else func.func
            return type(inner) in (ast.Name, ast.Attribute) and self._tracing_name(inner)
        return type(func) in (ast.Name, ast.Attribute) and self._tracing_name(func)

    def _tracing_name(self, node: ast.expr) -> bool:
        q = self.facts.qualify(node)
        return q is not None and q.split(".", 1)[0] in PACKAGES \
            and q.rsplit(".", 1)[-1] in _TRACING

    def in_traced_lambda(self, node: ast.AST) -> bool:
        """Inside a lambda handed to a JAX/Flax transform."""
        if not self._traced_lambdas:
            return False
        line, col, end_line, end_col = _span(node)
        return any((l0, c0) <= (line, col) and (end_line, end_col) <= (l1, c1)
                   for l0, c0, l1, c1 in self._traced_lambdas)

    def is_traced(self, site: CallSite) -> bool:
        return site.abstract or self.scope_traced(site.scope) or self.in_traced_lambda(site.node)

    def scope_traced(self, scope: Scope) -> bool:
        return scope in self._traced

    # ---- eager -------------------------------------------------------------------------------
    def _eager_scopes(self) -> set[Scope]:
        f = self.facts
        calls = self._calls
        eager: set[Scope] = {f.module_scope}
        todo = [f.module_scope]
        while todo:
            for c in calls.get(todo.pop(), ()):
                if c.abstract or self.in_traced_lambda(c.node):
                    continue
                targets: list[Scope | None] = [self.function_named(c.node.func, c.scope)]
                q = f.qualify(c.node.func) if isinstance(c.node.func, (ast.Name, ast.Attribute)) \
                    else None
                if q in _RUNNERS and c.node.args:
                    targets.append(self.function_named(c.node.args[0], c.scope))
                for t in targets:
                    if t is not None and t not in eager and t not in self._traced \
                            and not t.decorators and t.enclosing_class is None:
                        eager.add(t)
                        todo.append(t)
        return eager

    def eager_calls(self) -> list[CallSite]:
        """The calls that certainly run eagerly (:meth:`runs_eagerly`), by scope."""
        eager = self._eager
        return [c for scope, calls in self._calls.items() if scope in eager for c in calls
                if self.runs_eagerly(c)]

    def runs_eagerly(self, site: CallSite) -> bool:
        """Certainly runs eagerly (see the module docstring); False when traced or unknown."""
        return site.scope in self._eager and not site.abstract \
            and not self.in_traced_lambda(site.node)


def _by_scope(calls: list[CallSite]) -> dict[Scope, list[CallSite]]:
    out: dict[Scope, list[CallSite]] = {}
    for c in calls:
        out.setdefault(c.scope, []).append(c)
    return out


def function_named(facts: FileFacts, node: ast.expr | None, scope: Scope) -> Scope | None:
    """The function of this file an expression names (``self.m`` inside a class: method m)."""
    if isinstance(node, ast.Name):
        found = scope.lookup(node.id)
        if found is not None:
            owner, values = found
            if values and isinstance(values[-1], (ast.FunctionDef, ast.AsyncFunctionDef)):
                qual = f"{owner.qualname}.{node.id}" if owner.qualname else node.id
                return facts.scopes.get(qual)
    elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
            and node.value.id == "self":
        cls = _class_of(scope)
        if cls is not None:
            s = cls.children.get(node.attr)
            if s is not None and s.kind == "function":
                return s
    return None


def compiled_function(facts: FileFacts, site: JitSite) -> Scope | None:
    """The function of this file a jit site compiles (decorated, or named in the call)."""
    if site.function is not None:
        return site.function
    return function_named(facts, site.target, site.scope)


def _span(node: ast.AST) -> tuple[int, int, int, int]:
    line = getattr(node, "lineno", 0)
    col = getattr(node, "col_offset", 0)
    return line, col, getattr(node, "end_lineno", None) or line, getattr(node, "end_col_offset", None) or col


def _class_of(scope: Scope) -> Scope | None:
    s: Scope | None = scope
    while s is not None:
        if s.kind == "class":
            return s
        if s.kind == "module":
            return None
        s = s.parent
    return None


def execution_of(facts: FileFacts) -> Execution:
    """The file's :class:`Execution`, built once and shared by every rule that asks."""
    found = facts.derived.get("execution")
    if found is None:
        found = facts.derived["execution"] = Execution(facts)
    return found  # type: ignore[return-value]
