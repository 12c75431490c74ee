"""Adopting shardlint in CI and pre-commit: baselines, fingerprints, formats, jobs, notebooks."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from shardlint import cache as cache_mod
from shardlint.cli import main

ROOT = Path(__file__).resolve().parent.parent

PITFALLS = """\
import jax
import flax.linen as nn
from jax.sharding import Mesh

mesh = Mesh(jax.devices(), ("data",))
with mesh:
    pass
a = jax.tree_map(lambda p: p, {})
b = jax.tree_flatten({})
c = jax.tree_leaves({})
d = jax.tree_unflatten(None, [])
"""  # five findings: SHL101 and four SHL501


def check(capsys, *argv: str) -> tuple[int, list[dict], str]:
    code = main(["check", *argv, "--format", "json", "--no-cache"])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if out.strip() else []), err


def test_baseline_reports_only_new_findings(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "train.py"
    src.write_text(PITFALLS)
    base = tmp_path / "baseline.json"
    code, items, _ = check(capsys, str(src))
    assert code == 1 and len(items) == 5
    assert main(["check", str(src), "--no-cache", "--write-baseline", str(base)]) == 0
    capsys.readouterr()
    code, items, _ = check(capsys, str(src), "--baseline", str(base))
    assert (code, items) == (0, [])
    # a new pitfall: only it is reported
    src.write_text(PITFALLS + "e = jax.tree_structure({})\n")
    code, items, _ = check(capsys, str(src), "--baseline", str(base))
    assert code == 1 and [(i["code"], i["line"]) for i in items] == [("SHL501", 12)]
    # lines inserted above the old findings do not resurrect them
    src.write_text("# a comment\n\n\n" + PITFALLS)
    code, items, _ = check(capsys, str(src), "--baseline", str(base))
    assert (code, items) == (0, [])


def test_bad_baseline_file(tmp_path, capsys):
    (tmp_path / "t.py").write_text(PITFALLS)
    (tmp_path / "b.json").write_text("{not json")
    code, _, err = check(capsys, str(tmp_path / "t.py"), "--baseline", str(tmp_path / "b.json"))
    assert code == 2 and "not JSON" in err


def sarif_prints(capsys, path: Path) -> dict[tuple[str, str], str]:
    main(["check", str(path), "--format", "sarif", "--no-cache"])
    doc = json.loads(capsys.readouterr()[0])
    return {(r["ruleId"], r["message"]["text"]): r["partialFingerprints"]["shardlint/v1"]
            for r in doc["runs"][0]["results"]}


def test_sarif_fingerprints_survive_moving_a_finding(tmp_path, capsys):
    f = tmp_path / "t.py"
    body = "def step():\n    return jax.tree_map(lambda p: p, {})\n"
    f.write_text("import jax\n" + body)
    before = sarif_prints(capsys, f)
    f.write_text("import jax\n" + "\n" * 10 + body)
    after = sarif_prints(capsys, f)
    assert before and before == after


def test_junit_and_gitlab(tmp_path, capsys):
    f = tmp_path / "t.py"
    f.write_text(PITFALLS)
    (tmp_path / "clean.py").write_text("import jax\n")
    main(["check", str(tmp_path), "--format", "junit", "--no-cache"])
    root = ET.fromstring(capsys.readouterr()[0])
    assert root.get("failures") == "5"
    assert len(root.findall(".//failure")) == 5
    assert any(s.get("failures") == "0" for s in root.findall("testsuite"))
    main(["check", str(f), "--format", "gitlab", "--no-cache"])
    items = json.loads(capsys.readouterr()[0])
    assert len(items) == 5 and len({i["fingerprint"] for i in items}) == 5
    assert {i["severity"] for i in items} <= {"info", "minor", "major"}
    assert items[0]["location"]["lines"]["begin"] == 6


def test_jobs_give_the_same_findings(tmp_path, capsys):
    for i in range(24):
        (tmp_path / f"m{i}.py").write_text(PITFALLS if i % 3 == 0 else "import jax\nx = 1\n")
    _, serial, _ = check(capsys, str(tmp_path), "--jobs", "1")
    _, parallel, _ = check(capsys, str(tmp_path), "--jobs", "2")
    assert len(serial) == 40 and serial == parallel


def test_cache_is_written_ignored_and_reused(tmp_path, capsys, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n")
    (tmp_path / "model.py").write_text(
        "import flax.linen as nn\n\nclass MLP(nn.Module):\n    @nn.compact\n"
        "    def __call__(self, x):\n        return nn.with_logical_constraint(x, ('batch',))\n")
    train = tmp_path / "train.py"
    train.write_text("import jax\nfrom model import MLP\n\n"
                     "with jax.set_mesh(jax.make_mesh((1,), ('data',))):\n"
                     "    jax.jit(MLP().init)(jax.random.key(0), jax.numpy.ones((2,)))\n")
    monkeypatch.chdir(tmp_path)
    assert main(["check", "--format", "json"]) == 1
    capsys.readouterr()
    cache = tmp_path / ".shardlint_cache"
    assert (cache / cache_mod.FILE).is_file() and (cache / cache_mod.SUMMARIES).is_file()
    assert (cache / ".gitignore").read_text().strip().endswith("*")
    # one file, as pre-commit passes it: the constraint in model.py still counts
    assert main(["check", "train.py", "--format", "json"]) == 1
    items = json.loads(capsys.readouterr()[0])
    assert "SHL102" in [i["code"] for i in items]


def test_diff_changes_nothing(tmp_path, capsys):
    f = tmp_path / "t.py"
    f.write_text(PITFALLS)
    before = f.read_bytes()
    code = main(["check", str(f), "--diff", "--no-cache"])
    out = capsys.readouterr()[0]
    assert code == 1 and "+with jax.set_mesh(mesh):" in out
    assert f.read_bytes() == before
    assert main(["check", str(f), "--fix", "--no-cache", "--select", "SHL101"]) == 0
    assert "with jax.set_mesh(mesh):" in f.read_text()
    assert main(["check", str(f), "--diff", "--no-cache", "--select", "SHL101"]) == 0


NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# sharding\n"]},
        {"cell_type": "code", "execution_count": 1, "metadata": {"tags": ["setup"]},
         "outputs": [{"output_type": "stream", "name": "stdout", "text": ["ok\n"]}],
         "source": ["%matplotlib inline\n", "import jax\n", "from jax.sharding import Mesh\n",
                    "mesh = Mesh(jax.devices(), ('data',))"]},
        {"cell_type": "code", "execution_count": 2, "metadata": {}, "outputs": [],
         "source": ["x = 1\n", "with mesh:\n", "    pass"]},
    ],
    "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5,
}


def test_notebook_findings_by_cell_and_fix(tmp_path, capsys):
    nb = tmp_path / "explore.ipynb"
    nb.write_text(json.dumps(NOTEBOOK, indent=1) + "\n")
    code, items, _ = check(capsys, str(nb))
    assert code == 1
    assert [(i["code"], i["cell"], i["line"], i["column"]) for i in items] == \
        [("SHL101", 3, 2, 6)]
    main(["check", str(nb), "--no-cache"])
    assert "explore.ipynb:cell 3:2:6: SHL101" in capsys.readouterr()[0]
    assert main(["check", str(nb), "--fix", "--no-cache"]) == 0
    data = json.loads(nb.read_text())
    assert data["cells"][2]["source"] == ["x = 1\n", "with jax.set_mesh(mesh):\n", "    pass"]
    assert data["cells"][1] == NOTEBOOK["cells"][1]  # outputs, metadata, magics untouched
    assert data["metadata"] == NOTEBOOK["metadata"]


def test_a_notebook_magic_that_is_all_a_block_holds_parses(tmp_path, capsys):
    """`try: import penzai` / `except ImportError:` / `  !pip install penzai` is valid IPython:
    the magic is the except block's one statement. It is read as `pass`, not as a comment
    (which left the block empty: SHL000 on a notebook that runs); a fix elsewhere in the cell
    writes the magic back as it was."""
    cell = ["try:\n", "  import penzai\n", "except ImportError:\n", "  !pip install penzai\n",
            "import jax\n", "from jax.sharding import Mesh\n",
            "mesh = Mesh(jax.devices(), ('data',))\n", "with mesh:\n", "    pass"]
    data = {**NOTEBOOK, "cells": [{"cell_type": "code", "execution_count": 1, "metadata": {},
                                   "outputs": [], "source": cell}]}
    nb = tmp_path / "setup.ipynb"
    nb.write_text(json.dumps(data, indent=1) + "\n")
    code, items, _ = check(capsys, str(nb))
    assert [(i["code"], i["cell"], i["line"]) for i in items] == [("SHL101", 1, 8)], items
    assert main(["check", str(nb), "--fix", "--no-cache"]) == 0
    fixed = json.loads(nb.read_text())["cells"][0]["source"]
    assert fixed == [*cell[:7], "with jax.set_mesh(mesh):\n", "    pass"]


def test_broken_notebook_is_a_clear_error(tmp_path, capsys):
    nb = tmp_path / "bad.ipynb"
    nb.write_text("{ not json")
    code, _, err = check(capsys, str(nb))
    assert code == 2 and "not a notebook" in err and "Traceback" not in err
    assert err.count("bad.ipynb") == 1, err  # (the path once, in front)


def test_cached_findings_follow_other_files(tmp_path, capsys, monkeypatch):
    """A finding in train.py depends on model.py: editing model.py must refresh it."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n")
    model = tmp_path / "model.py"
    model.write_text(
        "import flax.linen as nn\n\nclass MLP(nn.Module):\n    @nn.compact\n"
        "    def __call__(self, x):\n        return nn.with_logical_constraint(x, ('batch',))\n")
    (tmp_path / "train.py").write_text(
        "import jax\nfrom model import MLP\n\nwith jax.set_mesh(jax.make_mesh((1,), ('data',))):\n"
        "    jax.jit(MLP().init)(jax.random.key(0), jax.numpy.ones((2,)))\n")
    monkeypatch.chdir(tmp_path)

    def codes() -> list[str]:
        main(["check", "train.py", "--format", "json", "--select", "SHL102"])
        return [i["code"] for i in json.loads(capsys.readouterr()[0])]

    assert codes() == ["SHL102"]
    assert codes() == ["SHL102"]  # warm: from the cache
    model.write_text(model.read_text().replace("nn.with_logical_constraint(x, ('batch',))", "x"))
    assert codes() == []


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_the_index_closures_are_kept_for_the_same_summaries(tmp_path, capsys, monkeypatch, jobs):
    """What the project index computes across files (what each symbol needs, the contexts of
    calls) is kept in the cache and taken back by a run over the same summaries (a comment
    edited), with the same findings; a summary that changed (a line added, a constraint gone)
    has them computed again."""
    from shardlint.semantics.flow.project import ProjectIndex

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n")
    model = tmp_path / "model.py"
    model.write_text(
        "import flax.linen as nn\n\nclass MLP(nn.Module):\n    @nn.compact\n"
        "    def __call__(self, x):\n        return nn.with_logical_constraint(x, ('batch',))\n")
    train = tmp_path / "train.py"
    train.write_text(
        "import jax\nfrom model import MLP\n\nwith jax.set_mesh(jax.make_mesh((1,), ('data',))):\n"
        "    jax.jit(MLP().init)(jax.random.key(0), jax.numpy.ones((2,)))\n")
    for i in range(20 if jobs == "2" else 0):  # (enough files for the parallel path)
        (tmp_path / f"m{i}.py").write_text("import jax\nx = 1\n")
    monkeypatch.chdir(tmp_path)
    computed: list[str] = []
    real = ProjectIndex._compute_needs

    def counting(self):
        computed.append("needs")
        return real(self)

    monkeypatch.setattr(ProjectIndex, "_compute_needs", counting)

    def run() -> list[tuple[str, str, int, str]]:
        main(["check", ".", "--format", "json", "--jobs", jobs, "--select", "SHL102"])
        return [(i["code"], i["path"], i["line"], i["message"])
                for i in json.loads(capsys.readouterr()[0])]

    cold = run()  # (with --jobs 2 the rules run in the workers: the first sends its closures)
    assert [c[:3] for c in cold] == [("SHL102", "train.py", 5)]
    assert (tmp_path / cache_mod.DIR / cache_mod.CLOSURES).is_file()
    with open(train, "a") as fh:
        fh.write("# a comment at the end\n")
    computed.clear()
    assert run() == cold and computed == []  # (one file to lint: here, whatever the jobs)
    with open(train, "a") as fh:
        fh.write("# another comment\n")
    computed.clear()
    assert run() == cold and computed == []  # the same summaries: the closures of the last run
    model.write_text("# a line above\n" + model.read_text())
    computed.clear()
    moved = run()
    assert computed == ["needs"] and [c[:3] for c in moved] == [("SHL102", "train.py", 5)]
    model.write_text(model.read_text().replace("nn.with_logical_constraint(x, ('batch',))", "x"))
    computed.clear()
    assert run() == [] and computed == ["needs"]


