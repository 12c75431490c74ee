"""Is this value a mesh? Mesh identity through the value-flow layer.

A value is a mesh when it is built by a mesh constructor (``Mesh``, ``jax.make_mesh``,
``AbstractMesh``), returned by a project function that returns one (any depth, any file; a
``-> Mesh`` annotation says so too), annotated ``Mesh``, an attribute of ``self`` that the
class's methods only ever set from one (or a field annotated ``Mesh``), a parameter every caller
in the project passes one to, or a name the same function hands to an API that takes a mesh
(``NamedSharding(mesh, ...)``, ``jax.set_mesh(mesh)``, ``shard_map(..., mesh=mesh)``; for an
attribute of ``self``, in any method of the class or a function nested in one), or an attribute
of an object whose class is not known that the project's classes make a mesh and nothing else
(``config.mesh`` where a class has ``@property def mesh(self) -> Mesh``). A value that is none of
those is unknown: a variable named ``mesh`` is not evidence.
"""

from __future__ import annotations

import ast

from shardlint.semantics.catalog.names import call_arg, dotted
from shardlint.semantics.file.facts import FileFacts, Scope
from shardlint.semantics.flow.project import ProjectIndex
from shardlint.semantics.flow.summary import reference
from shardlint.semantics.flow.valueflow import MESH_ARGUMENTS, kind_terms

def is_mesh(facts: FileFacts, project: ProjectIndex, expr: ast.expr, scope: Scope) -> bool:
    """Whether ``expr``, evaluated in ``scope``, is certainly a mesh (see the module docstring)."""
    if facts.mesh_for(expr, scope) is not None:
        return True
    if isinstance(expr, ast.Call):
        known = facts.resolve(expr.func) if isinstance(expr.func, (ast.Name, ast.Attribute)) \
            else None
        if known is not None:
            return known.role.name in ("MESH", "ABSTRACT_MESH")
    assigned = scope.assigned if scope.kind == "function" else None
    terms = kind_terms(facts, scope, expr, lambda n, s: reference(facts, n, s), None,
                       assigned=assigned)
    key = f"{facts.module}:{scope.qualname}"
    if terms and project.flows.terms_mesh(terms, key):
        return True
    if handed_to_a_mesh_api(facts, expr, scope, project):
        return True
    # `config.mesh`, `self.model.mesh` on an object of a class not known: what the project's
    # classes make of the attribute (FlowIndex.named_attribute_mesh), unless what is known of
    # this value says otherwise (`self.cfg.mesh` where a store of `self.cfg` holds another
    # record)
    if type(expr) is not ast.Attribute:
        return False
    if any(t[0] == "other" or t[0] == "a" and project.flows.attribute_other(key, t[1])
           for t in terms):
        return False
    return project.flows.named_attribute_mesh(expr.attr)


def handed_to_a_mesh_api(facts: FileFacts, expr: ast.expr, scope: Scope,
                         project: ProjectIndex | None = None) -> bool:
    """The same name (or ``self.x``) is passed, in the same function, where an API takes a mesh,
    and nothing else is bound to it there."""
    parts = dotted(expr)
    if parts is None or (len(parts) > 1 and parts[0] != "self") or len(parts) > 2:
        return False
    if len(parts) == 1 and scope.kind == "function" and len(scope.assigned.get(parts[0], ())) > 1:
        return False  # rebound: which value is meant is not known
    # (`self.mesh` is the same value in every method of the class and the functions nested
    # in them: a use in any of them counts)
    owner = _class_around(scope) if parts[0] == "self" else None
    for c in facts.calls:
        if c.scope is not scope and (owner is None or _class_around(c.scope) is not owner):
            continue
        if c.api is not None:
            where = MESH_ARGUMENTS.get(c.api.name)
            if where is not None:
                arg = call_arg(c.node, where[0], where[1])
                if arg is not None and dotted(arg) == parts:
                    return True
            continue
        if project is not None and _handed_to_a_mesh_parameter(facts, project, c, parts):
            return True
    return False


def _handed_to_a_mesh_parameter(facts: FileFacts, project: ProjectIndex, c, parts) -> bool:
    """``get_named_sharding(state, mesh)`` where that project function's parameter is a mesh."""
    n = c.node
    hits = [(str(i), a) for i, a in enumerate(n.args) if dotted(a) == parts] + \
        [(k.arg, k.value) for k in n.keywords if k.arg and dotted(k.value) == parts]
    if not hits or not isinstance(n.func, (ast.Name, ast.Attribute)):
        return False
    ref = reference(facts, n.func, c.scope)
    target = project.flows.function(ref, facts.module) if ref is not None else None
    if target is None:
        return False
    flow = target[1]
    meshp, params = flow.get("meshp", ()), flow.get("params", [])
    offset = flow.get("method", 0) if isinstance(n.func, ast.Attribute) \
        and isinstance(n.func.value, ast.Name) and n.func.value.id in ("self", "cls") else 0
    for key, _ in hits:
        name = params[int(key) + offset] if key.isdigit() and int(key) + offset < len(params) \
            else key
        if name in meshp:
            return True
    return False


def _class_around(scope: Scope) -> Scope | None:
    """The nearest class a function (or a function nested in a method) is defined in."""
    s = scope.parent if scope.kind == "function" else None
    while s is not None and s.kind == "function":
        s = s.parent
    return s if s is not None and s.kind == "class" else None
