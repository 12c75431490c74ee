"""Every fix shardlint offers on the real-code corpus, applied in a copy, compiled and run against
real jax releases.

For each materialised project (``bench/corpus.py``):

1. lint it (JSON) and count the fixes offered per rule and applicability (``display-only`` ones
   are shown to the user, never written);
2. copy the tree, apply every safe and unsafe fix (``shardlint check --fix --unsafe-fixes``) and
   compile every file the fixes changed (``compile(..., "exec")`` by this interpreter): a file
   that no longer compiles is a bug;
3. read what the fixes wrote: every call and ``with`` item on a changed line whose callee the
   file's imports resolve to a ``jax``/``flax``/``optax`` name, with its positional count and
   keyword names. In one interpreter per jax release of ``--jax`` (venvs under
   ``~/.cache/shardlint-fixes/venvs/<version>``, made with ``--make-venvs``) each such name is
   imported and its signature bound (``inspect.signature(...).bind(...)``) with the arguments
   written: the name must exist and accept them at the oldest and the newest of those releases
   inside the project's range (``versions.detect_map``: its oldest allowed jax and the one judged).
   A name of flax or optax is checked only where that interpreter has the package.

    python bench/fixes_run.py [--projects maxtext ...] [--jax 0.4.13 0.4.30 0.6.2 0.8.3]
                              [--make-venvs] [--json FILE]

Binding is not running the program: it proves that the API exists and takes what the fix passes
at that release. Each call shape is then run (4.) on tiny CPU values as the fix writes it
(`jax.jit(f, in_shardings=..., donate_argnums=0)(x)`, `with jax.set_mesh(mesh): ...`,
`jax.shard_map(f, mesh=..., in_specs=..., out_specs=...)`, `jax.tree.map(f, t, t)`): the
project's own code is not run (its dependencies are not installed here). Exit 1 when a fixed file
does not compile, or a fix's call does not bind or raises at a release inside its project's
range.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus import REPO, lint, projects  # noqa: E402

sys.path.insert(0, str(REPO))
from shardlint.semantics.catalog.versions import detect_map, parse  # noqa: E402

PACKAGES = ("jax", "flax", "optax")
DEFAULT_JAX = ("0.4.13", "0.4.30", "0.6.2", "0.8.3")
# jax 0.4.13 is the oldest release with a wheel for an interpreter this machine has (3.10);
# releases up to 0.6.2 install on 3.10, later ones need 3.11 or newer.
_OLD_PYTHON, _NEW_PYTHON = "3.10", "3.12"

_PROBE = r"""
import importlib, inspect, json, sys
calls = json.load(sys.stdin)
out = {}
def resolve(dotted):
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except Exception:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)
versions = {}
for pkg in ("jax", "flax", "optax"):
    try:
        versions[pkg] = getattr(importlib.import_module(pkg), "__version__", "")
    except Exception:
        pass
for key, (dotted, npos, keywords) in calls.items():
    if dotted.split(".")[0] not in versions:
        out[key] = ["skipped", f"{dotted.split('.')[0]} is not installed here"]
        continue
    try:
        obj = resolve(dotted)
    except Exception as exc:
        out[key] = ["missing", f"{type(exc).__name__}: {exc}"[:200]]
        continue
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        out[key] = ["ok", "no signature to bind"]
        continue
    try:
        sig.bind(*([None] * npos), **{k: None for k in keywords})
        out[key] = ["ok", ""]
    except TypeError as exc:
        if npos == 0 and not keywords:
            out[key] = ["ok", ""]  # a context manager entered as written: existence is what counts
        else:
            out[key] = ["rejects", str(exc)[:200]]
print(json.dumps({"versions": versions, "results": out}))
"""


# ---- a sample executed ---------------------------------------------------------------------------
# Each call shape the fixes write (callee, positional count, keywords), run on tiny CPU values the
# way the fix writes it: a program that raises is a fix that breaks at that release. Shapes
# without a runnable stand-in here are bound only (above).
_RUN = r"""
import json, sys, traceback
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
import contextlib, importlib
mesh = jax.sharding.Mesh(jax.devices()[:1], ("data",))
x = lambda: jnp.ones(4)  # (fresh each time: a donated argument is deleted)
tree = {"a": jnp.ones(2), "b": (jnp.zeros(3),)}
repl = NamedSharding(mesh, P())
ARGS = {"in_shardings": repl, "out_shardings": repl, "donate_argnums": 0,
        "donate_argnames": "y", "mesh": mesh, "in_specs": P(), "out_specs": P(),
        "axis": 0, "dtype": jnp.float32, "out_sharding": (None,)}