def test_a_parallel_warm_run_reuses_the_cache(tmp_path, capsys, monkeypatch):
    """``--jobs 2`` reads and writes the findings cache as ``--jobs 1`` does: a second run lints
    nothing again, and after an edit its summary does not see (a comment) only that file."""
    from shardlint.engine import Engine

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n")
    for i in range(24):
        (tmp_path / f"m{i}.py").write_text(PITFALLS if i % 3 == 0 else "import jax\nx = 1\n")
    monkeypatch.chdir(tmp_path)
    linted: list[str] = []
    real = Engine._run_rules

    def counting(self, spath, *rest):
        linted.append(Path(spath).name)
        return real(self, spath, *rest)

    def run() -> list[dict]:
        assert main(["check", ".", "--format", "json", "--jobs", "2"]) == 1
        return json.loads(capsys.readouterr()[0])

    cold = run()  # (the rules ran in worker processes)
    monkeypatch.setattr(Engine, "_run_rules", counting)
    from shardlint.semantics.flow.summary import ModuleSummary

    decoded: list[str] = []
    real_decode = ModuleSummary.from_json.__func__

    def decoding(cls, data):
        decoded.append("summary")
        return real_decode(cls, data)

    monkeypatch.setattr(ModuleSummary, "from_json", classmethod(decoding))
    assert run() == cold and linted == []
    assert decoded == []  # nothing changed: the findings come from the cache, no index is built
    with open(tmp_path / "m3.py", "a") as fh:
        fh.write("# a comment at the end\n")
    again = run()
    assert again == cold and linted == ["m3.py"]


