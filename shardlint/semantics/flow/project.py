"""Facts that cross files: which symbols apply constraints and under which contexts they run.

Built from one :class:`ModuleSummary` per Python file of the project root (not just the files
being linted), so a constraint in ``model.py`` is judged by how ``train.py`` runs it.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from shardlint.semantics.catalog.api import LINEN_MODULE, NNX_MODULE
from shardlint.semantics.file.facts import ALL, MESH, MESH_SET, RULES, CallSite, FileFacts
from shardlint.semantics.file.reuse import each_call
from shardlint.semantics.flow.summary import HANDED, Entry, ModuleSummary, Site
from shardlint.semantics.flow.valueflow import FlowIndex


# A test, a benchmark or an example is a program of its own: the rules tables and meshes it
# writes judge that program, not the library it exercises (a layer library's tests map only the
# names they use; an example's config is that example's).
# (documentation and tutorial folders hold example programs too: TransformerEngine's
# `docs/features/.../autocast_jax.py`, a one-device demo of a library that builds meshes)
_OWN_PROGRAM_FOLDERS = frozenset({"tests", "test", "testing", "benchmarks", "benchmark", "bench",
                                  "examples", "example", "docs", "doc", "tutorials", "tutorial",
                                  "demos", "demo"})


def _reached(starts: set[str], edges: dict[str, list[str]]) -> set[str]:
    """``starts`` and every module their ``edges`` lead to, transitively."""
    seen, todo = set(starts), list(starts)
    while todo:
        for i in edges.get(todo.pop(), ()):
            if i not in seen:
                seen.add(i)
                todo.append(i)
    return seen


def own_program(module: str) -> bool:
    """Whether a module (dotted, from the project root) is a test, a benchmark or an example by
    the usual conventions: under ``tests/``, ``benchmarks/``, ``examples/``, ``docs/`` ..., or named
    ``test_*``, ``*_test``, ``conftest``, ``bench_*``, ``*_benchmark(s)``, ``benchmark_*``."""
    return program_of(module) != ""


@functools.lru_cache(maxsize=65536)
def program_of(module: str) -> str:
    """The program a module belongs to: ``""`` for the library or application itself, else
    the test, benchmark or example it is part of (``examples.lm1b`` for every module of
    ``examples/lm1b/``; a test file of its own)."""
    parts = module.split(".")
    for i, p in enumerate(parts[:-1]):
        if p in _OWN_PROGRAM_FOLDERS:
            return ".".join(parts[:i + 2])
    last = parts[-1]
    if last == "conftest" or last.startswith(("test_", "bench_", "benchmark_")) \
            or last.endswith(("_test", "_tests", "_benchmark", "_benchmarks", "_bench")):
        return module
    return ""


def project_cached(fn):
    """Memoise a project-wide query until the index changes (rules ask per file, the answer
    is the same for every file of the run)."""
    name = fn.__qualname__

    @functools.wraps(fn)
    def wrapper(project, *args):
        key = (name, *args)
        memo = project._memo
        if key not in memo:
            memo[key] = fn(project, *args)
        return memo[key]

    return wrapper


# What building an object of a class runs; and building, calling or applying it
_RUN_ON_BUILD = ("__init__", "__post_init__")
_RUN_ON_USE = (*_RUN_ON_BUILD, "setup", "__call__")

_UNSEEN = object()  # (a memo's "not asked yet": None is an answer)
_GENERATIONS = itertools.count()  # (ProjectIndex.generation)


def _same_symbols(a: ModuleSummary, b: ModuleSummary) -> bool:
    """The same symbols with the same needs, references and bases, and the same imports (what
    resolving references and the needs closure read); their positions and sites may differ."""
    if a.symbols.keys() != b.symbols.keys() or a.imports != b.imports:
        return False  # (a name re-exported from elsewhere resolves elsewhere)
    for qual, x in a.symbols.items():
        y = b.symbols[qual]
        if x is not y and (x.kind != y.kind or x.needs != y.needs or x.refs != y.refs
                           or x.bases != y.bases):
            return False
    return True


@dataclass
class ProjectIndex:
    summaries: dict[str, ModuleSummary] = field(default_factory=dict)  # by module name
    _needs: dict[str, int] = field(default_factory=dict, repr=False)
    _ctx: dict[str, int | None] = field(default_factory=dict, repr=False)
    _callers: dict[str, list[tuple[str, int, str, int]]] = field(default_factory=dict, repr=False)
    _done: bool = False  # _needs and _edges are computed
    _ctx_done: bool = False  # _ctx and _callers are computed
    _resolved: dict[tuple[str, str | None], str | None] = field(default_factory=dict, repr=False)
    _dotted: dict[str, str | None] = field(default_factory=dict, repr=False)  # _resolve_dotted's
    _tops: set[str] | None = field(default=None, repr=False)  # (with _dotted: see there)
    _inner: dict[str, set[str]] | None = field(default=None, repr=False)  # (_resolve_sibling's)
    _children: dict[str, list[str]] | None = field(default=None, repr=False)  # (_reexported's)
    _memo: dict[tuple, object] = field(default_factory=dict, repr=False)
    # Which state of which index this is, unique in the process: it changes where the memo is
    # dropped. An analysis that keeps results across builds of a file (reuse.py) keeps those
    # that read the index only while this is the same.
    generation: int = field(default_factory=lambda: next(_GENERATIONS), repr=False)
    _edges: dict[str, list[str]] = field(default_factory=dict, repr=False)
    _config_asked: set[str] = field(default_factory=set, repr=False)  # see config_tables
    _flows: FlowIndex | None = field(default=None, repr=False)
    # module -> (its summary, what model_appliers reads of it)
    _appliers: dict[str, tuple] = field(default_factory=dict, repr=False)
    # The closures (what each symbol needs, its edges, the callers and contexts of functions)
    # as a run over exactly these summaries computed them, kept by the engine's cache: a
    # callable giving them (or None), asked once when they are first needed; and one given
    # them when they are computed here instead. Both are dropped when a summary changes.
    recall_closures: Callable[[], tuple | None] | None = field(default=None, repr=False)
    keep_closures: Callable[[tuple], None] | None = field(default=None, repr=False)

    # ---- building ----------------------------------------------------------------------------
    def add(self, summary: ModuleSummary) -> None:
        old = self.summaries.get(summary.module)
        if old == summary:
            return  # most keystrokes change nothing the project depends on: keep what is computed
        self.summaries[summary.module] = summary
        self._memo.clear()
        self.generation = next(_GENERATIONS)
        self._flows = None
        self._ctx_done = False
        self.recall_closures = self.keep_closures = None
        if old is None or not _same_symbols(old, summary):
            self._done = False
            self._resolved.clear()
            self._dotted.clear()
            self._tops = self._inner = self._children = None
        # (else only positions, calls or contexts changed, as when lines are added above:
        # references resolve as before and the needs closure holds)

    def remove(self, module: str) -> None:
        self.summaries.pop(module, None)
        self._done = self._ctx_done = False
        self.recall_closures = self.keep_closures = None
        self._resolved.clear()
        self._dotted.clear()
        self._tops = self._inner = self._children = None
        self._memo.clear()
        self.generation = next(_GENERATIONS)
        self._flows = None

    @property
    def flows(self) -> FlowIndex:
        """What the project's functions do with their arguments, joined across files."""
        if self._flows is None:
            self._flows = FlowIndex(self)
        return self._flows

    def _ensure(self) -> None:
        if self._done and self._ctx_done:
            return
        whole = not self._done and not self._ctx_done
        if whole and self.recall_closures is not None:
            kept, self.recall_closures = self.recall_closures(), None
            if kept is not None:
                self._needs, self._edges, self._callers, self._ctx = kept
                self._done = self._ctx_done = True
                self.keep_closures = None
                return
        if not self._done:
            self._compute_needs()
            self._done = True
        if not self._ctx_done:
            self._compute_contexts()
            self._ctx_done = True
        if whole and self.keep_closures is not None:
            keep, self.keep_closures = self.keep_closures, None
            keep((self._needs, self._edges, self._callers, self._ctx))

    # ---- references ----------------------------------------------------------------------------
    def resolve(self, ref: str, from_module: str | None = None) -> str | None:
        """``ext:pkg.mod.Name`` or ``mod:Qual`` -> ``mod:Qual`` of a project symbol, else None.

        ``from_module`` lets script-style imports resolve: ``from model import MLP`` in
        ``examples/seed/train.py`` finds ``examples.seed.model``.
        """
        if not ref.startswith("ext:"):  # (two lookups: no cheaper from a memo)
            mod, _, qual = ref.partition(":")
            s = self.summaries.get(mod)
            if s is None:
                return None
            if qual in s.symbols:
                return ref
            # A member of a module-level alias of another module's class (`TrainState =
            # train_state_module.TrainState`, then `TrainState.apply_gradients_and_norms`)
            head, dot, rest = qual.partition(".")
            sym = s.symbols.get(head) if dot else None
            if sym is not None and sym.kind == "alias":
                target = max((r for r in sym.refs if r.startswith("ext:")), key=len, default=None)
                if target is not None:
                    return self.resolve(f"{target}.{rest}", mod)
            return self._method_of_instance(sym, rest, mod)
        key = (ref, from_module)
        found = self._resolved.get(key, _UNSEEN)
        if found is _UNSEEN:
            found = self._resolved[key] = self._resolve_ext(ref[4:], from_module)
        return found  # type: ignore[return-value]

    def _resolve_ext(self, dotted: str, from_module: str | None) -> str | None:
        """The project symbol a dotted name imported from ``from_module`` is: as it is
        spelled, else under the module's enclosing packages, the nearest first."""
        found = self._resolve_dotted(dotted)
        if found is not None or not from_module:
            return found
        pkg = from_module.split(".")[:-1]
        for i in range(len(pkg), 0, -1):
            found = self._resolve_dotted(".".join(pkg[:i]) + "." + dotted)
            if found is not None:
                return found
        return None

    def _resolve_dotted(self, dotted: str, hops: int = 0) -> str | None:
        if hops == 0:  # (the same dotted name is looked up from many modules)
            found = self._dotted.get(dotted, _UNSEEN)
            if found is _UNSEEN:
                tops = self._tops
                if tops is None:  # (the first part of every module's name)
                    tops = self._tops = {m.partition(".")[0] for m in self.summaries}
                top = dotted.partition(".")[0]
                found = self._resolve_dotted(dotted, 1) if top in tops \
                    else self._resolve_sibling(dotted)
                self._dotted[dotted] = found
            return found  # type: ignore[return-value]
        parts = dotted.split(".")
        for i in range(len(parts) - 1, 0, -1):
            mod = ".".join(parts[:i])
            s = self.summaries.get(mod)
            if s is None:
                found = self._reexported(mod, parts[i:], hops) if hops < 9 else None
                if found is not None:
                    return found
                continue
            qual = ".".join(parts[i:])
            if qual in s.symbols:
                return f"{mod}:{qual}"
            if len(parts) == i + 2:  # (`sharding.with_sharding_constraint` of a module object)
                found = self._method_of_instance(s.symbols.get(parts[i]), parts[i + 1], mod)
                if found is not None:
                    return found
            # A name the module imports from another one (`from .training_utils import
            # update_state`; a package's `__init__` re-exporting its submodules' names).
            target = s.imports.get(parts[i])
            if target is not None and hops < 9:
                return self._resolve_dotted(".".join([target, *parts[i + 1:]]), hops + 1)
            return None
        return None

    def _reexported(self, package: str, rest: list[str], hops: int) -> str | None:
        """``package.Name`` where the package's ``__init__`` is not summarised (it names no
        jax: ``from .pipeline import Pipeline``): ``Name`` of the one module directly in the
        package that defines it."""
        children = self._children
        if children is None:
            children = self._children = {}
            for m in self.summaries:
                children.setdefault(m.rpartition(".")[0], []).append(m)
        hits = [c for c in children.get(package, ()) if rest[0] in self.summaries[c].symbols]
        if len(hits) != 1:
            return None
        return self._resolve_dotted(".".join([hits[0], *rest]), hops + 1)

    def _method_of_instance(self, sym, name: str, module: str) -> str | None:
        """The method ``name`` of the project class a module-level object was built from
        (``sharding = _ShardingAPI()``: ``sharding.with_sharding_constraint``), defined in the
        class itself; None for anything else."""
        made = (sym.flow or {}).get("instance") if sym is not None and sym.kind == "value" \
            else None
        if made is None or "." in name:
            return None
        cls = self.resolve(made, module)
        if cls is None or (c := self.symbol(cls)) is None or c.kind != "class":
            return None
        method = f"{cls}.{name}"
        return method if (m := self.symbol(method)) is not None and m.kind == "function" else None

    def _resolve_sibling(self, dotted: str) -> str | None:
        """A package of a sibling sub-project (``from modelpkg.layers import Dense`` in
        ``serving/server.py``, with the package in ``models/modelpkg/``: the sub-project is
        installed beside the one that imports it). The name is looked up under each folder that
        holds a module or package of that top name; it resolves when exactly one does."""
        top, _, rest = dotted.partition(".")
        if not rest:
            return None
        inner = self._inner
        if inner is None:  # (each module name's inner parts -> the prefixes they sit under)
            inner = self._inner = {}
            for m in self.summaries:
                parts = m.split(".")
                for i in range(1, len(parts)):
                    inner.setdefault(parts[i], set()).add(".".join(parts[:i]))
        found = {f for prefix in sorted(inner.get(top, ()))
                 if (f := self._resolve_dotted(f"{prefix}.{dotted}", 1)) is not None}
        return found.pop() if len(found) == 1 else None

    def symbol(self, ref: str):
        mod, _, qual = ref.partition(":")
        s = self.summaries.get(mod)
        return s.symbols.get(qual) if s else None

    # ---- constraint needs (transitive) ---------------------------------------------------------
    def _compute_needs(self) -> None:
        needs: dict[str, int] = {}
        edges: dict[str, list[str]] = {}
        resolve = self.resolve
        for mod, s in self.summaries.items():
            prefix = mod + ":"
            for qual, sym in s.symbols.items():
                key = prefix + qual
                needs[key] = sym.needs
                targets = [t for r in sym.refs if (t := resolve(r, mod)) is not None and t != key]
                if sym.bases:  # (a class inherits what its project base classes need)
                    targets += self.base_classes(key, sym.bases)
                edges[key] = targets
        self._edges = edges
        # What a symbol needs flows to the symbols that reach it: a worklist over the reverse
        # edges, each symbol taken again only when what it needs grew.
        users: dict[str, list[str]] = {}
        for key, targets in edges.items():
            for t in targets:
                if t in needs:
                    users.setdefault(t, []).append(key)
        todo = [key for key, n in needs.items() if n and key in users]
        while todo:
            key = todo.pop()
            n = needs[key]
            for u in users.get(key, ()):
                have = needs[u]
                if have | n != have:
                    needs[u] = have | n
                    todo.append(u)
        self._needs = needs

    def reachable(self, ref: str, from_module: str | None = None) -> list[str]:
        """Project symbols a symbol's code reaches: itself, what it references (calls,
        instantiates, aliases; also through a module's attributes, ``layers.Dense``) and its
        project base classes, transitively."""
        self._ensure()
        return list(self._walk(self.resolve(ref, from_module), self._reach_edges))

    @property
    @project_cached
    def compiled_elsewhere(self) -> dict[str, tuple[str, str, int]]:
        """The project functions a jit of another module compiles (``summary.jit_targets``):
        key -> (that module, the jit API, its line), the first in module order."""
        out: dict[str, tuple[str, str, int]] = {}
        for mod in sorted(self.summaries):
            for ref, api, line, *_ in self.summaries[mod].jit_targets:
                key = self.resolve(ref, mod)
                if key is not None and key not in out:
                    out[key] = (mod, api, line)
        return out

    def model_appliers(self) -> dict[str, list[str]]:
        """The functions that apply a model held by a value (``transformer.apply(...)`` of a
        parameter, theirs or an enclosing function's, or ``self.model.apply(...)``: model
        entries ``#param:...``/``#attr:...``), with those entries' models. Read once per
        summary (a keystroke reads one file's)."""
        out: dict[str, list[str]] = {}
        held = self._appliers
        for mod, s in self.summaries.items():
            found = held.get(mod)
            if found is None or found[0] is not s:
                appliers: dict[str, list[str]] = {}
                for e in s.entries:
                    if e.model.startswith(HANDED):
                        models = appliers.setdefault(f"{mod}:{e.scope}", [])
                        if e.model not in models:
                            models.append(e.model)
                found = held[mod] = (s, appliers)
            out.update(found[1])
        return out

    @project_cached
    def handed_classes(self, model: str, module: str) -> frozenset[str]:
        """The project classes a model held by a value (an entry's ``#param:<function>#<name>``
        or ``#attr:<class>#<name>``, of ``module``) may be an instance of: what the function's
        callers hand in there, through calls and ``functools.partial`` bindings, at any depth,
        or what the class's methods store on ``self`` there (``FlowIndex.instances``)."""
        kind, _, rest = model.partition(":")
        owner, _, chain = rest.rpartition("#")
        name, *attrs = chain.split(".")
        out = self.flows.instances([["p", name]], f"{module}:{owner}") if kind != "#attr" \
            else self._stored(f"{module}:{owner}", name)
        for attr in attrs:  # (`pipeline.flux`: what those classes keep in `flux`)
            out = frozenset(c for cls in sorted(out) for c in self._stored(cls, attr))
        return out

    def _stored(self, cls: str, name: str) -> frozenset[str]:
        """The project classes of what a class's methods, or its bases', store in
        ``self.<name>`` (their ``attrs`` flow, followed back to the callers)."""
        out: frozenset[str] = frozenset()
        for c in self.class_chain(cls):
            sym = self.symbol(c)
            terms = ((sym.flow or {}).get("attrs") or {}).get(name) if sym is not None else None
            if terms:
                out |= self.flows.instances(terms, f"{c}.__attr__")
        return out

    @project_cached
    def applied_models(self, key: str) -> frozenset[str]:
        """The project classes of the models handed in that the function ``key`` applies
        (:meth:`model_appliers`)."""
        module = key.partition(":")[0]
        out: frozenset[str] = frozenset()
        for model in self.model_appliers().get(key, ()):
            out |= self.handed_classes(model, module)
        return out

    def first_reaching(self, refs: list[str], from_module: str,
                       targets: frozenset[str]) -> tuple[int, str] | None:
        """The first of ``refs`` whose code runs a symbol of ``targets`` (``mod:Qual`` keys;
        ``mod:`` for a module's top-level code, which any of its symbols stands for), and that
        symbol; None where none does. What runs: what a function references (calls, through
        a module's attributes too), a method's overrides, and of a class, what building it
        runs (``__init__``; its other methods run where they are called). One walk shares
        what each ref explored with the next (what reached nothing before reaches nothing
        now)."""
        self._ensure()
        seen: set[str] = set()
        for i, ref in enumerate(refs):
            start = self.resolve(ref, from_module)
            todo = [start] if start is not None and start not in seen else []
            while todo:
                key = todo.pop()
                if key in seen:
                    continue
                seen.add(key)
                if key in targets or key.partition(":")[0] + ":" in targets:
                    return i, key
                todo.extend(k for k in self._runs(key, _RUN_ON_BUILD) if k not in seen)
        return None

    def _runs(self, key: str, on_use: tuple[str, ...] = ()) -> list[str]:
        """What running the symbol ``key`` runs: what it references, the overrides of a
        method in the project's subclasses; of a class, its methods named ``on_use`` (what
        building it runs, or building and calling it)."""
        sym = self.symbol(key)
        if sym is not None and sym.kind == "class":
            # (each class of the chain's: an override calls its base's through `super()`)
            return [f"{c}.{name}" for name in on_use for c in self.class_chain(key)
                    if self.symbol(f"{c}.{name}") is not None]
        edges = self._reach_edges(key)
        if sym is None or sym.kind != "function":
            return edges
        mod, _, qual = key.partition(":")
        owner, _, name = qual.rpartition(".")
        if owner and (cls := self.symbol(f"{mod}:{owner}")) is not None and cls.kind == "class":
            # (a method runs as its override in the class of the object: `self.init_method`
            # in a base class is each subclass's `init_method`)
            edges = [*edges, *(m for m in self._methods_of(f"{mod}:{owner}", name, mod)
                               if m != key)]
        for r in sym.refs:
            # `self.load()` of a method the class inherits: the reference names the class's
            # own, which it does not define
            head, _, rest = r.partition(":")
            cls_qual, dot, method = rest.rpartition(".")
            if dot and head == mod and f"{mod}:{rest}" not in self._edges.get(key, ()) \
                    and (c := self.symbol(f"{mod}:{cls_qual}")) is not None and c.kind == "class" \
                    and self.symbol(r) is None:
                edges = [*edges, *self._methods_of(f"{mod}:{cls_qual}", method, mod)]
        return edges

    def _reach_edges(self, key: str) -> list[str]:
        """:attr:`_edges`, and the symbols a body names through a module's attributes
        (``attr:`` references, which the needs do not follow: summary._attribute_ref)."""
        edges = self._edges.get(key, [])
        sym = self.symbol(key)
        attrs = [r for r in sym.refs if r.startswith("attr:")] if sym is not None else []
        if not attrs:
            return edges
        mod = key.partition(":")[0]
        return [*edges, *(t for r in attrs if (t := self.resolve(r[5:], mod)) is not None)]

    @staticmethod
    def _walk(start: str | None, neighbours: Callable[[str], Iterable[str]],
              breadth_first: bool = False) -> Iterator[str]:
        """``start`` and the keys reachable from it through ``neighbours``, each once, depth
        first (or breadth first); neighbours are asked for once the caller has the key."""
        seen: set[str] = set()
        todo = [start] if start else []
        while todo:
            key = todo.pop(0) if breadth_first else todo.pop()
            if key in seen:
                continue
            seen.add(key)
            yield key
            todo.extend(neighbours(key))

    @property
    @project_cached
    def traced_under_sharded_jits(self) -> dict[str, list]:
        """Project functions a jit with in/out shardings traces, each with the first such jit
        that reaches it, ``[module, line, col, end_line, end_col]``: the functions those jits
        compile (``summary.sharded_jits``) and what they reach -- :meth:`reachable`'s edges,
        and a method called on a parameter annotated with a class, which is that method of
        the class or any project class deriving from it (``meth:`` references:
        :meth:`_methods_of`)."""
        self._ensure()
        out: dict[str, list] = {}
        todo: list[tuple[str, list]] = []
        for mod, s in sorted(self.summaries.items()):
            for ref, *at in s.sharded_jits:
                key = self.resolve(ref, mod)
                if key is not None:
                    todo.append((key, [mod, *at]))
        todo.reverse()
        while todo:
            key, at = todo.pop()
            if key in out:
                continue
            out[key] = at
            sym = self.symbol(key)
            mod = key.partition(":")[0]
            nxt = list(self._runs(key, _RUN_ON_USE))
            if sym is not None:
                for r in sym.refs:
                    if r.startswith("meth:"):
                        cls, _, name = r[5:].rpartition("#")
                        nxt += self._methods_of(cls, name, mod)
            todo.extend((k, at) for k in reversed(nxt) if k not in out)
        return out

    def _methods_of(self, cls: str, name: str, from_module: str) -> list[str]:
        """The methods ``name`` that an object of class ``cls`` (``mod:Qual`` or an imported
        dotted name) may run: found along the chain of ``cls`` itself and of every project
        class deriving from it (an external class is matched by its package and name,
        ``transformers.FlaxPreTrainedModel`` for ``transformers.modeling_flax_utils.``...)."""
        memo = self._memo.setdefault(("_methods_of",), {})
        found = memo.get((cls, name, from_module))  # type: ignore[union-attr]
        if found is not None:
            return found
        base = self.resolve(cls, from_module) if ":" in cls \
            else self.resolve(f"ext:{cls}", from_module)
        top, last = cls.partition(".")[0], cls.rpartition(".")[2]
        chains = self._memo.setdefault(("_class_chains",), {})
        if not chains:
            for mod, s in self.summaries.items():
                for qual, sym in s.symbols.items():
                    if sym.kind == "class":
                        chains[f"{mod}:{qual}"] = self.class_chain(f"{mod}:{qual}")  # type: ignore[index]
        out: list[str] = []
        for chain in chains.values():  # type: ignore[union-attr]
            if base is not None:
                derives = base in chain
            else:
                derives = ":" not in cls and any(
                    b.partition(".")[0] == top and b.rpartition(".")[2] == last
                    for c in chain if (sym := self.symbol(c)) is not None for b in sym.bases)
            if not derives:
                continue
            method = next((f"{c}.{name}" for c in chain
                           if (m := self.symbol(f"{c}.{name}")) is not None
                           and m.kind == "function"), None)
            if method is not None and method not in out:
                out.append(method)
        memo[(cls, name, from_module)] = out  # type: ignore[index]
        return out

    def needs(self, ref: str, from_module: str | None = None) -> int:
        self._ensure()
        t = self.resolve(ref, from_module)
        return self._needs.get(t, 0) if t else 0

    @project_cached
    def needs_running(self, ref: str, from_module: str | None = None) -> int:
        """What running ``ref`` needs, where building an NNX module runs its ``__init__`` and
        not its ``__call__`` (``nnx.eval_shape(lambda: Model(rngs=...))`` applies none of the
        constraints of its forward pass). :meth:`needs` counts every method of a class a
        function names."""
        self._ensure()
        start = self.resolve(ref, from_module)
        out = 0
        for key in self._walk(start, self._run_edges):
            sym = self.symbol(key)
            if sym is not None:
                out |= sym.needs
        return out

    def _run_edges(self, key: str) -> list[str]:
        sym = self.symbol(key)
        if sym is not None and sym.kind == "class" and self.is_subclass(key, NNX_MODULE):
            init = next((f"{c}.__init__" for c in self.class_chain(key)
                         if self.symbol(f"{c}.__init__") is not None), None)
            return [init] if init else []
        return list(self._edges.get(key, ()))

    def constraint_sites(self, ref: str, from_module: str | None = None,
                         limit: int = 3) -> list[tuple[str, Site]]:
        """A few constraint call sites reached from a symbol, for related locations."""
        self._ensure()

        def constrained(key: str) -> list[str]:
            sym, mod = self.symbol(key), key.partition(":")[0]
            return [t for r in sorted(sym.refs) if (t := self.resolve(r, mod))
                    and self._needs.get(t)] if sym is not None else []

        out: list[tuple[str, Site]] = []
        for key in self._walk(self.resolve(ref, from_module), constrained, breadth_first=True):
            sym = self.symbol(key)
            if sym is not None:
                path = self.summaries[key.partition(":")[0]].path
                out.extend((path, site) for site in sym.sites if site.needs)
            if len(out) >= limit:
                break
        return out[:limit]

    def base_classes(self, key: str, bases: list[str] | None = None) -> list[str]:
        """The project classes the class ``key`` names as its bases (``bases``: its symbol's,
        when the caller has them), in order; bases outside the project are left out."""
        if bases is None:
            sym = self.symbol(key)
            bases = sym.bases if sym is not None and sym.kind == "class" else []
        mod = key.partition(":")[0]
        return [t for b in bases
                if (t := self.resolve(f"ext:{b}", mod) or self.resolve(f"{mod}:{b}"))]

    def inherited(self, ref: str, from_module: str | None = None) -> str | None:
        """The member a reference to a class's member names where the class inherits it
        (``train:Trainer.load_checkpoint``, defined in the project base ``ckpt:Checkpointer``):
        the nearest base's, as Python looks it up; None where the class is not a project
        class or no base defines it."""
        head, dot, name = ref.rpartition(".")
        cls = self.resolve(head, from_module) if dot and head not in ("ext", "") else None
        sym = self.symbol(cls) if cls is not None else None
        if sym is None or sym.kind != "class":
            return None
        return next((f"{c}.{name}" for c in self.class_chain(cls)[1:]
                     if self.symbol(f"{c}.{name}") is not None), None)

    def class_chain(self, key: str) -> list[str]:
        """The class ``key`` and its project base classes at any depth, nearest first (the
        order their methods are found in)."""
        return list(self._walk(key, self.base_classes, breadth_first=True))

    @project_cached
    def is_subclass(self, ref: str, base: str, from_module: str | None = None) -> bool:
        def parents(key: str) -> list[str]:
            """What a class inherits from: its project bases, or what an alias stands for."""
            sym, mod = self.symbol(key), key.partition(":")[0]
            if sym is None:
                return []
            if sym.kind == "alias":
                return [t for r in sym.refs if (t := self.resolve(r, mod))]
            return self.base_classes(key, sym.bases)

        for key in self._walk(self.resolve(ref, from_module), parents):
            sym = self.symbol(key)
            if sym is not None and sym.kind != "alias" and base in sym.bases:
                return True
        return False

    # ---- contexts -------------------------------------------------------------------------------
    @property
    @project_cached
    def rules_setter(self) -> bool:
        return any(s.rules_setter for s in self.summaries.values())

    @property
    @project_cached
    def mesh_setter(self) -> bool:
        return any(s.mesh_setter for s in self.summaries.values())

    @property
    @project_cached
    def rules_provider(self) -> bool:
        return any(s.rules_provider for s in self.summaries.values())

    @property
    @project_cached
    def mesh_provider(self) -> bool:
        return any(s.mesh_provider for s in self.summaries.values()) or self.mesh_setter \
            or any(self.flows.terms_mesh(w[1], w[0]) for s in self.summaries.values()
                   for w in s.with_mesh_terms)

    @property
    @project_cached
    def meshes_entered_only_legacy(self) -> bool:
        """The project enters meshes only by a legacy ``with mesh:``, never by ``jax.set_mesh``
        or ``use_mesh``: under it, flax >= 0.12.2 applies no logical constraint at all."""
        return any(s.legacy_mesh for s in self.summaries.values()) \
            and not any(s.mesh_context for s in self.summaries.values())

    @property
    @project_cached
    def legacy_env_symbols(self) -> frozenset[str]:
        """The symbols that read the legacy resource environment (``mod:`` for a module's
        top-level code), for :meth:`first_reaching`."""
        return frozenset(f"{m}:{q}" for m, s in self.summaries.items() for q in s.legacy_readers)

    @property
    @project_cached
    def eval_shape_symbols(self) -> frozenset[str]:
        """The symbols that call ``nnx.eval_shape`` (``mod:`` for a module's top-level code),
        for :meth:`first_reaching`."""
        return frozenset(f"{m}:{q}" for m, s in self.summaries.items()
                         for q in s.eval_shape_users)

    @property
    @project_cached
    def pjit_symbols(self) -> frozenset[str]:
        """The symbols that call ``pjit`` (``mod:`` for a module's top-level code)."""
        return frozenset(f"{m}:{q}" for m, s in self.summaries.items() for q in s.pjit_callers)

    @property
    @project_cached
    def legacy_env_readers(self) -> list[str]:
        """The modules that read the legacy resource environment (``pxla.thread_resources``)
        with no fallback to the mesh ``jax.set_mesh`` sets (``summary._legacy_readers``),
        sorted: it is set only by ``with mesh:``, so replacing that with ``jax.set_mesh``
        changes what they read. The library's and application's own first."""
        # (the library's own readers first: a test that reads it says less about the program)
        return sorted((m for m, s in self.summaries.items() if s.legacy_readers),
                      key=lambda m: (own_program(m), m))

    def _compute_contexts(self) -> None:
        """ctx(F) = AND over the calls of F of (context at the call | ctx(caller)).

        A function no project code calls has an unknown context (None): it may be called from
        outside under any context, so nothing is reported inside it.
        """
        callers: dict[str, list[tuple[str, int, str, int]]] = {}
        aliases: dict[str, list[str]] = {}
        resolve = self.resolve
        for mod, s in self.summaries.items():
            for qual, sym in s.symbols.items():
                if sym.kind == "alias":
                    aliases[f"{mod}:{qual}"] = [t for t in (resolve(r, mod) for r in sym.refs)
                                                if t]
        for mod, s in self.summaries.items():
            prefix, path = mod + ":", s.path
            legacy = self._under_legacy(mod, 3) if s.with_mesh_terms else frozenset()
            for i, edge in enumerate(s.calls):
                t = resolve(edge.target, mod)
                if t is None:
                    continue
                # (a legacy `with mesh:` of a mesh only the value flow knows: MESH alone)
                ctx = edge.ctx | MESH if i in legacy else edge.ctx
                site = (prefix + edge.caller, ctx, path, edge.line)
                if t not in aliases:
                    callers.setdefault(t, []).append(site)
                    continue
                for target in self._through_aliases(t, aliases):
                    callers.setdefault(target, []).append(site)
        self._callers = callers
        setters = self._setter_bases()
        # Greatest fixed point: every function starts at "everything" and narrows. Each call
        # site is (caller, what the site itself gives: its context and the caller's module's
        # setters); a function is worked out again only when a caller of it narrowed.
        ctx: dict[str, int | None] = dict.fromkeys(callers, ALL)
        fixed: dict[str, list[tuple[str | None, int]]] = {}
        dependents: dict[str, list[str]] = {}
        for key, sites in callers.items():
            terms = fixed[key] = []
            for caller, site_ctx, _, _ in sites:
                mod, _, qual = caller.partition(":")
                base = setters.get(mod, 0)
                if qual == "" or caller not in callers:  # (module level; or no project caller)
                    terms.append((None, site_ctx | base | (ALL if qual else 0)))
                else:
                    terms.append((caller, site_ctx | base))
                    dependents.setdefault(caller, []).append(key)
        todo = list(callers)
        queued = set(todo)
        while todo:
            key = todo.pop()
            queued.discard(key)
            value = ALL
            for caller, given in fixed[key]:
                value &= given if caller is None else given | ctx[caller]  # type: ignore[operator]
            if value != ctx[key]:
                ctx[key] = value
                for d in dependents.get(key, ()):
                    if d not in queued:
                        queued.add(d)
                        todo.append(d)
        self._ctx = ctx

    # ---- programs: what a module imports, what runs together ----------------------------------------
    @project_cached
    def module_imports(self, module: str) -> frozenset[str]:
        """The project modules ``module`` imports (a name imported from one counts)."""
        s = self.summaries.get(module)
        out: set[str] = set()
        if s is None:
            return frozenset()
        pkg = module.split(".")[:-1]
        prefixes = [""] + [".".join(pkg[:i]) + "." for i in range(len(pkg), 0, -1)]
        for dotted in s.imports.values():
            for prefix in prefixes:  # (a script's `from model import X`: its sibling first)
                found = self._module_of(prefix + dotted)
                if found is not None:
                    if found != module:
                        out.add(found)
                    break
        return frozenset(out)

    def _module_of(self, dotted: str) -> str | None:
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            mod = ".".join(parts[:i])
            if mod in self.summaries:
                return mod
        return None

    @project_cached
    def _setter_bases(self) -> dict[str, int]:
        """The contexts global setters (``nn.set_logical_axis_rules(...)``, ``jax.set_mesh(m)``
        as a statement, the legacy ``thread_resources.env = ...``, a mesh only ``pjit`` and
        ``with_sharding_constraint`` read) give each module: a setter counts for the program
        that executes it -- its module and what that imports, transitively -- not for
        unrelated scripts."""
        out: dict[str, int] = {}
        for mod, s in self.summaries.items():
            flags = (RULES if s.rules_setter else 0) | (MESH | MESH_SET if s.mesh_setter else 0) \
                | (MESH if s.legacy_mesh_setter else 0)
            if not flags:
                continue
            todo, seen = [mod], set()
            while todo:
                m = todo.pop()
                if m in seen:
                    continue
                seen.add(m)
                out[m] = out.get(m, 0) | flags
                todo.extend(self.module_imports(m))
        return out

    @project_cached
    def _components(self) -> dict[str, int]:
        """Modules that import one another (in either direction, transitively) share a number:
        one program, or one library. Two sibling example folders that never import each other
        get two."""
        neighbours: dict[str, set[str]] = {m: set() for m in self.summaries}
        for m in self.summaries:
            for t in self.module_imports(m):
                neighbours[m].add(t)
                neighbours.setdefault(t, set()).add(m)
        out: dict[str, int] = {}
        for start in sorted(neighbours):
            if start in out:
                continue
            n = len(set(out.values()))
            todo = [start]
            while todo:
                m = todo.pop()
                if m in out:
                    continue
                out[m] = n
                todo.extend(neighbours[m])
        return out

    def provided_in(self, module: str) -> int:
        """The contexts some module of ``module``'s program (its import component) provides."""
        return self._provided_by_component().get(self._components().get(module, -1), 0)

    @project_cached
    def _provided_by_component(self) -> dict[int, int]:
        comps = self._components()
        out: dict[int, int] = {}
        for mod, s in self.summaries.items():
            c = comps.get(mod, -1)
            out[c] = out.get(c, 0) | (RULES if s.rules_provider or s.rules_setter else 0) | \
                (MESH if s.mesh_provider or s.mesh_setter else 0)
        return out

    def program_shards(self, module: str) -> bool:
        """Whether ``module`` or a project module it imports (transitively) builds, enters or
        sets a mesh, reads the legacy mesh environment, or enters or sets axis rules: a program
        that does none of that (a conversion or export script, a single-device tool) runs on
        one device by design. For a test, a benchmark or an example (:func:`program_of`), its
        own files must: a pmap example beside a library that builds meshes does not shard; nor
        does a one-device script beside one that builds a mesh, in a folder of standalone
        scripts (see :meth:`_own_sharding_modules`)."""
        if program_of(module):
            return module in self._own_sharding_modules()
        return module in self._sharding_programs()

    @project_cached
    def _own_sharding_modules(self) -> frozenset[str]:
        """The modules of tests, benchmarks and examples that run in a program that shards.
        A folder of them holds programs by what imports what, not one: a script shards when
        it, or a module of its folder it imports (transitively), shards itself; a module such
        a script imports runs in that program too (the models of `examples/lm1b/train.py`).
        A single-device `plot_sgd_solvers.py` beside `distributed_imagenet.py`, neither
        importing the other, does not."""
        out: set[str] = set()
        for program, summaries in self.programs().items():
            if not program or not any(self._shards_itself(s) for s in summaries):
                continue
            members = {s.module for s in summaries}
            imports = {m: [i for i in self.module_imports(m) if i in members] for m in members}
            importers: dict[str, list[str]] = {}
            for m, imported in imports.items():
                for i in imported:
                    importers.setdefault(i, []).append(m)
            # (those that import one that shards, transitively, and what they import)
            running = _reached({s.module for s in summaries if self._shards_itself(s)},
                               importers)
            out |= _reached(running, imports)
        return frozenset(out)

    def runs_on_one_device(self, module: str, qualname: str) -> bool:
        """Code of ``module:qualname`` runs only in a program that never shards: the module's
        program does not (:meth:`program_shards`), and the code is a test's, benchmark's or
        example's (it runs in that program only) or runs only from its own module."""
        if self.program_shards(module):
            return False
        return bool(program_of(module)) or self.runs_only_from(module, qualname)

    @staticmethod
    def _shards_itself(s: ModuleSummary) -> bool:
        return bool(s.mesh_axes or s.mesh_provider or s.mesh_setter or s.legacy_env
                    or s.rules_provider or s.rules_setter)

    @project_cached
    def _sharding_programs(self) -> frozenset[str]:
        """The modules for which :meth:`program_shards` holds: those that shard themselves and
        every module that imports one of them, transitively (one walk of the reversed imports
        for the project, not one walk of each module's imports per module asked)."""
        importers: dict[str, list[str]] = {}
        todo = []
        for m, s in self.summaries.items():
            for imported in self.module_imports(m):
                importers.setdefault(imported, []).append(m)
            if self._shards_itself(s):
                todo.append(m)
        seen = set(todo)
        while todo:
            for m in importers.get(todo.pop(), ()):
                if m not in seen:
                    seen.add(m)
                    todo.append(m)
        return frozenset(seen)

    def runs_only_from(self, module: str, qualname: str) -> bool:
        """Whether every project caller of ``module:qualname``, transitively, is in
        ``module`` (its code runs when that module runs, as a script or on import)."""
        self._ensure()
        todo, seen = [f"{module}:{qualname}"], set()
        while todo:
            key = todo.pop()
            if key in seen:
                continue
            seen.add(key)
            for caller, _, _, _ in self._callers.get(key, ()):
                if caller.partition(":")[0] != module:
                    return False
                todo.append(caller)
        return True

    def called_only_traced(self, module: str, qualname: str) -> bool:
        """Whether the project calls the function ``module:qualname`` and every call is in
        code that runs traced: in a function its module compiles at the top level (decorated
        with a jit, or bound once to one: ``ModuleSummary.jitted``), or that a jit of another
        module compiles, or nested in one, or that its module knows runs traced (handed to a
        transform: ``ModuleSummary.traced``); a donation asked of it is ignored there. Calls of
        a method on an object built from its class count (``ModuleSummary.method_calls``)."""
        self._ensure()
        key = f"{module}:{qualname}"
        callers = [c for c, _, _, _ in self._callers.get(key, ())] + \
            self._method_callers().get(key, [])
        if not callers:
            return False
        elsewhere = self.compiled_elsewhere
        for caller in callers:
            mod, _, qual = caller.partition(":")
            top = qual.partition(".")[0]
            s = self.summaries.get(mod)
            if not qual or s is None or top not in s.jitted and f"{mod}:{top}" not in elsewhere \
                    and qual not in s.traced:
                return False
        return True

    @project_cached
    def _method_callers(self) -> dict[str, list[str]]:
        """The project's calls of methods on objects built from its classes
        (``ModuleSummary.method_calls``): method key -> caller keys."""
        out: dict[str, list[str]] = {}
        for mod, s in self.summaries.items():
            for caller, ref in s.method_calls:
                cls, _, name = ref.rpartition(".")
                target = self.resolve(cls, mod)
                if target is None or (c := self.symbol(target)) is None or c.kind != "class":
                    continue
                method = f"{target}.{name}"
                if (m := self.symbol(method)) is not None and m.kind == "function":
                    out.setdefault(method, []).append(f"{mod}:{caller}")
        return out

    def setter_base(self, module: str) -> int:
        """The contexts a global setter of ``module``'s program gives its code."""
        return self._setter_bases().get(module, 0)

    def _through_aliases(self, key: str, aliases: dict[str, list[str]]) -> list[str]:
        out, todo, seen = [], [key], set()
        while todo:
            k = todo.pop()
            if k in seen:
                continue
            seen.add(k)
            if k in aliases:
                todo.extend(aliases[k])
            else:
                out.append(k)
        return out

    @project_cached
    def _under_legacy(self, module: str, part: int) -> frozenset[int]:
        """What sits in the body of a ``with x:`` of ``module`` whose ``x`` the value-flow layer
        knows is a mesh (from a factory, a parameter, a record's field, ``self.mesh``): the
        model entries (``part`` 2: their places in the summary's ``entries``) or the call edges
        (``part`` 3: their places in ``calls``), which then run under that legacy mesh."""
        s = self.summaries.get(module)
        return frozenset(i for w in (s.with_mesh_terms if s else ()) if len(w) > part
                         and self.flows.terms_mesh(w[1], w[0]) for i in w[part])

    def _legacy_mesh_at(self, module: str, entry: int, ctx: int) -> int:
        """``ctx`` at a model entry, with MESH where it runs under such a ``with mesh:``: the
        same as a legacy mesh the file itself resolves (SHL101 reports it, once, at the
        ``with``)."""
        if ctx & MESH or entry not in self._under_legacy(module, 2):
            return ctx
        return ctx | MESH

    def context_of(self, module: str, qualname: str) -> int | None:
        """Contexts guaranteed when code in this scope runs; None when unknown."""
        self._ensure()
        base = self._setter_bases().get(module, 0)
        if qualname == "":
            return base
        # A method or nested function runs when its enclosing function or class is used; look
        # for the nearest scope that has callers.
        parts = qualname.split(".")
        for i in range(len(parts), 0, -1):
            key = f"{module}:{'.'.join(parts[:i])}"
            if key in self._ctx:
                c = self._ctx[key]
                return None if c is None else c | base
        return None

    def callers(self, module: str, qualname: str) -> list[tuple[str, int, str, int]]:
        self._ensure()
        return self._callers.get(f"{module}:{qualname}", [])

    # ---- rules tables and meshes ---------------------------------------------------------------
    @project_cached
    def programs(self) -> dict[str, list[ModuleSummary]]:
        """Program (:func:`program_of`; ``""`` the library or application) -> its modules'
        summaries, in the project's order."""
        out: dict[str, list[ModuleSummary]] = {}
        for m, s in self.summaries.items():
            out.setdefault(program_of(m), []).append(s)
        return out

    def judging(self, module: str | None) -> str | None:
        """Whose tables and meshes judge ``module``: those of the library or application
        itself and of the program ``module`` belongs to (:func:`program_of`), not those of the
        other tests, benchmarks and examples (None: every module's)."""
        return None if module is None else program_of(module)

    def _judging_summaries(self, program: str | None) -> list[ModuleSummary]:
        """The summaries whose tables and meshes judge a module of ``program``."""
        if program is None:
            return list(self.summaries.values())
        programs = self.programs()
        return programs.get("", []) + (programs.get(program, []) if program else [])

    @project_cached
    def rule_tables(self, program: str | None = None) -> tuple[list[list], bool]:
        """All literal rules tables in the project, and whether every table used is known
        (``program``: those that judge its modules, see :meth:`judging`)."""
        tables, complete, _ = self.rule_table_sources(program)
        return tables, complete

    @project_cached
    def rule_table_sources(self, program: str | None = None
                           ) -> tuple[list[list], bool, list[tuple[str, str, int]]]:
        """:meth:`rule_tables`, with the configuration tables among them: (path, key, line)
        of each table read by key (``nn.logical_axis_rules(config.logical_axis_rules)`` reads
        every ``logical_axis_rules`` table of the project's YAML files and config builders)."""
        if program is None:
            parts = [self._tables_of(list(self.summaries.values()))]
        else:  # (the library's, once for every program, and the program's own)
            parts = [self._program_tables("")] + ([self._program_tables(program)] if program
                                                  else [])
        tables: list[list] = []
        complete = True
        sources: list[tuple[str, str, int]] = []
        keys: set[str] = set()
        for t, ok, src, k in parts:
            tables.extend(t)
            complete = complete and ok
            sources.extend(src)
            keys.update(k)
        for key in sorted(keys):
            found = self.config_tables(key)
            if not found or any(entries is None for _, _, entries in found):
                complete = False  # none written, or one written that is no literal table
            for path, line, entries in found:
                if entries is not None:
                    tables.append(entries)
                    sources.append((path, key, line))
        return tables, complete, sources

    @project_cached
    def _program_tables(self, program: str):
        return self._tables_of(self.programs().get(program, []))

    def _tables_of(self, summaries: list[ModuleSummary]):
        """(tables, complete, sources, keys read) of these modules' rules contexts."""
        tables: list[list] = []
        complete = True
        sources: list[tuple[str, str, int]] = []
        keys: set[str] = set()
        for s in summaries:
            for t in s.rule_tables:
                if t is None:
                    complete = False
                else:
                    tables.append(t)
            for ref in s.rule_table_refs:
                found = self._constant(ref)
                if found is not None:
                    tables.append(found)
                elif "." in ref:  # `pyconfig.config.logical_axis_rules`: read by its key
                    keys.add(ref.rsplit(".", 1)[1])
                else:
                    complete = False
            keys.update(s.rule_table_keys)
            for where, terms in s.rule_table_terms:
                found, ok = self.flows.tables(terms, where)
                complete = complete and ok
                for entries, source in found:
                    tables.append(entries)
                    if source is not None:
                        sources.append(source)
        return tables, complete, sources, keys

    @project_cached
    def config_tables(self, key: str, hops: int = 0) -> list[tuple[str, int, list | None]]:
        """(path, line, entries) of every rules table the project's configuration writes under
        ``key``, in module order (a key that stands for another, ``{"rules_for_train":
        config.logical_axis_rules}``, gives that key's tables); entries None where what is
        written there is no literal (``config.logical_axis_rules = build_rules()``)."""
        out: list[tuple[str, int, list | None]] = []
        for _, s in sorted(self.summaries.items()):
            for t in s.config_tables:
                if t["key"] != key:
                    continue
                if "alias" in t:
                    if hops < 4:
                        out.extend(self.config_tables(t["alias"], hops + 1))
                elif "entries" in t or "unknown" in t:
                    out.append((s.path, t["line"], t.get("entries")))
                elif "param" in t:
                    out.extend(self._handed_config_tables(key, s, t))
        return out

    def _handed_config_tables(self, key: str, s: ModuleSummary, t: dict
                              ) -> list[tuple[str, int, list | None]]:
        """A parameter written under ``key`` (``self.logical_axis_rules = logical_axis_rules``):
        the tables every caller hands it. A caller handing on the same key's value
        (``logical_axis_rules=config.logical_axis_rules``) adds no table that is not already
        among the key's; one handing on what shardlint cannot read leaves the key unknown."""
        fn = f"{s.module}:{t['fn']}"
        if key in self._config_asked or self.flows.param_tables_asked(fn, t["param"]):
            return []  # (being worked out: its tables are the ones asked for)
        self._config_asked.add(key)
        try:
            tables, complete = self.flows.param_tables(fn, t["param"])
        finally:
            self._config_asked.discard(key)
        if not complete:
            return [(s.path, t["line"], None)]
        return [(s.path, t["line"], entries) for entries, _ in tables]

    def config_asked(self, key: str) -> bool:
        """Whether ``key``'s tables are being worked out (a parameter written under it is
        handed the same key's value: nothing new)."""
        return key in self._config_asked

    @project_cached
    def config_axes(self, key: str) -> list[list[str]]:
        """Every list of mesh axis names the project's configuration writes under ``key``
        (``mesh_axes: ['data', 'fsdp']`` in a YAML file, a config builder, a field default)."""
        return [t["axes"] for _, s in sorted(self.summaries.items())
                for t in s.config_tables if t["key"] == key and "axes" in t]

    def _constant(self, dotted: str) -> list | None:
        parts = dotted.split(".")
        for i in range(len(parts) - 1, 0, -1):
            s = self.summaries.get(".".join(parts[:i]))
            if s is not None:
                return s.constants.get(".".join(parts[i:]))
        return None

    @project_cached
    def mesh_axis_keys(self, program: str | None = None) -> list[str]:
        """The configuration keys meshes read their axis names by, sorted."""
        return sorted({k for s in self._judging_summaries(program) for k in s.mesh_axis_keys})

    @project_cached
    def _reachable_summaries(self, program: str) -> list[ModuleSummary]:
        """The summaries of ``program``'s modules and of the library modules they import,
        directly or through others: the code a test, benchmark or example runs, whose meshes
        alone can be in context where its tables are used."""
        own = self.programs().get(program, [])
        seen = {s.module for s in own}
        todo = list(own)
        while todo:
            s = todo.pop()
            for q in s.imports.values():
                parts = q.split(".")
                for i in range(len(parts), 0, -1):
                    m = ".".join(parts[:i])
                    target = self.summaries.get(m)
                    if target is not None:
                        if m not in seen:
                            seen.add(m)
                            todo.append(target)
                        break
        return [s for s in self.summaries.values() if s.module in seen]

    @project_cached
    def mesh_axes(self, closed: bool = False, program: str | None = None,
                  reach: bool = False) -> tuple[set[str], bool]:
        """The axis names of every mesh the project builds, and whether all of them are known.
        A mesh built from ``config.<key>`` has the names its configuration writes under the key
        (all of them: any one may be the one used); a key with none there is unknown. A
        parameter annotated ``Mesh`` adds none when every call of its function in the project
        passes a mesh (that mesh is counted where it is built); one that a caller outside the
        project may fill (no call here, or a call passing something else) is unknown -- unless
        ``closed``: the project is taken to build every mesh its code receives (as SHL201
        takes its rules tables to be all there are). With ``reach``, a test's, benchmark's or
        example's meshes are those its own modules and the library modules they import build,
        not those of library modules it never runs."""
        if reach and program:
            # (narrower only: where some mesh the program may see is unknown, it stays unknown)
            _, known = self.mesh_axes(closed, program)
            if not known:
                return set(), False
            programs = self._reachable_summaries(program)
        else:
            programs = self._judging_summaries(program)
        names: set[str] = set()
        complete = True
        for s in programs:
            for axes in s.mesh_axes:
                if axes is None:
                    complete = False
                else:
                    names.update(axes)
        if complete and not closed:
            complete = all(self.flows.param_mesh(fn, param)
                           for s in programs for fn, param in s.mesh_params)
        for key in self.mesh_axis_keys(program):
            found = self.config_axes(key)
            if not found:
                complete = False
            for axes in found:
                names.update(axes)
        return names, complete

    def entries(self, module: str) -> list[Entry]:
        s = self.summaries.get(module)
        return s.entries if s else []

    @project_cached
    def inside_module_class(self, module: str, scope: str) -> bool:
        """``scope`` is (inside) a method of a Linen or NNX module class: model code, which
        runs where the model is initialised or applied."""
        parts = scope.split(".")
        for i in range(len(parts) - 1, 0, -1):
            key = f"{module}:{'.'.join(parts[:i])}"
            sym = self.symbol(key)
            if sym is not None and sym.kind == "class" and (
                    self.is_subclass(key, NNX_MODULE) or self.is_subclass(key, LINEN_MODULE)):
                return True
        return False

    def entries_missing_context(self, module: str) -> list[MissingContext]:
        """Places in ``module`` where constrained model code runs without rules or mesh.

        An entry inside a function nobody in the project calls has an unknown context and is
        only reported when no code in the project provides that context at all.
        """
        if not self.entries(module):
            return []  # (most files: no model initialised or applied, nothing to compute)
        self._ensure()
        out: list[MissingContext] = []
        absent = ALL & ~self.provided_in(module)
        single = not self.program_shards(module)
        for i, e in enumerate(self.entries(module)):
            if self.inside_module_class(module, e.scope):
                continue  # a submodule built or applied by a parent module: not where it runs
            others: tuple[str, ...] = ()
            if e.model.startswith(HANDED):
                # A model handed in: the classes callers hand there, all Linen modules (an
                # object of another class with an `apply` may be the one this call runs),
                # needing what every one of them needs
                classes = sorted(self.handed_classes(e.model, module))
                if not classes or not all(self.is_subclass(c, LINEN_MODULE) for c in classes):
                    continue
                model, others = classes[0], tuple(classes[1:])
            else:
                model = self.resolve(e.model, module)  # type: ignore[assignment]
                sym = self.symbol(model) if model is not None else None
                if sym is not None and sym.kind == "function":
                    # `opt = make(...); opt.init(...)`: what runs is what the function returns
                    # (project classes), not the function's own code -- an optimizer factory
                    # whose update functions hold constraints, and that reaches no Linen
                    # module, builds no model.
                    made = sorted(self.flows.instances([["c", e.model]], f"{module}:{e.scope}"))
                    if made:
                        model, others = made[0], tuple(made[1:])
                    elif not any(self.is_subclass(r, LINEN_MODULE)
                                 for r in self.reachable(model)):
                        continue
                    # (else a factory whose result the flow does not follow -- `return
                    # nn.vmap(MLP, ...)()` -- and that builds a Linen module: its code stands
                    # for the model, as it did)
            if model is None:
                continue
            if single and model.partition(":")[0] != module and \
                    self.runs_only_from(module, e.scope):
                # A program that never shards, running a model a library defines (a conversion
                # script): one device by design, whatever the model's annotations.
                continue
            needs = self._needs.get(model, 0)
            for other in others:
                needs &= self._needs.get(other, 0)
            if not needs:
                continue
            if e.kind == "nnx":
                if not self.is_subclass(model, NNX_MODULE):
                    continue
                # NNX names may be mesh axes: only the mesh is certainly needed.
                needs &= MESH
            elif self.is_subclass(model, NNX_MODULE):
                continue
            outer = self.context_of(module, e.scope)
            if outer is None:
                outer = ALL & ~absent
            missing = needs & ~(self._legacy_mesh_at(module, i, e.ctx) | outer)
            if missing:
                callers = [c for c in self.callers(module, e.scope) if c[1] & missing != missing]
                out.append(MissingContext(e, model, needs, missing, callers, others))
        return out


