"""SHL206 hard-coded-mesh-shape."""

from __future__ import annotations

import ast
import math
from collections.abc import Iterator

from shardlint.rules.base import Finding, Rule, example, register
from shardlint.semantics.catalog.api import Role
from shardlint.semantics.file.bindings import follow
from shardlint.semantics.file.facts import Scope
from shardlint.semantics.file.meshes import (
    CREATE_DEVICE_MESH,
    MAKE_MESH,
    constructions,
    int_value,
    is_construction,
    literal_shape,
    reaches,
)
from shardlint.semantics.sharding.placement import DEVICE_LISTS

# A file that checks the device count has made the shape a stated assumption.
_COUNTS = ("jax.device_count", "jax.devices", "jax.local_device_count", "jax.local_devices")


@register
class HardCodedMeshShape(Rule):
    code = "SHL206"
    name = "hard-coded-mesh-shape"
    severity = "info"
    enabled_by_default = False
    summary = "A mesh shape written for one machine: on another it uses a subset of the devices or fails."
    what = """
Flags meshes whose size is fixed in the code rather than derived from the machine:

* a literal shape in `jax.make_mesh((2, 2), ...)` or `mesh_utils.create_device_mesh((4, 2))`
  (integers, names bound to them, arithmetic on them);
* a slice of the device list handed to a mesh: `Mesh(np.array(jax.devices()[:2]), ...)`;
* a literal reshape of the device list: `Mesh(np.array(jax.devices()).reshape(4, 4), ...)`.

Not flagged: one-device meshes (`(1,)`, a test fixture), shapes computed from
`jax.device_count()`, and files that check the device count themselves (an `assert` or `if`
on `jax.device_count()` / `len(jax.devices())`), which makes the shape a stated assumption.

Off by default and only advice (info): literal shapes are what tutorials, tests and scripts for
a known machine write, and whether one is wrong depends on the device count, which a static
check cannot know. The memory check (`shardlint memory --devices ...`) measures what a mesh
really spans. Enable it with `select = ["SHL206"]` for code meant to run on several machines.
"""
    why = """
Nothing warns when a mesh covers fewer devices than the machine has. Reproduced on 8 devices:
`jax.make_mesh((2, 2), ...)` gives a mesh of 4 devices and the other 4 stay idle, while every
array is sized for 4 (twice the per-device memory you expected); `Mesh(jax.devices()[:2], ...)`
has size 2. On fewer devices the same code fails: `ValueError: Number of devices 8 must be >= the
product of mesh_shape (4, 4)` or `cannot reshape array of size 8 into shape (4,4)`.
"""
    use_instead = """
```python
tp = 2
mesh = jax.make_mesh((jax.device_count() // tp, tp), ("data", "model"),
                     axis_types=(AxisType.Auto,) * 2)
assert mesh.size == jax.device_count()
```
"""
    versions = "All versions."
    VALID = [
        example("""
            import jax

            mesh = jax.make_mesh((jax.device_count() // 2, 2), ("data", "model"))
        """),
        example("""
            import jax
            import numpy as np
            from jax.sharding import Mesh

            mesh = Mesh(np.array(jax.devices()[:1]), ("data",))   # one device: a test fixture
            single = jax.make_mesh((1,), ("data",))
        """, title="one-device meshes"),
        example("""
            import jax

            assert jax.device_count() == 8, "this script is written for one 8-GPU host"
            mesh = jax.make_mesh((4, 2), ("data", "model"))
        """, title="the device count is checked"),
        example("""
            import jax
            import numpy as np
            from jax.sharding import Mesh

            tp = 4
            mesh = Mesh(np.array(jax.devices()).reshape(-1, tp), ("data", "model"))
        """, title="a reshape that keeps every device"),
    ]
    INVALID = [
        example("""
            import jax

            mesh = jax.make_mesh((2, 2), ("data", "model"))  # expect: SHL206
        """),
        example("""
            import jax
            import numpy as np
            from jax.sharding import Mesh

            mesh = Mesh(np.array(jax.devices()[:2]), ("x",))  # expect: SHL206
        """, title="a slice of the devices"),
        example("""
            import jax
            import numpy as np
            from jax import sharding

            devices = np.asarray(jax.devices()).reshape(4, 4)
            mesh = sharding.Mesh(devices, ("data", "model"))  # expect: SHL206
        """, title="a literal reshape, through a name"),
        example("""
            from jax.experimental import mesh_utils
            from jax.sharding import Mesh

            DATA, MODEL = 4, 2
            mesh = Mesh(mesh_utils.create_device_mesh((DATA, MODEL)), ("data", "model"))  # expect: SHL206
        """, title="create_device_mesh with constants"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        return bool(facts.roles & {Role.MESH, Role.DEVICE_MESH})

    def check(self) -> Iterator[Finding]:
        facts = self.facts
        if self._count_checked():
            return
        stop = is_construction(facts)
        for con in constructions(facts):
            if con.api_name in (MAKE_MESH, CREATE_DEVICE_MESH):
                shape = literal_shape(facts, con.shape, con.scope)
                if shape is not None and all(d > 0 for d in shape) and math.prod(shape) > 1:
                    yield self.finding(con.call, self._shape_message(con.api_name, shape))
                    continue
            found = reaches(facts, con.devices, con.scope, self._subset, stop)
            if found is not None:
                yield self.finding(con.call, self._subset_message(found))

    def _subset(self, node: ast.AST, scope: Scope) -> bool:
        """A slice of the device list (more than one device), or a literal reshape of it."""
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Slice):
            sl = node.slice
            if sl.upper is None or sl.lower is not None or sl.step is not None:
                return False
            upper = int_value(self.facts, sl.upper, scope)
            return (upper is None or upper > 1) and self._device_list(node.value, scope)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "reshape" and node.args:
            args = node.args[0] if len(node.args) == 1 else ast.Tuple(elts=node.args)
            shape = literal_shape(self.facts, args, scope)
            return shape is not None and all(d > 0 for d in shape) and math.prod(shape) > 1 \
                and reaches(self.facts, node.func.value, scope,
                            lambda n, s: isinstance(n, ast.Call) and self._is_list(n)) is not None
        return False

    def _device_list(self, node: ast.expr, scope: Scope) -> bool:
        value, _ = follow(self.facts, node, scope) if isinstance(node, ast.Name) else (node, scope)
        return isinstance(value, ast.Call) and self._is_list(value)

    def _is_list(self, call: ast.Call) -> bool:
        known = self.facts.resolve(call.func) if isinstance(call.func, (ast.Name, ast.Attribute)) \
            else None
        return known is not None and known.name in DEVICE_LISTS

    def _count_checked(self) -> bool:
        for c in self.facts.calls_of(*_COUNTS):
            stmt = c.stmt
            if isinstance(stmt, ast.Assert):
                return True
            if isinstance(stmt, (ast.If, ast.While)) and \
                    any(n is c.node for n in ast.walk(stmt.test)):
                return True
        return False

    def _shape_message(self, api_name: str, shape: tuple[int, ...]) -> str:
        n = math.prod(shape)
        short = api_name.rsplit(".", 1)[-1]
        if api_name == MAKE_MESH:
            return (f"The mesh shape {shape} is hard-coded for {n} devices: on a machine with "
                    f"more, `{short}` silently uses only the first {n} (reproduced: (2, 2) on 8 "
                    f"devices gives a mesh of 4) and each array is spread over fewer devices "
                    f"than you think; with fewer it raises; derive it from `jax.device_count()`")
        return (f"The mesh shape {shape} is hard-coded for exactly {n} devices: `{short}` raises "
                f"on any other device count; derive it from `jax.device_count()`")

    def _subset_message(self, found: ast.AST) -> str:
        text = self.text(found)  # type: ignore[arg-type]
        if isinstance(found, ast.Subscript):
            return (f"`{text}` builds the mesh from a fixed subset of the devices: on a larger "
                    f"machine the rest stay idle (reproduced: `jax.devices()[:2]` on 8 devices "
                    f"gives a mesh of 2); use every device or assert the count")
        return (f"`{text}` fixes the device grid: it raises on any other device count "
                f"(\"cannot reshape array of size 8 into shape (4,4)\"); reshape with `-1` or "
                f"derive the shape from `jax.device_count()`")
