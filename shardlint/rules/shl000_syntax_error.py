"""SHL000 syntax-error: the file cannot be parsed."""

from __future__ import annotations

from shardlint.rules.base import Rule, example, register


@register
class SyntaxErrorRule(Rule):
    code = "SHL000"
    name = "syntax-error"
    severity = "error"
    summary = "The file cannot be parsed, so none of its pitfalls can be checked."
    what = """
The engine reports one finding at the position the Python parser gives, with the parser's
message. The other files of the project are still linted.

shardlint parses with the grammar of the Python it runs on. Code written for a newer Python is
not a broken file: where the parse fails on syntax a newer Python accepts (PEP 701 f-strings
with a backslash, a comment or the enclosing quote inside the braces, PEP 695 `type` aliases
and `def f[T]`/`class C[T]` generics, PEP 696 type parameter defaults, PEP 654 `except*`, PEP
646 `x[*idx]`, PEP 758 `except A, B:`, PEP 750 t-strings), the finding is an `info` naming the
Python and the feature ("needs Python >= 3.12 (PEP 701 f-string); shardlint runs on 3.11 and
cannot analyse this file"), whatever the project declares. Where the running Python accepts
the syntax there is no finding. Other parse failures are also `info` when the project's
`requires-python` (pyproject.toml) excludes the running Python (the grammar differs in ways not
listed above). These infos are reported once per run, with how many more files fail the same
way. Run shardlint with the project's Python (or select it in your editor) to check such files.
"""
    why = """
A file that does not parse cannot be analysed; without this finding it would silently pass.
"""
    use_instead = "Fix the syntax error; the file is then linted as usual."
    VALID = [
        example("import jax\nx = jax.numpy.zeros(3)\n"),
        example("""
            import jax

            type Params = dict[str, jax.Array]

            def describe(params: Params) -> str:
                return f"{'\\n'.join(params)}"
            """, title="on Python 3.12 or later (on 3.11: one info, not an error)"),
    ]
    INVALID = [example("import jax\nx = jax.numpy.zeros(3\n")]

    def check(self):  # the engine emits SHL000 itself, before any facts exist
        return ()
