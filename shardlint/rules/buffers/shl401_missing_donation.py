"""SHL401 missing-donation."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from shardlint.rules.base import Edit, Fix, Related, Rule, example, register
from shardlint.semantics.catalog import facts as releases
from shardlint.semantics.catalog.names import dotted
from shardlint.semantics.flow.liveness import chain, use_after
from shardlint.semantics.buffers.lowering import inspected_only
from shardlint.semantics.file.dataflow import UPDATED
from shardlint.semantics.file.execution import Execution, execution_of
from shardlint.semantics.file.facts import CallSite, JitSite
from shardlint.semantics.file.jit_sites import (
    DONATE,
    LINEN_JIT,
    NNX_JIT,
    Signature,
    calls_of,
    jit_keywords,
    keyword_call,
    leaves_replicated,
    passed,
    references_of,
    remote_names,
    resolve_positions,
    same_sharding,
)
from shardlint.semantics.flow.compiled import (
    Compiled,
    compiled,
    flowing,
    may_call_a_wrapper,
    rebind_facts,
    wrapper_sites,
)
from shardlint.semantics.flow.valueflow import Flowing
from shardlint.semantics.sharding.placement import state_nbytes
from shardlint.source import Span


@dataclass(frozen=True)
class Evidence:
    """Why an argument is replaced: a message template ({0}: the argument, {1}: ``code``) and
    the places that prove it."""

    template: str
    code: str
    related: tuple[Related, ...]


SMALL_STATE = 1 << 20  # below this per call, a second copy of the state costs nothing worth a rule


@dataclass
class Candidate:
    index: int | None  # position in the compiled function's signature; None: keyword-only
    param: str
    evidence: Evidence


# gymnax-style environment wrappers: a jitted `step` method (`static_argnums=(0,)`: `self`),
# called on an instance in another module's traced code (an example, and the tests of its
# callers).
GYMNAX_WRAPPERS = """
from functools import partial

import jax


class Base:
    def __init__(self, env):
        self._env = env


class LogWrapper:
    def __init__(self, env):
        self._env = env

    @partial(jax.jit, static_argnums=(0,))
    def step(self, key, state, action):
        obs, inner, reward, done = self._env.step(key, state["env"], action)
        state = {"env": inner, "returns": state["returns"] + reward}
        return obs, state, reward, done
"""

# A `@jax.jit` step that another transform compiles again (acme's `jax.pmap(sgd_step, ...)`):
# an example, and the test that hands it to each transform.
JITTED_SGD_STEP = """
import jax
import optax

tx = optax.sgd(0.1)

