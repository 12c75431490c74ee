// End-to-end (Route A): the .vsix installed in code-server, driven like a user in headless Chromium.
//
//   node test/e2e/run.mjs trusted|untrusted|nopython
//
// env: CODE_SERVER (executable), VSIX, ARTIFACTS (screenshots, logs, result JSON), PYTHON (an
// interpreter where shardlint is importable: the trusted folder uses it through
// shardlint.interpreter; the untrusted one must ignore it), MEASURE_MEMORY=0 when PYTHON has no
// jax (skips clicking the memory code lens), KEEP_TMP=1 to keep the temp folder.
//
// trusted:   open original.py -> the Problems panel lists SHL102, SHL103, SHL501;
//            quick fix on the SHL101 line of discussion_advice.py, save -> the file on disk has
//            `jax.set_mesh(mesh)`; Fix All on original.py -> `jax.tree.map` on disk; a folder
//            setting ignoring SHL103 applies live; probes.py shows the server's "Measure memory"
//            code lens; clicking it measures the probe and the lens shows the headline figure;
//            fit/fit_probe.py (a decoder that does not fit its folder's capacity): measured, its lens
//            says a plan fits, and the refactor over its rules table puts the plan's table on disk.
// untrusted: Restricted Mode; the bundled server runs (not the interpreter setting); the Problems
//            panel lists the static findings; probes.py shows no memory code lens.
// nopython:  no Python on PATH and none configured: one notification, also after a restart, and
//            the status bar item says so.
import fs from "node:fs";
import path from "node:path";
import {
  codeLensTexts, findFiles, log, openFile, openWorkbench, problemsWith, runCommand, startSession, stopSession,
} from "./session.mjs";

const scenario = process.argv[2];
if (!["trusted", "untrusted", "nopython"].includes(scenario)) {
  console.error("usage: node test/e2e/run.mjs trusted|untrusted|nopython");
  process.exit(2);
}
const ext = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..", "..");
const repo = path.dirname(ext);
const version = JSON.parse(fs.readFileSync(path.join(ext, "package.json"), "utf8")).version;
const VSIX = process.env.VSIX || path.join(ext, `shardlint-${version}.vsix`);
const CODE_SERVER = process.env.CODE_SERVER;
const ARTIFACTS = process.env.ARTIFACTS || path.join(repo, "test-artifacts", "vscode");
const PYTHON = process.env.PYTHON || "python3";
const EXAMPLES = path.join(repo, "examples", "seed_ensemble");
if (!CODE_SERVER) throw new Error("set CODE_SERVER to the code-server executable");
fs.mkdirSync(ARTIFACTS, { recursive: true });
for (const f of fs.readdirSync(ARTIFACTS)) if (f.startsWith(`${scenario}`)) fs.rmSync(path.join(ARTIFACTS, f), { force: true });

const result = { scenario, ok: false, checks: {}, error: null };
const check = (name, value) => {
  result.checks[name] = value;
  log(`check ${name}:`, JSON.stringify(value));
};
const expect = (cond, message) => {
  if (!cond) throw new Error(message);
};
const shot = async (page, name) => {
  const file = path.join(ARTIFACTS, `${scenario}-${name}.png`);
  await page.screenshot({ path: file });
  log("screenshot", file);
};

