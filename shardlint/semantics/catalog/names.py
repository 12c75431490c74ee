"""Import-alias resolution and literal evaluation on stdlib ``ast``.

``ImportMap`` turns a local expression (``nn.spmd.with_logical_constraint``, ``P``, ``ln.vmap``)
into the fully qualified dotted name it refers to, following ``import x as y``,
``from x import y as z`` and module-level aliases (``P = jax.sharding.PartitionSpec``).
``semantics.api`` then maps that dotted name to its canonical API.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field

from shardlint.semantics.catalog import api


def dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` -> ["a", "b", "c"]; anything else (calls, subscripts) -> None."""
    # Called for most expressions of every file: exact type checks, no generator.
    if type(node) is ast.Name:
        return [node.id]  # type: ignore[attr-defined]
    parts: list[str] = []
    while type(node) is ast.Attribute:
        parts.append(node.attr)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if type(node) is ast.Name:
        parts.append(node.id)  # type: ignore[attr-defined]
        parts.reverse()
        return parts
    return None


def call_arg(call: ast.Call, index: int | None, name: str | None = None) -> ast.expr | None:
    """The argument of ``call`` passed as keyword ``name`` or at position ``index`` (not behind a
    ``*args``, which would shift it); None when it is not passed."""
    if name is not None:
        for kw in call.keywords:
            if kw.arg == name:
                return kw.value
    args = call.args
    if index is not None and index < len(args) and \
            not any(isinstance(a, ast.Starred) for a in args[: index + 1]):
        return args[index]
    return None


# Imported names from these packages are never project symbols: not worth a reference.
EXTERNAL_PACKAGES = frozenset(sys.stdlib_module_names) | frozenset({
    "jax", "jaxlib", "flax", "optax", "numpy", "scipy", "chex", "orbax", "einops", "absl",
    "tensorflow", "torch", "ml_collections", "tensorstore", "transformers", "etils", "typing_extensions"})

# Names that star imports almost always bring in under these meanings.
STAR_CONVENTIONS = {"jax": "jax", "jnp": "jax.numpy", "nn": "flax.linen", "nnx": "flax.nnx",
                    "optax": "optax", "flax": "flax"}


@dataclass
class ImportMap:
    """Local name -> fully qualified name, for one module.

    ``module`` is the importing module's dotted name in the project (for relative imports).
    """

    module: str = ""
    is_package: bool = False
    names: dict[str, str] = field(default_factory=dict)
    star: bool = False  # `from x import *` seen: conventional names may come from it

    def add_import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.names[alias.asname] = alias.name
                else:
                    # `import jax.numpy` binds `jax`, and `jax.numpy` resolves through it.
                    top = alias.name.split(".", 1)[0]
                    self.names.setdefault(top, top)
            return
        base = self._from_base(node)
        if base is None:
            return
        for alias in node.names:
            if alias.name == "*":
                self.star = True
                continue
            self.names[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name

    def absolute(self, node: ast.ImportFrom) -> str | None:
        """The module ``from ... import`` reads from, relative imports resolved (None: above
        the project's top)."""
        return self._from_base(node)

    def _from_base(self, node: ast.ImportFrom) -> str | None:
        if not node.level:
            return node.module or ""
        parts = self.module.split(".") if self.module else []
        if not self.is_package:
            parts = parts[:-1]
        drop = node.level - 1
        if drop > len(parts):
            return None
        parts = parts[: len(parts) - drop] if drop else parts
        if node.module:
            parts = [*parts, node.module]
        return ".".join(p for p in parts if p)

    def qualify(self, node: ast.expr) -> str | None:
        parts = dotted(node)
        return self.qualify_parts(parts) if parts else None

    def qualify_parts(self, parts: list[str]) -> str | None:
        base = self.names.get(parts[0])
        if base is None:
            # `from common import *` re-exporting `jax`, `nn`...: the conventional spellings.
            base = STAR_CONVENTIONS.get(parts[0]) if self.star else None
            if base is None:
                return None
        if len(parts) == 1:
            return base
        return ".".join([base, *parts[1:]])


def string_tuple(node: ast.expr | None, consts: dict[str, ast.expr] | None = None) -> tuple | None:
    """A literal axis-name spec: ``"x"``, ``None``, ``("a", None, ("b", "c"))``; else None."""
    value = literal(node, consts)
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (tuple, list)) and all(
        v is None or isinstance(v, str) or (isinstance(v, (tuple, list)) and all(isinstance(x, str) for x in v))
        for v in value
    ):
        return tuple(tuple(v) if isinstance(v, list) else v for v in value)
    return None


_UNKNOWN = object()


def literal(node: ast.expr | None, consts: dict[str, ast.expr] | None = None, depth: int = 0):
    """Evaluate a literal built from constants, tuples, lists, ``+``, ``range(...)`` and names
    bound to literals.

    Returns ``None`` for a literal None and for anything it cannot evaluate; callers that need to
    tell them apart use :func:`literal_or_unknown`.
    """
    value = literal_or_unknown(node, consts, depth)
    return None if value is _UNKNOWN else value


def literal_or_unknown(node, consts=None, depth=0):
    if node is None or depth > 8:
        return _UNKNOWN
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.Tuple, ast.List)):
        items = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                inner = literal_or_unknown(elt.value, consts, depth + 1)
                if not isinstance(inner, (tuple, list)):
                    return _UNKNOWN
                items.extend(inner)
                continue
            v = literal_or_unknown(elt, consts, depth + 1)
            if v is _UNKNOWN:
                return _UNKNOWN
            items.append(v)
        return tuple(items) if isinstance(node, ast.Tuple) else list(items)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = literal_or_unknown(node.left, consts, depth + 1)
        right = literal_or_unknown(node.right, consts, depth + 1)
        if isinstance(left, (tuple, list)) and isinstance(right, (tuple, list)):
            return tuple(left) + tuple(right)
        return _UNKNOWN
    if isinstance(node, ast.Name) and consts is not None and node.id in consts:
        return literal_or_unknown(consts[node.id], consts, depth + 1)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("tuple", "list")
        and len(node.args) == 1
        and not node.keywords
    ):
        inner = literal_or_unknown(node.args[0], consts, depth + 1)
        if isinstance(inner, (tuple, list)):
            return tuple(inner) if node.func.id == "tuple" else list(inner)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" \
            and 1 <= len(node.args) <= 3 and not node.keywords:
        # `static_argnums=tuple(range(2, 19))`: a few small integers
        bounds = [literal_or_unknown(a, consts, depth + 1) for a in node.args]
        if all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
            values = range(*bounds)
            if len(values) <= 256:
                return tuple(values)
    return _UNKNOWN


def is_unknown(value) -> bool:
    return value is _UNKNOWN


def resolve_api(imports: ImportMap, node: ast.expr) -> api.Api | None:
    q = imports.qualify(node)
    return api.lookup(q) if q else None
