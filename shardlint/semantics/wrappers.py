"""In-house names a project declares to behave like known APIs (``[tool.shardlint]``
``jit-wrappers``, ``constraint-wrappers``, ``rules-contexts``, ``mesh-contexts``)."""

from __future__ import annotations

from shardlint.semantics import api


class Wrappers:
    """In-house names configured to behave like known APIs (``[tool.shardlint]`` wrapper keys)."""

    def __init__(self, jit: tuple[str, ...] = (), constraint: tuple[str, ...] = (),
                 rules_context: tuple[str, ...] = (), mesh_context: tuple[str, ...] = ()):
        self.table: dict[str, api.Api] = {}
        for names, target in ((jit, "jax.jit"), (constraint, "flax.linen.with_logical_constraint"),
                              (rules_context, "flax.linen.logical_axis_rules"),
                              (mesh_context, "jax.set_mesh")):
            known = api.lookup(target)
            assert known is not None
            for n in names:
                self.table[n] = known


NO_WRAPPERS = Wrappers()
