// The `shardlint.*` settings: what the extension reads, and what it sends to the server.
import * as vscode from "vscode";
import { serverSettings, ServerSettings, substitute, UserSettings } from "./serverSettings";

export const SECTION = "shardlint";

/** Settings whose change needs a new server process (the rest are sent live). */
export const RESTART_KEYS = ["enable", "path", "interpreter"].map((k) => `${SECTION}.${k}`);

export function read(scope?: vscode.ConfigurationScope): UserSettings {
  const cfg = vscode.workspace.getConfiguration(SECTION, scope);
  const folder = scope instanceof vscode.Uri ? vscode.workspace.getWorkspaceFolder(scope) : vscode.workspace.workspaceFolders?.[0];
  const sub = (v: string) => substitute(v, folder?.uri.fsPath);
  return {
    enable: cfg.get<boolean>("enable", true),
    select: cfg.get<string[]>("select", []),
    ignore: cfg.get<string[]>("ignore", []),
    severity: cfg.get<Record<string, string>>("severity", {}),
    memoryEnabled: cfg.get<boolean>("memory.enabled", true),
    memoryDevices: cfg.get<number[]>("memory.devices", []),
    memoryHardware: cfg.get<string>("memory.hardware", ""),
    memoryTarget: cfg.get<string>("memory.target", ""),
    interpreter: cfg.get<string[]>("interpreter", []).map(sub).filter((s) => s),
    path: cfg.get<string[]>("path", []).map(sub).filter((s) => s),
  };
}

/** What the server receives; memory is off in an untrusted folder whatever the settings say. */
export function forServer(scope?: vscode.ConfigurationScope, memoryPython?: string): ServerSettings {
  return serverSettings(read(scope), vscode.workspace.isTrusted, memoryPython);
}
