"""SHL403 donated-but-not-returned."""

from __future__ import annotations

import ast

from shardlint.rules.base import Rule, example, register
from shardlint.semantics.buffers.captures import read_in_nested
from shardlint.semantics.buffers.nnx_updates import NnxArguments, file_uses_nnx
from shardlint.semantics.file.dataflow import LocalFlow, positional_params
from shardlint.semantics.file.execution import compiled_function
from shardlint.semantics.file.facts import JitSite
from shardlint.semantics.file.jit_sites import (
    DONATE,
    LINEN_JIT,
    NNX_JIT,
    Signature,
    jit_keywords,
    resolve_positions,
    signature,
)
from shardlint.semantics.file.wrappers import named_jit_sites


@register
class DonatedButNotReturned(Rule):
    code = "SHL403"
    name = "donated-but-not-returned"
    severity = "warning"
    summary = "A donated argument never reaches the function's result: its buffers cannot be reused."
    what = """
Flags a `jax.jit`/`pjit` site with `donate_argnums`/`donate_argnames` whose function (defined in
the file, or a lambda) visibly cannot hand a donated argument's buffers on to an output:

* the argument does not reach the return value at all -- not returned, not used to compute
  anything returned (`return batch * 2` with the state donated; a step that returns nothing);
* an NNX module or optimizer (an argument handed to `nnx.grad`, `nnx.state`, an optimizer
  update, or annotated with an NNX type) is donated but only values computed from it are
  returned -- the loss -- not the object or a state taken from it.

Not flagged: `nnx.jit` (it returns the updated state internally, so donation is usable);
donated arguments that are returned, updated or not (`return state.apply_gradients(...)`,
`return x * 2`), handed to a call in the return statement (`return Output(model=model)`), or
read by a function defined inside (`jax.lax.cond(c, branch, ...)` where `branch` uses it);
an argument put into an object the function returns (`state.replace_by_pure_dict(params)`
then the merged model's state returned; `holder.params = params`);
`static_argnums` arguments and a bound `self`; `donate_argnums` that are not literals; functions
defined in another file; an argument the body never reads (donated for its buffers alone:
with `keep_unused=True`, or under `pmap`, XLA writes an output of the same shape there -- brax
donates the old environment state to the reset that makes the new one -- and plain `jax.jit`
drops an unused argument, donation and all: nothing is deleted, nothing is warned).
Whether a returned value has the donated buffer's shape, dtype and sharding is only known when
the step is compiled: `shardlint check --memory` reports `alias_size_in_bytes` for that.
"""
    why = """
Donation lets XLA write an output into an input's buffer, where their shapes and dtypes match.
A donated argument nothing returned is built from keeps its buffer unless an unrelated output
happens to match it: jax warns `UserWarning: Some donated buffers were not usable` at compile
time (a step that returns nothing gets no warning at all) and keeps both copies, so the memory
the donation was meant to save is spent anyway (reproduced: `alias_size_in_bytes == 0`). An NNX
step compiled with plain `jax.jit(train_step, donate_argnums=(0, 1))` that returns only the loss
donates the model and the optimizer for nothing -- all its donated buffers are unusable -- and
drops the in-place updates as well (SHL404).

The caller's arrays are not deleted either (measured: `is_deleted()` stays False for a donated
argument no output takes, on a TPU v5e with jax 0.10.2 and on CPU with jax 0.4.30 and 0.12): the
old values stay alive beside the new ones after the step too, for as long as the caller holds
them.
"""
    use_instead = """
```python
@partial(jax.jit, donate_argnums=(0,))
def train_step(state, batch):
    grads = jax.grad(loss_fn)(state.params, batch)
    return state.apply_gradients(grads=grads), metrics   # the donated state comes back updated

# NNX: nnx.jit returns the updated objects to the caller itself
step = nnx.jit(train_step, donate_argnums=(0, 1))
```
"""
    versions = "All versions of jax."
    VALID = [
        example("""
            import jax
            from flax import nnx

            def init_train_state(create_model, rng, partial_params):
                def init(rng, partial_params):
                    model = create_model(rng)
                    graphdef, state = nnx.split(model)
                    state.replace_by_pure_dict(partial_params)   # the loaded weights go in
                    model = nnx.merge(graphdef, state)
                    return nnx.state(model)

                return jax.jit(init, donate_argnums=(1,))(rng, partial_params)
        """, title="a donated argument put into an object the function returns"),
        example("""
            from functools import partial
            import jax

            @partial(jax.jit, donate_argnums=(0,))
            def train_step(state, batch):
                grads = jax.grad(lambda p: (state.apply_fn(p, batch) ** 2).mean())(state.params)
                return state.apply_gradients(grads=grads)
        """, title="the donated state is returned updated"),
        example("""
            import jax

            scale = jax.jit(lambda x, s: x * s, donate_argnums=0)
        """, title="a computation on the donated array can reuse it"),
        example("""
            import jax
            from flax import nnx

            def train_step(model, optimizer, batch):
                loss, grads = nnx.value_and_grad(lambda m: (m(batch) ** 2).mean())(model)
                optimizer.update(model, grads)
                return loss

            step = nnx.jit(train_step, donate_argnums=(0, 1))
        """, title="nnx.jit writes the state back itself"),
        example("""
            import jax
            from flax import nnx

            @jax.jit(donate_argnums=(0, 1))
            def train_step(model, optimizer, x, y):
                loss, grads = nnx.value_and_grad(lambda m: ((m(x) - y) ** 2).mean())(model)
                optimizer.update(model, grads)
                return model, optimizer, loss
        """, title="plain jax.jit returning every donated NNX object"),
        example("""
            import jax

            def step(state, batch, opts):
                return state + batch

            p_step = jax.jit(step, donate_argnums=DONATE)   # not a literal
        """, title="donated positions shardlint cannot read"),
        example("""
            import jax

            def reset(env_state_donated, keys):
                return make_states(keys)   # the same shapes as what is donated

            reset_fn = jax.jit(reset, donate_argnums=(0,), keep_unused=True)
            buffers = jax.jit(lambda old, new: new * 2, donate_argnums=0)
        """, title="an argument donated for its buffers alone, never read (run on jax 0.12: "
                   "with keep_unused=True it is deleted and the output written there, no "
                   "warning; without it jax.jit drops it: not deleted, no warning)"),
    ]
    INVALID = [
        example("""
            import jax
            from flax import nnx

            def train_step(model, optimizer, batch):
                loss, grads = nnx.value_and_grad(lambda m: (m(batch) ** 2).mean())(model)
                optimizer.update(model, grads)
                return loss

            step = jax.jit(train_step, donate_argnums=(0, 1))  # expect: SHL403
        """, title="NNX under plain jax.jit, only the loss returned"),
        example("""
            from functools import partial
            import jax

            @partial(jax.jit, donate_argnames=("cache",))  # expect: SHL403
            def decode(params, cache, tokens):
                jax.debug.print("cache norm {}", (cache ** 2).sum())
                return params["embed"][tokens]
        """, title="a donated cache read, but nothing returned is computed from it"),
        example("""
            import jax
            import jax.experimental.pjit

            def log_step(state, metrics):
                jax.debug.print("{} {}", metrics, state.step)

            p_log = jax.experimental.pjit.pjit(log_step, donate_argnums=(0,))  # expect: SHL403
        """, title="nothing returned at all"),
        example("""
            import jax
            from flax import nnx

            @jax.jit(donate_argnums=(0,))  # expect: SHL403
            def eval_loss(model: nnx.Module, x):
                return (model(x) ** 2).mean()
        """, title="an annotated NNX module, only a value computed from it returned"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        return bool(facts.jit_sites)

    def check(self):
        nnx_file = None
        for site in [*self.facts.jit_sites, *named_jit_sites(self.facts)]:
            if site.api_name in (NNX_JIT, LINEN_JIT):
                continue
            kws = jit_keywords(self.facts, site)
            if kws is None or not any(k in kws for k in DONATE):
                continue
            fn = compiled_function(self.facts, site)
            if fn is not None and isinstance(fn.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                sig = signature(self.facts, site, fn)
                flow = LocalFlow(self.facts, fn)
            elif isinstance(site.target, ast.Lambda):
                sig = Signature(positional_params(site.target), [], 0)
                flow = LocalFlow(self.facts, None, node=site.target)
                fn = None
            else:
                continue
            donated = resolve_positions(self.facts, site, sig, "donate")
            static = resolve_positions(self.facts, site, sig, "static")
            if sig is None or donated is None or static is None:
                continue
            self_param = sig.params[0] if sig.offset else None
            names = [p for i, p in enumerate(sig.params) if i in donated.positions]
            names += [p for p in sorted(donated.names) if p not in names]
            names = [p for p in names if p != self_param and p not in static.names
                     and p in flow.all_params]
            if not names:
                continue
            unused, computed = [], []
            nnx_args = None
            for p in names:
                if not flow.flows_to_return(p) and not _put_into_returned(flow, p):
                    # (one the body never reads is donated only for its buffers: XLA writes an
                    # output of the same shape there, `keep_unused=True` -- brax's
                    # `env_state_donated` -- or jax.jit drops it and donates nothing)
                    if not read_in_nested(flow.node, p) and _read(flow.node, p):
                        unused.append(p)
                    continue
                if fn is None:
                    continue
                if nnx_file is None:
                    nnx_file = file_uses_nnx(self.facts)
                if not nnx_file:
                    continue
                if nnx_args is None:
                    nnx_args = NnxArguments(self.facts, self.project, fn, flow)
                if p in nnx_args.nnx and not nnx_args.returned(p):
                    computed.append(p)
            if unused or computed:
                yield self.finding(site.node, self._message(site, flow, unused, computed))

    def _message(self, site: JitSite, flow: LocalFlow, unused: list[str],
                 computed: list[str]) -> str:
        parts = []
        if unused:
            verb = "is" if len(unused) == 1 else "are"
            what = "the function returns nothing" if not flow.returns else \
                f"no returned value is computed from {'it' if len(unused) == 1 else 'them'}"
            parts.append(f"{_names(unused)} {verb} donated but {what}")
        if computed:
            parts.append(f"the NNX object{'s' if len(computed) > 1 else ''} {_names(computed)} "
                         f"{'is' if len(computed) == 1 else 'are'} donated but only values "
                         f"computed from {'it' if len(computed) == 1 else 'them'} are returned")
        jit = site.api_name.rsplit(".", 1)[-1]
        # (XLA aliases by shape and dtype, not by what an output is computed from: a returned
        # value of the same shape may still take a donated buffer)
        why = ("the step has no output for XLA to write into the donated buffers, so the "
               "donation saves nothing" if not flow.returns else
               "XLA writes an output into a donated buffer only where their shapes and dtypes "
               "match, and no output is built from it here: unless another one happens to "
               "match, jax warns `Some donated buffers were not usable` and the donation saves "
               "nothing")
        return ("; ".join(parts) + f": {why}; return the updated value"
                + (", or compile with `nnx.jit`" if computed and jit != "nnx.jit" else "")
                + ", or stop donating it")


def _put_into_returned(flow: LocalFlow, name: str) -> bool:
    """The parameter is put into an object the function returns (something built from it),
    by a method of that object or a store into it: `state.replace_by_pure_dict(params)` then
    `model = nnx.merge(graphdef, state)` returned (openpi's init, donating the loaded weights
    into the model's parameters); `tree[key] = params`; `obj.params = params`."""
    body = flow.node.body  # type: ignore[attr-defined]
    for node in ast.walk(ast.Module(body=body if isinstance(body, list) else [], type_ignores=[])):
        holder = None
        if type(node) is ast.Call and type(node.func) is ast.Attribute \
                and any(type(a) is ast.Name and a.id == name
                        for a in [*node.args, *(k.value for k in node.keywords)]):
            holder = node.func.value
        elif type(node) is ast.Assign and type(node.value) is ast.Name \
                and node.value.id == name:
            holder = next((t.value for t in node.targets
                           if type(t) in (ast.Subscript, ast.Attribute)), None)
        while type(holder) in (ast.Attribute, ast.Subscript):
            holder = holder.value  # type: ignore[union-attr]
        if type(holder) is ast.Name and holder.id != name and flow.flows_to_return(holder.id):
            return True
    return False


def _read(node: ast.AST, name: str) -> bool:
    """Whether the function's (or lambda's) body reads the parameter ``name`` at all."""
    body = node.body  # type: ignore[attr-defined]
    return any(type(n) is ast.Name and n.id == name and type(n.ctx) is ast.Load
               for stmt in (body if isinstance(body, list) else [body]) for n in ast.walk(stmt))


def _names(names: list[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)
