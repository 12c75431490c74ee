"""The memory check in the editor: a "Measure memory" lens on probes, the server command that
measures in a real worker subprocess (real jax), the headline lens, the table on hover, the cache,
failures, cancellation, and a server that keeps answering while a probe runs."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
import pytest_asyncio
from conftest import CLIENTS, SERVER, TIMEOUT, Editor, make_client, position_of
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from shardlint.memory.units import format_bytes

pytestmark = pytest.mark.asyncio(loop_scope="session")
needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                               reason="jax is not importable (pip install 'shardlint[memory]')")
MEASURE = "shardlint.server.measureMemory"
CANCEL = "shardlint.server.cancelMemory"
RUN_TIMEOUT = 60.0

PROBES = '''import os, time
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P

RUNS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs.txt")


def _ran():
    with open(RUNS, "a") as f:
        f.write(f"{os.getpid()}\\n")


@jax.jit
def train_step(w, t):
    return w * 2, t.sum()


def shardlint_probe_tiny():
    _ran()
    mesh = jax.make_mesh((jax.device_count(),), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    w = jax.ShapeDtypeStruct((1024, 1024), jnp.float32, sharding=NamedSharding(mesh, P("x")))
    t = jax.ShapeDtypeStruct((1024, 1024), jnp.float32, sharding=NamedSharding(mesh, P()))
    return train_step, (w, t)


def shardlint_probe_broken():
    raise RuntimeError("probe exploded on purpose")


def shardlint_probe_slow():
    _ran()
    time.sleep(120)


def measure_tiny():
    return shardlint_probe_tiny()
'''
CONFIGURED = '[project]\nname = "t"\n[tool.shardlint.memory]\nprobes = ["probes.py:measure_tiny"]\n'
OTHER = '''import jax
from jax.sharding import Mesh

mesh = Mesh(jax.devices(), ("x",))
with mesh:
    pass
'''


def options(enabled: bool = True, trusted: bool = True, devices=(1, 2)) -> dict:
    return {"shardlint": {"memory": {"enabled": enabled, "trusted": trusted,
                                     "devices": list(devices), "python": sys.executable}}}


def lens_client():
    client = make_client()
    client.lens_refreshes = 0

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def on_lens_refresh(c: LanguageClient, params: None) -> None:
        c.lens_refreshes += 1

    return client


@pytest_asyncio.fixture(loop_scope="session")
async def start():
    """``ed = await start(root, options)``: a server of one's own (memory settings are global)."""
    started: list[Editor] = []

    async def run(root: Path, opts: dict, name: str = "vscode") -> Editor:
        client = await ClientServerConfig(server_command=SERVER,
                                          client_factory=lens_client).start()
        ed = Editor(client, name)
        started.append(ed)
        await ed.start(root, opts)
        return ed

    yield run
    for ed in started:
        with contextlib.suppress(Exception):
            await ed.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def opened(start, project):
    """``root, ed, uri = await opened(files, devices=...)``: the project, a server of its own
    and ``probes.py`` open in it."""
    async def run(files: dict[str, str], client: str = "vscode", **settings):
        root = project(files)
        ed = await start(root, options(**settings), client)
        return root, ed, ed.open(root / "probes.py")

    return run


async def lenses(ed: Editor, uri: str) -> list[types.CodeLens]:
    got = await asyncio.wait_for(ed.client.text_document_code_lens_async(
        types.CodeLensParams(types.TextDocumentIdentifier(uri))), TIMEOUT)
    return list(got or [])


def titles(found: list[types.CodeLens], line: int | None = None) -> list[str]:
    return [x.command.title for x in found if line is None or x.range.start.line == line]


def line_of(text: str, needle: str) -> int:
    return position_of(text, needle).line


def measure(ed: Editor, uri: str, probe: str, msg_id: str | None = None):
    return asyncio.wait_for(ed.client.protocol.send_request_async(
        types.WORKSPACE_EXECUTE_COMMAND,
        types.ExecuteCommandParams(command=MEASURE, arguments=[uri, probe]), msg_id=msg_id),
        RUN_TIMEOUT)


def runs(root: Path) -> list[int]:
    path = root / "runs.txt"
    return [int(x) for x in path.read_text().split()] if path.exists() else []


