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

When the project's `requires-python` (pyproject.toml) excludes the Python shardlint runs on, a
parse failure is most likely newer syntax (PEP 695 `type` aliases, PEP 701 f-strings), not a
broken file: it is then one `info` for the whole run, naming the Python the project requires
and how many files failed the same way, instead of an `error` per file.
"""
    why = """
A file that does not parse cannot be analysed; without this finding it would silently pass.
"""
    use_instead = "Fix the syntax error; the file is then linted as usual."
    VALID = [example("import jax\nx = jax.numpy.zeros(3)\n")]
    INVALID = [example("import jax\nx = jax.numpy.zeros(3\n")]

    def check(self):  # the engine emits SHL000 itself, before any facts exist
        return ()
