"""What-if remedies, applied in the worker: the probe compiled again as if a finding were fixed.

Runs in the worker process (loaded by path, like `step_facts`): the standard library and jax
only, flax imported only by a remedy that needs it. The user's files are never touched; each
remedy changes what the probe's own code does while it runs again:

- ``mesh``: the step is traced under ``jax.set_mesh(M)``, M the one mesh the baseline run
  placed its inputs or outputs on (SHL103): the whole probe call where the probe traces it
  itself (it returns a Lowered), only the worker's trace where it returns ``(fn, args)``;
- ``rules``: likewise under ``nn.logical_axis_rules(R)``, R the one literal rules table of the
  code the probe reaches, read by the static analysis (SHL102);
- ``out-shardings``: the ``jax.jit`` call at the finding's site gets ``out_shardings`` derived
  from the partition specs of its abstract output under the mesh and rules in context, as
  ``nn.logical_to_mesh_sharding(nn.get_partition_spec(jax.eval_shape(f, *args)), mesh, rules)``
  (SHL302, SHL303);
- ``donate``: the ``jax.jit`` call at the finding's site gets the ``donate_argnums`` the finding
  names (SHL401).

A jit site is matched by where ``jax.jit`` is called from (the caller's file and line inside the
finding's span) or where the jitted function is defined (decorator form). Remedies accumulate:
step i runs with remedies 1..i, so each step's figures minus the previous step's are what that
finding's fix saves once the earlier ones are in. A remedy that cannot be applied (no mesh to
enter, no partition metadata to derive shardings from) raises :class:`NotApplicable` with the
reason; it is left out of the later steps.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections.abc import Iterator
from typing import Any

import jax


class NotApplicable(Exception):
    """The remedy cannot be applied mechanically here; the message says why."""


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def _in_span(remedy: dict[str, Any], filename: str, line: int) -> bool:
    return (
        remedy["line"] <= line <= remedy.get("end_line", remedy["line"])
        and _same_file(filename, remedy["path"])
    )


class Remedies:
    """Owns the wrapper around ``jax.jit`` and the remedies active for the current run."""

    NotApplicable = NotApplicable

    def __init__(self) -> None:
        self.planned: list[dict[str, Any]] = []  # the jit-site remedies of this worker's probes
        self.active: list[dict[str, Any]] = []
        self.mesh: Any = None  # the baseline's mesh, for `mesh` and `out-shardings`
        self.used: set[str] = set()  # ids of the active remedies that found their site
        self.mesh_count = 0  # distinct meshes of the baseline run
        self.compiles = 0
        self.kind = ""  # what the probe returned in the baseline run (step_facts.lower's kind)
        self._original = jax.jit
        jax.jit = self._jit  # type: ignore[assignment]  # before any user module is imported

    # ---- the jit wrapper ----------------------------------------------------------------------
    def _jit(self, fun: Any = None, *args: Any, **kwargs: Any) -> Any:
        if fun is None:  # `@jax.jit(static_argnames=...)`: the decorator comes back here
            return functools.partial(self._jit, *args, **kwargs)
        if not self.planned:
            return self._original(fun, *args, **kwargs)
        sites = self._sites_of(fun, sys._getframe(1))
        if not sites:
            return self._original(fun, *args, **kwargs)
        return _Switch(self, fun, args, kwargs, sites)

    def _sites_of(self, fun: Any, frame: Any) -> list[str]:
        found = []
        code = getattr(getattr(fun, "__func__", fun), "__code__", None)
        for remedy in self.planned:
            at_call = frame is not None and _in_span(remedy, frame.f_code.co_filename,
                                                     frame.f_lineno)
            at_def = code is not None and _in_span(remedy, code.co_filename, code.co_firstlineno)
            if at_call or at_def:
                found.append(remedy["id"])
        return found

    def count_compiles(self) -> None:
        """Count every backend compile of this process from now on (``self.compiles``)."""
        self.compiles = 0

        def on_event(event: str, duration: float, **_: Any) -> None:
            if "backend_compile" in event:
                self.compiles += 1

        try:
            jax.monitoring.register_event_duration_secs_listener(on_event)
        except Exception:  # noqa: BLE001 - an older jax: the count stays 0
            pass

    @staticmethod
    def meshes_of(value: Any, compiled: Any) -> list[Any]:
        return meshes_of(value, compiled)

    # ---- contexts around the probe --------------------------------------------------------------
    @contextlib.contextmanager
    def applied(self, active: list[dict[str, Any]]) -> Iterator[None]:
        """Run the probe (call, trace, lower, compile) with these remedies in force; the mesh
        and rules contexts are entered by :meth:`contexts` around the part that traces."""
        self.active, self.used = list(active), set()
        try:
            yield
        finally:
            self.active = []

    def traces_in_call(self) -> bool:
        """Whether the probe traces its step when called (it returns a Lowered, a Traced or a
        Compiled), as the baseline run showed; else the worker traces it (``(fn, args)``)."""
        return self.kind not in ("fn-args", "wrapped")

    @contextlib.contextmanager
    def contexts(self) -> Iterator[None]:
        """The mesh and rules contexts of the active remedies."""
        with contextlib.ExitStack() as stack:
            for remedy in self.active:
                if remedy["kind"] == "mesh":
                    if self.mesh is None:
                        raise NotApplicable(
                            "no mesh to enter: the probe places none of its inputs or outputs "
                            "on a mesh"
                        )
                    stack.enter_context(jax.set_mesh(self.mesh))
                    self.used.add(remedy["id"])
                elif remedy["kind"] == "rules":
                    nn = _flax()
                    stack.enter_context(nn.logical_axis_rules(_rules(remedy["rules"])))
                    self.used.add(remedy["id"])
            yield

    def kwargs_for(self, sites: list[str], kwargs: dict[str, Any], fun: Any,
                   call: tuple[tuple[Any, ...], dict[str, Any]] | None) -> dict[str, Any]:
        """The jit keywords of a site with the active remedies for it applied."""
        out = dict(kwargs)
        for remedy in self.active:
            if remedy["id"] not in sites:
                continue
            if remedy["kind"] == "donate":
                given = out.get("donate_argnums", ())
                given = (given,) if isinstance(given, int) else tuple(given or ())
                out["donate_argnums"] = tuple(sorted({*given, *remedy["argnums"]}))
                self.used.add(remedy["id"])
            elif remedy["kind"] == "out-shardings" and call is not None:
                out["out_shardings"] = self._derived_shardings(fun, kwargs, call)
                self.used.add(remedy["id"])
        return out

    def _derived_shardings(self, fun: Any, kwargs: dict[str, Any],
                           call: tuple[tuple[Any, ...], dict[str, Any]]) -> Any:
        nn = _flax()
        mesh = _context_mesh() or self.mesh
        if mesh is None:
            raise NotApplicable("no mesh to derive out_shardings on: none is in context and the "
                                "probe places nothing on one")
        plain = {k: v for k, v in kwargs.items() if k in ("static_argnums", "static_argnames")}
        abstract = jax.eval_shape(self._original(fun, **plain), *call[0], **call[1])
        boxed = lambda x: isinstance(x, nn.Partitioned)  # LogicallyPartitioned derives from it
        if not any(boxed(x) for x in jax.tree.leaves(abstract, is_leaf=boxed)):
            raise NotApplicable("the output carries no partition metadata "
                                "(nn.with_partitioning / with_logical_partitioning) to derive "
                                "out_shardings from")
        specs = nn.get_partition_spec(abstract)
        return nn.logical_to_mesh_sharding(specs, mesh, nn.get_logical_axis_rules() or None)


class _Switch:
    """Stands for ``jax.jit(fun, **kwargs)`` at a planned site: jits ``fun`` with the remedies
    active when it is called, lowered or traced (the same object serves every run, so a step
    jitted once at import time still gets each run's remedies)."""

    def __init__(self, owner: Remedies, fun: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                 sites: list[str]) -> None:
        self._owner, self._fun, self._args, self._kwargs, self._sites = \
            owner, fun, args, kwargs, sites
        self._plain = owner._original(fun, *args, **kwargs)
        for name in ("__name__", "__qualname__", "__doc__", "__module__", "__wrapped__"):
            value = getattr(self._plain, name, None)
            if value is not None:
                try:
                    setattr(self, name, value)
                except (AttributeError, TypeError):
                    pass

    def _jitted(self, call: tuple[tuple[Any, ...], dict[str, Any]] | None) -> Any:
        if not any(r["id"] in self._sites for r in self._owner.active):
            return self._plain
        kwargs = self._owner.kwargs_for(self._sites, self._kwargs, self._fun, call)
        return self._owner._original(self._fun, *self._args, **kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._jitted((args, kwargs))(*args, **kwargs)

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        return self._jitted((args, kwargs)).lower(*args, **kwargs)

    def trace(self, *args: Any, **kwargs: Any) -> Any:
        return self._jitted((args, kwargs)).trace(*args, **kwargs)

    def eval_shape(self, *args: Any, **kwargs: Any) -> Any:
        return self._plain.eval_shape(*args, **kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._plain, name)


def _flax() -> Any:
    try:
        import flax.linen as nn
    except ImportError as exc:
        raise NotApplicable(f"flax cannot be imported here ({exc})") from exc
    return nn


def _rules(entries: list[list[Any]]) -> tuple[tuple[str, Any], ...]:
    return tuple(
        (name, tuple(axis) if isinstance(axis, list) else axis) for name, axis in entries
    )


def _context_mesh() -> Any:
    try:
        mesh = jax.sharding.get_mesh()
    except Exception:  # noqa: BLE001 - older jax, or no concrete mesh set
        return None
    return mesh if getattr(mesh, "devices", None) is not None and mesh.shape else None


def meshes_of(value: Any, compiled: Any) -> list[Any]:
    """The distinct meshes the probe's inputs (given with the return value) and the compiled
    step's shardings are on."""
    found: list[Any] = []
    named = jax.sharding.NamedSharding

    def add(sharding: Any) -> None:
        if isinstance(sharding, named) and isinstance(sharding.mesh, jax.sharding.Mesh) and \
                sharding.mesh not in found:
            found.append(sharding.mesh)

    if isinstance(value, (tuple, list)) and len(value) in (2, 3) and callable(value[0]):
        for leaf in jax.tree.leaves(list(value[1:])):
            add(getattr(leaf, "sharding", None))
    is_sharding = lambda x: isinstance(x, jax.sharding.Sharding)
    for tree in (getattr(compiled, "input_shardings", None),
                 getattr(compiled, "output_shardings", None)):
        try:
            for sharding in jax.tree.leaves(tree, is_leaf=is_sharding):
                add(sharding)
        except Exception:  # noqa: BLE001 - an odd tree: no mesh from it
            continue
    return found
