// The status bar item: the server's state; a click shows the logs.
import * as vscode from "vscode";

export type State = "starting" | "running" | "stopped" | "error" | "disabled";

const ICONS: Record<State, string> = {
  starting: "$(loading~spin)",
  running: "$(check)",
  stopped: "$(debug-stop)",
  error: "$(error)",
  disabled: "$(circle-slash)",
};

export class StatusItem implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("shardlint.status", vscode.StatusBarAlignment.Right, 100);
  state: State = "stopped";

  constructor() {
    this.item.name = "shardlint";
    this.item.command = "shardlint.showLogs";
    this.set("starting", "starting");
    this.item.show();
  }

  set(state: State, detail: string, restricted = false): void {
    this.state = state;
    this.item.text = `${ICONS[state]} shardlint${restricted ? " (restricted)" : ""}`;
    this.item.tooltip = `shardlint: ${state}\n${detail}${restricted ? "\nUntrusted folder: static checks only" : ""}\nClick for the logs`;
    this.item.backgroundColor = state === "error" ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
  }

  dispose(): void {
    this.item.dispose();
  }
}
