// The Measure Memory command (the probe at the cursor). The "Measure memory" code lenses, the
// measuring, the headline lens and the hover table are the server's (shardlint/lsp/memory_lens.py):
// this only picks a probe and asks the server to run its `shardlint.server.measureMemory`.
//
// Only in a trusted folder with `shardlint.memory.enabled`: a probe runs the folder's code.
import * as vscode from "vscode";
import type { Server } from "./server";
import * as settings from "./settings";

/** The server command behind the lenses: arguments [uri, probe function]. */
export const SERVER_MEASURE = "shardlint.server.measureMemory";

// shardlint.memory.probes.PREFIX: probes are top-level `def shardlint_probe_*():`. Probes named in
// `[tool.shardlint.memory] probes` get the server's lens; the quick pick lists the prefixed ones.
const PROBE_DEF = /^def\s+(shardlint_probe_\w+)\s*\(/;

interface Summary {
  ok?: boolean;
  probe?: string;
  headline?: string | null;
  failure?: string | null;
  cancelled?: boolean;
}

/** Probe functions of a document: name and the line of its `def`. */
export function probesIn(doc: vscode.TextDocument): { name: string; line: number }[] {
  const out: { name: string; line: number }[] = [];
  for (let i = 0; i < doc.lineCount; i++) {
    const m = PROBE_DEF.exec(doc.lineAt(i).text);
    if (m) out.push({ name: m[1], line: i });
  }
  return out;
}

export class MemoryRunner {
  constructor(private readonly server: Server) {}

  async measure(uri?: vscode.Uri, probe?: string): Promise<void> {
    if (!vscode.workspace.isTrusted) {
      void vscode.window.showWarningMessage("shardlint: the memory check runs the folder's code; it is off in an untrusted folder.");
      return;
    }
    if (!settings.read().memoryEnabled) {
      const pick = await vscode.window.showInformationMessage("shardlint: the memory check is off (shardlint.memory.enabled).", "Open Settings");
      if (pick) void vscode.commands.executeCommand("workbench.action.openSettings", "shardlint.memory");
      return;
    }
    const editor = vscode.window.activeTextEditor;
    const doc = uri ? await vscode.workspace.openTextDocument(uri) : editor?.document;
    if (!doc || doc.languageId !== "python" || doc.uri.scheme !== "file") {
      void vscode.window.showInformationMessage("shardlint: open a Python file with a shardlint_probe_* function to measure memory.");
      return;
    }
    probe ??= await this.pickProbe(doc, editor?.document === doc ? editor.selection.active.line : undefined);
    if (!probe) return;
    if (doc.isDirty) await doc.save(); // the worker imports the file from disk
    // The server reports progress, failures (showMessage) and the figures (code lens, hover).
    const result = (await this.server.executeCommand(SERVER_MEASURE, [doc.uri.toString(), probe])) as Summary | undefined;
    if (result?.ok && result.headline) void vscode.window.showInformationMessage(`shardlint: ${probe}: ${result.headline}`);
  }

  /** The probe whose body holds the cursor, else one chosen from the file's probes. */
  private async pickProbe(doc: vscode.TextDocument, cursorLine?: number): Promise<string | undefined> {
    const probes = probesIn(doc);
    if (cursorLine !== undefined) {
      const above = probes.filter((p) => p.line <= cursorLine).pop();
      if (above && !topLevelBetween(doc, above.line + 1, cursorLine)) return above.name;
    }
    if (probes.length === 1) return probes[0].name;
    if (!probes.length) {
      void vscode.window.showInformationMessage("shardlint: no shardlint_probe_* function in this file. A probe returns (jitted function, example arguments); see `shardlint memory --help`.");
      return undefined;
    }
    return vscode.window.showQuickPick(probes.map((p) => p.name), { placeHolder: "Probe to measure" });
  }
}

/** Whether a top-level statement starts between two lines (the cursor left the probe's body). */
function topLevelBetween(doc: vscode.TextDocument, from: number, to: number): boolean {
  for (let i = from; i <= to && i < doc.lineCount; i++) {
    const text = doc.lineAt(i).text;
    if (text.length && !/^[\s#]/.test(text) && !/^[)\]}]/.test(text)) return true;
  }
  return false;
}
