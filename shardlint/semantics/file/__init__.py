"""The facts of one file: what one pass over its ``ast`` records, and questions asked of them.

Holds: the records (``facts``) and the pass that builds them (``visitor``), its replay of
unchanged statements and the results carried between builds (``replay``, ``reuse``); the
per-file tables the pass reads (``config_tables``, ``rule_tables``, ``wrappers``), a gin
file's calls, macros and tables read as data (``gin_config``), and
per-file queries: bindings, meshes, axis names, config flags, local value flow (``dataflow``),
which functions run compiled (``execution``), what jit sites say (``jit_sites``), moved APIs
(``moves``). Nothing here looks at another file. May import: ``semantics.catalog``.
"""
