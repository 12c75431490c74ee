// Running interpreters and looking up executables: Node only, no `vscode` import.
import { execFile } from "child_process";
import * as fs from "fs";
import * as path from "path";
import { parseProbe, PROBE_SCRIPT, PythonInfo } from "./resolve";

/** Runs PROBE_SCRIPT with `command` (isolated mode: the current folder is not on sys.path). */
export function probePython(command: string[], cwd: string, timeoutMs = 15000): Promise<PythonInfo | string> {
  return new Promise((resolve) => {
    execFile(command[0], [...command.slice(1), "-I", "-c", PROBE_SCRIPT], { cwd, timeout: timeoutMs, windowsHide: true },
      (err, stdout, stderr) => {
        if (err) {
          const e = err as NodeJS.ErrnoException & { killed?: boolean };
          if (e.code === "ENOENT") resolve("not found");
          else if (e.killed) resolve(`no answer within ${timeoutMs / 1000} s`);
          else resolve(`failed: ${(stderr || err.message).trim().split("\n").pop()}`);
          return;
        }
        resolve(parseProbe(stdout));
      });
  });
}

/** A path that exists, or a bare name found on PATH. */
export async function executableExists(file: string): Promise<boolean> {
  const isFile = async (p: string) => {
    try {
      return (await fs.promises.stat(p)).isFile();
    } catch {
      return false;
    }
  };
  if (file.includes("/") || file.includes("\\")) return isFile(file);
  const exts = process.platform === "win32" ? ["", ".exe", ".cmd", ".bat"] : [""];
  for (const dir of (process.env.PATH ?? "").split(path.delimiter).filter(Boolean)) {
    for (const ext of exts) if (await isFile(path.join(dir, file + ext))) return true;
  }
  return false;
}

export const PATH_PYTHONS = process.platform === "win32" ? ["py", "python"] : ["python3", "python"];
/** Tried only when the project's requires-python rules the ones above out (newest first). */
export const VERSIONED_PYTHONS: string[][] = ["3.14", "3.13", "3.12", "3.11", "3.10"].map((v) =>
  process.platform === "win32" ? ["py", `-${v}`] : [`python${v}`]);