def tree_call(name, npos):
    fn = {"map": jax.tree.map, "leaves": jax.tree.leaves, "flatten": jax.tree.flatten,
          "structure": jax.tree.structure}[name]
    if name == "map":
        args = [lambda *a: a[0], tree, tree][:max(npos, 2)]
        return fn(*args)
    return fn(tree)

def in_mesh():
    return jax.set_mesh(mesh) if hasattr(jax, "set_mesh") else contextlib.nullcontext()

def run(callee, npos, keywords):
    if any(k not in ARGS for k in keywords):
        return NotImplemented
    kw = {k: ARGS[k] for k in keywords}
    if callee.startswith("jax.tree.") and callee.count(".") == 2:
        return tree_call(callee.rsplit(".", 1)[1], npos)
    if callee == "jax.jit":
        return jax.jit(lambda y: y * 2, **kw)(x())
    if callee == "jax.set_mesh":
        with jax.set_mesh(mesh):
            return jax.jit(lambda y: y + 1)(x())
    if callee == "jax.shard_map":
        return jax.jit(jax.shard_map(lambda y: y * 2, **kw))(x())
    if callee == "jax.checkpoint":
        return jax.checkpoint(lambda y: jnp.sin(y))(x())
    if callee == "flax.nnx.jit":
        from flax import nnx
        return nnx.jit(lambda y: y * 2, **kw)(x())
    if callee == "flax.nnx.Param":  # (written where the model is built: under a mesh)
        from flax import nnx
        with in_mesh():
            return nnx.Param(jnp.ones(2), **kw)
    if callee in ("flax.linen.logical_axis_rules", "flax.linen.partitioning.axis_rules"):
        module, _, name = callee.rpartition(".")
        with getattr(importlib.import_module(module), name)((("batch", "data"),)):
            return None
    return NotImplemented

out = {}
for key, (callee, npos, keywords) in json.load(sys.stdin).items():
    try:
        got = run(callee, npos, keywords)
        out[key] = ["ran", ""] if got is not NotImplemented else ["no stand-in", ""]
    except ImportError as exc:
        out[key] = ["skipped", f"{type(exc).__name__}: {exc}"[:200]]
    except Exception as exc:  # noqa: BLE001
        out[key] = ["raises", f"{type(exc).__name__}: {exc}"[:300]]