def test_a_serial_run_past_its_memory_budget_finds_the_same(tmp_path, capsys, monkeypatch):
    """Past FACTS_BUDGET a serial run keeps only summaries and parses files again for their
    rules: the findings are the same as when every file's facts are held."""
    from shardlint import engine as engine_mod

    root = ROOT / "examples"

    def run() -> list[dict]:
        main(["check", str(root), "--no-cache", "--format", "json", "--jobs", "1"])
        return json.loads(capsys.readouterr()[0])

    held = run()
    assert held
    parsed: list[str] = []
    real = engine_mod.Engine.summary_for

    def counting(self, path, text):
        parsed.append(Path(path).name)
        return real(self, path, text)

    monkeypatch.setattr(engine_mod, "FACTS_BUDGET", 0)
    monkeypatch.setattr(engine_mod.Engine, "summary_for", counting)
    assert run() == held
    assert len(parsed) >= 5  # (the budget was really passed: summaries built apart)


def test_paths_of_two_projects_are_linted_apart(tmp_path, capsys):
    """``shardlint check a b`` with two projects: each with its own index, as two runs (both
    have a ``utils`` module; one index over both would keep only one of them)."""
    for name, body in (("a", "    return jax.make_mesh((1,), ('data',))\n"),
                       ("b", "    return None\n")):
        d = tmp_path / name
        d.mkdir()
        (d / "pyproject.toml").write_text(f"[project]\nname = '{name}'\n")
        (d / "utils.py").write_text(f"import jax\n\n\ndef make():\n{body}")
        (d / "train.py").write_text("import jax\nfrom utils import make\n\nmesh = make()\n"
                                    "with mesh:\n    jax.jit(lambda x: x)(1)\n")
    _, both, _ = check(capsys, str(tmp_path / "a"), str(tmp_path / "b"))
    _, a, _ = check(capsys, str(tmp_path / "a"))
    _, b, _ = check(capsys, str(tmp_path / "b"))
    key = lambda items: sorted((i["path"], i["line"], i["code"], i["message"]) for i in items)
    assert key(both) == key(a + b)
    assert [i["code"] for i in a] == ["SHL101"] and b == []


