"""One version from one source: ``shardlint.__version__`` is what `shardlint --version`, the
package metadata (the wheel's), the server's serverInfo, the VS Code extension and the docs' pinned
tags say."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from shardlint import __version__

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
EXT = ROOT / "vscode-extension"


def test_pyproject_takes_the_version_from_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "shardlint.__version__"}


def test_installed_metadata_is_the_package_version():
    assert metadata.version("shardlint") == __version__, (
        "the installed metadata is stale: run `bash scripts/venv.sh`")


def test_extension_version_is_the_package_version():
    package = json.loads((EXT / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((EXT / "package-lock.json").read_text(encoding="utf-8"))
    assert package["version"] == __version__
    assert lock["version"] == lock["packages"][""]["version"] == __version__
    # `vsce package` names the file shardlint-<version>.vsix itself; no second copy of it here.
    assert __version__ not in package["scripts"]["package"]


def test_command_line_version():
    out = subprocess.run([sys.executable, "-m", "shardlint", "--version"], capture_output=True,
                         text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == f"shardlint {__version__}"


def test_server_info_reports_the_version(tmp_path):
    hello = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "lsp_hello.py"), "--root", str(tmp_path),
         "--expect-version", __version__, "--", sys.executable, "-m", "shardlint", "server"],
        capture_output=True, text=True, timeout=120)
    assert hello.returncode == 0, hello.stderr
    assert json.loads(hello.stdout) == {"name": "shardlint", "version": __version__}


def test_pinned_tags_in_the_docs_are_this_version():
    """`rev: vX` (pre-commit) and `@vX` (pip from git, the GitHub Action) name this release."""
    pins = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        pins += [(page.name, m) for m in re.findall(r"rev: (v\d[\w.]*)", text)]
        pins += [(page.name, m) for m in re.findall(r"shardlint@(v\d[\w.]*)", text)]
    assert pins, "the docs pin no release tag"
    assert {tag for _, tag in pins} == {f"v{__version__}"}, pins
