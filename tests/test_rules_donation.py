"""Regression cases for the init and donation rules (SHL301, SHL302, SHL401, SHL402).

Each case is a small program and the lines a rule must flag; the SHL401 quick fix is applied to
the source and the result must parse and lint clean.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from helpers import expected_markers
from helpers import lint_files

from shardlint.rules.base import Edit, Finding, get_rule
from shardlint.rules.buffers.shl401_missing_donation import GYMNAX_WRAPPERS, JITTED_SGD_STEP


def lint(tmp_path: Path, code: str, src: str | dict[str, str], **versions: str) -> list[Finding]:
    files = {"example.py": src} if isinstance(src, str) else src
    files = {k: textwrap.dedent(v).lstrip("\n") for k, v in files.items()}
    return lint_files(tmp_path, files, select=(code,), versions=versions)


def flagged(tmp_path: Path, code: str, src: str | dict[str, str], **versions: str) -> set:
    return {(Path(f.path).name, f.line) for f in lint(tmp_path, code, src, **versions)}


def marked(code: str, src: str | dict[str, str]) -> set:
    files = {"example.py": src} if isinstance(src, str) else src
    files = {k: textwrap.dedent(v).lstrip("\n") for k, v in files.items()}
    return {(name, line) for name, line, c in expected_markers(files) if c == code}


def apply_edits(text: str, edits: tuple[Edit, ...]) -> str:
    """Apply edits (1-based lines, 0-based UTF-8 columns), last first."""
    lines = text.split("\n")
    raw = [line.encode("utf-8") for line in lines]
    for e in sorted(edits, key=lambda e: (e.span.line, e.span.col), reverse=True):
        s = e.span
        if s.line == s.end_line:
            b = raw[s.line - 1]
            raw[s.line - 1] = b[: s.col] + e.text.encode("utf-8") + b[s.end_col:]
        else:
            head = raw[s.line - 1][: s.col] + e.text.encode("utf-8") + raw[s.end_line - 1][s.end_col:]
            raw[s.line - 1: s.end_line] = [head]
    return "\n".join(b.decode("utf-8") for b in raw)


# ---- SHL402 use-after-donate ------------------------------------------------------------------------
STEP = """
import jax
step = jax.jit(lambda s, b: s + b, donate_argnums=0)
"""

SHL402_CASES = {
    "continue before the rebind: the next iteration passes the deleted state": STEP + """
def train(state, batches):
    for b in batches:
        new = step(state, b)  # expect: SHL402
        if new is None:
            continue
        state = new
    return state
""",
    "continue on one branch, return on the other": STEP + """
def train(state, batches):
    for b in batches:
        new = step(state, b)  # expect: SHL402
        if new is None:
            continue
        return new
""",
    "rebound on every branch": STEP + """
def train(state, b, ok):
    new = step(state, b)
    if ok:
        state = new
    else:
        state = new * 2
    return state
""",
    "rebound on one branch only: not followed": STEP + """
def train(state, b, ok):
    new = step(state, b)
    if ok:
        state = new
    return state
""",
    "read on one branch": STEP + """
def train(state, b, i):
    new = step(state, b)
    if i % 100 == 0:
        print(state)  # expect: SHL402
    return new
""",
    "the donated name was taken from another one": STEP + """
def train(state, b):
    s = state
    new = step(s, b)
    return state + new  # expect: SHL402
""",
    "break right after the call: no next iteration": STEP + """
def train(state, batches):
    for b in batches:
        new = step(state, b)
        break
    return new
""",
    "while test reads the rebound state": STEP + """
def train(state, b):
    while state.step < 10:
        state = step(state, b)
    return state
""",
    "while test reads the donated state": STEP + """
def train(state, b):
    while state.step < 10:  # expect: SHL402
        new = step(state, b)
    return new
""",
    "nested loop: the outer loop comes round without a rebind": STEP + """
def train(state, epochs, batches):
    for _ in range(epochs):
        for b in batches:
            state = step(state, b)  # expect: SHL402
        new = step(state, batches[0])
    return new
""",
    "read after return on another path is not after the call": STEP + """
def train(state, b, ok):
    if ok:
        return step(state, b)
    return state
""",
    "inside a jitted function donation is ignored": STEP + """
