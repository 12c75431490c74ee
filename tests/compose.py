"""Small projects built from independent pieces, for the compositional tests of the value-flow
layer (tests/test_compose_donation.py).

A donation project is three choices: how the step is jitted (``JITS``), how the step replaces
its state (``UPDATES``) and the hops between the step and the update (``HOPS``). Each piece is
written so that any choice of the others completes it: the update is an expression of the state
and the gradients, a hop places that expression in a function somewhere and hands back a call,
and a jit style turns the step's body into a compiled callable and a call to it. The driver
rebinds the state in a loop, ``state = train_step(state, batch)``, as a training loop does.

The expected finding is where the user writes the missing keyword: the line marked ``# JIT``.
Look-alikes (``LOOKALIKES``) change one thing so that nothing may be reported.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

PKG = "trainer"


@dataclass
class Project:
    files: dict[str, str] = field(default_factory=dict)

    def add(self, path: str, text: str) -> None:
        text = textwrap.dedent(text).strip("\n") + "\n"
        self.files[path] = self.files.get(path, "") + text

    def expected(self) -> set[tuple[str, int]]:
        return {(path, i) for path, text in self.files.items()
                for i, line in enumerate(text.splitlines(), start=1) if line.endswith("# JIT")}


# ---- updates: an expression of `state` and `grads` that returns the state replaced --------------
@dataclass(frozen=True)
class Update:
    name: str
    imports: str
    expr: str  # of `state` and `grads`
    nnx: bool = False  # an in-place NNX update: a statement, only under nnx.jit


UPDATES = [
    Update("apply_gradients", "", "state.apply_gradients(grads=grads)"),
    Update("replace", "import jax",
           "state.replace(params=jax.tree.map(lambda p, g: p - 0.1 * g, state.params, grads))"),
    Update("tree_map_sgd", "import jax", "jax.tree.map(lambda p, g: p - 0.1 * g, state, grads)"),
    Update("optax_apply", "import optax", "optax.apply_updates(state, grads)"),
    Update("cache_set", "", "state.at[0].set(grads)"),
    Update("dynamic_update_slice", "import jax", "jax.lax.dynamic_update_slice(state, grads, (0, 0))"),
    Update("dict_rebuild", "import jax",
           '{"params": jax.tree.map(lambda p, g: p - 0.1 * g, state["params"], grads), '
           '"step": state["step"] + 1}'),
]


# ---- hops: where the update is written, relative to the step ---------------------------------
@dataclass(frozen=True)
class Hop:
    name: str

    def place(self, project: Project, update: Update, step_module: str) -> tuple[str, str]:
        """Write the update somewhere; return (imports for the step's module, the expression
        the step returns)."""
        raise NotImplementedError


def _helper(update: Update, name: str = "apply_update", indent: str = "") -> str:
    return textwrap.indent(textwrap.dedent(f"""
        def {name}(state, grads):
            return {update.expr}
    """), indent)


class Inline(Hop):
    def place(self, project, update, step_module):
        return update.imports, update.expr


class Helper(Hop):
    def place(self, project, update, step_module):
        project.add(step_module, update.imports + "\n" + _helper(update))
        return "", "apply_update(state, grads)"


class Partial(Hop):
    def place(self, project, update, step_module):
        project.add(step_module, update.imports + "\nimport functools\n" + textwrap.dedent(f"""
            def _update(state, grads, scale):
                grads = grads * scale
                return {update.expr}

            apply_update = functools.partial(_update, scale=1.0)
        """))
        return "", "apply_update(state, grads)"


class StaticMethod(Hop):
    def place(self, project, update, step_module):
        project.add(step_module, update.imports + "\n" + textwrap.dedent(f"""
            class Updater:
                def __init__(self, lr):
                    self.lr = lr

                def apply(self, state, grads):
                    return {update.expr}
        """))
        return "", "Updater(0.1).apply(state, grads)"


class OtherModule(Hop):
    def __init__(self, name: str, path: str, module: str, relative: str | None = None):
        super().__init__(name)
        self.path, self.module, self.relative = path, module, relative

    def place(self, project, update, step_module):
        project.add(self.path, update.imports + "\n" + _helper(update))
        for pkg in _packages(self.path):
            project.files.setdefault(pkg, "")
        how = self.relative or f"from {self.module} import apply_update"
        return how, "apply_update(state, grads)"


class Container(Hop):
    """The helper hands the new state back inside a tuple, a dict or a record."""

    def __init__(self, name: str, pack: str, unpack: str, extra: str = ""):
        super().__init__(name)
        self.pack, self.unpack, self.extra = pack, unpack, extra

    def place(self, project, update, step_module):
        project.add(step_module, update.imports + "\n" + self.extra + "\n" + textwrap.dedent(f"""
            def apply_update(state, grads):
                new_state = {update.expr}
                loss = 0.0
                return {self.pack}
        """))
        return "", self.unpack


class ObjectMethod(Hop):
    """A method of a module-level object of another module (``updater = _Updater()``,
    ``updater_lib.apply(state, grads)``): its ``self`` is the object."""

    def place(self, project, update, step_module):
        path = f"{PKG}/updaters.py"
        project.add(path, "import jax\n" + update.imports + "\n" + textwrap.dedent(f"""
            class _Updater:
                def apply(self, state, grads):
                    return {update.expr}

            updater = _Updater()
        """))
        for pkg in _packages(path):
            project.files.setdefault(pkg, "")
        return f"from {PKG}.updaters import updater as updater_lib", "updater_lib.apply(state, grads)"


class LeafMap(Hop):
    """The new state handed back through a two-tree map whose leaf function gives its second
    leaf back, constrained or as it came."""

    def place(self, project, update, step_module):
        project.add(step_module, "import jax\n" + update.imports + "\n" + textwrap.dedent(f"""
            SPECS = None

            def apply_update(state, grads):
                new_state = {update.expr}

                def _keep(spec, leaf):
                    return leaf if spec is None else jax.lax.with_sharding_constraint(leaf, spec)
                return jax.tree.map(_keep, SPECS, new_state, is_leaf=lambda s: s is None)
        """))
        return "", "apply_update(state, grads)"


class Branch(Hop):
    """The state rebound in both branches of an if (one to a function of a package the analysis
    does not read), then handed back through a pass-through helper."""

    def place(self, project, update, step_module):
        project.add(step_module, "import jax\n" + update.imports + "\n" + textwrap.dedent(f"""
            from optim_ext import clipped_update

            def _apply(state, grads):
                return {update.expr}

            def _constrain(tree):
                return jax.lax.with_sharding_constraint(tree, jax.sharding.PartitionSpec())

            def apply_update(state, grads, clip=False):
                if clip:
                    state = clipped_update(state, grads)
                else:
                    state = _apply(state, grads)
                return _constrain(state)
        """))
        return "", "apply_update(state, grads)"


class LoopCarry(Hop):
    """The update made in a loop whose carry is a record holding the state, read back from
    its field (``fori_loop(..., Carry(step=0, state=state)).state``)."""

    def place(self, project, update, step_module):
        project.add(step_module, "import collections\nimport jax\n" + update.imports + "\n"
                    + textwrap.dedent(f"""
            Carry = collections.namedtuple("Carry", ["step", "state"])

            def apply_update(state, grads):
                def body(i, c):
                    state = c.state
                    return Carry(c.step + 1, {update.expr})
                out = jax.lax.fori_loop(0, 1, body, Carry(step=0, state=state))
                return out.state
        """))
        return "", "apply_update(state, grads)"


def _packages(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return [f"{'/'.join(parts[:i])}/__init__.py" for i in range(1, len(parts) + 1)
            if parts[:i] != ["models"]]


HOPS: list[Hop] = [
    Inline("inline"),
    Helper("helper"),
    Partial("partial"),
    StaticMethod("method"),
    OtherModule("module", f"{PKG}/updates.py", f"{PKG}.updates"),
    OtherModule("relative_module", f"{PKG}/updates.py", "", "from .updates import apply_update"),
    OtherModule("subpackage", f"{PKG}/core/updates.py", f"{PKG}.core.updates"),
    OtherModule("sibling_package", "models/modelpkg/updates.py", "modelpkg.updates"),
    Container("tuple", "new_state, loss", "apply_update(state, grads)[0]"),
    Container("dict", '{"state": new_state, "loss": loss}', 'apply_update(state, grads)["state"]'),
    Container("record", "Out(new_state, loss)", "apply_update(state, grads).state",
              "import collections\nOut = collections.namedtuple('Out', ['state', 'loss'])"),
    ObjectMethod("object_method"),
    LeafMap("leaf_map"),
    Branch("branch"),
    LoopCarry("loop_carry"),
]


# ---- jits: how the step is compiled, where it is called ----------------------------------------
@dataclass(frozen=True)
class Jit:
    name: str
    nnx: bool = False

    def write(self, project: Project, step_module: str, imports: str, body: str,
              donate: bool) -> str:
        """Write the jitted step into ``step_module``; return how the driver gets the callable
        (an import line and the expression that names it)."""
        raise NotImplementedError


def _step(body: str, name: str = "train_step", indent: str = "", self_param: bool = False) -> str:
    params = "self, state, batch" if self_param else "state, batch"
    return textwrap.indent(textwrap.dedent(f"""
        def {name}({params}):
            grads = compute_grads(state, batch)
            return {body}
    """), indent)


GRADS = """
import jax