@jax.jit
def sgd_step(state, batch):
    params, opt_state = state
    grads = jax.grad(lambda p: (p * batch).sum())(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state
"""

# Example code shared by two examples each: a partitioner whose `partition` compiles its first
# argument and forwards `donate_argnums`, and a train-state Protocol.
_PARTITIONERS = """
                from jax.experimental.pjit import pjit

                class BasePartitioner:
                    def partition(self, fn, in_shardings, out_shardings, donate_argnums=()):
                        \"\"\"Compiles `fn` for the mesh.\"\"\"
                        raise NotImplementedError

                class PjitPartitioner(BasePartitioner):
                    def partition(self, fn, in_shardings, out_shardings, donate_argnums=()):
                        return pjit(fn, in_shardings=in_shardings, out_shardings=out_shardings,
                                    donate_argnums=donate_argnums)
"""
# A helper that names a partial of its function, binding its own `**kwargs` (two examples).
_NAMING = """
                import functools
                import jax

                def named_partial_fn(fn, name, **kwargs):
                    fn = functools.partial(fn, **kwargs)
                    fn.__name__ = name
                    return fn
"""
# A decoding state record, alone and with the loop carry that holds it (four examples and two).
_DECODE_STATE = """
            import dataclasses
            import jax

            @jax.tree_util.register_dataclass
            @dataclasses.dataclass(frozen=True)
            class DecodeState:
                tokens: jax.Array
                pages: jax.Array"""
_DECODE_CARRY = """
            import dataclasses
            import jax
            import jax.numpy as jnp

            @jax.tree_util.register_dataclass
            @dataclasses.dataclass(frozen=True)
            class _Carry:
                step: jax.Array
                state: "DecodeState"

            @jax.tree_util.register_dataclass
            @dataclasses.dataclass(frozen=True)
            class DecodeState:
                tokens: jax.Array
                pages: jax.Array"""
_PROTOCOL = """                class TrainState(typing.Protocol):
                    def apply_gradient(self, grads, learning_rate) -> "TrainState":
                        ...  # applies the gradient, returns the updated state

                    def state_dict(self) -> dict:
                        ...

                    def replace_params(self, params) -> "TrainState":
                        ...
"""


@register
class MissingDonation(Rule):
    code = "SHL401"
    name = "missing-donation"
    severity = "warning"
    summary = "A jitted step returns an updated state but does not donate the old one: 2x its memory."
    what = """
Flags a jit site -- `@jax.jit`, `@jax.jit(...)`, `partial(jax.jit, ...)`, `jax.jit(f)`, `pjit`,
`jax.pmap`, `nnx.jit`, an in-house wrapper (a project function that returns `jax.jit(fn,
**kw)`, a callable from outside the project whose name ends in `jit`, or one named in
`jit-wrappers`) -- without `donate_argnums`/`donate_argnames`, whose function replaces one of
its arguments. The function is followed wherever it is defined: in this file, imported from
another module of the project, behind `functools.partial` (positions shift by what it binds),
a method (`jax.jit(self.step)`), a local name, or the callable a project helper returns. The
update is followed through the calls it makes, in any file (a package of a sibling
sub-project included), through the methods of an object built there (`Updater(lr).apply(...)`)
and through the item, dict entry or record field of a result the step picks
(`apply(state, g)["state"]`, `.state` of a named tuple), to where it happens:

* a returned value built from the argument by a state update -- `state.apply_gradients(...)`,
  `state.replace(...)`, `x._replace(...)`, `dataclasses.replace(x, ...)`,
  `optax.apply_updates(params, ...)`, the new optimizer state from `tx.update(grads,
  opt_state, ...)`, `jax.tree.map(lambda p, g: p - lr * g, params, grads)`, a cache written
  with `cache.at[i].set(v)` or `lax.dynamic_update_slice(cache, ...)` (also leaf by leaf in a
  `jax.tree.map`), the carry of
  `lax.scan`/`fori_loop`/`while_loop`, `nnx.state(...)`/`nnx.split(...)` of a module merged
  from it, a record rebuilt field by field from its fields (`{"pos": state["pos"] + 1,
  "cache": ...}`, `DecodeState(pos=state.pos + 1, ...)`), or the argument rebound to the result
  of a method it is handed to (`decode_state = self.engine.insert(prefix, decode_state)`); also
  what a branch of `lax.cond`/`lax.switch` returns (a lambda or a nested function, reading the
  step's names from the enclosing scope or taking them as operands);
* under `nnx.jit`, an in-place update (`optimizer.update(model, grads)`, `nnx.update(model,
  state)`, a variable written: `v.value = ...`, `v[...] = ...`, `v.set_value(...)`), also
  inside a helper the step calls, or a method of the class a parameter is annotated with
  (`acc: Accumulator` ... `acc.add(grads)`, where `add` sets `self.total`);
* the same sharding for an argument and an output (`in_shardings=(state_sh, batch_sh),
  out_shardings=(state_sh, None)`), which is how large projects spell "this is updated";
* an update made by a method of a `typing.Protocol` the state parameter is annotated with
  (`train_state: TrainState` ... `train_state.apply_gradient(g)`, a stub there): what every
  project class that implements the Protocol (its methods, one member aside) does in that
  method, where they agree (`return self.replace(...)`); a method of the same name on another
  kind of object says nothing;
* a parameter whose fields or items the function writes where they are and then returns
  (`cache.k[i] = new; return cache`), or rebinds to a record rebuilt from its own fields;
* at the call of a jit wrapper of the project that compiles its first argument and forwards
  its own `donate_argnums`/`donate_argnames` (`def partition(self, fn, ..., donate_argnums=())`
  ... `pjit(fn, ..., donate_argnums=donate_argnums)`), also as a method of an object of a class
  shardlint cannot name where every project method of that name is such a wrapper
  (`self._partitioner.partition(train_step, ...)`; abstract stubs aside), the donation added
  to that call;
* callers that rebind the name they pass in a loop (`x = smooth(x, k)`), wherever the
  function lives -- also where shardlint cannot follow what is compiled (a step from a
  package it does not read, one rebound in a branch to a wrapper of itself): "not known" does
  not veto what every loop that calls it shows, and the message says the step was not followed.

The message names the argument, the exact `donate_argnums`/`donate_argnames` to add (counting
`self` for methods, leaving out static arguments) and the chain of calls that proves the update
(`train_step -> _apply -> state.apply_gradients(...)`), each step a related location. For a
jit-like wrapper of another package (`hax.named_jit`), whose keywords shardlint does not know,
it says to donate the wrapper's own way, with no fix. An argument passed only by keyword is
advised as `donate_argnames` only where the jit takes it at every release the project may run
(`jax.jit` and pjit from jax 0.4.14, `jax.pmap` never: it donates by position only); elsewhere
the message says it cannot be donated there, and the fix donates the rest.

Not flagged: steps that return only metrics, losses or predictions, or results of another
structure (a few fields picked out of the batch and packed again is a selection, not an
update); a step whose caller keeps reading the old value after the call, directly or through
an alias (donating would break that caller: SHL402) -- a caller in the file, or one in another
module that rebinds what it passes (`old = state; state = step(state, b); old.step`), found
through its module's summary, whether it calls the step by its name, through what a factory
returns (`step = make_step(cfg)`) or as an instance's method (`Trainer().step`); a caller
that keeps what it passes in a container (`states.append(state)` in the loop, then
`animate(states)`: the next call would delete the arrays the list holds); a PRNG key (handed
to `jax.random` in the step: a few bytes, nothing to save); an argument every call passes as
`None` (no cache yet: nothing to donate); steps only called inside other traces, or only
handed to them (a `lax.while_loop` body, a `functools.partial` of the step, in a jitted
function; a `@jax.jit` function compiled again by `jax.pmap(sgd_step, ...)`, whose inner jit
runs traced -- the outer one is where to donate), also a decorated function the project
calls only from functions other modules compile (`forward_decoder` called in the jitted
`forward_model` of another file), a jitted method called only on an object built from its
class in code another module traces (gymnax-style `env.step(...)` in the `lax.scan` body of
a jitted train function), and `jax.jit(..., inline=True)`, where donation is ignored; a jit
of a function the same scope also
compiles with a donation (`if donate: jax.jit(step, donate_argnums=...) else: jax.jit(step)`:
the choice is offered on purpose); a wrapper given a donation keyword of its own
(`hax.named_jit(donate_args=(True,))`); a parameter rebound, before the value returned is built
from it, to something else shardlint can tell (`seq = embed(params, seq)` then `seq = decode(ws,
seq)`: the ids that came in are not what is updated); one-tree maps such as
`jax.tree.map(lambda m: m / c, moment)` (a new value; the old one is usually still needed); a
step that is only lowered to be inspected and never run (`jax.jit(step).lower(*args).compile()
.cost_analysis()`, `.lower(...).as_text()`, the jitted callable a local name every use of which
is such a lowering); a step every caller of which in the file passes state that is visibly
under 1 MiB (arrays of literal shapes, through names: a second copy costs nothing); a
loop rebind alone when the function returns the argument unchanged, returns it visibly
reshaped (`x = resize(x, size)`, an index, a reduction: new data the old buffer could not
hold) or the jit's `out_shardings` places the part of the result rebound (a reshard cannot
reuse the buffer; not counted: `None` there, the compiler's choice, or the shardings the
argument has now, `jax.tree.map(lambda x: x.sharding, state)`). What keeps it
silent: an update made by a function outside the project (unknown, never assumed) with no
caller that rebinds the result in a loop, `**options` at the jit site (it may donate).
"""
    why = """
Without donation XLA cannot write the new parameters and optimizer state into the buffers of
the old ones: both copies are alive during the step. Measured with `memory_analysis()`: a
64 MiB parameter update peaks at 192 MiB without donation and 128 MiB with it (64 MiB aliased);
an Adam step on one device at 384 MiB vs 192 MiB; an NNX step under `nnx.jit` at 192.6 MiB vs
96.6 MiB with `donate_argnums=(0, 1)`. That is the difference between fitting a model and not.
"""
    use_instead = """
```python
@partial(jax.jit, donate_argnums=(0,))      # or @jax.jit(donate_argnums=(0,)) on jax >= 0.8.1
def train_step(state, batch):
    grads = jax.grad(loss_fn)(state.params, batch)
    return state.apply_gradients(grads=grads)

for batch in batches:
    state = train_step(state, batch)        # rebind: the old state is never read again
```
"""
    fix_safety = """
Unsafe: donation deletes the caller's input arrays after the call. Every caller must rebind
the name it passes (`state = train_step(state, batch)`) and never read the old value or an
alias of it again (SHL402 checks this). The fix adds `donate_argnums=(i,)` to the jit call; on
a bare `@jax.jit` decorator it writes `@partial(jax.jit, donate_argnums=(i,))` when `partial`
is imported, else the decorator-factory form `@jax.jit(donate_argnums=(i,))`, which needs
jax >= 0.8.1 (no fix is offered on older jax).
"""
    versions = "All versions. The `@jax.jit(donate_argnums=...)` spelling of the fix needs jax >= 0.8.1."
    VALID = [
        example({"wrappers.py": GYMNAX_WRAPPERS, "train.py": """
            import jax
            from wrappers import LogWrapper

            def make_train(base_env):
                env = LogWrapper(base_env)

                def train(key, state, action):
                    def body(carry, _):
                        obs, carry, reward, done = env.step(key, carry, action)
                        return carry, reward
                    _, rewards = jax.lax.scan(body, state, None, 128)
                    return rewards

                return train

            run = jax.jit(make_train(None))
        """}, title="a jitted method called only inside another trace, on an instance"),
        example(JITTED_SGD_STEP + """
p_step = jax.pmap(sgd_step, axis_name="i", donate_argnums=(0,))
""", title="a jitted function only run inside another transform"),
        example("""
            import jax

            def visualise(env, state, actions, animate):
                step_fn = jax.jit(env.step)
                states = [state]
                for action in actions:
                    state, timestep = step_fn(state, action)
                    states.append(state)   # the next call's argument: donating it deletes it
                animate(states)
        """, title="every state kept in a list for an animation"),
        example("""
            import jax
            import optax

            tx = optax.adam(1e-3)

            def train_step(params, opt_state, grads):
                updates, opt_state = tx.update(grads, opt_state, params)
                return optax.apply_updates(params, updates), opt_state

            # params and opt_state are not mapped (`None`): they come back with a new leading
            # axis, a result the donated buffers could not hold
            step = jax.jit(jax.vmap(train_step, in_axes=(None, None, 0)))

            def train(params, opt_state, grads_list):
                for g in grads_list:
                    params, opt_state = step(params, opt_state, g)
                return params
        """, title="`jax.vmap` with unmapped arguments: results of another shape"),
        example("""
            import jax

            @jax.jit
            def prepare(meta, length, pos):
                meta.length = length     # fields replaced by values of their own, not updated
                meta.pos = pos
                return pos * 2, meta

            def loop(meta, xs):
                for x in xs:
                    out, meta = prepare(meta, x, x)
        """, title="a record whose fields are set to new values and handed back"),
        example("""
            import jax

            def make_train_step(config):
                def train_step(state, batch):
                    return state.apply_gradients(grads=batch)
                return jax.jit(train_step)

            def train(state, batches):
                step = make_train_step(None)
                for batch in batches:
                    before = state
                    state = step(state, batch)
                    print(before.step)       # the old state is read after the call
        """, title="a factory's step whose caller reads the old state after the call"),
        example("""
            import jax

            @jax.jit
            def step(cache, tokens, is_decode):
                def fresh(_):
                    return jax.numpy.zeros_like(tokens), tokens

                return jax.lax.cond(is_decode, fresh, lambda t: (t * 2, t), tokens)

            for batch in range(10):
                cache, out = step(cache, batch, batch > 0)
        """, title="`lax.cond` whose branches build new values: nothing of the cache is returned"),
        example("""
            import jax

            @jax.jit
            def zeros_like_params(params, batch):
                # a new tree of the same structure, not an update: params is still needed after
                return jax.tree.map(jax.numpy.zeros_like, params)
        """, title="a leaf-wise map of an argument that no update touched"),
        example("""
            import jax

            @jax.jit
            def first_rows(cache, x):
                new = cache.at[0].set(x)
                # every leaf indexed: other shapes, the old buffers cannot be reused
                return jax.tree.map(lambda c: c[0], new)
        """, title="a one-tree map that changes the leaves' shapes (an index, a reduction)"),
        example("""
            import jax

            def cell(h, x):
                return h * 0.5 + x, h

            @jax.jit
            def encode(batch):
                xs, h0 = batch
                h, _ = jax.lax.scan(cell, h0, xs)   # a carry shaped like one item, not the batch
                return h

            @jax.jit
            def pick(state):
                params, _ = state
                return params                      # an item handed back, not an update
        """, title="an item of a tuple argument: a scan carry, or returned as is"),
        example("""
            import jax
            import jax.numpy as jnp

            @jax.jit
            def sgd(params, grads):
                return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

            def fit(grads_list):
                params = {"w": jnp.zeros((32, 32)), "b": jnp.zeros((32,))}   # 4.2 KiB
                for grads in grads_list:
                    params = sgd(params, grads)
                return params
        """, title="state that is visibly a few KiB at every call: a second copy costs nothing"),
        example("""
            import jax
            import optax

            @jax.jit
            def eval_step(state, batch):
                logits = state.apply_fn({"params": state.params}, batch["image"])
                loss = optax.softmax_cross_entropy_with_integer_labels(logits, batch["label"])
                return {"loss": loss.mean(), "accuracy": (logits.argmax(-1) == batch["label"]).mean()}
        """, title="an eval step returns only metrics"),
        example("""
            import jax

            @jax.jit
            def train_step(state, batch):
                grads = jax.grad(lambda p: (state.apply_fn(p, batch) ** 2).mean())(state.params)
                return state.apply_gradients(grads=grads)

            def train(state, batch):
                new_state = train_step(state, batch)
                drift = jax.tree.map(lambda a, b: a - b, new_state.params, state.params)
                return new_state, drift
        """, title="the caller still reads the old state: donating it would be a bug"),
        example("""
            from functools import partial
            import jax

            @partial(jax.jit, donate_argnames="state")
            def train_step(state, batch):
                grads = jax.grad(lambda p: (state.apply_fn(p, batch) ** 2).mean())(state.params)
                return state.apply_gradients(grads=grads)
        """, title="already donating by name"),
        example("""
            import jax
            import optax
            from flax import nnx

            def train_step(model, optimizer, batch):
                grads = nnx.grad(lambda m: ((m(batch["x"]) - batch["y"]) ** 2).mean())(model)
                optimizer.update(model, grads)

            step = nnx.jit(train_step, donate_argnums=(0, 1))
        """, title="nnx.jit with donation"),
        example("""
            import jax
            from flax import nnx

            class Accumulator(nnx.Module):
                def __init__(self, n):
                    self.total = nnx.Variable(jax.numpy.zeros((n, n)))

                def mean(self, n):
                    return self.total[...] / n

            @nnx.jit
            def report(acc: Accumulator, n):
                return acc.mean(n)

            def run(acc, ns):
                return [report(acc, n) for n in ns]
        """, title="nnx.jit: the parameter's method only reads it"),
        example("""
            import jax
            import jax.experimental.pjit

            def update(params, grads):
                return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

            p_update = jax.experimental.pjit.pjit(update, donate_argnums=(0,))

            @jax.jit(donate_argnums=0)
            def decay(params, rate):
                return jax.tree.map(lambda p, r: p * r, params, rate)
        """, title="pjit and the decorator factory, both donating"),
        example("""
            import jax
            from trainers import make_step, distance  # a package shardlint does not read

            def train(state, batches, config):
                step = jax.jit(make_step(config))
                drift = []
                for batch in batches:
                    before = state
                    state, metrics = step(state, batch)
                    drift.append(distance(before, state))  # the old state, read after the call
                return state, drift
        """, title="a step shardlint cannot follow whose caller still reads the old value"),
        example("""
            import jax
            from trainers import make_step  # a package shardlint does not read

            def train(state, batches, config, state_shardings):
                # placed where `state_shardings` says: maybe not where the state is now (a
                # reshard cannot reuse the input buffer)
                step = jax.jit(make_step(config), out_shardings=(state_shardings, None))
                for batch in batches:
                    state, metrics = step(state, batch)
                return state
        """, title="a step shardlint cannot follow whose outputs are placed by out_shardings"),
        example("""
            import functools
            import jax
            from trainers import train_one_step  # a package shardlint does not read

            def run(state, batches, state_shardings):
                @functools.partial(jax.jit, out_shardings=(None, state_shardings, None))
                def step(state, batch):
                    return train_one_step(state=state, batch=batch)

                for batch in batches:
                    loss, state, logs = step(state, batch)  # (the state placed anew)
                return state
        """, title="out_shardings that place the rebound state itself"),
        example({
            "partitioning.py": _PARTITIONERS,
            "trainer.py": """
                import jax
                from partitioning import BasePartitioner

                class Trainer:
                    def __init__(self, partitioner: BasePartitioner, axes):
                        self._partitioner = partitioner
                        self._axes = axes

                    def metric_names(self, keys):
                        # `str.partition`: handed no function, not a partitioner's method
                        names = []
                        for key in keys:
                            key, _, rest = key.partition("/")
                            names.append(key)
                        return names

                    def partitioned_eval_step(self, eval_step):
                        # donation chosen where `eval_step` is defined: not known here
                        return self._partitioner.partition(
                            eval_step, (self._axes, None), None)
            """,
        }, title="`str.partition` in a project whose partitioners forward donation"),
        example({
            "train_state.py": """
                import typing
                import jax

""" + _PROTOCOL + """
                class Optimizer:  # (an `apply_gradient` of another kind of object)
                    def apply_gradient(self, grads, learning_rate):
                        return self.replace(step=self.step + 1)
            """,
            "trainer.py": """
                import jax
                from train_state import TrainState

                def train_step(train_state: TrainState, grads):
                    return train_state.apply_gradient(grads, learning_rate=0.1)

                step = jax.jit(train_step)
            """,
        }, title="a `typing.Protocol` method no project class implements (a method of the same "
                 "name on another kind of object says nothing)"),
        example("""
            import jax
            import optax
            from signatures import functional_signature  # a package shardlint does not read

            tx = optax.adam(1e-3)

            def train_step(state, batch):
                grads = jax.grad(lambda p: (p * batch).sum())(state["params"])
                updates, opt = tx.update(grads, state["opt"], state["params"])
                return {"params": optax.apply_updates(state["params"], updates), "opt": opt}

            def jit_and_compile(func, args, in_shardings, out_shardings, donate_argnums):
                jitted = jax.jit(func, in_shardings=in_shardings, out_shardings=out_shardings,
                                 donate_argnums=donate_argnums)
                return jitted.lower(*args).compile()

            def compile_train(state, batch):
                in_sh, out_sh, donate = functional_signature(state)
                # (the wrapper's donation, handed on by position)
                return jit_and_compile(train_step, (state, batch), in_sh, out_sh, donate)
        """, title="a jit wrapper handed its donation by position"),
        example("""
            import jax
            from flax import linen as ln

            class MLP(ln.Module):
                @ln.compact
                def __call__(self, x):
                    return ln.Dense(4)(x)

            model = MLP()

            @jax.jit
            def predict(params, x):
                return model.apply(params, x)
        """, title="predictions are not an updated argument"),
        example("""
            import jax
            from jax.sharding import NamedSharding, PartitionSpec

            def train_or_eval(state, batch, is_training):
                if is_training:
                    return state.apply_gradients(grads=batch), {"loss": 0.0}
                return {"loss": 1.0}

            def build(mesh, state_shardings, batch_sharding):
                replicated = NamedSharding(mesh, PartitionSpec())
                return jax.jit(train_or_eval, static_argnums=(2,),
                               in_shardings=(state_shardings, batch_sharding),
                               out_shardings=replicated)
        """, title="the eval twin of a train step: every output declared replicated"),
        example("""
            import jax

            def loss(params, batch):
                return (params["w"] * batch).sum()

            def build(params_sharding, batch_sharding):
                return jax.jit(jax.grad(loss), in_shardings=(params_sharding, batch_sharding),
                               out_shardings=params_sharding)
        """, title="gradients leave with the parameters' sharding: not an update of them"),
        example({
            "train.py": """
                import jax
                from steps import eval_step

                p_eval = jax.jit(eval_step)
            """,
            "steps.py": """
                from metrics import summarize

                def eval_step(state, batch):
                    return summarize(state.apply_fn(state.params, batch))
            """,
            "metrics.py": """
                def summarize(logits):
                    return {"mean": logits.mean()}
            """,
        }, title="an eval step in another module returns only metrics"),
        example("""
            import jax

            @jax.jit
            def reshape(x):
                return jax.numpy.concatenate([x, x]).reshape(-1, 2)
        """, title="a result of another shape"),
        example("""
            import jax

            @jax.jit
            def step(state, batch):
                return state.apply_gradients(grads=batch)

            inner = jax.jit(lambda s, b: step(s, b), inline=True)
        """, title="an inline jit: donation is ignored there"),
        example("""
            import jax

            def train_step(state, batch):
                grads = jax.grad(lambda p: (state.apply_fn(p, batch) ** 2).mean())(state.params)
                return state.apply_gradients(grads=grads)

            def step_flops(state, batch):
                return jax.jit(train_step).lower(state, batch).compile().cost_analysis()

            def step_hlo(state, batch):
                step = jax.jit(train_step)
                lowered = step.lower(state, batch)
                return lowered.as_text()
        """, title="a step lowered only to read its cost or its program text: it never runs"),
        example("""
            from functools import partial
            import jax
            import numpy as np

            @partial(jax.jit, static_argnums=(1,), backend="cpu")
            def upsample(mask, size):
                return jax.image.resize(mask, size + mask.shape[-1:], "bilinear")

            def evaluate(outputs, sizes):
                results = []
                for out, size in zip(outputs, sizes):
                    mask = np.asarray(jax.device_get(out["mask"]))
                    mask = upsample(mask, size)      # a new array of another shape
                    results.append(mask)
                return results
        """, title="a loop rebinds a resized host array: new data of another shape, not an "
                   "update"),
        example({
            "eval.py": """
                import jax
                from metrics import targets_of

                def eval_step(state, batch):
                    logits = state.apply_fn(state.params, batch["image"])
                    return targets_of(batch), logits

                p_eval = jax.pmap(eval_step, axis_name="batch")

                def evaluate(state, batches):
                    for batch in batches:
                        yield p_eval(state, batch)
            """,
            "metrics.py": """
                import jax

                def targets_of(batch, gather=True):
                    label = {"id": batch["label"]["id"], "size": batch["label"]["size"]}
                    out = {"label": label, "mask": batch["mask"]}
                    if gather:
                        out = jax.lax.all_gather(out, "batch")
                    return out
            """,
        }, title="an eval step returns a few fields picked out of the batch: a selection of "
                 "another structure, not an update of it"),
        example("""
            import jax

            def forward(tokens, params, cache):
                logits = tokens @ params["embed"]
                if cache is None:
                    return logits, [logits]
                return logits, cache.replace(k=cache.k.at[0].set(logits), pos=cache.pos + 1)

            def prefill(tokens, params):
                return jax.jit(forward)(tokens, params, None)   # no cache yet: nothing to donate
        """, title="every call passes `None` for the state: there is no buffer to donate"),
        example("""
            import functools
            import jax

            class Sampler:
                @functools.partial(jax.jit, static_argnames=("self",))
                def _step(self, state, params):
                    logits = params["w"] @ state.tokens[-1]
                    return state.replace(tokens=state.tokens.at[state.pos].set(logits.argmax()),
                                         pos=state.pos + 1)

                @functools.partial(jax.jit, static_argnames=("self",), donate_argnums=(1,))
                def sample(self, state, params):
                    body = functools.partial(self._step, params=params)
                    return jax.lax.while_loop(lambda s: s.pos < 16, body, state)
        """, title="a step only handed to `lax.while_loop` inside another jit (through "
                   "`functools.partial`): donation is ignored in a trace"),
        example("""
            import time
            import jax

            def sgd(x, layers):
                grads = jax.grad(lambda ls: sum((x @ w).sum() for w in ls))(layers)
                return jax.tree.map(lambda w, g: w - 1e-4 * g, layers, grads)

            def timeit(fn, repeats=10):
                start = time.perf_counter()
                for _ in range(repeats):
                    fn()
                return (time.perf_counter() - start) / repeats

            def benchmark(x, layers):
                step = jax.jit(sgd)
                # the lambda runs ten times on the same `layers`: donating them would break it
                return timeit(lambda: jax.block_until_ready(step(x, layers)))
        """, title="a step timed in a lambda that passes the same arrays at every run"),
        example("""
            import dataclasses
            import jax

            @jax.jit
            def decode(params, cache, tokens):
                k = cache.k.at[:, cache.pos].set(tokens @ params["wk"])
                return dataclasses.replace(cache, k=k, pos=cache.pos + 1)

            def generate(params, prompt_cache, tokens, steps):
                cache = dataclasses.replace(prompt_cache, pos=0)   # shares the prompt's arrays
                for _ in range(steps):
                    cache = decode(params, cache, tokens)
                return cache, prompt_cache.k.sum()                 # the prompt cache is read
        """, title="the caller keeps another reference to the state: a copy made with "
                   "`dataclasses.replace` shares its arrays"),
        example("""
            import jax

            @jax.jit
            def sgd(state, grads):
                return {"params": jax.tree.map(lambda p, g: p - 0.1 * g, state["params"], grads),
                        "step": state["step"] + 1}

            def fit(params, grads_list):
                state = {"params": params, "step": 0}    # the dict holds the caller's params
                for grads in grads_list:
                    state = sgd(state, grads)
                return state, params                      # ... which are still returned
        """, title="the caller keeps another reference to the state: a dict built around its "
                   "arrays"),
        example({
            "steps.py": """
                import jax

                def make_train_step():
                    def train_step(state, grads):
                        return state.apply_gradients(grads=grads)
                    return jax.jit(train_step)
            """,
            "main.py": """
                import jax
                from steps import make_train_step

                def train(state, batches):
                    step = make_train_step()
                    for batch in batches:
                        old = state
                        state = step(state, batch)
                        print(old.step)   # the old state is read after the call
            """,
        }, title="a factory's step whose caller in another module reads the old state after "
                 "the call"),
        example({
            "naming.py": _NAMING,
            "main.py": """
                import jax
                from naming import named_partial_fn

                def apply_updates(state, grads):
                    return jax.tree.map(lambda p, g: p - 0.1 * g, state, grads)

                def run(initial, batches):
                    step = jax.jit(named_partial_fn(apply_updates, "step", state=initial))
                    return [step(grads=g) for g in batches]
            """,
        }, title="a helper's partial binds the updated argument through its `**kwargs`: "
                 "callers cannot pass it"),
        example("""
            import dataclasses
            import jax

            @jax.tree_util.register_dataclass
            @dataclasses.dataclass(frozen=True)
            class Stats:
                count: jax.Array
                total: jax.Array

            @jax.tree_util.register_dataclass
            @dataclasses.dataclass(frozen=True)
            class DecodeState:
                tokens: jax.Array
                pages: jax.Array

                def stats(self):
                    return Stats(count=self.tokens.size, total=self.tokens.sum())

                def summary(self):
                    stats = self.stats()
                    return dataclasses.replace(stats, total=stats.total / stats.count)

            class Server:
                def __init__(self):
                    self.report = jax.jit(self.report_fn)

                def report_fn(self, state: DecodeState):
                    return state.summary()
        """, title="a method of the state's class that updates a new record another of its "
                   "methods builds, not the state"),
        example(_DECODE_CARRY + """

                def steps_left(self, budget):
                    final = jax.lax.while_loop(
                        lambda c: (c.step < budget) & (c.state.tokens[c.step] != 0),
                        lambda c: _Carry(c.step + 1, c.state),
                        _Carry(step=jnp.array(0), state=self))
                    return final.step

            class Server:
                def __init__(self):
                    self.count = jax.jit(self.count_fn, static_argnames=("budget",))

                def count_fn(self, state: DecodeState, budget):
                    return state.steps_left(budget)
        """, title="a `while_loop` that carries the state in a record but returns only its "
                   "counter field"),
        example("""
            import jax

            import functools

            @functools.partial(jax.jit, static_argnums=(2,))
            def init_or_keep(state, fresh, keep):
                def _pick(f, s):
                    return s if keep else f
                return jax.tree.map(_pick, fresh, state)
        """, title="a two-tree map whose leaf function hands back either tree: a choice, "
                   "not an update of one"),
    ]

    INVALID = [
        example({
            "train_state.py": """
                import flax.training.train_state
                import optax

                class TrainState(flax.training.train_state.TrainState):
                    def apply_gradients_and_norms(self, grads, **kwargs):
                        updates, opt_state = self.tx.update(grads, self.opt_state, self.params)
                        params = optax.apply_updates(self.params, updates)
                        new = self.replace(step=self.step + 1, params=params,
                                           opt_state=opt_state, **kwargs)
                        return new, optax.global_norm(grads)
            """,
            "trainer.py": """
                import jax
                import train_state as train_state_module

                TrainState = train_state_module.TrainState  # (an alias of another module's class)

                def train_step(state: TrainState, batch):
                    grads = jax.grad(lambda p: (p["w"] * batch).sum())(state.params)
                    # the update is a method of the state's own class, in another module
                    state, norms = state.apply_gradients_and_norms(grads)
                    return state, norms

                def train(state, batches, shardings):
                    step = jax.jit(train_step, out_shardings=(shardings, None))  # expect: SHL401
                    for b in batches:
                        state, _ = step(state, b)
                    return state
            """,
        }, title="an update in a method of the state's class, reached through a module alias"),
        example("""
            import jax

            def _train_step(state, hparams, batch):
                grads = jax.grad(lambda p: (p * batch).sum())(state.params)
                return state.apply_gradients(grads=grads), 0.0

            class Workload:
                def __init__(self):
                    # states mapped over a leading axis, one hyperparameter set for all
                    self.vmapped_train_step = jax.vmap(_train_step, in_axes=(0, None, 0))
                    self.train_step = jax.jit(self.vmapped_train_step)  # expect: SHL401

                def train(self, states, hparams, batches):
                    for b in batches:
                        states, _ = self.train_step(states, hparams, b)
                    return states
        """, title="a `jax.vmap` of the step kept in an attribute, jitted from there"),
        example("""
            import jax
            import optax
            from jax.experimental.pjit import pjit

            tx = optax.adam(1e-3)

            def train_step(params, opt_state, grads):
                updates, opt_state = tx.update(grads, opt_state, params)
                return optax.apply_updates(params, updates), opt_state

            step = pjit(fun=train_step, in_shardings=None, out_shardings=None)  # expect: SHL401
        """, title="`pjit(fun=...)`: the function by keyword"),
        example("""
            import jax
            import optax

            tx = optax.adam(1e-3)

            def train_step(params, opt_state, grads):
                updates, opt_state = tx.update(grads, opt_state, params)
                return optax.apply_updates(params, updates), opt_state

            # an ensemble: every argument and result mapped over the same leading axis
            step = jax.jit(jax.vmap(train_step))  # expect: SHL401
        """, title="a step wrapped in `jax.vmap` before `jax.jit`"),
        example({
            "attention.py": """
                import jax
                from kernels import paged  # a package shardlint does not read

                def attend(x, cache):
                    return x, paged.write(cache, x)
            """,
            "decode.py": """
                import jax
                from attention import attend

                @jax.jit  # expect: SHL401
                def decode_step(x, cache):
                    # `cache` is rebound by a call shardlint cannot see into: what comes back is
                    # not known, and "not known" is not "handed back unchanged"
                    logits, cache = attend(x, cache)
                    return logits, cache

                def generate(x, cache, steps):
                    out = []
                    for _ in range(steps):
                        logits, cache = decode_step(x, cache)
                        out.append(logits)
                    return out
            """,
        }, title="a parameter rebound from an unknown call, and a caller that rebinds it in a loop"),
        example("""
            import functools
            import jax
            from trainers import make_step, wrap_with_mixup  # a package shardlint does not read

            def train(state, batches, config):
                step_fn = make_step(config)
                if config.mixup:
                    step_fn = wrap_with_mixup(step_fn, config.mixup)
                step = jax.jit(step_fn)  # expect: SHL401
                for batch in batches:
                    # what `step_fn` is, is not known; that every call rebinds `state` from
                    # the result is: "not known" does not veto it
                    state, metrics = step(state, batch)
                return state
        """, title="a step shardlint cannot follow, rebound from its result in a loop"),
        example("""
            import jax
            from jax.experimental import pjit
            from trainers import make_step  # a package shardlint does not read

            def train(state, batches, config):
                step = pjit.pjit(  # expect: SHL401
                    fun=make_step(config),
                    # the shardings the state has now: no reshard between the old and new state
                    out_shardings=(jax.tree_util.tree_map(lambda x: x.sharding, state), None))
                step = step.lower(state, next(iter(batches))).compile()
                for batch in batches:
                    state, metrics = step(state, batch)
                return state
        """, title="out_shardings that keep the state's own shardings, a step compiled ahead "
                   "of time"),
        example("""
            import functools
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P
            from trainers import train_one_step  # a package shardlint does not read

            def run(state, batches, mesh):
                @functools.partial(jax.jit, out_shardings=(  # expect: SHL401
                    None,  # the loss
                    None,  # the state: where the compiler keeps it
                    NamedSharding(mesh, P())))  # the logs, replicated
                def step(state, batch):
                    return train_one_step(state=state, batch=batch)

                for batch in batches:
                    loss, state, logs = step(state, batch)
                return state
        """, title="out_shardings that place only the other results"),
        example({
            "partitioning.py": _PARTITIONERS,
            "trainer.py": """
                import jax
                import optax
                from partitioning import BasePartitioner

                tx = optax.adam(1e-3)

                def train_with_lr(state, batch, lr):
                    grads = jax.grad(lambda p: (p * batch).sum())(state["params"])
                    updates, opt = tx.update(grads, state["opt"], state["params"])
                    return {"params": optax.apply_updates(state["params"], updates),
                            "opt": opt}, {}

                class Trainer:
                    def __init__(self, partitioner: BasePartitioner, axes):
                        self._partitioner = partitioner
                        self._axes = axes

                    def partitioned_train_step(self):
                        def train_step(train_state, batch):
                            return train_with_lr(train_state, batch, lr=0.1)

                        # every project `partition` compiles its first argument and forwards
                        # `donate_argnums`: the call is where donation is chosen
                        return self._partitioner.partition(  # expect: SHL401
                            train_step, (self._axes, None), (self._axes, None))
            """,
        }, title="a partitioner method that compiles the step and forwards `donate_argnums`, on "
                 "an object of a class shardlint cannot name"),
        example({
            "train_state.py": """
                import typing
                import flax

""" + _PROTOCOL + """
                class FlaxTrainState(flax.struct.PyTreeNode):
                    params: dict
                    step: int

                    def apply_gradient(self, grads, learning_rate):
                        params = {k: p - learning_rate * grads[k] for k, p in self.params.items()}
                        return self.replace(params=params, step=self.step + 1)

                    def state_dict(self):
                        return {"params": self.params, "step": self.step}

                    def replace_params(self, params):
                        return self.replace(params=params)
            """,
            "trainer.py": """
                import jax
                from train_state import TrainState

                def apply_grads(train_state: TrainState, grads, lr):
                    return train_state.apply_gradient(grads, learning_rate=lr)

                def train_step(train_state: TrainState, batch):
                    grads = jax.grad(lambda p: sum((v * batch).sum() for v in p.values()))(
                        train_state.params)
                    return apply_grads(train_state, grads, 0.1)

                step = jax.jit(train_step)  # expect: SHL401
            """,
        }, title="the update made by a method of a `typing.Protocol` the state is annotated "
                 "with, in the class that implements it"),
        example("""
            import dataclasses
            import jax

            @dataclasses.dataclass
            class KVCache:
                k: list
                v: list

            def forward(x, cache, idx, last):
                cache.k[idx], cache.v[idx] = x, x          # written in place, then handed back
                return (x, None) if last else (x, cache)

            @jax.jit  # expect: SHL401
            def decode_step(x, cache):
                logits, cache = forward(x, cache=cache, idx=0, last=False)
                return logits, cache
        """, title="a cache written in place by a helper and returned through a conditional"),
        example("""
            import jax
            import optax

            tx = optax.adam(1e-3)

            def update_fn(train_state, batch):
                params, opt = train_state["params"], train_state["opt"]
                grads = jax.grad(lambda p: (batch ** 2).mean())(params)
                updates, opt = tx.update(grads, opt, params)
                train_state = {"params": optax.apply_updates(params, updates), "opt": opt}
                return train_state

            update = jax.jit(update_fn)  # expect: SHL401
        """, title="the argument rebound to a record rebuilt from its fields"),
        example({
            "model.py": """
                import jax.numpy as jnp

                def decode_step(tokens, weights, cache):
                    logits = jnp.einsum("bd,dv->bv", tokens, weights)
                    return logits.argmax(-1), cache * 0.5 + logits.sum()
            """,
            "main.py": """
                import jax
                import model

                decode = jax.jit(model.decode_step)  # expect: SHL401

                def run(tokens, weights, cache):
                    for _ in range(16):
                        tokens, cache = decode(tokens, weights, cache)
                    return cache
            """,
        }, title="a loop rebinds the cache of a function that lives in another module"),
        example("""
            import jax
            import optax

            tx = optax.adam(1e-3)

            def update_fn(params, opt, batch, *flags):
                grads = jax.grad(lambda p: (batch ** 2).mean())(params)
                updates, opt = tx.update(grads, opt, params)
                return optax.apply_updates(params, updates), opt

            FLAGS = ["dropout", "remat"]
            p_update = jax.pmap(update_fn, axis_name="batch",  # expect: SHL401
                                static_broadcasted_argnums=tuple(range(3, 3 + len(FLAGS))))
        """, title="static positions computed as `range(k, ...)`: the ones below `k` are read"),
        example({
            "models/modelpkg/__init__.py": "",
            "models/modelpkg/updates.py": """
                def apply_update(state, grads):
                    new_state = state.apply_gradients(grads=grads)
                    return {"state": new_state, "grad_norm": 0.0}
            """,
            "serving/steps.py": """
                import jax
                from modelpkg.updates import apply_update

                @jax.jit  # expect: SHL401
                def train_step(state, batch):
                    grads = jax.grad(lambda s: (batch ** 2).mean())(state)
                    return apply_update(state, grads)["state"]
            """,
        }, title="the update lives in a sibling sub-project's package, in a dict entry of its "
                 "result"),
        example("""
            import jax
            from flax import nnx

            class Counter(nnx.Module):
                def __init__(self, n):
                    self.total = nnx.Variable(jax.numpy.zeros((n, n)))

            @nnx.jit  # expect: SHL401
            def accumulate(counter: Counter, x):
                counter.total[...] = counter.total[...] + x

            def run(counter, xs):
                for x in xs:
                    accumulate(counter, x)
        """, title="an NNX variable written in place under `nnx.jit` (`v[...] =`, `v.value =`, "
                   "`set_value`)"),
        example("""
            import jax

            def decode(cache, tokens):
                return cache.at[0].set(tokens), tokens

            def prefill(cache, tokens):
                return cache.at[:, 0].set(tokens[0]), tokens

            @jax.jit  # expect: SHL401
            def step(cache, tokens, is_decode):
                def decode_branch(_):
                    return decode(cache, tokens)     # reads the step's cache from here

                return jax.lax.cond(is_decode, decode_branch,
                                    lambda t: prefill(cache, t), tokens)

            for batch in range(10):
                cache, out = step(cache, batch, batch > 0)
        """, title="the update happens in the branches of `lax.cond` (nested functions, lambdas)"),
        example("""
            import jax

            @jax.jit  # expect: SHL401
            def write(cache, new, idx):
                # every leaf of the cache written at `idx`: the KV-cache of a decode step
                return jax.tree.map(lambda c, n: c.at[idx].set(n), cache, new)
        """, title="a tree map whose leaf function writes entries of the leaf (`.at[].set`)"),
        example({
            "utils.py": """
                import jax

                def unbox(tree):
                    return jax.tree_util.tree_map(lambda x: x.unbox() if hasattr(x, "unbox") else x,
                                                  tree)
            """,
            "engine.py": """
                import jax
                import utils

                def _decode(params, state):
                    return {"cache": state["cache"].at[0].set(params["w"]), "pos": state["pos"] + 1}

                def generate(params, state):
                    return utils.unbox(_decode(params, state))

                step = jax.jit(generate)  # expect: SHL401
            """,
        }, title="a helper maps the leaves of the updated state before it is returned "
                 "(`unbox(decode(state))`)"),
        example("""
            import jax

            @jax.jit  # expect: SHL401
            def train_step(state, batch):
                grads = jax.grad(lambda p: (state.apply_fn(p, batch["x"]) ** 2).mean())(state.params)
                return state.apply_gradients(grads=grads)
        """, title="the Flax TrainState step"),
        example("""
            from functools import partial
            import jax
            import optax

            tx = optax.adam(1e-3)

            @partial(jax.jit, static_argnames="apply_fn")  # expect: SHL401
            def update(params, opt_state, batch, apply_fn):
                grads = jax.grad(lambda p: (apply_fn(p, batch) ** 2).mean())(params)
                updates, opt_state = tx.update(grads, opt_state, params)
                params = optax.apply_updates(params, updates)
                return params, opt_state
        """, title="plain optax: params and optimizer state"),
        example("""
            import functools
            import jax
            from flax import linen as ln

            class Trainer:
                @functools.partial(jax.jit, static_argnums=0)  # expect: SHL401
                def step(self, params, grads):
                    return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)
        """, title="a method: `self` counts, donate_argnums=(1,)"),
        example("""
            import jax

            def train_step(state, batch):
                grads = jax.grad(lambda p: (state.apply_fn(p, batch) ** 2).mean())(state.params)
                return state.apply_gradients(grads=grads), {"step": state.step}

            p_train_step = jax.jit(train_step)  # expect: SHL401

            def train(state, batches):
                for batch in batches:
                    state, metrics = p_train_step(state, batch)
                return state
        """, title="call form, rebound by the caller"),
        example("""
            import jax
            import optax

            tx = optax.adamw(1e-4)

            def train_step(state, batch):
                params, opt_state = state
                grads = jax.grad(lambda p: (p * batch).sum())(params)
                updates, opt_state = tx.update(grads, opt_state, params)
                return (optax.apply_updates(params, updates), opt_state), 0.0

            step = jax.jit(train_step)  # expect: SHL401
        """, title="the state is a tuple unpacked in the step: donate_argnums=(0,)"),
        example("""
            import jax
            import jax.numpy as jnp

            @jax.jit  # expect: SHL401
            def sgd(params, grads):
                return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

            def fit(grads_list):
                params = {"w": jnp.zeros((4096, 4096)), "b": jnp.zeros((4096,))}   # 64 MiB
                for grads in grads_list:
                    params = sgd(params, grads)
                return params
        """, title="the same step on 64 MiB of state"),
        example("""
            import jax
            from flax import nnx

            @nnx.jit  # expect: SHL401
            def train_step(model, optimizer, batch):
                loss, grads = nnx.value_and_grad(lambda m: (m(batch) ** 2).mean())(model)
                optimizer.update(model, grads)
                return loss
        """, title="nnx.jit writes the updated model and optimizer back"),
        example("""
            import jax
            from flax import nnx

            @jax.jit  # expect: SHL401
            def train_step(graphdef, state, batch):
                model, optimizer = nnx.merge(graphdef, state)
                grads = nnx.grad(lambda m: (m(batch) ** 2).mean())(model)
                optimizer.update(model, grads)
                return nnx.state((model, optimizer))
        """, title="NNX split/merge under jax.jit"),
        example("""
            import jax
            import jax.experimental.pjit

            def step(params, grads):
                return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

            p_step = jax.experimental.pjit.pjit(step, out_shardings=None)  # expect: SHL401
        """, title="pjit"),
        example("""
            import jax

            @jax.jit(static_argnums=1)  # expect: SHL401
            def smooth(x, k):
                return x * 0.9 + k

            def run(x, steps):
                for _ in range(steps):
                    x = smooth(x, 3)
                return x
        """, title="decorator factory; the loop rebinds the argument"),
        example({
            "train.py": """
                import functools
                import jax
                from steps import train_step

                def make_step(config):
                    return jax.jit(functools.partial(train_step, config=config))  # expect: SHL401
            """,
            "steps.py": """
                import jax
                from updates import apply_grads

                def train_step(state, batch, config):
                    grads = jax.grad(lambda p: (state.apply_fn(p, batch) ** 2).mean())(state.params)
                    return apply_grads(state, grads), {"loss": 0.0}
            """,
            "updates.py": """
                import optax

                def apply_grads(state, grads):
                    grads = optax.clip_by_global_norm(1.0).update(grads, None)[0]
                    return state.apply_gradients(grads=grads)
            """,
        }, title="a partial of a step in another module, which updates through a helper "
                 "(train_step -> apply_grads -> state.apply_gradients)"),
        example("""
            import functools
            import jax

            @functools.partial(jax.pmap, axis_name="batch")  # expect: SHL401
            def update(params, grads):
                grads = jax.lax.pmean(grads, axis_name="batch")
                return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)
        """, title="pmap"),
        example("""
            import functools
            import jax

            @functools.partial(jax.jit, static_argnums=(0,))  # expect: SHL401
            def decode_step(model, tokens, cache):
                logits, k, v = model(tokens, cache["pos"])
                return logits, {
                    "k": jax.lax.dynamic_update_slice(cache["k"], k, (0, cache["pos"], 0)),
                    "v": cache["v"].at[:, cache["pos"]].set(v),
                    "pos": cache["pos"] + 1,
                }
        """, title="a decode step returns the cache rebuilt field by field from its fields"),
        example("""
            import jax
            from somewhere_else import compiled_step

            def build(state_shardings, batch_sharding):
                return jax.jit(  # expect: SHL401
                    compiled_step(),
                    in_shardings=(state_shardings, batch_sharding),
                    out_shardings=(state_shardings, None),
                )
        """, title="a callable that cannot be followed: the same sharding in and out at position 0"),
        example({
            "train.py": """
                import jax
                from utils import my_jit

                def train_step(state, batch):
                    grads = jax.grad(lambda p: (state.apply_fn(p, batch) ** 2).mean())(state.params)
                    return state.apply_gradients(grads=grads), None

                step = my_jit(train_step, static_argnums=())  # expect: SHL401
            """,
            "utils.py": """
                import jax

                def my_jit(fn, **kwargs):
                    return jax.jit(fn, **kwargs)
            """,
        }, title="a jit wrapper the project defines"),
        example({
            "train.py": """
                from flax import nnx
                from helpers import apply_grads

                @nnx.jit  # expect: SHL401
                def train_step(model, optimizer, batch):
                    loss, grads = nnx.value_and_grad(lambda m: (m(batch) ** 2).mean())(model)
                    apply_grads(model, optimizer, grads)
                    return loss
            """,
            "helpers.py": """
                from flax import nnx

                def apply_grads(model, optimizer, grads):
                    optimizer.update(model, grads)
            """,
        }, title="nnx.jit: a helper updates the model and optimizer in place"),
        example("""
            import jax
            from flax import nnx

            class Accumulator(nnx.Module):
                def __init__(self, n):
                    self.total = nnx.Variable(jax.numpy.zeros((n, n)))
                    self.count = nnx.Variable(jax.numpy.zeros(()))

                def add(self, grads):
                    self.total.set_value(self.total[...] + grads)
                    self.count.set_value(self.count[...] + 1)

            @nnx.jit  # expect: SHL401
            def accumulate(acc: Accumulator, grads):
                acc.add(grads)

            def run(acc, all_grads):
                for g in all_grads:
                    accumulate(acc, g)
        """, title="nnx.jit: a method of the parameter's class (its annotation) changes it in "
                   "place"),
        example("""
            import jax

            @jax.jit  # expect: SHL401
            def run_steps(state, batches):
                state, losses = jax.lax.scan(lambda s, b: (s.apply_gradients(grads=b), 0.0),
                                             state, batches)
                return state, losses
        """, title="the carry of a scan is the updated state"),
        example("""
            import jax

            def train_step(state, batch):
                grads = jax.grad(lambda p: (state.apply_fn(p, batch) ** 2).mean())(state.params)
                return state.apply_gradients(grads=grads)

            def train(state, batches):
                compiled = jax.jit(train_step).lower(state, batches[0]).compile()  # expect: SHL401
                print(compiled.cost_analysis())
                for batch in batches:
                    state = compiled(state, batch)
                return state
        """, title="compiled ahead of time, inspected, then run"),
        example("""
            import jax
            import numpy as np

            def update(params, grads):
                return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

            cpu_update = jax.jit(update, backend="cpu")  # expect: SHL401

            def train(grads, steps):
                params = np.zeros((4096, 4096), np.float32)
                for _ in range(steps):
                    params = cpu_update(params, grads)
                return params
        """, title="a jit for the CPU backend: donation works there too (jaxlib >= 0.3.24)"),
        example("""
            import jax

            def forward(tokens, params, cache):
                logits = tokens @ params["embed"]
                if cache is None:
                    return logits, [logits]
                return logits, cache.replace(k=cache.k.at[0].set(logits), pos=cache.pos + 1)

            step = jax.jit(forward)  # expect: SHL401

            def generate(tokens, params, cache, steps):
                logits, _ = step(tokens, params, None)
                for _ in range(steps):
                    logits, cache = step(logits, params, cache)   # a real cache, rebound
                return logits
        """, title="one call passes `None`, another a real cache it rebinds"),
        example("""
            import functools
            import jax

            class Sampler:
                @functools.partial(jax.jit, static_argnames=("self",))  # expect: SHL401
                def _step(self, state, params):
                    logits = params["w"] @ state.tokens[-1]
                    return state.replace(tokens=state.tokens.at[state.pos].set(logits.argmax()),
                                         pos=state.pos + 1)

                @functools.partial(jax.jit, static_argnames=("self",), donate_argnums=(1,))
                def sample(self, state, params):
                    body = functools.partial(self._step, params=params)
                    return jax.lax.while_loop(lambda s: s.pos < 16, body, state)

                def stream(self, state, params):
                    for _ in range(16):
                        state = self._step(state, params)   # eager: each call copies the state
                        yield state.tokens[state.pos - 1]
        """, title="a loop body inside a jit, and also called eagerly in a streaming loop"),
        example({
            "naming.py": _NAMING,
            "sampler.py": """
                import dataclasses
                import jax
                from naming import named_partial_fn

                @dataclasses.dataclass
                class DecodeState:
                    tokens: jax.Array
                    cache: jax.Array

                def continue_decode(apply_fn, params, state, temperature=1.0):
                    def body(s):
                        logits = apply_fn(params, s.tokens) / temperature
                        return dataclasses.replace(s, cache=s.cache + logits, tokens=logits)
                    return jax.lax.while_loop(lambda s: True, body, state)

                class Sampler:
                    def __init__(self, model, params):
                        self.params = params
                        self.decode_fn = jax.jit(  # expect: SHL401
                            named_partial_fn(continue_decode, "decode_fn", apply_fn=model.apply),
                            static_argnames=("temperature",))

                    def generate(self, state, steps):
                        for _ in range(steps):
                            state = self.decode_fn(params=self.params, state=state)
                        return state
            """,
        }, title="a helper that rebinds its parameter to a partial of it, binding its "
                 "`**kwargs` (`fn = functools.partial(fn, **kwargs)`)"),
        example(_DECODE_STATE + """

                def with_output(self, out):
                    return dataclasses.replace(self, tokens=self.tokens + out)

                def step(self, forward_fn, params):
                    logits, pages = forward_fn(params, self.tokens, self.pages)
                    state = self.with_output(logits.argmax(-1))
                    return dataclasses.replace(state, pages=pages)

            class Server:
                def __init__(self, model):
                    self.model = model
                    self.prefill = jax.jit(self.prefill_fn)  # expect: SHL401

                def prefill_fn(self, state: DecodeState, params):
                    return state.step(self.model.apply, params)
        """, title="a method of the state's own class that updates the result of another of "
                   "its methods (`dataclasses.replace(self.with_output(...), pages=...)`)"),
        example(_DECODE_STATE + """

                def validated(self):
                    assert self.tokens.ndim == 2
                    return self

                def resume(self, pages):
                    state = self.validated()
                    return dataclasses.replace(state, pages=pages)

            class Server:
                def __init__(self):
                    self.resume = jax.jit(self.resume_fn)  # expect: SHL401

                def resume_fn(self, state: DecodeState, pages):
                    return state.resume(pages)
        """, title="the same, where the other method hands the state back as it came"),
        example("""
            import functools
            import jax
            from optim_ext import clipped_update  # a package shardlint does not read

            SPEC = jax.sharding.PartitionSpec()

            def apply_update(state, grads):
                return state.apply_gradients(grads=grads)

            def constrain(tree):
                return jax.lax.with_sharding_constraint(tree, SPEC)

            @functools.partial(jax.jit, static_argnames=("clip",))  # expect: SHL401
            def train_step(state, grads, clip):
                if clip:
                    state = clipped_update(state, grads)
                else:
                    state = apply_update(state, grads)
                return constrain(state)
        """, title="the state rebound in both branches, one of them to a project helper's "
                   "update, then handed back through another helper"),
        example({
            "sharding_utils.py": """
                import jax

                class _ShardingAPI:
                    def with_sharding_constraint(self, x, shardings):
                        def _merge(s, x_):
                            if s is None:
                                return x_
                            return jax.lax.with_sharding_constraint(x_, s)
                        return jax.tree.map(_merge, shardings, x, is_leaf=lambda v: v is None)

                sharding = _ShardingAPI()
            """,
            "train.py": """
                import functools
                import jax
                from sharding_utils import sharding as sharding_lib

                class Trainer:
                    def __init__(self, tx, shardings):
                        self.tx, self.shardings = tx, shardings

                    @functools.partial(jax.jit, static_argnames="self")  # expect: SHL401
                    def init_optimizer(self, state):
                        state = state.replace(opt_state=self.tx.init(state.params))
                        return sharding_lib.with_sharding_constraint(state, self.shardings)
            """,
        }, title="the update handed back through a method of a module-level object "
                 "(`sharding = _ShardingAPI()`) that maps its tree leaf by leaf "
                 "(`jax.tree.map(_merge, shardings, x)`, `_merge` handing `x_` back)"),
        example(_DECODE_CARRY + """

                def decode(self, forward_fn, params, steps):
                    def body(c):
                        logits, pages = forward_fn(params, c.state.tokens, c.state.pages)
                        new = DecodeState(tokens=logits.argmax(-1), pages=pages)
                        return _Carry(c.step + 1, new)
                    final = jax.lax.while_loop(lambda c: c.step < steps, body,
                                               _Carry(step=jnp.array(0), state=self))
                    return final.state

            class Server:
                def __init__(self, model):
                    self.model = model
                    self.decode = jax.jit(self.decode_fn,  # expect: SHL401
                                          static_argnames=("steps",))

                def decode_fn(self, state: DecodeState, params, steps):
                    return state.decode(self.model.apply, params, steps)
        """, title="the state carried through a `while_loop` inside a record, and read back "
                   "from its field (`while_loop(..., _Carry(step=0, state=self)).state`)"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        return bool(facts.jit_sites) or may_call_a_wrapper(facts, project)

    def check(self):
        execution = execution_of(self.facts)
        sites = [*self.facts.jit_sites, *wrapper_sites(self.facts, self.project)]
        donating = {(id(site.scope), self.text(site.target)) for site in sites
                    if site.target is not None and _donates(jit_keywords(self.facts, site))}
        for site in sites:
            if site.api_name == LINEN_JIT:
                continue
            kws = jit_keywords(self.facts, site)
            # (a wrapper's own donation keyword, `hax.named_jit(donate_args=(True,))`, donates
            # what shardlint cannot read: it is the wrapper's business)
            if kws is None or _donates(kws) or _inlined(self.facts, site, kws):
                continue
            if site.target is not None and (id(site.scope), self.text(site.target)) in donating:
                continue  # (the same function compiled beside it with a donation: the other
                # branch of an `if donate:` -- not donating here is the author's choice)
            finding = self._check_site(site, compiled(self.facts, self.project, site), execution)
            if finding is not None:
                yield finding

    def _check_site(self, site: JitSite, target: Compiled | None, execution: Execution):
        facts = self.facts
        in_place = site.api_name == NNX_JIT
        sig = Signature(target.params, target.kwonly, target.offset) \
            if target is not None and target.params is not None else None
        static = resolve_positions(facts, site, sig, "static")
        if static is None:
            return None
        evidence: dict[str, Evidence] = {}  # param (or "#i" when only its position is known)
        changed_in_place: set[str] = set()  # (NNX objects: the caller's reference stays valid)
        if target is not None:
            returned, changed = flowing(facts, self.project, target, in_place)
            for param, f in returned.items():
                if f.kind == UPDATED:
                    evidence[param] = self._updated(target, param, f, False)
            for param, f in changed.items():
                if param not in evidence:
                    evidence[param] = self._updated(target, param, f, True)
                    changed_in_place.add(param)
        if target is None:
            # A callable shardlint cannot follow: the same sharding in and out at the same
            # position is how large projects spell "this argument is updated".
            for i, what in same_sharding(facts, site):
                evidence.setdefault(f"#{i}", Evidence(
                    "returns {0} with the sharding it came in with (`{1}`)", what, ()))
        unknown = target is None or target.scope is None and target.key is None
        if unknown and not evidence and sig is not None:
            return None  # (a lambda: no loop rebind says more than its body)
        all_calls = calls_of(facts, site)
        if unknown and not evidence and not any(c.in_loop is not None for c in all_calls):
            return None  # (no loop calls it: nothing can say it is updated)
        calls = [c for c in all_calls if not execution.is_traced(c)]
        if not calls and (all_calls or self._handed_on_traced(site, execution)
                          or self._called_only_traced_elsewhere(site)):
            # only called inside other traces, or only handed to them (`lax.while_loop(c,
            # partial(self.step, ...), s)` in a jitted function): donation is ignored there
            return None
        kept: set[str] = set()
        self._passed_as: dict[str, str] = {}  # "#i" -> what the calls pass there, as written
        # A rebind alone is weaker evidence: not for jits that place their outputs elsewhere
        # (a reshard cannot reuse the input buffer: the donation would be unusable).
        # (asked of the part of the result rebound: `out_shardings=(None, state_sh)` places
        # only the second)
        out = (jit_keywords(facts, site) or {}).get("out_shardings")
        flow = rebind_facts(self.project, target, facts)
        if unknown and sig is None:
            # What the callable does is not known, but its callers are: "not known" does not
            # veto what a loop that rebinds the argument from the result shows. Only a proven
            # non-update keeps it quiet (the old value read afterwards, every call passing
            # `None`, a call inside another trace).
            self._unknown_rebinds(site, calls, evidence, out)
        if unknown and not evidence:
            return None  # (no loop rebind says more without the function or its summary)
        if sig is not None:
            passing: dict[str, list[tuple[CallSite, ast.expr]]] = {}
            for c in calls:
                for i, name in [*enumerate(sig.params), *((None, k) for k in sig.kwonly)]:
                    key_index = i - sig.offset if i is not None else -1
                    args = passed(c.node, {key_index} if key_index >= 0 else set(), {name})
                    for _, arg in args:
                        passing.setdefault(name, []).append((c, arg))
                        if name in evidence or flow is None or c.in_loop is None:
                            continue
                        at = _rebinds(c, arg)
                        # (a result of another shape, `x = resize(x, shape)`, is new data the
                        # old buffer could not hold: the rebind says nothing of an update)
                        if at is not None and self._placed_as_is(out, at) \
                                and flow.computed(name) and not flow.reshaped(at):
                            # (the assignment as written, whatever it unpacks: the
                            # arguments one call rebinds are named in one clause)
                            evidence[name] = Evidence(
                                "is called as `{1}` in a loop, rebinding what it passes as {0}",
                                f"{self.text(c.stmt.targets[0])} = {self.text(c.node.func)}(...)",
                                ())
            # A caller that reads the old value afterwards keeps it (donating would break it);
            # asked only for what has evidence: the liveness walk is the costly part.
            # (an NNX object changed in place is not a value the caller holds the old copy of)
            kept = {name for name, uses in passing.items() if name in evidence
                    and name not in changed_in_place
                    and any(use_after(facts, c, arg) is not None
                            or _captured(c, arg) or _stored(facts, c, arg) for c, arg in uses)}
            # A caller in another module that rebinds the argument but still reads the old
            # value (its module's summary says which) keeps it as well.
            elsewhere = self._read_after_elsewhere(site)
            if elsewhere:
                kept |= {name for i, name in enumerate(sig.params)
                         if name in evidence and name not in changed_in_place
                         and (str(i - sig.offset) in elsewhere or name in elsewhere)}
                kept |= {name for name in sig.kwonly if name in evidence and name in elsewhere}
            # Every call passes `None` there (`forward(x, params, None)`, no cache yet):
            # there is no buffer to donate, whatever the function does with a real one.
            kept |= {name for name, uses in passing.items() if calls and len(uses) == len(calls)
                     and all(_is_none(arg) for _, arg in uses)}
        if sig is None:
            kept |= self._unknown_kept(calls, evidence)
        candidates: list[Candidate] = []
        replicated = leaves_replicated(facts, site)
        if sig is None:  # the function is not known: its positions are (sharding, rebinds)
            for name, ev in sorted(evidence.items()):
                if name.startswith("#") and name not in kept \
                        and int(name[1:]) not in static.positions:
                    candidates.append(Candidate(int(name[1:]), self._passed_as.get(
                        name, f"argument {name[1:]}"), ev))
        else:
            self_param = sig.params[0] if sig.offset else None
            unmapped = target.unmapped if target is not None else frozenset()
            # (a PRNG key is a few bytes: donating it saves nothing)
            kept |= _prng_keys(facts, target.scope.node if target is not None
                               and target.scope is not None else target.node
                               if target is not None else None)
            for i, name in enumerate(sig.params):
                if name in evidence and name not in kept and name != self_param \
                        and i not in static.positions and name not in static.names \
                        and i - sig.offset not in replicated and i not in unmapped:
                    candidates.append(Candidate(i, name, evidence[name]))
            for name in sig.kwonly:
                if name in evidence and name not in kept and name not in static.names:
                    candidates.append(Candidate(None, name, evidence[name]))
        by_name = _no_donate_argnames(site.api_name, self.ctx.versions)
        unnamed = [c for c in candidates if c.index is None] if by_name else []
        if unnamed:
            # Passed by keyword only, to a jit that takes no `donate_argnames` (`jax.pmap`, in
            # any release; `jax.jit` before 0.4.14): it cannot be donated there, so it is not
            # advised; the message says why.
            candidates = [c for c in candidates if c.index is not None]
        if not candidates or inspected_only(facts, site):
            return None  # (lowered only to read its cost or text: the step never runs)
        if sig is not None and calls and all(self._small(c, candidates, sig) for c in calls):
            return None  # the state every call passes is visibly a few KiB: nothing to gain
        keyword = _keyword_text(candidates)
        foreign = self._foreign_wrapper(site)
        fix = self._fix(site, keyword) if foreign is None else None
        name = target.name if target is not None else self.text(site.target) \
            if site.target is not None else "the step"
        related = tuple(r for c in candidates for r in c.evidence.related)
        message = self._message(name, candidates, keyword, in_place)
        if unnamed:
            message += (f" ({', '.join(f'`{c.param}`' for c in unnamed)}, passed by keyword, "
                        f"{by_name})")
        if foreign is not None:  # (its keywords are not known: jax.jit's may not be its)
            message = message.replace(
                f"add `{keyword}` and", f"donate {'it' if len(candidates) == 1 else 'them'} "
                f"the way `{foreign}` does (a wrapper of another package: shardlint does not "
                f"know its keywords; for `jax.jit`, `{keyword}`) and")
        return self.finding(site.node, message, fix=fix, related=_unique(related))

    def _foreign_wrapper(self, site: JitSite) -> str | None:
        """The callee of a jit-like wrapper of another package (`hax.named_jit`, taken for a
        jit by its name; one the configuration declares, `jit-wrappers`, resolves as jax.jit):
        whether it takes `donate_argnums` is not known (haliax's takes `donate_args`)."""
        if site.api_name != "jax.jit" or site.form == "partial":
            return None
        node = site.node
        func = node.func if isinstance(node, ast.Call) else node
        parts = dotted(func)
        if parts is None or self.facts.resolve(func) is not None:  # (a declared wrapper too)
            return None
        q = self.facts.qualify(func)
        if q is None or q.partition(".")[0] in ("jax", "flax") \
                or self.project.resolve(f"ext:{q}", self.facts.module) is not None:
            return None
        return self.text(func)

    def _read_after_elsewhere(self, site: JitSite) -> frozenset[str]:
        """The arguments (positions as "0", keywords) that a call of this compiled callable in
        another module rebinds while still reading the old value afterwards."""
        out: set[str] = set()
        for key in remote_names(self.facts, site):
            out |= self.project.flows.read_after(key)
        return frozenset(out)

    def _called_only_traced_elsewhere(self, site: JitSite) -> bool:
        """A function decorated with the jit at module level, or a method of a module-level
        class, that this file never calls and the project calls only from traced code of other
        modules (`forward_decoder`, called in the jitted `forward_model` of another file; a
        gymnax-style `env.step` called in the `lax.scan` body of a jitted train function)."""
        fn = site.function
        top = self.facts.module_scope
        # (decorated: the function's name is the jitted callable, so its callers are the
        # jit's; `f = jax.jit(step)` beside a traced call of the plain `step` is not)
        decorated = site.form in ("decorator", "factory") or \
            site.form == "partial" and site.target is None
        return fn is not None and decorated and (fn.parent is top or fn.parent is not None
                                   and fn.parent.kind == "class" and fn.parent.parent is top) \
            and not references_of(self.facts, site) \
            and self.project.called_only_traced(self.facts.module, fn.qualname)

    def _handed_on_traced(self, site: JitSite, execution: Execution) -> bool:
        """The callable is used in this file, and only inside traced code, as a value handed
        on (a loop body, a ``functools.partial`` of it), or handed to a transform (`jax.pmap(
        sgd_step, ...)` of a `@jax.jit` function: the inner jit is traced, its donation
        ignored), never called where it runs eagerly."""
        refs = references_of(self.facts, site)
        if not refs or not all(execution.scope_traced(scope) or execution.in_traced_lambda(n)
                               or execution.handed_to_transform(n) for n, scope in refs):
            return False
        # (another module that calls it eagerly still can donate)
        fn = site.function
        return fn is None or not self.project.callers(self.facts.module, fn.qualname) \
            or self.project.called_only_traced(self.facts.module, fn.qualname)

    def _unknown_rebinds(self, site: JitSite, calls: list[CallSite],
                         evidence: dict[str, Evidence], out: ast.expr | None) -> None:
        """Loop rebinds of a callable shardlint cannot follow, as evidence by position
        (``"#i"``): a call in a loop binds the name it passes at ``i`` from the result."""
        name = self.text(site.target) if site.target is not None else "the step"
        for c in calls:
            if c.in_loop is None:
                continue
            for i, arg in enumerate(c.node.args):
                if isinstance(arg, ast.Starred):
                    break
                at = _rebinds(c, arg) if f"#{i}" not in evidence and not _is_none(arg) \
                    else None
                if at is None or not self._placed_as_is(out, at):
                    continue
                evidence[f"#{i}"] = Evidence(
                    "is called as `{1}` in a loop, rebinding what it passes as {0} (shardlint "
                    f"cannot follow `{name}`: where it returns {{0}} updated, in the same shape)",
                    f"{self.text(c.stmt.targets[0])} = {self.text(c.node.func)}(...)", ())
                self._passed_as[f"#{i}"] = self.text(arg)

    _TREE_MAPS = frozenset({"jax.tree.map", "jax.tree_util.tree_map", "jax.tree_map"})

    def _placed_as_is(self, out: ast.expr | None, at: tuple[int, ...]) -> bool:
        """Whether ``out_shardings`` leaves the part of the result at ``at`` where the argument
        is (a reshard cannot reuse the input buffer: a donation would be unusable): no
        out_shardings; or, for that part, ``None`` (the compiler's choice) or
        ``jax.tree.map(lambda x: x.sharding, state)`` (the shardings it has now)."""
        if out is None:
            return True
        for k in at:
            if not isinstance(out, (ast.Tuple, ast.List)):
                break
            if k >= len(out.elts) or any(isinstance(e, ast.Starred) for e in out.elts):
                return False
            out = out.elts[k]
        if isinstance(out, (ast.Tuple, ast.List)):
            return all(self._placed_as_is(e, ()) for e in out.elts) \
                and not any(isinstance(e, ast.Starred) for e in out.elts)
        if isinstance(out, ast.Constant) and out.value is None:
            return True
        if not (isinstance(out, ast.Call) and isinstance(out.func, (ast.Name, ast.Attribute))
                and self.facts.qualify(out.func) in self._TREE_MAPS and len(out.args) == 2
                and not out.keywords):
            return False
        fn = out.args[0]
        return isinstance(fn, ast.Lambda) and len(fn.args.args) == 1 \
            and not fn.args.vararg and not fn.args.kwarg \
            and isinstance(fn.body, ast.Attribute) and fn.body.attr == "sharding" \
            and isinstance(fn.body.value, ast.Name) and fn.body.value.id == fn.args.args[0].arg

    def _unknown_kept(self, calls: list[CallSite], evidence: dict[str, Evidence]) -> set[str]:
        """The positions (``"#i"``) with evidence that some call still reads after it, passes
        `None` at, or does not pass positionally (the donation would break or miss them)."""
        kept: set[str] = set()
        for key in evidence:
            if not key.startswith("#"):
                continue
            i = int(key[1:])
            for c in calls:
                args = c.node.args
                if i >= len(args) or any(isinstance(a, ast.Starred) for a in args[:i + 1]):
                    kept.add(key)
                    break
                arg = args[i]
                if _is_none(arg) or use_after(self.facts, c, arg) is not None \
                        or _captured(c, arg) or _stored(self.facts, c, arg):
                    kept.add(key)
                    break
        return kept

    def _small(self, call: CallSite, candidates: list[Candidate], sig: Signature) -> bool:
        """Whether what this call passes for the candidates is visibly under SMALL_STATE
        bytes in all (arrays of literal shapes, through names); an argument it does not pass
        (a default) or one of unknown size is not small."""
        total = 0
        for c in candidates:
            index = c.index - sig.offset if c.index is not None else -1
            args = passed(call.node, {index} if index >= 0 else set(), {c.param})
            if not args:
                return False
            size = state_nbytes(self.facts, args[0][1], call.scope, call.node)
            if size is None:
                return False
            total += size
        return total < SMALL_STATE

    def _updated(self, target: Compiled, param: str, f: Flowing, in_place: bool) -> Evidence:
        """Why ``param`` comes back updated: the chain of calls down to the update, as related
        locations and as text (``train_step -> _apply -> state.apply_gradients(...)``)."""
        chain = f.chain
        related = []
        for k, link in enumerate(chain):
            line, col, end_line, end_col = link.pos
            if not line:
                continue
            what = f"`{param}` is updated here: `{link.text}`" if k == len(chain) - 1 \
                else f"`{link.text}` {'changes' if in_place else 'returns an update of'} `{param}`"
            related.append(Related(link.path, Span(line, col, end_line, end_col), what))
        last = chain[-1].text if chain else ""
        code = " -> ".join([target.name, *(_callee_name(x.text) for x in chain[:-1]), last]) \
            if len(chain) > 1 else last
        if in_place:
            template = "updates {0} in place (`{1}`)"
        elif len(chain) == 1 and _is_optimizer_update(last):
            template = "returns the new {0} from `{1}`"
        else:
            template = "returns an updated {0} (`{1}`)"
        return Evidence(template, code, tuple(related))

    def _message(self, name: str, candidates: list[Candidate], keyword: str, nnx: bool) -> str:
        names = ", ".join(f"`{c.param}`" for c in candidates)
        grouped: dict[tuple[str, str], list[str]] = {}
        for c in candidates:
            grouped.setdefault((c.evidence.template, c.evidence.code), []).append(f"`{c.param}`")
        why = "; ".join(t.format(", ".join(ps), code) for (t, code), ps in grouped.items())
        if nnx:
            return (f"`{name}` {why} but does not donate {names}: the old and the new "
                    f"arrays are both alive during the step; add `{keyword}` (nnx.jit writes the new "
                    f"state back into the objects passed)")
        return (f"`{name}` {why} but does not donate {names}: the old and the new values are "
                f"both alive during the step; add `{keyword}` and "
                f"rebind the result at every call")

    # ---- fix ---------------------------------------------------------------------------------------
    def _fix(self, site: JitSite, keyword: str) -> Fix | None:
        description = f"Add `{keyword}` (callers must rebind the donated names)"
        if site.form == "decorator":
            text = self.text(site.node)
            replacement = None
            partial = self._partial_name()
            if site.api_name == NNX_JIT:
                replacement = f"{text}({keyword})"
            elif partial is not None:
                replacement = f"{partial}({text}, {keyword})"
            elif site.api_name == "jax.jit" and self.ctx.versions.at_least("jax", "0.8.1"):
                replacement = f"{text}({keyword})"
            if replacement is None:
                return None
            return Fix(description, "unsafe", (Edit(self.span(site.node), replacement),))
        call = keyword_call(site)
        if call is None:
            return None
        items: list[ast.expr | ast.keyword] = [*call.args, *call.keywords]
        if items:
            last = max(items, key=lambda n: (n.end_lineno or 0, n.end_col_offset or 0))
            line, col = last.end_lineno or last.lineno, last.end_col_offset or 0
            text = f", {keyword}"
        else:
            line, col = call.end_lineno or call.lineno, (call.end_col_offset or 1) - 1
            text = keyword
        return Fix(description, "unsafe", (Edit(Span(line, col, line, col), text),))

    def _partial_name(self) -> str | None:
        for local, qualified in self.facts.imports.names.items():
            if qualified == "functools.partial":
                return local
        for local, qualified in self.facts.imports.names.items():
            if qualified == "functools":
                return f"{local}.partial"
        return None


def _no_donate_argnames(api_name: str | None, versions) -> str | None:
    """Why the jit ``api_name`` cannot donate an argument passed by keyword at some release the
    project may run: `jax.pmap` takes `donate_argnums` only, in every release; `jax.jit` and
    pjit take `donate_argnames` from jax 0.4.14 (read from the table of releases). None where
    it can (or the API is not in the table)."""
    if api_name not in ("jax.jit", "jax.pmap", "jax.experimental.pjit.pjit"):
        return None
    since = releases.first_accepting(api_name, "donate_argnames")
    short = api_name.rpartition(".")[2]
    if since is None:
        return f"`{short}` cannot donate: it takes `donate_argnums` only"
    if versions.may_be_below("jax", since):
        return (f"`{short}` cannot donate before jax {since}, which added `donate_argnames`, and "
                f"{versions.allowed_by('jax')} allow jax {versions.oldest('jax')}")
    return None


def _keyword_text(candidates: list[Candidate]) -> str:
    nums = [c.index for c in candidates if c.index is not None]
    names = [c.param for c in candidates if c.index is None]
    parts = []
    if nums:
        parts.append(f"donate_argnums=({', '.join(map(str, nums))},)" if len(nums) == 1
                     else f"donate_argnums=({', '.join(map(str, nums))})")
    if names:
        parts.append(f"donate_argnames=({', '.join(repr(n) for n in names)},)" if len(names) == 1
                     else f"donate_argnames=({', '.join(repr(n) for n in names)})")
    return ", ".join(parts)


def _inlined(facts, site: JitSite, kws: dict[str, ast.expr]) -> bool:
    """``jax.jit(f, inline=True)``: meant to be inlined into an outer jit, where donation
    is ignored."""
    value = kws.get("inline")
    return value is not None and facts.literal(value, site.scope) is True


def _rebinds(call: CallSite, arg: ast.expr) -> tuple[int, ...] | None:
    """``state = step(state, ...)`` -> (); ``m, state = step(state, ...)`` -> (1,): where in the
    result the name passed is bound again; None when it is not."""
    stmt = call.stmt
    if not isinstance(stmt, ast.Assign) or stmt.value is not call.node:
        return None
    c = chain(arg)
    if c is None:
        return None
    todo: list[tuple[ast.expr, tuple[int, ...]]] = [(t, ()) for t in stmt.targets]
    while todo:
        t, at = todo.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            starred = any(isinstance(e, ast.Starred) for e in t.elts)
            todo.extend((e, at if starred else (*at, i)) for i, e in enumerate(t.elts))
        elif chain(t) == c:
            return at
    return None


def _captured(call: CallSite, arg: ast.expr) -> bool:
    """The call sits in a lambda that reads the argument from outside (``timeit(lambda:
    step(x, layers))``): whoever runs the lambda again passes the same value, which a
    donation would have deleted."""
    c = chain(arg)
    if c is None or not isinstance(call.stmt, ast.stmt):
        return False
    node = call.node
    for lam in ast.walk(call.stmt):
        if isinstance(lam, ast.Lambda) and _within(node, lam):
            a = lam.args
            bound = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
            bound |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
            if c[0] not in bound:
                return True
    return False


# `jax.random` functions whose first argument is not a key (a seed, key data to wrap)
_SEEDED = frozenset({"jax.random.PRNGKey", "jax.random.key", "jax.random.wrap_key_data"})


def _prng_keys(facts, fn: ast.AST | None) -> set[str]:
    """The names a function hands as the key to `jax.random` (`key, sub = jax.random.split(key)`,
    `jax.random.normal(rng, shape)`): PRNG keys, a few bytes each. Its body only (not its
    decorators), once per function: a file may compile one function many times."""
    if fn is None:
        return set()
    held = facts.derived.setdefault("prng_keys", {})
    found = held.get(id(fn))
    if found is not None and found[0] is fn:
        return found[1]
    out: set[str] = set()
    body = fn.body if isinstance(fn.body, list) else [fn.body]  # type: ignore[attr-defined]
    for stmt in body:
        for node in ast.walk(stmt):
            if type(node) is ast.Call and node.args and type(node.args[0]) is ast.Name \
                    and type(node.func) in (ast.Attribute, ast.Name):
                q = facts.qualify(node.func)
                if q is not None and q.startswith("jax.random.") and q not in _SEEDED:
                    out.add(node.args[0].id)
    held[id(fn)] = (fn, out)
    return set(out)


_STORING = frozenset({"append", "appendleft", "add", "insert", "extend", "put", "put_nowait"})


def _stored(facts, call: CallSite, arg: ast.expr) -> bool:
    """The code around the call keeps what it passes in a container: `states.append(state)`,
    `history[i] = state`, before the call or after the rebind (that value is the next
    iteration's argument). A donation would delete the arrays the container holds
    (`env.animate(states)` after the loop)."""
    c = chain(arg)
    body = getattr(call.scope, "node", None)
    return c is not None and body is not None and c in _stored_chains(facts, body)


def _stored_chains(facts, body: ast.AST) -> set:
    """The chains the code of ``body`` puts into containers (see ``_stored``), once per scope."""
    held = facts.derived.setdefault("stored_chains", {})
    found = held.get(id(body))
    if found is not None and found[0] is body:
        return found[1]
    out: set = set()

    def put(v: ast.expr) -> None:
        for e in v.elts if isinstance(v, (ast.Tuple, ast.List)) else (v,):
            c = chain(e)
            if c is not None:
                out.add(c)

    for node in ast.walk(body):
        if type(node) is ast.Call and type(node.func) is ast.Attribute \
                and node.func.attr in _STORING:
            for a in node.args:
                put(a)
        elif type(node) is ast.Assign and any(type(t) is ast.Subscript for t in node.targets):
            put(node.value)
    held[id(body)] = (body, out)
    return out


def _within(node: ast.AST, outer: ast.AST) -> bool:
    start = (node.lineno, node.col_offset)  # type: ignore[attr-defined]
    end = (node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]
    return (outer.lineno, outer.col_offset) <= start and \
        end <= (outer.end_lineno, outer.end_col_offset)  # type: ignore[attr-defined]


def _is_none(arg: ast.expr) -> bool:
    return isinstance(arg, ast.Constant) and arg.value is None


def _is_optimizer_update(text: str) -> bool:
    """``tx.update(...)``: the optimizer state half of an optax update."""
    return text.endswith(".update(...)")


def _callee_name(text: str) -> str:
    """``self._apply(...)`` -> ``_apply``."""
    return text.removesuffix("(...)").rsplit(".", 1)[-1]


def _unique(related: tuple[Related, ...]) -> tuple[Related, ...]:
    seen: set[tuple] = set()
    out = []
    for r in related:
        key = (r.path, r.span)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return tuple(out)


def _donates(kws: dict | None) -> bool:
    """A jit's keywords donate something: ``donate_argnums``/``donate_argnames``, or a
    wrapper's own donation keyword (``donate_args``, ``donate``)."""
    return kws is not None and any(k in DONATE or k.startswith("donate") for k in kws)