@jax.jit
def outer(state, b):
    new = step(state, b)
    return state + new
""",
    "del is not a read": STEP + """
def train(state, b):
    new = step(state, b)
    del state
    return new
""",
    "a read in a function defined later is not followed": STEP + """
def train(state, b):
    new = step(state, b)
    def log():
        return state
    return new, log
""",
    "a lambda run at once reads the donated state": STEP + """
def train(state, b, ok):
    new = step(state, b)
    return jax.lax.cond(ok, lambda: new, lambda: state)  # expect: SHL402
""",
    "a lambda's own parameter is not the donated name": STEP + """
def train(state, b):
    new = step(state, b)
    return jax.tree.map(lambda state: state * 2, new)
""",
    "a comprehension target is not the donated name": STEP + """
def train(state, b, states):
    new = step(state, b)
    return [state.sum() for state in states], new
""",
    "self attribute rebound by the call": """
import jax

class Trainer:
    def __init__(self, fn):
        self.step = jax.jit(fn, donate_argnums=0)

    def fit(self, batches):
        for b in batches:
            self.state = self.step(self.state, b)
        return self.state
""",
    "self attribute donated and read": """
import jax

class Trainer:
    def __init__(self, fn):
        self.step = jax.jit(fn, donate_argnums=0)

    def fit(self, b):
        new = self.step(self.state, b)
        return self.state.params  # expect: SHL402
""",
    "a part donated, another part read": STEP + """
def train(state, b):
    new = step(state.params, b)
    return state.opt_state, new
""",
    "a part donated, the whole read": STEP + """
def train(state, b):
    new = step(state.params, b)
    return state  # expect: SHL402
""",
    "donated by keyword": """
import jax
from functools import partial

@partial(jax.jit, donate_argnames=("state",))
def train_step(batch, state):
    return state + batch

def train(state, batch):
    out = train_step(batch, state=state)
    return state.sum() + out  # expect: SHL402
""",
    "static argument positions count": """
import jax

def f(n, x):
    return x * n

g = jax.jit(f, static_argnums=0, donate_argnums=1)

def run(n, x):
    y = g(n, x)
    return n + y
""",
    "non-literal donate_argnums: unknown, silent": """
import jax
DONATE = compute()
g = jax.jit(lambda x: x, donate_argnums=DONATE)

def run(x):
    y = g(x)
    return x + y
""",
    "a record copied with dataclasses.replace shares the donated arrays": STEP + """
import dataclasses

def train(cache, b):
    mine = dataclasses.replace(cache, pos=0)
    out = step(mine, b)
    return out, cache.k  # expect: SHL402
""",
    "a dict built around a name holds it": STEP + """
def train(params, b):
    state = {"params": params, "step": 0}
    state = step(state, b)
    return state, params  # expect: SHL402
""",
    "a dict of slices holds new arrays, not the sliced one": STEP + """
def train(memory, b):
    for i in range(4):
        chunk = {"x": memory["x"][:, i:i + 1]}
        out = step(chunk, b)
    return memory
""",
    "freeing the donated array is not a read": STEP + """
def train(state, b):
    new = step(state, b)
    state.delete()
    return new
""",
    "freeing each value of the donated dict in a loop": STEP + """
def train(batch, b):
    new = step(batch, b)
    for _, leaf in batch.items():
        leaf.delete()
    for leaf in jax.tree.leaves(batch):
        if not leaf.is_deleted():
            leaf.delete()
    return new
""",
    "a loop over the leaves that reads one": STEP + """
def train(batch, b):
    new = step(batch, b)
    for leaf in jax.tree_util.tree_leaves(batch):
        new = new + leaf  # expect: SHL402
    return new
""",
    "len, `in` with a string key, `is None`, isinstance: the container, not the arrays": STEP + """
def train(batch, b):
    new = step(batch, b)
    if batch is not None and "mask" in batch and isinstance(batch, dict):
        return new, len(batch), batch["image"].shape[0]
    return new
""",
    "`in` with a computed key may iterate an array": STEP + """
def train(x, b, v):
    new = step(x, b)
    return new, v in x  # expect: SHL402
""",
    "a leaf-wise map reads only the leaves its lambda reads": STEP + """
