"""SHL205 local-devices-mesh."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from shardlint.rules._versions import needs_note
from shardlint.rules.base import Finding, Related, Rule, example, register
from shardlint.semantics.catalog.api import Role
from shardlint.semantics.file.meshes import (
    MAKE_MESH,
    Construction,
    calls_api,
    constructions,
    int_value,
    is_construction,
    literal_shape,
    reaches,
)
from shardlint.semantics.sharding.usage import multi_process

LOCAL = ("jax.local_devices", "jax.local_device_count")
# A shape that also counts processes or all devices is global: `(jax.process_count(),
# jax.local_device_count())` is the usual hybrid multi-host mesh.
GLOBAL = ("jax.process_count", "jax.device_count", "jax.devices")


@register
class LocalDevicesMesh(Rule):
    code = "SHL205"
    name = "local-devices-mesh"
    severity = "warning"
    summary = "A mesh built from this process's devices (`jax.local_devices()`): each host gets its own mesh."
    what = """
Flags a mesh whose devices come from `jax.local_devices()` (`Mesh(np.array(jax.local_devices()),
...)`, `create_device_mesh(shape, devices=jax.local_devices())`, `jax.make_mesh(...,
devices=...)`) or whose shape is sized by `jax.local_device_count()` (`jax.make_mesh(
(jax.local_device_count(),), ...)`, `create_device_mesh((jax.local_device_count(), 1))`),
directly or through names bound to them.

