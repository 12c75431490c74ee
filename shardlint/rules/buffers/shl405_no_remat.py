"""SHL405 no-remat."""

from __future__ import annotations

import ast

from shardlint.rules.base import Edit, Fix, Rule, example, register
from shardlint.semantics.catalog.api import Role
from shardlint.semantics.file.moves import spell
from shardlint.semantics.sharding.layers import LayerStack, layer_stacks, project_differentiates

# Fewer layers than this are not "deep": their activations rarely decide whether a step fits.
MIN_LAYERS = 8

_KIND = {"nn.scan": "`{node}` over `{what}`", "nnx.scan": "`{node}` over `{what}`",
         "lax.scan": "`jax.lax.scan` over `{what}`", "loop": "this loop building `{what}`"}
# The remat of each kind of stack (a loop's layers may be Linen or NNX modules, or functions)
_REMAT = {"nn.scan": "`nn.remat`", "nnx.scan": "`nnx.remat`", "lax.scan": "`jax.checkpoint`",
          "loop": "`nn.remat`/`nnx.remat`/`jax.checkpoint`"}


@register
class NoRemat(Rule):
    code = "SHL405"
    name = "no-remat"
    severity = "info"
    enabled_by_default = False
    summary = "Many layers are differentiated without rematerialisation: every layer's activations are kept for the backward pass."
    what = """
Off by default (enable with `select = ["SHL405"]`). In a project that takes gradients
(`jax.grad`, `jax.value_and_grad`, `jax.vjp`, `nnx.grad`, `nnx.value_and_grad` anywhere),
reports stacks of layers with no remat on their path:

* `nn.scan(Block, variable_axes={"params": 0}, ...)` where `Block` is not `nn.remat(...)`;
* `nnx.scan` over a function that calls its scanned-over module (`layer(x)`), with no
  `nnx.remat`/`jax.checkpoint` on it or in it;
* `jax.lax.scan(body, x, stacked_params)` whose body applies each layer's parameters
  (`block.apply({"params": p}, h)`, `nnx.merge(graphdef, p)`);
* in a Linen or NNX module class, a `for` loop or list comprehension over `range(n)` that
  builds a submodule per step, when no method of the class uses a remat.

Not reported: fewer than 8 layers when the count is a literal (`length=4`, `range(6)`); a count
that is neither literal nor named like a layer count (`num_layers`, `depth`, `n_blocks`) for
loops; scans that broadcast their parameters (recurrences over time, not layers); anything
wrapped in `nn.remat`/`nn.checkpoint`/`nnx.remat`/`jax.checkpoint` (directly or through a name
bound to one); projects that never take a gradient (inference). Loops, `nnx.scan` and
`jax.lax.scan` bodies are often wrapped by their caller in another file (MaxText and EasyDeL
checkpoint whole blocks), so for them any remat -- or `checkpoint_name`, which tags values for a
remat policy -- in the file or the project counts as present; `nn.scan(Block)` must carry its
own.
"""
    why = """
Backpropagation through L layers keeps each layer's intermediate activations until the backward
pass reaches it, so activation memory grows with depth and batch. Rematerialisation recomputes
them instead. Measured (16-layer MLP under `nn.scan`, batch 512, width 1024, one device):
temporary memory 852 MiB without remat, 86 MiB with `nn.remat`, 220 MiB with the
`dots_with_no_batch_dims_saveable` policy. Whether that matters depends on the batch and
sequence length -- hence advice (`info`) and off by default; `shardlint check --memory` measures
the real step.
"""
    use_instead = """
```python
Stack = nn.scan(nn.remat(Block, prevent_cse=False), variable_axes={"params": 0},
                split_rngs={"params": True}, length=num_layers)
# or a policy that keeps the matmuls:
# nn.remat(Block, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
# NNX: @nnx.scan(...) over @nnx.remat def forward(x, layer): ...
```
"""
    fix_safety = """
Unsafe, and only for `nn.scan(Block, ...)`: it wraps the scanned class as
`nn.remat(Block, prevent_cse=False)`. Results are the same but the step does more compute
(one extra forward pass), and a module whose `__call__` takes Python values (`deterministic`,
`train`) then needs `static_argnums` on the remat.
"""
    versions = "All versions of jax and flax."
    VALID = [
        example("""
            import jax
            import flax.linen as nn

            class Block(nn.Module):
                @nn.compact
                def __call__(self, x, _):
                    return x + nn.Dense(1024)(nn.gelu(nn.Dense(4096)(x))), None

            class Model(nn.Module):
                @nn.compact
                def __call__(self, x):
                    Stack = nn.scan(nn.remat(Block, prevent_cse=False), variable_axes={"params": 0},
                                    split_rngs={"params": True}, length=16)
                    return Stack()(x, None)[0]

            grads = jax.grad(lambda p, x: Model().apply(p, x).sum())
        """, title="remat inside the scan"),
        example("""
            import jax
            import flax.linen as nn

            class Block(nn.Module):
                @nn.compact
                def __call__(self, x, _):
                    return x + nn.Dense(1024)(x), None

            def forward(params, x):
                Stack = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True},
                                length=16)
                return Stack().apply(params, x, None)
        """, title="inference only: nothing takes a gradient"),
        example("""
            import jax
            import flax.linen as nn

            class Cell(nn.Module):
                @nn.compact
                def __call__(self, h, x):
                    h = nn.tanh(nn.Dense(256)(h) + x)
                    return h, h

            class RNN(nn.Module):
                @nn.compact
                def __call__(self, xs):
                    scan = nn.scan(Cell, variable_broadcast="params", split_rngs={"params": False},
                                   in_axes=1, out_axes=1)
                    return scan()(xs[:, 0], xs)

            loss_grad = jax.value_and_grad(lambda p, xs: RNN().apply(p, xs)[1].sum())
        """, title="a recurrence over time: parameters broadcast, not stacked"),
        example("""
            import jax
            from flax import nnx

            class Block(nnx.Module):
                def __init__(self, rngs):
                    self.linear = nnx.Linear(512, 512, rngs=rngs)

            class Model(nnx.Module):
                def __init__(self, rngs):
                    self.blocks = [Block(rngs) for _ in range(4)]

                def __call__(self, x):
                    for b in self.blocks:
                        x = b(x)
                    return x

            grads = nnx.grad(lambda m, x: m(x).sum())
        """, title="four layers are not deep"),
        example("""
            import jax
            from flax import nnx

            class Block(nnx.Module):
                def __init__(self, rngs):
                    self.linear = nnx.Linear(512, 512, rngs=rngs)

                def __call__(self, x):
                    return self.linear(x)

            class Model(nnx.Module):
                def __init__(self, num_layers, rngs):
                    self.blocks = [Block(rngs) for _ in range(num_layers)]

                def __call__(self, x):
                    for b in self.blocks:
                        x = nnx.remat(lambda blk, h: blk(h))(b, x)
                    return x

            grads = nnx.grad(lambda m, x: m(x).sum())
        """, title="nnx.remat applied in the forward pass"),
    ]
    INVALID = [
        example("""
            import jax
            import flax.linen as nn

            class Block(nn.Module):
                @nn.compact
                def __call__(self, x, _):
                    return x + nn.Dense(1024)(nn.gelu(nn.Dense(4096)(x))), None

            class Model(nn.Module):
                @nn.compact
                def __call__(self, x):
                    Stack = nn.scan(Block, variable_axes={"params": 0},  # expect: SHL405
                                    split_rngs={"params": True}, length=16)
                    return Stack()(x, None)[0]

            grads = jax.grad(lambda p, x: Model().apply(p, x).sum())
        """, title="the remat.py experiment: nn.scan without remat"),
        example({
            "model.py": """
                import flax.linen as ln

                class Block(ln.Module):
                    @ln.compact
                    def __call__(self, x):
                        return x + ln.Dense(1024)(x)

                class Decoder(ln.Module):
                    num_layers: int = 24

                    @ln.compact
                    def __call__(self, x):
                        for i in range(self.num_layers):  # expect: SHL405
                            x = Block(name=f"layer_{i}")(x)
                        return x
            """,
            "train.py": """
                import jax
                from model import Decoder

                def loss_fn(params, x):
                    return Decoder().apply(params, x).sum()

                grad_fn = jax.value_and_grad(loss_fn)
            """,
        }, title="a Python loop of Linen blocks; the gradient is taken in another file"),
        example("""
            import jax
            from flax import nnx

            class Block(nnx.Module):
                def __init__(self, rngs):
                    self.linear = nnx.Linear(512, 512, rngs=rngs)

                def __call__(self, x):
                    return self.linear(x)

            @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)  # expect: SHL405
            def forward(x, layer):
                return layer(x)

            grads = nnx.grad(lambda m, x: forward(x, m).sum())
        """, title="nnx.scan over stacked modules"),
        example("""
            import jax
            import flax.linen as nn

            block = nn.Dense(1024)

            def body(h, layer_params):
                return block.apply({"params": layer_params}, h), None

            def loss(stacked, x):
                h, _ = jax.lax.scan(body, x, stacked)  # expect: SHL405
                return h.sum()

            g = jax.grad(loss)
        """, title="jax.lax.scan over per-layer parameters"),
        example("""
            import jax
            from flax import nnx

            class Block(nnx.Module):
                def __init__(self, rngs):
                    self.linear = nnx.Linear(512, 512, rngs=rngs)

                def __call__(self, x):
                    return self.linear(x)

            class Model(nnx.Module):
                def __init__(self, rngs):
                    self.blocks = [Block(rngs) for _ in range(32)]  # expect: SHL405

                def __call__(self, x):
                    for b in self.blocks:
                        x = b(x)
                    return x

            grads = nnx.grad(lambda m, x: m(x).sum())
        """, title="an NNX list of 32 blocks"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        R = Role
        return bool(facts.roles & {R.LINEN_LIFT, R.NNX_LIFT, R.LINEN_MODULE, R.NNX_MODULE}) or \
            any(c.qualified == "jax.lax.scan" for c in facts.calls)

    def check(self):
        if not project_differentiates(self.project):
            return
        for stack in layer_stacks(self.facts, self.project):
            if stack.remat:
                continue
            if stack.count is not None and stack.count < MIN_LAYERS:
                continue
            if stack.kind == "loop" and stack.count is None and not stack.count_named:
                continue
            yield self.finding(stack.node, self._message(stack), fix=self._fix(stack))

    def _message(self, stack: LayerStack) -> str:
        node = self.text(stack.node) if isinstance(stack.node, ast.expr) else ""
        if len(node) > 24:
            node = node.split("(", 1)[0]
        where = _KIND[stack.kind].format(node=node, what=stack.what)
        layers = f"{stack.count} layers" if stack.count is not None else "its layers"
        return (f"{where} is differentiated with no remat: the backward pass keeps the "
                f"activations of {layers} alive; wrap the layer in "
                f"{_REMAT[stack.kind]}, possibly with a checkpoint policy")

    def _fix(self, stack: LayerStack) -> Fix | None:
        target = stack.target
        if stack.kind != "nn.scan" or not isinstance(target, (ast.Name, ast.Attribute)):
            return None
        spelled = spell(self.facts, "flax.linen.remat", stack.scope)
        if spelled is None or spelled.add_import is not None:
            return None
        text = f"{spelled.text}({self.text(target)}, prevent_cse=False)"
        return Fix(f"Scan `{text}`", "unsafe", (Edit(self.span(target), text),))
