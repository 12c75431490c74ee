"""Gin configuration files (``.gin``), read as data and never executed.

Projects built on gin (T5X and its kin) join their code at run time: the binding
``partitioning.PjitPartitioner.logical_axis_rules = @partitioning.standard_logical_axis_rules()``
is a call of ``PjitPartitioner`` that hands it the builder's table, and nothing in the Python
code says so. gin-config's own parser reads the file -- its statements, and literal values
through ``ast.literal_eval``; nothing is imported, no configurable is registered or called --
and :func:`read_gin` turns what it read into what a module summary holds (``gin``):

* ``calls``: one per configurable the file binds or calls (``@Name()``), per scope, as
  ``[target, line, args]`` with the kind terms of each bound parameter (the vocabulary of
  ``valueflow.kind_terms``), so that the value-flow layer counts the configuration among a
  function's callers. A selector is resolved through the file's imports (``from t5x import
  partitioning`` makes ``partitioning.PjitPartitioner`` the reference
  ``ext:t5x.partitioning.PjitPartitioner``); one that no import of the file names is kept as
  ``gin:<selector>``, for the value-flow layer to resolve through the imports of the files it
  includes, else by suffix against the project's symbols, as gin matches it;
* ``macros``: the kind terms of each macro the file binds (``RULES = [...]``), which
  ``%RULES`` stands for wherever it is read;
* ``imports`` (name -> module, None for the script's own) and ``includes`` (paths as written);

and, beside them, the rules tables and mesh axis name lists bound under a parameter name, in
the shape YAML's tables have (``config_tables``).
"""

from __future__ import annotations

from shardlint.semantics.file.config_tables import is_axes, is_axes_key, is_table, table_entries

try:  # (a declared dependency; a gin file is then simply not read)
    from gin import config_parser as _parser
except ImportError:  # pragma: no cover
    _parser = None


class _Ref:
    """``@scope/name`` (``evaluate``: ``@name()``, a call)."""

    __slots__ = ("selector", "scope", "evaluate")

    def __init__(self, scoped: str, evaluate: bool):
        self.scope, _, self.selector = scoped.rpartition("/")
        self.evaluate = evaluate


class _Macro:
    """``%NAME``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


if _parser is not None:
    class _Delegate(_parser.ParserDelegate):
        """Keeps references and macros as markers: nothing is looked up."""

        def configurable_reference(self, scoped_name, evaluate):
            return _Ref(scoped_name, evaluate)

        def macro(self, macro_name):
            return _Macro(macro_name)


def read_gin(text: str) -> tuple[dict, list[dict]] | None:
    """(``gin`` summary data, tables) of a gin file's text; None when it does not parse."""
    if _parser is None:
        return None
    try:
        statements = list(_parser.ConfigParser(text, _Delegate()))
    except Exception:  # noqa: BLE001 - any error of the parser on any text: the file is unread
        return None
    imports: dict[str, str | None] = {}
    bound: dict[tuple[str, str], dict[str, tuple[object, int]]] = {}
    called: dict[tuple[str, str], int] = {}
    macros: dict[str, object] = {}
    tables: list[dict] = []
    includes: list[str] = []
    keyed: list[tuple[str, int, object]] = []  # (parameter, line, value) of each binding
    for st in statements:
        kind = type(st).__name__
        line = st.location.line_num
        if kind == "ImportStatement":
            module = st.module
            name = st.alias or (module.rpartition(".")[2] if st.is_from else module)
            # (`import __main__ as train_script`: the script, which no module of the project is)
            imports[name] = None if module.startswith(("__main__", "__gin__")) else module
        elif kind == "IncludeStatement":
            includes.append(st.filename)
        elif kind == "BindingStatement":
            for ref in _references(st.value):
                if ref.evaluate:
                    called.setdefault((ref.scope, ref.selector), line)
            if not st.arg_name:  # `RULES = [...]`: a macro
                macros[st.selector] = st.value
                continue
            bound.setdefault((st.scope, st.selector), {})[st.arg_name] = (st.value, line)
            keyed.append((st.arg_name, line, st.value))
    for key, line, value in keyed:
        if isinstance(value, _Macro) and value.name in macros:
            value = macros[value.name]  # (`%RULES`, bound in this file)
        if is_table(value) or (value == [] and "rules" in key):
            tables.append({"key": key, "line": line, "entries": table_entries(value)})
        elif is_axes_key(key) and is_axes(value):
            tables.append({"key": key, "line": line, "axes": list(value)})
        elif "rules" in key and isinstance(value, (_Ref, _Macro)):
            tables.append({"key": key, "line": line, "unknown": True})
    calls: list[list] = []
    for scope, selector in sorted({*bound, *called}, key=lambda k: (
            called.get(k) or min(line for _, line in bound[k].values()), k)):
        target = _target(selector, imports)
        if target is None:
            continue
        # (an unscoped binding holds in every scope; the scope's own ones win)
        passed = {**bound.get(("", selector), {}), **bound.get((scope, selector), {})}
        args: dict[str, object] = {p: _terms(v, imports) for p, (v, _) in sorted(passed.items())}
        args["#n"] = 0
        line = called.get((scope, selector)) or min(
            line for _, line in bound[(scope, selector)].values())
        calls.append([target, line, args])
    gin = {"calls": calls, "macros": {name: _terms(v, imports) for name, v in sorted(macros.items())},
           "imports": dict(sorted(imports.items())), "includes": includes}
    return {k: v for k, v in gin.items() if v}, tables


def _references(value, depth: int = 0):
    """The references a value holds, nested in lists, tuples and dicts included."""
    if isinstance(value, _Ref):
        yield value
    elif depth < 8 and isinstance(value, (list, tuple)):
        for v in value:
            yield from _references(v, depth + 1)
    elif depth < 8 and isinstance(value, dict):
        for v in value.values():
            yield from _references(v, depth + 1)


def _target(selector: str, imports: dict[str, str | None]) -> str | None:
    """The reference a selector names: through the longest import it starts with
    (``ext:...``), else ``gin:<selector>`` (gin's own matching, by suffix); None for the
    script's own functions (``train_script.train``)."""
    parts = selector.split(".")
    for i in range(len(parts) - 1, 0, -1):
        head = ".".join(parts[:i])
        if head in imports:
            module = imports[head]
            return None if module is None else f"ext:{module}.{'.'.join(parts[i:])}"
    return f"gin:{selector}"


def _terms(value, imports: dict[str, str | None]) -> list[list]:
    """Kind terms of a bound value: a call (``@f()``), a function or class named (``@f``), a
    macro, None, a rules table; anything else says nothing (``["other"]``)."""
    if isinstance(value, _Ref):
        target = _target(value.selector, imports)
        if target is None:
            return [["other"]]
        return [["c", target, 0, False, []]] if value.evaluate else [["sym", target]]
    if isinstance(value, _Macro):
        # (`%gin.REQUIRED`: bound elsewhere, by whoever runs the program)
        return [["other"]] if value.name.startswith("gin.") else [["gin_macro", value.name]]
    if value is None:
        return [["none"]]
    if isinstance(value, (list, tuple)) and (not value or is_table(value)):
        return [["table", table_entries(value)]]
    return [["other"]]
