"""Parsing and walking stdlib ``ast`` for the analyses that run on every keystroke.

``parse`` is ``ast.parse`` without the ``SyntaxWarning``s of the user's code. ``nodes`` is a faster
``ast.walk``: ``ast.walk`` goes through ``iter_child_nodes``/``iter_fields`` generators for every
node and also yields the shared ``Load``/``Store``/operator singletons; ``nodes`` reads each node
type's child fields once, skips those singletons, and returns a list in the same breadth-first
order.
"""

from __future__ import annotations

import ast
import warnings


def first_line(node: ast.AST) -> int:
    """The first line of a statement, its decorators included."""
    decorators = getattr(node, "decorator_list", None)
    if decorators:
        return min(node.lineno, *(d.lineno for d in decorators))  # type: ignore[attr-defined]
    return node.lineno  # type: ignore[attr-defined]


def parse(text: str, filename: str) -> ast.Module:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text, filename=filename)


_LEAF_FIELDS = ("ctx", "op", "ops")  # always the shared singletons: no code below them
_FIELDS: dict[type, tuple[str, ...]] = {}


def code_fields(tp: type) -> tuple[str, ...]:
    """The fields of a node type that can hold code (not the singletons), read once per type:
    the table of this module's walk and of the analyses' own (``dataflow.own_nodes``,
    ``liveness``), which keep the loop over them inline (a call per node made them 1.5x
    slower, measured on the benchmark wheels)."""
    fields = _FIELDS.get(tp)
    if fields is None:
        fields = _FIELDS[tp] = tuple(f for f in tp._fields if f not in _LEAF_FIELDS)
    return fields


def nodes(root: ast.AST) -> list[ast.AST]:
    """``root`` and every node below it that can hold code, breadth first (as ``ast.walk``)."""
    out: list[ast.AST] = [root]
    add, AST, fields_of = out.append, ast.AST, _FIELDS
    i = 0
    while i < len(out):
        node = out[i]
        i += 1
        tp = type(node)
        fields = fields_of.get(tp)
        for name in fields if fields is not None else code_fields(tp):
            value = getattr(node, name, None)
            if type(value) is list:
                for child in value:
                    if isinstance(child, AST):
                        add(child)
            elif isinstance(value, AST):
                add(value)
    return out


def calls(root: ast.AST) -> list[ast.Call]:
    return [n for n in nodes(root) if type(n) is ast.Call]


def walk_body(node: ast.AST) -> list[ast.AST]:
    """``nodes(node)`` without ``node``'s own decorators (they run in the enclosing scope:
    a function's analysis reads its body, and a stack of decorators, each of them a jit site of
    the same function, would otherwise be read once per site)."""
    if not getattr(node, "decorator_list", None):
        return nodes(node)
    out: list[ast.AST] = [node]
    for name in node._fields:
        if name == "decorator_list":
            continue
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            out.extend(nodes(value))
        elif isinstance(value, list):
            for v in value:
                if isinstance(v, ast.AST):
                    out.extend(nodes(v))
    return out