def train(state, b):
    new = step(state, b)
    shapes = jax.tree.map(lambda n, o: (n.shape, o.shape), new, state)
    values = jax.tree.map(lambda n, o: n - o, new, state)  # expect: SHL402
    return shapes, values
""",
    "a host copy (jax.device_get) is copied to the device, not deleted": STEP + """
def train(state, b):
    host = jax.device_get(state)
    new = step(host, b)
    return host["w"].sum(), new
""",
    "module-level loop in a script": STEP + """
state = jax.numpy.zeros((1024, 1024))
for b in range(10):
    out = step(state, b)  # expect: SHL402
""",
}


@pytest.mark.parametrize("title", list(SHL402_CASES))
def test_shl402(tmp_path, title):
    src = SHL402_CASES[title]
    assert flagged(tmp_path, "SHL402", src) == marked("SHL402", src)


UPDATE_STEP = """
import jax
step = jax.jit(lambda s, g: s.apply_gradients(grads=g), donate_argnums=0)
"""


def test_shl402_message_names_the_call_and_the_keyword(tmp_path):
    """The step returns an update of the donated state: its buffers are reused, the read
    certainly raises."""
    [f] = lint(tmp_path, "SHL402", UPDATE_STEP + """
def train(state, b):
    new = step(state, b)
    return state
""")
    assert f.severity == "error"
    assert "`state` was donated to `step` on line 5 (donate_argnums=0), so `state` reads " \
        "deleted buffers" in f.message
    assert "Array has been deleted" in f.message
    assert f.related and f.related[0].span.line == 5


def test_shl402_says_may_where_no_output_is_known_to_fit(tmp_path):
    """`s + b` is not an update of the same structure that shardlint can show: the buffers are
    deleted only if XLA aliases them to an output of their shape and dtype."""
    [f] = lint(tmp_path, "SHL402", STEP + """
def train(state, b):
    new = step(state, b)
    return state
""")
    assert f.severity == "warning"
    assert f.message.startswith("`state` may read deleted buffers: `state` was donated to `step`")
    assert "same shape and dtype" in f.message


def test_shl402_loop_carried_without_an_update_is_a_warning(tmp_path):
    [f] = lint(tmp_path, "SHL402", """
import jax
from functools import partial

@partial(jax.jit, donate_argnums=(0, 1))
def encode(params, batch):
    return batch["x"] @ params["w"]

def run(params, batches):
    out = []
    for batch in batches:
        out.append(encode(params, batch))
    return out
""")
    assert (f.severity, f.line) == ("warning", 11)
    assert f.message.startswith("`params` may be passed deleted on the next iteration")


# ---- SHL401 missing-donation ------------------------------------------------------------------------
SHL401_CASES = {
    # The inner step is only called inside another trace (donation is ignored there); the outer
    # one returns the scan's carry, which is the updated state.
    "an inner step only called inside another trace": """
import jax

@jax.jit
def step(state, b):
    return state.apply_gradients(grads=b)

@jax.jit  # expect: SHL401
def multi(state, bs):
    state, _ = jax.lax.scan(lambda s, b: (step(s, b), None), state, bs)
    return state
""",
    # `f` runs only inside `g` (its jit traced there, its own donation ignored); `g` may
    # donate (its options are not visible): nothing to say of either.
    "jitted elsewhere with **options that may donate": """
import jax
opts = {"donate_argnums": 0}

@jax.jit
def f(state, b):
    return state.apply_gradients(grads=b)

g = jax.jit(f, **opts)
""",
    # Called directly in a loop as well: its own jit runs there, and is what to donate at.
    "jitted, and jitted again elsewhere, but called directly too": """
import jax
opts = {"donate_argnums": 0}

@jax.jit  # expect: SHL401
def f(state, b):
    return state.apply_gradients(grads=b)

g = jax.jit(f, **opts)

def train(state, batches):
    for b in batches:
        state = f(state, b)
    return state
""",
    "a bound method jitted in __init__ (self is bound: argnum 0)": """
import jax

class Trainer:
    def __init__(self):
        self.train_step = jax.jit(self._train_step)  # expect: SHL401

    def _train_step(self, state, batch):
        return state.apply_gradients(grads=batch)

    def fit(self, state, batches):
        for b in batches:
            state = self.train_step(state, b)
        return state
