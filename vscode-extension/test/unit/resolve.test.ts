// Which server starts, and why: resolveServer with fake interpreters (no VS Code, no Python).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { Inputs, parseProbe, PythonInfo, requiresPythonOf, resolveServer, satisfies } from "../../src/resolve";

const TOOL = "/ext/bundled/tool/shardlint_tool.py";

/** A machine with these interpreters; `calls` records every probe. */
function machine(pythons: Record<string, Partial<PythonInfo> | string>, files: string[] = []) {
  const calls: string[] = [];
  const probe = async (cmd: string[]) => {
    calls.push(cmd.join(" "));
    const p = pythons[cmd[0]];
    if (p === undefined) return "not found";
    if (typeof p === "string") return p;
    return { executable: cmd[0], version: [3, 12, 1] as [number, number, number], shardlint: null, ...p };
  };
  const exists = async (f: string) => files.includes(f);
  return { calls, probe, exists };
}

function inputs(over: Partial<Inputs> & Pick<Inputs, "probe" | "exists">): Inputs {
  return {
    trusted: true, path: [], interpreter: [], pythonExtension: async () => undefined,
    bundledTool: TOOL, pathPythons: ["python3", "python"], ...over,
  };
}

describe("trusted folder", () => {
  it("runs shardlint.path's first existing entry as `<path> server`, before any interpreter", async () => {
    const m = machine({ "/venv/bin/python": { shardlint: "0.1.0" } }, ["/b/shardlint"]);
    const r = await resolveServer(inputs({ ...m, path: ["/a/shardlint", "/b/shardlint"], interpreter: ["/venv/bin/python"] }));
    assert.equal(r.source, "path");
    assert.ok(r.source === "path");
    assert.equal(r.command, "/b/shardlint");
    assert.deepEqual(r.args, ["server"]);
    assert.match(r.reason, /shardlint\.path: \/b\/shardlint/);
    assert.deepEqual(r.tried, ["shardlint.path: /a/shardlint does not exist"]);
    assert.deepEqual(m.calls, []);
  });

  it("runs `-m shardlint server` in shardlint.interpreter when shardlint is importable there", async () => {
    const m = machine({ "/venv/bin/python": { shardlint: "0.1.0" } });
    let asked = false;
    const r = await resolveServer(inputs({
      ...m, interpreter: ["/venv/bin/python"], pythonExtension: async () => { asked = true; return ["/other/python"]; },
    }));
    assert.ok(r.source === "interpreter");
    assert.equal(r.command, "/venv/bin/python");
    assert.deepEqual(r.args, ["-m", "shardlint", "server"]);
    assert.equal(r.reason, "shardlint.interpreter /venv/bin/python (Python 3.12.1) has shardlint 0.1.0");
    assert.equal(asked, false, "the setting wins over the Python extension");
  });

  it("keeps the interpreter's own arguments before -m", async () => {
    const m = machine({ conda: { executable: "/conda/envs/x/bin/python", shardlint: "0.1.0" } });
    const r = await resolveServer(inputs({ ...m, interpreter: ["conda", "run", "-n", "x", "python"] }));
    assert.ok(r.source === "interpreter");
    assert.deepEqual([r.command, ...r.args], ["conda", "run", "-n", "x", "python", "-m", "shardlint", "server"]);
  });

  it("uses the Python extension's interpreter when shardlint is importable there", async () => {
    const m = machine({ "/proj/.venv/bin/python": { shardlint: "0.1.0", version: [3, 11, 4] } });
    const r = await resolveServer(inputs({ ...m, pythonExtension: async () => ["/proj/.venv/bin/python"] }));
    assert.ok(r.source === "pythonExtension");
    assert.deepEqual(r.args, ["-m", "shardlint", "server"]);
    assert.equal(r.reason, "the Python extension's interpreter /proj/.venv/bin/python (Python 3.11.4) has shardlint 0.1.0");
  });

  it("runs the bundled server with the selected interpreter when it lacks shardlint but is new enough", async () => {
    const m = machine({ "/proj/.venv/bin/python": { version: [3, 10, 0] }, python3: { shardlint: "9.9" } });
    const r = await resolveServer(inputs({ ...m, pythonExtension: async () => ["/proj/.venv/bin/python"] }));
    assert.ok(r.source === "bundled");
    assert.equal(r.command, "/proj/.venv/bin/python");
    assert.deepEqual(r.args, ["-I", TOOL, "server"]);
    assert.deepEqual(r.prefix, ["-I", TOOL]);
    assert.deepEqual(r.userPython, ["/proj/.venv/bin/python"], "memory runs probes with the user's interpreter");
    assert.match(r.reason, /^bundled server with \/proj\/\.venv\/bin\/python \(Python 3\.10\.0\): no shardlint\.path or interpreter with shardlint$/);
    assert.deepEqual(r.tried, ["the Python extension's interpreter /proj/.venv/bin/python (Python 3.10.0): shardlint is not importable there"]);
    assert.deepEqual(m.calls, ["/proj/.venv/bin/python"], "probed once, not again for the bundled server");
  });

  it("falls back to python3 on PATH when the selected interpreter is too old", async () => {
    const m = machine({ "/old/python": { version: [3, 9, 18] }, python3: { version: [3, 11, 2], executable: "/usr/bin/python3" } });
    const r = await resolveServer(inputs({ ...m, interpreter: ["/old/python"] }));
    assert.ok(r.source === "bundled");
    assert.equal(r.command, "python3");
    assert.equal(r.python?.executable, "/usr/bin/python3");
    assert.ok(r.tried.includes("/old/python: Python 3.9.18 is older than 3.10"));
  });

  it("tries `python` when `python3` is not on PATH, and says so", async () => {
    const m = machine({ python: { version: [3, 13, 0] } });
    const r = await resolveServer(inputs({ ...m }));
    assert.ok(r.source === "bundled");
    assert.equal(r.command, "python");
    assert.deepEqual(r.tried, ["no interpreter selected in the Python extension (or it is not installed)", "python3: not found"]);
  });

  it("reports an interpreter that fails to run and goes on", async () => {
    const m = machine({ "/broken/python": "failed: Segmentation fault", python3: {} });
    const r = await resolveServer(inputs({ ...m, interpreter: ["/broken/python"] }));
    assert.ok(r.source === "bundled");
    assert.equal(r.command, "python3");
    assert.ok(r.tried.includes("shardlint.interpreter /broken/python: failed: Segmentation fault"));
  });
});

