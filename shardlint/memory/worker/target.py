"""Inside the worker: compile for a TPU topology from a host without one (`--target`).

libtpu's compiler runs on any host: `jax.experimental.topologies.get_topology_desc` gives the
devices of a TPU topology (`v5e:2x2`, `v5p:2x2x1`, a whole `v5e:16x16` pod) that programs can be
lowered and compiled for, never run on. :func:`install` makes them the devices a probe sees
before any user module is imported: `jax.devices()`, `jax.device_count()`, `jax.local_devices()`
(the first host's share, as on the pod), `jax.process_count()`, `jax.make_mesh` and
`mesh_utils.create_device_mesh` use N devices of it: for a smaller N, the slice of the same
generation with exactly N devices (4 devices of a `v5e:4x4` target compile for a `v5e:2x2`), else
the topology's first N. The host's own CPU backend stays the default backend, so a value a probe makes is made
on the CPU; a value made under `jax.set_mesh` of a topology mesh cannot be (`concrete_error`).

Loaded by the worker by file path: imports nothing from shardlint.
"""

from __future__ import annotations

import re
from importlib import metadata
from typing import Any

import jax

# What a concrete op raises when it is dispatched to devices that only exist for the compiler.
_CONCRETE = re.compile(
    r"has no attribute 'local_devices'|Executable' object has no attribute|"
    r"cannot (?:be )?execute|not (?:addressable|attached)|Unable to (?:execute|run)|"
    r"PjRtTopologyDescription|compile-only|CompileOnly|deviceless", re.IGNORECASE)


class TargetError(Exception):
    """The topology cannot be had: libtpu missing or not the one jax pins, an unknown name."""


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def libtpu_pin() -> str | None:
    """The libtpu release the installed jax pins for its `tpu` extra (`0.0.50.*`), if any."""
    for requirement in metadata.requires("jax") or ():
        if requirement.startswith("libtpu") and "extra" in requirement and '"tpu"' in requirement:
            match = re.search(r"==\s*([\w.*]+)", requirement)
            if match:
                return match.group(1)
    return None


def _pins(pin: str, version: str) -> bool:
    if pin.endswith(".*"):
        return version == pin[:-2] or version.startswith(pin[:-1])
    return version == pin


def libtpu_status() -> dict[str, Any]:
    """jax, the installed libtpu and the one jax pins; `fix`: the command that mends it."""
    jax_version = jax.__version__
    installed = _version("libtpu") or _version("libtpu-nightly")
    pin = libtpu_pin()
    fix = f"pip install 'jax[tpu]=={jax_version}'  (or: pip install 'shardlint[tpu]')"
    status = {"jax": jax_version, "libtpu": installed, "pin": pin, "fix": fix, "ok": True}
    if installed is None:
        status.update(ok=False, message=f"libtpu is not installed in this interpreter: the TPU "
                      f"compiler comes with it; install the one jax {jax_version} pins: {fix}")
    elif pin is not None and not _pins(pin, installed):
        status.update(ok=False, message=f"libtpu {installed} is installed, but jax {jax_version} "
                      f"pins libtpu=={pin}: a compiler jax was not built with gives figures of "
                      f"its own, or none; install the pinned one: {fix}")
    return status


def _chips(name: str) -> int:
    chips = 1
    for side in name.partition(":")[2].split("x"):
        chips *= int(side) if side.isdigit() else 1
    return chips


def _host_bounds(name: str) -> dict[str, Any]:
    """A slice smaller than libtpu's default host (2x2x1 chips) is one host of its own size, as
    a single v5e chip (`v5e:1x1`) is: without it libtpu refuses the name."""
    sides = [int(n) for n in name.partition(":")[2].split("x") if n.isdigit()]
    if len(sides) == 2 and sides[0] * sides[1] < 4:
        return {"chips_per_host_bounds": (sides[0], sides[1], 1)}
    return {}


