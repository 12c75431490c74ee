"""shardlint: find silent sharding and memory pitfalls in JAX/Flax code.

Holds: the faces' entry points (``cli``, ``__main__``, ``check``), the engine that lints paths
and sources (``engine``) with what it reads and keeps (``config``, ``cache``, ``incremental``,
``grammar``, ``notebook``, and ``warm``: a warm check replayed before any of the analysis is
imported), and the ground everything stands on (``source``, ``syntax``,
``errors``, ``fsio``); then the packages, top down: ``lsp`` and ``report`` (faces), ``memory``
(the measured check), ``findings`` (suppressions, fixes, baselines), ``rules``, ``semantics``.
``__version__`` is the one version.

May import: anything below a module's own layer (``docs/architecture.md``); nothing imports a
face.
"""

__version__ = "0.1.0"