describe("no usable Python", () => {
  it("fails with one reason naming what was tried", async () => {
    const m = machine({});
    const r = await resolveServer(inputs({ ...m }));
    assert.equal(r.source, "none");
    assert.equal(r.reason, "no Python >= 3.10 found to run shardlint (tried: python3, python)");
  });

  it("fails when every Python is too old", async () => {
    const m = machine({ python3: { version: [3, 8, 10] }, python: { version: [2, 7, 18] } });
    const r = await resolveServer(inputs({ ...m }));
    assert.equal(r.source, "none");
    assert.ok(r.tried.includes("python3: Python 3.8.10 is older than 3.10"));
    assert.ok(r.tried.includes("python: Python 2.7.18 is older than 3.10"));
  });
});

describe("untrusted folder", () => {
  it("ignores shardlint.path, shardlint.interpreter and the Python extension: bundled server with PATH's Python", async () => {
    const m = machine({ "/ws/.venv/bin/python": { shardlint: "0.1.0" }, python3: { executable: "/usr/bin/python3" } }, ["/ws/shardlint"]);
    let asked = false;
    const r = await resolveServer(inputs({
      ...m, trusted: false, path: ["/ws/shardlint"], interpreter: ["/ws/.venv/bin/python"],
      pythonExtension: async () => { asked = true; return ["/ws/.venv/bin/python"]; },
    }));
    assert.ok(r.source === "bundled");
    assert.equal(r.command, "python3");
    assert.deepEqual(r.args, ["-I", TOOL, "server"], "isolated mode: nothing is imported from the folder");
    assert.equal(r.userPython, undefined);
    assert.match(r.reason, /: the folder is not trusted$/);
    assert.equal(asked, false);
    assert.deepEqual(m.calls, ["python3"], "the folder's interpreter is never run");
  });
});

