// The settings payload of initializationOptions, workspace/configuration and
// workspace/didChangeConfiguration. No `vscode` import (unit-tested in plain Node).
//
// The server (shardlint/lsp/settings.py) reads `select`, `ignore`, `extendSelect`, `severity` and
// `debounceMs` under a `shardlint` key. An empty list would *replace* the project's
// `[tool.shardlint] select` with nothing, so empty values are left out: "not set" means "the
// project's configuration". `memory` drives the server's memory code lens: it runs the folder's
// code, so the server offers it only when `enabled` and `trusted` are both true (the server cannot
// know VS Code's workspace trust itself); `python` is the interpreter with jax that runs probes.
import * as os from "os";

export interface UserSettings {
  enable: boolean;
  select: string[];
  ignore: string[];
  severity: Record<string, string>;
  memoryEnabled: boolean;
  memoryDevices: number[];
  memoryHardware: string;
  memoryTarget?: string;
  interpreter: string[];
  path: string[];
}

export interface ServerSettings {
  select?: string[];
  ignore?: string[];
  severity?: Record<string, string>;
  memory: { enabled: boolean; trusted: boolean; devices?: number[]; hardware?: string; python?: string; target?: string };
}

/** `memoryPython`: the interpreter for probes when the server's own has no jax (the bundled one). */
export function serverSettings(s: UserSettings, trusted: boolean, memoryPython?: string): ServerSettings {
  const out: ServerSettings = { memory: { enabled: trusted && s.memoryEnabled, trusted } };
  const codes = (v: unknown) => (Array.isArray(v) ? v.filter((c) => typeof c === "string" && c.trim()).map((c) => c.trim()) : []);
  const select = codes(s.select);
  const ignore = codes(s.ignore);
  if (select.length) out.select = select;
  if (ignore.length) out.ignore = ignore;
  if (s.severity && typeof s.severity === "object" && Object.keys(s.severity).length) out.severity = { ...s.severity };
  const devices = Array.isArray(s.memoryDevices) ? s.memoryDevices.filter((n) => Number.isInteger(n) && n > 0) : [];
  if (devices.length) out.memory.devices = devices;
  if (s.memoryHardware?.trim()) out.memory.hardware = s.memoryHardware.trim();
  if (s.memoryTarget?.trim()) out.memory.target = s.memoryTarget.trim();
  if (trusted && memoryPython) out.memory.python = memoryPython;
  return out;
}

/** `${workspaceFolder}`, `${userHome}`, `${env:NAME}` and a leading `~` in paths. */
export function substitute(value: string, workspaceFolder?: string): string {
  let out = value
    .replace(/\$\{userHome\}/g, os.homedir())
    .replace(/\$\{env:([^}]+)\}/g, (_, name) => process.env[name] ?? "");
  if (workspaceFolder) out = out.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
  if (out === "~" || out.startsWith("~/")) out = os.homedir() + out.slice(1);
  return out;
}
