"""SHL204 spec-from-unboxed-tree."""

from __future__ import annotations

from shardlint.rules.base import Edit, Fix, Rule, example, register
from shardlint.semantics.catalog.api import Role
from shardlint.semantics.sharding.boxes import spec_readers, unboxed


@register
class SpecFromUnboxedTree(Rule):
    code = "SHL204"
    name = "spec-from-unboxed-tree"
    severity = "warning"
    summary = "Partition specs are read from a tree whose boxes were already removed: every leaf gets `P()`."
    what = """
Flags `nn.get_partition_spec(tree)`, `nn.get_sharding(tree, mesh)`, `nnx.get_partition_spec(tree)`
and `nnx.get_named_sharding(tree, mesh)` when `tree` has lost its partitioning metadata: it is
`nn.unbox(...)` (also spelled `flax.core.meta.unbox`), `nnx.to_pure_dict(...)` or
`state.to_pure_dict()`, written in place or through a name whose value at that point is
certainly one of them (`abstract = nn.unbox(abstract)` just before counts; an assignment in a
branch that may not have run does not).

Not flagged: reading the specs from the boxed tree and unboxing only the values; an `unbox`
function that is not Flax's.
"""
    why = """
The partition names live in the boxes (`nn.Partitioned`, `nn.LogicallyPartitioned`) or in the
NNX Variable metadata. `nn.unbox` and the pure-dict conversions return the bare arrays, so the
spec of every leaf comes back as `P()` and whatever is placed with these specs is fully
replicated. Reproduced on 8 devices: the boxed abstract tree gives `P(None, 'model')`, the
unboxed one `P()`; a jitted init with shardings built from the unboxed tree put 16 MiB on every
device instead of 2 MiB. An NNX pure dict likewise gives `P()`. Nothing warns.
"""
    use_instead = """
```python
abstract = jax.eval_shape(model.init, key, x)            # boxed
shardings = nn.get_sharding(abstract, mesh)              # read the names from the boxes
variables = jax.jit(model.init, out_shardings=shardings)(key, x)
params = nn.unbox(variables)                             # unbox only the values
```
"""
    fix_safety = """
Unsafe: when the specs are read straight from `nn.unbox(tree)`, the fix passes `tree` itself.
The specs then carry the real partition names, so the arrays placed with them move from full
replication to their intended sharding (and a logical name with no rule or no matching mesh
axis now raises). No fix is offered when the unboxed tree comes through a name or a pure dict.
"""
    versions = "All versions of flax with partitioning boxes (Linen) or Variable sharding metadata (NNX)."
    VALID = [
        example("""
            import jax
            import flax.linen as nn

            def shardings_for(model, mesh, key, x):
                abstract = jax.eval_shape(model.init, key, x)      # boxed
                return nn.get_sharding(abstract, mesh)
        """, title="specs read from the boxed tree"),
        example("""
            import jax
            import flax.linen as nn

            def place(model, mesh, rules, key, x):
                abstract = jax.eval_shape(model.init, key, x)
                specs = nn.get_partition_spec(abstract)            # before unboxing
                abstract = nn.unbox(abstract)                      # values only, afterwards
                return nn.logical_to_mesh_sharding(specs, mesh, rules), abstract
        """, title="the name is unboxed only after the specs were read"),
        example("""
            import jax
            from flax import nnx

            def specs_of(model):
                return nnx.get_partition_spec(nnx.state(model))    # Variables keep their metadata
        """),
        example("""
            import jax
            import flax.linen as nn
            from mylib.trees import unbox                          # not Flax's

            def specs_of(tree):
                return nn.get_partition_spec(unbox(tree))
        """, title="an unbox that is not Flax's"),
        example("""
            import jax
            import flax.linen as nn

            def specs_of(abstract, strip):
                if strip:
                    abstract = nn.unbox(abstract)                  # may not have run
                return nn.get_partition_spec(abstract)
        """, title="unboxed on one branch only: shardlint cannot tell"),
    ]
    INVALID = [
        example("""
            import jax
            import flax.linen as nn

            def shardings_for(model, mesh, rules, key, x):
                abstract = jax.eval_shape(model.init, key, x)
                specs = nn.get_partition_spec(nn.unbox(abstract))  # expect: SHL204
                return nn.logical_to_mesh_sharding(specs, mesh, rules)
        """),
        example("""
            import jax
            from flax import linen as ln
            from flax.core import meta

            def shardings_for(model, mesh, key, x):
                abstract = meta.unbox(jax.eval_shape(model.init, key, x))
                return ln.get_sharding(abstract, mesh)             # expect: SHL204
        """, title="through a name, spelled `flax.core.meta.unbox`"),
        example("""
            import jax
            import flax.linen as nn

            def shardings_for(model, mesh, key, x):
                variables = jax.eval_shape(model.init, key, x)
                variables = nn.unbox(variables)
                return nn.get_sharding(variables, mesh)            # expect: SHL204
        """, title="the name rebound to its unboxed value"),
        example("""
            from flax import nnx

            def specs_of(model):
                pure = nnx.to_pure_dict(nnx.state(model))
                return nnx.get_partition_spec(pure)                # expect: SHL204
        """, title="an NNX pure dict"),
        example("""
            import jax
            from flax import nnx

            def shardings_of(model, mesh):
                state = nnx.state(model).to_pure_dict()
                return nnx.get_named_sharding(state, mesh)         # expect: SHL204
        """, title="`State.to_pure_dict()`"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        return facts.uses_flax and Role.OTHER in facts.roles

    def check(self):
        for c, tree in spec_readers(self.facts):
            found = unboxed(self.facts, tree, c.scope, c.node)
            if found is None:
                continue
            reader = self.text(c.node.func)
            msg = (f"`{reader}` reads the partition names from the boxes, but this tree lost them "
                   f"in {found.how}: every leaf gets `P()` and the arrays placed with it are "
                   f"fully replicated, a whole copy on every device; "
                   f"read the specs from the boxed tree and unbox only the values")
            related = () if found.direct else \
                (self.related(found.call, "the partitioning metadata is dropped here"),)
            yield self.finding(c.node, msg, fix=self._fix(found), related=related)

    def _fix(self, found) -> Fix | None:
        if not found.direct or found.inner is None or "unbox" not in found.how:
            return None
        inner = self.text(found.inner)
        return Fix(f"Read the specs from `{inner}` (the boxed tree)", "unsafe",
                   (Edit(self.span(found.call), inner),))
