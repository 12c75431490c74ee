"""Advice that names an API some release the project may run lacks: the note that says so, for
the rules that advise it (every version read from the table of releases)."""

from __future__ import annotations

from shardlint.semantics.catalog import facts as releases


def out_shardings_note(versions, keyword: str = "out_shardings") -> str:
    """After advice to pass `jax.jit(..., out_shardings=...)` (or `in_shardings`): where the
    pins allow a jax whose `jax.jit` takes no such keyword (before 0.4.4), which release does
    and what does it before; "" where every release the project may run takes it."""
    since = releases.first_accepting("jax.jit", keyword)
    if since is None or not versions.may_be_below("jax", since):
        return ""
    old = "`out_axis_resources=`" if keyword == "out_shardings" else "`in_axis_resources=`"
    return (f" (jax >= {since}; {versions.allowed_by('jax')} allow jax "
            f"{versions.oldest('jax')}, where only pjit takes shardings, as {old})")


def set_mesh_note(versions) -> str:
    """After a fact about `jax.set_mesh`: the release it needs, where the pins allow an older
    jax (0.7.1, read from the releases); "" where every release the project may run has it."""
    return needs_note("jax.set_mesh", versions)


def needs_note(name: str, versions, before: str = "") -> str:
    """After advice naming ``name`` (a jax or flax API): where the pins allow a release without
    it, the release it needs, and ``before``, what does it in the older ones; "" where every
    release the project may run has it."""
    package = name.split(".", 1)[0]
    added = releases.first_release(name)
    if added is None or not versions.may_be_below(package, added):
        return ""
    instead = f"; before it, {before}" if before else ""
    return (f" ({package} >= {added}; {versions.allowed_by(package)} allow {package} "
            f"{versions.oldest(package)}{instead})")
