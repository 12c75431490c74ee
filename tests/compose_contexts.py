"""Small projects built from independent pieces, for the compositional tests of the context rules
(tests/test_compose_contexts.py): SHL101 legacy `with mesh:`, SHL102 constraints without axis
rules, SHL103 constraints without a mesh, SHL104 bare `PartitionSpec` without a mesh, SHL105
Linen constraints on an Explicit mesh.

A Linen project (:func:`build`) is five choices, each written so that any choice of the others
completes it:

* ``CONSTRAINTS``: what the model in ``trainer/model.py`` constrains and so what it needs (a
  logical constraint or logically partitioned parameter needs axis rules and a mesh; a raw
  ``lax.with_sharding_constraint`` with a bare spec needs only a mesh), in the model itself or in
  a submodule of another file;
* ``MESHES``: where the mesh is made -- ``Mesh(devices, names)``, ``mesh_utils`` devices,
  ``jax.make_mesh`` with Auto axes or without ``axis_types`` (Explicit since jax 0.9.0: SHL105
  where the mesh is made), a factory in the same or another module, a configuration record's
  field (``dataclasses.replace(cfg, mesh=...)``), ``self.mesh`` set in ``__init__``, a
  parameter typed ``Mesh``; each hands the driver an expression that names the mesh;
* ``TABLES``: where the rules table is made -- a module-level literal, a constant imported from
  another module, a function that returns it, a configuration record's attribute;
* ``ENTERS``: how the contexts are entered -- ``with jax.set_mesh(mesh)``, the legacy
  ``with mesh:``, ``with nn.logical_axis_rules(rules)`` (and its other spellings), the global
  setters, either order, one context in the caller and the other in the callee, one missing, or
  none;
* ``HOPS``: how the model runs where the contexts are: ``model.init`` in place, a jitted
  ``model.init`` (called at once or bound first), a helper function in the same or another
  module, a jitted function that calls ``model.apply``, in the same or another module, the
  model handed to a function that initialises it (a call's argument, a partial's keyword).

The driver is ``run()`` in ``trainer/train.py`` (a method of ``Trainer`` for the ``self.mesh``
piece), called under ``if __name__ == "__main__":``. What must be reported is marked in the text
with a trailing comment at the line where the finding lands: ``# SHL101`` at the legacy ``with``,
``# SHL102``/``# SHL103`` at the call that runs the model (the outermost place in the project
that runs it without the context), ``# SHL105`` at ``jax.make_mesh``. A ``:warning`` after the
code says the finding's severity differs from the rule's own (a legacy ``with mesh:`` that
silences nothing is only deprecated). The expectation is derived from what the pieces do -- the
contexts entered and what the model needs -- not listed per combination.

Bare specs (:func:`build_spec`, SHL104) are three choices: where the bare ``PartitionSpec`` is
read (``SPEC_SITES``: ``with_sharding_constraint``, ``device_put``, ``jax.jit``'s
``out_shardings`` or a decorator's ``in_shardings``, ``nn.logical_to_mesh`` specs as
``out_shardings``), how the mesh is entered around it (``SPEC_MESHES``) and the hop from there to
the site (``SPEC_HOPS``). The look-alike hands a ``NamedSharding`` instead (``named=True``).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field

PKG = "trainer"
RULES = 1
MESH = 2
CODES = ("SHL101", "SHL102", "SHL103", "SHL104", "SHL105")
SEVERITY = {"SHL101": "error", "SHL102": "warning", "SHL103": "warning", "SHL104": "error",
            "SHL105": "warning"}
_MARK = re.compile(r"#((?: SHL\d{3}(?::\w+)?)+)$")
_HOLES = re.compile(r"  # (ENTRY|WITH)$", re.M)


@dataclass
class Project:
    files: dict[str, str] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)

    def add(self, path: str, text: str) -> None:
        text = textwrap.dedent(text).strip("\n") + "\n"
        self.files[path] = self.files.get(path, "") + text

    def package(self, path: str) -> None:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            self.files.setdefault("/".join(parts[:i]) + "/__init__.py", "")

    def expected(self) -> set[tuple[str, int, str, str]]:
        """(path, line, code, severity) of every marked finding."""
        out = set()
        for path, text in self.files.items():
            for i, line in enumerate(text.splitlines(), start=1):
                m = _MARK.search(line)
                for mark in (m.group(1).split() if m else ()):
                    code, _, severity = mark.partition(":")
                    out.add((path, i, code, severity or SEVERITY[code]))
        return out


def _indent(lines: list[str], n: int) -> list[str]:
    return [" " * n + line if line else line for line in lines]


# ---- constraints: what the model constrains, and so what it needs ------------------------------
@dataclass(frozen=True)
class Constraint:
    name: str
    needs: int
    model: str  # trainer/model.py, defining `Model`
    layers: str = ""  # trainer/layers.py, where the constrained submodule lives


_HEAD = "import jax\nimport flax.linen as nn\nfrom jax.sharding import PartitionSpec as P\n"
CONSTRAINTS = [
    Constraint("logical_constraint", RULES | MESH, _HEAD + """
