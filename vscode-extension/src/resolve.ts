// Which shardlint server to start, and why. No `vscode` import: the unit tests run this in plain
// Node with fake probes.
//
// Order (trusted folder):
//   1. `shardlint.path`: the first entry that exists, run as `<path> server`;
//   2. the interpreter (`shardlint.interpreter`, else the Python extension's selection), when
//      `import shardlint` works there: `<python> -m shardlint server`;
//   3. the bundled server (bundled/libs) with a Python >= 3.10: the interpreter of step 2 if it is
//      new enough, else `python3` / `python` on PATH. When the project's pyproject.toml says
//      `requires-python` (e.g. ">=3.12"), the first candidate that satisfies it wins, and
//      versioned names on PATH (`python3.13`...) are tried too: the server parses with the
//      grammar of the Python it runs on, so 3.12 syntax needs a 3.12 server.
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
  /** The project's `requires-python` (PEP 440 specifiers, e.g. ">=3.12,<3.14"), if it says one. */
  requiresPython?: string;
  /** Versioned Pythons on PATH (commands), tried only to satisfy `requiresPython`, newest first. */
  versionedPythons?: string[][];
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

/** Reads `requires-python` from a pyproject.toml's [project] table (a plain or literal string). */
export function requiresPythonOf(pyproject: string): string | undefined {
  let table = "";
  for (const raw of pyproject.split(/\r?\n/)) {
    const line = raw.trim();
    const header = /^\[([^\[\]]+)\]\s*(#.*)?$/.exec(line);
    if (header) {
      table = header[1].trim();
      continue;
    }
    if (table !== "project") continue;
    const m = /^requires-python\s*=\s*(?:"([^"]*)"|'([^']*)')/.exec(line);
    if (m) return (m[1] ?? m[2]).trim() || undefined;
  }
  return undefined;
}

function parseVersion(text: string): number[] | undefined {
  const m = /^(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(text.trim());
  return m ? [m[1], m[2] ?? "0", m[3] ?? "0"].map(Number) : undefined;
}

function compare(a: number[], b: number[]): number {
  for (let i = 0; i < 3; i++) if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) - (b[i] ?? 0);
  return 0;
}

/** Whether a Python version satisfies PEP 440 specifiers (`>=3.12`, `~=3.11`, `==3.12.*`,
 * `!=3.13.0`, comma-separated). An unreadable clause is ignored: it never rules an interpreter
 * out. */
export function satisfies(version: readonly number[], spec: string): boolean {
  for (const clause of spec.split(",").map((c) => c.trim()).filter(Boolean)) {
    const m = /^(~=|===|==|!=|<=|>=|<|>)\s*([0-9][0-9.]*)(\.\*)?$/.exec(clause);
    if (!m) continue;
    const [, op, text, star] = m;
    const want = parseVersion(text);
    if (!want) continue;
    const parts = text.split(".").length;
    if (star && (op === "==" || op === "!=")) {
      const same = want.slice(0, parts).every((v, i) => (version[i] ?? 0) === v);
      if (op === "==" ? !same : same) return false;
      continue;
    }
    const c = compare([...version], want);
    const ok = op === ">=" ? c >= 0 : op === ">" ? c > 0 : op === "<=" ? c <= 0 : op === "<" ? c < 0
      : op === "!=" ? c !== 0 : op === "~=" ? c >= 0 && want.slice(0, Math.max(1, parts - 1))
        .every((v, i) => (version[i] ?? 0) === v) : c === 0;
    if (!ok) return false;
  }
  return true;
}
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

  // 3. the bundled server: the first new-enough candidate, or the first that also satisfies the
  // project's requires-python when one does (versioned names on PATH are tried for that).
  const candidates: string[][] = [];
  if (chosen) candidates.push(chosen.command);
  for (const p of inp.pathPythons) candidates.push([p]);
  const wants = inp.requiresPython;
  let fallback: { command: string[]; info: PythonInfo } | undefined;
  const bundled = (command: string[], info: PythonInfo, note: string): Resolution => {
    const base = [...command.slice(1), "-I", inp.bundledTool];
    const why = !inp.trusted ? "the folder is not trusted" : "no shardlint.path or interpreter with shardlint";
    return {
      source: "bundled", command: command[0], args: [...base, "server"], prefix: base, python: info,
      userPython: chosen?.command, tried,
      reason: `bundled server with ${info.executable} (Python ${versionText(info)}): ${why}${note}`,
    };
  };
  const seen = new Set<string>();
  const queue = [...candidates];
  let extended = false;
  while (queue.length) {
    const command = queue.shift() as string[];
    const info = chosen && command === chosen.command ? chosen.info : await inp.probe(command);
    if (typeof info === "string") {
      tried.push(`${show(command)}: ${info}`);
    } else if (!newEnough(info)) {
      tried.push(`${info.executable}: Python ${versionText(info)} is older than ${MIN_PYTHON.join(".")}`);
    } else if (!seen.has(info.executable)) {
      seen.add(info.executable);
      if (!wants || satisfies(info.version, wants)) {
        return bundled(command, info, wants ? `; satisfies requires-python ${wants}` : "");
      }
      tried.push(`${info.executable}: Python ${versionText(info)} does not satisfy requires-python ${wants}`);
      fallback ??= { command, info };
    }
    if (!queue.length && wants && !extended) {
      extended = true;
      for (const p of inp.versionedPythons ?? []) queue.push(p);
    }
  }
  if (fallback) {
    return bundled(fallback.command, fallback.info,
      `; none of the interpreters found satisfies requires-python ${wants}`);
  }
  return {
    source: "none", tried,
    reason: `no Python >= ${MIN_PYTHON.join(".")} found to run shardlint (tried: ${candidates.map(show).join(", ") || "nothing"})`,
  };
}