async def until(predicate, timeout: float = RUN_TIMEOUT) -> None:
    async def poll():
        while not predicate():
            await asyncio.sleep(0.05)
    await asyncio.wait_for(poll(), timeout)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()


# ---- offered only when enabled and trusted --------------------------------------------------------------
async def test_no_lens_unless_enabled_and_trusted(start, project):
    root = project({"probes.py": PROBES}, CONFIGURED)
    ed = await start(root, options(trusted=False))
    provider = ed.result.capabilities
    assert provider.code_lens_provider is not None
    assert {MEASURE, CANCEL} <= set(provider.execute_command_provider.commands)
    uri = ed.open(root / "probes.py")
    assert await lenses(ed, uri) == []
    refused = await measure(ed, uri, "shardlint_probe_tiny")
    assert refused["ok"] is False and "trust" in refused["failure"]

    ed.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings=options()))
    await until(lambda: ed.client.lens_refreshes > 0, TIMEOUT)
    found = await lenses(ed, uri)
    assert titles(found, line_of(PROBES, "def shardlint_probe_tiny")) == ["Measure memory"]
    assert titles(found, line_of(PROBES, "def shardlint_probe_broken")) == ["Measure memory"]
    assert titles(found, line_of(PROBES, "def measure_tiny")) == ["Measure memory"]  # configured
    tiny = next(x for x in found
                if x.range.start.line == line_of(PROBES, "def shardlint_probe_tiny"))
    assert tiny.command.command == MEASURE
    assert list(tiny.command.arguments) == [uri, "shardlint_probe_tiny"]
    assert not titles(found, line_of(PROBES, "def train_step"))

    ed.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings=options(enabled=False)))
    await until(lambda: ed.client.lens_refreshes > 1, TIMEOUT)
    assert await lenses(ed, uri) == []
    assert runs(root) == []


# ---- measure: the headline, the table, the cache, stale ---------------------------------------------------
@needs_jax
@pytest.mark.memory
@pytest.mark.parametrize("client", CLIENTS)
async def test_measure_headline_hover_cache_and_stale(opened, client):
    root, ed, uri = await opened({"probes.py": PROBES}, client, devices=(1, 2))
    probe_line = line_of(PROBES, "def shardlint_probe_tiny")
    assert titles(await lenses(ed, uri), probe_line) == ["Measure memory"]

    summary = await measure(ed, uri, "shardlint_probe_tiny")
    assert summary["ok"] is True, summary
    assert len(runs(root)) == 2  # one worker per device count

    # The same figure as `shardlint memory --format json` for the same probe.
    cli = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "shardlint", "memory", "--quiet", "probes.py:shardlint_probe_tiny",
        "--devices", "1,2", "--format", "json", cwd=root, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(cli.communicate(), RUN_TIMEOUT)
    last = json.loads(out)["probes"][0]["runs"][-1]
    assert (summary["devices"], summary["peak"]) == (2, last["per_device"]["peak_estimate"])
    runs_before = runs(root)

    # $/progress: created, begun, ended with the headline; the client is asked to refresh lenses.
    (reports,) = [r for t, r in ed.client.progress_reports.items() if "memory" in str(t)]
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].cancellable
    assert isinstance(reports[-1], types.WorkDoneProgressEnd)
    assert reports[-1].message == summary["headline"]
    if client == "vscode":
        assert ed.client.lens_refreshes >= 1
    else:  # Neovim does not declare workspace/codeLens/refresh: the server must not send it
        assert ed.client.lens_refreshes == 0

    found = await lenses(ed, uri)
    figure = f"peak {format_bytes(last['per_device']['peak_estimate'])}/device at 2 devices"
    head, again = titles(found, probe_line)
    assert head.startswith(figure) and "0.67x" in head and again == "measure again"
    # ...and on the jitted function the probe returns.
    (on_step,) = titles(found, line_of(PROBES, "def train_step"))
    assert on_step.startswith(figure) and on_step.endswith("(shardlint_probe_tiny)")

    # Hover over the probe's name: the whole table.
    hover = await ed.hover(uri, position_of(PROBES, "shardlint_probe_tiny():"))
    assert hover.contents.kind == types.MarkupKind.Markdown
    assert "```text" in hover.contents.value
    for row in ("arguments", "peak estimate", "largest leaves at 2 devices", "REPLICATED"):
        assert row in hover.contents.value

    # Cached: asking again, or closing and re-opening the file, runs nothing.
    ed.close(uri)
    uri = ed.open(root / "probes.py")
    assert titles(await lenses(ed, uri), probe_line)[0] == head
    assert runs(root) == runs_before

    # Edited: stale; edited back: the cached figure again.
    ed.replace(uri, "def _ran():", "def _ran():  # edited")
    stale = titles(await lenses(ed, uri), probe_line)
    assert stale == [f"memory (stale, the file changed): {head}", "Measure memory"]
    hover = await ed.hover(uri, position_of(PROBES, "shardlint_probe_tiny():"))
    assert "stale" in hover.contents.value
    ed.replace(uri, "def _ran():  # edited", "def _ran():")
    assert titles(await lenses(ed, uri), probe_line)[0] == head
    assert runs(root) == runs_before


