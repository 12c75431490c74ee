// A code-server with the extension installed, and headless Chromium on it (playwright-core).
// Everything lives in one temporary folder: user data, extensions, HOME, XDG dirs, TMPDIR, the
// browser profile; nothing is written to the real home.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

const t0 = Date.now();
export const log = (...a) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s]`, ...a);

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/**
 * @param {object} o
 * @param {string} o.codeServer  code-server executable
 * @param {string} o.vsix        the extension to install
 * @param {boolean} o.trusted    false: workspace trust on, folder opens in Restricted Mode
 * @param {object} o.settings    extra user settings
 * @param {string} o.tag         name for the temporary folder
 * @param {boolean} o.noPython   PATH holds only `node`: no Python for the extension to find
 */
export async function startSession({ codeServer, vsix, trusted, settings = {}, tag, noPython = false }) {
  const base = process.env.E2E_TMP || path.join(os.tmpdir(), "shardlint-e2e");
  fs.mkdirSync(base, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(base, `${tag}-`));
  const userData = path.join(tmp, "user-data");
  const extDir = path.join(tmp, "extensions");
  const ws = path.join(tmp, "workspace");
  const home = path.join(tmp, "home");
  for (const d of [".config", ".cache", ".local/share", ".local/state"]) fs.mkdirSync(path.join(home, d), { recursive: true });
  fs.mkdirSync(path.join(userData, "User"), { recursive: true });
  fs.mkdirSync(ws, { recursive: true });
  const realHome = os.homedir();
  const env = {
    ...process.env, HOME: home, TMPDIR: tmp,
    XDG_CONFIG_HOME: path.join(home, ".config"), XDG_CACHE_HOME: path.join(home, ".cache"),
    XDG_DATA_HOME: path.join(home, ".local/share"), XDG_STATE_HOME: path.join(home, ".local/state"),
  };
  // pyenv's shims find their versions under $HOME unless told: keep `python3` on PATH working.
  if (!env.PYENV_ROOT && fs.existsSync(path.join(realHome, ".pyenv"))) env.PYENV_ROOT = path.join(realHome, ".pyenv");
  if (noPython) {
    // install-code-server.sh's wrapper puts node's folder (often /usr/bin, with python3) first on
    // PATH: run code-server's own entry point with a PATH of `node` alone.
    const bin = path.join(tmp, "bin");
    fs.mkdirSync(bin);
    fs.symlinkSync(process.execPath, path.join(bin, "node"));
    env.PATH = bin;
    env.VSCODE_CLI = "1"; // else the server takes PATH from a login shell (resolveShellEnv)
    const entry = path.join(path.dirname(codeServer), "node_modules", ".bin", "code-server");
    if (fs.existsSync(entry)) codeServer = entry;
  }

  fs.writeFileSync(path.join(userData, "User", "settings.json"), JSON.stringify({
    "workbench.startupEditor": "none",
    "workbench.tips.enabled": false,
    "workbench.enableExperiments": false,
    "security.workspace.trust.enabled": !trusted,
    "security.workspace.trust.startupPrompt": "never",
    "security.workspace.trust.banner": "always",
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.autoCheckUpdates": false,
    "extensions.autoUpdate": false,
    "extensions.ignoreRecommendations": true,
    "chat.disableAIFeatures": true,
    "window.commandCenter": false,
    "editor.minimap.enabled": false,
    "files.autoSave": "off",
    ...settings,
  }, null, 2));

  const common = ["--config", path.join(tmp, "config.yaml"), "--user-data-dir", userData, "--extensions-dir", extDir];
  const out = execFileSync(codeServer, [...common, "--install-extension", vsix], { encoding: "utf8", env });
  log(`installed ${path.basename(vsix)}:`, out.trim().split("\n").pop());

  const port = await freePort();
  const csLog = fs.openSync(path.join(tmp, "code-server.log"), "w");
  const cs = spawn(codeServer, [
    ...common, "--bind-addr", `127.0.0.1:${port}`, "--auth", "none",
    "--disable-telemetry", "--disable-update-check", "--disable-getting-started-override",
    "--disable-file-downloads", ...(trusted ? ["--disable-workspace-trust"] : []), "--log", "info", ws,
  ], { stdio: ["ignore", csLog, csLog], detached: true, env });
  log(`code-server pid ${cs.pid} on port ${port}; tmp ${tmp}`);

  const session = { tmp, ws, userData, port, cs, env, browser: undefined, page: undefined };
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) break;
    } catch {
      // not up yet
    }
    if (i > 600 || cs.exitCode !== null) throw new Error(`code-server did not come up; see ${tmp}/code-server.log`);
    await new Promise((r) => setTimeout(r, 100));
  }
  session.browser = await chromium.launchPersistentContext(path.join(tmp, "chromium-profile"), {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true, env,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1400, height: 900 },
  });
  session.page = session.browser.pages()[0] || (await session.browser.newPage());
  session.page.on("pageerror", (e) => log("pageerror:", String(e).slice(0, 200)));
  return session;
}

export async function stopSession(s, { keep = false } = {}) {
  if (s.browser) await s.browser.close().catch(() => undefined);
  try { process.kill(-s.cs.pid, "SIGTERM"); } catch { /* gone */ }
  await new Promise((r) => setTimeout(r, 1000));
  try { process.kill(-s.cs.pid, "SIGKILL"); } catch { /* gone */ }
  if (!keep) fs.rmSync(s.tmp, { recursive: true, force: true });
}

/** Files under `dir` whose name matches `re` (for the extension's output channel log). */
export function findFiles(dir, re) {
  const out = [];
  const walk = (d) => {
    let entries = [];
    try { entries = fs.readdirSync(d, { withFileTypes: true }); } catch { return; }
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) { if (e.name !== "chromium-profile" && e.name !== "extensions") walk(p); }
      else if (re.test(e.name)) out.push(p);
    }
  };
  walk(dir);
  return out;
}

// ---- driving the workbench ------------------------------------------------------------------------

export async function openWorkbench(page, s) {
  await page.goto(`http://127.0.0.1:${s.port}/?folder=${encodeURIComponent(s.ws)}`);
  await page.waitForSelector(".monaco-workbench", { timeout: 60000 });
  await page.waitForSelector(".statusbar", { timeout: 60000 });
}

