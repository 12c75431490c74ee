// What the server receives from the shardlint.* settings (shardlint/lsp/settings.py reads it).
import assert from "node:assert/strict";
import * as os from "node:os";
import { describe, it } from "node:test";
import { serverSettings, substitute, UserSettings } from "../../src/serverSettings";

const defaults: UserSettings = {
  enable: true, select: [], ignore: [], severity: {}, memoryEnabled: true, memoryDevices: [],
  memoryHardware: "", interpreter: [], path: [],
};

describe("serverSettings", () => {
  it("leaves unset values out, so the project's [tool.shardlint] applies", () => {
    assert.deepEqual(serverSettings(defaults, true), { memory: { enabled: true, trusted: true } });
  });

  it("passes select, ignore and severity through", () => {
    const s = serverSettings({ ...defaults, select: ["SHL1", " SHL501 ", ""], ignore: ["SHL103"], severity: { SHL501: "warning" } }, true);
    assert.deepEqual(s, { select: ["SHL1", "SHL501"], ignore: ["SHL103"], severity: { SHL501: "warning" }, memory: { enabled: true, trusted: true } });
  });

  it("turns the memory check off in an untrusted folder, and tells the server about trust", () => {
    assert.deepEqual(serverSettings(defaults, false).memory, { enabled: false, trusted: false });
    assert.equal(serverSettings({ ...defaults, memoryEnabled: false }, true).memory.enabled, false);
  });

  it("keeps valid device counts and the hardware name", () => {
    const s = serverSettings({ ...defaults, memoryDevices: [1, 0, 2.5, 8], memoryHardware: " H100-80GB " }, true);
    assert.deepEqual(s.memory, { enabled: true, trusted: true, devices: [1, 8], hardware: "H100-80GB" });
  });

  it("passes a TPU target through, trimmed", () => {
    assert.equal(serverSettings({ ...defaults, memoryTarget: " tpu-v5e:2x2 " }, true).memory.target, "tpu-v5e:2x2");
    assert.equal(serverSettings({ ...defaults, memoryTarget: "" }, true).memory.target, undefined);
  });

  it("names the interpreter that runs probes, in a trusted folder only", () => {
    assert.equal(serverSettings(defaults, true, "/proj/.venv/bin/python").memory.python, "/proj/.venv/bin/python");
    assert.equal(serverSettings(defaults, false, "/proj/.venv/bin/python").memory.python, undefined);
  });
});

describe("substitute", () => {
  it("expands ${workspaceFolder}, ${userHome}, ${env:NAME} and ~", () => {
    process.env.SHARDLINT_TEST_VAR = "v";
    assert.equal(substitute("${workspaceFolder}/.venv/bin/python", "/ws"), "/ws/.venv/bin/python");
    assert.equal(substitute("${userHome}/x"), `${os.homedir()}/x`);
    assert.equal(substitute("~/bin/shardlint"), `${os.homedir()}/bin/shardlint`);
    assert.equal(substitute("/opt/${env:SHARDLINT_TEST_VAR}/python"), "/opt/v/python");
  });
});
