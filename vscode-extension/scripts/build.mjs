// Bundle the extension (and, with --tests, the unit tests) with esbuild.
// The unit tests import only modules that do not import `vscode`, so plain `node --test` runs them.
import * as esbuild from "esbuild";
import fs from "node:fs";
import path from "node:path";

const root = path.dirname(path.dirname(new URL(import.meta.url).pathname));
const tests = process.argv.includes("--tests");
const common = { bundle: true, platform: "node", format: "cjs", target: "node20", sourcemap: false, logLevel: "warning" };

if (tests) {
  const dir = path.join(root, "test", "unit");
  const entries = fs.readdirSync(dir).filter((f) => f.endsWith(".test.ts")).map((f) => path.join(dir, f));
  fs.rmSync(path.join(root, "out"), { recursive: true, force: true });
  await esbuild.build({ ...common, entryPoints: entries, outdir: path.join(root, "out", "test", "unit") });
} else {
  await esbuild.build({
    ...common,
    entryPoints: [path.join(root, "src", "extension.ts")],
    outfile: path.join(root, "dist", "extension.js"),
    external: ["vscode"],
    minify: true,
  });
}
