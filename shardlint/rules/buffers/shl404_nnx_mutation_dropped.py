"""SHL404 nnx-mutation-dropped."""

from __future__ import annotations

import ast

from shardlint.rules.base import Edit, Fix, Rule, example, register
from shardlint.semantics.buffers.nnx_updates import (
    Mutation,
    NnxArguments,
    file_uses_nnx,
    uses_hijax,
)
from shardlint.semantics.file.execution import compiled_function
from shardlint.semantics.file.facts import JitSite
from shardlint.semantics.file.jit_sites import (
    LINEN_JIT,
    NNX_JIT,
    PMAP,
    jit_keywords,
    resolve_positions,
    signature,
)
from shardlint.semantics.file.moves import spell

# Keywords nnx.jit takes as jax.jit does: other keywords leave the site without a fix.
NNX_JIT_KEYWORDS = frozenset({"in_shardings", "out_shardings", "static_argnums", "static_argnames",
                              "donate_argnums", "donate_argnames", "keep_unused", "device",
                              "backend", "inline"})

_JIT_NAMES = {"jax.jit": "jax.jit", "jax.experimental.pjit.pjit": "pjit"}

_HOW = {
    "update": "updates `{obj}` in place",
    "nnx.update": "writes new state into `{obj}`",
    "variable": "assigns to a variable of `{obj}`",
    "attribute": "sets an attribute of `{obj}`",
}