/** Runs a command from the command palette (F1), by its title. */
export async function runCommand(page, title) {
  await page.keyboard.press("Escape");
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible" });
  await input.fill(`>${title}`);
  await page.locator(".quick-input-list .monaco-list-row.focused", { hasText: title }).first().waitFor({ timeout: 10000 });
  await page.keyboard.press("Enter");
}

/** Quick Open: `name` or `name:line:column`; waits for the editor tab. */
export async function openFile(page, query) {
  const name = query.split(":")[0];
  await page.keyboard.press("Escape");
  await page.keyboard.press("Control+P");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible" });
  await input.fill(query);
  // Enter opens the focused row: wait until the filtered list has put the file there.
  await page.locator(".quick-input-list .monaco-list-row.focused", { hasText: name }).first().waitFor({ timeout: 20000 });
  await page.keyboard.press("Enter");
  await page.locator(".tabs-container .tab.active", { hasText: name }).waitFor({ timeout: 20000 });
  await page.locator(".editor-group-container.active .monaco-editor .view-lines").first().waitFor();
}

/** The Problems panel's text once it mentions every code (or throws after the timeout). */
export async function problemsWith(page, codes, timeout = 60000) {
  await runCommand(page, "View: Focus Problems");
  await page.waitForFunction((want) => {
    const el = document.querySelector(".markers-panel");
    return !!el && want.every((c) => el.innerText.includes(c));
  }, codes, { timeout });
  return page.locator(".markers-panel").innerText();
}

export async function codeLensTexts(page) {
  return page.locator(".editor-group-container.active .monaco-editor .codelens-decoration").allInnerTexts();
}