""",
    "a zeros_like tree is not an update": """
import jax

@jax.jit
def zeros(params):
    return jax.tree.map(jax.numpy.zeros_like, params)
""",
    "returned unchanged is not an update": """
import jax

@jax.jit
def passthrough(state, x):
    return state, x * 2
""",
    "a loop rebind of a value that does not reach the result": """
import jax

@jax.jit
def reset(x):
    return jax.numpy.zeros((4,))

def run(x):
    for _ in range(3):
        x = reset(x)
    return x
""",
}


@pytest.mark.parametrize("title", list(SHL401_CASES))
def test_shl401(tmp_path, title):
    src = SHL401_CASES[title]
    assert flagged(tmp_path, "SHL401", src) == marked("SHL401", src)


def test_shl401_tree_map_update_replaces_the_leftmost_operand(tmp_path):
    [f] = lint(tmp_path, "SHL401", """
import jax

@jax.jit
def sgd(grads, params):
    return jax.tree.map(lambda g, p: p - 0.1 * g, grads, params)
""")
    assert "`params`" in f.message and "`grads`" not in f.message
    assert "`donate_argnums=(1,)`" in f.message


def test_shl401_names_the_exact_argnums(tmp_path):
    [f] = lint(tmp_path, "SHL401", """
import jax
from functools import partial

class Trainer:
    @partial(jax.jit, static_argnums=(0, 2))
    def step(self, params, config, opt_state, grads):
        updates, opt_state = config.tx.update(grads, opt_state, params)
        return jax.tree.map(lambda p, u: p + u, params, updates), opt_state
""")
    assert "`donate_argnums=(1, 3)`" in f.message  # self is 0, config (static) is 2
    assert f.fix is not None and f.fix.applicability == "unsafe"


def _fixed_source(tmp_path: Path, src: str, **versions: str) -> tuple[str, Finding]:
    [f] = lint(tmp_path, "SHL401", src, **versions)
    assert f.fix is not None
    text = (tmp_path / "example.py").read_text(encoding="utf-8")
    return apply_edits(text, f.fix.edits), f


@pytest.mark.parametrize("index", range(len(get_rule("SHL401").INVALID)))
def test_shl401_fix_relints_clean(tmp_path, index):
    ex = get_rule("SHL401").INVALID[index]
    findings = lint_files(tmp_path, ex.files, select=("SHL401",), versions=ex.versions)
    with_fix = [f for f in findings if f.fix is not None]
    assert with_fix, "every INVALID example of SHL401 offers a fix on the current jax"
    for f in with_fix:
        path = Path(f.path)
        fixed = apply_edits(path.read_text(encoding="utf-8"), f.fix.edits)
        ast.parse(fixed)
        out = tmp_path / "fixed"
        rel = path.relative_to(tmp_path).as_posix()  # (an example may have folders)
        files = {**ex.files, rel: fixed}
        again = lint_files(out, files, select=("SHL401",), versions=ex.versions)
        assert not [g for g in again if Path(g.path).relative_to(out).as_posix() == rel], fixed


def test_shl401_fix_prefers_partial_when_imported(tmp_path):
    fixed, _ = _fixed_source(tmp_path, """
import functools
import jax

@jax.jit
def train_step(state, batch):
    return state.apply_gradients(grads=batch)
""")
    assert "@functools.partial(jax.jit, donate_argnums=(0,))" in fixed


def test_shl401_fix_on_old_jax_needs_partial(tmp_path):
    [f] = lint(tmp_path, "SHL401", """
import jax

@jax.jit
def train_step(state, batch):
    return state.apply_gradients(grads=batch)
""", jax="0.8.0")
    assert f.fix is None  # `@jax.jit(donate_argnums=...)` needs jax >= 0.8.1


def test_shl401_fix_keeps_multiline_calls_valid(tmp_path):
    fixed, _ = _fixed_source(tmp_path, """
import jax

def step(params, grads):
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

p_step = jax.jit(
    step,
    static_argnums=(),
)
""")
    ast.parse(fixed)
    assert "static_argnums=(), donate_argnums=(0,)," in fixed


def test_shl401_fix_with_non_ascii_before_the_site(tmp_path):
    fixed, _ = _fixed_source(tmp_path, """
import jax

def step(params, grads):
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