STEP = '''import jax


@jax.jit
def train_step(w):
    return w * 2
'''
PROBE_OF_STEP = '''import jax, jax.numpy as jnp
from step import train_step


def shardlint_probe_imported():
    return train_step, (jax.ShapeDtypeStruct((256, 256), jnp.float32),)
'''


@needs_jax
@pytest.mark.memory
async def test_a_change_in_a_file_the_probe_imports_makes_the_figure_stale(opened):
    root, ed, uri = await opened({"step.py": STEP, "probes.py": PROBE_OF_STEP}, devices=(1,))
    line = line_of(PROBE_OF_STEP, "def shardlint_probe_imported")
    summary = await measure(ed, uri, "shardlint_probe_imported")
    assert summary["ok"] is True, summary
    head = titles(await lenses(ed, uri), line)[0]
    assert head == summary["headline"]

    # Unsaved text in the editor counts...
    step_uri = ed.open(root / "step.py")
    ed.replace(step_uri, "w * 2", "w * 3")
    stale = titles(await lenses(ed, uri), line)
    assert stale == [f"memory (stale, `step.py` changed): {head}", "Measure memory"]
    # ...the jitted function's own lens says so too...
    (on_step,) = titles(await lenses(ed, step_uri), line_of(STEP, "def train_step"))
    assert on_step.startswith("memory (stale, the code changed)")
    ed.replace(step_uri, "w * 3", "w * 2")
    assert titles(await lenses(ed, uri), line)[0] == head  # back to what was measured

    # ...and so does the file on disk once the editor lets go of it.
    ed.close(step_uri)
    (root / "step.py").write_text(STEP.replace("w * 2", "w + 1"), encoding="utf-8")
    assert titles(await lenses(ed, uri), line)[0].startswith("memory (stale, `step.py` changed)")


# ---- a probe that fails --------------------------------------------------------------------------------
@needs_jax
@pytest.mark.memory
async def test_failing_probe_shows_a_failure_lens_and_the_server_carries_on(opened):
    root, ed, uri = await opened({"probes.py": PROBES, "other.py": OTHER}, devices=(1,))

    summary = await measure(ed, uri, "shardlint_probe_broken")
    assert summary["ok"] is False and "probe exploded on purpose" in summary["failure"]
    line = line_of(PROBES, "def shardlint_probe_broken")
    failure = titles(await lenses(ed, uri), line)
    assert failure[0].startswith("memory check failed: raised: RuntimeError: probe exploded")
    assert "\n" not in failure[0]
    assert any("probe exploded" in m.message for m in ed.client.messages)
    assert any("Traceback" in m.message and "shardlint_probe_broken" in m.message
               for m in ed.client.log_messages)

    other = ed.open(root / "other.py")
    assert "SHL101" in {d.code for d in await ed.diagnostics(other)}