const trusted = scenario !== "untrusted";
const s = await startSession({
  codeServer: CODE_SERVER, vsix: VSIX, trusted, tag: `vscode-${scenario}`, noPython: scenario === "nopython",
  // Set in trusted and untrusted: the untrusted folder must not use it.
  settings: scenario === "nopython" ? {} : { "shardlint.interpreter": [PYTHON], "shardlint.memory.devices": [1, 2] },
});
// A copy of the examples in a temporary folder: the quick fix changes a file.
const folder = path.join(s.ws, "examples", "seed_ensemble");
fs.mkdirSync(folder, { recursive: true });
for (const f of ["original.py", "discussion_advice.py", "probes.py"]) fs.copyFileSync(path.join(EXAMPLES, f), path.join(folder, f));
const fitProbe = scenario === "trusted" && process.env.MEASURE_MEMORY !== "0" ? writeFitProbe() : "";
const page = s.page;
const outputChannel = () => findFiles(s.tmp, /shardlint\.log$/).map((f) => fs.readFileSync(f, "utf8")).join("\n");
/** Polls a file until `done(text)`; returns the last text read. */
async function waitForFile(file, done, tries = 100) {
  let text = fs.readFileSync(file, "utf8");
  for (let i = 0; i < tries && !done(text); i++) {
    await page.waitForTimeout(100);
    text = fs.readFileSync(file, "utf8");
  }
  return text;
}

const steps = {
  trusted: [problemsPanel, quickFixOnDisk, fixAllOnDisk, settingAppliesLive, memoryLens, measureMemory, fitPlan, serverChoice],
  untrusted: [problemsPanel, memoryLens, serverChoice],
  nopython: [oneNotification],
}[scenario];

try {
  await openWorkbench(page, s);
  log("workbench loaded");
  for (const step of steps) {
    log(`-- ${step.name}`);
    await step();
  }
  result.ok = true;
} catch (e) {
  result.error = String(e?.stack || e);
  log("FAILED:", e);
  await shot(page, "failure").catch(() => undefined);
} finally {
  for (const f of findFiles(s.tmp, /^(code-server\.log|remoteexthost\.log)$/)) {
    fs.copyFileSync(f, path.join(ARTIFACTS, `${scenario}-${path.basename(f)}`));
  }
  fs.writeFileSync(path.join(ARTIFACTS, `${scenario}-output-channel.log`), outputChannel());
  fs.writeFileSync(path.join(ARTIFACTS, `${scenario}.json`), JSON.stringify(result, null, 2));
  await stopSession(s, { keep: !!process.env.KEEP_TMP });
  log(result.ok ? "PASS" : "FAIL", scenario);
  process.exit(result.ok ? 0 : 1);
}

/** Open original.py: the Problems panel lists its findings; the status bar shows the trust state. */
async function problemsPanel() {
  await openFile(page, "original.py");
  await page.waitForSelector(".monaco-editor [class*=\"squiggly-\"]", { timeout: 90000 });
  const problems = await problemsWith(page, ["SHL102", "SHL103", "SHL501"]);
  check("problemsCodes", [...new Set(problems.match(/SHL\d{3}/g))].sort());
  await shot(page, "problems");
  const status = await page.locator(".statusbar").innerText();
  check("restrictedMode", status.includes("Restricted Mode"));
  expect(status.includes("Restricted Mode") === !trusted, `Restricted Mode is ${trusted ? "" : "not "}shown in the status bar`);
  const item = await page.locator(".statusbar-item", { hasText: "shardlint" }).first().innerText();
  check("statusItem", item.trim());
  expect(item.includes("(restricted)") === !trusted, "the shardlint status bar item does not show the trust state");
}