schritt = {"größe": 1}; p_step = jax.jit(step)
""")
    ast.parse(fixed)
    assert 'p_step = jax.jit(step, donate_argnums=(0,))' in fixed


# ---- SHL301 / SHL302 ----------------------------------------------------------------------------------
MODEL = """
import jax
import flax.linen as nn

class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(16)(x)
"""

SHL301_CASES = {
    "a method's self.model is not resolved": MODEL + """
mesh = jax.make_mesh((2,), ("data",))

class Trainer:
    def __init__(self):
        self.model = MLP()
        self.variables = self.model.init(jax.random.key(0), jax.numpy.ones((1, 4)))
""",
    "init in a function only handed to jax.eval_shape": MODEL + """
mesh = jax.make_mesh((2,), ("data",))

def create(key):
    return MLP().init(key, jax.numpy.ones((1, 4)))

abstract = jax.eval_shape(create, jax.random.key(0))
""",
    "init in a function the module calls directly": MODEL + """
mesh = jax.make_mesh((2,), ("data",))

def create(key):
    return MLP().init(key, jax.numpy.ones((1, 4)))  # expect: SHL301

variables = create(jax.random.key(0))
""",
    "jax.set_mesh as a statement before an NNX constructor": """
import jax
from flax import nnx

jax.set_mesh(jax.make_mesh((2,), ("data",)))
layer = nnx.Linear(4, 4, rngs=nnx.Rngs(0))  # expect: SHL301
""",
    "an NNX optimizer is not a model": """
import jax
import optax
from flax import nnx

with jax.set_mesh(jax.make_mesh((2,), ("data",))):
    model = nnx.jit(lambda: nnx.Linear(4, 4, rngs=nnx.Rngs(0)))()
    optimizer = nnx.Optimizer(model, optax.adam(1e-3), wrt=nnx.Param)
""",
}


@pytest.mark.parametrize("title", list(SHL301_CASES))
def test_shl301(tmp_path, title):
    src = SHL301_CASES[title]
    assert flagged(tmp_path, "SHL301", src) == marked("SHL301", src)


SHL302_CASES = {
    "jit of init under eval_shape allocates nothing": MODEL + """
mesh = jax.make_mesh((2,), ("data",))
abstract = jax.eval_shape(jax.jit(MLP().init), jax.random.key(0), jax.numpy.ones((1, 4)))
""",
    "device_put with a sharding inside the jitted function": MODEL + """
from jax.sharding import NamedSharding, PartitionSpec as P
mesh = jax.make_mesh((2,), ("data",))

@jax.jit
def create(key):
    v = MLP().init(key, jax.numpy.ones((1, 4)))
    return jax.device_put(v, NamedSharding(mesh, P()))
""",
    "init used but not returned": MODEL + """
mesh = jax.make_mesh((2,), ("data",))

@jax.jit
def count(key):
    v = MLP().init(key, jax.numpy.ones((1, 4)))
    return sum(x.size for x in jax.tree.leaves(v))
""",
    "nnx.jit of a Linen init, decorator form": MODEL + """
from flax import nnx
mesh = jax.make_mesh((2,), ("data",))

@nnx.jit  # expect: SHL302
def create(key):
    return MLP().init(key, jax.numpy.ones((1, 4)))
""",
}


@pytest.mark.parametrize("title", list(SHL302_CASES))
def test_shl302(tmp_path, title):
    src = SHL302_CASES[title]
    assert flagged(tmp_path, "SHL302", src) == marked("SHL302", src)


# (a jitted step whose scan carries `seq` through: an update of what comes in)
_SCAN_DECODE = """
        @jax.jit
        def decode(ws, seq):
            seq, _ = jax.lax.scan(lambda s, w: (jnp.tanh(s @ w), None), seq, ws)
            return seq
