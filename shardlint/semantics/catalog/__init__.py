"""What shardlint knows of JAX and Flax as data, before reading any file.

Holds: the API table (``api``: which qualified name plays which role, what moved where), the
API facts of every jax and flax release (``facts``, reading ``api_facts.json``: names, modules,
deprecations, signatures, per release), the version parsing and assumptions (``versions``), the
releases a file's module-level imports let it run at (``runnable``) and dotted names resolved
through a file's imports (``names``). May import: nothing of ``shardlint.semantics`` outside this package (the
standard library and ``shardlint.syntax`` only).
"""