print(json.dumps(out))
"""


def _in_venv(version: str, program: str, calls: dict, timeout: int) -> dict | None:
    """``program`` run by the interpreter of jax ``version`` on ``calls`` (stdin, JSON); its
    last line of output, as JSON (None: no interpreter for that release)."""
    python = interpreter(version)
    if python is None:
        return None
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run([str(python), "-c", program], input=json.dumps(calls), env=env,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"jax {version}: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.splitlines()[-1])


def execute(version: str, calls: dict[str, tuple[str, int, list[str]]]) -> dict:
    got = _in_venv(version, _RUN, calls, 900)
    return {} if got is None else got


def venv_root() -> Path:
    return Path.home() / ".cache" / "shardlint-fixes" / "venvs"


def _running_jax() -> str | None:
    try:
        from importlib import metadata
        return metadata.version("jax")
    except Exception:  # noqa: BLE001
        return None


def interpreter(version: str) -> Path | None:
    """The venv made for ``version``, or this interpreter where it has that jax."""
    python = venv_root() / version / "bin" / "python"
    if python.is_file():
        return python
    return Path(sys.executable) if version == _running_jax() else None


def make_venv(version: str) -> None:
    if interpreter(version) is not None or version == _running_jax():
        return
    old = parse(version) <= (0, 6, 2)
    base = shutil.which(f"python{_OLD_PYTHON if old else _NEW_PYTHON}")
    if base is None:
        raise SystemExit(f"fixes_run: python{_OLD_PYTHON if old else _NEW_PYTHON} is needed for "
                         f"jax {version}")
    target = venv_root() / version
    subprocess.run([base, "-m", "venv", str(target)], check=True)
    # flax too, the newest release that allows this jax (pip's resolver picks it).
    pins = [f"jax=={version}", f"jaxlib=={version}", "flax"] + (["numpy<2"] if old else [])
    subprocess.run([str(target / "bin" / "python"), "-m", "pip", "install", "-q", *pins],
                   check=True)


# ---- what the fixes wrote ------------------------------------------------------------------
def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name -> dotted name, for the file's imports of jax, flax and optax."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in PACKAGES:
                    out[a.asname or a.name.split(".")[0]] = a.name if a.asname else \
                        a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] in PACKAGES:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *parts])


def written_calls(before: str, after: str) -> list[tuple[int, str, int, list[str]]]:
    """(line, dotted callee, positional count, keyword names) of each jax/flax/optax call on a
    line the fixes changed (a ``*args`` or ``**kwargs`` call is left out: its arity is not
    known)."""
    changed: set[int] = set()
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(),
                                      autojunk=False)
    for tag, _, _, j1, j2 in matcher.get_opcodes():
        if tag != "equal":
            changed.update(range(j1 + 1, j2 + 1))
    tree = ast.parse(after)
    aliases = _aliases(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or node.lineno not in changed:
            continue
        if any(isinstance(a, ast.Starred) for a in node.args) or \
                any(k.arg is None for k in node.keywords):
            continue
        dotted = _dotted(node.func, aliases)
        if dotted is not None:
            out.append((node.lineno, dotted, len(node.args), [k.arg for k in node.keywords
                                                               if k.arg]))
    for node in ast.walk(tree):  # every name on those lines must exist: `jax.tree` too
        if isinstance(node, ast.Attribute) and node.lineno in changed:
            dotted = _dotted(node, aliases)
            if dotted is not None and dotted.count(".") >= 1:
                out.append((node.lineno, dotted, 0, []))
    seen, unique = set(), []
    for item in out:
        key = (item[0], item[1], item[2], tuple(item[3]))
        if key not in seen:
            seen.add(key)
            unique.append(item)
    return unique


def _changed_files(original: Path, copy: Path) -> list[str]:
    out = []
    for path in sorted(copy.rglob("*.py")):
        rel = path.relative_to(copy)
        if ".shardlint_cache" in rel.parts:
            continue
        old = original / rel
        if not old.is_file() or old.read_bytes() != path.read_bytes():
            out.append(rel.as_posix())
    return out


def apply(tree: Path, work: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """Copy ``tree``, apply every fix there; (changed files, those that do not compile)."""
    copy = work / tree.name
    shutil.copytree(tree, copy, ignore=shutil.ignore_patterns(".shardlint_cache"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("SHARDLINT_FUZZ_CORPUS", None)
    proc = subprocess.run([sys.executable, "-m", "shardlint", "check", "--fix", "--unsafe-fixes",
                           "--no-cache", "--exit-zero", "--jobs", "1", "."], cwd=copy, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"--fix in {tree.name} exited {proc.returncode}: {proc.stderr[-2000:]}")
    changed = _changed_files(tree, copy)
    broken = []
    for rel in changed:
        try:
            compile((copy / rel).read_text(encoding="utf-8"), rel, "exec")
        except SyntaxError as exc:
            broken.append((rel, f"{exc.msg} at line {exc.lineno}"))
    return changed, broken


def bind(version: str, calls: dict[str, tuple[str, int, list[str]]]) -> dict:
    got = _in_venv(version, _PROBE, calls, 600)
    return {"versions": {}, "results": {}} if got is None else got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--projects", nargs="*")
    parser.add_argument("--jax", nargs="*", default=None,
                        help=f"the releases to bind at (default {' '.join(DEFAULT_JAX)} and "
                        "this interpreter's own jax)")
    parser.add_argument("--make-venvs", action="store_true",
                        help="create the missing venvs (pip, from the registry) first")
    parser.add_argument("--json", help="write every finding, file and binding here")
    args = parser.parse_args()
    if args.jax is None:
        args.jax = list(DEFAULT_JAX) + [v for v in [_running_jax()] if v]
    if args.make_venvs:
        for version in args.jax:
            make_venv(version)
    releases = sorted((v for v in args.jax if interpreter(v) is not None), key=parse)
    missing = [v for v in args.jax if interpreter(v) is None]
    if missing:
        print(f"no venv for jax {', '.join(missing)} (--make-venvs makes them)")
    offered: Counter = Counter()
    status = 0
    sites: list[dict] = []
    report: dict = {"projects": {}}
    with tempfile.TemporaryDirectory(prefix="shardlint-fixes-") as tmp:
        for tree in projects(args.projects):
            found = lint(tree, jobs=1)
            for f in found:
                if f.get("fix"):
                    offered[(f["code"], f["fix"]["applicability"])] += 1
            changed, broken = apply(tree, Path(tmp))
            report["projects"][tree.name] = {"changed": changed, "broken": broken}
            for rel, why in broken:
                print(f"DOES NOT COMPILE {tree.name}/{rel}: {why}")
                status = 1
            vmap = detect_map(tree)
            for rel in changed:
                before = (tree / rel).read_text(encoding="utf-8")
                after = (Path(tmp) / tree.name / rel).read_text(encoding="utf-8")
                if any(rel == b for b, _ in broken):
                    continue
                versions = vmap.for_path(tree / rel, tree)
                low, high = versions.oldest("jax"), versions.jax
                for line, dotted, npos, keywords in written_calls(before, after):
                    sites.append({"project": tree.name, "path": rel, "line": line,
                                  "callee": dotted, "positional": npos, "keywords": keywords,
                                  "range": [low, high]})
            print(f"{tree.name}: {len(changed)} file(s) changed by the fixes, "
                  f"{len(broken)} do not compile", flush=True)
    calls = {f"{s['callee']}|{s['positional']}|{','.join(s['keywords'])}":
             (s["callee"], s["positional"], s["keywords"]) for s in sites}
    bound = {v: bind(v, calls) for v in releases}
    # Only calls (not bare names) are run: a shape with arguments or the callee of a `with`.
    runnable = {k: c for k, c in calls.items() if c[1] or c[2] or c[0] in (
        "jax.set_mesh", "flax.linen.logical_axis_rules", "flax.linen.partitioning.axis_rules")}
    executed = {v: execute(v, runnable) for v in releases}
    ran: Counter = Counter()
    raised: dict[tuple[str, str], list[dict]] = defaultdict(list)
    failures: dict[tuple[str, str], list[dict]] = defaultdict(list)
    checked = Counter()
    for s in sites:
        key = f"{s['callee']}|{s['positional']}|{','.join(s['keywords'])}"
        low, high = s["range"]
        inside = [v for v in releases if parse(low) <= parse(v) <= parse(high)]
        ends = sorted({inside[0], inside[-1]}, key=parse) if inside else []
        s["checked"] = {}
        s["ran"] = {}
        for v in ends:
            state, why = bound[v]["results"].get(key, ["skipped", "not probed"])
            s["checked"][v] = [state, why]
            checked[state] += 1
            if state in ("missing", "rejects"):
                failures[(key, v)].append(s)
                status = 1
            if key in runnable:
                done, why = executed[v].get(key, ["skipped", "not run"])
                s["ran"][v] = [done, why]
                ran[done] += 1
                if done == "raises":
                    raised[(key, v)].append(s)
                    status = 1
    print()
    print("fixes offered on the corpus (rule, applicability):")
    for (code, how), n in sorted(offered.items()):
        print(f"  {code} {how:13s} {n}")
    print(f"calls and names the applied fixes wrote: {len(sites)} ({len(calls)} distinct), "
          f"checked at the oldest and newest of jax {', '.join(releases)} inside each "
          f"project's range: " + ", ".join(f"{k} {v}" for k, v in sorted(checked.items())))
    print(f"the same calls run on tiny CPU values at those releases ({len(runnable)} distinct "
          f"shapes with arguments): " + ", ".join(f"{k} {v}" for k, v in sorted(ran.items())))
    for (key, version), where in sorted(raised.items()):
        first = where[0]
        print(f"  RAISES at jax {version}: {key.replace('|', ' ')} "
              f"({executed[version][key][1]}); {len(where)} site(s), e.g. "
              f"{first['project']}/{first['path']}:{first['line']}")
    for (key, version), where in sorted(failures.items()):
        state, why = bound[version]["results"][key]
        first = where[0]
        print(f"  {state.upper()} at jax {version}: {key.replace('|', ' ')} ({why}); "
              f"{len(where)} site(s), e.g. {first['project']}/{first['path']}:{first['line']} "
              f"(range {first['range'][0]}..{first['range'][1]})")
    if args.json:
        report.update(sites=sites, offered={f"{c} {h}": n for (c, h), n in offered.items()},
                      versions={v: bound[v]["versions"] for v in releases})
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")
    return status


if __name__ == "__main__":
    sys.exit(main())