class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.with_logical_constraint(nn.Dense(8)(x), ("batch", "mlp"))
"""),
    Constraint("logical_partitioning", RULES | MESH, _HEAD + """
class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        return nn.Dense(8, kernel_init=init)(x)
"""),
    Constraint("submodule", RULES | MESH, _HEAD + f"""
from {PKG}.layers import Block

class Model(nn.Module):
    def setup(self):
        self.block = Block()

    def __call__(self, x):
        return self.block(nn.Dense(8)(x))
""", _HEAD + """
class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.with_logical_constraint(x, ("batch", "mlp"))
"""),
    # (a raw constraint in model code: judged where the model runs, SHL103, not at the spec)
    Constraint("sharding_constraint", MESH, _HEAD + """
class Model(nn.Module):
    @nn.compact
    def __call__(self, x):
        return jax.lax.with_sharding_constraint(nn.Dense(8)(x), P("data", None))
"""),
]


# ---- meshes: where the mesh is made -------------------------------------------------------------
@dataclass(frozen=True)
class MeshPiece:
    name: str
    imports: str = ""
    defs: str = ""  # module-level text of trainer/train.py
    setup: str = ""  # first statements of run()
    expr: str = "mesh"  # the mesh, inside run()
    files: tuple[tuple[str, str], ...] = ()  # other modules
    kind: str = "local"  # "local", "param" (run(mesh: Mesh)) or "self" (Trainer.__init__)
    config: bool = False  # needs `cfg`


_DEVICES = 'np.array(jax.devices()).reshape(2, 1)'
_NAMES = '("data", "model")'
_MESH = f"Mesh({_DEVICES}, {_NAMES})"
_MESH_IMPORTS = "import numpy as np\nfrom jax.sharding import Mesh\n"
MESHES = [
    MeshPiece("mesh", _MESH_IMPORTS, setup=f"mesh = {_MESH}"),
    MeshPiece("mesh_utils", "from jax.experimental import mesh_utils\nfrom jax.sharding import Mesh\n",
              setup=f"mesh = Mesh(mesh_utils.create_device_mesh((2, 1)), {_NAMES})"),
    MeshPiece("make_mesh_auto", "from jax.sharding import AxisType\n",
              setup=f"mesh = jax.make_mesh((2, 1), {_NAMES}, axis_types=(AxisType.Auto,) * 2)"),
    MeshPiece("make_mesh", setup=f"mesh = jax.make_mesh((2, 1), {_NAMES})  # SHL105"),
    MeshPiece("factory", _MESH_IMPORTS, defs=f"def create_mesh():\n    return {_MESH}\n",
              setup="mesh = create_mesh()"),
    MeshPiece("factory_module", f"from {PKG}.meshes import create_mesh\n",
              setup="mesh = create_mesh()",
              files=((f"{PKG}/meshes.py", "import jax\n\n\ndef create_mesh():\n"
                      f"    return jax.make_mesh((2, 1), {_NAMES})  # SHL105\n"),)),
    MeshPiece("constant_module", f"from {PKG}.meshes import MESH\n", expr="MESH",
              files=((f"{PKG}/meshes.py", "import jax\n" + _MESH_IMPORTS + f"\nMESH = {_MESH}\n"),)),
    MeshPiece("config_field", _MESH_IMPORTS + "import dataclasses\n",
              setup=f"cfg = dataclasses.replace(cfg, mesh={_MESH})", expr="cfg.mesh",
              config=True),
    MeshPiece("self_attr", _MESH_IMPORTS, setup=f"self.mesh = {_MESH}", expr="self.mesh",
              kind="self"),
    MeshPiece("parameter", _MESH_IMPORTS, setup=_MESH, kind="param"),
    # bound by keyword in a `functools.partial` (`run` takes it keyword-only)
    MeshPiece("partial_keyword", _MESH_IMPORTS + "import functools\n", setup=_MESH,
              kind="partial"),
    # a property of the driver's class, annotated `-> Mesh`, over what its constructor sets
    MeshPiece("property", _MESH_IMPORTS, setup=f"self._mesh = {_MESH}", expr="self.mesh",
              kind="property"),
]


# ---- rules tables: where the table is made ------------------------------------------------------
@dataclass(frozen=True)
class Table:
    name: str
    imports: str = ""
    defs: str = ""
    expr: str = "RULES"
    files: tuple[tuple[str, str], ...] = ()
    config: bool = False


_TABLE = '(("batch", "data"), ("embed", None), ("mlp", "model"))'
TABLES = [
    Table("literal", defs=f"RULES = {_TABLE}\n"),
    Table("imported", f"from {PKG}.sharding import RULES\n",
          files=((f"{PKG}/sharding.py", f"RULES = {_TABLE}\n"),)),
    Table("function", defs=f"def axis_rules():\n    return {_TABLE}\n", expr="axis_rules()"),
    Table("config", expr="cfg.rules", config=True),
]
_CONFIG = f"""
import dataclasses
from typing import Optional

