// The language client: find the server (resolve.ts), start it, forward settings, restart.
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  State,
} from "vscode-languageclient/node";
import { SERVER_MEASURE } from "./memory";
import { executableExists, PATH_PYTHONS, probePython, VERSIONED_PYTHONS } from "./probe";
import { selectedInterpreter } from "./python";
import { Failure, requiresPythonOf, Resolution, resolveServer } from "./resolve";
import * as settings from "./settings";
import { StatusItem } from "./status";

/** The workspace's `requires-python` (pyproject.toml, [project]), read as text, if any. */
async function requiresPython(folder: vscode.Uri | undefined): Promise<string | undefined> {
  if (!folder) return undefined;
  try {
    const data = await vscode.workspace.fs.readFile(vscode.Uri.joinPath(folder, "pyproject.toml"));
    return requiresPythonOf(new TextDecoder("utf-8").decode(data));
  } catch {
    return undefined;
  }
}

export class Server implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private resolution: Resolution | Failure | undefined;
  private queue: Promise<void> = Promise.resolve();
  private missingPythonShown = false;

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly log: vscode.LogOutputChannel,
    private readonly status: StatusItem,
  ) {}

  /** The server in use (or that would be used), resolving it if needed. */
  async resolved(): Promise<Resolution | Failure> {
    return this.resolution ?? (this.resolution = await this.resolve());
  }

  /** Stop the running server, find the server again and start it; calls run one after another. */
  restart(why: string): Promise<void> {
    this.queue = this.queue.then(() => this.doRestart(why)).catch((e) => this.log.error(`restart failed: ${e}`));
    return this.queue;
  }

  /** Run a server command (workspace/executeCommand); undefined when no server runs. */
  async executeCommand(command: string, args: unknown[]): Promise<unknown> {
    const client = this.client;
    if (!client?.isRunning()) {
      void vscode.window.showErrorMessage("shardlint: the server is not running; see the logs.");
      return undefined;
    }
    return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
  }

  /** The interpreter that runs memory probes when the server's own has no jax (the bundled one). */
  private memoryPython(): string | undefined {
    const found = this.resolution;
    return found?.source === "bundled" && found.userPython?.length === 1 ? found.userPython[0] : undefined;
  }

  /** Send changed settings to the running server (workspace/didChangeConfiguration). */
  async sendSettings(): Promise<void> {
    const client = this.client;
    if (!client?.isRunning()) return;
    const sent = settings.forServer(undefined, this.memoryPython());
    this.log.info(`settings changed; sending ${JSON.stringify(sent)}`);
    await client.sendNotification(DidChangeConfigurationNotification.type, { settings: { [settings.SECTION]: sent } });
  }

  async dispose(): Promise<void> {
    await this.stop();
  }

  private async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    try {
      await client.stop(5000);
    } catch (e) {
      this.log.warn(`stopping the server: ${e}`);
    }
    client.dispose(5000)?.catch(() => undefined);
  }

  private async resolve(): Promise<Resolution | Failure> {
    const folder = vscode.workspace.workspaceFolders?.[0];
    const user = settings.read(folder?.uri);
    return resolveServer({
      trusted: vscode.workspace.isTrusted,
      path: user.path,
      interpreter: user.interpreter,
      pythonExtension: () => selectedInterpreter(folder?.uri),
      bundledTool: this.context.asAbsolutePath("bundled/tool/shardlint_tool.py"),
      pathPythons: PATH_PYTHONS,
      versionedPythons: VERSIONED_PYTHONS,
      requiresPython: await requiresPython(folder?.uri),
      exists: executableExists,
      probe: (cmd) => probePython(cmd, this.context.extensionPath),
    });
  }

  private async doRestart(why: string): Promise<void> {
    await this.stop();
    this.resolution = undefined;
    const user = settings.read();
    if (!user.enable) {
      this.log.info(`${why}: shardlint.enable is off; no server`);
      this.status.set("disabled", "shardlint.enable is off");
      return;
    }
    this.status.set("starting", "finding the server");
    const found = (this.resolution = await this.resolve());
    for (const line of found.tried) this.log.info(`  tried: ${line}`);
    if (found.source === "none") {
      this.log.error(`${why}: ${found.reason}`);
      this.status.set("error", found.reason);
      this.notifyMissingPython(found.reason);
      return;
    }
    this.missingPythonShown = false;
    this.log.info(`${why}: using the ${found.reason}`);
    this.log.info(`  command: ${[found.command, ...found.args].join(" ")}`);
    this.status.set("starting", found.reason, !vscode.workspace.isTrusted);

    const folder = vscode.workspace.workspaceFolders?.[0];
    const serverOptions: ServerOptions = {
      command: found.command,
      args: found.args,
      // No `transport`: with TransportKind.stdio the client would append `--stdio` to the arguments.
      options: { cwd: folder?.uri.fsPath ?? this.context.extensionPath, env: { ...process.env } },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: "file", language: "python" },
        { scheme: "untitled", language: "python" },
        { notebook: "*", language: "python" },
      ],
      outputChannel: this.log,
      traceOutputChannel: this.log,
      connectionOptions: { maxRestartCount: 2 },
      initializationOptions: { [settings.SECTION]: settings.forServer(undefined, this.memoryPython()) },
      middleware: {
        // A probe runs from disk: save its file before the server measures it.
        executeCommand: async (command, args, next) => {
          if (command === SERVER_MEASURE && typeof args[0] === "string") {
            const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === args[0]);
            if (doc?.isDirty) await doc.save();
          }
          return next(command, args);
        },
        workspace: {
          // The server pulls its section; answer with the payload it understands, per scope.
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            if (!Array.isArray(answers)) return answers;
            return params.items.map((item, i) => {
              if (item.section !== settings.SECTION) return answers[i];
              const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined;
              return settings.forServer(scope, this.memoryPython());
            });
          },
        },
      },
    };
    const client = new LanguageClient("shardlint", "shardlint", serverOptions, clientOptions);
    client.onDidChangeState((e) => {
      if (this.client !== client) return;
      if (e.newState === State.Running) this.status.set("running", found.reason, !vscode.workspace.isTrusted);
      else if (e.newState === State.Starting) this.status.set("starting", found.reason, !vscode.workspace.isTrusted);
      else this.status.set("stopped", "the server stopped; see the logs");
    });
    this.client = client;
    try {
      await client.start();
      this.log.info("server running");
    } catch (e) {
      this.log.error(`the server did not start: ${e}`);
      this.status.set("error", `the server did not start: ${e}`);
      void vscode.window
        .showErrorMessage(`shardlint: the server did not start (${found.reason}). See the logs.`, "Show Logs")
        .then((pick) => pick && this.log.show());
    }
  }

  /** One notification per missing-Python episode, not one per restart or settings change. */
  private notifyMissingPython(reason: string): void {
    if (this.missingPythonShown) return;
    this.missingPythonShown = true;
    const choices = vscode.workspace.isTrusted ? ["Open Settings", "Show Logs"] : ["Show Logs"];
    void vscode.window
      .showErrorMessage(`shardlint: ${reason}. Install Python 3.10 or newer on PATH${vscode.workspace.isTrusted
        ? ", or set shardlint.interpreter." : " (in an untrusted folder shardlint.interpreter is not used)."}`, ...choices)
      .then((pick) => {
        if (pick === "Open Settings") void vscode.commands.executeCommand("workbench.action.openSettings", "shardlint.interpreter");
        if (pick === "Show Logs") this.log.show();
      });
  }
}
