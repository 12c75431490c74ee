"""Advice that names an API some release the project may run lacks: the note that says so, for
the rules that advise it (every version read from the table of releases)."""

from __future__ import annotations

from shardlint.semantics.catalog import facts as releases


def out_shardings_note(versions) -> str:
    """After advice to pass `jax.jit(..., out_shardings=...)`: where the pins allow a jax whose
    `jax.jit` takes no `out_shardings` (before 0.4.4), which release does and what places the
    outputs before it; "" where every release the project may run takes it."""
    since = releases.first_accepting("jax.jit", "out_shardings")
    if since is None or not versions.may_be_below("jax", since):
        return ""
    return (f" (jax >= {since}; {versions.allowed_by('jax')} allow jax "
            f"{versions.oldest('jax')}, where only pjit places outputs, by "
            f"`out_axis_resources=`)")


def needs_note(name: str, versions) -> str:
    """After advice naming ``name`` (a jax or flax API): where the pins allow a release without
    it, the release it needs; "" where every release the project may run has it."""
    package = name.split(".", 1)[0]
    added = releases.first_release(name)
    if added is None or not versions.may_be_below(package, added):
        return ""
    return (f" ({package} >= {added}; {versions.allowed_by(package)} allow {package} "
            f"{versions.oldest(package)})")