A warning when the project shows that it runs as several processes (it calls
`jax.distributed.initialize`, `jax.process_index`, `jax.process_count` or
`jax.make_array_from_process_local_data`); otherwise an info, since on a single host the local
devices are all the devices. Not flagged: shapes that also count processes or all devices
(`(jax.process_count(), jax.local_device_count())`), the per-host shape of
`create_hybrid_device_mesh`, `jax.local_device_count()` used for batch sizes or handed to a
helper as a size, a one-device mesh (`jax.local_devices()[:1]`), and a mesh of the local
devices in a function that stacks one copy of a value per local device (`[x] * len(devices)`):
the per-device layout `pmap` takes, what `jax.device_put_replicated` made, where each process
feeding its own devices is the intent; and a mesh of the local devices built where the code
also asks `jax.process_index()` (the same function, or the module's top level): a program that
runs a different computation on each process on purpose.
"""
    why = """
In a multi-process run (several hosts, or several processes on one) `jax.local_devices()` is
only this process's share. A mesh built from it is a different mesh in every process: arrays
sharded over it never span hosts, and collectives such as the gradient all-reduce stay inside
each host, so the processes silently train different models. Reproduced with two CPU processes
of two devices each: with local meshes each process computed its own "global" mean (1.0 and
2.0, global shape (4, 4)); with the global mesh both got 1.5 (global shape (8, 4)). A mesh
*shape* sized by the local count either takes only the first devices of the global list
(`jax.make_mesh`) or raises (`create_device_mesh`).
"""
    use_instead = """
```python
mesh = jax.make_mesh((jax.device_count(),), ("data",))           # all processes' devices
batch = jax.make_array_from_process_local_data(NamedSharding(mesh, P("data")), local_batch)
per_host_batch = global_batch // jax.process_count()               # local counts size data
```
"""
    versions = "All versions."
    VALID = [
        example("""
            import jax
            import numpy as np
            from jax.sharding import Mesh, NamedSharding, PartitionSpec

            # each process runs a program of its own on its own devices
            mesh = Mesh(np.array(jax.local_devices()), ["data"])
            sharding = NamedSharding(mesh, PartitionSpec(None))
            idx = jax.process_index()

            def step():
                return idx * jax.numpy.ones((idx + 1,))
        """, title="a per-process program on purpose: it asks which process it is"),
        example("""
            import jax
            import numpy as np
            from jax.sharding import Mesh

            jax.distributed.initialize()
            mesh = Mesh(np.array(jax.devices()), ("data",))
            per_host = 256 // jax.process_count()
            local_batch = per_host // jax.local_device_count()   # sizing data, not the mesh
        """),
        example("""
            import jax
            from jax.experimental import mesh_utils
            from jax.sharding import Mesh

            shape = (jax.process_count(), jax.local_device_count())   # global: hosts x devices
            mesh = Mesh(mesh_utils.create_device_mesh(shape), ("dcn", "ici"))
        """, title="hosts x local devices is all the devices"),
        example("""
            import jax
            import numpy as np
            from jax.sharding import Mesh
            jax.distributed.initialize()
            grid = np.array(jax.devices()).reshape(jax.process_count(), jax.local_device_count())
            mesh = Mesh(grid, ("hosts", "devices"))
        """, title="every device, arranged as hosts x local devices: a global mesh"),
        example("""
            import jax
            from jax.experimental import mesh_utils
            from jax.sharding import Mesh

            devices = mesh_utils.create_hybrid_device_mesh(
                (1, jax.local_device_count()), (jax.process_count(), 1))
            mesh = Mesh(devices, ("data", "model"))
        """, title="the per-slice shape of a hybrid mesh"),
        example("""
            import jax
            import numpy as np
            from jax.sharding import Mesh

            cpu_devices = jax.local_devices(backend="cpu")
            mesh = Mesh(np.array(jax.devices()), ("data",))
            print(len(cpu_devices))
        """, title="local devices not used for the mesh"),
        example("""
            import jax
            import jax.numpy as jnp
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

            jax.distributed.initialize()

            def copies_for_pmap(tree):
                def put(x):
                    devs = jax.local_devices()
                    per_device = NamedSharding(Mesh(devs, ("copies",)), P("copies"))
                    return jax.device_put(jnp.stack([x] * len(devs)), per_device)
                return jax.tree.map(put, tree)
        """, title="one copy per local device for pmap (what device_put_replicated made)"),
        example("""
            import jax
            import jax.numpy as jnp
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

            jax.distributed.initialize()

            def replicate_for_pmap(tree, axis_name):
                devices = jax.local_devices()
                per_device = NamedSharding(Mesh(devices, (axis_name,)), P(axis_name))

                def put(x):
                    return jax.device_put(jnp.stack([x] * len(devices)), per_device)
                return jax.tree.map(put, tree)
        """, title="the copies stacked in a function nested in the one that builds the mesh"),
        example("""
            import jax
            from jax.experimental import mesh_utils
            from jax.sharding import Mesh

            jax.distributed.initialize()

            def mesh_for(model_parallel: int) -> Mesh:
                grid = mesh_utils.create_hybrid_device_mesh(
                    (1, model_parallel), (jax.process_count(), 1))
                return Mesh(grid, ("data", "model"))

            def gpu_mesh() -> Mesh:
                inner = mesh_for(jax.local_device_count())   # a size handed to a global mesh
                return Mesh(inner.devices, ("data", "model"))
        """, title="the local count as a parameter of a global mesh"),
        example("""
            import jax
            import numpy as np
            from jax.sharding import Mesh

            jax.distributed.initialize()
            grid = np.empty((jax.process_count(), jax.local_device_count()), dtype=object)
            for d in jax.devices():
                grid[d.process_index, d.id % jax.local_device_count()] = d
            mesh = Mesh(grid, ("hosts", "chips"))
        """, title="every device, placed into a hosts x local devices array"),
        example("""
            import jax
            from jax.experimental import mesh_utils
            from jax.sharding import Mesh

            jax.distributed.initialize()
            one = mesh_utils.create_device_mesh((1,), devices=jax.local_devices()[:1])
            mesh = Mesh(one, ("x",))
        """, title="a one-device mesh"),
    ]
    INVALID = [
        example("""
            import jax
            import numpy as np
            from jax.sharding import Mesh

            jax.distributed.initialize()
            mesh = Mesh(np.array(jax.local_devices()), ("data",))  # expect: SHL205
        """),
        example("""
            import jax
            import numpy as np
            from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

            jax.distributed.initialize()
            devs = jax.local_devices()
            mesh = Mesh(np.array(devs), ("data",))  # expect: SHL205
            batch = jax.device_put(np.ones((len(devs) * 8, 4)), NamedSharding(mesh, P("data")))
        """, title="a batch sharded over this process's devices"),
        example("""
            import jax
            import numpy as np
            from jax.sharding import Mesh

            jax.distributed.initialize()
            grid = np.array(jax.local_devices()[:2]).reshape(2, 1)
            mesh = Mesh(grid, ("data", "model"))  # expect: SHL205
        """, title="two local devices"),
        example("""
            import jax

            def build_mesh():
                n = jax.local_device_count()
                return jax.make_mesh((n,), ("data",))  # expect: SHL205

            if jax.process_index() == 0:
                print("building the mesh")
        """, title="shape sized by the local count, through a name"),
        example("""
            import jax
            from jax.experimental import mesh_utils as mu
            from jax.sharding import Mesh

            local = jax.local_devices()
            grid = mu.create_device_mesh((len(local),), devices=local)  # expect: SHL205
            mesh = Mesh(grid, ("data",))
        """, title="create_device_mesh over the local devices (info: single host)"),
        example("""
            import jax
            import flax.linen as nn
            from jax.experimental import mesh_utils
            from jax.sharding import Mesh

            device_mesh = mesh_utils.create_device_mesh((jax.local_device_count(), 1))  # expect: SHL205
            mesh = Mesh(devices=device_mesh, axis_names=("model", "data"))
        """, title="the seed discussion's mesh (info: single host)"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        return bool(facts.roles & {Role.MESH, Role.DEVICE_MESH})

    def check(self) -> Iterator[Finding]:
        facts = self.facts
        local = calls_api(facts, *LOCAL)
        # The devices themselves: `jax.local_device_count()` in a device argument is a size
        # (`np.empty((jax.process_count(), jax.local_device_count()))` filled from
        # `jax.devices()`, a helper's `num_partitions`), not the devices a mesh is made of.
        local_list = calls_api(facts, "jax.local_devices")
        is_global = calls_api(facts, *GLOBAL)
        stop = is_construction(facts)
        severity = "warning" if multi_process(self.project) else "info"
        devices_only = calls_api(facts, "jax.devices")
        for con in constructions(facts):
            if self._one_device(con):
                continue  # one device spans nothing: it is a one-device mesh in every run
            found = reaches(facts, con.devices, con.scope, local_list, stop)
            if found is not None and reaches(facts, con.devices, con.scope, devices_only,
                                             stop) is not None:
                # `np.array(jax.devices()).reshape(jax.process_count(), jax.local_device_count())`:
                # every device, arranged hosts x local devices -- a global mesh.
                found = None
            if found is not None and self._per_device_copies(con, local, stop):
                continue
            if found is not None and self._per_process_program(con):
                continue
            kind = "devices"
            if found is None and con.shape is not None and \
                    reaches(facts, con.shape, con.scope, is_global, stop) is None:
                found = reaches(facts, con.shape, con.scope, local, stop)
                kind = "shape"
            if found is None:
                continue
            yield self.finding(con.call, self._message(found, kind, severity, con.api_name),
                               severity=severity, related=self._related(con.call, found))

    def _per_process_program(self, con: Construction) -> bool:
        """The code that builds the mesh also asks which process it is (``jax.process_index()``
        in the same scope): a program that runs a different computation on each process, on
        purpose, with a mesh of its own devices."""
        return any(c.scope is con.scope and c.qualified == "jax.process_index"
                   for c in self.facts.calls)

    def _one_device(self, con: Construction) -> bool:
        """A mesh of one device: a shape of ones, or devices `jax.local_devices()[:1]` / `[0]`."""
        facts = self.facts
        shape = literal_shape(facts, con.shape, con.scope) if con.shape is not None else None
        if shape is not None and all(n == 1 for n in shape):
            return True
        local = calls_api(facts, "jax.local_devices")

        def one(node: ast.AST, scope) -> bool:
            if not isinstance(node, ast.Subscript) or not local(node.value, scope):
                return False
            index = node.slice
            if isinstance(index, ast.Slice):
                lower = int_value(facts, index.lower, scope) if index.lower is not None else 0
                upper = int_value(facts, index.upper, scope) if index.upper is not None else None
                return index.step is None and lower is not None and upper is not None \
                    and upper - lower == 1 and lower >= 0
            return int_value(facts, index, scope) is not None

        return con.devices is not None and \
            reaches(facts, con.devices, con.scope, one, is_construction(facts)) is not None

    def _per_device_copies(self, con: Construction, local, stop) -> bool:
        """The scope stacks one copy of a value per local device (`[x] * len(devices)`): the
        per-device layout `pmap` takes, what `jax.device_put_replicated` made. There a mesh of
        this process's devices is the intent (each process feeds its own pmap)."""
        facts = self.facts
        # (a function's own code and the functions nested in it: kfac-jax stacks the copies in
        # the function it maps over the tree, `[x] * len(devices)` of the enclosing `devices`)
        nodes = ast.walk(con.scope.node) if con.scope.kind == "function" \
            else _own_code(con.scope.node)
        for node in nodes:
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
                continue
            for copies, count in ((node.left, node.right), (node.right, node.left)):
                if not isinstance(copies, ast.List):
                    continue
                if isinstance(count, ast.Call) and isinstance(count.func, ast.Name) and \
                        count.func.id == "len" and len(count.args) == 1:
                    count = count.args[0]
                if reaches(facts, count, con.scope, local, stop) is not None:
                    return True
        return False

    def _related(self, call: ast.Call, found: ast.AST) -> tuple[Related, ...]:
        a, b = self.span(call), self.span(found)
        inside = (a.line, a.col) <= (b.line, b.col) and (b.end_line, b.end_col) <= (a.end_line, a.end_col)
        return () if inside else (self.related(found, "this process's devices only"),)

    def _message(self, found: ast.AST, kind: str, severity: str, api_name: str) -> str:
        src = self.text(found.func) if isinstance(found, ast.Call) else "jax.local_devices"  # type: ignore[arg-type]
        if kind == "devices":
            core = f"This mesh is built from `{src}()`, this process's devices only"
            then = ("each process builds its own mesh, arrays never span hosts and collectives "
                    "(the gradient all-reduce) stay inside each host (reproduced: 2 processes "
                    "computed means 1.0 and 2.0 where the global mesh gives 1.5 on both)")
        else:
            core = f"This mesh shape is sized by `{src}()`"
            then = "that is only this process's share of the devices: " + (
                "the mesh covers just the first devices of the global list"
                if api_name == MAKE_MESH else "the shape no longer matches the device list and it raises")
        if severity == "info":
            middle = f"that is every device on one host, but with several processes {then}"
        else:
            middle = f"with several processes {then}"
        feed = "jax.make_array_from_process_local_data"
        # (before it: one array from the shards of each device, in every release from 0.3.19)
        note = needs_note(feed, self.ctx.versions, "`jax.make_array_from_single_device_arrays`")
        return (f"{core}: {middle}; build meshes from `jax.devices()` / `jax.device_count()` "
                f"and feed per-host data with `{feed}`{note}")


def _own_code(scope_node: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a scope's body, not those of the functions and classes defined in it."""
    todo = list(ast.iter_child_nodes(scope_node))
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