/** The quick fix on the SHL101 line of discussion_advice.py, saved: the file on disk changes. */
async function quickFixOnDisk() {
  const file = path.join(folder, "discussion_advice.py");
  const before = fs.readFileSync(file, "utf8");
  const line = before.split("\n").findIndex((l) => l.startsWith("with nn.logical_axis_rules(rules), mesh:")) + 1;
  expect(line > 0, "the `with ..., mesh:` line is not in discussion_advice.py");
  await openFile(page, `discussion_advice.py:${line}:37`);
  await page.waitForSelector(".editor-group-container.active .monaco-editor .squiggly-error", { timeout: 60000 });
  let applied = false;
  for (let attempt = 1; attempt <= 3 && !applied; attempt++) {
    await openFile(page, `discussion_advice.py:${line}:37`);
    await page.keyboard.press("Control+.");
    try {
      await page.locator(".action-widget .monaco-list-row", { hasText: "jax.set_mesh(mesh)" }).first().waitFor({ timeout: 8000 });
    } catch {
      log(`quick fix menu not shown (attempt ${attempt})`);
      await page.keyboard.press("Escape");
      continue;
    }
    check("quickFixTitles", await page.locator(".action-widget .monaco-list-row").allInnerTexts());
    await shot(page, "quickfix-menu");
    // The menu takes keys, not clicks (a pointer-block layer covers it): move to the fix, Enter.
    for (let i = 0; i < 10 && !applied; i++) {
      const focused = await page.locator(".action-widget .monaco-list-row.focused").first().innerText().catch(() => "");
      if (focused.includes("jax.set_mesh(mesh)")) {
        await page.keyboard.press("Enter");
        applied = true;
      } else {
        await page.keyboard.press("ArrowDown");
      }
    }
  }
  expect(applied, "the quick fix for SHL101 was not offered");
  await page.waitForTimeout(300);
  await page.keyboard.press("Control+S");
  let after = await waitForFile(file, (t) => t !== before);
  if (after === before) {
    await runCommand(page, "File: Save");
    after = await waitForFile(file, (t) => t !== before, 50);
  }
  check("fixedLineOnDisk", after.split("\n")[line - 1]);
  expect(result.checks.fixedLineOnDisk === "with nn.logical_axis_rules(rules), jax.set_mesh(mesh):", "the quick fix did not change the file on disk");
  await shot(page, "quickfix-applied");
}

/** shardlint: Fix All on original.py (its safe fix: jax.tree_map -> jax.tree.map), saved. */
async function fixAllOnDisk() {
  await openFile(page, "original.py");
  await runCommand(page, "shardlint: Fix All");
  await page.locator(".tabs-container .tab.active.dirty").waitFor({ timeout: 20000 });
  await page.keyboard.press("Control+S");
  const text = await waitForFile(path.join(folder, "original.py"), (t) => t.includes("jax.tree.map("));
  check("fixAllOnDisk", text.includes("jax.tree.map(") && !text.includes("jax.tree_map("));
  expect(result.checks.fixAllOnDisk, "Fix All did not change original.py on disk");
}

/** A setting changed while the server runs applies at once: the folder's settings ignore SHL103. */
async function settingAppliesLive() {
  fs.mkdirSync(path.join(s.ws, ".vscode"), { recursive: true });
  fs.writeFileSync(path.join(s.ws, ".vscode", "settings.json"), JSON.stringify({ "shardlint.ignore": ["SHL103"] }, null, 2));
  await runCommand(page, "View: Focus Problems");
  await page.waitForFunction(() => {
    const t = document.querySelector(".markers-panel")?.innerText ?? "";
    return t.includes("SHL102") && !t.includes("SHL103");
  }, null, { timeout: 30000 });
  check("liveIgnore", true);
  await shot(page, "ignore-setting");
}

/** probes.py: a "Measure memory" code lens on the probe when trusted, none when not. */
async function memoryLens() {
  const text = fs.readFileSync(path.join(folder, "probes.py"), "utf8");
  const probeLine = text.split("\n").findIndex((l) => l.startsWith("def shardlint_probe_")) + 1;
  await openFile(page, `probes.py:${probeLine}`); // lenses are drawn for the lines in view only
  const lens = page.locator(".editor-group-container.active .monaco-editor .codelens-decoration", { hasText: "Measure memory" });
  if (trusted) await lens.first().waitFor({ timeout: 30000 });
  else await page.waitForTimeout(4000); // the server's lenses come with its first answers: they would be there by now
  const lenses = await codeLensTexts(page);
  check("codeLenses", lenses);
  const memory = lenses.filter((t) => t.includes("Measure memory"));
  expect(trusted ? memory.length > 0 : memory.length === 0, `expected ${trusted ? "a" : "no"} "Measure memory" code lens, found ${memory.length}`);
  await shot(page, "probes");
}

