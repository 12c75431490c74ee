"""Output formats of ``shardlint check``: findings as text a person, an editor or a CI reads.

Holds: ``formats`` (concise, full, JSON), ``sarif`` and ``ci`` (GitHub annotations, JUnit).
May import: ``findings`` (fixes, fingerprints), ``rules.base``, ``shardlint.source``; never the
engine or a rule's module.
"""
