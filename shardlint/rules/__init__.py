"""The rules: one module per rule, named ``shlNNN_slug.py``; importing it registers the rule.

Holds: ``base`` (findings, fixes, the ``Rule`` class, examples, the registry), ``_context``
(what several families share about missing contexts and library look-alikes), SHL000 (a file
that does not parse) and one package per family of codes:

- ``contexts``      SHL1xx  the mesh and axis-rule contexts constraints run under;
- ``partitioning``  SHL2xx  partition names, axis rules, mesh axes and mesh shapes;
- ``placement``     SHL3xx  where parameters, optimizer state and batches are put;
- ``buffers``       SHL4xx  donation, reads after donation, NNX updates, rematerialisation;
- ``versions``      SHL5xx  APIs and defaults that changed between jax/flax releases.

May import: ``shardlint.semantics``, ``shardlint.source`` and ``shardlint.syntax``. A rule module
imports ``base`` and ``_context``, never another rule or another family; nothing here reads a
file, a configuration or a socket.
"""

from __future__ import annotations

import importlib
import pkgutil

_loaded = False


def rule_modules() -> list[str]:
    """The name of every rule module, here and in the family packages, in code order."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg:
            family = importlib.import_module(f"{__name__}.{info.name}")
            found += [f"{family.__name__}.{m.name}" for m in pkgutil.iter_modules(family.__path__)
                      if m.name.startswith("shl")]
        elif info.name.startswith("shl"):
            found.append(f"{__name__}.{info.name}")
    return sorted(found, key=lambda name: name.rpartition(".")[2])


def load_all() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name in rule_modules():
        importlib.import_module(name)
