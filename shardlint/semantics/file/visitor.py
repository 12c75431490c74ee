"""The one pass over a module's ``ast`` that fills :class:`FileFacts`."""

from __future__ import annotations

import ast
import operator

from shardlint.semantics.catalog import api
from shardlint.semantics.catalog.api import Role
from shardlint.semantics.catalog.names import EXTERNAL_PACKAGES, ImportMap, dotted
from shardlint.semantics.file.config_tables import copied_value, is_axes_key, table_key
from shardlint.semantics.file.facts import (
    MESH,
    MESH_SET,
    OPAQUE,
    RULES,
    Assigned,
    CallSite,
    FileFacts,
    JitSite,
    MeshBinding,
    Reference,
    Scope,
    WithItem,
    accessor,
)
from shardlint.semantics.file.replay import (
    BodyLog,
    FactsMemo,
    MemberLog,
    StatementLog,
    body_still_valid,
    mark,
    member_still_valid,
    record,
    record_body,
    record_member,
    replay,
    replay_body,
    replay_member,
    reset,
    reset_function,
    still_valid,
)
from shardlint.semantics.file.reuse import start as start_reuse
from shardlint.semantics.file.rule_tables import collect_rule_tables
from shardlint.semantics.file.wrappers import NO_WRAPPERS, Wrappers

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_COMPILERS = (Role.JIT, Role.PMAP)  # what makes a jit site (JitSite)
_UNSEEN = object()  # (not worked out yet: None is an answer)


