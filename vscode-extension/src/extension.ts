// shardlint for VS Code: a thin client. The analysis, the fixes and the memory check are the
// Python package's; this starts its language server and wires settings, commands and trust.
import * as vscode from "vscode";
import { MemoryRunner } from "./memory";
import { onDidChangeInterpreter } from "./python";
import { Server } from "./server";
import * as settings from "./settings";
import { StatusItem } from "./status";

const FIX_ALL = vscode.CodeActionKind.SourceFixAll.append("shardlint");

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const log = vscode.window.createOutputChannel("shardlint", { log: true });
  const status = new StatusItem();
  const server = new Server(context, log, status);
  const memory = new MemoryRunner(server);
  context.subscriptions.push(log, status, server);
  log.info(`shardlint ${context.extension.packageJSON.version} in VS Code ${vscode.version}; folder trusted: ${vscode.workspace.isTrusted}`);

  context.subscriptions.push(
    vscode.commands.registerCommand("shardlint.restart", () => server.restart("Restart Server command")),
    vscode.commands.registerCommand("shardlint.showLogs", () => log.show()),
    vscode.commands.registerCommand("shardlint.fixAll", () => fixAll(log)),
    vscode.commands.registerCommand("shardlint.measureMemory", (uri?: vscode.Uri, probe?: string) =>
      memory.measure(uri instanceof vscode.Uri ? uri : undefined, typeof probe === "string" ? probe : undefined)),

    vscode.workspace.onDidChangeConfiguration((e) => {
      if (!e.affectsConfiguration(settings.SECTION)) return;
      if (settings.RESTART_KEYS.some((k) => e.affectsConfiguration(k))) {
        void server.restart("settings changed");
      } else if (!e.affectsConfiguration(`${settings.SECTION}.trace`)) {
        // memory.* too: the server shows or hides its memory lenses and refreshes them
        void server.sendSettings(); // the language client applies trace.server itself
      }
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      // A new server: the interpreter may change, and it learns `memory.trusted`.
      void server.restart("the folder is now trusted");
    }),
  );
  const interpreterChanged = await onDidChangeInterpreter(() => {
    const user = settings.read();
    if (vscode.workspace.isTrusted && !user.path.length && !user.interpreter.length) {
      void server.restart("the Python extension's interpreter changed");
    }
  });
  if (interpreterChanged) context.subscriptions.push(interpreterChanged);

  await server.restart("activated");
}

export function deactivate(): void {
  // The server is stopped by the disposables in context.subscriptions.
}

/** Applies the server's `source.fixAll.shardlint` action (safe fixes only) to the active editor. */
async function fixAll(log: vscode.LogOutputChannel): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.languageId !== "python") {
    void vscode.window.showInformationMessage("shardlint: Fix All works on the active Python editor.");
    return;
  }
  const doc = editor.document;
  const whole = new vscode.Range(0, 0, doc.lineCount, 0);
  const actions = await vscode.commands.executeCommand<vscode.CodeAction[]>(
    "vscode.executeCodeActionProvider", doc.uri, whole, FIX_ALL.value);
  const action = actions?.find((a) => a.kind && FIX_ALL.contains(a.kind));
  if (!action) {
    void vscode.window.showInformationMessage("shardlint: no safe fixes in this file.");
    return;
  }
  if (action.edit && !(await vscode.workspace.applyEdit(action.edit))) {
    log.warn(`Fix All: the edit for ${doc.uri.fsPath} was not applied (the file changed meanwhile?)`);
    void vscode.window.showWarningMessage("shardlint: the fixes could not be applied; try again.");
    return;
  }
  if (action.command) await vscode.commands.executeCommand(action.command.command, ...(action.command.arguments ?? []));
}
