"""Language server latency, driven over stdio like an editor.

    python bench/lsp_latency.py [--edits 60] [--files 300] [--lines 2000] [--edit body]

1. Opens a generated 2,000-line Flax model file and types into it (``--edit``: in a function
   body, an empty line in the middle, or in a module-level constant): p50/p95 milliseconds from a
   ``didChange`` to the ``publishDiagnostics`` for that version (push, debounce set to 0 so it is
   excluded), and from a ``didChange`` to the answer of a ``textDocument/diagnostic`` (pull).
   Then the same edits in process (what the server adds is the difference), and a fixed ~5 ms
   CPU task at the same rhythm: how much the machine itself stalls.
2. Starts the server on a generated 300-file project: seconds from ``initialized`` to the end of
   the indexing ``$/progress``, cold (no cache) and warm (the on-disk cache of a previous run).

Targets on a 2-core machine: p95 <= 50 ms, index <= 5 s.

``--real``: the seed example and the three real model files of the benchmark corpus with the
largest classes instead, typed into within their package; then the server's memory once it has
indexed the largest package of the corpus (easydel), and after its largest file is opened
(target: 400 MiB).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

SERVER = [sys.executable, "-m", "shardlint", "server"]
BLOCK = '''

class Block{i}(nn.Module):
    features: int = 256

    @nn.compact
    def __call__(self, x):
        init = nn.with_logical_partitioning(nn.initializers.lecun_normal(), ("embed", "mlp"))
        h = nn.Dense(self.features, kernel_init=init)(x)
        h = nn.with_logical_constraint(h, ("batch", "mlp"))
        h = nn.gelu(h)
        out = nn.Dense(x.shape[-1])(h)
        return nn.with_logical_constraint(out + x, ("batch", "embed"))
'''
HEAD = '''"""A generated model file for the latency benchmark."""

import jax
import jax.numpy as jnp
import flax.linen as nn

RULES = (("batch", "data"), ("embed", None), ("mlp", "model"))
'''
TAIL = '''

class Model(nn.Module):
    depth: int = {n}

    @nn.compact
    def __call__(self, x):
{calls}
        return x


def make(key):
    mesh = jax.make_mesh((1, 1), ("data", "model"))
    x = jnp.ones((8, 64))
    with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):
        abstract = jax.eval_shape(Model().init, key, x)
        shardings = nn.logical_to_mesh_sharding(nn.get_partition_spec(abstract), mesh, RULES)
        return jax.jit(Model().init, out_shardings=shardings)(key, x)


params = make(jax.random.key(0))
'''


def model_file(lines: int = 2000) -> str:
    blocks, n = [], 0
    while len((HEAD + "".join(blocks)).splitlines()) < lines - 30 - n:
        blocks.append(BLOCK.format(i=n))
        n += 1
    calls = "\n".join(f"        x = Block{i}()(x)" for i in range(n))
    return HEAD + "".join(blocks) + TAIL.format(n=n, calls=calls)


def project_files(n: int) -> dict[str, str]:
    """A project of ``n`` Python files in 10 packages: layers, models built from them, training
    scripts that run the models under rules and a mesh."""
    files = {"pyproject.toml": "[project]\nname = 'bench'\n"}
    for i in range(n - 10):
        pkg = f"pkg{i % 10}"
        files.setdefault(f"{pkg}/__init__.py", "")
        if i % 3 == 0:
            files[f"{pkg}/layers_{i}.py"] = HEAD + "".join(BLOCK.format(i=j) for j in range(8))
        elif i % 3 == 1:
            prev = f"{pkg}.layers_{i - 1}"
            files[f"{pkg}/model_{i}.py"] = (
                f"import flax.linen as nn\nfrom {prev} import Block0, Block1\n\n\n"
                "class Model(nn.Module):\n    @nn.compact\n    def __call__(self, x):\n"
                "        return Block1()(Block0()(x))\n")
        else:
            prev = f"{pkg}.model_{i - 1}"
            files[f"{pkg}/train_{i}.py"] = (
                f"import jax\nimport flax.linen as nn\nfrom {prev} import Model\n\n"
                "RULES = ((\"batch\", \"data\"), (\"embed\", None), (\"mlp\", None))\n\n\n"
                "def main():\n    mesh = jax.make_mesh((1,), (\"data\",))\n"
                "    with jax.set_mesh(mesh), nn.logical_axis_rules(RULES):\n"
                "        return jax.jit(Model().init)(jax.random.key(0), jax.numpy.ones((8, 4)))\n")
    return files


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")


class Client:
    def __init__(self) -> None:
        self.lsp = LanguageClient("shardlint-bench", "1")
        self.published: dict[tuple[str, int | None], float] = {}
        self.progress_end: float | None = None
        self.arrived = asyncio.Event()  # set on every publishDiagnostics (no busy polling:
        # on 2 cores a polling client takes the CPU the server needs)

        @self.lsp.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_publish(params: types.PublishDiagnosticsParams) -> None:
            self.published[(params.uri, params.version)] = time.perf_counter()
            self.arrived.set()

        @self.lsp.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
        def on_create(params) -> None:
            return None

        @self.lsp.feature(types.PROGRESS)
        def on_progress(params: types.ProgressParams) -> None:
            value = params.value if isinstance(params.value, dict) else {}
            if value.get("kind") == "end":
                self.progress_end = time.perf_counter()

        @self.lsp.feature(types.WINDOW_LOG_MESSAGE)
        def on_log(params) -> None:
            return None

    async def start(self, root: Path, pull: bool, options: dict | None = None) -> float:
        await self.lsp.start_io(*SERVER)
        caps = types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True))
        if pull:
            caps.text_document = types.TextDocumentClientCapabilities(
                diagnostic=types.DiagnosticClientCapabilities())
        await self.lsp.initialize_async(types.InitializeParams(
            capabilities=caps, root_uri=root.as_uri(), initialization_options=options,
            workspace_folders=[types.WorkspaceFolder(root.as_uri(), root.name)]))
        t0 = time.perf_counter()
        self.lsp.initialized(types.InitializedParams())
        return t0

    async def stop(self) -> None:
        await self.lsp.shutdown_async(None)
        self.lsp.exit(None)
        await self.lsp.stop()

    async def published_for(self, uri: str, version: int, timeout: float = 60) -> float:
        end = time.perf_counter() + timeout
        while (uri, version) not in self.published:
            self.arrived.clear()
            if (uri, version) in self.published:
                break
            left = end - time.perf_counter()
            if left <= 0:
                raise TimeoutError(f"no diagnostics for version {version}")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.arrived.wait(), left)
        return self.published[(uri, version)]


def percentiles(ms: list[float]) -> str:
    q = statistics.quantiles(ms, n=20, method="inclusive")
    return f"p50 {statistics.median(ms):6.1f} ms   p95 {q[18]:6.1f} ms   max {max(ms):6.1f} ms"


EDITS = {
    "body": "type and delete '#' at the start of a line in the middle of the file",
    "newline": "insert and delete an empty line in the middle (the statements after it move)",
    "constant": "type and delete a letter in the RULES table at the top (a module-level name "
                "other statements read)",
    "type": "type a statement character by character into the body of the longest method of "
            "a class (then delete the line and type it again)",
}
STATEMENT = "h = jnp.einsum('bd,df->bf', x, self.kernel) * scale  # typed"


def method_line(text: str) -> tuple[int, int]:
    """(0-based line, indent) of the first body line of the longest method of a class."""
    import ast

    best = None
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    size = item.end_lineno - item.lineno
                    first = item.body[0]
                    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                            and len(item.body) > 1:
                        first = item.body[1]  # after the docstring
                    if best is None or size > best[0]:
                        best = (size, first.lineno - 1, first.col_offset)
    if best is None:
        raise SystemExit("no method in a class to type into")
    return best[1], best[2]


def edits(text: str, n: int, kind: str = "body"):
    """``n`` alternating edits of one kind (see ``EDITS``): (range, new text) changes."""
    lines = text.splitlines()
    if kind == "type":
        yield from typing(text, n)
        return
    line = len(lines) // 2
    if kind == "constant":
        line = next(i for i, t in enumerate(lines) if t.startswith("RULES = "))
    col = lines[line].index('"model"') + 2 if kind == "constant" else 0
    for i in range(n):
        if kind == "newline":
            end = types.Position(line, 0) if i % 2 == 0 else types.Position(line + 1, 0)
            yield types.Range(types.Position(line, 0), end), "\n" if i % 2 == 0 else ""
        elif i % 2 == 0:
            yield types.Range(types.Position(line, col), types.Position(line, col)), \
                "x" if kind == "constant" else "#"
        else:
            yield types.Range(types.Position(line, col), types.Position(line, col + 1)), ""


def typing(text: str, n: int):
    """A new line before the first statement of the longest method, then ``STATEMENT`` typed
    into it one character at a time; the line is deleted and retyped until ``n`` changes."""
    line, indent = method_line(text)
    done = 0
    while True:
        yield types.Range(types.Position(line, 0), types.Position(line, 0)), " " * indent + "\n"
        done += 1
        for k, ch in enumerate(STATEMENT):
            if done >= n:
                return
            col = indent + k
            yield types.Range(types.Position(line, col), types.Position(line, col)), ch
            done += 1
        if done >= n:
            return
        yield types.Range(types.Position(line, 0), types.Position(line + 1, 0)), ""
        done += 1


def apply(text: str, rng: types.Range, new: str) -> str:
    """An LSP change applied to ASCII text (characters are UTF-16 code units)."""
    lines = text.split("\n")

    def offset(p: types.Position) -> int:
        return sum(len(t) + 1 for t in lines[:p.line]) + p.character

    return text[:offset(rng.start)] + new + text[offset(rng.end):]


async def latency(root: Path, text: str, n: int, pull: bool, kind: str, whole: bool = False,
                  path: Path | None = None) -> list[float]:
    client = Client()
    await client.start(root, pull, {"shardlint": {"debounceMs": 0}})
    while client.progress_end is None:  # typing starts once the workspace is indexed
        await asyncio.sleep(0.01)
    path = path or root / "model.py"
    uri = path.as_uri()
    client.lsp.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri, "python", 1, text)))
    ident = types.TextDocumentIdentifier(uri)
    if pull:
        await client.lsp.text_document_diagnostic_async(types.DocumentDiagnosticParams(ident))
    else:
        await client.published_for(uri, 1)
    out = []
    for version, (rng, new) in enumerate(edits(text, n, kind), start=2):
        text = apply(text, rng, new)
        change = (types.TextDocumentContentChangeWholeDocument(text) if whole
                  else types.TextDocumentContentChangePartial(rng, new))
        t0 = time.perf_counter()
        client.lsp.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version, uri), [change]))
        if pull:
            await client.lsp.text_document_diagnostic_async(types.DocumentDiagnosticParams(ident))
            t1 = time.perf_counter()
        else:
            t1 = await client.published_for(uri, version)
        out.append((t1 - t0) * 1000)
        await asyncio.sleep(0.1)  # a typist's pause between keystrokes
    await client.stop()
    return out[3:]  # the first edits warm caches


def engine_alone(root: Path, text: str, n: int, kind: str, path: Path | None = None) -> list[float]:
    """The same edits through ``Analyzer.lint`` in this process: what the server adds is the
    difference."""
    from shardlint.lsp.analyzer import Analyzer

    analyzer = Analyzer()
    path = path or root / "model.py"
    analyzer.lint(path, text)
    out = []
    for rng, new in edits(text, n, kind):
        text = apply(text, rng, new)
        t0 = time.perf_counter()
        analyzer.lint(path, text)
        out.append((time.perf_counter() - t0) * 1000)
        analyzer.collect_garbage()
    return out[3:]


def machine_stalls(seconds: float = 10) -> list[float]:
    """Milliseconds a fixed ~5 ms pure-Python task takes, run after each 100 ms pause (the
    typist's rhythm) with nothing else running: how much of a slow keystroke is the machine's.
    On the shared VMs this bench was written on, the same task sometimes takes 3-10x longer,
    about every 1.5 s."""
    def task() -> int:
        total = 0
        for i in range(50_000):
            total += i * i
        return total

    out = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        task()
        out.append((time.perf_counter() - t0) * 1000)
        time.sleep(0.1)
    return out


async def index_time(root: Path) -> float:
    client = Client()
    t0 = await client.start(root, pull=False)
    while client.progress_end is None:
        await asyncio.sleep(0.005)
    seconds = client.progress_end - t0
    await client.stop()
    return seconds


REPO = Path(__file__).resolve().parent.parent
# The benchmark corpus' model files with the largest classes (maxtext 0.2.5: RoutedMoE 3,901
# lines, AttentionOp 2,816, NNXDecoder 2,363), typed into within their whole package.
REAL = [("maxtext", "maxtext/layers/moe.py"), ("maxtext", "maxtext/layers/attention_op.py"),
        ("maxtext", "maxtext/layers/nnx_decoders.py")]
# And from the real-code corpus (../shared/corpus, materialised by bench/corpus.py), typed into
# within the whole project: issue 40's file (maxdiffusion's Flux transformer, 2,025 lines).
CORPUS = [("AI-Hypercomputer+maxdiffusion",
           "src/maxdiffusion/models/flux/transformers/transformer_flux_flax.py")]


def _memory(pid: int) -> tuple[float, float]:
    """(resident MiB now, peak resident MiB) of a process (Linux /proc)."""
    fields = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))  # type: ignore


async def server_memory(root: Path) -> str:
    """The server's resident memory once it has indexed ``root``, and after the largest file
    of it is opened (linted against that index)."""
    client = Client()
    t0 = await client.start(root, pull=False)
    while client.progress_end is None:
        await asyncio.sleep(0.05)
    indexed = client.progress_end - t0
    pid = client.lsp._server.pid  # (pygls keeps the server's process there)
    after_index = _memory(pid)
    largest = max(root.rglob("*.py"), key=lambda p: p.stat().st_size)
    uri = largest.as_uri()
    client.lsp.text_document_did_open(types.DidOpenTextDocumentParams(
        types.TextDocumentItem(uri, "python", 1, largest.read_text(encoding="utf-8"))))
    await client.published_for(uri, 1)
    after_open = _memory(pid)
    await client.stop()
    return (f"indexed in {indexed:.1f} s: {after_index[0]:.0f} MiB resident; after opening "
            f"{largest.relative_to(root)}: {after_open[0]:.0f} MiB (peak {after_open[1]:.0f} MiB)")


async def real_files(n: int, only: list[str] | None = None) -> int:
    sys.path.insert(0, str(REPO / "bench"))
    from lint_speed import fetch

    src = fetch(sorted({pkg for pkg, _ in REAL}))
    cases = [(REPO / "examples" / "seed_ensemble", REPO / "examples/seed_ensemble/original.py")]
    cases += [(src / pkg, src / pkg / rel) for pkg, rel in REAL]
    from corpus import corpus_dir

    for project, rel in CORPUS:
        if (corpus_dir() / project / rel).is_file():
            cases.append((corpus_dir() / project, corpus_dir() / project / rel))
        else:
            print(f"(not materialised, skipped: {project}/{rel}; see bench/corpus.py)")
    if only:
        cases = [c for c in cases if any(o in str(c[1]) for o in only)]
    print(f"typing {STATEMENT!r} one character at a time into the longest method of a class "
          f"({n} changes), didChange -> publishDiagnostics, debounce excluded")
    for root, path in cases:
        text = path.read_text(encoding="utf-8")
        line, _ = method_line(text)
        name = path.relative_to(root.parent) if root != path.parent else path.name
        print(f"{name} ({len(text.splitlines())} lines, at line {line + 1})")
        print(f"  incremental changes: {percentiles(await latency(root, text, n, False, 'type', False, path))}")
        print(f"  whole-text changes:  {percentiles(await latency(root, text, n, False, 'type', True, path))}")
        print(f"  engine alone:        {percentiles(engine_alone(root, text, n, 'type', path))}")
    print(f"the machine (a fixed ~5 ms CPU task at the same rhythm): {percentiles(machine_stalls())}")
    if sys.platform == "linux" and not only:
        biggest = fetch(["easydel"]) / "easydel"  # (the corpus' largest package)
        lines = sum(p.read_bytes().count(b"\n") for p in biggest.rglob("*.py"))
        print(f"server memory on {biggest.name} ({lines:,} lines): "
              f"{await server_memory(biggest)}")
    return 0


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edits", type=int, default=60)
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--lines", type=int, default=2000, help="length of the edited model file")
    parser.add_argument("--edit", choices=sorted(EDITS), default="body",
                        help="what the typist does: " + "; ".join(f"{k}: {v}" for k, v in EDITS.items()))
    parser.add_argument("--only", nargs="*", help="with --real: only the files whose path "
                        "contains one of these")
    parser.add_argument("--real", action="store_true",
                        help="instead: type a statement into the seed example and the three real "
                             "model files of the benchmark corpus with the largest classes, in "
                             "their whole package (incremental and whole-text changes)")
    args = parser.parse_args()
    if args.real:
        return await real_files(args.edits, args.only)
    with tempfile.TemporaryDirectory(prefix="shardlint-lsp-bench-") as tmp:
        root = Path(tmp) / "model"
        text = model_file(args.lines)
        write(root, {"pyproject.toml": "[project]\nname = 'bench'\n", "model.py": text})
        n, kind = args.edits, args.edit
        print(f"didChange -> diagnostics, {len(text.splitlines())}-line model file, "
              f"{n} edits ({kind}: {EDITS[kind]}), debounce excluded")
        print(f"  push (publishDiagnostics):      {percentiles(await latency(root, text, n, False, kind))}")
        print(f"  pull (textDocument/diagnostic): {percentiles(await latency(root, text, n, True, kind))}")
        print(f"  engine alone (in process):      {percentiles(engine_alone(root, text, n, kind))}")
        print(f"  the machine (a fixed CPU task): {percentiles(machine_stalls())}")

        project = Path(tmp) / "project"
        files = project_files(args.files)
        write(project, files)
        py = sum(1 for name in files if name.endswith(".py"))
        lines = sum(t.count("\n") for t in files.values())
        print(f"index of a {py}-file project ({lines} lines), initialized -> $/progress end")
        print(f"  cold: {await index_time(project):.2f} s")
        print(f"  warm: {await index_time(project):.2f} s (on-disk cache)")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