class FactsBuilder:
    def __init__(self, path: str, module: str, tree: ast.Module, is_package: bool = False,
                 wrappers: Wrappers = NO_WRAPPERS, previous: FactsMemo | None = None,
                 keep: bool = False):
        imports = ImportMap(module=module, is_package=is_package)
        key = (module, is_package, wrappers)
        if previous is not None and previous.key == key:
            root = reset(previous.root, tree)
        else:
            root, previous = Scope("", "module", tree, None), None
        self.facts = FileFacts(path=path, module=module, tree=tree, imports=imports,
                               module_scope=root, scopes={"": root})
        self.root = root
        self.previous = previous
        self.memo = FactsMemo(key, root) if keep else None
        self.log: StatementLog | None = None  # the top-level statement being recorded
        self.member_log: MemberLog | None = None  # the member of a top-level class, likewise
        # Every log being recorded, outermost first: the top-level statement's, the member's,
        # the function body statements' (replay.py); the last is the innermost.
        self.active: list[StatementLog | MemberLog | BodyLog] = []
        self._imports: dict[str, str] | None = None  # a snapshot of the import map (see below)
        # The scope objects of the previous build visited again, with what they bound then
        # (reuse.py compares: the names bound differently now).
        self.revisited: dict[Scope, tuple] = {}
        self.fresh: set = set()  # the logs with parts recorded in this build (reuse.py)
        self.wrappers = wrappers.table
        self.scope = root
        self.ctx = 0
        self.loop: ast.AST | None = None
        self.stmt: ast.stmt | None = None
        self.abstract = 0  # > 0 inside the arguments of jax.eval_shape / nnx.eval_shape
        self._decorated: set[int] = set()
        self._defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None

    # ---- entry ---------------------------------------------------------------------------------
    def build(self) -> FileFacts:
        if self.memo is None:
            self._body(self.facts.tree.body)
        else:  # recorded for the next version of this file (the language server)
            logs = self.memo.statements
            previous = self.previous.statements if self.previous is not None else {}
            for s in self.facts.tree.body:
                self.stmt = s
                log = previous.get(s)
                if log is not None and still_valid(self, log):
                    replay(self, log)
                    if isinstance(s, ast.ClassDef):  # its members' logs stay for a later edit
                        kept = self.previous.members  # type: ignore[union-attr]
                        for m in s.body:
                            if m in kept:
                                self.memo.members[m] = kept[m]
                else:
                    log = record(self, s)
                logs[s] = log
                if log.nested:  # (its function bodies' statements, likewise)
                    self.memo.bodies.update(log.nested)
        collect_rule_tables(self.facts)
        self.facts.complete = True
        if self.memo is not None:
            self.memo.reuse = start_reuse(
                self.facts, list(self.memo.statements.values()),
                self.previous.reuse if self.previous is not None else None, self.revisited,
                self.fresh)
            self.facts.reuse = self.memo.reuse
        return self.facts

    def _body(self, stmts: list[ast.stmt]) -> None:
        if self.scope.kind != "function":
            for s in stmts:
                self.stmt = s
                self.visit(s)
            return
        saved = self.ctx
        for s in stmts:
            self.stmt = s
            self.visit(s)
            if type(s) is ast.If:
                self.ctx |= self._after_guard(s)
        self.ctx = saved

    def visit(self, node: ast.AST) -> None:
        method = _DISPATCH.get(type(node), _generic)
        if method is not None:
            method(self, node)

    def generic(self, node: ast.AST) -> None:
        # Hand-rolled ast.iter_child_nodes over the fields that can hold code (no ctx/op nodes):
        # this loop runs for every node of every file, so it is kept tight.
        fields = _CHILD_FIELDS.get(type(node))
        if fields is None:
            fields = _child_fields(type(node))
        dispatch = _DISPATCH
        for name in fields:
            value = getattr(node, name, None)
            if value is None:
                continue
            if type(value) is list:
                for child in value:
                    if isinstance(child, ast.AST):
                        if isinstance(child, ast.stmt):
                            self.stmt = child
                        method = dispatch.get(type(child), _generic)
                        if method is not None:
                            method(self, child)
            elif isinstance(value, ast.AST):
                method = dispatch.get(type(value), _generic)
                if method is not None:
                    method(self, value)

    # ---- the import map as the logs see it -----------------------------------------------------
    def imports_snapshot(self) -> dict[str, str]:
        """A copy of the import map as it is now, shared by every log made until it changes
        (a log per function body statement would otherwise copy it thousands of times)."""
        snap = self._imports
        if snap is None:
            snap = self._imports = dict(self.facts.imports.names)
        return snap

    def imports_are(self, before: dict[str, str]) -> bool:
        """Whether the import map is ``before`` (a log's snapshot); an equal one from the
        previous build becomes the snapshot the next logs share."""
        snap = self._imports
        if before is snap:
            return True
        if self.facts.imports.names != before:
            return False
        if snap is None:
            self._imports = before
        return True

    def imports_changed(self) -> None:
        self._imports = None

    # ---- resolution helpers --------------------------------------------------------------------
    def resolve(self, node: ast.expr) -> tuple[str | None, api.Api | None]:
        return self._resolve_parts(dotted(node))

    def _resolve_parts(self, parts: list[str] | None, imported: str | None | object = _UNSEEN
                       ) -> tuple[str | None, api.Api | None]:
        """What a dotted chain names (``imported``: its ``qualify_parts``, when worked out)."""
        if parts is None:
            return None, None
        if self.wrappers:
            joined = ".".join(parts)
            if joined in self.wrappers:
                return joined, self.wrappers[joined]
        q = self.facts.imports.qualify_parts(parts) if imported is _UNSEEN else imported
        if q is None:
            return None, None
        if q in self.wrappers:
            return q, self.wrappers[q]
        return q, api.lookup(q)

    # ---- imports -------------------------------------------------------------------------------
    def v_import(self, node: ast.Import | ast.ImportFrom) -> None:
        self._imports = None
        self.facts.imports.add_import(node)
        for alias in node.names:
            q = self.facts.imports.names.get(alias.asname or alias.name.split(".", 1)[0])
            if isinstance(node, ast.ImportFrom) and q:
                self._note_package(q)
                known = api.lookup(q)
                if known is not None and (known.deprecated or known.removed):
                    self.facts.references.append(Reference(alias, q, known, self.scope))
            elif isinstance(node, ast.Import):
                self._note_package(alias.name)
                known = api.lookup(alias.name)  # `import jax.experimental.maps`
                if known is not None and (known.deprecated or known.removed):
                    self.facts.references.append(Reference(alias, alias.name, known, self.scope))
        if self.scope.kind != "module":
            for alias in node.names:
                self._bind(alias.asname or alias.name.split(".", 1)[0], OPAQUE)

    def _note_package(self, qualified: str) -> None:
        top = qualified.split(".", 1)[0]
        if top == "flax":
            self.facts.uses_flax = self.facts.uses_jax = True
            for log in self.active:
                log.uses_flax = log.uses_jax = True
        elif top in ("jax", "optax"):
            self.facts.uses_jax = True
            for log in self.active:
                log.uses_jax = True

    # ---- scopes --------------------------------------------------------------------------------
    def _previous_class(self, node: ast.ClassDef) -> Scope | None:
        """The Scope object the previous build gave this top-level class, when a member of it
        is the same node (so its member logs can be replayed into it), emptied for reuse."""
        if self.previous is None or self.log is None or self.scope is not self.root:
            return None
        for m in node.body:
            old = self.previous.members.get(m)
            if old is not None and old.owner.qualname == node.name and \
                    old.owner.kind == "class" and old.owner.parent is self.root:
                owner = old.owner
                self.revisited[owner] = (owner.bindings, owner.annotations, set(owner.children))
                owner.node, owner.bindings, owner.annotations = node, {}, {}
                owner.references, owner.self_calls, owner.children = set(), set(), {}
                owner.bases, owner.decorators, owner.params = [], [], []
                return owner
        return None

    def _new_scope(self, node: ast.AST, kind: str, name: str,
                   reused: Scope | None = None) -> Scope:
        qual = f"{self.scope.qualname}.{name}" if self.scope.qualname else name
        scope = reused if reused is not None else Scope(qual, kind, node, self.scope)
        getter = self.scope.children.get(name)
        if getter is not None and getter.kind == "function" and kind == "function" \
                and accessor(node) == 2:  # type: ignore[arg-type]
            # `@mesh.setter def mesh(...)`: the name stays the property's, and reading
            # `self.mesh` runs the getter (its body is still visited, in a scope of its own)
            return scope
        self.scope.children[name] = scope
        # A redefinition keeps the last one, as Python does at run time.
        self.facts.scopes[qual] = scope
        for log in self.active:
            log.scopes.append((qual, scope))
        if self.log is not None and self.scope is self.root:
            self.log.children.append((name, scope))
        if self.active:
            inner = self.active[-1]
            if type(inner) is BodyLog and inner.owner is self.scope:
                inner.children.append((name, scope))
        return scope

    def _previous_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef,
                           name: str) -> Scope | None:
        """The Scope object the previous build gave this function, when a statement of its
        body is the same node (so its log can be replayed into it), emptied for reuse."""
        if self.previous is None or not self.active:
            return None
        bodies = self.previous.bodies
        for s in node.body:
            old = bodies.get(s)
            if old is not None:
                owner = old.owner
                qual = f"{self.scope.qualname}.{name}" if self.scope.qualname else name
                if owner.kind == "function" and owner.qualname == qual \
                        and owner.parent is self.scope:
                    self.revisited[owner] = (owner.bindings, owner.assigned, [], set())
                    return reset_function(owner, node)
                return None
        return None

    def v_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        args = node.args
        for default in [*args.defaults, *[d for d in args.kw_defaults if d is not None]]:
            self.visit(default)
        self._bind(node.name, node)  # type: ignore[arg-type]
        scope = self._new_scope(node, "function", node.name,
                                self._previous_function(node, node.name)
                                if self.memo is not None else None)
        scope.decorators = list(node.decorator_list)
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            scope.params.append(a.arg)
            scope.bindings[a.arg] = [OPAQUE]
            if a.annotation is not None:
                scope.annotations[a.arg] = a.annotation
        for a in (args.vararg, args.kwarg):
            if a is not None:
                scope.bindings[a.arg] = [OPAQUE]
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            if a.annotation is not None:
                self._param_mesh(scope, a)
        self._decorator_jits(node, scope)
        saved = (self.scope, self.ctx, self.loop, self.stmt, self.abstract)
        self.scope, self.ctx, self.loop, self.abstract = scope, 0, None, 0
        if self.memo is not None and self.active:
            self._function_body(node.body, scope)  # the language server: replay what holds
        else:
            self._body(node.body)
        self.scope, self.ctx, self.loop, self.stmt, self.abstract = saved

    def _function_body(self, body: list[ast.stmt], scope: Scope) -> None:
        """A function's body statements, each replayed from the previous build when its node
        is the same, it was visited in this same scope object and its reads still hold, else
        visited (and logged). (Each starts where a fresh visit starts it: in ``scope``, under
        no ``with`` of its own function, in no loop, not abstract.)"""
        previous = self.previous.bodies if self.previous is not None else {}
        calls, outer = self.facts.calls, self.active[-1]
        revisited = self.revisited.get(scope)
        # (for reuse.py: its statements' logs, and those visited again)
        logs, recorded = revisited[2:] if revisited is not None else (None, None)
        for s in body:
            self.stmt = s
            c, n = len(calls), len(outer.scopes)
            log = previous.get(s)
            if log is not None and body_still_valid(self, log, scope):
                replay_body(self, s, log)
            else:
                log = record_body(self, s, scope)
                if recorded is not None:
                    recorded.add(log)
            mark(self, c, n, log)
            if logs is not None:
                logs.append(log)
            if type(s) is ast.If:
                self.ctx |= self._after_guard(s)

    def v_class(self, node: ast.ClassDef) -> None:
        for d in node.decorator_list:
            self.visit(d)
        for b in node.bases:
            self.visit(b)
        for kw in node.keywords:
            self.visit(kw.value)
        self._bind(node.name, node)  # type: ignore[arg-type]
        scope = self._new_scope(node, "class", node.name, self._previous_class(node))
        scope.decorators = list(node.decorator_list)
        for b in node.bases:
            q = self.facts.imports.qualify(b)
            parts = dotted(b)
            scope.bases.append(api.canonical(q) if q else ".".join(parts) if parts else "")
        saved = (self.scope, self.ctx, self.loop, self.stmt)
        self.scope, self.ctx, self.loop = scope, 0, None
        if self.memo is not None and self.log is not None and saved[0] is self.root:
            self._members(node, scope)  # a top-level class in the language server
        else:
            self._body(node.body)
        self.scope, self.ctx, self.loop, self.stmt = saved

    def _members(self, node: ast.ClassDef, scope: Scope) -> None:
        """The members of a top-level class, each replayed from the previous build when its
        node is the same and its reads still hold, else visited (and logged)."""
        previous = self.previous.members if self.previous is not None else {}
        logs = self.memo.members  # type: ignore[union-attr]
        calls, outer = self.facts.calls, self.active[-1]
        for m in node.body:
            self.stmt = m
            c, n = len(calls), len(outer.scopes)
            log = previous.get(m)
            if log is not None and member_still_valid(self, log, scope):
                replay_member(self, log)
            else:
                log = record_member(self, m, scope)
            logs[m] = log
            mark(self, c, n, log)

    def v_keyword(self, node: ast.keyword) -> None:
        self.visit(node.value)

    def v_lambda(self, node: ast.Lambda) -> None:
        # A lambda's parameters shadow outer names only inside it; record them as opaque there.
        self.generic(node)

    # ---- bindings ------------------------------------------------------------------------------
    def _bind(self, name: str, value: ast.expr) -> None:
        self.scope.bindings.setdefault(name, []).append(value)
        if self.log is not None and self.scope is self.root:
            self.log.bindings.append((name, value))
        elif self.active:
            inner = self.active[-1]
            if type(inner) is BodyLog and inner.owner is self.scope:
                inner.bindings.append((name, value))

    def _bind_target(self, target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            self._bind(target.id, value if value is not None else OPAQUE)
        elif isinstance(target, (ast.Tuple, ast.List)):
            same = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
            for i, elt in enumerate(target.elts):
                inner = value.elts[i] if same else None  # type: ignore[union-attr]
                self._bind_target(elt.value if isinstance(elt, ast.Starred) else elt,
                                  None if isinstance(elt, ast.Starred) else inner)
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, None)

    def v_assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for t in node.targets:
            self.visit(t)
            self._bind_target(t, node.value)
            if isinstance(t, ast.Name):
                self._maybe_alias(t.id, node.value)
                self._maybe_mesh(t.id, node.value)
            if self.scope.kind == "function":
                self._flow_target(t, node.value, (), node)

    def v_annassign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self.visit(node.target)
        if isinstance(node.target, ast.Name):
            if self.scope.kind == "class":  # a field: `mesh: Mesh`, `kernel_axes: tuple = ()`
                self.scope.annotations[node.target.id] = node.annotation
            if node.value is not None:
                self._bind(node.target.id, node.value)
                self._maybe_mesh(node.target.id, node.value)
            elif self.scope.kind == "class":
                self._bind(node.target.id, OPAQUE)  # a dataclass field
        if node.value is not None and self.scope.kind == "function":
            self._flow_target(node.target, node.value, (), node)

    def v_augassign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        self.visit(node.target)
        if isinstance(node.target, ast.Name):
            self._bind(node.target.id, OPAQUE)
        if self.scope.kind == "function":
            self._flow_target(node.target, None, (), node)

    def v_namedexpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind(node.target.id, node.value)
        if self.scope.kind == "function":
            self._flow_target(node.target, node.value, (), node)

    def v_for(self, node: ast.For | ast.AsyncFor) -> None:
        self.visit(node.iter)
        self._bind_target(node.target, None)
        self._bind_target(node.target, None)  # loop targets take many values
        if self.scope.kind == "function":
            self._flow_target(node.target, None, (), node)
        self._loop_body(node, node.body)
        self._body(node.orelse)

    def v_return(self, node: ast.Return) -> None:
        if node.value is not None:
            if self.scope.kind == "function":
                self.scope.returns.append(node.value)
            self.visit(node.value)

    def v_expr(self, node: ast.Expr) -> None:
        if type(node.value) is ast.Call and self.scope.kind == "function":
            self.scope.expr_calls.append(node.value)
        self.visit(node.value)

    def _flow_target(self, t: ast.expr, value: ast.expr | None, index: tuple[int, ...],
                     node: ast.stmt | ast.expr) -> None:
        """What the value-flow analysis needs of an assignment in a function (see Scope)."""
        tp = type(t)
        if tp is ast.Name:
            a = Assigned(value, index, node)
            self.scope.assigned.setdefault(t.id, []).append(a)  # type: ignore[attr-defined]
            if self.active:
                inner = self.active[-1]
                if type(inner) is BodyLog and inner.owner is self.scope:
                    inner.assigned.append((t.id, a))  # type: ignore[attr-defined]
        elif tp is ast.Tuple or tp is ast.List:
            starred = False
            for i, elt in enumerate(t.elts):  # type: ignore[attr-defined]
                if type(elt) is ast.Starred:
                    starred = True
                    self._flow_target(elt.value, None, (), node)
                else:
                    # After a starred target the positions count from the end: unknown.
                    self._flow_target(elt, None if starred else value, (*index, i), node)
        elif tp is ast.Starred:
            self._flow_target(t.value, None, (), node)  # type: ignore[attr-defined]
        elif tp is ast.Attribute or tp is ast.Subscript:
            self.scope.stores.append((t, node))  # type: ignore[arg-type]

    def v_if(self, node: ast.If) -> None:
        """``if nn.get_logical_axis_rules():`` / ``if not get_abstract_mesh().empty:``: the body
        runs only where the rules (the mesh) are there -- code that asks is a library that
        leaves them to its callers, and its constraints inside need nothing of them; the
        ``else`` of the negated test alike. (Statements keep the ``if`` as theirs, as before.)"""
        self.visit(node.test)
        flag, positive = self._guard(node.test)
        if flag & MESH:
            flag |= MESH_SET  # (what it asks about is the mesh jax reads)
        saved = self.ctx
        if flag and positive:
            self.ctx |= flag
        for s in node.body:
            self.visit(s)
        self.ctx = saved | flag if flag and not positive else saved
        for s in node.orelse:
            self.visit(s)
        self.ctx = saved

    def _after_guard(self, node: ast.If) -> int:
        """What the statements after ``node`` run under when it is a guard that leaves the
        function (``return``/``raise``, or ``continue``/``break`` in a loop) unless the rules
        (the mesh) are there: ``if not global_mesh_defined(): return x`` -- the code past it
        runs only where a mesh is in context, as the ``else`` of the same test would."""
        flag, positive = self._guard(node.test)
        if not flag:
            return 0
        if flag & MESH:
            flag |= MESH_SET
        if not positive and _leaves(node.body):
            return flag
        if positive and node.orelse and _leaves(node.orelse):
            return flag
        return 0

    def _guard(self, test: ast.expr, local: dict[str, ast.expr] | None = None,
               depth: int = 0) -> tuple[int, bool]:
        """(RULES and MESH, or MESH, and whether the test holds when they are there) for a
        test that asks whether axis rules (a library applying its constraints only where its
        caller brings its contexts) or a mesh are in context; (0, True) for any other test.
        ``local``: the names a helper's body binds, read while judging what it returns."""
        tp = type(test)
        if tp is ast.UnaryOp and isinstance(test.op, ast.Not):  # type: ignore[attr-defined]
            flag, positive = self._guard(test.operand, local, depth)  # type: ignore[attr-defined]
            return flag, not positive
        if tp is ast.BoolOp:
            # `a and has_mesh()`: its body runs only with the mesh; `a or not has_mesh()`: its
            # `else` (and the code past an early return under it) likewise.
            conj = isinstance(test.op, ast.And)  # type: ignore[attr-defined]
            for value in test.values:  # type: ignore[attr-defined]
                flag, positive = self._guard(value, local, depth)
                if flag and positive == conj:
                    return flag, conj
            return 0, True
        if tp is ast.Name and local is not None and test.id in local:  # type: ignore[attr-defined]
            return self._guard(local.pop(test.id), local, depth)  # type: ignore[attr-defined]
        if tp is ast.Compare and len(test.ops) == 1:  # type: ignore[attr-defined]
            op, right = test.ops[0], test.comparators[0]  # type: ignore[attr-defined]
            if isinstance(right, ast.Constant) and right.value is None:
                flag, positive = self._guard(test.left, local, depth)  # type: ignore[attr-defined]
                if isinstance(op, ast.IsNot):
                    return flag, positive
                if isinstance(op, ast.Is):
                    return flag, not positive
                return 0, True
            if _empty_literal(right) and isinstance(op, (ast.Eq, ast.NotEq, ast.Gt)):
                # `env.physical_mesh.devices.shape != ()`, `mesh.size > 0`: one is there
                flag = self._mesh_part(test.left, local, depth)  # type: ignore[attr-defined]
                if flag:
                    return flag, not isinstance(op, ast.Eq)
            return 0, True
        if tp is ast.Attribute and test.attr == "empty":  # type: ignore[attr-defined]
            flag, _ = self._guard(test.value, local, depth)  # type: ignore[attr-defined]
            return (MESH, False) if flag == MESH else (0, True)  # (`mesh.empty`: none there)
        if tp is ast.Call and isinstance(test.func, (ast.Name, ast.Attribute)):  # type: ignore[attr-defined]
            q, _ = self.resolve(test.func)  # type: ignore[attr-defined]
            name = (q or "").rpartition(".")[2] or \
                (test.func.id if isinstance(test.func, ast.Name) else test.func.attr)  # type: ignore[attr-defined]
            if name in _RULES_QUERIES:  # (a library that leaves its contexts to its callers)
                return RULES | MESH, True
            if q in _MESH_QUERIES:
                return MESH, True  # (its `.empty` says whether one is there: above)
            if name.endswith(("mesh_defined", "mesh_is_defined")) or name == "has_mesh":
                return MESH, True
            if isinstance(test.func, ast.Name) and depth < 2:  # type: ignore[attr-defined]
                found = self.query_function(test.func.id, depth + 1)  # type: ignore[attr-defined]
                for log in self.active:  # (an edit of the helper changes what this reads)
                    log.reads.append(("guard", test.func.id, depth + 1, found))  # type: ignore[attr-defined]
                return found
        if tp is ast.Attribute and test.attr == "physical_mesh":  # type: ignore[attr-defined]
            return MESH, True
        return 0, True

    def _mesh_part(self, expr: ast.expr, local: dict[str, ast.expr] | None,
                   depth: int) -> int:
        """MESH for a part of a mesh in context (``env.physical_mesh.devices.shape``,
        ``get_abstract_mesh().size``), 0 for anything else."""
        while isinstance(expr, ast.Attribute) and expr.attr in _MESH_PARTS:
            expr = expr.value
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) \
                and expr.func.id == "len" and len(expr.args) == 1:
            return self._mesh_part(expr.args[0], local, depth)
        flag, positive = self._guard(expr, local, depth)
        return MESH if flag == MESH and positive else 0

    def query_function(self, name: str, depth: int) -> tuple[int, bool]:
        """A function of this file (at its top level) whose body answers whether a mesh is in
        context -- ``def global_mesh_defined(): return
        pxla.thread_resources.env.physical_mesh.devices.shape != ()`` -- directly or through
        one more such function: what its result says, as ``_guard`` does for a test."""
        defs = self._defs
        if defs is None:  # (the last definition of each name, as at run time)
            defs = self._defs = {s.name: s for s in self.facts.tree.body
                                 if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
        fn = defs.get(name)
        if fn is None or fn.args.args or fn.args.posonlyargs or fn.args.kwonlyargs:
            return 0, True
        local: dict[str, ast.expr] = {}
        answers: set[tuple[int, bool]] = set()
        for s in fn.body:
            if isinstance(s, ast.Assign) and len(s.targets) == 1 \
                    and isinstance(s.targets[0], ast.Name):
                local[s.targets[0].id] = s.value
            elif isinstance(s, ast.Return) and s.value is not None:
                answers.add(self._guard(s.value, dict(local), depth))
            elif isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant):
                continue  # (the docstring)
            else:
                return 0, True  # (anything else: not a plain question)
        if len(answers) == 1:
            flag, positive = answers.pop()
            if flag == MESH:
                return flag, positive
        return 0, True

    def v_while(self, node: ast.While) -> None:
        self.visit(node.test)
        self._loop_body(node, node.body)
        self._body(node.orelse)

    def _loop_body(self, node: ast.AST, body: list[ast.stmt]) -> None:
        saved = self.loop
        self.loop = node
        self._body(body)
        self.loop = saved

    def v_comprehension_scope(self, node: ast.AST) -> None:
        self.generic(node)

    def _maybe_alias(self, name: str, value: ast.expr) -> None:
        """`P = jax.sharding.PartitionSpec` at module level acts like an import."""
        if self.scope.kind != "module" or not isinstance(value, (ast.Name, ast.Attribute)):
            return
        q = self.facts.imports.qualify(value)
        if q is not None and (api.lookup(q) is not None or q.split(".", 1)[0] in api.PACKAGES):
            self._imports = None
            self.facts.imports.names[name] = q

    # ---- meshes --------------------------------------------------------------------------------
    def _maybe_mesh(self, name: str | None, value: ast.expr) -> MeshBinding | None:
        if not isinstance(value, ast.Call):
            return None
        _, known = self.resolve(value.func)
        if known is None or known.role not in (Role.MESH, Role.ABSTRACT_MESH):
            return None
        for m in self.facts.meshes:
            if m.call is value:  # an inline mesh recorded by v_call before its binding was seen
                m.name = name
                return m
        return self._record_mesh(name, value, known)

    def _record_mesh(self, name: str | None, value: ast.Call, known: api.Api) -> MeshBinding:
        names_node = value.args[1] if len(value.args) > 1 else None
        for kw in value.keywords:
            if kw.arg == "axis_names":
                names_node = kw.value
        axis = self._axis_names(names_node, self.scope) if names_node is not None else None
        if axis is not None and any(not isinstance(a, str) for a in axis):
            axis = None
        has_types = any(kw.arg == "axis_types" for kw in value.keywords) or len(value.args) > 2
        mb = MeshBinding(name, value, known.name, axis, has_types, self.scope, value,
                         _axis_key(self.facts, names_node) if axis is None else None,
                         axis is None and _copies_axes(names_node))
        self.facts.meshes.append(mb)
        return mb

    def _param_mesh(self, scope: Scope, arg: ast.arg) -> None:
        ann = arg.annotation
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                ann = ast.parse(ann.value, mode="eval").body
            except SyntaxError:
                return
        _, known = self.resolve(ann)  # type: ignore[arg-type]
        if known is not None and known.role in (Role.MESH, Role.ABSTRACT_MESH):
            self.facts.meshes.append(
                MeshBinding(arg.arg, None, known.name, None, True, scope, arg)  # type: ignore[arg-type]
            )

    # ---- with ----------------------------------------------------------------------------------
    def v_with(self, node: ast.With | ast.AsyncWith) -> None:
        added = 0
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._bind_target(item.optional_vars, None)
                if self.scope.kind == "function":
                    self._flow_target(item.optional_vars, None, (), node)
            kind, mesh = self._context_kind(item.context_expr)
            if kind is None:
                self.facts.other_withs.append(WithItem("other", item.context_expr, node,
                                                       self.scope))
                continue
            self.facts.with_items.append(WithItem(kind, item.context_expr, node, self.scope, mesh))
            added |= RULES if kind == "rules" else MESH if kind == "legacy_mesh" \
                else MESH | MESH_SET
        saved = self.ctx
        self.ctx |= added
        self._body(node.body)
        self.ctx = saved

    def _context_kind(self, expr: ast.expr) -> tuple[str | None, MeshBinding | None]:
        if isinstance(expr, ast.Call):
            _, known = self.resolve(expr.func)
            if known is not None:
                if known.role == Role.RULES_CONTEXT:
                    return "rules", None
                if known.role == Role.MESH_CONTEXT:
                    return "mesh", None
                if known.role in (Role.MESH, Role.ABSTRACT_MESH):
                    return "legacy_mesh", self._mesh_for(expr, self.scope)
            return None, None
        mesh = self._mesh_for(expr, self.scope)
        if mesh is not None:
            return "legacy_mesh", mesh
        return None, None

    # ---- calls ---------------------------------------------------------------------------------
    def v_call(self, node: ast.Call) -> None:
        parts = dotted(node.func)
        if parts is None:
            q, known, imported = None, None, None
        else:
            imported = self.facts.imports.qualify_parts(parts)
            q, known = self._resolve_parts(parts, imported)
        site = CallSite(node, self.scope, self.ctx, q, known, self.loop,
                        self.stmt if self.stmt is not None else node,  # type: ignore[arg-type]
                        self.abstract > 0, parts[0] if parts is not None else None)
        self.facts.calls.append(site)
        self.facts._call_index[node] = site
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id == "self":
            self.scope.self_calls.add(func.attr)
            if self.log is not None and self.scope is self.root:
                self.log.root_self_calls.add(func.attr)
        if known is not None:
            self._role(known.role)
            if known.role in _COMPILERS:
                self._call_jit(node, known)
            elif known.role == Role.PARTIAL and node.args:
                self._partial_jit(node)
            elif known.role in (Role.MESH, Role.ABSTRACT_MESH):
                if not any(m.call is node for m in self.facts.meshes):
                    self._record_mesh(None, node, known)
        if known is not None and known.role == Role.EVAL_SHAPE:
            self.visit(node.func)
            self.abstract += 1
            for a in node.args:
                self.visit(a)
            for kw in node.keywords:
                self.visit(kw.value)
            self.abstract -= 1
            return
        # (generic's walk of a call, written out: func, the arguments, the keywords' values --
        # a call is a third of the nodes it would be handed)
        dispatch = _DISPATCH
        func = node.func
        if parts is not None and type(func) is ast.Attribute:
            # (v_attribute, with the chain and its import already worked out above)
            self._chain(func, parts, imported, known if q == imported
                        and imported not in self.wrappers else _UNSEEN)
        else:
            method = dispatch.get(type(func), _generic)
            if method is not None:
                method(self, func)
        for a in node.args:
            method = dispatch.get(type(a), _generic)
            if method is not None:
                method(self, a)
        for kw in node.keywords:
            value = kw.value
            method = dispatch.get(type(value), _generic)
            if method is not None:
                method(self, value)

    def _call_jit(self, node: ast.Call, known: api.Api) -> None:
        if id(node) in self._decorated:
            return
        kws = {kw.arg: kw.value for kw in node.keywords if kw.arg}
        # (`pjit(fun=f, ...)`: the function by keyword, as pjit and jax.jit before 0.7 took it)
        target = node.args[0] if node.args else kws.pop("fun", None)
        if target is None:
            return  # `jax.jit(donate_argnums=...)` used as a decorator factory: see decorators
        self.facts.jit_sites.append(JitSite(
            node, known.name, "call", kws, target, self._function_named(target),
            self._bound_name(node), self.scope))

    def _partial_jit(self, node: ast.Call) -> None:
        """`partial(jax.jit, ...)(f)` in call form."""
        if id(node) in self._decorated:
            return
        _, inner = self.resolve(node.args[0])
        if inner is None or inner.role not in _COMPILERS:
            return
        # The partial itself compiles nothing until applied; the application is the site.
        parent_call = None
        for c in reversed(self.facts.calls):
            if c.node.func is node:
                parent_call = c.node
                break
        if parent_call is not None and parent_call.args:
            kws = {kw.arg: kw.value for kw in node.keywords if kw.arg}
            target = parent_call.args[0]
            self.facts.jit_sites.append(JitSite(
                parent_call, inner.name, "partial", kws, target, self._function_named(target),
                self._bound_name(parent_call), self.scope))

    def _bound_name(self, node: ast.expr) -> str | None:
        stmt = self.stmt
        if isinstance(stmt, ast.Assign) and stmt.value is node and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name):
            return stmt.targets[0].id
        return None

    def _function_named(self, target: ast.expr) -> Scope | None:
        if not isinstance(target, ast.Name):
            return None
        found = self.function_named_from(target, self.scope)
        for log in self.active:
            log.reads.append(("function", target, self.scope, found))
        return found

    def function_named_from(self, target: ast.Name, scope: Scope) -> Scope | None:
        found = scope.lookup(target.id)
        if found is not None:
            owner, values = found
            if values and isinstance(values[-1], _FUNCS):
                qual = f"{owner.qualname}.{target.id}" if owner.qualname else target.id
                return self.facts.scopes.get(qual)
        return None

    # What a statement reads of the meshes and constants before it: logged for the replay.
    def _mesh_for(self, expr: ast.expr, scope: Scope) -> MeshBinding | None:
        found = self.facts.mesh_for(expr, scope)
        for log in self.active:
            log.reads.append(("mesh", expr, scope, found))
        return found

    def _axis_names(self, node: ast.expr, scope: Scope) -> tuple | None:
        found = self.facts.axis_names(node, scope)
        for log in self.active:
            log.reads.append(("axes", node, scope, found))
        return found

    def _decorator_jits(self, fn: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope) -> None:
        for d in fn.decorator_list:
            site: JitSite | None = None
            q, known = self.resolve(d)
            if known is not None and known.role in _COMPILERS:
                site = JitSite(d, known.name, "decorator", {}, None, scope, fn.name, self.scope)
            elif isinstance(d, ast.Call):
                _, kcall = self.resolve(d.func)
                kws = {kw.arg: kw.value for kw in d.keywords if kw.arg}
                if kcall is not None and kcall.role in _COMPILERS and not d.args:
                    site = JitSite(d, kcall.name, "factory", kws, None, scope, fn.name, self.scope)
                elif kcall is not None and kcall.role == Role.PARTIAL and d.args:
                    _, inner = self.resolve(d.args[0])
                    if inner is not None and inner.role in _COMPILERS:
                        site = JitSite(d, inner.name, "partial", kws, None, scope, fn.name,
                                       self.scope)
            if site is not None:
                self._decorated.add(id(d))
                self.facts.jit_sites.append(site)

    # ---- names and attributes ------------------------------------------------------------------
    def _role(self, role: Role) -> None:
        self.facts.roles.add(role)
        for log in self.active:
            log.roles.add(role)

    def v_name(self, node: ast.Name) -> None:
        if type(node.ctx) is ast.Load:
            self.scope.references.add(node.id)
            if self.log is not None and self.scope is self.root:
                self.log.root_references.add(node.id)
            q = self.facts.imports.names.get(node.id)
            if q is not None:
                known = api.lookup(q)
                if known is not None:
                    self._role(known.role)

    def v_attribute(self, node: ast.Attribute) -> None:
        parts = dotted(node)
        if parts is not None:
            self._chain(node, parts, self.facts.imports.qualify_parts(parts), _UNSEEN)
            return
        self.visit(node.value)

    def _chain(self, node: ast.Attribute, parts: list[str], q: str | None, known) -> None:
        """A dotted chain ``a.b.c`` read: its first name is referenced, and what it names
        through the imports (``q``: ``qualify_parts(parts)``) is an API's use (``known``: that
        API when the caller looked it up already, else _UNSEEN). A chain on a name of this
        module (``Trainer.tokenize``) is referenced as its first two parts: a class's member
        read through the class is that member, not every method of the class (the summary
        decides, ``ModuleSummary``'s ``_scope_refs``)."""
        head = parts[0] if q or len(parts) == 1 or parts[0] == "self" else \
            f"{parts[0]}.{parts[1]}"
        self.scope.references.add(head)
        if self.log is not None and self.scope is self.root:
            self.log.root_references.add(head)
        if not q:
            return
        if known is _UNSEEN:
            known = api.lookup(q)
        if known is None and len(parts) > 1 and q.partition(".")[0] not in EXTERNAL_PACKAGES:
            # a module's attribute (`layers.Dense` of `from pkg import layers`): the symbol it
            # names is referenced, as `Dense` of `from pkg.layers import Dense` is
            self.scope.references.add(".".join(parts))
            if self.log is not None and self.scope is self.root:
                self.log.root_references.add(".".join(parts))
        if known is not None:
            self._role(known.role)
        elif "thread_resources" in parts and q.startswith("jax."):
            self._role(Role.LEGACY_ENV)  # `pxla.thread_resources.env.physical_mesh`
        if known is not None and (known.deprecated or known.removed):
            self.facts.references.append(Reference(node, q, known, self.scope))