describe("parseProbe", () => {
  it("reads the probe's JSON line", () => {
    assert.deepEqual(parseProbe('noise\n{"executable": "/p", "version": [3, 12, 1], "shardlint": "0.1.0"}\n'),
      { executable: "/p", version: [3, 12, 1], shardlint: "0.1.0" });
    assert.deepEqual(parseProbe('{"executable": "/p", "version": [3, 10, 0], "shardlint": null}'),
      { executable: "/p", version: [3, 10, 0], shardlint: null });
  });

  it("explains output it does not understand", () => {
    assert.match(parseProbe("Python 2.7.18") as string, /^unexpected output: "Python 2\.7\.18"$/);
  });
});

describe("requires-python", () => {
  it("reads requires-python from the [project] table only", () => {
    assert.equal(requiresPythonOf('[tool.x]\nrequires-python = "<3"\n[project]\nname = "p"\nrequires-python = ">=3.12"\n'), ">=3.12");
    assert.equal(requiresPythonOf("[project]\nrequires-python = '>=3.11,<3.14'  # c\n"), ">=3.11,<3.14");
    assert.equal(requiresPythonOf('[project]\nname = "p"\n[tool.shardlint]\nrequires-python = ">=3.12"\n'), undefined);
  });

  it("judges PEP 440 specifiers", () => {
    assert.equal(satisfies([3, 12, 1], ">=3.12"), true);
    assert.equal(satisfies([3, 11, 9], ">=3.12"), false);
    assert.equal(satisfies([3, 13, 0], ">=3.10,<3.13"), false);
    assert.equal(satisfies([3, 12, 4], "~=3.12"), true);
    assert.equal(satisfies([4, 0, 0], "~=3.12"), false);
    assert.equal(satisfies([3, 12, 4], "==3.12.*"), true);
    assert.equal(satisfies([3, 13, 0], "!=3.13.*"), false);
    assert.equal(satisfies([3, 12, 0], "garbage"), true, "an unreadable clause rules nothing out");
  });

  it("the bundled server prefers a PATH Python that satisfies the project's requires-python", async () => {
    const m = machine({ python3: { version: [3, 11, 4] }, "python3.13": { version: [3, 13, 0] }, "python3.12": { version: [3, 12, 2] } });
    const r = await resolveServer(inputs({
      ...m, requiresPython: ">=3.12", versionedPythons: [["python3.13"], ["python3.12"]],
    }));
    assert.ok(r.source === "bundled");
    assert.equal(r.command, "python3.13");
    assert.match(r.reason, /Python 3\.13\.0.*satisfies requires-python >=3\.12/);
    assert.ok(r.tried.includes("python3: Python 3.11.4 does not satisfy requires-python >=3.12"));
  });

  it("probes no versioned names when the first candidate already satisfies it", async () => {
    const m = machine({ python3: { version: [3, 12, 4] }, "python3.13": { version: [3, 13, 0] } });
    const r = await resolveServer(inputs({ ...m, requiresPython: ">=3.12", versionedPythons: [["python3.13"]] }));
    assert.ok(r.source === "bundled");
    assert.equal(r.command, "python3");
    assert.deepEqual(m.calls, ["python3"]);
  });

  it("falls back to the first new-enough Python, saying none satisfies requires-python", async () => {
    const m = machine({ python3: { version: [3, 11, 4] } });
    const r = await resolveServer(inputs({ ...m, requiresPython: ">=3.13", versionedPythons: [["python3.13"]] }));
    assert.ok(r.source === "bundled");
    assert.equal(r.command, "python3");
    assert.match(r.reason, /none of the interpreters found satisfies requires-python >=3\.13/);
  });
});