@register
class NnxMutationDropped(Rule):
    code = "SHL404"
    name = "nnx-mutation-dropped"
    severity = "error"
    summary = "Plain `jax.jit` over NNX code that changes an argument in place and does not return it: the change is lost."
    what = """
Flags a function compiled with plain `jax.jit` (decorator, `jax.jit(f)`, `partial(jax.jit,
...)`, the decorator factory, or `pjit`) -- not `nnx.jit` -- whose body changes an NNX argument
in place while the function does not return that argument:

* `optimizer.update(model, grads)` (the optimizer, and the model whose parameters it updates),
  `optimizer.update(grads)` on an argument annotated as an NNX optimizer;
* `nnx.update(model, new_state)`;
* `v.value = ...`, `v[...] = ...`, `v.value += ...` on a variable reached from an argument
  (`model.count[...] += 1`), and `model.attr = ...` on an argument known to be an NNX object.

The finding sits on the first change of each such argument. This is the pattern of the Flax
NNX GSPMD guide: `@jax.jit def train_step(model, optimizer, x, y): ... optimizer.update(model,
grads); return model, loss`.

Not flagged: `nnx.jit` (it writes the changes back); arguments that are returned -- as
themselves, inside a tuple or dict, as a state taken from them (`return nnx.state(model)`,
the split/merge pattern), or handed to a call in the return statement
(`return Output(model=model)`); objects created or merged inside the function; `static_argnums`
arguments; files that opt into hijax or ref Variables (their updates do flow through `jax.jit`);
files that do not import `flax.nnx`.
"""
    why = """
`jax.jit` flattens an NNX module or optimizer into arrays and rebuilds it inside the trace; the
in-place change happens on that copy and is thrown away unless it is returned. Nothing fails.
Reproduced with the guide's step: the loss still goes down (the model is returned) while
`optimizer.step` stays 0 and Adam's moments stay 0 on every iteration. When only the loss is
returned, every update is lost -- the parameters never change -- and jax drops the unused
optimizer state from the executable entirely (arguments 32.5 MiB instead of 96.5 MiB).
"""
    use_instead = """
```python
@nnx.jit                                   # writes the in-place updates back
def train_step(model, optimizer, x, y):
    loss, grads = nnx.value_and_grad(loss_fn)(model, x, y)
    optimizer.update(model, grads)
    return loss

# or keep jax.jit and return every object that changes, then rebind them:
#   return model, optimizer, loss      ->   model, optimizer, loss = train_step(...)
```
"""
    fix_safety = """
Unsafe: the fix replaces `jax.jit` with `nnx.jit` (same keywords), which propagates the in-place
changes. Objects the function also returns become the same updated objects, so callers that
rebind them keep working; but code that relied on the old values staying untouched (comparing
before and after a step) sees the new ones. After the switch SHL401 may suggest donating the
updated arguments. No fix when `nnx` is not imported under a name, when the jit has keywords
`nnx.jit` does not take, or when pjit passes shardings by position.
"""
    versions = """
flax >= 0.11, where NNX modules are pytrees that `jax.jit` accepts (earlier versions reject
them loudly) and Variables are not hijax by default (`flax_hijax_variable` is still False in
flax 0.12.12).
"""
    applies_from = {"flax": "0.11.0"}
    VALID = [
        example("""
            import jax
            from flax import nnx

            @nnx.jit
            def train_step(model, optimizer, x, y):
                loss, grads = nnx.value_and_grad(lambda m: ((m(x) - y) ** 2).mean())(model)
                optimizer.update(model, grads)
                return loss
        """, title="nnx.jit writes the updates back"),
        example("""
            import jax
            from flax import nnx

            @jax.jit
            def train_step(model, optimizer, x, y):
                loss, grads = jax.value_and_grad(lambda m: ((m(x) - y) ** 2).mean())(model)
                optimizer.update(model, grads)
                return model, optimizer, loss
        """, title="jax.jit, every changed object returned"),
        example("""
            import jax
            from flax import nnx

            @jax.jit
            def train_step(graphdef, state, x, y):
                model, optimizer = nnx.merge(graphdef, state)
                grads = nnx.grad(lambda m: ((m(x) - y) ** 2).mean())(model)
                optimizer.update(model, grads)
                return nnx.state((model, optimizer))
        """, title="the split/merge pattern returns the new state"),
        example("""
            import jax
            from flax import nnx

            @jax.jit
            def evaluate(model, x, y):
                return ((model(x) - y) ** 2).mean()

            @jax.jit
            def scale(stats: dict, factor):
                stats.update({"scale": factor})   # a dict's update, not an NNX one
                return factor
        """, title="no in-place NNX change"),
        example("""
            import jax
            from flax import nnx

            nnx.var_defaults(hijax=True)

            @jax.jit
            def bump(counter):
                counter.count[...] += 1
        """, title="hijax Variables carry updates through jax.jit"),
        example("""
            import jax
            from flax import nnx

            @jax.jit
            def step(x, w):
                model = nnx.Linear(4, 4, rngs=nnx.Rngs(0))
                model.kernel.value = w          # built inside the function
                return model(x)
        """, title="a module created inside the function"),
    ]
    INVALID = [
        example("""
            import jax
            import optax
            from flax import nnx

            @jax.jit
            def train_step(model, optimizer, x, y):
                loss, grads = jax.value_and_grad(lambda m: ((m(x) - y) ** 2).mean())(model)
                optimizer.update(model, grads)  # expect: SHL404
                return model, loss

            model = nnx.Linear(4, 4, rngs=nnx.Rngs(0))
            optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
            for _ in range(3):
                model, loss = train_step(model, optimizer, x, y)
        """, title="the Flax NNX GSPMD guide's step: the optimizer is not returned"),
        example("""
            import jax
            from flax import nnx

            def train_step(model, optimizer, batch):
                loss, grads = nnx.value_and_grad(lambda m: (m(batch) ** 2).mean())(model)
                optimizer.update(model, grads)  # expect: SHL404
                return loss

            step = jax.jit(train_step, donate_argnums=(0, 1))
        """, title="only the loss is returned: every update is lost"),
        example("""
            import functools
            import jax
            import flax.nnx as fnn

            class Counter(fnn.Module):
                def __init__(self):
                    self.count = fnn.Variable(jax.numpy.zeros(()))

            @functools.partial(jax.jit, static_argnames="inc")
            def bump(counter: Counter, inc: int):
                counter.count[...] += inc  # expect: SHL404
                return inc
        """, title="a variable of an annotated module"),
        example("""
            import jax
            from flax import nnx

            @jax.jit(donate_argnums=0)
            def load(model, new_state):
                nnx.update(model, new_state)  # expect: SHL404
        """, title="nnx.update under the decorator factory"),
        example({
            "model.py": """
                from flax import nnx

                class MLP(nnx.Module):
                    def __init__(self, rngs: nnx.Rngs):
                        self.linear = nnx.Linear(4, 4, rngs=rngs)
                        self.calls = nnx.Variable(0)
            """,
            "train.py": """
                import jax
                from flax import nnx
                from model import MLP

                @jax.jit
                def forward(model: MLP, x):
                    model.calls.value = model.calls.value + 1  # expect: SHL404
                    return model.linear(x)
            """,
        }, title="a project module class from another file"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        return bool(facts.jit_sites) and file_uses_nnx(facts)

    def check(self):
        if uses_hijax(self.facts):
            return
        for site in self.facts.jit_sites:
            if site.api_name in (NNX_JIT, LINEN_JIT, PMAP):
                continue
            fn = compiled_function(self.facts, site)
            if fn is None or not isinstance(fn.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            static = resolve_positions(self.facts, site, signature(self.facts, site, fn), "static")
            if static is None:
                continue
            args = NnxArguments(self.facts, self.project, fn)
            lost = [m for m in args.first_mutations()
                    if m.param not in static.names and not args.returned(m.param)]
            # One finding per statement: `optimizer.update(model, grads)` loses both objects.
            by_node: dict[int, list[Mutation]] = {}
            for m in lost:
                by_node.setdefault(id(m.node), []).append(m)
            jit = _JIT_NAMES.get(site.api_name, site.api_name)
            for group in by_node.values():
                yield self.finding(group[0].node, self._message(jit, fn.name, group),
                                   related=[self.related(site.node, f"compiled with `{jit}` here")],
                                   fix=self._fix(site))

    def _message(self, jit: str, fn: str, group: list[Mutation]) -> str:
        objs = [m.param for m in group]
        names = " and ".join(f"`{o}`" for o in objs)
        how = _HOW[group[0].how].format(obj="` and `".join(objs))
        verb = "is" if len(objs) == 1 else "are"
        them = "it" if len(objs) == 1 else "them"
        return (f"this {how}, but `{fn}` is compiled with `{jit}`, which does not write NNX "
                f"changes back to the caller's objects, and {names} {verb} not returned: the "
                f"change is silently lost; use `nnx.jit`, or return {them} and rebind "
                f"{them} at the call")

    def _fix(self, site: JitSite) -> Fix | None:
        kws = jit_keywords(self.facts, site)
        if kws is None or any(k not in NNX_JIT_KEYWORDS for k in kws):
            return None
        node = site.node
        target: ast.expr | None = None
        if site.form == "decorator":
            target = node
        elif site.form == "factory" and isinstance(node, ast.Call):
            target = node.func
        elif site.form == "partial" and isinstance(node, ast.Call):
            partial = node if site.target is None else node.func
            if isinstance(partial, ast.Call) and partial.args:
                target = partial.args[0]
        elif site.form == "call" and isinstance(node, ast.Call):
            if len(node.args) > 1:
                return None  # pjit's positional shardings: nnx.jit takes keywords only
            target = node.func
        if target is None:
            return None
        spelled = spell(self.facts, "flax.nnx.jit", site.scope)
        if spelled is None or spelled.add_import is not None:
            return None
        return Fix(f"Compile with `{spelled.text}` (writes the in-place updates back)", "unsafe",
                   (Edit(self.span(target), spelled.text),))