# The attributes of a mesh a test reads to ask whether it is a real one: `mesh.devices.shape`.
_MESH_PARTS = frozenset({"devices", "shape", "size", "axis_names", "shape_tuple", "axis_sizes",
                         "device_ids"})


def _empty_literal(node: ast.expr) -> bool:
    """``()``, ``[]``, ``{}`` or ``0``: what an absent mesh's parts compare equal to."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return not node.elts
    if isinstance(node, ast.Dict):
        return not node.keys
    return isinstance(node, ast.Constant) and node.value == 0 and type(node.value) is int


def _leaves(body: list[ast.stmt]) -> bool:
    """The block always leaves the code that follows it (its last statement returns, raises,
    continues or breaks)."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


# Tests asking whether axis rules (a mesh) are in context: `if nn.get_logical_axis_rules():`.
_RULES_QUERIES = frozenset({"get_logical_axis_rules", "get_axis_rules"})
_MESH_QUERIES = frozenset({"jax.sharding.get_abstract_mesh", "jax.sharding.get_mesh"})

_DISPATCH = {
    ast.Import: FactsBuilder.v_import,
    ast.ImportFrom: FactsBuilder.v_import,
    ast.FunctionDef: FactsBuilder.v_function,
    ast.AsyncFunctionDef: FactsBuilder.v_function,
    ast.ClassDef: FactsBuilder.v_class,
    ast.Assign: FactsBuilder.v_assign,
    ast.AnnAssign: FactsBuilder.v_annassign,
    ast.AugAssign: FactsBuilder.v_augassign,
    ast.NamedExpr: FactsBuilder.v_namedexpr,
    ast.For: FactsBuilder.v_for,
    ast.AsyncFor: FactsBuilder.v_for,
    ast.While: FactsBuilder.v_while,
    ast.If: FactsBuilder.v_if,
    ast.Return: FactsBuilder.v_return,
    ast.Expr: FactsBuilder.v_expr,
    ast.With: FactsBuilder.v_with,
    ast.AsyncWith: FactsBuilder.v_with,
    ast.Call: FactsBuilder.v_call,
    ast.Name: FactsBuilder.v_name,
    ast.Attribute: FactsBuilder.v_attribute,
    ast.Lambda: FactsBuilder.v_lambda,
    ast.keyword: FactsBuilder.v_keyword,
}


