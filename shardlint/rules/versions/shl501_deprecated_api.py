"""SHL501 deprecated-or-removed-api."""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from dataclasses import dataclass

from shardlint.rules.base import Edit, Fix, Rule, example, register
from shardlint.semantics.catalog import facts as releases
from shardlint.semantics.catalog.api import (
    APIS,
    KEYWORD_MOVES,
    MOVE_FIXES,
    SET_MESH_ADDED,
    MoveFix,
    Role,
)
from shardlint.semantics.catalog.versions import parse
from shardlint.semantics.file.facts import CallSite
from shardlint.semantics.file.moves import (
    MoveUse,
    api_moves,
    import_line,
    import_statement,
    spell,
    uses_of_name,
)
from shardlint.semantics.sharding.mesh_context import lexical_contexts
from shardlint.semantics.sharding.placement import bare_specs
from shardlint.source import Span


PJIT = "jax.experimental.pjit.pjit"
# pjit's sharding arguments: by keyword, or by position after the function.
_SHARDING_KEYWORDS = ("in_shardings", "out_shardings", "in_axis_resources", "out_axis_resources")
_FUN_KEYWORD = re.compile(rb"fun\s*=\s*")


@functools.cache
def jit_fun_positional_only_from() -> str | None:
    """The first jax release from which `jax.jit(fun=f)` raises: its ``fun`` is positional-only
    and nothing wraps it (jax 0.6's wrapper still took ``fun=``, with a DeprecationWarning).
    Read from the table of releases."""
    for v in releases.releases("jax"):
        sig = releases.signature("jax.jit", v)
        if sig is not None and sig.exact and "fun" in sig.positional_only():
            return v
    return None


@dataclass
class PjitCalls:
    """How a pjit use is called, for the advice and the edit that turn it into `jax.jit`."""

    fun_keyword: list[CallSite] = dataclasses.field(default_factory=list)  # calls given `fun=`
    bare: tuple[CallSite, ast.expr] | None = None  # a call given a bare PartitionSpec, the spec
    # A call under a legacy `with mesh:` (and no `jax.set_mesh`) whose shardings are not all
    # seen to be `NamedSharding`s or `None`: most likely bare PartitionSpecs that only the legacy
    # mesh resolves.
    legacy: CallSite | None = None


def moves_table() -> str:
    """The table of moves in the docs, from the catalogue (whose versions are read from the
    releases): one row per package, versions and replacement module."""
    rows: dict[tuple, list] = {}
    for a in APIS:
        if not (a.deprecated or a.removed) or a.package not in ("jax", "flax"):
            continue
        key = (a.package, a.deprecated or "", a.removed or "")
        rows.setdefault(key, []).append(a)
    out = ["| use | replacement | changed in |", "|---|---|---|"]

    def order(key: tuple) -> tuple:
        return (key[0] != "jax", parse(key[2] or key[1]), parse(key[1] or key[2]))

    for key in sorted(rows, key=order):
        package, deprecated, removed = key
        apis = rows[key]
        uses = ", ".join(f"`{a.name}`" for a in apis)
        instead = ", ".join(dict.fromkeys(f"`{a.replacement}`" for a in apis if a.replacement))
        when = ", ".join(x for x in (f"deprecated {package} {deprecated}" if deprecated else "",
                                     f"removed {package} {removed}" if removed else "") if x)
        out.append(f"| {uses} | {instead or '(none)'} | {when} |")
    for m in KEYWORD_MOVES:
        owners = ", ".join(f"`{o}`" for o in m.owners)
        use = f"`{m.keyword}=` of {owners}" if m.call_keyword else \
            f"`.{m.keyword}` of {owners} instances"
        out.append(f"| {use} | `{m.replacement}` | deprecated {m.owners[0].split('.')[0]} "
                   f"{m.deprecated} |")
    return "\n".join(out)


