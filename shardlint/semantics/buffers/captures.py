"""Arrays a compiled function reads from an enclosing scope instead of taking them as arguments.

:func:`array_source` says whether an expression creates an array -- a ``jnp`` constructor
(``jnp.zeros``, ``jnp.asarray``, ``jnp.arange``, ...), a NumPy array (``np.ones``, ``np.load``,
``np.random.rand``, ...), ``jax.device_put(...)`` or a ``jax.random`` sample (not a key) --
and, when its shape is literal, how many elements it has.

:func:`captured_arrays` lists the free names of a jit site's function (a ``def`` of this file or
a lambda) that resolve, outside the function, to a binding whose every value is such an array.
A name only read for metadata (``W.shape``, ``W.dtype``, ``len(W)``) is not captured: tracing
reads those as Python values.
"""

from __future__ import annotations

import ast
import math
from collections import ChainMap
from dataclasses import dataclass

from shardlint.semantics.flow.liveness import METADATA
from shardlint.semantics.catalog.names import call_arg, is_unknown, literal_or_unknown
from shardlint.semantics.file.execution import compiled_function
from shardlint.semantics.file.facts import FileFacts, JitSite, Scope
from shardlint.syntax import nodes, walk_body

_CONSTRUCTORS = frozenset({
    "array", "asarray", "zeros", "ones", "full", "empty", "zeros_like", "ones_like", "full_like",
    "empty_like", "arange", "linspace", "logspace", "geomspace", "eye", "identity", "tri", "load",
    "loadtxt", "fromfile", "frombuffer", "genfromtxt", "concatenate", "stack", "tile",
    "broadcast_to", "outer", "kron"})
# jax.random samplers -> index of their `shape` argument (None: shape comes from another array).
_JAX_RANDOM = {
    "normal": 1, "uniform": 1, "bernoulli": 2, "randint": 1, "truncated_normal": 3,
    "gumbel": 1, "laplace": 1, "logistic": 1, "exponential": 1, "cauchy": 1, "rademacher": 1,
    "bits": 1, "choice": 2, "permutation": None, "categorical": None, "orthogonal": None,
    "beta": None, "gamma": None, "dirichlet": None, "poisson": None, "multivariate_normal": None,
    "t": None, "ball": None}
# numpy.random samplers -> index of their `size` argument ("*": the dimensions are the arguments).
_NP_RANDOM: dict[str, int | str | None] = {
    "rand": "*", "randn": "*", "random": 0, "random_sample": 0, "standard_normal": 0,
    "normal": 2, "uniform": 2, "randint": 2, "choice": 1, "permutation": None}


@dataclass(frozen=True)
class ArraySource:
    call: ast.Call
    api: str  # qualified name of the constructor
    elements: int | None  # element count when the shape is literal


