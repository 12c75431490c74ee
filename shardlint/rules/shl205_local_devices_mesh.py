"""SHL205 local-devices-mesh."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from shardlint.rules.base import Finding, Related, Rule, example, register
from shardlint.semantics.api import Role
from shardlint.semantics.meshes import (
    MAKE_MESH,
    calls_api,
    constructions,
    is_construction,
    reaches,
)
from shardlint.semantics.usage import multi_process

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
`create_hybrid_device_mesh`, and `jax.local_device_count()` used for batch sizes.
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
        is_global = calls_api(facts, *GLOBAL)
        stop = is_construction(facts)
        severity = "warning" if multi_process(self.project) else "info"
        devices_only = calls_api(facts, "jax.devices")
        for con in constructions(facts):
            found = reaches(facts, con.devices, con.scope, local, stop)
            if found is not None and reaches(facts, con.devices, con.scope, devices_only,
                                             stop) is not None:
                # `np.array(jax.devices()).reshape(jax.process_count(), jax.local_device_count())`:
                # every device, arranged hosts x local devices -- a global mesh.
                found = None
            kind = "devices"
            if found is None and con.shape is not None and \
                    reaches(facts, con.shape, con.scope, is_global, stop) is None:
                found = reaches(facts, con.shape, con.scope, local, stop)
                kind = "shape"
            if found is None:
                continue
            yield self.finding(con.call, self._message(found, kind, severity, con.api_name),
                               severity=severity, related=self._related(con.call, found))

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
        return (f"{core}: {middle}; build meshes from `jax.devices()` / `jax.device_count()` "
                f"and feed per-host data with `jax.make_array_from_process_local_data`")
