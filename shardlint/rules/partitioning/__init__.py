"""SHL2xx: how arrays are split: partition names, axis rules, mesh axes, mesh shapes.

Holds: a logical axis no rule maps (SHL201), a mesh axis the mesh lacks (SHL202), a stacked axis
left unnamed (SHL203), specs read from an unboxed tree (SHL204), a mesh of local devices (SHL205)
and a hard-coded mesh shape (SHL206). May import: ``rules.base``, ``rules._context`` and
``shardlint.semantics``; no other family.
"""