/** Clicking the lens makes the server measure the probe; its lens then shows the headline figure. */
async function measureMemory() {
  if (process.env.MEASURE_MEMORY === "0") return;
  await page.locator(".editor-group-container.active .monaco-editor .codelens-decoration a", { hasText: "Measure memory" }).first().click();
  const headline = page.locator(".editor-group-container.active .monaco-editor .codelens-decoration", { hasText: "/device at" });
  await headline.first().waitFor({ timeout: 120000 }).catch(() => undefined);
  const lenses = await codeLensTexts(page);
  check("memoryRun", lenses.filter((t) => /\/device at|memory check failed|measuring/.test(t)).map((t) => t.slice(0, 200)));
  await shot(page, "memory");
  expect(lenses.some((t) => t.includes("/device at")), `the probe's lens did not show a figure: ${JSON.stringify(lenses)}`);
}

/** The fit scenario's folder, written before the workbench starts (Quick Open indexes the
 * workspace then: a file written later may not be found in time). Returns the probe's text. */
function writeFitProbe() {
  const dir = path.join(s.ws, "fit");
  fs.mkdirSync(dir, { recursive: true });
  // The capacity comes from the folder's config: the client sends devices only.
  fs.writeFileSync(path.join(dir, "pyproject.toml"), '[project]\nname = "fit"\n\n[tool.shardlint.memory]\ncapacity = "250MiB"\n');
  // The 1B decoder probe at CI scale, `embed` unsharded, on a (devices, 1) mesh: 286 MiB at 2 devices.
  const decoder = fs.readFileSync(path.join(repo, "examples", "decoder_1b", "probe.py"), "utf8");
  const edits = [
    ["= 20, 2048, 8192, 16, 32000, 512, 8", "= 4, 512, 2048, 8, 4096, 128, 8"],
    ['    ("embed", "fsdp"),', '    ("embed", None),'],
    ["    tensor = 2 if n % 2 == 0 else 1", "    tensor = 1"],
  ];
  let probe = decoder;
  for (const [from, to] of edits) {
    expect(probe.includes(from), `examples/decoder_1b/probe.py no longer has ${from}`);
    probe = probe.replace(from, to);
  }
  const file = path.join(dir, "fit_probe.py");
  fs.writeFileSync(file, probe);
  return probe;
}

/** `shardlint memory --fit` in the editor: a probe that does not fit its folder's capacity gets a
 * plan; its lens says so, and the refactor over the rules table writes the plan's table. */
