"""Topic analyses about meshes and partitioning: specs, axis rules, contexts, placement.

Holds: ``partitioning`` (partition names and the axis rules that map them), ``lifts`` and
``layers`` (stacked layers, remat), ``mesh_context`` and ``mesh_values`` (which mesh a call runs
under), ``usage`` (what the project does as a whole), ``placement`` (where values are put) and
``boxes`` (partitioning boxes lost). Asked by the rules. May import: ``semantics.catalog``,
``semantics.file`` and ``semantics.flow``; not ``semantics.buffers``.
"""