"""


@pytest.mark.parametrize("first", [
    "seq = params['embed'][seq]",  # an item of another value, by the token ids
    "seq = embed(params['embed'], seq)",  # a function that returns no part of `seq`
])
def test_shl401_a_parameter_rebound_before_the_update_is_not_what_is_updated(tmp_path, first):
    """`seq = embed(seq)` then `seq = decode(seq)`: `decode` updates the embedding, not the
    token ids that came in (another shape and dtype: donating them would be unusable). The
    look-alike keeps the parameter through a pass-through before the update: still an update."""
    src = f"""
        import jax
        import jax.numpy as jnp

        def embed(table, ids):
            return table[ids]
{_SCAN_DECODE}
        @jax.jit
        def forward(params, seq):
            {first}
            seq = decode(params["ws"], seq)
            return seq

        def main(params, batches):
            for seq in batches:
                print(forward(params, seq))
    """
    assert flagged(tmp_path, "SHL401", src) == set()
    for i, same in enumerate(["seq = jax.lax.with_sharding_constraint(seq, None)",
                              "seq = seq * 2.0"]):  # (not known: taken for the parameter)
        kept = src.replace(first, same)
        assert ("example.py", 12) in flagged(tmp_path / f"kept{i}", "SHL401", kept), same


@pytest.mark.parametrize("eager_caller", [False, True])
def test_shl401_a_jitted_function_called_only_in_other_modules_traces(tmp_path, eager_caller):
    """`@jax.jit def decode` that only the jitted `forward_model` of another module
    calls runs inlined in that trace: a donation asked of it is ignored, so nothing is said.
    Where a module that imports jax also calls it in a loop, eagerly, it is reported."""
    files = {"decoder.py": f"""
        import jax
        import jax.numpy as jnp
{_SCAN_DECODE}    """, "model.py": """
        import jax
        from decoder import decode

        @jax.jit
        def forward_model(params, seq):
            return decode(params["ws"], seq)
    """}
    if eager_caller:
        files["run.py"] = """
            import jax
            from decoder import decode

            def run(ws, batches):
                for seq in batches:
                    seq = decode(ws, seq)
                return seq
        """
    found = {f for f in flagged(tmp_path, "SHL401", files) if f[0] == "decoder.py"}
    assert found == ({("decoder.py", 4)} if eager_caller else set())


_ENV_WRAPPER = GYMNAX_WRAPPERS


@pytest.mark.parametrize("traced,eager,flagged_", [
    ("step", False, False),  # only called in the scan body of a jitted train function
    ("reset", True, True),  # only called in an eager loop
    ("step", True, True),  # in both
    ("reset", False, True),  # never called: another method is
])
@pytest.mark.parametrize("spelling", ["called", "vmapped", "rebound"])
def test_shl401_a_jitted_method_called_on_an_instance_only_in_traces(tmp_path, traced, eager,
                                                                      flagged_, spelling):
    """A gymnax-style `@partial(jax.jit, static_argnums=(0,)) def step(self, ...)` whose only
    call is `env.step(...)` on an object the caller's enclosing function built
    (`env = LogWrapper(base)`), inside the `lax.scan` body of a jitted train function: the
    donation would be ignored there, so nothing is said. A call in an eager loop keeps the
    finding, also beside a traced one; a traced call of another method does not count.
    Spelled as a call, as the method handed to `jax.vmap` (purejaxrl), and with the object
    wrapped on the way (`env = Base(); env = LogWrapper(env)`: the closure reads the last)."""
    call = {"called": f"env.{traced}(key, env_state, obs)",
            "vmapped": f"jax.vmap(env.{traced}, in_axes=(None, 0, 0))(key, env_state, obs)",
            "rebound": f"env.{traced}(key, env_state, obs)"}[spelling]
    build = "env = LogWrapper(base_env)" if spelling != "rebound" else \
        "env = Base(base_env)\n            env = LogWrapper(env)"
    train = f"""
        import jax

        from wrappers import Base, LogWrapper


        def make_train(base_env):
            {build}

            def train(key, env_state, obs):
                def _env_step(carry, unused):
                    env_state, obs = carry
                    obs, env_state, reward, done = {call}
                    return (env_state, obs), reward

                return jax.lax.scan(_env_step, (env_state, obs), None, 16)

            return train


        def main(base_env, key, env_state, obs):
            return jax.jit(make_train(base_env))(key, env_state, obs)
    """
    if eager:
        train += """
        def evaluate(base_env, key, env_state, obs):
            env = LogWrapper(base_env)
            for _ in range(10):
                obs, env_state, reward, done = env.step(key, env_state, obs)
            return env_state
    """
    files = {"wrappers.py": _ENV_WRAPPER, "train.py": train}
    found = {f for f in flagged(tmp_path, "SHL401", files) if f[0] == "wrappers.py"}
    line = GYMNAX_WRAPPERS.lstrip("\n").split("\n").index(
        "    @partial(jax.jit, static_argnums=(0,))") + 1
    assert found == ({("wrappers.py", line)} if flagged_ else set())


@pytest.mark.parametrize("wrap", ["jax.pmap(sgd_step, axis_name='i')", "jax.jit(sgd_step)",
                                  "jax.vmap(sgd_step)"])
def test_shl401_a_jitted_function_handed_to_another_transform(tmp_path, wrap):
    """acme's `@jax.jit def sgd_step` compiled again by `jax.pmap(sgd_step, ...)`: the inner
    jit runs traced inside the outer transform, where a donation asked of it is ignored. The
    outer site is the one to donate at (when it is called eagerly in a loop); the decorator
    is not told to."""
    src = JITTED_SGD_STEP + f"""