def _mesh_pairs(root: Path, pairs: int = 12) -> None:
    """``pairs`` mesh helpers, each in its own module, and a script per helper that enters the
    helper's mesh the legacy way: SHL101 in a script needs its helper's summary."""
    for i in range(pairs):
        (root / f"lib{i}.py").write_text(
            f"import jax\nfrom jax.sharding import Mesh\n\n\ndef make_mesh{i}():\n"
            f"    return Mesh(jax.devices(), ('data',))\n")
        (root / f"use{i}.py").write_text(
            f"import jax\nfrom lib{i} import make_mesh{i}\n\nmesh = make_mesh{i}()\n"
            f"with mesh:\n    pass\n")


def _forking(monkeypatch) -> None:
    """The batch forks its workers only when no other thread runs; a test session may have
    one (an earlier test's server thread): the workers must inherit this test's patches."""
    import threading

    monkeypatch.setattr(threading, "active_count", lambda: 1)


def test_a_parallel_run_parses_each_file_once(tmp_path, capsys, monkeypatch):
    """The workers keep the trees and facts of the files they summarise and run their rules
    on them once the index is built: one parse per file in a cold ``--jobs 2`` run, and the
    cross-file findings (each script's mesh comes from another module) are the serial run's."""
    from shardlint import engine as engine_mod

    _mesh_pairs(tmp_path)
    _, serial, _ = check(capsys, str(tmp_path), "--jobs", "1")
    assert [f["code"] for f in serial] == ["SHL101"] * 12
    log = tmp_path.parent / "parsed.log"
    real = engine_mod.parse_module

    def counting(text, filename):
        with open(log, "a") as fh:  # (from every process)
            fh.write(Path(filename).name + "\n")
        return real(text, filename)

    _forking(monkeypatch)
    monkeypatch.setattr(engine_mod, "parse_module", counting)
    _, parallel, _ = check(capsys, str(tmp_path), "--jobs", "2")
    assert parallel == serial
    parsed = log.read_text().split()
    assert sorted(parsed) == sorted(p.name for p in tmp_path.glob("*.py"))  # each once


