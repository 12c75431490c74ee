"""The VS Code extension as users get it: the .vsix installed in code-server, driven in headless
Chromium (playwright-core) by `vscode-extension/test/e2e/run.mjs`.

Trusted folder: open original.py, the Problems panel lists SHL102, SHL103 and SHL501; apply the
quick fix on the SHL101 line of a copy of discussion_advice.py, save, and the file on disk reads
`with ..., jax.set_mesh(mesh):`; shardlint: Fix All fixes original.py on disk; a folder setting
that ignores SHL103 takes effect at once; probes.py has the server's "Measure memory" code lens,
and clicking it measures that probe: the lens then shows the per-device figure; a probe over its
folder's capacity gets a `--fit` plan in its lens, and the refactor over its rules table writes the
plan's table to disk.
Untrusted folder (Restricted Mode): the bundled server runs, the Problems panel lists the same
static findings, and there is no memory code lens.
No Python on PATH: one notification that says what to do, however often the server restarts.

Screenshots, the extension's output channel and the result of each run go to
test-artifacts/vscode/. Needs node, npm and chromium; the .vsix is built (`npm ci`, `npm run
package`) when missing or older than its sources, and code-server is installed from the npm
registry into a cache outside the checkout (`$SHARDLINT_CODE_SERVER` names an installed one).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXT = REPO / "vscode-extension"
ARTIFACTS = REPO / "test-artifacts" / "vscode"
CODE_SERVER_VERSION = "4.100.3"  # the newest that runs on Node 20
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
NODE, NPM = shutil.which("node"), shutil.which("npm")
HAS_JAX = importlib.util.find_spec("jax") is not None  # the memory code lens runs a probe with it

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(
        NODE is None or NPM is None, reason="node and npm are not installed (Node 20)"
    ),
]
needs_chromium = pytest.mark.skipif(
    not os.access(CHROMIUM, os.X_OK),
    reason=f"chromium is not installed at {CHROMIUM} (apt-get install chromium)",
)


def _version() -> str:
    return json.loads((EXT / "package.json").read_text())["version"]


def _newest(paths: list[Path]) -> float:
    newest = 0.0
    for p in paths:
        files = (
            [p]
            if p.is_file()
            else [f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts]
        )
        newest = max([newest, *(f.stat().st_mtime for f in files)])
    return newest


def _run(cmd: list[str], cwd: Path, env: dict | None = None, timeout: int = 600) -> None:
    proc = subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, (
        f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )


def _npm_ci() -> None:
    if not (EXT / "node_modules" / ".package-lock.json").exists():
        _run([NPM, "ci", "--no-audit", "--no-fund"], EXT)


@pytest.fixture(scope="module")
def vsix() -> Path:
    """The .vsix of this checkout: `npm ci` and `npm run package` when it is missing or stale."""
    out = EXT / f"shardlint-{_version()}.vsix"
    sources = [
        EXT / "src",
        EXT / "bundled" / "tool",
        EXT / "bundled" / "requirements.txt",
        EXT / "bundled" / "requirements-native.txt",
        EXT / "bundled" / "requirements-python-part.txt",
        EXT / "package.json",
        EXT / "package-lock.json",
        REPO / "shardlint",
        REPO / "pyproject.toml",
    ]
    _npm_ci()
    if not out.exists() or out.stat().st_mtime < _newest(sources):
        _run(
            [NPM, "run", "package"],
            EXT,
            env=dict(os.environ, SHARDLINT_BUNDLE_PYTHON=sys.executable),
        )
    return out


@pytest.fixture(scope="module")
def code_server() -> Path:
    if os.environ.get("SHARDLINT_CODE_SERVER"):
        return Path(os.environ["SHARDLINT_CODE_SERVER"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    dest = cache / "shardlint-e2e" / f"code-server-{CODE_SERVER_VERSION}"
    exe = dest / "code-server"
    if not exe.exists():
        _run(
            [
                "bash",
                str(EXT / "test" / "e2e" / "install-code-server.sh"),
                CODE_SERVER_VERSION,
                str(dest),
            ],
            EXT,
            timeout=900,
        )
    return exe


def _drive(scenario: str, vsix: Path, code_server: Path) -> dict:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        CODE_SERVER=str(code_server),
        VSIX=str(vsix),
        PYTHON=sys.executable,
        ARTIFACTS=str(ARTIFACTS),
        CHROMIUM=CHROMIUM,
        MEASURE_MEMORY="1" if HAS_JAX else "0",
    )
    proc = subprocess.run(
        [NODE, str(EXT / "test" / "e2e" / "run.mjs"), scenario],
        cwd=EXT,
        env=env,
        capture_output=True,
        text=True,
        timeout=420,
        check=False,
    )
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    result = json.loads((ARTIFACTS / f"{scenario}.json").read_text())
    assert proc.returncode == 0 and result["ok"], result.get("error") or proc.stderr[-3000:]
    return result["checks"]


def test_extension_unit_tests():
    """Server resolution and the settings payload (vscode-extension/test/unit, `node --test`)."""
    _npm_ci()
    _run([NPM, "run", "test:unit"], EXT, timeout=120)


@needs_chromium
def test_trusted_folder_shows_findings_and_applies_the_quick_fix(vsix, code_server):
    checks = _drive("trusted", vsix, code_server)
    # opening original.py fills the Problems panel
    assert {"SHL102", "SHL103", "SHL501"} <= set(checks["problemsCodes"])
    assert checks["statusItem"] == "shardlint"
    # the quick fix on the SHL101 line (unsafe: the Flax constraints under it start to apply),
    # chosen and saved, is on disk
    assert "Replace `mesh` with `jax.set_mesh(mesh)` (unsafe)" in checks["quickFixTitles"]
    assert checks["fixedLineOnDisk"] == "with nn.logical_axis_rules(rules), jax.set_mesh(mesh):"
    # Fix All applies the file's safe fixes; a changed setting applies without a restart
    assert checks["fixAllOnDisk"] is True
    assert checks["liveIgnore"] is True
    # the memory check is offered on probes, and its lens measures the probe in the server
    assert "Measure memory" in checks["codeLenses"]
    if HAS_JAX:
        assert any("/device at" in t for t in checks["memoryRun"]), checks["memoryRun"]
        # `--fit`: a probe over its folder's capacity gets a plan (the lens), and the refactor
        # over its rules table writes the plan's table, changed rows marked
        assert any("fits with a plan" in t for t in checks["fitLens"]), checks["fitLens"]
        assert any("Apply the memory plan to RULES" in t for t in checks["fitActionTitles"])
        assert checks["fitTableOnDisk"]
    # shardlint.interpreter has shardlint: the server ran there, not the bundled copy
    assert checks["serverChoice"].startswith(f"shardlint.interpreter {sys.executable}")
    assert (ARTIFACTS / "trusted-problems.png").stat().st_size > 0


@needs_chromium
def test_untrusted_folder_runs_the_bundled_static_server_only(vsix, code_server):
    checks = _drive("untrusted", vsix, code_server)
    assert checks["restrictedMode"] is True
    assert {"SHL102", "SHL103", "SHL501"} <= set(checks["problemsCodes"])
    assert checks["statusItem"] == "shardlint (restricted)"
    assert not [t for t in checks["codeLenses"] if "Measure memory" in t]
    # shardlint.interpreter is set in the user settings too, and ignored
    assert checks["serverChoice"].startswith("bundled server with ")
    assert checks["serverChoice"].endswith("the folder is not trusted")
    assert (ARTIFACTS / "untrusted-problems.png").stat().st_size > 0


@needs_chromium
def test_without_python_one_notification_says_what_to_do(vsix, code_server):
    checks = _drive("nopython", vsix, code_server)
    assert len(checks["notifications"]) == 1  # also after Restart Server and a settings change
    assert (
        "no Python >= 3.10 found to run shardlint (tried: python3, python)"
        in checks["notifications"][0]
    )
    assert "shardlint: error" in checks["statusTooltip"]