async function fitPlan() {
  if (process.env.MEASURE_MEMORY === "0") return;
  const probe = fitProbe;
  const file = path.join(s.ws, "fit", "fit_probe.py");
  const lines = probe.split("\n");
  const probeLine = lines.findIndex((l) => l.startsWith("def shardlint_probe_")) + 1;
  await openFile(page, `fit_probe.py:${probeLine}`);
  const editor = ".editor-group-container.active .monaco-editor";
  await page.locator(`${editor} .codelens-decoration a`, { hasText: "Measure memory" }).first().waitFor({ timeout: 30000 });
  await page.locator(`${editor} .codelens-decoration a`, { hasText: "Measure memory" }).first().click();
  await page.locator(`${editor} .codelens-decoration`, { hasText: "fits with a plan" }).first().waitFor({ timeout: 240000 }).catch(() => undefined);
  const lenses = await codeLensTexts(page);
  check("fitLens", lenses.filter((t) => /fits with a plan|no plan fits|memory check failed|measuring/.test(t)).map((t) => t.slice(0, 200)));
  await shot(page, "fit-lens");
  expect(lenses.some((t) => t.includes("fits with a plan")), `the probe's lens did not say a plan fits: ${JSON.stringify(lenses)}`);

  const rulesLine = lines.findIndex((l) => l.startsWith("RULES = (")) + 1;
  let applied = false;
  for (let attempt = 1; attempt <= 3 && !applied; attempt++) {
    await openFile(page, `fit_probe.py:${rulesLine}:3`);
    await runCommand(page, "Refactor...");
    try {
      await page.locator(".action-widget .monaco-list-row", { hasText: "Apply the memory plan" }).first().waitFor({ timeout: 8000 });
    } catch {
      log(`refactor menu without the plan (attempt ${attempt})`);
      await page.keyboard.press("Escape");
      continue;
    }
    check("fitActionTitles", await page.locator(".action-widget .monaco-list-row").allInnerTexts());
    for (let i = 0; i < 10 && !applied; i++) {
      const focused = await page.locator(".action-widget .monaco-list-row.focused").first().innerText().catch(() => "");
      if (focused.includes("Apply the memory plan")) {
        await page.keyboard.press("Enter");
        applied = true;
      } else {
        await page.keyboard.press("ArrowDown");
      }
    }
  }
  expect(applied, "the refactor that applies the memory plan was not offered");
  await page.waitForTimeout(300);
  await page.keyboard.press("Control+S");
  let after = await waitForFile(file, (t) => t !== probe);
  if (after === probe) {
    await runCommand(page, "File: Save");
    after = await waitForFile(file, (t) => t !== probe, 50);
  }
  check("fitTableOnDisk", after.split("\n").filter((l) => l.includes("# shardlint --fit: was")));
  expect(result.checks.fitTableOnDisk.length > 0, "the plan's table is not on disk");
  await shot(page, "fit-applied");
}

/** Which server ran and why, as the output channel says (Show Logs). */
async function serverChoice() {
  await runCommand(page, "shardlint: Show Logs");
  await page.waitForTimeout(1500);
  await shot(page, "logs");
  const using = outputChannel().split("\n").find((l) => l.includes(": using the ")) ?? "";
  check("serverChoice", using.replace(/^.*?: using the /, ""));
  if (trusted) expect(using.includes("shardlint.interpreter") && using.includes("has shardlint"), "the trusted folder did not use shardlint.interpreter");
  else expect(using.includes("bundled server") && using.includes("the folder is not trusted"), "the untrusted folder did not use the bundled server");
}

/** No Python anywhere: one notification that says what to do, also after a restart and a settings change. */
async function oneNotification() {
  await openFile(page, "original.py");
  await page.locator(".notification-toast", { hasText: "no Python >= 3.10 found" }).first().waitFor({ timeout: 60000 });
  const item = page.locator(".statusbar-item", { hasText: "shardlint" }).first();
  check("statusItem", (await item.innerText()).trim());
  check("statusTooltip", (await item.getAttribute("aria-label")) ?? "");
  await shot(page, "notification");
  await runCommand(page, "shardlint: Restart Server");
  fs.mkdirSync(path.join(s.ws, ".vscode"), { recursive: true });
  fs.writeFileSync(path.join(s.ws, ".vscode", "settings.json"), JSON.stringify({ "shardlint.select": ["SHL1"] }));
  await page.waitForTimeout(4000);
  await runCommand(page, "Notifications: Show Notifications");
  await page.locator(".notifications-center .notification-list-item").first().waitFor({ timeout: 10000 });
  const all = await page.locator(".notifications-center .notification-list-item").allInnerTexts();
  check("notifications", all.map((t) => t.replace(/\s+/g, " ").slice(0, 200)));
  await shot(page, "notifications");
  check("reason", outputChannel().split("\n").find((l) => l.includes("no Python >=")) ?? "");
  expect(all.filter((t) => t.includes("shardlint")).length === 1, "expected exactly one shardlint notification");
  expect(all[0].includes("Install Python 3.10 or newer on PATH, or set shardlint.interpreter"), "the notification does not say what to do");
  expect(result.checks.reason.includes("no Python >= 3.10 found to run shardlint (tried: python3, python)"), "the output channel does not say why");
}