def _count(value) -> int | None:
    """Elements of a literal shape (an int or a tuple of ints)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, (tuple, list)) and all(isinstance(v, int) and not isinstance(v, bool)
                                                for v in value):
        return math.prod(max(v, 0) for v in value)
    return None


def _literal_size(value) -> int | None:
    """Elements of a literal array value (`[[1, 2], [3, 4]]`, `0.5`)."""
    if isinstance(value, (int, float, complex, bool)):
        return 1
    if isinstance(value, (tuple, list)):
        total = 0
        for v in value:
            n = _literal_size(v)
            if n is None:
                return None
            total += n
        return total
    return None


def array_source(facts: FileFacts, expr: ast.expr, scope: Scope,
                 depth: int = 0) -> ArraySource | None:
    if not isinstance(expr, ast.Call) or not isinstance(expr.func, (ast.Name, ast.Attribute)) \
            or depth > 4:
        return None
    q = facts.qualify(expr.func)
    if q is None:
        return None
    consts = ChainMap(_literal_defaults(scope), facts.consts_for(scope))  # (defaults first)

    def lit(node: ast.expr | None):
        if node is None:
            return None
        if isinstance(node, (ast.Tuple, ast.List)):  # (tokens.shape[0], 1)
            parts = [lit(e) for e in node.elts]
            return tuple(parts) if all(p is not None for p in parts) else None
        dim = _dimension(facts, node, scope, depth)
        if dim is not None:
            return dim
        value = literal_or_unknown(node, consts)
        return None if is_unknown(value) else value

    def inner(node: ast.expr | None) -> int | None:
        return _placed_size(facts, node, expr, scope, depth) if node is not None else None

    pkg, _, name = q.rpartition(".")
    if pkg in ("jax.numpy", "numpy") and name in _CONSTRUCTORS:
        return ArraySource(expr, q, _constructor_size(name, expr, lit, inner))
    if q == "jax.device_put" and expr.args:
        return ArraySource(expr, q, inner(expr.args[0]))
    if pkg == "jax.random" and name in _JAX_RANDOM:
        index = _JAX_RANDOM[name]
        if index is None:
            return ArraySource(expr, q, None)
        shape = call_arg(expr, index, "shape")
        return ArraySource(expr, q, 1 if shape is None else _count(lit(shape)))
    if pkg == "numpy.random" and name in _NP_RANDOM:
        where = _NP_RANDOM[name]
        if where == "*":
            dims = [lit(a) for a in expr.args]
            return ArraySource(expr, q, _count(tuple(dims)) if all(isinstance(d, int) for d in dims)
                               else None)
        if where is None:
            return ArraySource(expr, q, None)
        size = call_arg(expr, where if isinstance(where, int) else None, "size")
        return ArraySource(expr, q, 1 if size is None else _count(lit(size)))
    return None


def _dimension(facts: FileFacts, node: ast.expr, scope: Scope, depth: int) -> int | None:
    """``x.shape[i]`` of a name bound once to an array of literal shape
    (``tokens = jax.random.randint(k, (2, 32), 0, n)``: ``tokens.shape[1]`` is 32)."""
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute)
            and node.value.attr == "shape" and isinstance(node.value.value, ast.Name)
            and isinstance(node.slice, ast.Constant) and type(node.slice.value) is int) \
            or depth > 4:
        return None
    found = scope.lookup(node.value.value.id)
    if found is None or len(found[1]) != 1 or not isinstance(found[1][0], ast.Call):
        return None
    owner, (value,) = found
    shape = _shape_of(facts, value, owner, depth + 1)
    i = node.slice.value
    return shape[i] if shape is not None and -len(shape) <= i < len(shape) else None


def _shape_of(facts: FileFacts, call: ast.Call, scope: Scope, depth: int) -> tuple | None:
    """The literal shape of a constructor's or sampler's result."""
    if not isinstance(call.func, (ast.Name, ast.Attribute)):
        return None
    q = facts.qualify(call.func)
    pkg, _, name = (q or "").rpartition(".")
    if pkg in ("jax.numpy", "numpy") and name in ("zeros", "ones", "empty", "full"):
        shape = call_arg(call, 0, "shape")
    elif pkg == "jax.random" and isinstance(_JAX_RANDOM.get(name), int):
        shape = call_arg(call, _JAX_RANDOM[name], "shape")  # type: ignore[arg-type]
    else:
        return None
    if shape is None:
        return None
    consts = ChainMap(_literal_defaults(scope), facts.consts_for(scope))
    if isinstance(shape, (ast.Tuple, ast.List)):
        dims = [literal_or_unknown(e, consts) for e in shape.elts]
    else:
        dims = [literal_or_unknown(shape, consts)]
        if isinstance(dims[0], tuple):
            dims = list(dims[0])
    if all(type(d) is int for d in dims):
        return tuple(dims)
    return None


def _placed_size(facts: FileFacts, arg: ast.expr, call: ast.Call, scope: Scope,
                 depth: int) -> int | None:
    """Elements of an array handed to a call (what ``jax.device_put`` places, what
    ``jnp.asarray`` converts): an array built inline, or a name whose other bindings are arrays
    of known size (``x = jax.random.normal(k, (8, 20))`` then ``x = jax.device_put(x, sh)``)."""
    if isinstance(arg, ast.Subscript) and _adds_axes(arg.slice):
        arg = arg.value  # `jnp.arange(n)[None, :]`: the same elements, another shape
    if isinstance(arg, ast.Call):
        inner = array_source(facts, arg, scope, depth + 1)
        return inner.elements if inner else None
    if isinstance(arg, ast.Name) and arg.id in scope.bindings:
        sizes = []
        for v in scope.bindings[arg.id]:
            if v is call:
                continue
            inner = array_source(facts, v, scope, depth + 1)
            if inner is None or inner.elements is None:
                return None
            sizes.append(inner.elements)
        return max(sizes) if sizes else None
    return None


def _adds_axes(index: ast.expr) -> bool:
    """An index of only ``None``, ``...`` and ``:``: it adds axes and keeps every element."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return all((isinstance(p, ast.Constant) and (p.value is None or p.value is Ellipsis))
               or (isinstance(p, ast.Slice) and p.lower is None and p.upper is None
                   and p.step is None) for p in parts)