def _axis_key(facts: FileFacts, node: ast.expr | None) -> str | None:
    """The configuration key a mesh's axis names are read by (``config.mesh_axes``,
    ``cfg["mesh_axes"]``); None for anything else."""
    if node is None or _copies_axes(node):
        return None
    key = table_key(copied_value(facts, node))  # (`tuple(config.mesh_axes)`: the same names)
    return key if key is not None and is_axes_key(key) else None


def _copies_axes(node: ast.expr | None) -> bool:
    """Axis names read from another mesh: ``Mesh(m.devices, m.axis_names)`` (or derived from
    them, ``m.axis_names[:2]``)."""
    return node is not None and any(isinstance(n, ast.Attribute) and n.attr == "axis_names"
                                    for n in ast.walk(node))


def _generic(self: FactsBuilder, node: ast.AST) -> None:
    self.generic(node)


# generic's walk written out for the commonest expressions without a visitor of their own
# (a tenth of the nodes of a file): the same children, in the same order.
def _v_elts(self: FactsBuilder, node: ast.Tuple | ast.List | ast.Set) -> None:
    dispatch = _DISPATCH
    for e in node.elts:
        method = dispatch.get(type(e), _generic)
        if method is not None:
            method(self, e)


def _two(first: str, second: str):
    """A visitor of a node's two children ``first`` and ``second``, in that order."""
    children = operator.attrgetter(first, second)

    def visit(self: FactsBuilder, node: ast.AST) -> None:
        dispatch = _DISPATCH
        for value in children(node):
            method = dispatch.get(type(value), _generic)
            if method is not None:
                method(self, value)
    return visit


