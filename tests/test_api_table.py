"""The API table against the installed jax and flax: every spelling the table calls present
must resolve, and every one it calls removed (for the installed versions) must not."""

from __future__ import annotations

import importlib
import warnings
from importlib import metadata

import pytest

from shardlint.semantics.catalog import api
from shardlint.semantics.catalog.versions import parse

pytestmark = pytest.mark.memory  # needs jax and flax in the test interpreter


def _resolve(dotted: str) -> bool:
    """Import the longest importable module prefix, then read the rest as attributes."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                for p in parts[i:]:
                    obj = getattr(obj, p)
        except AttributeError:
            return False
        return True
    return False


def _installed(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


CASES = [(a, s) for a in api.APIS for s in (a.name, *a.spellings)
         if a.package in ("jax", "flax")]


@pytest.mark.parametrize("entry,spelling", CASES, ids=[s for _, s in CASES])
def test_spelling_matches_the_installed_package(entry, spelling):
    have = _installed(entry.package)
    if have is None:
        pytest.skip(f"{entry.package} is not installed")
    removed = entry.removed is not None and parse(have) >= parse(entry.removed)
    present = _resolve(spelling)
    if removed:
        assert not present, f"{spelling}: the table says removed in {entry.removed}, " \
                            f"but it resolves on {entry.package} {have}"
    else:
        assert present, f"{spelling}: the table says present, but it does not resolve on " \
                        f"{entry.package} {have}"


def test_every_removal_has_a_version_and_every_rename_a_replacement():
    for a in api.APIS:
        if a.name in api.MOVE_FIXES and api.MOVE_FIXES[a.name].kind == "rename":
            assert a.replacement, a.name