# Slices with exactly N chips, smallest first: 2-D generations, then 3-D ones (v4, v5p).
_SLICES_2D = ((1, 1), (1, 2), (2, 2), (2, 4), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16),
              (16, 32))
_SLICES_3D = ((2, 2, 1), (2, 2, 2), (2, 2, 4), (2, 4, 4), (4, 4, 4), (4, 4, 8), (4, 8, 8),
              (8, 8, 8), (8, 8, 16), (8, 16, 16))


def _exact_slice(name: str, count: int, per_chip: int) -> str | None:
    """A slice of ``name``'s generation with exactly ``count`` devices, when there is one: a
    step for 4 devices compiles for a v5e:2x2, not for 4 devices of a v5e:4x4, whose device
    ids the compiler's collectives do not accept (a RET_CHECK in libtpu)."""
    generation, _, topology = name.partition(":")
    sides = topology.split("x")
    for shape in _SLICES_3D if len(sides) == 3 else _SLICES_2D:
        chips = 1
        for side in shape:
            chips *= side
        if chips * per_chip == count:
            return f"{generation}:{'x'.join(map(str, shape))}"
    return None


class Topology:
    """The first ``count`` devices of a TPU topology (or of the slice of its generation with
    exactly ``count`` devices), and the processes they belong to."""

    def __init__(self, name: str, count: int) -> None:
        status = libtpu_status()
        if not status["ok"]:
            raise TargetError(status["message"])
        self.requested = name
        described = self._describe(name, status)
        per_chip = max(1, len(described.devices) // max(1, _chips(name)))
        exact = _exact_slice(name, count, per_chip)
        if exact is not None and exact != name:
            name, described = exact, self._describe(exact, status)
        every = list(described.devices)
        if count > len(every):
            raise TargetError(f"{count} devices asked for, the topology {name} has "
                              f"{len(every)}")
        self.name, self.status = name, status
        self.all = every
        self.devices = every[:count]
        first = self.devices[0].process_index
        self.local = [d for d in self.devices if d.process_index == first]
        self.processes = len({d.process_index for d in self.devices})

    @staticmethod
    def _describe(name: str, status: dict[str, Any]) -> Any:
        from jax.experimental import topologies

        try:
            return topologies.get_topology_desc(platform="tpu", topology_name=name,
                                                **_host_bounds(name))
        except Exception as exc:  # noqa: BLE001 - libtpu's own words say what is wrong
            raise TargetError(f"libtpu {status['libtpu']} cannot describe the topology "
                              f"{name!r}: {str(exc).splitlines()[0] if str(exc) else exc}"
                              ) from None

    def lowering(self) -> Any:
        """Where the worker lowers what a probe returned: a value without a sharding is placed
        on the topology's first device, as on the TPU host, not on this host's CPU. (Only
        there: a value the probe itself makes must still be made on the CPU.)"""
        return jax.default_device(self.devices[0])

    def describe(self) -> dict[str, Any]:
        return {"target": self.name, "requested": self.requested,
                "libtpu": self.status["libtpu"],
                "topology_devices": len(self.all), "device_kind": self.devices[0].device_kind,
                "processes": self.processes}


def install(name: str, count: int) -> Topology:
    """Make the topology's first ``count`` devices the ones every device query returns."""
    topo = Topology(name, count)
    devices, local = topo.devices, topo.local

    def _wants_tpu(backend: Any) -> bool:
        return backend is None or str(getattr(backend, "platform", backend)).lower() == "tpu"

    originals = {n: getattr(jax, n) for n in ("devices", "device_count", "local_devices",
                                              "local_device_count", "process_count")}

    def _devices(backend: Any = None) -> list[Any]:
        return list(devices) if _wants_tpu(backend) else originals["devices"](backend)

    def _device_count(backend: Any = None) -> int:
        return len(devices) if _wants_tpu(backend) else originals["device_count"](backend)

    def _local_devices(process_index: Any = None, backend: Any = None,
                       host_id: Any = None) -> list[Any]:
        if not _wants_tpu(backend):
            return originals["local_devices"](process_index, backend, host_id)
        index = process_index if process_index is not None else host_id
        if index is None:
            return list(local)
        return [d for d in devices if d.process_index == index]

    def _local_device_count(backend: Any = None) -> int:
        return len(local) if _wants_tpu(backend) else originals["local_device_count"](backend)

    def _process_count(backend: Any = None) -> int:
        return topo.processes if _wants_tpu(backend) else originals["process_count"](backend)

    jax.devices = _devices  # type: ignore[assignment]
    jax.device_count = _device_count  # type: ignore[assignment]
    jax.local_devices = _local_devices  # type: ignore[assignment]
    jax.local_device_count = _local_device_count  # type: ignore[assignment]
    jax.process_count = _process_count  # type: ignore[assignment]

    make_mesh = jax.make_mesh

    def _make_mesh(axis_shapes: Any, axis_names: Any, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("devices") is None:
            kwargs["devices"] = list(devices)
        return make_mesh(axis_shapes, axis_names, *args, **kwargs)

    jax.make_mesh = _make_mesh  # type: ignore[assignment]
    try:
        from jax.experimental import mesh_utils

        create = mesh_utils.create_device_mesh

        def _create(mesh_shape: Any, devices_: Any = None, *args: Any, **kwargs: Any) -> Any:
            return create(mesh_shape, list(devices) if devices_ is None else devices_,
                          *args, **kwargs)

        mesh_utils.create_device_mesh = _create
    except Exception:  # noqa: BLE001 - an older jax without it: the rest still holds
        pass
    return topo


_REFUSAL = re.compile(r"RESOURCE_EXHAUSTED.*?memory required for (?P<what>[\w ]+?) "
                      r"\((?P<needs>[\d.]+\s*[KMGT]?)\) exceeds available HBM "
                      r"\((?P<available>[\d.]+\s*[KMGT]?)\)", re.DOTALL)


def compiler_refusal(message: str) -> dict[str, str] | None:
    """The TPU compiler's "does not fit" (`CompileTimeHbmOom`) in an error message, or None:
    what it counted (`HLO temporaries`), how much it needs and how much a device has."""
    match = _REFUSAL.search(message)
    if match is None:
        return None
    # The compiler's "G" is 2^30 bytes (15.75G is a v5e's 16,909,336,064 B).
    unit = lambda text: text.strip() + ("iB" if text.strip()[-1:].isalpha() else " B")
    return {"what": match.group("what"), "needs": unit(match.group("needs")),
            "available": unit(match.group("available")),
            "needs_bytes": _bytes(match.group("needs")),
            "available_bytes": _bytes(match.group("available"))}


def _bytes(text: str) -> int:
    """The compiler's rounded figure ("19.14G": two decimals, so within 0.005 GiB) in bytes."""
    text = text.strip()
    scale = 1 << (10 * ("KMGT".index(text[-1]) + 1)) if text[-1:] in "KMGT" else 1
    return int(float(text.rstrip("KMGT").strip()) * scale)


def concrete_error(message: str) -> bool:
    """Whether an exception's ``message`` is what running a value on compile-only devices
    raises."""
    return bool(_CONCRETE.search(message))


def compiler_limit(topo: Topology) -> int:
    """The most bytes one device's program may hold, as the TPU compiler judges it: the largest
    output it compiles (a bisection of trivial programs, about 2 s)."""
    import jax.numpy as jnp

    sharding = jax.sharding.SingleDeviceSharding(topo.devices[0])

    def compiles(size: int) -> bool:
        try:
            jax.jit(lambda: jnp.zeros((size,), jnp.uint8), out_shardings=sharding
                    ).lower().compile()
            return True
        except Exception as exc:  # noqa: BLE001
            if "RESOURCE_EXHAUSTED" in str(exc):
                return False
            raise

    low, high = 1 << 20, 1 << 40
    while high - low > 1:
        middle = (low + high) // 2
        if compiles(middle):
            low = middle
        else:
            high = middle
    return low
