// The Python extension (ms-python.python), when installed: its selected interpreter, and an event
// when the selection changes. Used only through its public `exports`; it is not a dependency.
import * as vscode from "vscode";

interface EnvironmentPath {
  path: string;
}
interface PythonApi {
  environments?: {
    getActiveEnvironmentPath(resource?: vscode.Uri): EnvironmentPath;
    resolveEnvironment(env: EnvironmentPath | string): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
    onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
  };
  settings?: {
    getExecutionDetails(resource?: vscode.Uri): { execCommand: string[] | undefined };
  };
}

const EXTENSION_ID = "ms-python.python";

async function api(): Promise<PythonApi | undefined> {
  const ext = vscode.extensions.getExtension<PythonApi>(EXTENSION_ID);
  if (!ext) return undefined;
  try {
    return ext.isActive ? ext.exports : await ext.activate();
  } catch {
    return undefined;
  }
}

/** The interpreter selected for `resource`, as a command line, or undefined. */
export async function selectedInterpreter(resource?: vscode.Uri): Promise<string[] | undefined> {
  const py = await api();
  if (!py) return undefined;
  try {
    if (py.environments) {
      const env = await py.environments.resolveEnvironment(py.environments.getActiveEnvironmentPath(resource));
      const exe = env?.executable.uri?.fsPath;
      if (exe) return [exe];
    }
    const cmd = py.settings?.getExecutionDetails(resource).execCommand;
    return cmd?.length ? cmd : undefined;
  } catch {
    return undefined;
  }
}

/** Fires when the user selects another interpreter in the Python extension. */
export async function onDidChangeInterpreter(listener: () => void): Promise<vscode.Disposable | undefined> {
  const py = await api();
  return py?.environments?.onDidChangeActiveEnvironmentPath(() => listener());
}