def loss_fn(state, batch):
    return (batch ** 2).mean()

def compute_grads(state, batch):
    return jax.grad(loss_fn)(state, batch)
"""


def _donate(donate: bool, pos: int = 0) -> str:
    return f", donate_argnums=({pos},)" if donate else ""


class Decorator(Jit):
    def write(self, project, step_module, imports, body, donate):
        deco = (f"@functools.partial(jax.jit, donate_argnums=(0,))  # JIT" if donate
                else "@jax.jit  # JIT")
        project.add(step_module, f"{imports}\nimport functools\nimport jax\n{GRADS}\n{deco}"
                    + _step(body))
        return "train_step"


class PartialDecorator(Jit):
    def write(self, project, step_module, imports, body, donate):
        project.add(step_module, f"{imports}\nimport functools\nimport jax\n{GRADS}\n"
                    f"@functools.partial(jax.jit, static_argnums=(2,){_donate(donate)})  # JIT"
                    + _step(body).replace("(state, batch):", "(state, batch, training=True):"))
        return "train_step"


class Call(Jit):
    """``train_step = <func>(<fn>, ...)``: ``fn`` is how the step is handed over (by keyword,
    ``fun=_train_step``, or wrapped first, ``jax.vmap(_train_step)``)."""

    def __init__(self, name: str, func: str, imp: str, nnx: bool = False,
                 fn: str = "_train_step"):
        super().__init__(name, nnx)
        self.func, self.imp, self.fn = func, imp, fn

    def write(self, project, step_module, imports, body, donate):
        project.add(step_module, f"{imports}\n{self.imp}\n{GRADS}\n" + _step(body, "_train_step")
                    + f"\ntrain_step = {self.func}({self.fn}{_donate(donate)})  # JIT\n")
        return "train_step"


class Wrapper(Jit):
    """An in-house jit wrapper in another module, which forwards its keywords."""

    def write(self, project, step_module, imports, body, donate):
        project.add(f"{PKG}/jit_utils.py", """
            import jax

            def compile_step(fn, static_argnums=(), donate_argnums=()):
                return jax.jit(fn, static_argnums=static_argnums, donate_argnums=donate_argnums)
        """)
        project.add(step_module, f"{imports}\nfrom {PKG}.jit_utils import compile_step\n{GRADS}\n"
                    + _step(body, "_train_step")
                    + f"\ntrain_step = compile_step(_train_step{_donate(donate)})  # JIT\n")
        return "train_step"


class Factory(Jit):
    def write(self, project, step_module, imports, body, donate):
        project.add(step_module, f"{imports}\nimport jax\n{GRADS}\n"
                    "def make_train_step(config):\n" + _step(body, indent="    ")
                    + f"\n    return jax.jit(train_step{_donate(donate)})  # JIT\n")
        return "make_train_step(None)"


class Method(Jit):
    def write(self, project, step_module, imports, body, donate):
        project.add(step_module, f"{imports}\nimport jax\n{GRADS}\n"
                    "class Trainer:\n    def __init__(self):\n"
                    f"        self.step = jax.jit(self._train_step{_donate(donate)})  # JIT\n"
                    + _step(body, "_train_step", indent="    ", self_param=True))
        return "Trainer().step"


class Compiled(Jit):
    """Compiled ahead of time, then called."""

    def write(self, project, step_module, imports, body, donate):
        project.add(step_module, f"{imports}\nimport jax\n{GRADS}\n" + _step(body, "_train_step")
                    + "\ndef compile_step(state, batch):\n"
                    f"    return jax.jit(_train_step{_donate(donate)}).lower(state, batch).compile()  # JIT\n")
        return "compile_step(state, batches[0])"


class BranchAttribute(Jit):
    """A method kept in an attribute set in each branch (one rematerialised), jitted from there."""

    def write(self, project, step_module, imports, body, donate):
        project.add(step_module, f"{imports}\nimport jax\n{GRADS}\n"
                    "class Trainer:\n    def __init__(self, remat=False):\n"
                    "        if remat:\n            self._fn = jax.checkpoint(self._train_step)\n"
                    "        else:\n            self._fn = self._train_step\n"
                    f"        self.step = jax.jit(self._fn{_donate(donate)})  # JIT\n"
                    + _step(body, "_train_step", indent="    ", self_param=True))
        return "Trainer().step"


JITS: list[Jit] = [
    Decorator("decorator"),
    PartialDecorator("partial_decorator"),
    Call("call", "jax.jit", "import jax"),
    Call("pjit", "pjit", "import jax\nfrom jax.experimental.pjit import pjit"),
    Call("nnx_jit", "nnx.jit", "import jax\nfrom flax import nnx", nnx=True),
    Wrapper("wrapper"),
    Factory("factory"),
    Method("method"),
    Compiled("aot"),
    # the function by keyword, as pjit (and jax.jit before 0.7) took it
    Call("pjit_fun", "pjit", "import jax\nfrom jax.experimental.pjit import pjit",
         fn="fun=_train_step"),
    # an ensemble: the step mapped over a leading axis of every argument, then jitted
    Call("vmap", "jax.jit", "import jax", fn="jax.vmap(_train_step)"),
    BranchAttribute("branch_attribute"),
]


# ---- drivers and look-alikes ------------------------------------------------------------------
DRIVERS = ("same_module", "other_module")


def build(jit: Jit, update: Update, hop: Hop, driver: str = "other_module",
          lookalike: str | None = None) -> Project:
    """One project. ``lookalike``: None (the pitfall), "donated", "read_after" (the caller reads
    the old state after the call) or "no_replace" (the step returns a loss, not the state)."""
    project = Project()
    step_module = f"{PKG}/steps.py"
    project.add(f"{PKG}/__init__.py", "")
    imports, expr = hop.place(project, update, step_module)
    if lookalike == "no_replace":
        expr = f"loss_fn({expr}, batch)"
    get = jit.write(project, step_module, imports, expr, donate=lookalike == "donated")
    after = "        print(old.mean())\n" if lookalike == "read_after" else ""
    call = get if get.isidentifier() else "step"
    loop = ("def train(state, batches):\n"
            + ("" if call == get else f"    step = {get}\n")
            + "    for batch in batches:\n"
            + ("        old = state\n" if lookalike == "read_after" else "")
            + f"        state = {call}(state, batch)\n" + after
            + "    return state\n")
    if driver == "same_module":
        project.add(step_module, "\n" + loop)
    else:
        head = get.split("(")[0].split(".")[0]
        # (a training loop's module uses jax itself: its summary is what says how it calls)
        project.add(f"{PKG}/main.py", f"import jax\nfrom {PKG}.steps import {head}\n\n" + loop)
    if lookalike is not None:
        for path, text in project.files.items():
            project.files[path] = text.replace("  # JIT", "")
    return project


def combinations():
    for jit in JITS:
        for update in UPDATES:
            for hop in HOPS:
                yield jit, update, hop


LOOKALIKES = ("donated", "read_after", "no_replace")


# ---- NNX: objects changed in place under nnx.jit --------------------------------------------
# The step's signature is ``(model, batch)``; an in-place update is a statement on ``model``.
NNX_UPDATES = {
    "variable_value": "model.count.value = model.count.value + batch",
    "variable_index": "model.count[...] = model.count[...] + batch",
    "augmented": "model.count.value += batch",
    "set_value": "model.count.set_value(model.count.get_value() + batch)",
    "nnx_update": "nnx.update(model, jax.tree.map(lambda v: v * 0.9, nnx.state(model)))",
    "optimizer": "optimizer.update(model, batch)",
}
NNX_HOPS = ("inline", "helper", "module", "sibling_package")
NNX_JITS = {
    "decorator": ("@nnx.jit  # JIT", "@functools.partial(nnx.jit, donate_argnums=(0,))  # JIT"),
    "partial_decorator": ("@functools.partial(nnx.jit, static_argnames=('training',))  # JIT",
                          "@functools.partial(nnx.jit, static_argnames=('training',), "
                          "donate_argnums=(0,))  # JIT"),
    "call": (None, None),
}
NNX_LOOKALIKES = ("donated", "jax_jit", "read_only")


def build_nnx(jit: str, update: str, hop: str, lookalike: str | None = None) -> Project:
    """An NNX project: ``train_step(model, batch)`` changes ``model`` in place. Look-alikes:
    "donated"; "jax_jit" (plain ``jax.jit``: the change does not reach the caller's object, a
    pitfall of its own, SHL404, not a missing donation); "read_only" (the step only reads)."""
    project = Project()
    step_module = f"{PKG}/steps.py"
    project.add(f"{PKG}/__init__.py", "")
    stmt = NNX_UPDATES[update]
    if lookalike == "read_only":
        stmt = "print(model.count.value + batch)"
    optimizer = update == "optimizer"
    params = "model, optimizer, batch" if optimizer else "model, batch"
    helper = f"def apply_update({params}):\n    {stmt}\n"
    imports = "import jax\nfrom flax import nnx\n"
    if hop == "inline":
        body = stmt
    else:
        body = f"apply_update({params})"
        if hop == "helper":
            project.add(step_module, imports + helper)
        else:
            path = f"{PKG}/updates.py" if hop == "module" else "models/modelpkg/updates.py"
            project.add(path, imports + helper)
            for pkg in _packages(path):
                project.files.setdefault(pkg, "")
            imports += f"from {'trainer' if hop == 'module' else 'modelpkg'}.updates import apply_update\n"
    jit_fn = "jax.jit" if lookalike == "jax_jit" else "nnx.jit"
    donate = lookalike == "donated"
    head = f"{imports}import functools\n\n\nclass Counter(nnx.Module):\n" \
           "    def __init__(self, n):\n        self.count = nnx.Variable(jax.numpy.zeros((n, n)))\n\n\n"
    sig = f"def {{name}}({params}{', training=True' if jit == 'partial_decorator' else ''}):\n"
    if jit == "call":
        text = head + sig.format(name="_train_step") + f"    {body}\n\n\n" \
            + f"train_step = {jit_fn}(_train_step{', donate_argnums=(0,)' if donate else ''})  # JIT\n"
    else:
        deco = NNX_JITS[jit][1 if donate else 0].replace("nnx.jit", jit_fn)
        text = head + deco + "\n" + sig.format(name="train_step") + f"    {body}\n"
    project.add(step_module, text)
    args = "model, optimizer, batch" if optimizer else "model, batch"
    project.add(f"{PKG}/main.py", f"from {PKG}.steps import train_step\n\n\n"
                f"def train({'model, optimizer' if optimizer else 'model'}, batches):\n"
                f"    for batch in batches:\n        train_step({args})\n")
    if lookalike is not None:
        for path, text in project.files.items():
            project.files[path] = text.replace("  # JIT", "")
    return project


def nnx_combinations():
    for jit in NNX_JITS:
        for update in NNX_UPDATES:
            for hop in NNX_HOPS:
                yield jit, update, hop
