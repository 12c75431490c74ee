"""What the context rules share: turning a MissingContext into a finding (SHL102, SHL103), and
the look-alike of a library that leaves its contexts to its callers (SHL102-SHL104, SHL201)."""

from __future__ import annotations

from typing import Callable, Iterator

from shardlint.rules.base import Finding, Fix, Related, Rule
from shardlint.semantics.catalog.api import SET_MESH_ADDED
from shardlint.semantics.flow.project import MissingContext
from shardlint.semantics.sharding.lifts import stacking_factories
from shardlint.source import Span


def mesh_in_context(versions) -> str:
    """How a mesh is put in context, said for every jax the project may run: `jax.set_mesh`
    from jax 0.7.1; before it, the legacy `with mesh:` (which every flax that runs there
    honours: flax 0.12.2, the first that ignores it, needs jax >= 0.8.1)."""
    if not versions.may_be_below("jax", SET_MESH_ADDED):
        return "`jax.set_mesh`"
    if versions.below("jax", SET_MESH_ADDED):
        return "`with mesh:`"
    return f"`jax.set_mesh`, or `with mesh:` on jax < {SET_MESH_ADDED}"


def missing_context_findings(rule: Rule, flag: int, consequence: str,
                             fix: Callable[[MissingContext], Fix | None] | None = None
                             ) -> Iterator[Finding]:
    """One finding per place where model code runs without the context ``flag`` names.

    ``consequence`` completes "this initialises `Model`, whose ...".
    """
    factories = None
    for m in rule.project.entries_missing_context(rule.facts.module):
        if m.missing & flag:
            if factories is None:
                factories = stacking_factories(rule.facts)
            if m.entry.scope in factories and not m.callers \
                    and rule.project.context_of(rule.facts.module, m.entry.scope) is None:
                # A stacked-layer factory nobody in the project calls: a library function,
                # whose caller brings the mesh. (Other uncalled functions follow the index's
                # policy: reported only when their program provides the context nowhere.)
                continue
            verb = "applies" if m.entry.kind == "apply" else "initialises"
            handed = f" ({m.handed})" if m.handed else ""
            message = f"this {verb} `{m.model_name}`{handed}, whose {consequence}{where(rule, m)}"
            finding = context_finding(rule, m, message)
            if fix is not None:
                finding.fix = fix(m)
            yield finding


def context_finding(rule: Rule, m: MissingContext, message: str) -> Finding:
    e = m.entry
    related: list[Related] = []
    for path, site in rule.project.constraint_sites(m.model, rule.facts.module):
        short = site.api.rsplit(".", 1)[-1]
        related.append(Related(path, Span(site.line, site.col, site.end_line, site.end_col),
                               f"`{short}` here is a no-op without it"))
    for _, _, path, line in m.callers[:3]:
        related.append(Related(path, Span(line, 0, line, 0), "called here without it"))
    span = Span(e.line, e.col, e.end_line, e.end_col)
    return rule.finding(span, message, related=related)


def where(rule: Rule, m: MissingContext) -> str:
    e = m.entry
    if e.scope and m.callers:
        _, _, path, line = m.callers[0]
        name = path.rsplit("/", 1)[-1]
        return f" (`{e.scope}` is called at {name}:{line} without it)"
    return ""


# A library that applies its constraints only where its caller brings the contexts (guarded by
# `if nn.get_logical_axis_rules():` / `if not get_abstract_mesh().empty:`, or entering them
# itself): a VALID example of every rule about a missing context or an unmapped name.
GUARDED_LIBRARY = {
    "layers.py": """
        import flax.linen as nn
        import jax

        class MLP(nn.Module):
            @nn.compact
            def __call__(self, x):
                y = nn.Dense(8)(x)
                if nn.get_logical_axis_rules():   # the caller's rules, where it brings any
                    y = nn.with_logical_constraint(y, ("batch", "hidden_mlp"))
                return y

        class Head(nn.Module):
            @nn.compact
            def __call__(self, x):
                y = nn.Dense(8)(x)
                if not jax.sharding.get_abstract_mesh().empty:
                    y = jax.lax.with_sharding_constraint(y, jax.sharding.PartitionSpec("data"))
                return y

        class Scoped(nn.Module):
            @nn.compact
            def __call__(self, x):
                with nn.logical_axis_rules((("batch", "data"),)):
                    return nn.with_logical_constraint(nn.Dense(8)(x), ("batch", None))
    """,
    "run.py": """
        import jax
        from layers import MLP, Head, Scoped

        x = jax.numpy.ones((2, 4))
        with jax.set_mesh(jax.make_mesh((1,), ("data",))):
            MLP().init(jax.random.key(0), x)
            Scoped().init(jax.random.key(0), x)
        MLP().init(jax.random.key(0), x)
        Head().init(jax.random.key(0), x)
    """,
}
