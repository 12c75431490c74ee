"""semantics/file/moves.py: which lines run only on some jax releases."""

from __future__ import annotations

import ast
import textwrap

from shardlint.semantics.file.moves import guarded_at, version_guarded

SOURCE = textwrap.dedent('''
    import jax
    import numpy as np

    if hasattr(jax, "tree"):
        a = 1                                   # 6: where jax.tree exists
    else:
        a = 2                                   # 8: where it does not

    def f(mesh):
        if getattr(jax, "set_mesh", None) is None:
            return 3                            # 12: no jax.set_mesh
        with jax.set_mesh(mesh):
            return 4                            # 14: the rest, where it exists

    def g(mesh):
        if hasattr(jax, "set_mesh"):
            with jax.set_mesh(mesh):
                return 5                        # 19
        return 6                                # 20: the rest: the body always leaves

    if jax.__version_info__ >= (0, 4, 25):
        b = 7                                   # 23: some releases, unnamed
    try:
        from jax import shard_map               # 25: a try body
    except ImportError:
        from jax.experimental.shard_map import shard_map   # 27: where the body's is missing
    try:
        c = jax.tree_map                         # 29
    except AttributeError:
        pass                                     # 31: swallows: no fallback
    if hasattr(np, "float128"):
        d = 8                                    # 33: not jax's: no guard
''')


def test_each_branch_is_known_with_the_releases_it_runs_on() -> None:
    guards = version_guarded(ast.parse(SOURCE))
    at = {line: [(g.attr, g.exists, g.try_body) for g in guards if g.first <= line <= g.last]
          for line in (6, 8, 12, 14, 19, 20, 23, 25, 27, 29, 31, 33)}
    assert at[6] == [("tree", True, False)] and at[8] == [("tree", False, False)]
    assert at[12] == [("set_mesh", False, False)] and at[14] == [("set_mesh", True, False)]
    assert at[19] == [("set_mesh", True, False)] and at[20] == [("set_mesh", False, False)]
    assert at[23] == [(None, None, False)]
    assert at[25] == [(None, None, True)] and at[27] == [(None, None, False)]
    assert at[29] == [] and at[31] == []  # `except AttributeError: pass` hides, not guards
    assert at[33] == []


def test_what_counts_as_compatibility_code() -> None:
    guards = version_guarded(ast.parse(SOURCE))
    assert guarded_at(guards, 8) and guarded_at(guards, 12) and guarded_at(guards, 20)
    assert not guarded_at(guards, 6)  # new-release code that tested another name
    assert guarded_at(guards, 6, name="tree")  # the very name it tested exists there
    assert guarded_at(guards, 25) and not guarded_at(guards, 25, try_bodies=False)
    assert guarded_at(guards, 27, try_bodies=False)


def test_only_the_blocks_around_the_lines_asked_for_are_walked() -> None:
    tree = ast.parse(SOURCE)
    got = [(g.first, g.last) for g in version_guarded(tree, [12])]
    assert (12, 12) in got and (13, 14) in got
    assert not any(first >= 22 for first, _ in got)  # the statements after `f`: not walked


def test_a_broad_except_is_error_handling_not_a_version_guard() -> None:
    """`except Exception:` around a call catches the AttributeError of a removed API as it
    catches any other error: the code still fails there (a recall loss on tunix and kauldron
    when it counted as a guard)."""
    source = textwrap.dedent('''
        import jax

        def compute(state, leaf):
            try:
                return jax.tree_map(leaf, state.compute())
            except Exception as exc:
                raise RuntimeError("metric failed") from exc
    ''')
    assert version_guarded(ast.parse(source)) == []
