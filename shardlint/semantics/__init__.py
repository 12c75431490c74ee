"""What code means, for the rules: facts shardlint derives from source, in layers.

Data flows up through five packages; a module imports only from its own package or from
packages below it (``docs/architecture.md``; ``tests/test_layers.py`` checks it):

1. ``catalog``  -- what shardlint knows of JAX/Flax as data: the API table, versions, names.
2. ``file``     -- the facts of one file, built by one pass (and per-file questions on them).
3. ``flow``     -- what crosses files: module summaries, the project index, value flow.
4. ``buffers`` and ``sharding`` -- the topic analyses rules ask; siblings, neither imports the
   other.

Holds: nothing of its own; the five packages above. May import: ``shardlint.syntax`` only, of
the rest of shardlint.
"""
