"""Where values land: bare PartitionSpecs, single devices, literal array sizes, model state,
optax transformations.

* :func:`bare_specs`: a sharding argument that holds ``PartitionSpec``s rather than
  ``Sharding``s (``P(...)``, ``nn.logical_to_mesh(...)``, containers of them, names bound to them).
* :func:`single_device`: an expression that is one ``jax.Device`` (``jax.devices()[0]``).
* :func:`creation_size` / :func:`host_array_size` / :func:`converted_size`: the bytes of an
  array made with a literal shape (``jnp.zeros((n, m))``, ``np.ones(...)``, ``jnp.asarray`` of
  one), when shardlint can compute them.
* :func:`model_state`: a value that is model state (Linen ``model.init(...)``, a ``TrainState``,
  ``tx.init(...)`` of an optax transformation, ``nnx.state(...)``).
* :func:`optax_transform`: an expression that is an optax ``GradientTransformation``.
* :func:`places_outputs`: a function body that constrains or places the values it makes.
"""

from __future__ import annotations

import ast

from shardlint.semantics.catalog.api import Role
from shardlint.semantics.catalog.names import call_arg
from shardlint.semantics.file.bindings import follow
from shardlint.semantics.file.facts import FileFacts, Scope
from shardlint.semantics.file.meshes import literal_shape
from shardlint.semantics.flow.models import is_train_state_create, linen_instance
from shardlint.semantics.flow.project import ProjectIndex

MIB = 1 << 20
# APIs whose result is a PartitionSpec or a tree of them (never a Sharding).
SPEC_PRODUCERS = frozenset({"flax.linen.logical_to_mesh", "flax.linen.logical_to_mesh_axes",
                            "flax.linen.get_partition_spec", "flax.nnx.get_partition_spec"})
JNP_CREATORS = frozenset({"jax.numpy.zeros", "jax.numpy.ones", "jax.numpy.full",
                          "jax.numpy.empty"})
JNP_CONVERTERS = frozenset({"jax.numpy.asarray", "jax.numpy.array"})
NP_CREATORS = frozenset({"numpy.zeros", "numpy.ones", "numpy.full", "numpy.empty"})
DEVICE_LISTS = frozenset({"jax.devices", "jax.local_devices"})
NNX_STATE = frozenset({"flax.nnx.state", "flax.nnx.split"})
# Bytes per element on the device. jax canonicalises 64-bit types to 32 bits unless x64 is on.
_ITEMSIZE = {"bool": 1, "bool_": 1, "int8": 1, "uint8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1,
             "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2, "int32": 4, "uint32": 4,
             "float32": 4, "int64": 4, "uint64": 4, "float64": 4, "complex64": 8,
             "complex128": 8, "int": 4, "float": 4, "complex": 8}


# ---- PartitionSpecs ----------------------------------------------------------------------------------
def bare_specs(facts: FileFacts, node: ast.expr | None, scope: Scope,
               depth: int = 0) -> ast.expr | None:
    """The expression that makes a PartitionSpec inside a sharding argument, else None."""
    if node is None or depth > 8:
        return None
    if isinstance(node, ast.Name):
        value, vscope = follow(facts, node, scope)
        return bare_specs(facts, value, vscope, depth + 1) if value is not None else None
    if isinstance(node, ast.Call):
        known = facts.resolve(node.func) if isinstance(node.func, (ast.Name, ast.Attribute)) \
            else None
        if known is not None and (known.role == Role.PARTITION_SPEC or
                                  known.name in SPEC_PRODUCERS):
            return node
        return None
    if isinstance(node, (ast.Tuple, ast.List)):
        for elt in node.elts:
            found = bare_specs(facts, elt.value if isinstance(elt, ast.Starred) else elt, scope,
                               depth + 1)
            if found is not None:
                return found
        return None
    if isinstance(node, ast.Dict):
        for v in node.values:
            found = bare_specs(facts, v, scope, depth + 1)
            if found is not None:
                return found
    return None


# ---- devices -----------------------------------------------------------------------------------------
def single_device(facts: FileFacts, node: ast.expr | None, scope: Scope,
                  depth: int = 0) -> ast.expr | None:
    """``jax.devices()[i]`` / ``jax.local_devices()[i]`` (or a name bound to one, or to the list
    then indexed). Lists for a named backend (``jax.devices("cpu")``) are host placement on
    purpose: not counted."""
    if node is None or depth > 6:
        return None
    if isinstance(node, ast.Name):
        value, vscope = follow(facts, node, scope)
        return single_device(facts, value, vscope, depth + 1) if value is not None else None
    if not isinstance(node, ast.Subscript) or isinstance(node.slice, ast.Slice):
        return None
    base: ast.expr | None = node.value
    if isinstance(base, ast.Name):
        base, _ = follow(facts, base, scope)
    if isinstance(base, ast.Call) and device_list_call(facts, base):
        return node
    return None


