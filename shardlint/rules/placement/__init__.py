"""SHL3xx: where values land: model init, optimizer state, arrays and batches on devices.

Holds: an eager init (SHL301), a jitted init without ``out_shardings`` (SHL302), unsharded
optimizer state (SHL303), a single-device placement (SHL304), a host-to-device copy in a loop
(SHL305) and an array captured by a jitted closure (SHL306). May import: ``rules.base``,
``rules._context`` and ``shardlint.semantics``; no other family.
"""
