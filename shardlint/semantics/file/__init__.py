"""The facts of one file: what one pass over its ``ast`` records, and questions asked of them.

Holds: the records (``facts``) and the pass that builds them (``visitor``), its replay of
unchanged statements and the results carried between builds (``replay``, ``reuse``); the
per-file tables the pass reads (``config_tables``: also YAML and gin files, read as data;
``rule_tables``, ``wrappers``) and per-file queries: bindings, meshes, axis names, config flags, local value flow (``dataflow``),
which functions run compiled (``execution``), what jit sites say (``jit_sites``), moved APIs
and the compatibility code that runs only on some releases (``moves``). Nothing here looks at another file. May import: ``semantics.catalog``.
"""