def test_a_file_changed_since_the_last_run_is_parsed_once(tmp_path, capsys, monkeypatch):
    """A ``--jobs 2`` run after one file changed starts no worker (one file to summarise): the
    batch summarises it itself and keeps its tree and facts for its rules, as a worker does,
    rather than parsing it again. Its findings, and the other files', are a cold run's."""
    from shardlint import engine as engine_mod

    _mesh_pairs(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n")
    monkeypatch.chdir(tmp_path)
    assert main(["check", ".", "--format", "json", "--jobs", "2"]) == 1
    capsys.readouterr()
    use = tmp_path / "use3.py"
    use.write_text(use.read_text().replace("mesh = ", "mesh  = "))  # (a line's text changed)
    log = tmp_path.parent / f"{tmp_path.name}-parsed.log"
    real = engine_mod.parse_module

    def counting(text, filename):
        with open(log, "a") as fh:
            fh.write(Path(filename).name + "\n")
        return real(text, filename)

    monkeypatch.setattr(engine_mod, "parse_module", counting)
    assert main(["check", ".", "--format", "json", "--jobs", "2"]) == 1
    warm = json.loads(capsys.readouterr()[0])
    assert log.read_text().split() == ["use3.py"]
    assert main(["check", ".", "--format", "json", "--jobs", "2", "--no-cache"]) == 1
    assert json.loads(capsys.readouterr()[0]) == warm
    assert [f["code"] for f in warm] == ["SHL101"] * 12


def test_a_batch_hands_out_files_in_chunks_as_it_reads_them(tmp_path, capsys, monkeypatch):
    """The workers are handed the files to summarise a chunk at a time while the batch is still
    reading (here a chunk is a few files): both take part, each file is parsed once, and the
    findings and the cache the run leaves are those of a serial run."""
    import os

    from shardlint import engine as engine_mod

    _mesh_pairs(tmp_path, pairs=20)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n")
    _, serial, _ = check(capsys, str(tmp_path), "--jobs", "1")
    assert len(serial) == 20
    log = tmp_path.parent / f"{tmp_path.name}-parsed.log"
    real_parse = engine_mod.parse_module
    sent: list[int] = []
    real_send = engine_mod._Worker.send

    def counting(text, filename):
        with open(log, "a") as fh:  # (from every process)
            fh.write(f"{os.getpid()} {Path(filename).name}\n")
        return real_parse(text, filename)

    def send(self, message):
        if message[0] == "summarise":
            sent.append(len(message[1]))
        return real_send(self, message)

    _forking(monkeypatch)
    monkeypatch.setattr(engine_mod, "parse_module", counting)
    monkeypatch.setattr(engine_mod._Worker, "send", send)
    monkeypatch.setattr(engine_mod, "_CHUNK", 600)  # (about five of these files)
    monkeypatch.setattr(engine_mod, "_LAST_CHUNK", 200)
    monkeypatch.chdir(tmp_path)
    assert main(["check", ".", "--format", "json", "--jobs", "2"]) == 1
    parallel = json.loads(capsys.readouterr()[0])
    assert [(f["path"], f["line"], f["message"]) for f in parallel] == \
        [(Path(f["path"]).name, f["line"], f["message"]) for f in serial]
    parsed = [line.split() for line in log.read_text().splitlines()]
    assert sorted(name for _, name in parsed) == sorted(p.name for p in tmp_path.glob("*.py"))
    assert len({pid for pid, _ in parsed}) == 2 and len(sent) >= 4 and sum(sent) == 40
    log.unlink()
    assert main(["check", ".", "--format", "json", "--jobs", "2"]) == 1  # (warm: no parse)
    assert json.loads(capsys.readouterr()[0]) == parallel and not log.exists()


def test_a_batch_whose_messages_outgrow_the_pipe_does_not_hang(tmp_path):
    """Chunks and answers larger than a pipe's buffer (long paths, hundreds of files each; on
    the corpus, megabytes): the batch may send the next chunk while a worker sends its answer,
    and each worker reads what is sent it as it comes, so neither waits on the other. Each
    answer here starts a little late (0.2 s), which opens the window every time: a worker that
    looked for a waiting message before answering and then answered hung in 3 runs of 4 (and
    once in CI without the delay)."""
    import subprocess
    import sys

    deep = tmp_path / ("a" * 200) / ("b" * 200) / ("c" * 200)
    deep.mkdir(parents=True)
    for i in range(1200):
        (deep / f"m{i}.py").write_text(f"import jax\n\n\ndef f{i}(x):\n    return x\n")
    size = len((deep / "m0.py").read_text())
    script = (  # (300 files a chunk: 300 long paths out, 300 summaries back)
        "import sys, time\nfrom multiprocessing import connection\n"
        "from shardlint import engine\nfrom shardlint.cli import main\n"
        f"engine._CHUNK = {300 * size}\nengine._CHUNK_FILES = 10_000\n"
        "send = connection.Connection.send\n"
        "def late(self, message):\n"
        "    if message[0] == 'ok':\n"
        "        time.sleep(0.2)\n"
        "    send(self, message)\n"
        "connection.Connection.send = late\n"
        f"sys.exit(main(['check', {str(tmp_path)!r}, '--jobs', '2', '--no-cache']))\n")
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=90)
    except subprocess.TimeoutExpired:
        raise AssertionError("the batch hung") from None
    assert proc.returncode == 0 and "failed" not in proc.stderr, proc.stderr
    assert "shardlint: cannot start worker processes" not in proc.stderr