def device_list_call(facts: FileFacts, call: ast.Call) -> bool:
    """``jax.devices()`` / ``jax.local_devices()`` with no backend argument."""
    known = facts.resolve(call.func) if isinstance(call.func, (ast.Name, ast.Attribute)) else None
    return known is not None and known.name in DEVICE_LISTS and not call.args and \
        not any(kw.arg in ("backend",) for kw in call.keywords)


# ---- sizes -------------------------------------------------------------------------------------------
def itemsize(facts: FileFacts, node: ast.expr | None, scope: Scope, default: int = 4) -> int | None:
    """Bytes per element of a dtype argument; ``default`` when none is given; None when the
    dtype is an expression shardlint cannot read."""
    if node is None:
        return default
    value, _ = follow(facts, node, scope) if isinstance(node, ast.Name) else (node, scope)
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        return _ITEMSIZE.get(value.value)
    if isinstance(value, ast.Name):
        return _ITEMSIZE.get(value.id) if value.id in ("bool", "int", "float", "complex") else None
    if isinstance(value, ast.Attribute):
        q = facts.qualify(value)
        if q and q.split(".", 1)[0] in ("jax", "numpy", "ml_dtypes"):
            return _ITEMSIZE.get(q.rsplit(".", 1)[-1])
    return None


def creation_size(facts: FileFacts, call: ast.Call, scope: Scope) -> tuple[int, bool] | None:
    """Bytes of ``jnp.zeros/ones/full/empty`` or ``np.zeros/ones/full/empty`` with a literal
    shape, and whether that is exact: when the dtype cannot be read the smallest dtype is
    assumed, a lower bound."""
    known = facts.resolve(call.func) if isinstance(call.func, (ast.Name, ast.Attribute)) else None
    if known is None or known.name not in JNP_CREATORS | NP_CREATORS:
        return None
    count = _count(facts, call_arg(call, 0, "shape"), scope)
    if count is None:
        return None
    dtype_index = 2 if known.name.endswith(".full") else 1
    size = itemsize(facts, call_arg(call, dtype_index, "dtype"), scope)
    return count * (size if size is not None else 1), size is not None


def _count(facts: FileFacts, shape: ast.expr | None, scope: Scope) -> int | None:
    dims = literal_shape(facts, shape, scope)
    if dims is None or any(d < 0 for d in dims):
        return None
    n = 1
    for d in dims:
        n *= d
    return n


def creation_nbytes(facts: FileFacts, call: ast.Call, scope: Scope) -> int | None:
    found = creation_size(facts, call, scope)
    return found[0] if found is not None else None


def host_array_size(facts: FileFacts, node: ast.expr | None, scope: Scope,
                    use: ast.AST | None = None) -> tuple[int, bool] | None:
    """Size of a NumPy array made with a literal shape (``np.zeros((n, m))``), through names.
    Arrays made by jnp are left out: they are device arrays already (and reported themselves)."""
    value, vscope = follow(facts, node, scope, use) if isinstance(node, ast.Name) \
        else (node, scope)
    if not isinstance(value, ast.Call):
        return None
    known = facts.resolve(value.func) if isinstance(value.func, (ast.Name, ast.Attribute)) \
        else None
    if known is None or known.name not in NP_CREATORS:
        return None
    return creation_size(facts, value, vscope)


def converted_size(facts: FileFacts, call: ast.Call, scope: Scope) -> tuple[int, bool] | None:
    """``jnp.asarray(np.zeros(shape))``: the bytes on the device (``dtype=`` of the conversion
    wins over the source's)."""
    source = call_arg(call, 0, "a") or call_arg(call, None, "object")
    found = host_array_size(facts, source, scope, call)
    dtype = call_arg(call, 1, "dtype")
    if found is None or dtype is None:
        return found
    size = itemsize(facts, dtype, scope)
    value, vscope = follow(facts, source, scope, call) if isinstance(source, ast.Name) \
        else (source, scope)
    count = _count(facts, call_arg(value, 0, "shape"), vscope) if isinstance(value, ast.Call) else None
    if size is None or count is None:
        return found
    return count * size, True


def state_nbytes(facts: FileFacts, node: ast.expr | None, scope: Scope,
                 use: ast.AST | None = None, depth: int = 0) -> int | None:
    """At most how many bytes a value holds, where every part of it is visibly built: arrays
    made with a literal shape (``jnp.zeros((16, 16))``, an unread dtype counted as 8 bytes),
    numbers, and dicts, tuples and lists of those, through names. None: some part is not known
    (a function's result, a parameter, a loaded checkpoint)."""
    if node is None or depth > 8:
        return None
    if isinstance(node, ast.Name):
        value, vscope = follow(facts, node, scope, use)
        return state_nbytes(facts, value, vscope, None, depth + 1) if value is not None else None
    if isinstance(node, ast.Constant):
        return 8 if isinstance(node.value, (int, float, complex, bool)) else None
    if isinstance(node, ast.Dict):
        parts = [state_nbytes(facts, v, scope, use, depth + 1) for v in node.values]
        return sum(parts) if None not in parts and None not in node.keys else None  # type: ignore[arg-type]
    if isinstance(node, (ast.Tuple, ast.List)):
        parts = [state_nbytes(facts, v, scope, use, depth + 1) for v in node.elts]
        return sum(parts) if None not in parts else None  # type: ignore[arg-type]
    if isinstance(node, ast.Call):
        found = creation_size(facts, node, scope)
        if found is None:
            return None
        size, exact = found
        return size if exact else size * 8
    return None