@dataclass
class MissingContext:
    entry: Entry
    model: str  # "module:Qualname" of the model class
    needs: int
    missing: int
    callers: list[tuple[str, int, str, int]]  # (caller, ctx, path, line) lacking the context
    others: tuple[str, ...] = ()  # the other classes a model handed in may be

    @property
    def model_name(self) -> str:
        return "`, `".join(m.partition(":")[2] for m in (self.model, *self.others))

    @property
    def handed(self) -> str | None:
        """How the model gets there, where a value holds it: "handed in as `model`"."""
        return held_as(self.entry.model)


def held_as(model: str) -> str | None:
    """How an entry's model held by a value (``summary.HANDED``) gets there, for messages."""
    if not model.startswith(HANDED):
        return None
    name = model.rpartition("#")[2]
    if model.startswith("#attr:"):
        return f"kept in `self.{name}`"
    head, dot, _ = name.partition(".")
    return f"kept in `{name}`, `{head}` handed in" if dot else f"handed in as `{name}`"


def project_callees(facts: FileFacts,
                    project: ProjectIndex) -> list[tuple[CallSite, ModuleSummary, str]]:
    """Calls of names imported from another module of the project: the call, that module's
    summary and the name's qualified name there (worked out once per file and index: the
    donation and jit rules both ask)."""
    held = facts.derived.get("project_callees")
    if held is not None and held[0] is project:
        return held[1]
    out = []
    names, star = facts.imports.names, facts.imports.star
    # (the cheap tests of _imported_callee first, here: this runs for every call of a file,
    # and most calls are of nothing imported)
    for c, q in each_call(facts, "imported_callee", lambda c: (
            c.api is None and c.root is not None and (star or c.root in names)
            and _imported_callee(facts, c)), local=True):
        target = project.resolve(f"ext:{q}", facts.module)
        if target is None:
            continue
        mod, _, qual = target.partition(":")
        summary = project.summaries.get(mod)
        if mod != facts.module and summary is not None:
            out.append((c, summary, qual))
    facts.derived["project_callees"] = (project, out)
    return out


def _imported_callee(facts: FileFacts, c: CallSite) -> str | None:
    """The dotted name a call's callee is imported as (``from train_lib import step``)."""
    root = c.root
    if c.api is not None or root is None:
        return None
    imports = facts.imports
    if root not in imports.names and not imports.star:
        return None  # (most calls: nothing imported by that name, so nothing to qualify)
    if c.scope.lookup(root) is not None:
        return None  # a local name: not the imported one
    return facts.qualify(c.node.func)