# ---- responsive while a probe runs; cancelled by $/cancelRequest or a new run ---------------------------
@needs_jax
@pytest.mark.memory
async def test_server_answers_while_a_probe_runs_and_runs_cancel(opened):
    root, ed, uri = await opened({"probes.py": PROBES, "other.py": OTHER}, devices=(1,))
    slow_line = line_of(PROBES, "def shardlint_probe_slow")

    first = asyncio.ensure_future(measure(ed, uri, "shardlint_probe_slow"))
    await until(lambda: len(runs(root)) == 1)  # the probe is running in its worker
    (first_pid,) = runs(root)

    # Diagnostics and hover for another file, and lenses, are answered meanwhile.
    other = ed.open(root / "other.py")
    assert "SHL101" in {d.code for d in await asyncio.wait_for(ed.diagnostics(other), 5)}
    hover = await asyncio.wait_for(ed.hover(other, position_of(OTHER, "mesh:")), 5)
    assert hover is not None and "SHL101" in hover.contents.value
    (running,) = [x for x in await asyncio.wait_for(lenses(ed, uri), 5)
                  if x.range.start.line == slow_line]
    assert running.command.title.startswith("measuring memory")
    assert running.command.command == CANCEL

    # A new run of the same probe stops the old worker.
    second = asyncio.ensure_future(measure(ed, uri, "shardlint_probe_slow", msg_id="slow-2"))
    assert (await first) == {"ok": False, "probe": "shardlint_probe_slow", "cancelled": True}
    assert not alive(first_pid)
    await until(lambda: len(runs(root)) == 2)
    second_pid = runs(root)[1]
    assert alive(second_pid)

    # $/cancelRequest stops the run and its worker.
    ed.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="slow-2"))
    with pytest.raises(Exception, match="cancel"):
        await second
    await until(lambda: not alive(second_pid), 10)
    assert titles(await lenses(ed, uri), slow_line) == ["Measure memory"]

    # So does the lens's own cancel command.
    third = asyncio.ensure_future(measure(ed, uri, "shardlint_probe_slow"))
    await until(lambda: len(runs(root)) == 3)
    (cancel,) = [x.command for x in await lenses(ed, uri) if x.range.start.line == slow_line]
    assert await ed.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=cancel.command, arguments=cancel.arguments)) == {"cancelled": True}
    assert (await third)["cancelled"] is True
    assert not alive(runs(root)[2])

    # And the progress's cancel button (window/workDoneProgress/cancel).
    tokens = set(ed.client.progress_reports)
    fourth = asyncio.ensure_future(measure(ed, uri, "shardlint_probe_slow"))
    await until(lambda: len(runs(root)) == 4)
    (token,) = set(ed.client.progress_reports) - tokens
    ed.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token))
    assert (await fourth)["cancelled"] is True
    assert not alive(runs(root)[3])
    assert isinstance(ed.client.progress_reports[token][-1], types.WorkDoneProgressEnd)


SEED_PROBES = Path(__file__).resolve().parents[2] / "examples" / "seed_ensemble" / "probes.py"


@needs_jax
@pytest.mark.memory
@pytest.mark.parametrize("client", CLIENTS)
async def test_savings_reach_the_diagnostic_the_hover_and_the_lens(opened, client):
    """After measuring the seed's original probe, the static SHL302 on its jitted init says what
    fixing it saved (diagnostic message and hover), and the probe's lens lists the findings it
    reaches by bytes saved; an edit of the file makes the measurement stale and the sentence
    goes away."""
    text = SEED_PROBES.read_text(encoding="utf-8")
    root, ed, uri = await opened({"probes.py": text}, client, devices=(1, 2))
    init = position_of(text, "jax.jit(model.init), (_key(), x)")
    before = [d for d in await ed.diagnostics(uri) if d.code == "SHL302"]
    assert len(before) == 1 and "memory check" not in before[0].message
    mark = ed.mark()
    summary = await measure(ed, uri, "shardlint_probe_original")
    assert summary["ok"] is True, summary

    def saved(diags):
        return any(d.code == "SHL302" and "memory check, probe `shardlint_probe_original`: "
                   "fixing it saves up to" in d.message for d in diags)

    diags = await ed.refreshed(uri, saved, mark)
    (d,) = [d for d in diags if d.code == "SHL302"]
    assert d.message.startswith(before[0].message) and d.range.start.line == init.line
    hover = await ed.hover(uri, d.range.start)
    assert hover.contents.value.startswith("**Memory check**: (memory check, probe "
                                           "`shardlint_probe_original`")
    probe_line = line_of(text, "def shardlint_probe_original")
    lens = [t for t in titles(await lenses(ed, uri), probe_line) if t.startswith("fixes save")]
    assert len(lens) == 1 and lens[0].index("SHL302") < lens[0].index("SHL103"), lens
    assert "MiB" in lens[0].split("SHL302 ")[1].split(" ·")[0]

    ed.replace(uri, "E, D_IN, FEATURES, BATCH", "E, D_IN, FEATURES, BATCH  ")
    diags = await ed.diagnostics(uri)  # measured before the edit: stale, so not claimed
    assert any(d.code == "SHL302" for d in diags) and not saved(diags)


