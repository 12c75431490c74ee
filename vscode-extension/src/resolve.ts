// Which shardlint server to start, and why. No `vscode` import: the unit tests run this in plain
// Node with fake probes.
//
// Order (trusted folder):
//   1. `shardlint.path`: the first entry that exists, run as `<path> server`;
//   2. the interpreter (`shardlint.interpreter`, else the Python extension's selection), when
//      `import shardlint` works there: `<python> -m shardlint server`;
//   3. the bundled server (bundled/libs) with a Python >= 3.10: the interpreter of step 2 if it is
//      new enough, else `python3` / `python` on PATH.
// In an untrusted folder only step 3 runs, with PATH's Python: settings that name an executable
// could come from the folder itself (.vscode/settings.json), and `-m` would import from it.

export const MIN_PYTHON: readonly [number, number] = [3, 10];

/** What one interpreter says about itself (see PROBE_SCRIPT). */
export interface PythonInfo {
  executable: string;
  version: [number, number, number];
  shardlint: string | null; // the importable shardlint's version, null when not importable
}

export interface Inputs {
  trusted: boolean;
  /** `shardlint.path`, variables already substituted. */
  path: string[];
  /** `shardlint.interpreter`, variables already substituted (command + leading arguments). */
  interpreter: string[];
  /** The Python extension's selected interpreter (command + arguments), if it is installed. */
  pythonExtension: () => Promise<string[] | undefined>;
  /** The bundled entry point: bundled/tool/shardlint_tool.py. */
  bundledTool: string;
  /** Fallback Pythons on PATH, in order. */
  pathPythons: string[];
  /** Whether a file exists (for `shardlint.path`); bare names are looked up on PATH by the caller. */
  exists: (file: string) => Promise<boolean>;
  /** Runs PROBE_SCRIPT with an interpreter; a string is why it failed. */
  probe: (command: string[]) => Promise<PythonInfo | string>;
}

export type Source = "path" | "interpreter" | "pythonExtension" | "bundled";

export interface Resolution {
  source: Source;
  command: string;
  args: string[]; // full argument list for the server
  /** Arguments that run any shardlint subcommand: `[...prefix, "memory", ...]`. */
  prefix: string[];
  /** The Python that runs it (undefined for `shardlint.path`). */
  python?: PythonInfo;
  /** An interpreter the user chose, for `shardlint memory --python` when the bundled server runs. */
  userPython?: string[];
  /** One line for the output channel: which server and why. */
  reason: string;
  /** What was tried before, one line each. */
  tried: string[];
}

export interface Failure {
  source: "none";
  reason: string;
  tried: string[];
}

/** Prints JSON about the interpreter; -I keeps the current folder and PYTHONPATH out of it. */
export const PROBE_SCRIPT = [
  "import json, sys",
  "try:",
  "    import shardlint; v = getattr(shardlint, '__version__', '?')",
  "except Exception:",
  "    v = None",
  "print(json.dumps({'executable': sys.executable, 'version': list(sys.version_info[:3]), 'shardlint': v}))",
].join("\n");

export function parseProbe(stdout: string): PythonInfo | string {
  const line = stdout.trim().split("\n").pop() ?? "";
  try {
    const d = JSON.parse(line);
    if (typeof d.executable === "string" && Array.isArray(d.version) && d.version.length === 3) {
      return { executable: d.executable, version: d.version, shardlint: typeof d.shardlint === "string" ? d.shardlint : null };
    }
  } catch {
    // fall through
  }
  return `unexpected output: ${JSON.stringify(line.slice(0, 200))}`;
}

export function newEnough(info: PythonInfo): boolean {
  const [maj, min] = info.version;
  return maj > MIN_PYTHON[0] || (maj === MIN_PYTHON[0] && min >= MIN_PYTHON[1]);
}

export const versionText = (info: PythonInfo) => info.version.join(".");
const show = (cmd: string[]) => cmd.join(" ");

export async function resolveServer(inp: Inputs): Promise<Resolution | Failure> {
  const tried: string[] = [];
  let chosen: { command: string[]; info: PythonInfo; from: "interpreter" | "pythonExtension" } | undefined;

  if (!inp.trusted) {
    tried.push("untrusted folder: shardlint.path, shardlint.interpreter and the Python extension's interpreter are not used");
  } else {
    // 1. shardlint.path
    for (const p of inp.path) {
      if (await inp.exists(p)) {
        return {
          source: "path", command: p, args: ["server"], prefix: [], tried,
          reason: `shardlint.path: ${p}`,
        };
      }
      tried.push(`shardlint.path: ${p} does not exist`);
    }
    // 2. the interpreter
    let command: string[] | undefined;
    let from: "interpreter" | "pythonExtension" = "interpreter";
    if (inp.interpreter.length) {
      command = inp.interpreter;
    } else {
      command = await inp.pythonExtension();
      from = "pythonExtension";
      if (!command?.length) tried.push("no interpreter selected in the Python extension (or it is not installed)");
    }
    if (command?.length) {
      const label = from === "interpreter" ? "shardlint.interpreter" : "the Python extension's interpreter";
      const info = await inp.probe(command);
      if (typeof info === "string") {
        tried.push(`${label} ${show(command)}: ${info}`);
      } else if (info.shardlint !== null) {
        return {
          source: from, command: command[0], args: [...command.slice(1), "-m", "shardlint", "server"],
          prefix: [...command.slice(1), "-m", "shardlint"], python: info, userPython: command, tried,
          reason: `${label} ${info.executable} (Python ${versionText(info)}) has shardlint ${info.shardlint}`,
        };
      } else {
        tried.push(`${label} ${info.executable} (Python ${versionText(info)}): shardlint is not importable there`);
        chosen = { command, info, from };
      }
    }
  }

  // 3. the bundled server
  const candidates: string[][] = [];
  if (chosen) candidates.push(chosen.command);
  for (const p of inp.pathPythons) candidates.push([p]);
  for (const command of candidates) {
    const info = chosen && command === chosen.command ? chosen.info : await inp.probe(command);
    if (typeof info === "string") {
      tried.push(`${show(command)}: ${info}`);
      continue;
    }
    if (!newEnough(info)) {
      tried.push(`${info.executable}: Python ${versionText(info)} is older than ${MIN_PYTHON.join(".")}`);
      continue;
    }
    const base = [...command.slice(1), "-I", inp.bundledTool];
    const why = !inp.trusted ? "the folder is not trusted" : "no shardlint.path or interpreter with shardlint";
    return {
      source: "bundled", command: command[0], args: [...base, "server"], prefix: base, python: info,
      userPython: chosen?.command, tried,
      reason: `bundled server with ${info.executable} (Python ${versionText(info)}): ${why}`,
    };
  }
  return {
    source: "none", tried,
    reason: `no Python >= ${MIN_PYTHON.join(".")} found to run shardlint (tried: ${candidates.map(show).join(", ") || "nothing"})`,
  };
}
