"""shardlint: find silent sharding and memory pitfalls in JAX/Flax code."""

__version__ = "0.1.0"