def _literal_defaults(scope: Scope) -> dict[str, ast.expr]:
    """Parameters of a function never rebound in it, with literal defaults
    (``def test_x(self, dim=16)``): their default sizes an array built from them."""
    fn = scope.node
    if scope.kind != "function" or not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return {}
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
    pairs += [(x, d) for x, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    return {x.arg: d for x, d in pairs
            if isinstance(d, ast.Constant) and len(scope.bindings.get(x.arg, [])) == 1}


def _constructor_size(name: str, call: ast.Call, lit, inner) -> int | None:
    """Elements of a constructor's result when its shape is literal; ``inner`` sizes an array
    argument (``jnp.asarray(np.arange(64))``, ``jnp.tile(jnp.arange(8), 8)``)."""
    if name in ("zeros", "ones", "empty"):
        return _count(lit(call_arg(call, 0, "shape")))
    if name == "full":
        return _count(lit(call_arg(call, 0, "shape")))
    if name in ("array", "asarray"):
        arg = call_arg(call, 0, "object" if name == "array" else "a")
        found = _literal_size(lit(arg))
        return found if found is not None else inner(arg)
    if name in ("zeros_like", "ones_like", "empty_like", "full_like"):
        if call_arg(call, 3 if name == "full_like" else 2, "shape") is not None:
            return None
        return inner(call_arg(call, 0, "a"))
    if name == "broadcast_to":
        return _count(lit(call_arg(call, 1, "shape")))
    if name == "tile":
        n, reps = inner(call_arg(call, 0, "A")), _count(lit(call_arg(call, 1, "reps")))
        return n * reps if n is not None and reps is not None else None
    if name in ("concatenate", "stack"):
        parts = call_arg(call, 0, "arrays")
        if not isinstance(parts, (ast.List, ast.Tuple)) or not parts.elts:
            return None
        sizes = [inner(p) for p in parts.elts]
        return sum(sizes) if all(n is not None for n in sizes) else None  # type: ignore[misc]
    if name == "arange":
        nums = [lit(a) for a in call.args[:3]]
        if any(kw.arg != "dtype" for kw in call.keywords) or not nums \
                or not all(isinstance(n, (int, float)) for n in nums):
            return None
        start, stop, step = (0, nums[0], 1) if len(nums) == 1 else \
            (nums[0], nums[1], nums[2] if len(nums) > 2 else 1)
        return max(math.ceil((stop - start) / step), 0) if step else None
    if name in ("linspace", "logspace", "geomspace"):
        num = call_arg(call, 2, "num")
        return 50 if num is None else _count(lit(num))
    if name in ("eye", "identity"):
        n = lit(call_arg(call, 0, "N" if name == "eye" else "n"))
        m = lit(call_arg(call, 1, "M")) if name == "eye" else None
        if not isinstance(n, int):
            return None
        return n * (m if isinstance(m, int) else n)
    return None


# ---- free names of a compiled function -----------------------------------------------------------
@dataclass
class Capture:
    name: str
    use: ast.Name  # the first read inside the compiled function
    owner: Scope  # the scope that binds the name
    source: ArraySource
    function: ast.AST  # the compiled def or lambda


def _bound_inside(node: ast.AST) -> set[str]:
    """Names that are local somewhere inside ``node`` (its own and nested parameters,
    assignment and loop targets, comprehension variables, nested defs, imports)."""
    bound: set[str] = set()
    outer: set[str] = set()  # `global` / `nonlocal`: they name the enclosing binding
    for n in walk_body(node):  # (not its own decorators: they bind nothing inside)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            _bind_function(n, bound, top=n is node)
        elif isinstance(n, ast.ClassDef):
            bound.add(n.name)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            bound.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".", 1)[0] for a in n.names)
        elif isinstance(n, (ast.Global, ast.Nonlocal)):
            outer.update(n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            bound.add(n.name)
    return bound - outer


def _bind_function(n: ast.AST, bound: set[str], top: bool) -> None:
    a = n.args  # type: ignore[attr-defined]
    bound.update(x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs])
    bound.update(x.arg for x in (a.vararg, a.kwarg) if x is not None)
    if not isinstance(n, ast.Lambda) and not top:
        bound.add(n.name)  # type: ignore[attr-defined]


