"""SHL4xx: what a step does with its buffers: donation, reuse, updates, activations.

Holds: a missing donation (SHL401), a read after donating (SHL402), a donated argument never
returned (SHL403), an NNX change dropped by plain ``jax.jit`` (SHL404) and layers differentiated
without remat (SHL405). May import: ``rules.base``, ``rules._context`` and
``shardlint.semantics``; no other family.
"""