def test_a_worker_reads_what_is_sent_it_while_it_answers(tmp_path):
    """Three chunks sent one after another, each and each answer larger than a pipe holds,
    before any answer is read: a worker that read the next message only between answers
    would be sending its first answer while the batch is still sending the third chunk, and
    both would wait for ever (every time). It reads them as they come: all three sent, all
    three answered."""
    import threading

    from shardlint import engine as engine_mod
    from shardlint.config import Config

    deep = tmp_path / ("a" * 200) / ("b" * 200) / ("c" * 200)
    deep.mkdir(parents=True)
    chunks = []
    for c in range(3):
        chunk = []
        for i in range(500):
            path = deep / f"m{c}_{i}.py"
            path.write_text(f"import jax\n\n\ndef f{i}(x):\n    return x\n")
            chunk.append((str(path), str(path.relative_to(tmp_path)), f"{c}-{i}", True))
        chunks.append(chunk)
    engine = engine_mod.Engine(Config(root=tmp_path), use_cache=False)
    (worker,) = engine._start_workers(1)
    try:
        sent = threading.Thread(target=lambda: [
            worker.send(("summarise", chunk, engine_mod.FACTS_BUDGET)) for chunk in chunks],
            daemon=True)
        sent.start()
        sent.join(60)
        assert not sent.is_alive(), "the batch and the worker waited on each other"
        answers = [worker.receive() for _ in chunks]
        assert [len(a[0]) for a in answers] == [500, 500, 500]
        assert all(len(a[2]) > 256 * 1024 for a in answers)  # (larger than a pipe holds)
    finally:
        worker.process.kill()
        worker.process.join()


def test_only_the_files_that_changed_have_their_shapes_made(tmp_path, capsys, monkeypatch):
    """A cold run makes no summary shape (the digest of a summary without its positions): the
    project token stands for every file's content. A later run makes the shapes of the files
    that changed alone, old and new: a line added keeps the token, so only the moved file and
    the files whose findings point into it are linted again; a new statement changes the
    shape, so every file is. Each run's output equals a cold one's, and a cold ``--jobs 2``
    run writes the index file a serial run writes."""
    _mesh_pairs(tmp_path, pairs=30)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n")
    monkeypatch.chdir(tmp_path)
    _forking(monkeypatch)
    index = tmp_path / cache_mod.DIR / cache_mod.FILE
    shaped: list[str] = []
    real_shape = cache_mod.shape_digest

    def shape(value):
        shaped.append(value["module"] if value else "")
        return real_shape(value)

    monkeypatch.setattr(cache_mod, "shape_digest", shape)
    linted: list[str] = []
    real_put = cache_mod.Cache.put_findings

    def put(self, rel, *rest):
        linted.append(rel)
        return real_put(self, rel, *rest)

    monkeypatch.setattr(cache_mod.Cache, "put_findings", put)

    def run(*argv: str) -> list[dict]:
        main(["check", ".", "--format", "json", *argv])
        return json.loads(capsys.readouterr()[0])

    def files() -> dict:
        data = json.loads(index.read_text())
        return {k: data[k] for k in ("files", "inputs", "settings")}

    found = run("--jobs", "2")
    assert len(linted) == 60 and shaped == []
    written = files()
    assert all(e[2] == "" for e in written["files"].values())
    shutil.rmtree(tmp_path / cache_mod.DIR)
    assert run("--jobs", "1") == found and files() == written
    lib = tmp_path / "lib0.py"
    lib.write_text("# a line added\n" + lib.read_text())
    linted.clear()
    warm = run("--jobs", "2")
    assert shaped == ["lib0", "lib0"] and "lib0.py" in linted and set(linted) <= {
        "lib0.py", "use0.py"}
    assert warm == run("--no-cache")
    lib.write_text(lib.read_text() + "\n\ndef other():\n    return 1\n")
    linted.clear()
    shaped.clear()
    warm = run("--jobs", "2")
    assert shaped == ["lib0"] and len(linted) == 60  # (the old shape: kept by the last run)
    assert warm == run("--no-cache")


