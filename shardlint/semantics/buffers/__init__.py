"""Topic analyses about arrays' buffers: donation, captures, transfers.

Holds: ``donation`` (calls of donating callables, what is handed back), ``jitted`` (calls of
compiled callables), ``captures`` (arrays closed over by compiled functions), ``nnx_updates``
(NNX state a step changes), ``lowering`` (jit sites only lowered) and ``transfers`` (host-to-device copies). Asked by the rules. May import:
``semantics.catalog``, ``semantics.file`` and ``semantics.flow``; not ``semantics.sharding``.
"""
