"""Partitioning boxes: which trees have lost them.

Linen keeps partition names in boxes (``nn.Partitioned``, ``nn.LogicallyPartitioned``) around
the leaves; NNX keeps them in Variable metadata. ``nn.unbox(tree)`` and ``nnx.to_pure_dict(state)``
(or ``state.to_pure_dict()``) return the bare values, so a partition spec read from them is
``P()`` for every leaf. :func:`spec_readers` lists the calls that read specs or shardings from a
tree; :func:`unboxed` says whether a tree argument is such a bare tree, and how it lost its boxes.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from shardlint.semantics.file.bindings import follow
from shardlint.semantics.file.facts import CallSite, FileFacts, Scope

SPEC_READERS = frozenset({"flax.linen.get_partition_spec", "flax.linen.get_sharding",
                          "flax.nnx.get_partition_spec", "flax.nnx.get_named_sharding"})
UNBOX = frozenset({"flax.linen.unbox"})
PURE_DICT = frozenset({"flax.nnx.to_pure_dict"})


@dataclass(frozen=True)
class Unboxed:
    call: ast.Call  # the call that dropped the boxes
    how: str  # "nn.unbox(...)", for messages
    direct: bool  # the reader's argument is that call itself (not a name bound to it)
    inner: ast.expr | None  # the boxed tree handed to it, when there is exactly one


def spec_readers(facts: FileFacts) -> Iterator[tuple[CallSite, ast.expr]]:
    """Calls that read partition specs or shardings from a tree, with the tree argument."""
    for c in facts.calls_of(*SPEC_READERS):
        tree = c.arg(0, "tree")
        if tree is not None:
            yield c, tree


def unboxed(facts: FileFacts, node: ast.expr, scope: Scope, use: ast.AST) -> Unboxed | None:
    direct = not isinstance(node, ast.Name)
    value, _ = follow(facts, node, scope, use) if not direct else (node, scope)
    if not isinstance(value, ast.Call):
        return None
    func = value.func
    known = facts.resolve(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
    inner = value.args[0] if len(value.args) == 1 and not value.keywords \
        and not isinstance(value.args[0], ast.Starred) else None
    text = ast.unparse(func)
    if known is not None and known.name in UNBOX:
        return Unboxed(value, f"`{text}(...)`", direct, inner)
    if known is not None and known.name in PURE_DICT:
        return Unboxed(value, f"`{text}(...)`", direct, None)
    if known is None and isinstance(func, ast.Attribute) and func.attr == "to_pure_dict" \
            and not value.args and facts.uses_flax:
        return Unboxed(value, f"`.{func.attr}()`", direct, None)
    return None