def mib(n: int) -> str:
    return f"{n / MIB:,.0f} MiB" if n < 1 << 30 else f"{n / (1 << 30):,.1f} GiB"


# ---- model state -------------------------------------------------------------------------------------
def model_state(facts: FileFacts, project: ProjectIndex, node: ast.expr | None, scope: Scope,
                depth: int = 0) -> str | None:
    """What model state an expression is (for messages), or None."""
    if node is None or depth > 6:
        return None
    if isinstance(node, ast.Name):
        value, vscope = follow(facts, node, scope)
        return model_state(facts, project, value, vscope, depth + 1) if value is not None else None
    if isinstance(node, (ast.Subscript, ast.Attribute)) and not isinstance(node, ast.Call):
        if isinstance(node, ast.Attribute) and node.attr not in ("params", "opt_state"):
            return None
        return model_state(facts, project, node.value, scope, depth + 1)
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    if isinstance(func, ast.Call):  # `jax.jit(model.init)(key, x)`
        known = facts.resolve(func.func) if isinstance(func.func, (ast.Name, ast.Attribute)) \
            else None
        if known is not None and known.role == Role.JIT and func.args:
            inner = func.args[0]
            if isinstance(inner, ast.Attribute) and inner.attr in ("init", "init_with_output"):
                return _init_of(facts, project, inner, scope)
        return None
    if isinstance(func, ast.Attribute) and func.attr in ("init", "init_with_output"):
        return _init_of(facts, project, func, scope)
    if is_train_state_create(facts, project, node, scope):
        return "a TrainState"
    known = facts.resolve(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
    if known is not None and known.name in NNX_STATE:
        return "NNX model state"
    return None


def _init_of(facts: FileFacts, project: ProjectIndex, func: ast.Attribute,
             scope: Scope) -> str | None:
    cls = linen_instance(facts, project, func.value, scope)
    if cls is not None:
        return f"the variables of `{cls}`"
    if optax_transform(facts, func.value, scope):
        return "optimizer state"
    return None


# ---- optax -------------------------------------------------------------------------------------------
def optax_transform(facts: FileFacts, node: ast.expr | None, scope: Scope, depth: int = 0) -> bool:
    """An optax GradientTransformation: ``optax.adam(...)``, ``optax.chain(...)``,
    ``optax.inject_hyperparams(optax.adam)(...)``, a name bound to one, or a parameter
    annotated ``optax.GradientTransformation``."""
    if node is None or depth > 6:
        return False
    if isinstance(node, ast.Name):
        found = scope.lookup(node.id)
        if found is not None and found[0].kind == "function" and node.id in found[0].params:
            ann = found[0].annotations.get(node.id)
            q = facts.qualify(ann) if isinstance(ann, (ast.Name, ast.Attribute)) else None
            return q is not None and q.startswith("optax.") and "GradientTransformation" in q
        value, vscope = follow(facts, node, scope)
        return optax_transform(facts, value, vscope, depth + 1) if value is not None else False
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Call):  # `optax.inject_hyperparams(optax.adam)(lr)`
            func = func.func
        q = facts.qualify(func) if isinstance(func, (ast.Name, ast.Attribute)) else None
        return q is not None and q.split(".", 1)[0] == "optax" and \
            q.rsplit(".", 1)[-1] not in _OPTAX_NOT_TRANSFORMS
    return False


# optax functions that return arrays or updates, not a transformation.
_OPTAX_NOT_TRANSFORMS = frozenset({"apply_updates", "incremental_update", "periodic_update",
                                   "global_norm", "safe_norm", "tree_utils"})


# ---- outputs placed by the function itself ------------------------------------------------------------
def places_outputs(facts: FileFacts, node: ast.AST) -> bool:
    """The body constrains or places values itself (``with_sharding_constraint``,
    ``device_put(x, sharding)``), also inside a lambda it maps over a tree."""
    for n in ast.walk(node):
        if not isinstance(n, ast.Call) or not isinstance(n.func, (ast.Name, ast.Attribute)):
            continue
        known = facts.resolve(n.func)
        if known is None:
            continue
        if known.role in (Role.SHARDING_CONSTRAINT, Role.LOGICAL_CONSTRAINT) or \
                known.name == "jax.sharding.reshard":
            return True
        if known.name == "jax.device_put" and (len(n.args) > 1 or n.keywords):
            return True
    return False
