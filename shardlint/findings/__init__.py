"""What happens to findings once the rules have made them, before a face shows them.

Holds: ``suppress`` (inline ``# shardlint: ignore[...]`` and ``# noqa`` comments), ``fixes``
(a finding's fix turned into text edits; libcst only for the edits that restructure code),
``fingerprint`` (a finding's identity that survives inserted lines) and ``baseline`` (today's
findings recorded, later runs reporting only new ones).

May import: ``rules.base`` (the ``Finding`` and ``Fix`` records), ``shardlint.source``,
``shardlint.errors``, ``shardlint.fsio``; never the engine, a rule, or a face (CLI, server,
report formats).
"""