# ---- `--fit` in the editor: the lens says a plan fits, a code action puts its table in ------------
def _fit_probe() -> str:
    """The shipped decoder probe at CI scale with `embed` unsharded (~135 MiB per device at 8
    devices), its table renamed `RÜLES`: a column where UTF-8 and UTF-16 differ."""
    text = (Path(__file__).resolve().parents[2] / "examples" / "decoder_1b" / "probe.py").read_text(
        encoding="utf-8")
    sizes = "LAYERS, D_MODEL, D_MLP, HEADS, VOCAB, SEQ, BATCH = 20, 2048, 8192, 16, 32000, 512, 8"
    assert sizes in text and '    ("embed", "fsdp"),' in text
    text = text.replace(sizes, sizes.split(" = ")[0] + " = 4, 512, 2048, 8, 4096, 128, 8")
    return text.replace('    ("embed", "fsdp"),', '    ("embed", None),').replace("RULES", "RÜLES")


@needs_jax
@pytest.mark.memory
@pytest.mark.slow
async def test_fit_plan_lens_and_code_action_replace_the_rules_table(start, project):
    from shardlint.memory.plan.space import rules_table
    from shardlint.memory.plan.table import paste

    source = _fit_probe()
    root = project({"probes.py": source})
    opts = {"shardlint": {"memory": {"enabled": True, "trusted": True, "devices": [8],
                                     "capacity": "100MiB", "python": sys.executable}}}
    ed = await start(root, opts)
    assert types.CodeActionKind.RefactorRewrite in \
        ed.result.capabilities.code_action_provider.code_action_kinds
    uri = ed.open(root / "probes.py")
    probe = "shardlint_probe_decoder_1b_train_step"
    summary = await asyncio.wait_for(ed.client.protocol.send_request_async(
        types.WORKSPACE_EXECUTE_COMMAND,
        types.ExecuteCommandParams(command=MEASURE, arguments=[uri, probe])), 120)
    assert summary["ok"] is True, summary

    found = titles(await lenses(ed, uri), line_of(source, f"def {probe}"))
    (fit,) = [t for t in found if "fits with a plan" in t]
    assert fit.startswith("memory at 8 devices: fits with a plan: 1 change (")

    # Nothing offered away from the table; over it, one refactor that rewrites it.
    start_line = line_of(source, "RÜLES = (")
    elsewhere = types.Range(types.Position(0, 0), types.Position(0, 1))
    assert [a for a in await ed.code_actions(uri, elsewhere)
            if a.kind == types.CodeActionKind.RefactorRewrite] == []
    at = types.Range(types.Position(start_line, 2), types.Position(start_line, 2))
    (action,) = [a for a in await ed.code_actions(uri, at)
                 if a.kind == types.CodeActionKind.RefactorRewrite]
    assert action.title.startswith("Apply the memory plan to RÜLES (")
    ((edit_uri, (edit,)),) = action.edit.changes.items()
    assert edit_uri == uri
    assert edit.range.start == types.Position(start_line, len("RÜLES = "))  # UTF-16, not bytes
    assert edit.range.end == types.Position(line_of(source, '    ("length", None),') + 1, 1)
    assert "# shardlint --fit: was" in edit.new_text

    # The edit gives the text `shardlint memory --fit`'s plan pasted in gives.
    table, why = rules_table(root / "probes.py")
    assert why is None
    expected = paste(source, table.to_dict(), edit.new_text)
    ed.apply(action.edit)
    assert ed.texts[uri] == expected
    # The measurement now describes other code: no plan is offered for the changed text.
    assert [a for a in await ed.code_actions(uri, at)
            if a.kind == types.CodeActionKind.RefactorRewrite] == []
