// The memory check from the editor: a "Measure memory" code lens on each probe function, and the
// Measure Memory command (the probe at the cursor). The measuring is `shardlint memory` in a
// subprocess, run with the same shardlint as the server; nothing here interprets the figures.
//
// Only in a trusted folder with `shardlint.memory.enabled`: a probe runs the folder's code.
import { spawn } from "child_process";
import * as vscode from "vscode";
import { Server } from "./server";
import { memoryArgs } from "./serverSettings";
import * as settings from "./settings";

// shardlint.memory.probes.PREFIX: probes are top-level `def shardlint_probe_*():`. Probes named in
// `[tool.shardlint.memory] probes` have no lens; the command still runs them via the quick pick.
const PROBE_DEF = /^def\s+(shardlint_probe_\w+)\s*\(/;

export function memoryAvailable(): boolean {
  return vscode.workspace.isTrusted && settings.read().memoryEnabled;
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

export class ProbeLenses implements vscode.CodeLensProvider {
  private readonly changed = new vscode.EventEmitter<void>();
  readonly onDidChangeCodeLenses = this.changed.event;

  refresh(): void {
    this.changed.fire();
  }

  provideCodeLenses(doc: vscode.TextDocument): vscode.CodeLens[] {
    if (!memoryAvailable() || doc.uri.scheme !== "file") return [];
    return probesIn(doc).map(({ name, line }) => new vscode.CodeLens(new vscode.Range(line, 0, line, 0), {
      title: "$(pulse) Measure memory",
      tooltip: `shardlint memory ${name}: per-device memory at each device count`,
      command: "shardlint.measureMemory",
      arguments: [doc.uri, name],
    }));
  }
}

export class MemoryRunner implements vscode.Disposable {
  private readonly out = vscode.window.createOutputChannel("shardlint memory");

  constructor(private readonly server: Server) {}

  dispose(): void {
    this.out.dispose();
  }

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
    if (doc.isDirty) await doc.save();

    const found = await this.server.resolved();
    if (found.source === "none") {
      void vscode.window.showErrorMessage(`shardlint: cannot measure memory: ${found.reason}`);
      return;
    }
    const args = [...found.prefix, "memory", `${doc.uri.fsPath}:${probe}`, ...memoryArgs(settings.forServer(doc.uri))];
    // The bundled shardlint has no jax: the probe runs in the interpreter the user chose.
    if (found.source === "bundled" && found.userPython?.length === 1) args.push("--python", found.userPython[0]);
    const cwd = vscode.workspace.getWorkspaceFolder(doc.uri)?.uri.fsPath;
    this.out.clear();
    this.out.show(true);
    this.out.appendLine(`$ ${[found.command, ...args].join(" ")}`);
    const code = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `shardlint: measuring ${probe}`, cancellable: true },
      (_progress, token) => new Promise<number | null>((resolve) => {
        const child = spawn(found.command, args, { cwd, env: process.env });
        child.stdout.on("data", (d) => this.out.append(String(d)));
        child.stderr.on("data", (d) => this.out.append(String(d)));
        child.on("error", (e) => { this.out.appendLine(String(e)); resolve(null); });
        child.on("close", (c) => {
          this.out.appendLine(`[shardlint memory exited with code ${c}]`);
          resolve(c);
        });
        token.onCancellationRequested(() => child.kill());
      }),
    );
    if (code === 0) void vscode.window.showInformationMessage(`shardlint: measured ${probe}; the figures are in the "shardlint memory" output.`);
    else if (code === 1) void vscode.window.showWarningMessage(`shardlint: ${probe} does not fit the device memory; see the "shardlint memory" output.`);
    else void vscode.window.showErrorMessage(`shardlint: measuring ${probe} failed; see the "shardlint memory" output.`);
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