def _metadata_reads(node: ast.AST) -> set[int]:
    """ids of Name nodes read only for metadata: ``x.shape``, ``x.dtype``, ``len(x)``."""
    out: set[int] = set()
    for n in nodes(node):
        if isinstance(n, ast.Attribute) and n.attr in METADATA and isinstance(n.value, ast.Name):
            out.add(id(n.value))
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "len" \
                and len(n.args) == 1 and isinstance(n.args[0], ast.Name):
            out.add(id(n.args[0]))
    return out


def captured_arrays(facts: FileFacts, site: JitSite) -> list[Capture]:
    fn = compiled_function(facts, site)
    if fn is not None and isinstance(fn.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        node: ast.AST = fn.node
        lookup_from = fn
        body: list[ast.AST] = [*fn.node.body]
    elif isinstance(site.target, ast.Lambda):
        node = site.target
        lookup_from = site.scope
        body = [site.target.body]
    else:
        return []
    bound = _bound_inside(node)
    metadata = set().union(*(_metadata_reads(b) for b in body)) if body else set()
    first: dict[str, ast.Name] = {}
    for b in body:
        for n in nodes(b):
            if type(n) is ast.Name and type(n.ctx) is ast.Load and n.id not in bound \
                    and id(n) not in metadata:
                prev = first.get(n.id)
                if prev is None or (n.lineno, n.col_offset) < (prev.lineno, prev.col_offset):
                    first[n.id] = n
    out: list[Capture] = []
    for name, use in sorted(first.items(), key=lambda kv: (kv[1].lineno, kv[1].col_offset)):
        found = lookup_from.lookup(name)
        if found is None:
            continue
        owner, values = found
        if owner is fn or not values:
            continue
        sources = [array_source(facts, v, owner) for v in values]
        if any(s is None for s in sources):
            continue
        biggest = max(sources, key=lambda s: -1 if s.elements is None else s.elements)  # type: ignore[union-attr]
        unknown = any(s.elements is None for s in sources)  # type: ignore[union-attr]
        out.append(Capture(name, use, owner, biggest if not unknown else  # type: ignore[arg-type]
                           next(s for s in sources if s.elements is None), node))  # type: ignore[union-attr]
    return out


def read_in_nested(fn: ast.AST, name: str) -> bool:
    """Whether a function or lambda defined inside ``fn`` reads ``name`` from ``fn``'s scope
    (``def branch(_): return f(state)`` handed to ``jax.lax.cond``): the value may reach the
    result through it, which :class:`LocalFlow` does not follow."""
    inner = getattr(fn, "body", fn)
    body = inner if isinstance(inner, list) else [inner]
    for stmt in body:
        for n in ast.walk(stmt):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if name in _bound_inside_params(n):
                    continue
                if any(isinstance(x, ast.Name) and x.id == name and isinstance(x.ctx, ast.Load)
                       for x in ast.walk(n)):
                    return True
    return False


def _bound_inside_params(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    a = fn.args
    return {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs,
                            *(v for v in (a.vararg, a.kwarg) if v is not None)]}