from jax.sharding import Mesh


@dataclasses.dataclass
class Config:
    rules: tuple = {_TABLE}
    mesh: Optional[Mesh] = None
"""


# ---- enters: which contexts, entered how and where ----------------------------------------------
# Items of a `with` (or setter statements); "legacy" is the mesh itself (`with mesh:`).
ITEMS = {
    "set_mesh": "jax.set_mesh({mesh})",
    "use_mesh": "jax.sharding.use_mesh({mesh})",
    "legacy": "{mesh}",
    "rules": "nn.logical_axis_rules({rules})",
    "axis_rules": "nn_partitioning.axis_rules({rules})",
    "nnx_rules": "nnx.logical_axis_rules({rules})",
}
SETTERS = {"set_mesh": "jax.set_mesh({mesh})", "rules": "nn.set_logical_axis_rules({rules})"}
_PROVIDES = {"set_mesh": MESH, "use_mesh": MESH, "rules": RULES, "axis_rules": RULES,
             "nnx_rules": RULES}
# jax.sharding.use_mesh was removed in jax 0.7.1; legacy `with mesh:` counted before flax 0.12.2.
OLD = {"jax": "0.6.2", "flax": "0.10.6"}


@dataclass(frozen=True)
class Enter:
    name: str
    outer: tuple[str, ...] = ()  # the `with` around the hop's call, in run()
    inner: tuple[str, ...] = ()  # the `with` around the model's call (in the hop's function)
    setters: tuple[str, ...] = ()  # global setters, statements in run() before the call
    versions: tuple[tuple[str, str], ...] = ()

    @property
    def items(self) -> tuple[str, ...]:
        return self.outer + self.inner + self.setters

    def provides(self, legacy_counts: bool) -> int:
        got = 0
        for item in self.items:
            got |= _PROVIDES.get(item, MESH if item == "legacy" and legacy_counts else 0)
        return got

    @property
    def pitfall(self) -> bool:
        return "legacy" in self.items or self.provides(False) != RULES | MESH


ENTERS = [
    Enter("set_mesh_and_rules", ("set_mesh", "rules")),
    Enter("rules_and_set_mesh", ("rules", "set_mesh")),
    Enter("partitioning_axis_rules", ("set_mesh", "axis_rules")),
    Enter("nnx_logical_axis_rules", ("nnx_rules", "set_mesh")),
    Enter("caller_mesh_callee_rules", ("set_mesh",), ("rules",)),
    Enter("caller_rules_callee_mesh", ("rules",), ("set_mesh",)),
    Enter("global_setters", setters=("rules", "set_mesh")),
    Enter("global_rules_with_mesh", ("set_mesh",), setters=("rules",)),
    Enter("use_mesh_old_jax", ("use_mesh", "rules"), versions=tuple(OLD.items())),
    Enter("legacy_old_flax", ("legacy", "rules"), versions=tuple(OLD.items())),
    # pitfalls
    Enter("mesh_only", ("set_mesh",)),
    Enter("rules_only", ("rules",)),
    Enter("global_mesh_only", setters=("set_mesh",)),
    Enter("legacy_and_rules", ("rules", "legacy")),
    Enter("legacy_first", ("legacy", "rules")),
    Enter("legacy_only", ("legacy",)),
    Enter("caller_legacy_callee_rules", ("legacy",), ("rules",)),
    Enter("caller_rules_callee_legacy", ("rules",), ("legacy",)),
    Enter("none"),
]


# ---- hops: how the model runs where the contexts are --------------------------------------------
@dataclass(frozen=True)
class Hop:
    name: str
    pre: str = ""  # run() statements before the contexts
    call: str = ""  # the statement under the contexts; a function's hop fills {args}
    body: str = ""  # the hop's function: {params}; {enter} marks where the inner contexts go
    module: str | None = None  # the function's module (None: trainer/train.py)
    jitted: bool = False

    @property
    def inline(self) -> bool:
        return not self.body


_INIT = "Model().init(jax.random.key(0), x)"
_ABSTRACT = "variables = jax.eval_shape(Model().init, jax.random.key(0), x)"
HOPS = [
    Hop("init", call=f"variables = {_INIT}  # ENTRY"),
    Hop("jit_init", call="variables = jax.jit(Model().init)(jax.random.key(0), x)  # ENTRY"),
    Hop("jit_bound", pre="init_fn = jax.jit(Model().init)",
        call="variables = init_fn(jax.random.key(0), x)  # ENTRY"),
    Hop("helper", call="variables = create_variables(jax.random.key(0), x{args})",
        body="def create_variables(key, x{params}):\n{enter}return Model().init(key, x)  # ENTRY\n"),
    Hop("helper_module", call="variables = create_variables(jax.random.key(0), x{args})",
        body="def create_variables(key, x{params}):\n{enter}return Model().init(key, x)  # ENTRY\n",
        module=f"{PKG}/steps.py"),
    Hop("jitted_apply", pre=_ABSTRACT,
        call="y = forward(variables, x)",
        body="@jax.jit\ndef forward(variables, x):\n{enter}return Model().apply(variables, x)  # ENTRY\n",
        jitted=True),
    # the model handed to what applies it: a call's argument (another module), a partial's
    # keyword (called in place)
    Hop("handed", call="variables = create_variables(Model(), jax.random.key(0), x{args})",
        body="def create_variables(model, key, x{params}):\n{enter}return model.init(key, x)  # ENTRY\n",
        module=f"{PKG}/steps.py"),
    Hop("handed_partial",
        call="variables = functools.partial(create_variables, model=Model())(jax.random.key(0), x{args})",
        body="def create_variables(key, x{params}, *, model):\n{enter}return model.init(key, x)  # ENTRY\n"),
    Hop("jitted_module", pre=_ABSTRACT,
        call="y = forward(variables, x)",
        body="@jax.jit\ndef forward(variables, x):\n{enter}return Model().apply(variables, x)  # ENTRY\n",
        module=f"{PKG}/steps.py", jitted=True),
]


# Meshes the file itself does not resolve: the value-flow layer says they are meshes.


def applies(enter: Enter, hop: Hop, mesh: MeshPiece | None = None) -> bool:
    """Whether the generator writes this combination.

    A context entered inside a jitted function would take the mesh and table as traced
    arguments: users close over them or enter them around the call, so those pairs are not
    written. One known gap is left out (reported with the issue, not fixed here): the
    ``self.mesh`` driver is a method, ``Trainer().run()``: a method called on an instance is
    no call edge, so a function the method calls has no known context (no finding), while the
    method's own code is judged by the constructor call's context.
    """
    if enter.inner and hop.jitted:
        return False
    if mesh is None or hop.inline:
        return True
    return mesh.kind not in ("self", "property")


# ---- the driver -----------------------------------------------------------------------------------
def _with(items: tuple[str, ...], mesh: str, rules: str) -> str:
    parts = [ITEMS[i].format(mesh=mesh, rules=rules) for i in items]
    mark = "  # WITH" if "legacy" in items else ""
    return f"with {', '.join(parts)}:{mark}"


def _imports_for(enter: Enter) -> str:
    out = ""
    if "axis_rules" in enter.items:
        out += "from flax.linen import partitioning as nn_partitioning\n"
    if "nnx_rules" in enter.items:
        out += "from flax import nnx\n"
    return out


def build(constraint: Constraint, mesh: MeshPiece, table: Table, enter: Enter,
          hop: Hop) -> Project:
    """One Linen project; its expected findings marked in its text."""
    project = Project(versions=dict(enter.versions))
    old = bool(enter.versions)
    project.add(f"{PKG}/__init__.py", "")
    project.add(f"{PKG}/model.py", constraint.model)
    if constraint.layers:
        project.add(f"{PKG}/layers.py", constraint.layers)
    for path, text in mesh.files + table.files:
        project.package(path)
        project.add(path, text)
    if mesh.config or table.config:
        project.add(f"{PKG}/config.py", _CONFIG)
    in_run = mesh.expr
    inner_items = enter.inner
    imports = ("import functools\n" if "functools" in hop.call else "") + (
        "import jax\nimport flax.linen as nn\n" + _imports_for(enter) + mesh.imports
               + table.imports + f"from {PKG}.model import Model\n")
    if mesh.config or table.config:
        imports += f"from {PKG}.config import Config\n"
    defs = [d for d in (mesh.defs, table.defs) if d]

    # The hop's function, with the inner contexts (if any) around the model's call.
    call = hop.call
    if not hop.inline:
        need_mesh = any(i in ("set_mesh", "use_mesh", "legacy") for i in inner_items)
        need_rules = any(i in ("rules", "axis_rules", "nnx_rules") for i in inner_items)
        params = (", mesh" if need_mesh else "") + (", rules" if need_rules else "")
        args = (f", {in_run}" if need_mesh else "") + (f", {table.expr}" if need_rules else "")
        enter_text = "    "
        if inner_items:
            enter_text = "    " + _with(inner_items, "mesh", "rules") + "\n        "
        fn = hop.body.format(params=params, enter=enter_text)
        call = call.format(args=args)
        if hop.module is None:
            defs.append(fn)
        else:
            project.package(hop.module)
            project.add(hop.module, "import jax\nimport flax.linen as nn\n" + _imports_for(enter)
                        + f"from {PKG}.model import Model\n\n\n" + fn)
            imports += f"from {hop.module[:-3].replace('/', '.')} import " \
                f"{'forward' if hop.jitted else 'create_variables'}\n"
        inner_items = ()

    # run(): set up the mesh and the table, enter, run the hop.
    body: list[str] = ["x = jax.numpy.ones((8, 4))"]
    if mesh.config or table.config:
        body.append("cfg = Config()")
    if mesh.kind == "local" and mesh.setup:
        body.append(mesh.setup)
    if hop.pre:
        body.append(hop.pre)
    body += [SETTERS[s].format(mesh=in_run, rules=table.expr) for s in enter.setters]
    depth = 0
    for items in (enter.outer, inner_items):
        if items:
            body.append("    " * depth + _with(items, in_run, table.expr))
            depth += 1
    body.append("    " * depth + call)
    body.append("return variables")

    if mesh.kind in ("self", "property"):
        prop = ("    @property\n    def mesh(self) -> Mesh:\n        return self._mesh\n\n"
                if mesh.kind == "property" else "")
        driver = ("class Trainer:\n    def __init__(self):\n        " + mesh.setup + "\n\n"
                  + prop + "    def run(self):\n" + "\n".join(_indent(body, 8)) + "\n\n\n"
                  'if __name__ == "__main__":\n    Trainer().run()\n')
    elif mesh.kind == "partial":
        driver = ("def run(*, mesh: Mesh):\n" + "\n".join(_indent(body, 4)) + "\n\n\n"
                  'if __name__ == "__main__":\n'
                  f"    functools.partial(run, mesh={mesh.setup})()\n")
    else:
        param = "mesh: Mesh" if mesh.kind == "param" else ""
        arg = mesh.setup if mesh.kind == "param" else ""
        driver = (f"def run({param}):\n" + "\n".join(_indent(body, 4)) + "\n\n\n"
                  f'if __name__ == "__main__":\n    run({arg})\n')
    project.add(f"{PKG}/train.py", imports + "\n\n" + "\n\n".join(defs) + "\n\n" + driver)
    _mark(project, constraint, enter, old)
    return project


def _mark(project: Project, constraint: Constraint, enter: Enter, old: bool) -> None:
    """Replace the holes with what the pieces say must be reported there."""
    legacy = "legacy" in enter.items
    # Before flax 0.12.2 a legacy `with mesh:` still defined Flax's mesh; jax honours it for a
    # raw `with_sharding_constraint` in every version.
    legacy_counts = old or not constraint.needs & RULES
    missing = constraint.needs & ~enter.provides(legacy_counts)
    at_entry = []
    if missing & RULES:
        at_entry.append("SHL102")
    if missing & MESH and not legacy:  # (a legacy `with mesh:` is SHL101's, once)
        at_entry.append("SHL103")
    at_with = []
    if legacy and not old:
        # an error where it silences a Flax constraint; otherwise only deprecated
        at_with.append("SHL101" if constraint.needs & RULES else "SHL101:warning")

    def fill(m: re.Match) -> str:
        codes = at_entry if m.group(1) == "ENTRY" else at_with
        return "  # " + " ".join(codes) if codes else ""

    for path, text in project.files.items():
        text = _HOLES.sub(fill, text)
        if old:  # `jax.make_mesh` made Auto axes before jax 0.9.0
            text = text.replace("  # SHL105", "")
        project.files[path] = text


def combinations():
    for constraint in CONSTRAINTS:
        for mesh in MESHES:
            for table in TABLES:
                for enter in ENTERS:
                    for hop in HOPS:
                        if applies(enter, hop):
                            yield constraint, mesh, table, enter, hop


# ---- bare specs (SHL104): where a PartitionSpec is read, how the mesh is entered around it -------
@dataclass(frozen=True)
class SpecSite:
    name: str
    text: str  # defines `shard(x)`; {spec} is the sharding, on the line marked `# SPEC`
    legacy_ok: bool = False  # a legacy `with mesh:` still provides the mesh (jax 0.10.2)


SPEC_SITES = [
    SpecSite("with_sharding_constraint",
             "def shard(x):\n    return jax.lax.with_sharding_constraint(x, {spec})  # SPEC\n",
             legacy_ok=True),
    SpecSite("device_put", "def shard(x):\n    return jax.device_put(x, {spec})  # SPEC\n"),
    SpecSite("jit_out_shardings",
             "def shard(x):\n    return jax.jit(lambda v: v * 2, out_shardings={spec})(x)  # SPEC\n"),
    SpecSite("jit_decorator",
             "@functools.partial(jax.jit, in_shardings={spec})  # SPEC\ndef shard(x):\n"
             "    return x * 2\n"),
]
# How the mesh is entered: around the hop's call in run(), or in main() around run().
SPEC_MESHES = {
    "set_mesh": ("with jax.set_mesh(MESH):", ""),
    "global_set_mesh": ("jax.set_mesh(MESH)", ""),
    "caller_set_mesh": ("", "with jax.set_mesh(MESH):"),
    "legacy": ("with MESH:", ""),
    "none": ("", ""),
}
# Where `shard` is defined and how run() reaches it.
SPEC_HOPS = ("same_module", "other_module", "jitted_step")
_SPEC = 'P("data", None)'
_SPEC_HEAD = ("import functools\n\nimport jax\nfrom jax.sharding import NamedSharding\n"
              "from jax.sharding import PartitionSpec as P\n")


def build_spec(site: SpecSite, mesh: str, hop: str, named: bool = False) -> Project:
    """A project whose ``run()`` reaches a bare ``PartitionSpec`` through ``hop``, with the mesh
    entered as ``mesh`` says; ``named``: the look-alike handing a ``NamedSharding``."""
    project = Project()
    project.add(f"{PKG}/__init__.py", "")
    # (the mesh is a module-level value made by a factory; a constant imported from another
    # module is one of the MESHES pieces)
    project.add(f"{PKG}/meshes.py", "import jax\nimport numpy as np\nfrom jax.sharding import Mesh\n\n\n"
                'def create_mesh():\n    return Mesh(np.array(jax.devices()), ("data",))\n')
    spec = f"NamedSharding(MESH, {_SPEC})" if named else _SPEC
    head = _SPEC_HEAD + f"from {PKG}.meshes import create_mesh\n\nMESH = create_mesh()\n"
    shard = site.text.format(spec=spec)
    inner, outer = SPEC_MESHES[mesh]
    if hop == "other_module":
        project.add(f"{PKG}/sharding.py", head + "\n\n" + shard)
        imports, defs = head + f"from {PKG}.sharding import shard\n", ""
    else:
        imports, defs = head, shard
    call = "y = shard(x)"
    if hop == "jitted_step":
        defs += "\n\n@jax.jit\ndef step(x):\n    return shard(x) * 2\n"
        call = "y = step(x)"
    body = ["def run(x):"]
    if inner.startswith("with"):
        body += [f"    {inner}", f"        {call}"]
    else:
        body += [f"    {inner}"] if inner else []
        body += [f"    {call}"]
    body.append("    return y")
    main = ["def main():", "    x = jax.numpy.ones((8, 4))"]
    main += [f"    {outer}", "        run(x)"] if outer else ["    run(x)"]
    project.add(f"{PKG}/train.py", imports + "\n\n" + defs + "\n\n" + "\n".join(body)
                + "\n\n\n" + "\n".join(main) + '\n\n\nif __name__ == "__main__":\n    main()\n')
    provided = mesh in ("set_mesh", "global_set_mesh", "caller_set_mesh") or \
        (mesh == "legacy" and site.legacy_ok)
    spec_mark = "" if named or provided else "  # SHL104"
    for path, text in project.files.items():
        text = text.replace("  # SPEC", spec_mark)
        if mesh == "legacy":  # only deprecated: nothing of Flax runs under it
            text = text.replace("with MESH:", "with MESH:  # SHL101:warning")
        project.files[path] = text
    return project


def spec_applies(site: SpecSite, mesh: str, hop: str) -> bool:
    """Every combination is written."""
    return True


def spec_combinations():
    for site in SPEC_SITES:
        for mesh in SPEC_MESHES:
            for hop in SPEC_HOPS:
                if spec_applies(site, mesh, hop):
                    yield site, mesh, hop
