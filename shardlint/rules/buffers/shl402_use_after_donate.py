"""SHL402 use-after-donate."""

from __future__ import annotations

import ast

from shardlint.rules.base import Rule, example, register
from shardlint.semantics.buffers.donation import DonatingCall, donating_calls, handed_back
from shardlint.semantics.flow.liveness import Use, use_after
from shardlint.semantics.file.execution import execution_of
from shardlint.semantics.file.jit_sites import passed


@register
class UseAfterDonate(Rule):
    code = "SHL402"
    name = "use-after-donate"
    severity = "error"
    summary = ("A value is read after it was donated to a jitted call, which deletes the "
               "buffers it reuses for its outputs.")
    what = """
Follows every argument passed to a callable that donates it -- a function decorated with
`jax.jit(donate_argnums=...)` / `partial(jax.jit, donate_argnames=...)`, a name or `self.attr`
bound to `jax.jit(f, donate_argnums=...)`, `pjit` and `jax.pmap` alike, in this file or
imported from another project file -- and flags the first read of its arrays in the same
function after the call, before it is rebound. Reads through an alias taken before the call
(`old = state.params`), through attribute chains (`state.params`), through a loop over its
leaves (`for v in batch.values(): print(v)`) and in lambdas run on the spot
(`jax.lax.cond(c, lambda: state, ...)`, `jax.tree.map(lambda x: x.sum(), batch)`) count. In a
loop, a call such as `new_state = step(state, batch)` that never rebinds `state` is flagged
where the next iteration passes `state` again (a `continue` before the rebind included).

What touches no buffer is not a read: metadata (`.shape`, `.dtype`, `.sharding`, also
`batch["x"][key].shape`), freeing the arrays (`x.delete()`, `jax.tree.map(lambda h:
h.delete(), batch)`, `for v in batch.values(): v.delete()`), and questions about the
container (`batch.keys()`, `len(batch)`, `"mask" in batch`, `x is None`).

Severity: an **error** where the compiled function returns the donated argument or an updated
version of it (`state.apply_gradients(...)`, `optax.apply_updates(params, ...)`, a cache
written with `.at[].set`, followed through its calls in any file): those outputs have its
shapes and dtypes, so XLA reuses its buffers and the read certainly raises. Otherwise a
**warning**: XLA deletes a donated array only where an output of the same shape and dtype can
take its buffer (a batch donated to a step that returns metrics and logits is deleted only if
some logits happen to have a batch leaf's shape), which shardlint cannot see. That warning is
in preview (`--preview`, `preview = true`): on the real-code corpus one of its three findings
read a batch that was host NumPy (never deleted) through a dataset chosen by configuration.

Not followed: `nnx.jit`, which writes the new state back into the modules passed, so they stay
usable; host values (NumPy arrays, `jax.device_get(...)`, literals) bound in the function,
which are copied to the device and stay valid; calls inside a jitted function, where donation
is ignored; a name rebound on some paths only (shardlint does not guess which path runs);
`donate_argnums` that are not literals.
"""
    why = """
Donation hands the input buffers to XLA for the outputs: each donated array that XLA aliases to
an output of the same shape and dtype is deleted by the call (one that fits no output is left
alone, with `UserWarning: Some donated buffers were not usable`). A later read of a deleted
array fails, but only when that line runs -- often at the first logging step, far into a run:
`RuntimeError: Array has been deleted with shape=float32[4096,4096]`, or for an alias kept
elsewhere `JaxRuntimeError` / `INVALID_ARGUMENT: Buffer has been deleted or donated` (an NNX
module passed to a donating `jax.jit` and touched afterwards). Whether it fails can change with
a config: a batch read after a donating eval step survives until the number of classes makes
the logits the shape of the labels.
"""
    use_instead = """
```python
train_step = jax.jit(train_step, donate_argnums=0)
for batch in batches:
    state, metrics = train_step(state, batch)   # rebind the donated name to the result
    log(metrics, state.step)                    # read the new state, never the old one
```
"""
    versions = "All versions of jax (donation has deleted the donated buffers since it was introduced)."
    VALID = [
        example("""
            import jax

            step = jax.jit(lambda s, b: s + b, donate_argnums=0)

            def train(state, batches):
                for batch in batches:
                    state = step(state, batch)
                return state
        """, title="the donated name is rebound to the result"),
        example("""
            from functools import partial
            import jax

            @partial(jax.jit, donate_argnums=(0,))
            def train_step(state, batch):
                return state.apply_gradients(grads=batch)

            def train(state, batches):
                for batch in batches:
                    new_state = train_step(state, batch)
                    print(new_state.step, state.params["w"].shape)   # metadata only
                    state = new_state
                return state
        """, title="the result is used; the old value's shape is metadata"),
        example("""
            import jax
            from flax import nnx

            @nnx.jit(donate_argnums=(0, 1))
            def train_step(model, optimizer, batch):
                grads = nnx.grad(lambda m: m(batch).mean())(model)
                optimizer.update(model, grads)

            def train(model, optimizer, batches):
                for batch in batches:
                    train_step(model, optimizer, batch)
                    print(model(batches[0]))   # nnx.jit wrote the new state into `model`
        """, title="nnx.jit updates the objects passed"),
        example("""
            import jax
            import numpy as np

            @jax.jit(donate_argnums=0)
            def normalize(x):
                return x / 255.0

            images = np.ones((8, 32, 32, 3), np.float32)
            out = normalize(images)
            print(images.mean())   # a NumPy array is copied to the device, not deleted
        """),
        example("""
            import jax

            def step(state, batch):
                return state + batch

            fast = jax.jit(step, donate_argnames="batch")

            def run(state, batch):
                new = fast(state, batch)
                return state + new   # only `batch` is donated
        """, title="donate_argnames resolved to the parameter it names"),
        example({
            "train_lib.py": """
                from functools import partial
                import jax

                @partial(jax.jit, donate_argnums=0)
                def train_step(state, batch):
                    return state.apply_gradients(grads=batch)
            """,
            "main.py": """
                import jax
                from train_lib import train_step

                def main(state, batches):
                    for batch in batches:
                        state = train_step(state, batch)
                    return state
            """,
        }, title="imported from another file and rebound"),
        example("""
            from functools import partial
            import jax

            @partial(jax.jit, donate_argnums=(0, 1))
            def train_step(state, batch):
                grads = jax.grad(lambda p: state.apply_fn(p, batch["image"]).mean())(state.params)
                return state.apply_gradients(grads=grads), {"seen": batch["mask"].sum()}

            def train(state, batches):
                for batch in batches:
                    state, metrics = train_step(state, batch)
                    jax.tree_util.tree_map(lambda x: x.delete(), batch)   # frees, reads nothing
                    print(metrics["seen"])
                return state
        """, title="the donated batch is freed leaf by leaf after the step"),
        example("""
            from functools import partial
            import jax

            @partial(jax.jit, donate_argnums=(1,))
            def eval_step(state, batch):
                logits = state.apply_fn(state.params, batch["inputs"])
                return {"err": (logits - batch["label"]).mean()}, logits

            def evaluate(state, batches):
                for batch in batches:
                    metrics, logits = eval_step(state, batch)
                    if "label" in batch and len(batch) > 1 and batch["inputs"] is not None:
                        for name in batch.keys():
                            print(name, batch[name].shape[1:], logits.dtype)   # keys, metadata
                    for leaf in batch.values():
                        leaf.delete()
        """, title="after the call only the container's keys, sizes and shapes are read"),
    ]
    INVALID = [
        example("""
            import jax

            def train_step(state, batch):
                return jax.tree.map(lambda p, g: p - 0.1 * g, state, batch)

            step = jax.jit(train_step, donate_argnums=0)

            def train(state, batch):
                new_state = step(state, batch)
                print(state["w"])  # expect: SHL402
                return new_state
        """, title="reading the donated name after the call"),
        example("""
            import jax
            from ejkernel.callib import ejit

            def train_step(state, batch):
                return jax.tree.map(lambda p, g: p - 0.1 * g, state, batch)

            step = ejit(train_step, static_argnums=(), donate_argnums=(0,))

            def train(state, batch):
                new_state = step(state, batch)
                return new_state, state["w"]  # expect: SHL402
        """, title="an in-house jit wrapper (named like one) that donates"),
        example("""
            import functools
            import jax

            @functools.partial(jax.jit, donate_argnums=(0,))
            def train_step(state, batch):
                return state.apply_gradients(grads=batch)

            def train(state, batches):
                for batch in batches:
                    new_state = train_step(state, batch)  # expect: SHL402
                return new_state
        """, title="loop-carried: the next iteration passes the deleted state"),
        example("""
            from functools import partial
            import jax

            @partial(jax.jit, donate_argnames="state")
            def train_step(state, batch):
                return state.apply_gradients(grads=batch)

            def train(state, batch):
                old_params = state.params
                state = train_step(state, batch)
                return jax.tree.map(lambda a, b: a - b, state.params, old_params)  # expect: SHL402
        """, title="an alias taken before the call"),
        example("""
            import jax

            class Trainer:
                def __init__(self, step_fn):
                    self.step = jax.jit(step_fn, donate_argnums=(0,))

                def fit(self, state, batch):
                    new_state = self.step(state, batch)
                    if new_state.step % 100 == 0:
                        print(state.params)  # expect: SHL402
                    return new_state
        """, title="bound to self.step in __init__"),
        example("""
            import jax

            @jax.jit(donate_argnums=0)
            def update(params, grads):
                return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)

            params = {"w": jax.numpy.ones((4096, 4096))}
            grads = {"w": jax.numpy.ones((4096, 4096))}
            new_params = update(params, grads)
            loss = (params["w"] ** 2).sum()  # expect: SHL402
        """, title="module-level script, jax >= 0.8.1 decorator factory"),
        example("""
            import jax
            from jax.experimental.pjit import pjit

            def step(state, batch):
                return state + batch

            p_step = pjit(step, donate_argnums=(0,))

            def run(state, batch):
                p_step(state, batch)
                return state * 2  # expect: SHL402
        """, title="pjit, result dropped"),
        example("""
            import jax
            from flax import nnx

            @jax.jit(donate_argnums=0)
            def forward(model, x):
                return model(x)

            model = nnx.Linear(1024, 1024, rngs=nnx.Rngs(0))
            x = jax.numpy.ones((8, 1024))
            y = forward(model, x)
            y2 = model(x)  # expect: SHL402
        """, title="an NNX module donated to jax.jit, then called again"),
        example({
            "train_lib.py": """
                import jax

                def _step(state, batch):
                    return state.apply_gradients(grads=batch)

                train_step = jax.jit(_step, donate_argnames="state")
            """,
            "main.py": """
                import jax
                import train_lib

                def main(state, batch):
                    new_state = train_lib.train_step(state, batch)
                    print(state.step)  # expect: SHL402
                    return new_state
            """,
        }, title="the donating step lives in another file"),
        example("""
            from functools import partial
            import jax

            @partial(jax.jit, donate_argnums=(1,))
            def eval_step(state, batch):
                return state.apply_fn(state.params, batch["inputs"])

            def evaluate(state, batches):
                errors = []
                for batch in batches:
                    logits = eval_step(state, batch)
                    errors.append(logits - batch["label"])  # expect: SHL402
                return errors
        """, title="a batch read after a step that may reuse its buffers (a warning)"),
        example("""
            from functools import partial
            import jax
            import numpy as np

            @partial(jax.jit, donate_argnums=(0, 1))
            def train_step(state, batch):
                grads = jax.grad(lambda p: state.apply_fn(p, batch["image"]).mean())(state.params)
                return state.apply_gradients(grads=grads)

            def train(state, batches):
                for batch in batches:
                    state = train_step(state, batch)
                    host = jax.tree.map(lambda x: np.asarray(x), batch)  # expect: SHL402
                    print(host["image"].mean())
                return state
        """, title="a leaf-wise map that reads each leaf"),
        example("""
            from functools import partial
            import jax

            @partial(jax.jit, donate_argnums=(0,))
            def train_step(params, grads):
                return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

            def train(params, grads):
                new_params = train_step(params, grads)
                for leaf in params.values():
                    print(leaf.sum())  # expect: SHL402
                return new_params
        """, title="a loop over the donated leaves that reads them"),
    ]

    def check(self):
        calls = list(donating_calls(self.facts, self.project))
        if not calls:
            return
        execution = execution_of(self.facts)
        for d in calls:
            if execution.is_traced(d.call):
                continue  # inside a trace donation is ignored: nothing is deleted
            returned: set[int | str] | None = None
            for key, arg in passed(d.call.node, d.positions, d.names):
                use = use_after(self.facts, d.call, arg)
                if use is None:
                    continue
                if returned is None:
                    returned = handed_back(self.facts, self.project, d)
                related = [self.related(d.call.node, "donated here")]
                if key in returned:
                    yield self.finding(use.expr, self._message(d, arg, use), related=related)
                elif self.ctx.preview:
                    # (preview: whether an output fits the buffers is not shown here; on the
                    # real-code corpus one of three such findings was a host batch, never
                    # deleted)
                    # No output is known to fit its buffers: deleted only if XLA finds one.
                    yield self.finding(use.expr, self._maybe(d, arg, use), severity="warning",
                                       related=related)

    def _where(self, d: DonatingCall) -> tuple[str, str, int]:
        how = d.how if d.defined_in is None else f"{d.how} in {d.defined_in.rsplit('/', 1)[-1]}"
        return self.text(d.call.node.func), how, d.call.node.lineno

    def _maybe(self, d: DonatingCall, arg: ast.expr, use: Use) -> str:
        callee, how, line = self._where(d)
        passed_text = self.text(arg)
        unknown = (f"a donated array is deleted when XLA reuses its buffer for an output of the "
                   f"same shape and dtype, and a read then raises `RuntimeError: Array has been "
                   f"deleted` (unknown here: `{callee}` does not visibly return `{passed_text}` "
                   f"or an update of it)")
        if use.next_iteration:
            return (f"`{passed_text}` may be passed deleted on the next iteration: it is donated "
                    f"to `{callee}` on line {line} ({how}) and not rebound in the loop; "
                    f"{unknown}; donate only what the call returns updated, or pass a fresh value")
        if use.alias_of is not None:
            held = f"a leaf of `{use.alias_of}`" if use.leaf else f"`{use.alias_of}`"
            return (f"`{use.node.id}` may hold deleted buffers: it holds {held}, which was "
                    f"donated to `{callee}` on line {line} ({how}); {unknown}; read what you "
                    f"need before the call, or donate only what the call returns updated")
        return (f"`{self.text(use.expr)}` may read deleted buffers: `{passed_text}` was donated "
                f"to `{callee}` on line {line} ({how}); {unknown}; read what you need before "
                f"the call, or donate only what the call returns updated")

    def _message(self, d: DonatingCall, arg: ast.expr, use: Use) -> str:
        callee, how, line = self._where(d)
        passed_text = self.text(arg)
        if use.next_iteration:
            return (f"`{passed_text}` is donated to `{callee}` on line {line} ({how}) but not "
                    f"rebound in the loop: the next iteration passes its deleted buffers "
                    f"(`RuntimeError: Array has been deleted`); assign the result back, "
                    f"e.g. `{passed_text} = {callee}(...)`")
        if use.alias_of is not None:
            held = f"a leaf of `{use.alias_of}`" if use.leaf else f"`{use.alias_of}`"
            return (f"`{use.node.id}` holds {held}, which was donated to `{callee}` on "
                    f"line {line} ({how}): reading it raises `RuntimeError: Array has been "
                    f"deleted`; copy what you need before the call, or read the result")
        return (f"`{passed_text}` was donated to `{callee}` on line {line} ({how}), so "
                f"`{self.text(use.expr)}` reads deleted buffers (`RuntimeError: Array has been "
                f"deleted`); use the call's result instead (`{passed_text} = {callee}(...)`)")
