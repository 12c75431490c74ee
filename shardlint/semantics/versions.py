"""Which jax / flax versions the project runs on.

Learned from the environment (the interpreter shardlint runs in, then a ``.venv``/``venv`` in the
project root), else from exact pins in pyproject.toml / requirements files, else assumed to be
the current releases. ``[tool.shardlint] jax-version / flax-version`` override all of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

# The newest releases shardlint knows (2026-11).
CURRENT = {"jax": "0.12.0", "flax": "0.12.12"}


def parse(version: str) -> tuple[int, ...]:
    out = []
    for part in version.split("."):
        m = re.match(r"\d+", part)
        if m is None:
            break
        out.append(int(m.group()))
    return tuple(out)


@dataclass(frozen=True)
class Versions:
    jax: str
    flax: str
    source: dict[str, str]  # package -> where the version came from

    def at_least(self, package: str, version: str) -> bool:
        have = self.jax if package == "jax" else self.flax
        return parse(have) >= parse(version)

    def below(self, package: str, version: str) -> bool:
        return not self.at_least(package, version)


_PIN = re.compile(r"^\s*(jax|flax)\s*(?:\[[^\]]*\])?\s*(==|~=|===)\s*([0-9][0-9A-Za-z.\-+]*)", re.MULTILINE)


def _pins(root: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    candidates = [root / "pyproject.toml", *sorted(root.glob("requirements*.txt")),
                  root / "setup.cfg", root / "setup.py"]
    for path in candidates:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for m in re.finditer(r"""["']?\s*(jax|flax)\s*(?:\[[^\]]*\])?\s*(==|~=|===)\s*([0-9][0-9A-Za-z.\-+]*)""", text):
            found.setdefault(m.group(1), m.group(3))
    return found


def _venv_version(root: Path, package: str) -> str | None:
    for venv in (".venv", "venv"):
        for dist in (root / venv).glob(f"lib/python3*/site-packages/{package}-*.dist-info"):
            m = re.match(rf"{package}-([0-9][^-]*)\.dist-info", dist.name)
            if m:
                return m.group(1)
    return None


def detect(root: Path, overrides: dict[str, str] | None = None) -> Versions:
    overrides = overrides or {}
    pins: dict[str, str] | None = None
    values: dict[str, str] = {}
    source: dict[str, str] = {}
    for pkg in ("jax", "flax"):
        if pkg in overrides:
            values[pkg], source[pkg] = overrides[pkg], "config"
            continue
        try:
            values[pkg], source[pkg] = metadata.version(pkg), "environment"
            continue
        except metadata.PackageNotFoundError:
            pass
        v = _venv_version(root, pkg)
        if v:
            values[pkg], source[pkg] = v, "project venv"
            continue
        if pins is None:
            pins = _pins(root)
        if pkg in pins:
            values[pkg], source[pkg] = pins[pkg], "pin"
            continue
        values[pkg], source[pkg] = CURRENT[pkg], "assumed current"
    return Versions(values["jax"], values["flax"], source)


def assume(jax: str | None = None, flax: str | None = None) -> Versions:
    """Fixed versions (tests, examples)."""
    return Versions(jax or CURRENT["jax"], flax or CURRENT["flax"], {"jax": "fixed", "flax": "fixed"})
