"""Every rule is one module here, named ``shlNNN_slug.py``; importing it registers the rule."""

from __future__ import annotations

import importlib
import pkgutil

_loaded = False


def load_all() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("shl"):
            importlib.import_module(f"{__name__}.{info.name}")
