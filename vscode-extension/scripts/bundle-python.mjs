// Fill bundled/libs with shardlint (from this checkout) and its dependencies, so the .vsix
// carries a server that runs with any Python >= 3.10 on PATH: the pure-Python ones from
// bundled/requirements.txt, and libcst (compiled) for CPython 3.10 to 3.14 on manylinux x86_64
// from bundled/requirements-native.txt.
//   env SHARDLINT_BUNDLE_PYTHON: the Python whose pip installs them (default: python3)
//   env SHARDLINT_WHEELHOUSE: a folder of wheels to install from instead of the package index
//       (fully offline; it needs bundled/requirements.txt's wheels and setuptools, see README)
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const ext = path.dirname(path.dirname(new URL(import.meta.url).pathname));
const repo = path.dirname(ext);
const libs = path.join(ext, "bundled", "libs");
const python = process.env.SHARDLINT_BUNDLE_PYTHON || "python3";
const wheelhouse = process.env.SHARDLINT_WHEELHOUSE;
const source = wheelhouse ? ["--no-index", "--find-links", path.resolve(wheelhouse)] : [];
const pip = (cmd, ...args) =>
  execFileSync(python, ["-m", "pip", "--disable-pip-version-check", "--no-input", cmd, ...source, ...args], { stdio: ["ignore", "inherit", "inherit"] });

const version = JSON.parse(fs.readFileSync(path.join(ext, "package.json"), "utf8")).version;
// The one source of the version: shardlint/__init__.py (pyproject.toml reads it, dynamic).
const init = fs.readFileSync(path.join(repo, "shardlint", "__init__.py"), "utf8");
const pyVersion = /^__version__\s*=\s*"([^"]+)"/m.exec(init)?.[1];
if (pyVersion !== version) {
  console.error(`package.json version ${version} differs from shardlint.__version__ ${pyVersion}`);
  process.exit(1);
}

const NATIVE_PYTHONS = ["3.10", "3.11", "3.12", "3.13", "3.14"];
const NATIVE_PLATFORM = "manylinux_2_28_x86_64";
const NATIVE_MODULE = /^native\.cpython-3(10|11|12|13|14)-x86_64-linux-gnu\.so$/;

fs.rmSync(libs, { recursive: true, force: true });
fs.mkdirSync(libs, { recursive: true });
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "shardlint-bundle-"));
try {
  // 1. The pure-Python dependencies: only py3-none-any wheels (--implementation py), chosen for Python 3.10,
  //    the oldest the bundle supports; --no-deps because the list is complete and pinned.
  pip("install", "--quiet", "--no-deps", "--no-compile", "--only-binary=:all:", "--implementation", "py",
    "--python-version", "3.10", "--target", libs, "-r", path.join(ext, "bundled", "requirements.txt"));
  // 2. Compiled packages, once per CPython version, merged: the Python files are the same in
  //    every build, the extension modules carry the version in their names.
  for (const version of NATIVE_PYTHONS) {
    const dir = path.join(tmp, `native-${version}`);
    pip("install", "--quiet", "--no-deps", "--no-compile", "--only-binary=:all:", "--implementation", "cp",
      "--python-version", version, "--platform", NATIVE_PLATFORM, "--target", dir,
      "-r", path.join(ext, "bundled", "requirements-native.txt"));
    fs.cpSync(dir, libs, { recursive: true, force: true });
  }
  // 2b. Packages whose compiled part is optional: their Python part only (any platform runs it).
  {
    const dir = path.join(tmp, "python-part");
    pip("install", "--quiet", "--no-deps", "--no-compile", "--only-binary=:all:", "--implementation", "cp",
      "--python-version", "3.10", "--platform", NATIVE_PLATFORM, "--target", dir,
      "-r", path.join(ext, "bundled", "requirements-python-part.txt"));
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      if (/\.(so|pyd|dylib)$/.test(e.name)) continue; // the optional accelerator (PyYAML's _yaml)
      fs.cpSync(path.join(dir, e.name), path.join(libs, e.name), {
        recursive: true, force: true, filter: (p) => !/\.(so|pyd|dylib)$/.test(p),
      });
    }
  }
  // 3. shardlint itself, built from a copy of this checkout's sources (so the build leaves nothing
  //    in the checkout): a pure-Python wheel.
  const src = path.join(tmp, "src");
  fs.mkdirSync(src);
  for (const name of ["pyproject.toml", "README.md", "shardlint"]) {
    fs.cpSync(path.join(repo, name), path.join(src, name), { recursive: true, filter: (p) => !p.includes("__pycache__") });
  }
  pip("wheel", "--quiet", "--no-deps", "--wheel-dir", tmp, src);
  const wheel = fs.readdirSync(tmp).find((f) => f.startsWith(`shardlint-${version}-`) && f.endsWith(".whl"));
  if (!wheel || !wheel.endsWith("-py3-none-any.whl")) throw new Error(`expected a pure-Python shardlint wheel, got ${wheel}`);
  pip("install", "--quiet", "--no-deps", "--no-compile", "--target", libs, path.join(tmp, wheel));
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}

// No compiled code but libcst's per-version modules, and nothing that would run instead of the
// bundled server.
const found = [];
const natives = [];
const walk = (dir) => {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      // Bytecode, console scripts and packages' own test suites (libcst ships 2 MB of them).
      if (e.name === "__pycache__" || e.name === "tests" || (dir === libs && e.name === "bin")) fs.rmSync(p, { recursive: true, force: true });
      else walk(p);
    } else if (/\.(so|pyd|dylib)$/.test(e.name)) {
      const rel = path.relative(libs, p);
      if (rel.startsWith(`libcst${path.sep}`) && NATIVE_MODULE.test(e.name)) natives.push(e.name);
      else found.push(rel);
    }
  }
};
walk(libs);
if (found.length || natives.length !== NATIVE_PYTHONS.length) {
  console.error("bundled/libs: unexpected compiled modules:", found.join(", ") || "-", "; libcst's:", natives.join(", ") || "-");
  process.exit(1);
}
console.log(`bundled/libs: ${fs.readdirSync(libs).filter((n) => !n.endsWith(".dist-info")).join(", ")}`);