def train(state, batches):
    step = {wrap}
    for batch in batches:
        state = step(state, batch)
    return state
"""
    lines = {f.line for f in lint(tmp_path, "SHL401", src)}
    decorator = src.lstrip("\n").split("\n").index("@jax.jit") + 1
    wrapped = src.lstrip("\n").split("\n").index(f"    step = {wrap}") + 1
    assert decorator not in lines, lines
    assert lines == ({wrapped} if not wrap.startswith("jax.vmap") else set()), lines


@pytest.mark.parametrize("split,says", [
    ("key, sub = jax.random.split(key)", "`donate_argnums=(0, 1)`"),
    ("key, sub = rand.split(key)", "`donate_argnums=(0, 1)`"),  # (`from jax import random as rand`)
])
def test_shl401_a_prng_key_is_not_advised_for_donation(tmp_path, split, says):
    """`params, opt_state, key = train_step(params, opt_state, key)` (llama-2-jax): the key is
    a few bytes, donating it saves nothing; the advice names the parameters and the optimizer
    state. A step whose only rebound argument is its key says nothing."""
    src = f"""
        import jax
        import optax
        from jax import random as rand

        tx = optax.adam(1e-3)

        @jax.jit
        def train_step(params, opt_state, key, batch):
            {split}
            noise = jax.random.normal(sub, batch.shape)
            grads = jax.grad(lambda p: (p * batch * noise).sum())(params)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, key

        @jax.jit
        def next_key(key, step):
            key, sub = jax.random.split(key)
            return key, step + 1

        def train(params, opt_state, key, batches):
            for batch in batches:
                params, opt_state, key = train_step(params, opt_state, key, batch)
            step = 0
            for _ in range(10):
                key, step = next_key(key, step)
            return params
    """
    found = {f.line: f.message for f in lint(tmp_path, "SHL401", src)}
    assert list(found) == [7], found
    assert says in found[7], found[7]


@pytest.mark.parametrize("keeps,flagged_", [
    ("states.append(state)", False),  # the next call would delete what the list holds
    ("history[i] = state", False),
    ("frames.extend([state, obs])", False),
    ("losses.append(loss)", True),  # another value kept: the state is still replaced
])
@pytest.mark.parametrize("known", [True, False])
def test_shl401_a_state_kept_in_a_container_is_not_donated(tmp_path, keeps, flagged_, known):
    """`state, obs = step_fn(state, a); states.append(state)` in a loop, then
    `animate(states)` (jumanji's visualiser): each state appended is the next call's argument,
    so donating it deletes the arrays the list holds. The step known or not (`jax.jit(env.step)`
    of an object shardlint cannot follow)."""
    step = """
        @jax.jit
        def step(state, action):
            return jax.tree.map(lambda x: x + action, state), action
    """ if known else ""
    src = f"""
        import jax
{step}
        def rollout(env, state, actions, animate):
            step_fn = jax.jit(env.step)
            states, history, frames, losses = [], {{}}, [], []
            for i, action in enumerate(actions):
                state, obs = {"step" if known else "step_fn"}(state, action)
                loss = obs.sum()
                {keeps}
            animate(states, history, frames, losses)
            return state
    """
    found = lint(tmp_path, "SHL401", src)
    assert bool(found) is flagged_, [f.message for f in found]


@pytest.mark.parametrize("decorator,says", [
    ("@hax.named_jit(donate_args=(True,))", None),  # its own donation keyword: donated
    ("@hax.named_jit(donate=\"all\")", None),
    ("@hax.named_jit", "donate it the way `hax.named_jit` does (a wrapper of another package: "
                       "shardlint does not know its keywords; for `jax.jit`, "
                       "`donate_argnums=(0,)`) and rebind the result at every call"),
])
def test_shl401_a_jit_like_wrapper_of_another_package_donates_its_own_way(tmp_path, decorator,
                                                                          says):
    """`hax.named_jit` is taken for a jit by its name, but it is haliax's: it donates with
    `donate_args`, not `donate_argnums`. A donation keyword of its own is a donation shardlint
    cannot read (nothing said); without one, the message says to donate its way, no fix."""
    src = f"""
        import dataclasses
        import jax
        import haliax as hax

        @dataclasses.dataclass
        class State:
            total: jax.Array

        {decorator}
        def accumulate(state, batch):
            return dataclasses.replace(state, total=state.total + batch.sum())

        def run(state, batches):
            for batch in batches:
                state = accumulate(state, batch)
            return state
    """
    found = lint(tmp_path, "SHL401", src)
    if says is None:
        assert found == []
        return
    [f] = found
    assert says in f.message, f.message
    assert f.fix is None


@pytest.mark.parametrize("other", [
    "jax.jit(step, donate_argnums=(0,))",  # the donating branch beside it: the author's choice
    "jax.jit(other_step, donate_argnums=(0,))",  # another function donated: no reason here
])
def test_shl401_a_function_compiled_beside_its_donating_variant_is_left_alone(tmp_path, other):
    """`if donate: f = jax.jit(step, donate_argnums=...) else: f = jax.jit(step)` (penzai's
    trainer): the branch without donation is a choice the code offers, not an oversight.
    The same branch beside a donation of another function is reported."""
    src = f"""
        import jax
        import optax

        tx = optax.sgd(0.1)

        def step(params, opt_state, grads):
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state

        def other_step(params, opt_state, grads):
            return step(params, opt_state, grads)

        def make(donate):
            if donate:
                f = {other}
            else:
                f = jax.jit(step)
            return f

        def run(params, opt_state, batches, donate):
            f = make(donate)
            for g in batches:
                params, opt_state = f(params, opt_state, g)
            return params
    """
    found = {line for _, line in flagged(tmp_path, "SHL401", src)}
    assert (17 in found) is (other.startswith("jax.jit(other_step")), found


_KEYWORD_ONLY = """
import functools
import jax

def train_step(state, batch, learning_rate, cache=None):
    cache = cache.at[0].add(batch.sum())
    return state - learning_rate * batch, cache

def train(state, batches, cache):
    {compile}
    for batch in batches:
        state, cache = p_step(state, batch, cache=cache)
    return state
"""


@pytest.mark.parametrize("compile,jax,names", [
    # pmap takes `donate_argnums` only, in every release: a keyword argument cannot be donated
    ("p_step = jax.pmap(functools.partial(train_step, learning_rate=0.1), axis_name='b')",
     None, False),
    # jax.jit takes `donate_argnames` from jax 0.4.14 (read from the releases)
    ("p_step = jax.jit(functools.partial(train_step, learning_rate=0.1))", "0.4.7..0.12.0.1",
     False),
    ("p_step = jax.jit(functools.partial(train_step, learning_rate=0.1))", None, True),
])
def test_shl401_names_a_keyword_argument_only_where_the_jit_can_donate_it(tmp_path, compile,
                                                                          jax, names):
    src = _KEYWORD_ONLY.replace("{compile}", compile)
    [f] = lint(tmp_path, "SHL401", src, **({"jax": jax} if jax else {}))
    assert ("donate_argnames=('cache',)" in f.message) == names, f.message
    assert "donate_argnums=(0,)" in f.message, f.message
    assert f.fix is not None
    added = f.fix.edits[0].text
    assert ("donate_argnames" in added) == names, added
    if not names:
        assert "`cache`, passed by keyword, " in f.message and "cannot donate" in f.message, \
            f.message
        assert ("before jax 0.4.14" in f.message) == (jax is not None), f.message
