"""SHL5xx: what changed between jax/flax releases.

Holds: an API that moved or was removed (SHL501) and random bits that are not partitionable
where the default changed in jax 0.5.0 (SHL502). May import: ``rules.base``, ``rules._context``
and ``shardlint.semantics``; no other family.
"""