def _v_compare(self: FactsBuilder, node: ast.Compare) -> None:
    dispatch = _DISPATCH
    for value in (node.left, *node.comparators):
        method = dispatch.get(type(value), _generic)
        if method is not None:
            method(self, value)


def _v_unaryop(self: FactsBuilder, node: ast.UnaryOp) -> None:
    value = node.operand
    method = _DISPATCH.get(type(value), _generic)
    if method is not None:
        method(self, value)


_NO_CODE_FIELDS = {"ctx", "op", "ops", "type_comment", "type_ignores"}
_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(cls: type) -> tuple[str, ...]:
    fields = tuple(f for f in cls._fields if f not in _NO_CODE_FIELDS)
    _CHILD_FIELDS[cls] = fields
    return fields


_DISPATCH.update({ast.Tuple: _v_elts, ast.List: _v_elts, ast.Set: _v_elts,  # type: ignore[dict-item]
                  ast.Subscript: _two("value", "slice"), ast.BinOp: _two("left", "right"),
                  ast.Compare: _v_compare,
                  ast.UnaryOp: _v_unaryop})
# Leaves and context markers: nothing to record, nothing below them.
for _leaf in (ast.Constant, ast.Load, ast.Store, ast.Del, ast.Pass, ast.Break, ast.Continue,
              ast.Global, ast.Nonlocal, ast.alias):
    _DISPATCH[_leaf] = None  # type: ignore[assignment]


def build_facts(path: str, module: str, tree: ast.Module, is_package: bool = False,
                wrappers: Wrappers = NO_WRAPPERS) -> FileFacts:
    return FactsBuilder(path, module, tree, is_package, wrappers).build()


def rebuild_facts(path: str, module: str, tree: ast.Module, is_package: bool,
                  wrappers: Wrappers, previous: FactsMemo | None) -> tuple[FileFacts, FactsMemo]:
    """:func:`build_facts` for the next version of a file: top-level statements the incremental
    parser kept, and whose reads still hold, are replayed from ``previous`` (see ``replay``)."""
    builder = FactsBuilder(path, module, tree, is_package, wrappers, previous, keep=True)
    facts = builder.build()
    assert builder.memo is not None
    return facts, builder.memo
