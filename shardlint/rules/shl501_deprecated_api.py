"""SHL501 deprecated-or-removed-api."""

from __future__ import annotations

from shardlint.rules.base import Rule, example, register
from shardlint.semantics.api import Api


@register
class DeprecatedApi(Rule):
    code = "SHL501"
    name = "deprecated-or-removed-api"
    severity = "warning"
    summary = "A sharding or tree API that moved or was removed in the project's jax/flax."
    what = """
Flags uses (and `from ... import`s) of APIs that were deprecated or removed, judged against the
jax and flax versions the project runs on, and names the replacement. The list lives in one data
table (`shardlint/semantics/api.py`): `jax.tree_map` and the other `jax.tree_*` aliases (removed
in jax 0.6.0), `jax.experimental.pjit.pjit` and `jax.experimental.shard_map.shard_map`
(deprecated in 0.8.0), `jax.sharding.use_mesh` (removed in 0.7.1), `jax.device_put_sharded` /
`jax.device_put_replicated` and `PmapSharding` (removed in 0.10.0), `nnx.with_sharding_constraint`
(removed in flax 0.11.2).
"""
    why = """
A removed API fails with `AttributeError` only when the line runs, often after a long model
build or on the cluster. A deprecated one starts warning first and fails on the next upgrade.
"""
    use_instead = """
```python
params = jax.tree.map(lambda p: p * 0.5, params)   # not jax.tree_map
with jax.set_mesh(mesh):                            # not jax.sharding.use_mesh(mesh)
    ...
```
"""
    fix_safety = "The replacement is a rename with the same arguments, except where the message says otherwise (`shard_map`: `check_rep` is now `check_vma`)."
    versions = "Each API is reported from the version in which it was deprecated (a warning) or removed (an error)."
    VALID = [
        example("""
            import jax
            params = jax.tree.map(lambda p: p * 2, {"w": 1.0})
        """),
        example("""
            import jax
            from jax.sharding import Mesh
            mesh = Mesh(jax.devices(), ("data",))
            with jax.set_mesh(mesh):
                pass
        """),
        example("""
            import jax
            # Before jax 0.4.26 `jax.tree_map` was the current spelling.
            leaves = jax.tree_map(lambda p: p, {"w": 1.0})
        """, jax="0.4.20"),
        example("""
            import numpy as np
            tree_map = lambda f, x: f(x)  # a local helper, not jax's
            y = tree_map(np.sqrt, 4.0)
            import jax
        """),
    ]
    INVALID = [
        example("""
            import jax
            params = jax.tree_map(lambda p: p * 2, {"w": 1.0})  # expect: SHL501
        """),
        example("""
            from jax.experimental.pjit import pjit  # expect: SHL501
            step = pjit(lambda x: x)
        """),
        example("""
            import jax as j
            with j.sharding.use_mesh(mesh):  # expect: SHL501
                pass
        """),
        example("""
            from flax import nnx
            y = nnx.with_sharding_constraint(x, spec)  # expect: SHL501
        """),
        example("""
            import jax
            xs = jax.device_put_replicated(x, jax.devices())  # expect: SHL501
        """),
    ]

    def check(self):
        for ref in self.facts.references:
            message = self._message(ref.api)
            if message is None:
                continue
            removed = ref.api.removed and self.ctx.versions.at_least(ref.api.package, ref.api.removed)
            yield self.finding(ref.node, message, severity="error" if removed else "warning",
                               tags=("deprecated",))

    def _message(self, api: Api) -> str | None:
        versions = self.ctx.versions
        pkg = api.package
        have = versions.jax if pkg == "jax" else versions.flax
        instead = f"; use `{api.replacement}`" if api.replacement else ""
        note = f" ({api.note})" if api.note else ""
        if api.removed and versions.at_least(pkg, api.removed):
            return f"`{api.name}` was removed in {pkg} {api.removed} (project: {have}){instead}{note}"
        if api.deprecated and versions.at_least(pkg, api.deprecated):
            return f"`{api.name}` is deprecated since {pkg} {api.deprecated}{instead}{note}"
        return None