def test_summarise_chunks_even_out_at_the_end():
    """While files are read a chunk waits until it holds _CHUNK characters; once all are read,
    each chunk is half a worker's share of what is left, down to _LAST_CHUNK; when less than
    that is left per worker, a worker's share of it (a small rest is split, not one chunk)."""
    from shardlint import engine as engine_mod

    batch = engine_mod._Summarising(None, 2)  # type: ignore[arg-type]
    for i in range(12):
        batch.queue.append((f"f{i}.py", f"f{i}.py", "", True))
        batch.sizes.append(100_000)
        batch.queued += 100_000
    assert [len(batch._chunk(2)) for _ in range(3)] == [5, 5, 0]  # (2 left: 200,000 < _CHUNK)
    batch.reading = False
    assert [len(batch._chunk(2)) for _ in range(2)] == [1, 1]
    for i in range(20):
        batch.queue.append((f"g{i}.py", f"g{i}.py", "", True))
        batch.sizes.append(5_000)
        batch.queued += 5_000
    assert [len(batch._chunk(2)) for _ in range(6)] == [10, 5, 3, 1, 1, 0]
    assert batch.queued == 0 and not batch.queue
    for i in range(40):
        batch.queue.append((f"h{i}.py", f"h{i}.py", "", True))
        batch.sizes.append(50_000)
        batch.queued += 50_000
    # (2,000,000 left: 500,000, then 400,000, 300,000, 200,000, then 150,000 until little is
    # left)
    assert [len(batch._chunk(2)) for _ in range(10)] == [10, 8, 6, 4, 3, 3, 3, 2, 1, 0]


def test_a_batch_does_the_share_of_a_worker_that_dies(tmp_path, capsys, monkeypatch):
    """A worker killed while it summarises (out of memory, say) or failing while it lints
    leaves its share to the main process: the same findings, and a failure says so."""
    import os

    from shardlint import engine as engine_mod

    _mesh_pairs(tmp_path)
    _, serial, _ = check(capsys, str(tmp_path), "--jobs", "1")
    parent = os.getpid()
    _forking(monkeypatch)
    real_summarise, real_lint = engine_mod._summarise_items, engine_mod._lint_items

    def dying(*args):
        if os.getpid() != parent:
            os._exit(3)
        return real_summarise(*args)

    monkeypatch.setattr(engine_mod, "_summarise_items", dying)
    code, found, _ = check(capsys, str(tmp_path), "--jobs", "2")
    assert (code, found) == (1, serial)
    monkeypatch.setattr(engine_mod, "_summarise_items", real_summarise)

    def failing(engine, items, held=None):
        if os.getpid() != parent:
            raise ValueError("a bug in a worker")
        return real_lint(engine, items, held)

    monkeypatch.setattr(engine_mod, "_lint_items", failing)
    code, found, err = check(capsys, str(tmp_path), "--jobs", "2")
    assert (code, found) == (1, serial)
    assert "a worker failed" in err and "a bug in a worker" in err


