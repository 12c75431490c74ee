"""SHL1xx: constraints that run without the context they need.

Holds: a legacy ``with mesh:`` (SHL101), logical constraints without axis rules (SHL102) or
without a mesh (SHL103), a bare ``PartitionSpec`` with no mesh (SHL104), Linen constraints on an
Explicit mesh (SHL105). May import: ``rules.base``, ``rules._context`` and ``shardlint.semantics``;
no other family.
"""