@register
class DeprecatedApi(Rule):
    code = "SHL501"
    name = "deprecated-or-removed-api"
    severity = "warning"
    summary = "A sharding or tree API that moved or was removed in the project's jax/flax."
    what = """
Reports each use of an API that moved, judged against the jax and flax versions the project
runs on: one finding per use, naming the replacement and the version the move happened in. The
moves live in one data table (`shardlint/semantics/catalog/api.py`, read through
`shardlint/semantics/file/moves.py`):

{MOVES_TABLE}

Uses are attribute chains under any import alias (`import jax as j; j.tree_map`) and
`from ... import` lines. Not reported: a project-local function that happens to share a name
(`tree_map = ...`), `nnx.with_partitioning(init, sharding=...)` (there `sharding` is the current
argument name), any API the project's versions still provide unchanged, and compatibility code:
the branches of an `if` that tests `jax.__version__`/`__version_info__` (and the rest of the
block after a branch that always leaves), the body of a `try` whose handler catches
`ImportError` or `AttributeError` and that handler itself, the body of `if hasattr(jax..., "x")`
for the API `x` itself, and the code that runs where a `hasattr` (or `getattr(..., None)`) found
a jax or flax name missing: its `else`, `if not hasattr(...)`, and the rest of the block after a
`hasattr` branch that always leaves. `with mesh:` and `jax.make_mesh` without `axis_types` are
behaviour changes with rules of their own (SHL101, SHL105).
"""
    what = what.replace("{MOVES_TABLE}", moves_table())
    why = """
A removed API fails with `AttributeError` or `ImportError` only when the line runs -- often after
a long model build, or on the cluster: `jax.tree_map` raises `AttributeError` on jax >= 0.6.0,
and so does `jax.sharding.use_mesh` on jax >= 0.7.1. A deprecated one emits a
`DeprecationWarning` (`pjit`, `shard_map` on jax >= 0.8.0; `'sharding' is deprecated, use
'out_sharding' instead.` on flax >= 0.12.6) and fails on a later upgrade.
"""
    use_instead = """
```python
params = jax.tree.map(lambda p: p * 0.5, params)      # not jax.tree_map
with jax.set_mesh(mesh):                               # not jax.sharding.use_mesh(mesh)
    step = jax.jit(train_step, in_shardings=..., out_shardings=...)   # not pjit
w = nnx.Param(init(key, shape), out_sharding=("embed", "mlp"))        # not sharding=
```
"""
    fix_safety = """
Safe for pure renames -- same arguments, same behaviour: the `jax.tree_*` functions,
`jax.sharding.use_mesh` -> `jax.set_mesh`, `jax.experimental.shard` -> `jax.sharding`
(`reshard`), and the `sharding=`/`sharding_names=` keywords -> `out_sharding=` (flax remaps them
to exactly that). The edit uses the file's own import alias (`j.tree.map`) and adds `import jax`
when nothing in the file names the replacement's package; a `from ... import` line is rewritten
to import the replacement under the same local name, so the rest of the file is untouched.

Unsafe where the replacement takes other arguments or behaves differently, and only when every
use visibly fits: `pjit` -> `jax.jit` (shardings by keyword only; a `fun=` is moved to the first
argument, since `jax.jit` takes the function only by position from jax 0.7.0 -- `jax.jit(fun=f)`
raises `TypeError` -- and by position in every release), `shard_map` -> `jax.shard_map` (only the
function by position, no `check_rep`/`auto`), `nnx.with_sharding_constraint` ->
`jax.lax.with_sharding_constraint` (no `mesh=`; it raises without a mesh), reads of
`.sharding_names` (the object may not be an NNX Variable). Where a `pjit` is given bare
`PartitionSpec`s, or runs under a legacy `with mesh:` with shardings not seen to be
`NamedSharding`s or `None`, the edit is display-only and the message says so: pjit resolves bare
specs against the legacy `with mesh:`, `jax.jit` only against `jax.set_mesh(mesh)` and raises
without it, so the call needs that context (or `NamedSharding`s) first; where the pins allow a
jax without `jax.set_mesh` (before 0.7.1) the advice is `NamedSharding`s alone, and where they
allow a `jax.jit` that takes no shardings (before 0.4.4: only pjit did) it is to move once the
project requires that release, and the edit is display-only. Otherwise the edit is display-only,
and moves with no mechanical replacement (`xmap`, `device_put_replicated`, `PmapSharding`) have
no edit.

A replacement is advised and written only where it exists in every release from the oldest the
project's pins allow to the one judged (read from the table of releases). Where it does not --
`jax.tree.flatten` came in jax 0.4.25, and `jax==0.4.20` or `jax>=0.4.20` allows older -- the
advice and the edit are the spelling the release's own deprecation message names and every
release of the range has (`jax.tree_util.tree_flatten`): safe where its signature is the old
name's in each of those releases, else unsafe. Where no spelling exists in all of them, there is
no edit, and the message says which version the replacement needs.
"""
    versions = """
Each use is reported from the version in which its API was deprecated (a warning) or removed
(an error), for the jax/flax versions shardlint detects for the project (environment, project
venv, pins, or `[tool.shardlint] jax-version`/`flax-version`), narrowed to the releases the
file's module-level imports exist in: a file that imports `flax.optim` (flax 0.5.3 at most) runs
at jax 0.4.23 at most, the newest any of those flax releases imports with, where `jax.tree_map`
still works and `jax.tree.map` does not exist yet. An import of an API this rule reports as moved
(`from jax.experimental import maps`) narrows nothing: the file is told to migrate it, and the
rest is judged as it will run once it has.
"""
    VALID = [
        example("""
            import jax
            from flax import optim

            def step(params, grads):
                # flax.optim runs at jax <= 0.4.23, where jax.tree_map is no deprecation
                return jax.tree_map(lambda p, g: p - g, params, grads)
        """, title="a file on `flax.optim` runs at jax 0.4.23 at most",
            jax="0.3.0..0.12.0.1", flax="0.3.0..0.12.12"),
        example("""
            import jax
            from jax import linear_util as lu  # (gone after jax 0.4.23)

            def step(params, grads):
                return jax.tree_map(lambda p, g: p - g, params, grads)
        """, title="a file that imports `jax.linear_util` runs at jax 0.4.23 at most",
            jax="0.3.0..0.12.0.1"),
        example("""
            import jax

            # a compatibility shim: each jax gets the spelling it has
            if hasattr(jax.sharding, "use_mesh"):
                set_mesh = jax.sharding.use_mesh
            else:
                set_mesh = jax.set_mesh

            try:
                from jax.experimental.shard_map import shard_map
            except ImportError:
                from jax import shard_map
        """, title="used only where this jax has it: hasattr and try/except ImportError"),
        example("""
            import jax

            if jax.__version_info__ >= (0, 6, 3):
                from jax.experimental.layout import Layout as DLL
            else:
                from jax.experimental.layout import DeviceLocalLayout as DLL
        """, title="compatibility code gated by the jax version"),
        example("""
            import jax

            try:
                from jax.sharding import PositionalSharding
            except ImportError:
                PositionalSharding = None
        """, title="an import guarded by ImportError"),
        example("""
            import jax
            params = jax.tree.map(lambda p: p * 2, {"w": 1.0})
            leaves = jax.tree_util.tree_leaves(params)
        """, title="the current spellings"),
        example("""
            import jax
            from jax.sharding import Mesh
            mesh = Mesh(jax.devices(), ("data",))
            with jax.set_mesh(mesh):
                y = jax.sharding.reshard(jax.numpy.ones(8), jax.P("data"))
        """, title="jax.set_mesh and jax.sharding.reshard"),
        example("""
            import jax
            # Before jax 0.4.26 `jax.tree_map` was the current spelling.
            leaves = jax.tree_map(lambda p: p, {"w": 1.0})
        """, title="pinned to an old jax", jax="0.4.20"),
        example("""
            import jax
            leaves, treedef = jax.tree_util.tree_flatten({"w": 1.0})
        """, title="jax 0.4.20 to 0.6.2: `jax.tree_util` is current in all of them",
            jax="0.4.20..0.6.2"),
        example("""
            import numpy as np
            import jax
            tree_map = lambda f, x: f(x)  # a local helper, not jax's
            y = tree_map(np.sqrt, 4.0)
        """, title="a local name that looks like a removed one"),
        example("""
            import jax
            from flax import nnx

            class Block(nnx.Module):
                def __init__(self, rngs: nnx.Rngs):
                    init = nnx.with_partitioning(nnx.initializers.lecun_normal(), sharding=("embed", "mlp"))
                    self.w = nnx.Param(init(rngs.params(), (512, 2048)))
                    self.b = nnx.Param(jax.numpy.zeros(2048), out_sharding=("mlp",))
        """, title="`sharding=` of nnx.with_partitioning is its current argument; out_sharding= is current"),
        example("""
            from flax import nnx
            import jax.numpy as jnp
            w = nnx.Param(jnp.zeros((4, 4)), sharding_names=("embed", "mlp"))
        """, title="flax 0.12.3 still takes sharding_names silently", flax="0.12.3"),
        example("""
            import numpy as np
            import jax
            from jax.sharding import Mesh, PartitionSpec

            grid = Mesh(np.asarray(jax.devices()).reshape(-1, 1), ("rows", "cols"))
            with jax.set_mesh(grid):  # jax.jit resolves bare specs against this mesh
                halve = jax.jit(lambda t: t / 2, in_shardings=PartitionSpec("rows"),
                                out_shardings=PartitionSpec("rows"))
                print(halve(np.ones((8, 2))))
        """, title="after the move: the function by position, bare specs under `jax.set_mesh`"),
        example("""
            import jax

            def pjit(fun, in_shardings=None, out_shardings=None):
                # the project's own wrapper, which happens to share the name
                return jax.jit(fun, in_shardings=in_shardings, out_shardings=out_shardings)

            square = pjit(fun=lambda v: v * v)
        """, title="a local `pjit` that takes `fun=`: not jax's"),
        example("""
            import numpy as np
            import jax
            from jax.experimental.pjit import pjit
            from jax.sharding import Mesh, PartitionSpec

            grid = Mesh(np.asarray(jax.devices()), ("rows",))
            with grid:
                halve = pjit(fun=lambda t: t / 2, in_shardings=PartitionSpec("rows"),
                             out_shardings=PartitionSpec("rows"))
        """, title="pjit with `fun=` and bare specs under `with mesh:`, on a jax where it is "
                   "current", jax="0.5.3"),
        example("""
            import jax

            if hasattr(jax, "tree"):
                tree_map = jax.tree.map
            else:
                tree_map = jax.tree_map  # only where `jax.tree` is missing: before jax 0.4.25

            def leaves_of(tree):
                if not hasattr(jax, "tree"):
                    return jax.tree_leaves(tree)
                return jax.tree.leaves(tree)

            def flatten(tree):
                if hasattr(jax, "tree"):
                    return jax.tree.flatten(tree)
                return jax.tree_flatten(tree)  # the rest of the block, after the branch leaves
        """, title="`hasattr` guards: the old spelling runs only where the new one is missing"),
        example("""
            try:
                from jax import shard_map
            except ImportError:  # a jax without `jax.shard_map`: the experimental one is current
                from jax.experimental.shard_map import shard_map
        """, title="the old import in the handler for where the new one fails"),
    ]
    INVALID = [
        example("""
            import jax

            def to_host(batch):
                try:
                    batch = jax.tree_map(lambda x: x.copy_to_host_async(), batch)  # expect: SHL501
                except AttributeError:
                    pass  # (meant for arrays without the method: it also hides the removal)
                return batch
        """, title="under `except AttributeError: pass`, which swallows the removal, no fallback"),
        example("""
            import jax

            def place(tree, mesh):
                if hasattr(jax, "set_mesh"):  # tests another name: this branch runs on new jax
                    with jax.set_mesh(mesh):
                        return jax.tree_map(jax.numpy.asarray, tree)  # expect: SHL501
                return tree
        """, title="under a `hasattr` of another name, on the releases that have it"),
        example("""
            import jax
            import numpy as np
            from jax.sharding import PositionalSharding  # expect: SHL501

            sharding = PositionalSharding(np.array(jax.devices()))
        """, title="PositionalSharding was removed in jax 0.7.0: the import itself fails"),
        example("""
            import jax
            import jax.experimental.maps  # expect: SHL501

            out = jax.experimental.maps.xmap(lambda x: x, in_axes=["i"], out_axes=["i"])  # expect: SHL501
        """, title="a removed module: at the import line and at the use"),
        example("""
            import jax
            params = jax.tree_map(lambda p: p * 2, {"w": 1.0})  # expect: SHL501
        """, title="removed in jax 0.6.0"),
        example("""
            from jax.experimental.pjit import pjit  # expect: SHL501
            step = pjit(lambda x: x * 2)
        """, title="pjit: deprecated in jax 0.8.0"),
        example("""
            import jax
            from jax.experimental.pjit import pjit  # expect: SHL501
            from jax.sharding import Mesh, NamedSharding, PartitionSpec

            grid = Mesh(jax.devices(), ("rows",))
            by_row = NamedSharding(grid, PartitionSpec("rows"))
            # as `jax.jit(fun=...)` this raises TypeError: the fix passes the function first
            normalise = pjit(in_shardings=by_row, out_shardings=by_row,
                             fun=lambda v: v / v.sum())
        """, title="pjit given `fun=` by keyword: `jax.jit` takes it only by position (0.7.0)"),
        example("""
            import numpy as np
            import jax
            from jax.experimental import pjit as pjit_lib
            from jax.sharding import Mesh, PartitionSpec

            grid = Mesh(np.asarray(jax.devices()).reshape(-1, 1), ("rows", "cols"))
            with grid:  # the legacy context, which pjit reads and jax.jit does not
                halve = pjit_lib.pjit(lambda t: t / 2, in_shardings=PartitionSpec("rows"),  # expect: SHL501
                                      out_shardings=PartitionSpec("rows"))
                print(halve(np.ones((8, 2))))
        """, title="pjit given bare specs under `with mesh:`: no edit, the message names "
                   "`jax.set_mesh`"),
        example("""
            from jax.experimental import pjit
            from jax.sharding import Mesh

            def place(tree, devices, layout):
                with Mesh(devices, ("model",)):  # `layout` comes from the caller
                    return pjit.pjit(fun=lambda t: t, out_shardings=layout)(tree)  # expect: SHL501
        """, title="pjit with `fun=` under `with mesh:`, shardings unseen: no edit, the message "
                   "names both"),
        example("""
            import jax as j
            mesh = j.make_mesh((4,), ("data",))
            with j.sharding.use_mesh(mesh):  # expect: SHL501
                pass
        """, title="an import alias"),
        example("""
            from flax import nnx
            y = nnx.with_sharding_constraint(x, spec)  # expect: SHL501
        """),
        example("""
            import jax
            xs = jax.device_put_replicated(x, jax.devices())  # expect: SHL501
        """),
        example("""
            from jax.experimental.shard import reshard  # expect: SHL501
            from jax.experimental.maps import xmap  # expect: SHL501
        """, title="modules removed in jax 0.4.31 and 0.7.0"),
        example("""
            from flax import nnx
            import jax.numpy as jnp

            class Block(nnx.Module):
                def __init__(self):
                    self.w = nnx.Param(jnp.zeros((512, 2048)), sharding=("embed", "mlp"))  # expect: SHL501
                    self.b = nnx.Variable(jnp.zeros(2048), sharding_names=("mlp",))  # expect: SHL501
                    print(self.b.sharding_names)  # expect: SHL501
        """, title="NNX sharding metadata renamed: the keywords warn from flax 0.12.6"),
        example("""
            import jax
            from jax import tree_leaves, numpy as jnp  # expect: SHL501
            n = len(tree_leaves({"w": jnp.ones(3)}))
        """, title="one name of a multi-name import"),
        example("""
            import jax
            leaves, treedef = jax.tree_flatten({"w": 1.0})  # expect: SHL501
        """, title="pinned to jax 0.4.20, before `jax.tree` (0.4.25): `jax.tree_util.tree_flatten`",
            jax="0.4.20"),
        example("""
            import jax
            from jax import tree_leaves  # expect: SHL501
            leaves, treedef = jax.tree_flatten({"w": 1.0})  # expect: SHL501
            n = len(tree_leaves(leaves))
        """, title="pins that allow jax 0.4.20 to 0.6.2: `jax.tree_util`, which all of them have",
            jax="0.4.20..0.6.2"),
        example("""
            import jax
            leaves, treedef = jax.tree_flatten({"w": 1.0})  # expect: SHL501
        """, title="pins that require jax >= 0.4.25: `jax.tree.flatten`", jax="0.4.25..0.5.3"),
    ]

    @classmethod
    def relevant(cls, facts, project) -> bool:
        return bool(facts.references) or facts.uses_flax

    def check(self):
        text = self.ctx.source.text
        reads = any(m.attribute and f".{m.keyword}" in text for m in KEYWORD_MOVES)
        # (compatibility code, the old spelling where only the releases that have it run it,
        # is left out by api_moves: semantics/file/moves.py)
        uses = api_moves(self.facts, self.ctx.versions, attribute_reads=reads)
        for use in uses:
            pjit = self._pjit_calls(use) if use.old == PJIT and use.new else None
            yield self.finding(use.node, self._message(use, pjit),
                               severity="error" if use.removed else "warning",
                               fix=self._fix(use, pjit), tags=("deprecated",))

    # ---- messages --------------------------------------------------------------------------------
    def _message(self, use: MoveUse, pjit: PjitCalls | None = None) -> str:
        if use.kind == "keyword":
            owner = self.text(use.call.func) if use.call is not None else "the call"
            return (f"`{use.old}=` of `{owner}` is deprecated since {use.package} {use.version} "
                    f"(`DeprecationWarning`); pass `{use.new}=`")
        if use.kind == "attribute-read":
            return (f"`.{use.old}` is deprecated since {use.package} {use.version} "
                    f"(`DeprecationWarning`); read `.{use.new}`")
        instead = f"; use `{use.new}`" if use.new else ""
        if use.wanted:
            instead = self._instead(use)
        note = f" ({use.note})" if use.note else ""
        if pjit is not None:
            note = f" ({self._pjit_note(use, pjit)})"
            since = self._jit_without_shardings(use)
            if since is not None:
                versions = use.versions or self.ctx.versions
                instead = (f"; use `{use.new}` once the project requires jax >= {since} "
                           f"(`jax.jit` takes no `in_shardings`/`out_shardings` before it, and "
                           f"{versions.allowed_by('jax')} allow jax {versions.oldest('jax')})")
        if use.removed:
            when = f"was removed in {use.package} {use.version}"
            return (f"`{use.old}` {when} (judged for "
                    f"{(use.versions or self.ctx.versions).describe(use.package)}){instead}{note}")
        return f"`{use.old}` is deprecated since {use.package} {use.version}{instead}{note}"

    def _instead(self, use: MoveUse) -> str:
        """The advice where the catalogue's replacement is missing from a release the project
        may run: the stand-in that exists in all of them, or the condition for the replacement."""
        package = (use.wanted or "").split(".", 1)[0]
        versions = use.versions or self.ctx.versions
        judged = versions.jax if package == "jax" else versions.flax
        if use.needs is None:
            why = f"`{use.wanted}` is missing from {package} {judged}"
        elif versions.below(package, use.needs):
            why = f"`{use.wanted}` needs {package} >= {use.needs}; judged for " \
                  f"{versions.describe(package)}"
        else:
            why = f"`{use.wanted}` needs {package} >= {use.needs}, and " \
                  f"{versions.allowed_by(package)} allow {package} {versions.oldest(package)}"
        if use.new:
            return f"; use `{use.new}` ({why})"
        if use.needs is None:
            return f"; its replacement `{use.wanted}` is missing from the project's {package}"
        return (f"; use `{use.wanted}` once the project requires {package} >= {use.needs} "
                f"({why})")

    # ---- pjit -> jax.jit --------------------------------------------------------------------------
    def _pjit_calls(self, use: MoveUse) -> PjitCalls:
        """The calls of this pjit use: those whose `fun=` `jax.jit` rejects, and one given a bare
        PartitionSpec (which `jax.jit` resolves only against `jax.set_mesh`'s mesh)."""
        if use.kind == "import":
            assert isinstance(use.node, ast.alias)
            local = use.node.asname or use.node.name

            def names(ref: ast.AST | None) -> bool:
                return isinstance(ref, ast.Name) and ref.id == local
        else:
            def names(ref: ast.AST | None) -> bool:
                return ref is use.node
        sites = [c for c in self.facts.calls if names(c.node.func)]
        out = PjitCalls()
        for c in sites:
            if any(k.arg == "fun" for k in c.node.keywords):
                out.fun_keyword.append(c)
            values = [k.value for k in c.node.keywords if k.arg in _SHARDING_KEYWORDS] + \
                c.node.args[1:3]
            if out.bare is None:
                out.bare = self._bare_spec(c, values)
            if out.legacy is None and values and \
                    not all(self._seen_sharding(v, c.scope) for v in values) and \
                    any(self._legacy_only(node, c.scope) for node in self._runs(c)):
                out.legacy = c
        if out.bare is None:  # `partial(pjit, in_shardings=P(...))`, `@partial(pjit, ...)`
            for site in self.facts.jit_sites:
                if site.api_name == PJIT and site.form == "partial" and isinstance(
                        site.node, ast.Call):
                    inner = site.node.func if isinstance(site.node.func, ast.Call) else site.node
                    if inner.args and names(inner.args[0]):
                        call = self.facts.call_at(site.node)
                        if call is not None:
                            out.bare = self._bare_spec(call, [
                                v for k, v in site.keywords.items() if k in _SHARDING_KEYWORDS])
                if out.bare is not None:
                    break
        return out

    def _bare_spec(self, call: CallSite,
                   values: list[ast.expr]) -> tuple[CallSite, ast.expr] | None:
        for v in values:
            spec = bare_specs(self.facts, v, call.scope)
            if spec is not None:
                return call, spec
        return None

    def _runs(self, call: CallSite) -> list[ast.AST]:
        """Where a pjit call's function runs: the call itself (`pjit(f, ...)(x)`), and the calls,
        in the same function, of the name it is bound to (`step = pjit(...)`, then `step(x)`)."""
        out: list[ast.AST] = [call.node]
        stmt = call.stmt
        if isinstance(stmt, ast.Assign) and stmt.value is call.node and len(stmt.targets) == 1 \
                and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            out += [c.node for c in self.facts.calls if c.scope is call.scope
                    and isinstance(c.node.func, ast.Name) and c.node.func.id == name]
        return out

    def _legacy_only(self, node: ast.AST, scope) -> bool:
        """Under a legacy `with mesh:`, and no `jax.set_mesh`, in the same function."""
        return lexical_contexts(self.facts, node, scope, self.project) == {"legacy_mesh"}

    def _seen_sharding(self, node: ast.expr | None, scope, depth: int = 0) -> bool:
        """``node`` is seen to hold only `None`s and shardings (`NamedSharding(...)`,
        `x.sharding`), which `jax.jit` takes without a mesh in context."""
        if node is None or depth > 8:
            return False
        if isinstance(node, ast.Constant):
            return node.value is None
        if isinstance(node, ast.Name):
            value = self.facts.value_of(node.id, scope)
            return value is not None and self._seen_sharding(value, scope, depth + 1)
        if isinstance(node, ast.Attribute):
            return node.attr == "sharding"
        if isinstance(node, (ast.Tuple, ast.List)):
            return all(self._seen_sharding(e, scope, depth + 1) for e in node.elts)
        if isinstance(node, ast.Dict):
            return all(self._seen_sharding(v, scope, depth + 1) for v in node.values)
        if isinstance(node, ast.Call):
            known = self.facts.resolve(node.func) if isinstance(
                node.func, (ast.Name, ast.Attribute)) else None
            return known is not None and known.role == Role.NAMED_SHARDING
        return False

    def _where(self, use: MoveUse, sites: list[CallSite]) -> str:
        if use.kind != "import":
            return "in this call"
        lines = sorted({c.node.lineno for c in sites})
        if len(lines) == 1:
            return f"on line {lines[0]}"
        shown = ", ".join(str(n) for n in lines[:3]) + (" ..." if len(lines) > 3 else "")
        return f"on lines {shown}"

    def _pjit_note(self, use: MoveUse, pjit: PjitCalls) -> str:
        """The catalogue's note on pjit -> jax.jit, with what this use's calls need besides."""
        parts = []
        if pjit.fun_keyword:
            since = jit_fun_positional_only_from() or "0.7.0"
            parts.append(f"the function first, by position: `jax.jit(f, ...)`; `jax.jit` takes "
                         f"it only by position from jax {since}, and the `fun=` passed "
                         f"{self._where(use, pjit.fun_keyword)} raises `TypeError` there")
        none = ("a `None` sharding means unspecified, the compiler's choice: write "
                "`PartitionSpec()` where replication is meant")
        # (`jax.jit` resolves a bare PartitionSpec only against the mesh `jax.set_mesh` sets,
        # from jax 0.7.1; before, it raises for one whatever the context (0.4.x: "jax.jit only
        # supports `Sharding`s"). A `NamedSharding` carries its mesh: it needs no context.)
        versions = use.versions or self.ctx.versions
        old = versions.may_be_below("jax", SET_MESH_ADDED)
        set_mesh = (f"`jax.set_mesh(mesh)` around the call needs jax >= {SET_MESH_ADDED}, and "
                    f"{versions.allowed_by('jax')} allow jax {versions.oldest('jax')}")
        if pjit.bare is not None:
            call, spec = pjit.bare
            text = self.text(spec)
            shown = f" (`{text}`)" if len(text) <= 40 and "\n" not in text else ""
            needs = (f"shardings by keyword; the bare `PartitionSpec`s passed "
                     f"{self._where(use, [call])}{shown} need a mesh in context: pjit also takes "
                     f"the legacy `with mesh:`'s, `jax.jit` only the one `jax.set_mesh(mesh)` "
                     f"sets and raises without it: ")
            parts.append(
                needs + (f"pass `NamedSharding(mesh, spec)`s, which need no mesh in context "
                         f"({set_mesh}); and {none}" if old else
                         f"enter that around the call instead of `with mesh:`, or pass "
                         f"`NamedSharding(mesh, spec)`s; and {none}"))
        elif pjit.legacy is not None:
            subject = "this pjit" if use.kind != "import" else \
                f"the pjit on line {pjit.legacy.node.lineno}"
            legacy = (f"shardings by keyword; {subject} runs under a legacy `with mesh:`, which "
                      f"pjit reads and `jax.jit` does not: if its shardings are bare "
                      f"`PartitionSpec`s, as `jax.jit` it raises ")
            parts.append(
                legacy + (f"-- pass `NamedSharding(mesh, spec)`s, which need no mesh in "
                          f"context ({set_mesh}); and {none}" if old else
                          f"unless `jax.set_mesh(mesh)` is around the call -- enter that instead "
                          f"of `with mesh:`, or pass `NamedSharding(mesh, spec)`s; and {none}"))
        elif old:
            parts.append(f"shardings by keyword (`in_shardings`/`out_shardings`); bare "
                         f"`PartitionSpec`s then need a mesh set by `jax.set_mesh`, which needs "
                         f"jax >= {SET_MESH_ADDED}, and {versions.allowed_by('jax')} allow jax "
                         f"{versions.oldest('jax')}: pass `NamedSharding(mesh, spec)`s, which "
                         f"need no mesh in context; and {none}")
        else:
            parts.append(use.note)
        return "; ".join(parts)

    def _jit_without_shardings(self, use: MoveUse) -> str | None:
        """The release `jax.jit` takes shardings from, where the project may run an older one
        (a pjit there cannot become `jax.jit` yet); else None."""
        since = releases.first_accepting("jax.jit", "in_shardings")  # (0.4.4: only pjit before)
        versions = use.versions or self.ctx.versions
        return since if since is not None and versions.may_be_below("jax", since) else None

    def _pjit_fix(self, pjit: PjitCalls | None, applicability: str,
                  edits: list[Edit]) -> tuple[str, bool]:
        """Adds to ``edits`` the move of each `fun=` to the first argument; returns the
        applicability (display-only where a bare PartitionSpec makes `jax.jit` raise under a
        legacy mesh, or where a `fun=` cannot be moved) and whether a function was moved."""
        if pjit is None:
            return applicability, False
        moved = False
        for call in pjit.fun_keyword:
            more = self._fun_edits(call.node)
            if more is None:
                applicability = "display-only"
                continue
            edits.extend(more)
            moved = True
        if pjit.bare is not None or pjit.legacy is not None:
            applicability = "display-only"
        return applicability, moved

    def _fun_edits(self, call: ast.Call) -> list[Edit] | None:
        """``pjit(in_shardings=s, fun=f)`` -> ``jit(f, in_shardings=s)``: `jax.jit`'s function is
        positional-only (jax >= 0.7.0), and positional in every release."""
        kw = next(k for k in call.keywords if k.arg == "fun")
        if call.args or any(k.arg is None for k in call.keywords):
            return None  # (the function given twice, or `**kw`: not mechanical)
        raw = self.ctx.source.line_text(kw.lineno).encode("utf-8")
        m = _FUN_KEYWORD.match(raw, kw.col_offset)
        if m is None or kw.end_lineno is None or kw.end_col_offset is None:
            return None
        i = call.keywords.index(kw)
        if i == 0:
            return [Edit(Span(kw.lineno, kw.col_offset, kw.lineno, m.end()), "")]
        value = self.ctx.source.segment(Span(kw.lineno, m.end(), kw.end_lineno,
                                             kw.end_col_offset))
        first = call.keywords[0]
        insert = Edit(Span(first.lineno, first.col_offset, first.lineno, first.col_offset),
                      value + ", ")
        if i + 1 < len(call.keywords):
            nxt = call.keywords[i + 1]
            cut = Span(kw.lineno, kw.col_offset, nxt.lineno, nxt.col_offset)
            if nxt.lineno != kw.end_lineno:  # cut `fun=f,`; keep a comment after it
                end = self.ctx.source.line_text(kw.end_lineno).encode("utf-8")
                tail = re.match(rb"\s*,\s*", end[kw.end_col_offset:])
                rest = kw.end_col_offset + (tail.end() if tail else 0)
                if not raw[:kw.col_offset].strip() and not end[rest:].strip():
                    cut = Span(kw.lineno, 0, kw.end_lineno + 1, 0)  # the whole line(s)
                else:
                    cut = Span(kw.lineno, kw.col_offset, kw.end_lineno, rest)
        else:
            prev = call.keywords[i - 1]
            cut = Span(prev.end_lineno or prev.lineno, prev.end_col_offset or 0,
                       kw.end_lineno, kw.end_col_offset)
        return [insert, Edit(cut, "")]

    # ---- fixes -----------------------------------------------------------------------------------
    def _fix(self, use: MoveUse, pjit: PjitCalls | None = None) -> Fix | None:
        if use.kind == "keyword":
            return self._keyword_fix(use)
        if use.kind == "attribute-read":
            node = use.node
            assert isinstance(node, ast.Attribute)
            line, end = node.end_lineno or node.lineno, node.end_col_offset or 0
            return Fix(f"Read `.{use.new}`", "unsafe",
                       (Edit(Span(line, end - len(node.attr), line, end), use.new or ""),))
        policy = MOVE_FIXES.get(use.old)
        if policy is None or not use.new:
            return None
        if use.kind == "import":
            return self._import_fix(use, policy, pjit)
        return self._attribute_fix(use, policy, pjit)

    def _keyword_fix(self, use: MoveUse) -> Fix | None:
        kw = use.node
        assert isinstance(kw, ast.keyword) and use.call is not None
        if any(k.arg == use.new for k in use.call.keywords):
            return None  # both given: which one wins is for the author to decide
        line, col = kw.lineno, kw.col_offset
        return Fix(f"Rename `{use.old}=` to `{use.new}=`", "safe",
                   (Edit(Span(line, col, line, col + len(use.old)), use.new or ""),))

    def _attribute_fix(self, use: MoveUse, policy: MoveFix,
                       pjit: PjitCalls | None = None) -> Fix | None:
        spelled = spell(self.facts, use.new or "", use.scope)
        if spelled is None:
            return None
        edits = [Edit(self.span(use.node), spelled.text)]
        if spelled.add_import is not None:
            line = import_line(self.facts)
            if line is None:
                return None
            edits.append(Edit(Span(line, 0, line, 0), spelled.add_import + "\n"))
        call = next((c.node for c in self.facts.calls if c.node.func is use.node), None)
        applicability = self._applicability(policy, [call] if call is not None else None,
                                            use.same)
        applicability, moved = self._pjit_fix(pjit, applicability, edits)
        if pjit is not None and self._jit_without_shardings(use) is not None:
            applicability = "display-only"  # (`jax.jit` there takes no shardings)
        return self._make(use, policy, applicability, spelled.text, edits, moved)

    def _import_fix(self, use: MoveUse, policy: MoveFix,
                    pjit: PjitCalls | None = None) -> Fix | None:
        alias = use.node
        assert isinstance(alias, ast.alias)
        stmt = import_statement(self.facts, alias)
        if stmt is None or stmt.level:
            return None
        local = alias.asname or alias.name
        module, _, name = (use.new or "").rpartition(".")
        if not module:
            return None
        new_import = f"from {module} import {name}" + (f" as {local}" if name != local else "")
        edits = self._replace_alias(stmt, alias, new_import)
        if edits is None:
            return None
        calls = self._calls_of_name(local)
        applicability = self._applicability(policy, calls, use.same)
        applicability, moved = self._pjit_fix(pjit, applicability, edits)
        if pjit is not None and self._jit_without_shardings(use) is not None:
            applicability = "display-only"  # (`jax.jit` there takes no shardings)
        return self._make(use, policy, applicability, new_import, edits, moved)

    def _make(self, use: MoveUse, policy: MoveFix, applicability: str, text: str,
              edits: list[Edit], moved: bool = False) -> Fix:
        description = f"Use `{text}`"
        if moved:
            description += " and pass the function first"
        if applicability != "safe" and use.wanted and not use.same:
            description += (f" (check: it stands in for `{use.wanted}`, missing from a release the "
                            f"project may run, and the releases do not show it takes the same "
                            f"arguments as `{use.old}`)")
        elif applicability != "safe" and policy.why:
            description += f" (check: {policy.why})"
        return Fix(description, applicability, tuple(edits))

    def _applicability(self, policy: MoveFix, calls: list[ast.Call] | None,
                       same: bool = True) -> str:
        """``same``: the replacement written is the same thing as the old name at every release
        the project may run (False: a stand-in the releases do not show to be; never safe)."""
        if policy.kind == "rename":
            return "safe" if same else "unsafe"
        if calls is None:
            return "display-only"  # used other than by calling it: the arguments are not visible
        for call in calls:
            positional = len(call.args)
            if any(isinstance(a, ast.Starred) for a in call.args) or \
                    any(k.arg is None for k in call.keywords):
                return "display-only"
            if policy.max_positional is not None and positional > policy.max_positional:
                return "display-only"
            if any(k.arg in policy.dropped for k in call.keywords):
                return "display-only"
        return "unsafe"

    def _calls_of_name(self, name: str) -> list[ast.Call] | None:
        """The calls of an imported name, when every use of it is a call or a bare decorator
        (`@pjit` passes only the function); None when it is also used some other way."""
        calls = {id(c.node.func): c.node for c in self.facts.calls
                 if isinstance(c.node.func, ast.Name) and c.node.func.id == name}
        decorators = {id(d) for s in self.facts.function_scopes() for d in s.decorators
                      if isinstance(d, ast.Name) and d.id == name}
        for n in uses_of_name(self.facts, name):
            if id(n) not in calls and id(n) not in decorators:
                return None
        return list(calls.values())

    def _replace_alias(self, stmt: ast.ImportFrom, alias: ast.alias,
                       new_import: str) -> list[Edit] | None:
        """Edits that import the replacement instead of ``alias`` and leave the statement's
        other names as they are."""
        indent = self.ctx.source.line_text(stmt.lineno).encode("utf-8")[: stmt.col_offset]
        if indent.strip():
            return None  # `if x: from a import b` -- not on a line of its own
        whole = self.span(stmt)
        if len(stmt.names) == 1:
            return [Edit(whole, new_import)]
        rest = [a for a in stmt.names if a is not alias]
        after = f"\n{indent.decode('utf-8')}{new_import}"
        if stmt.lineno == stmt.end_lineno:
            names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in rest)
            return [Edit(whole, f"from {stmt.module} import {names}{after}")]
        # A statement over several lines: cut the name out, keep the rest and its comments.
        cut = self._alias_cut(stmt, alias)
        end = Span(whole.end_line, whole.end_col, whole.end_line, whole.end_col)
        return [Edit(cut, ""), Edit(end, after)]

    def _alias_cut(self, stmt: ast.ImportFrom, alias: ast.alias) -> Span:
        i = stmt.names.index(alias)
        line, col = alias.lineno, alias.col_offset
        end_line, end_col = alias.end_lineno or line, alias.end_col_offset or col
        nxt = stmt.names[i + 1] if i + 1 < len(stmt.names) else None
        if nxt is None:
            prev = stmt.names[i - 1]  # the last name: take the comma before it
            return Span(prev.end_lineno or prev.lineno, prev.end_col_offset or 0, end_line, end_col)
        if nxt.lineno == end_line:
            return Span(line, col, nxt.lineno, nxt.col_offset)
        # The name ends its line: cut it with its comma, leave a comment after it in place.
        raw = self.ctx.source.line_text(end_line).encode("utf-8")
        tail = raw[end_col:]
        stripped = tail.lstrip()
        if stripped.startswith(b","):
            stripped = stripped[1:].lstrip()
        if not stripped:  # nothing else on the line: drop the whole line
            start_col = 0 if not raw[:col].strip() else col
            if start_col == 0 and line == end_line:
                return Span(line, 0, line + 1, 0)
            return Span(line, col, end_line, len(raw))
        return Span(line, col, end_line, len(raw) - len(stripped))