def test_a_warm_run_reads_no_summary_and_a_lost_summaries_file_costs_only_time(
        tmp_path, capsys, monkeypatch):
    """Nothing changed: the findings come from the small index file (the summaries file is not
    read). Summaries that are gone, or of another generation (a run stopped between the two
    writes), are made again: the findings stay those of a run without a cache."""
    _mesh_pairs(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n")
    monkeypatch.chdir(tmp_path)
    _, fresh, _ = check(capsys, ".")

    def run() -> list[dict]:
        assert main(["check", ".", "--format", "json"]) == 1
        return json.loads(capsys.readouterr()[0])

    assert run() == fresh
    cache = tmp_path / cache_mod.DIR
    held = cache / cache_mod.SUMMARIES
    held.unlink()
    assert run() == fresh and not held.exists()  # (not read, not written)
    with open(tmp_path / "lib3.py", "a") as fh:
        fh.write("\n\ndef other():\n    return 1\n")  # (its summary changes)
    edited = run()
    assert [f["path"] for f in edited] == [f["path"] for f in fresh] and held.exists()
    data = json.loads(held.read_text())
    data["generation"] = "0" * 16
    held.write_text(json.dumps(data))
    (tmp_path / "lib3.py").write_text((tmp_path / "lib3.py").read_text() + "\nX = 2\n")
    assert run() == edited
    assert json.loads(held.read_text())["generation"] != "0" * 16


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_edit_that_keeps_every_summary_does_not_rewrite_the_summaries_file(
        tmp_path, capsys, monkeypatch, jobs):
    """A comment edited: the file's content digest changes, its summary does not. Only the small
    index file is written (the summaries file is the largest part of the cache); an edit that
    changes a summary writes both. The findings are a fresh run's either way."""
    _mesh_pairs(tmp_path)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n")
    monkeypatch.chdir(tmp_path)
    _forking(monkeypatch)

    def run() -> list[dict]:
        assert main(["check", ".", "--format", "json", "--jobs", jobs]) == 1
        return json.loads(capsys.readouterr()[0])

    fresh = run()
    held = tmp_path / cache_mod.DIR / cache_mod.SUMMARIES
    index = tmp_path / cache_mod.DIR / cache_mod.FILE
    before = held.stat().st_ino, held.read_bytes()
    with open(tmp_path / "lib3.py", "a") as fh:
        fh.write("# a comment\n")
    assert run() == fresh
    assert (held.stat().st_ino, held.read_bytes()) == before  # (not written again)
    assert json.loads(index.read_text())["files"]["lib3.py"][0] == cache_mod.digest(
        (tmp_path / "lib3.py").read_text())
    with open(tmp_path / "lib3.py", "a") as fh:
        fh.write("\n\ndef other():\n    return 1\n")
    assert run() == fresh and held.read_bytes() != before[1]
    data = json.loads(held.read_text())
    assert data["generation"] == json.loads(index.read_text())["generation"]
    assert "other" in json.dumps(data["summaries"]["lib3.py"])


def test_a_batch_that_fails_to_summarise_in_a_worker_and_a_batch_without_fork(
        tmp_path, capsys, monkeypatch):
    """A worker whose summaries fail is left out of the index it would have forwarded (the
    main process summarises its share; the other worker still lints with a whole index); and
    with other threads running the workers are started without fork (the engine is handed to
    them whole): the same findings either way."""
    import os
    import threading

    from shardlint import engine as engine_mod

    _mesh_pairs(tmp_path)
    _, serial, _ = check(capsys, str(tmp_path), "--jobs", "1")
    parent = os.getpid()
    _forking(monkeypatch)
    real = engine_mod._summarise_items

    def failing_once(engine, items, budget, held, *rest):
        if os.getpid() != parent and any(p.endswith("lib0.py") for p, *_ in items):
            raise RuntimeError("a summary bug")  # (in the one worker that has lib0.py)
        return real(engine, items, budget, held, *rest)

    monkeypatch.setattr(engine_mod, "_summarise_items", failing_once)
    code, found, err = check(capsys, str(tmp_path), "--jobs", "2")
    assert (code, found) == (1, serial) and "a summary bug" in err
    assert err.count("a worker failed") == 1  # (the other one linted its share)
    monkeypatch.setattr(engine_mod, "_summarise_items", real)
    monkeypatch.setattr(threading, "active_count", lambda: 2)  # (as in a language server)
    code, found, _ = check(capsys, str(tmp_path), "--jobs", "2")
    assert (code, found) == (1, serial)


def test_a_batch_that_cannot_start_workers_lints_in_one_process(tmp_path, capsys, monkeypatch):
    """No processes can be started (a container's process limit): the run says so on stderr
    and gives the findings of a serial run."""
    from shardlint import engine as engine_mod

    _mesh_pairs(tmp_path)
    _, serial, _ = check(capsys, str(tmp_path), "--jobs", "1")

    def refused(self, context, engine):
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(engine_mod._Worker, "__init__", refused)
    code, found, err = check(capsys, str(tmp_path), "--jobs", "2")
    assert (code, found) == (1, serial) and err.count("cannot start worker processes") == 1


def test_the_prefilter_passes_exactly_the_files_its_pattern_matches():
    """``mentions_jax`` searches substrings instead of running its regex: on every spelling
    that matters (word boundaries of each kind, Unicode letters and digits, underscores, the
    ends of the text) it answers what ``_PREFILTER.search`` does."""
    import random

    from shardlint.engine import _PREFILTER, mentions_jax

    pieces = ["jax", "flax", "optax", "pjax", "jaxlib", "jax_", "_jax", "jax2", "éjax", "jaxé",
              "axis_rules", "axes_rules", "axs_rules", "mesh_ax", "mesh_", "s_rules", ".", " ",
              "\n", "#", "import ", "x", "٣", "fl", "ax", "opt", "j", "a", ".at[", ".at", "[",
              ".apply_gradients(", "apply_gradients", "("]
    rng = random.Random(15)
    cases = ["", "jax", "import jax", "pjax", "jaxx", "flaxen", "optax.adam", "my_jax_tool",
             "logical_axis_rules", "mesh_axes", "(jax)", "jax\u00e9", "\u00e9jax",
             "cache.at[0].set(v)", "state.apply_gradients(grads=g)", "apply_gradients(s)"]
    cases += ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 8))) for _ in range(4000)]
    for text in cases:
        assert mentions_jax(text) == (_PREFILTER.search(text) is not None), text


@pytest.mark.parametrize("field, value", [("project", 3), ("inputs", []), ("settings", None),
                                          ("inputs", {"lib0.py": "0" * 40}), ("files", {})])
def test_an_index_file_written_otherwise_costs_only_time(tmp_path, capsys, monkeypatch, field,
                                                         value):
    """An index file whose project token, settings or inputs are of another shape (written by
    hand, or by a build that kept them otherwise) is no cache, or names a project that is not
    this one: the findings are those of a run without a cache."""
    _mesh_pairs(tmp_path, pairs=3)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 't'\n")
    monkeypatch.chdir(tmp_path)
    _, fresh, _ = check(capsys, ".")
    assert main(["check", ".", "--format", "json"]) == 1
    capsys.readouterr()
    index = tmp_path / cache_mod.DIR / cache_mod.FILE
    data = json.loads(index.read_text())
    data[field] = value
    index.write_text(json.dumps(data))
    assert main(["check", ".", "--format", "json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out) == fresh and "Traceback" not in err
