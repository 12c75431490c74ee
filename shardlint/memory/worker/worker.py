"""The process that imports user code: `python worker.py REQUEST.json EVENTS.jsonl`.

Runs in a subprocess of the user's interpreter (the one that has jax), never in shardlint's own
process or the language server. It is started by path rather than `-m` so that it works in an
interpreter where shardlint itself is not installed, and it imports nothing but the standard
library until jax. (`python -m shardlint.memory.worker.worker` works too where shardlint is
installed.)

Protocol: the request is a JSON file; events are JSON lines appended to EVENTS.jsonl, never
written to stdout, because user code may print there. The parent fixes the device count
(XLA_FLAGS / JAX_PLATFORMS) before this process starts, enforces the time and memory limits, and
kills this process's group (its session) to cancel and whenever this process has ended, so that
nothing a probe started outlives it; if the parent dies first, this process does that itself.

Events: hello (jax imported) | fatal (nothing can run: no jax, wrong device count) |
begin / stage / result (one probe) | end (reason "done", or "fresh-process" when the next probe
needs a clean process because device peak counters only grow).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import os
import platform
import signal
import sys
import threading
import time
import traceback
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
_TARGET: list[Any] = []  # the TPU topology of `--target`, once installed (target.py)
_PRINTED_LIMIT = 8000


class EventWriter:
    """Appends one JSON line per event; reopened each time so every line is on disk when written."""

    def __init__(self, path: str) -> None:
        self._path = path

    def write(self, **event: Any) -> None:
        with open(self._path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(event, default=str) + "\n")


def _load_path(name: str, path: str) -> Any:
    """A module of shardlint's by its file path (the parent sends it), under a private name."""
    spec = importlib.util.spec_from_file_location(f"_shardlint_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _load_sibling(name: str) -> Any:
    # By path and under a private name: shardlint need not be importable here, and a user
    # module called `step_facts` can never shadow ours (or ours theirs).
    spec = importlib.util.spec_from_file_location(
        f"_shardlint_{name}", os.path.join(_HERE, f"{name}.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def import_probe_module(path: str) -> Any:
    """Import a probe file the way Python would import it from its package root."""
    path = os.path.abspath(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    parts, root = [stem], os.path.dirname(path)
    while os.path.isfile(os.path.join(root, "__init__.py")):
        parts.insert(0, os.path.basename(root))
        root = os.path.dirname(root)
    if root not in sys.path:
        sys.path.insert(0, root)
    name = ".".join(parts)
    loaded = sys.modules.get(name)
    if loaded is not None and os.path.abspath(getattr(loaded, "__file__", "") or "") == path:
        return loaded
    if len(parts) > 1 and loaded is None:
        return importlib.import_module(name)  # relative imports inside the package keep working
    if loaded is not None:  # two probe files with the same name in one worker
        name = f"_shardlint_probe_{len(sys.modules)}_{stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and flax modules look themselves up here
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def _is_ours(filename: str) -> bool:
    return filename.startswith(_HERE + os.sep) or "importlib._bootstrap" in filename


def _is_library(filename: str) -> bool:
    return (
        "site-packages" in filename or "dist-packages" in filename or filename.startswith("<frozen")
    )


def _shown(filename: str) -> str:
    shown = os.path.relpath(filename) if os.path.isabs(filename) else filename
    return filename if shown.startswith("..") else shown


def _format_frames(stack: traceback.StackSummary) -> list[str]:
    lines: list[str] = []
    hidden = 0
    for frame in stack:
        if _is_ours(frame.filename):
            continue
        if _is_library(frame.filename):
            hidden += 1
            continue
        if hidden:
            lines.append(f"  [{hidden} library frame{'s' if hidden > 1 else ''} hidden]\n")
            hidden = 0
        lines.append(f'  File "{_shown(frame.filename)}", line {frame.lineno}, in {frame.name}\n')
        if frame.line:
            lines.append(f"    {frame.line.strip()}\n")
    if hidden:
        lines.append(f"  [{hidden} library frame{'s' if hidden > 1 else ''} hidden]\n")
    return lines


def user_traceback(exc: BaseException) -> str:
    """The user's frames only: shardlint's own frames are dropped, library runs collapsed."""
    chain: list[tuple[traceback.TracebackException, str]] = []
    te: traceback.TracebackException | None = traceback.TracebackException.from_exception(exc)
    sentence = ""
    while te is not None and len(chain) < 8:
        chain.append((te, sentence))
        if te.__cause__ is not None:
            te, sentence = (
                te.__cause__,
                "The above exception was the direct cause of the following exception:",
            )
        elif te.__context__ is not None and not te.__suppress_context__:
            te, sentence = (
                te.__context__,
                "During handling of the above exception, another exception occurred:",
            )
        else:
            te = None
    lines: list[str] = []
    for te, sentence in reversed(chain):
        if sentence:
            lines.append(f"\n{sentence}\n\n")
        frames = _format_frames(te.stack)
        if frames:
            lines.append("Traceback (most recent call last):\n")
            lines.extend(frames)
        lines.extend(te.format_exception_only())
    return "".join(lines).rstrip("\n")


class StdoutCapture(io.TextIOBase):
    """Stands in for sys.stdout while a probe runs: keeps the text and where it was first written.

    stdout belongs to shardlint (a `--format json` report goes there), so a probe that prints is
    an error of that probe; the stack at the first write lets the message point at the print call.
    Only Python-level writes are seen: `os.write(1, ...)` goes to the worker's log instead.
    """

    def __init__(self, state: dict[str, str]) -> None:
        super().__init__()
        self._state = state  # the probe's current stage, kept up to date by run_probe
        self._parts: list[str] = []
        self._size = 0
        self.first_stack: traceback.StackSummary | None = None
        self.first_stage = ""

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        if text and self.first_stack is None:
            self.first_stack = traceback.extract_stack(sys._getframe(1))
            self.first_stage = self._state["stage"]
        if self._size < _PRINTED_LIMIT * 2:  # a probe printing in a loop must not fill memory
            self._parts.append(text)
            self._size += len(text)
        return len(text)

    def getvalue(self) -> str:
        return "".join(self._parts)

    def where(self) -> str | None:
        """`file:line in function` of the innermost user frame at the first write (best effort)."""
        if self.first_stack is None:
            return None
        for frame in reversed(self.first_stack):
            if not _is_ours(frame.filename) and not _is_library(frame.filename):
                return f"{_shown(frame.filename)}:{frame.lineno} in {frame.name}"
        return None


def printed_error(probe: dict[str, Any], capture: StdoutCapture) -> dict[str, Any]:
    text = capture.getvalue()
    lines = text.splitlines() or [repr(text)]
    shown = "\n".join(f"  | {line}" for line in lines[:5])
    more = f"\n  ... ({len(lines) - 5} more lines)" if len(lines) > 5 else ""
    where = capture.where()
    message = (
        f"{probe['function']} printed to stdout"
        + (f" at {where}" if where else "")
        + "; probes must not print to stdout (stdout carries shardlint's report): write to "
        "sys.stderr or use logging instead. It printed:\n" + shown + more
    )
    stack = capture.first_stack
    frames = "".join(_format_frames(stack)) if stack is not None else ""
    error: dict[str, Any] = {"kind": "printed", "stage": capture.first_stage, "message": message}
    if frames:
        error["traceback"] = "First write to stdout (most recent call last):\n" + frames.rstrip()
    return error


def run_probe(
    probe: dict[str, Any],
    request: dict[str, Any],
    events: EventWriter,
    facts: Any,
    peak: Any,
    remedies: Any = None,
    active: list[dict[str, Any]] | None = None,
    quiet: bool = False,
    on_compiled: Any = None,
) -> dict[str, Any]:
    """One call of the probe and one compile of what it returns. With ``remedies``: the
    remedies ``active`` are in force (a what-if run, which never runs the step), and the
    baseline run (``active`` empty) tells them the mesh it placed values on. ``quiet``: no
    stage events (a what-if run is not the probe's progress). ``on_compiled`` is handed the
    compiled step (the fit search reads its collectives)."""
    key = probe["key"]
    state = {"stage": "import"}

    def on_stage(stage: str) -> None:
        state["stage"] = stage
        if not quiet:
            events.write(event="stage", probe=key, stage=stage)

    printed = StdoutCapture(state)
    started = time.perf_counter()
    try:
        with contextlib.redirect_stdout(printed):
            on_stage("import")
            module = import_probe_module(probe["path"])
            fn = getattr(module, probe["function"], None)
            if not callable(fn):
                raise facts.ReturnError(f"{probe['function']} is not a function in {probe['path']}")
            on_stage("call")
            nothing = contextlib.nullcontext
            with remedies.applied(active or []) if remedies is not None else nothing():
                early = remedies is not None and remedies.traces_in_call()
                counted = remedies.compiles if remedies is not None else 0
                called = time.perf_counter()
                with remedies.contexts() if early else nothing():
                    value = fn()
                call_s = time.perf_counter() - called
                in_call = remedies.compiles - counted if remedies is not None else 0
                compiled: list[Any] = []
                with remedies.contexts() if remedies is not None and not early else nothing(), \
                        _TARGET[0].lowering() if _TARGET else nothing():
                    result = facts.analyse(
                        value,
                        on_stage=on_stage,
                        measure="never" if active else request.get("measure", "auto"),
                        measure_peak=peak.measure_peak,
                        on_compiled=compiled.append,
                    )
                if on_compiled is not None and compiled:
                    on_compiled(compiled[0])
            if remedies is not None:
                # Backend compiles of this run: the probe's own eager code, and the step.
                result["compiles"] = {"probe": in_call,
                                      "step": remedies.compiles - counted - in_call}
            if remedies is not None and not active:
                remedies.kind = result.get("kind", "")
                meshes = remedies.meshes_of(value, compiled[0]) if compiled else []
                remedies.mesh = meshes[0] if len(meshes) == 1 else None
                remedies.mesh_count = len(meshes)
            if remedies is not None and active:
                missing = [r for r in active if r["id"] not in remedies.used]
                if missing:
                    raise remedies.NotApplicable(_not_reached(missing[-1]))
        if printed.first_stack is not None:
            error = printed_error(probe, printed)
            return {"ok": False, "error": error, "printed": printed.getvalue()[-_PRINTED_LIMIT:]}
        # call_s includes tracing and lowering when the probe returns a Lowered itself.
        result["timings"]["call_s"] = round(call_s, 3)
        result["timings"]["probe_s"] = round(time.perf_counter() - started, 3)
        return {"ok": True, "facts": result, "printed": ""}
    except facts.ReturnError as exc:
        error = {"kind": "bad-return", "stage": state["stage"], "message": str(exc)}
    except BaseException as exc:  # noqa: BLE001 - anything the user's code raises is reported
        if remedies is None or not isinstance(exc, remedies.NotApplicable):
            return _raised(exc, state, printed)
        error = {"kind": "not-applicable", "stage": state["stage"], "message": str(exc)}
    return {"ok": False, "error": error, "printed": printed.getvalue()[-_PRINTED_LIMIT:]}


def _on_target(result: dict[str, Any], topology: Any) -> None:
    """A result compiled for a TPU topology: the TPU compiler's figures, or what a value made
    on its compile-only devices raised, said with the line that made it and the way out."""
    if result.get("ok"):
        result["facts"]["backend"] = "tpu"
        result["facts"]["target"] = topology.describe()
        return
    error = result.get("error") or {}
    target = _load_sibling("target")
    refused = target.compiler_refusal(error.get("message", ""))
    lowered = error.pop("lowered", None)
    if error.get("kind") == "raised" and refused is not None:
        # The TPU compiler refuses a program that cannot fit its device: that is the answer.
        error["kind"] = "does-not-fit"
        error["needs"] = refused
        if lowered is not None:
            error["facts"] = _refused_facts(lowered, refused, topology)
        error["message"] = (
            f"does not fit {topology.name}: the TPU compiler refuses it, its "
            f"{refused['what']} alone need {refused['needs']} of the {refused['available']} a "
            "device has")
        error.pop("traceback", None)
        return
    if error.get("kind") != "raised" or not target.concrete_error(error.get("message", "")):
        return
    frames = [line.strip() for line in (error.get("traceback") or "").splitlines()
              if line.strip().startswith('File "')]
    where = frames[-1].replace('File "', "").replace('", line ', ":").split(",")[0] \
        if frames else error.get("stage", "the probe")
    error["kind"] = "concrete-on-target"
    error["message"] = (
        f"{where} makes a concrete value under a mesh of {topology.name}'s devices, which exist "
        "only for the TPU compiler on this host, so nothing can run on them "
        f"({error.get('message', '').splitlines()[0][:200]}). Make the value outside the "
        "`with jax.set_mesh(...)` block, or pass an abstract one: a `jax.ShapeDtypeStruct`, "
        "`jax.eval_shape(...)` of what makes it (a key: `jax.eval_shape(lambda: "
        "jax.random.key(0))`)")


def _refused_facts(lowered: dict[str, Any], refused: dict[str, Any],
                   topology: Any) -> dict[str, Any]:
    """A refused step's figures, as far as they are known: its arguments and outputs from their
    shardings, the temporaries the compiler said it needed (a floor: it stopped counting
    there). What `--fit` starts from; never reported as the step's peak."""
    args = [leaf for leaf in lowered["leaves"] if leaf["role"] == "arg" and leaf["devices"]]
    outs = [leaf for leaf in lowered["leaves"] if leaf["role"] == "out"]
    free = {}  # donated arguments an output of the same shape may reuse
    for leaf in args:
        if leaf["donated"]:
            key = (tuple(leaf["shape"]), leaf["dtype"], leaf["per_device"])
            free[key] = free.get(key, 0) + 1
    alias = 0
    for leaf in outs:
        key = (tuple(leaf["shape"]), leaf["dtype"], leaf["per_device"])
        if free.get(key):
            free[key] -= 1
            alias += leaf["per_device"]
    temp = refused["needs_bytes"] if refused["what"] == "HLO temporaries" else 0
    memory = {"argument": sum(leaf["per_device"] for leaf in args),
              "output": sum(leaf["per_device"] for leaf in outs), "alias": alias,
              "temp": temp, "generated_code": None, "peak": None}
    return {**lowered, "memory": memory, "refused": refused, "backend": "tpu",
            "target": topology.describe()}


def _not_reached(remedy: dict[str, Any]) -> str:
    where = f"{os.path.basename(remedy['path'])}:{remedy['line']}"
    if remedy["kind"] in ("donate", "out-shardings"):
        return f"the probe did not reach the jit call at {where} (no jax.jit called from there)"
    return f"the remedy at {where} did not apply"


def _raised(exc: BaseException, state: dict[str, str], printed: StdoutCapture) -> dict[str, Any]:
    """What the user's code raised, with its own frames only."""
    error = {
        "kind": "memory" if isinstance(exc, MemoryError) else "raised",
        "stage": state["stage"],
        "exception": type(exc).__name__,
        "message": f"{type(exc).__name__}: {exc}".strip(),
        "traceback": user_traceback(exc),
    }
    # The step's leaves, where only the compile failed (a step the TPU compiler refuses).
    lowered = getattr(exc, "shardlint_lowered", None)
    if lowered is not None:
        error["lowered"] = lowered
    return {"ok": False, "error": error, "printed": printed.getvalue()[-_PRINTED_LIMIT:]}


def _exit_with_parent() -> None:
    """Exit when shardlint goes away (an editor crash, a killed terminal): never run orphaned,
    and leave nothing the probe started running either, since no parent is left to clean up."""
    parent = os.getppid()
    try:  # read before user code runs, which may change os.environ
        process = _load_sibling("process")
        marker = os.environ.get(process.MARKER_VAR)
    except Exception:  # noqa: BLE001 - still exit with the parent, just without the sweep
        process, marker = None, None

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        try:
            if process is not None and marker:
                process.sweep(marker, skip=os.getpid())  # those that left the group (Linux)
            if hasattr(os, "killpg") and os.getpgrp() == os.getpid():
                # Our own group (the parent started us with a new session): us and what the
                # probe started. Not when run by hand inside someone else's group.
                os.killpg(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(4)

    threading.Thread(target=watch, name="shardlint-parent-watch", daemon=True).start()


def main(argv: list[str]) -> int:
    _exit_with_parent()
    if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE:
        sys.path.pop(0)  # started by path: our folder must not shadow the user's modules
    if len(argv) != 2:
        print("usage: worker.py REQUEST.json EVENTS.jsonl", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as handle:
        request = json.load(handle)
    events = EventWriter(argv[1])
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)  # like `python -m`: the project's own modules are importable
    started = time.perf_counter()
    base = {"python": sys.executable, "python_version": platform.python_version()}
    try:
        import jax
    except BaseException as exc:  # noqa: BLE001 - a broken jax install is reported, not raised
        events.write(
            event="fatal", kind="jax-missing", message=f"{type(exc).__name__}: {exc}", **base
        )
        return 3
    topology = None
    if request.get("target"):  # before any user module: the probe sees the topology's devices
        target = _load_sibling("target")
        try:
            topology = target.install(request["target"], int(request["device_count"]))
        except target.TargetError as exc:
            events.write(event="fatal", kind="target", message=str(exc), **base)
            return 3
        except BaseException as exc:  # noqa: BLE001 - libtpu failing to load is reported too
            events.write(event="fatal", kind="target",
                         message=f"libtpu could not describe {request['target']}: "
                         f"{type(exc).__name__}: {exc}", **base)
            return 3
        base["target"] = topology.describe()
        _TARGET.append(topology)
    try:
        devices = jax.devices()
    except BaseException as exc:  # noqa: BLE001
        events.write(event="fatal", kind="backend", message=f"{type(exc).__name__}: {exc}", **base)
        return 3
    facts = _load_sibling("step_facts")
    peak = _load_sibling("device_peak")
    events.write(
        event="hello",
        jax=jax.__version__,
        backend="tpu" if topology is not None else jax.default_backend(),
        device_count=len(devices),
        device_kind=devices[0].device_kind,
        import_s=round(time.perf_counter() - started, 3),
        **base,
    )
    wanted = int(request["device_count"])
    if len(devices) != wanted:
        events.write(
            event="fatal",
            kind="device-count",
            message=f"asked for {wanted} devices, "
            f"the {jax.default_backend()} backend has {len(devices)}",
            **base,
        )
        return 3
    probes: list[dict[str, Any]] = request["probes"]
    remedies = None
    if any(p.get("whatif") for p in probes):
        remedies = _load_sibling("remedies").Remedies()  # wraps jax.jit before user code runs
        remedies.count_compiles()
        remedies.planned = [r for p in probes for r in p.get("whatif", ())
                            if r["kind"] in ("donate", "out-shardings")]
    fitting = hooks = None
    fit_path = next((p["fit"]["module"] for p in probes if p.get("fit")), None)
    if fit_path:  # `--fit`: its mesh and rules hooks go in before any user module is imported
        fitting = _load_path("fit_search", fit_path)
        hooks = fitting.install()
    for probe in probes:
        events.write(event="begin", probe=probe["key"])
        kept: list[Any] = []
        result = run_probe(probe, request, events, facts, peak, remedies,
                           on_compiled=kept.append if probe.get("fit") else None)
        if topology is not None:
            _on_target(result, topology)
        else:
            (result.get("error") or {}).pop("lowered", None)
        cached = False
        if result.get("ok") and remedies is not None and probe.get("whatif"):
            fingerprint = result["facts"]["whatif_fingerprint"] = _fingerprint(result["facts"])
            cached = fingerprint == probe.get("whatif_cached")
            result["facts"]["whatif_cached"] = cached
        events.write(event="result", probe=probe["key"], **result)
        if result.get("ok") and remedies is not None and probe.get("whatif") and not cached:
            run_whatifs(probe, request, events, facts, peak, remedies)
        base = result["facts"] if result.get("ok") else (result.get("error") or {}).get("facts")
        if base is not None and fitting is not None and probe.get("fit"):
            # A step the TPU compiler refuses starts the search from what it said it needs.
            run_fit(probe, request, events, facts, peak, fitting, hooks, base, kept, topology)
        if result.get("ok") and result["facts"].get("measured", {}).get("available"):
            events.write(event="end", reason="fresh-process", **_rusage())
            return 0
    events.write(event="end", reason="done", **_rusage())
    return 0


def run_whatifs(probe: dict[str, Any], request: dict[str, Any], events: EventWriter, facts: Any,
                peak: Any, remedies: Any) -> None:
    """The probe compiled again once per remedy, each run with the remedies before it that
    applied: one `whatif` event per remedy, with the figures or why it could not apply."""
    applied: list[dict[str, Any]] = []
    for remedy in probe.get("whatif", ()):
        if remedy["kind"] == "mesh" and remedies.mesh is None:
            count = getattr(remedies, "mesh_count", 0)
            why = ("no mesh to enter: the probe places none of its inputs or outputs on a mesh"
                   if not count else f"the probe places values on {count} different meshes: "
                   "which one to enter is not known")
            events.write(event="whatif", probe=probe["key"], id=remedy["id"], ok=False,
                         error={"kind": "not-applicable", "message": why})
            continue
        compiles = remedies.compiles
        result = run_probe(probe, request, events, facts, peak, remedies, [*applied, remedy],
                           quiet=True)
        total = remedies.compiles - compiles  # every backend compile of this run
        if result.get("ok"):
            applied.append(remedy)
            got = result["facts"]
            events.write(event="whatif", probe=probe["key"], id=remedy["id"], ok=True,
                         memory=got.get("memory"), devices_used=got.get("devices_used"),
                         compile_s=got.get("timings", {}).get("compile_s"),
                         compiles={"total": total, **got.get("compiles", {})})
        else:
            events.write(event="whatif", probe=probe["key"], id=remedy["id"], ok=False,
                         error=result.get("error"), compiles={"total": total})


def run_fit(probe: dict[str, Any], request: dict[str, Any], events: EventWriter, facts: Any,
            peak: Any, fitting: Any, hooks: Any, base: dict[str, Any], kept: list[Any],
            topology: Any = None) -> None:
    """`--fit`: the planner's compiles (memory/plan/search.py), one `fit` event with its plans.
    A candidate the TPU compiler refuses counts as measured, with the figures it refused."""
    quiet = {**request, "measure": "never"}  # a candidate is compiled, never run

    def compile_once() -> tuple[Any, Any]:
        got: list[Any] = []
        result = run_probe(probe, quiet, events, facts, peak, quiet=True, on_compiled=got.append)
        if topology is not None:
            _on_target(result, topology)
        if not result.get("ok"):
            error = result.get("error") or {}
            if error.get("facts") is not None:
                return error["facts"], None
            return None, error.get("message", "the compile failed")
        return result["facts"], got[0] if got else None

    try:
        payload = fitting.search(probe["fit"], base, hooks, compile_once, kept[0] if kept else None,
                                 lambda: import_probe_module(probe["path"]))
    except Exception as exc:  # noqa: BLE001 - the figures stand without a plan
        payload = {"status": "error", "message": f"{type(exc).__name__}: {exc}",
                   "traceback": traceback.format_exc()[-4000:]}
    events.write(event="fit", probe=probe["key"], **payload)


def _fingerprint(got: dict[str, Any]) -> str:
    """The baseline compile as far as what-ifs depend on it: jax, the backend, the figures."""
    import hashlib

    import jax

    text = json.dumps([jax.__version__, got.get("backend"), got.get("device_kind"),
                       got.get("memory"), len(got.get("leaves", ()))], sort_keys=True,
                      default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _rusage() -> dict[str, int]:
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # Linux reports KiB, macOS bytes.
        return {"max_rss": peak if sys.platform == "darwin" else peak * 1024}
    except (ImportError, OSError):
        return {}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
