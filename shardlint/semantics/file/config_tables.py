"""Logical axis rules tables and mesh axis names written in configuration, read as data and never
executed.

Large projects keep their rules out of the code that uses them: a YAML file
(``logical_axis_rules: [['batch', 'data'], ...]``), an ml_collections ``get_config()`` builder
(``config.logical_axis_rules = (("batch", "data"), ...)``), a dataclass default
(``logical_axis_rules: tuple = (("batch", "data"),)``) or a dict entry. Code then reads them by
key: ``nn.logical_axis_rules(config.logical_axis_rules)``, ``cfg["logical_axis_rules"]``.

* :func:`yaml_tables` reads a YAML file's text with the safe loader's composer only (no object is
  constructed, no tag is honoured beyond plain data), keeping each table's line;
* :func:`python_tables` reads the same shapes from a module's syntax tree;
* :func:`read_gin` reads a gin file with gin-config's parser (nothing imported, nothing
  called): the calls of configurables it makes, its macros, imports and includes, and its
  tables under a key, as YAML's;
* :func:`table_key` is the key a rules expression reads (``config.logical_axis_rules`` ->
  ``"logical_axis_rules"``), which ties it to the tables of that key.

A table is a sequence of pairs whose first item is a logical name (a string) and whose second
is a mesh axis, several, or None. Mesh axis names are a non-empty list of strings under a key
that names axes (``mesh_axes: ['data', 'fsdp']``, ``config.mesh_axis_names = (...)``): a mesh
built from ``config.mesh_axes`` has one of the name lists written under that key
(``{"key", "line", "axes"}`` entries, beside the tables' ``{"key", "line", "entries"}``).
"""

from __future__ import annotations

import ast
import functools

from shardlint.semantics.catalog.names import dotted, literal
from shardlint.semantics.file.facts import FileFacts

# YAML files are only parsed when their text could hold a rules table or mesh axis names.
_HINTS = ("rules", "axes", "axis")


def might_hold_tables(text: str) -> bool:
    return any(h in text for h in _HINTS)


def is_axes_key(key: str) -> bool:
    """A key whose string lists are mesh axis names: ``mesh_axes``, ``axis_names``..."""
    k = key.lower()
    return "axes" in k or "axis" in k


def is_axes(value) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(
        isinstance(e, str) for e in value)


def _is_entry(e) -> bool:
    if not isinstance(e, (list, tuple)) or len(e) != 2 or not isinstance(e[0], str):
        return False
    v = e[1]
    return v is None or isinstance(v, str) or (
        isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v))


def is_table(value) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(_is_entry(e) for e in value)


def table_entries(value) -> list[list]:
    """A table's entries as JSON data: ``[name, axis]``, ``[name, [axes...]]``."""
    return [[e[0], list(e[1]) if isinstance(e[1], (list, tuple)) else e[1]] for e in value]


# ---- YAML ---------------------------------------------------------------------------------------
def yaml_tables(text: str) -> list[dict]:
    """``[{"key": ..., "line": ..., "entries": [[name, axes], ...]}]`` of a YAML file; [] when
    it does not parse (or PyYAML is not installed)."""
    if not might_hold_tables(text):
        return []
    try:
        import yaml
    except ImportError:  # pragma: no cover - a declared dependency
        return []
    try:
        # (libyaml's composer when PyYAML was built with it: 18x faster on the corpus' configs)
        docs = list(yaml.compose_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except yaml.YAMLError:
        return []
    out: list[dict] = []
    for doc in docs:
        if doc is not None:
            _walk(doc, out, yaml)
    return out


def _walk(node, out: list[dict], yaml, depth: int = 0) -> None:
    if depth > 16 or not isinstance(node, yaml.MappingNode):
        return
    for key, value in node.value:
        if not isinstance(key, yaml.ScalarNode):
            continue
        data = _data(value, yaml)
        if is_table(data) or (data == [] and "rules" in key.value):
            out.append({"key": key.value, "line": key.start_mark.line + 1,
                        "entries": table_entries(data)})
        elif is_axes_key(key.value) and is_axes(data):
            out.append({"key": key.value, "line": key.start_mark.line + 1, "axes": list(data)})
        elif isinstance(value, yaml.MappingNode):
            _walk(value, out, yaml, depth + 1)


def _data(node, yaml, depth: int = 0):
    """Plain data of a node: strings, None, lists (anything else -> a marker that is no table)."""
    if depth > 8:
        return _NOT_DATA
    if isinstance(node, yaml.ScalarNode):
        if node.tag == "tag:yaml.org,2002:null":
            return None
        return node.value if node.tag == "tag:yaml.org,2002:str" else _NOT_DATA
    if isinstance(node, yaml.SequenceNode):
        return [_data(x, yaml, depth + 1) for x in node.value]
    return _NOT_DATA


_NOT_DATA = object()


# ---- Python config builders ---------------------------------------------------------------------
def python_tables(facts: FileFacts, scopes, calls) -> tuple[list[dict], list[dict], list[dict]]:
    """Rules tables a module writes under a key: ``config.<key> = table`` (a config builder),
    ``<key>: T = table`` / ``<key> = table`` in a class body (a dataclass default), and
    ``{"<key>": table}`` dict entries (``scopes``, ``calls``: those of one top-level statement,
    or of one part of one). In three groups, each in order: those of the scopes, of the calls,
    and the dict literals assigned in functions (the summary puts each group of every part of
    the file together: the order one pass over the whole file gives)."""
    out: list[dict] = []
    for _, scope in scopes:
        consts = None
        if scope.kind == "function":
            for target, stmt in scope.stores:
                value = getattr(stmt, "value", None)
                if value is None:
                    continue
                if isinstance(target, ast.Attribute):
                    key = target.attr
                elif isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant) \
                        and isinstance(target.slice.value, str):
                    key = target.slice.value
                else:
                    continue
                if _worth_reading(key, value):
                    consts = consts or facts.consts_for(scope)
                    _add(out, key, literal(value, consts), target, value, scope)
                    _added_parts(out, key, value, consts, target)
        elif scope.kind == "class":
            for name, values in scope.bindings.items():
                if len(values) == 1 and isinstance(values[0], ast.expr):
                    value = _field_default(facts, values[0])
                    if _worth_reading(name, value):
                        consts = consts or facts.consts_for(scope)
                        _add(out, name, literal(value, consts), values[0])
    Dict = ast.Dict
    of_scopes, out = out, []
    for c in calls:  # `ConfigDict({"logical_axis_rules": ...})`, `dict(rules=...)`
        node = c.node
        for kw in node.keywords:  # (also `Layer.config(logical_axes_rules=rules)`)
            if kw.arg is not None and _worth_reading(kw.arg, kw.value) \
                    and not _handed_to_a_function(facts, c, kw.value):
                consts = facts.consts_for(c.scope)
                _add(out, kw.arg, literal(kw.value, consts), kw.value, kw.value, c.scope)
                _added_parts(out, kw.arg, kw.value, consts, kw.value)
        for a in node.args:
            if type(a) is Dict:
                _dict_tables(facts, a, c, out)
    of_calls, out = out, []
    for _, scope in scopes:  # dict literals assigned in a function: `data = {"rules": ...}`
        if scope.kind != "function":
            continue
        for values in scope.assigned.values():
            for a in values:
                if type(a.value) is Dict and not a.index:
                    _dict_tables(facts, a.value, _In(scope), out)
    return of_scopes, of_calls, out


def _handed_to_a_function(facts: FileFacts, c, value: ast.expr) -> bool:
    """A parameter handed on by keyword to a function this module defines (``_rule(v,
    logical_axis_rules=logical_axis_rules)``, or through ``functools.partial``): an argument,
    not a configuration written under the keyword (what the function does with it is its own
    to say, and what the parameter holds its callers')."""
    scope = c.scope
    if type(value) is not ast.Name or scope.kind != "function" or value.id not in scope.params:
        return False
    func = c.node.func
    if c.node.args and isinstance(func, (ast.Name, ast.Attribute)) \
            and facts.qualify(func) == "functools.partial":
        func = c.node.args[0]
    if type(func) is not ast.Name:
        return False
    found = scope.lookup(func.id)
    return found is not None and bool(found[1]) \
        and isinstance(found[1][-1], (ast.FunctionDef, ast.AsyncFunctionDef))


def _added_parts(out: list[dict], key: str, value: ast.expr, consts, node: ast.AST) -> None:
    """The literal tables of a sum that is no literal as a whole: ``cfg["logical_axis_rules"]
    + (("expert", "model"),)`` adds the entries shardlint can read to what it reads by key."""
    if not (isinstance(value, ast.BinOp) and isinstance(value.op, ast.Add)):
        return
    if literal(value, consts) is not None:
        return  # (read whole by `_add`)
    todo = [value]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add):
            todo += [n.left, n.right]
            continue
        part = literal(n, consts)
        if is_table(part):
            out.append({"key": key, "line": getattr(node, "lineno", 0), "entries": table_entries(part)})


def _worth_reading(key: str, value: ast.expr) -> bool:
    """Whether a value written under ``key`` may be a table or mesh axis names: a literal
    sequence under any key; anything else (a name bound to one, a helper's result) only under
    a key that names rules or axes (the only keys where an unreadable value says something)."""
    if type(value) is ast.Tuple or type(value) is ast.List:
        return True
    found = _KEYS.get(key)
    if found is None:  # (every keyword of every call is asked: the same few hundred names)
        if len(_KEYS) > 100_000:
            _KEYS.clear()
        k = key.lower()
        found = _KEYS[key] = "rules" in k or "axes" in k or "axis" in k  # (is_axes_key's test)
    return found


_KEYS: dict[str, bool] = {}


class _In:
    """Where a dict literal sits, for :func:`_dict_tables` (a call's or an assignment's scope)."""

    def __init__(self, scope):
        self.scope = scope


def _dict_tables(facts: FileFacts, node: ast.Dict, c, out: list[dict]) -> None:
    consts = None
    for k, v in zip(node.keys, node.values):
        if type(v) is ast.Constant:
            continue  # (the commonest value: no table, no axes, no other key's table)
        if isinstance(k, ast.Constant) and isinstance(k.value, str):
            if consts is None:
                consts = facts.consts_for(c.scope)
            _add(out, k.value, literal(v, consts), v)
            # `{"rules_for_train": config.logical_axis_rules}`: the same tables under a new key
            alias = table_key(v) if isinstance(v, (ast.Attribute, ast.Subscript)) else None
            if alias is not None and alias != k.value and "rules" in alias + k.value:
                out.append({"key": k.value, "line": getattr(v, "lineno", 0), "alias": alias})


def _field_default(facts: FileFacts, value: ast.expr) -> ast.expr:
    """The default a field declaration holds: ``dataclasses.field(default=X)``, pydantic's
    ``Field(X)``, and a ``default_factory`` that copies one value
    (``lambda: copy.deepcopy(X)``, ``lambda: list(X)``) -> X."""
    if not (isinstance(value, ast.Call) and isinstance(value.func, (ast.Name, ast.Attribute))):
        return value
    q = facts.qualify(value.func) or dotted_name(value.func)
    if not q.lower().endswith("field"):
        return value
    for kw in value.keywords:
        if kw.arg == "default":
            return kw.value
        if kw.arg == "default_factory" and isinstance(kw.value, ast.Lambda):
            return copied_value(facts, kw.value.body)
    if value.args and q.endswith("Field"):  # pydantic: the first argument is the default
        return value.args[0]
    return value


_COPIES = frozenset({"copy.deepcopy", "copy.copy", "list", "tuple"})


def copied_value(facts: FileFacts, node: ast.expr) -> ast.expr:
    """``copy.deepcopy(X)`` / ``list(X)`` / ``tuple(X)`` -> X: the same names as X."""
    while isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords \
            and (facts.qualify(node.func) or dotted_name(node.func)) in _COPIES:
        node = node.args[0]
    return node


def dotted_name(node: ast.expr) -> str:
    return ".".join(dotted(node) or ())


def _add(out: list[dict], key: str, value, node: ast.AST, written: ast.expr | None = None,
         scope=None) -> None:
    """Record what is written under ``key``: a table, mesh axis names, or -- ``written`` is
    the expression of a write that reads as neither -- an unknown table under a rules key
    (``config.logical_axis_rules = build_rules()``: that key's tables are then not all known).
    None, and another key's value (``rules=config.rules``), say nothing new."""
    line = getattr(node, "lineno", 0)
    if is_table(value):
        out.append({"key": key, "line": line, "entries": table_entries(value)})
    elif is_axes_key(key) and is_axes(value):
        out.append({"key": key, "line": line, "axes": list(value)})
    elif written is not None and "rules" in key.lower() and not (
            isinstance(written, ast.Constant) or (isinstance(value, (list, tuple)) and not value)
            or _from_rules(written, scope)):
        if isinstance(written, ast.Name) and scope is not None and scope.kind == "function" \
                and written.id in scope.params and not scope.assigned.get(written.id):
            # (a parameter handed on, `self.logical_axis_rules = logical_axis_rules`: what the
            # callers pass, which the project index asks the value flow for)
            out.append({"key": key, "line": line, "param": written.id, "fn": scope.qualname})
        else:
            out.append({"key": key, "line": line, "unknown": True})


def _from_rules(node: ast.expr, scope=None) -> bool:
    """Whether a value is built from another rules value -- a read by key
    (``_lists_to_tuples(cfg["logical_axis_rules"])``) or a local name that says it holds one
    (``merge(base_rules, model_rules)``) -- and so is taken to keep its logical names, as a
    project helper that rewrites a table is (the called function's own name does not count,
    nor does a parameter of the function: ``cfg.logical_axis_rules = rules`` in
    ``def make(rules)`` holds whatever its callers pass)."""
    called = {id(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)}
    params = scope.params if scope is not None and scope.kind == "function" else ()
    for n in ast.walk(node):
        if id(n) in called:
            continue
        if isinstance(n, ast.Name) and "rules" in n.id.lower() and n.id not in params:
            return True
        if isinstance(n, (ast.Attribute, ast.Subscript)):
            key = table_key(n)
            if key is not None and "rules" in key.lower():
                return True
    return False


def table_key(node: ast.expr | None) -> str | None:
    """The key a rules expression reads a config table by: ``config.logical_axis_rules``,
    ``self.cfg.rules``, ``cfg["logical_axis_rules"]``, ``getattr(cfg, "rules")``."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
            and isinstance(node.slice.value, str):
        return node.slice.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in ("getattr", "get") and len(node.args) >= 2 \
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
        return node.args[1].value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
            and node.func.attr == "get" and node.args and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


# ---- gin files ----------------------------------------------------------------------------------
# Gin configuration files (``.gin``), read as data and never executed.
#
# Projects built on gin (T5X and its kin) join their code at run time: the binding
# ``partitioning.PjitPartitioner.logical_axis_rules = @partitioning.standard_logical_axis_rules()``
# is a call of ``PjitPartitioner`` that hands it the builder's table, and nothing in the Python
# code says so. gin-config's own parser reads the file -- its statements, and literal values
# through ``ast.literal_eval``; nothing is imported, no configurable is registered or called --
# and :func:`read_gin` turns what it read into what a module summary holds (``gin``):
#
# * ``calls``: one per configurable the file binds or calls (``@Name()``), per scope, as
#   ``[target, line, args]`` with the kind terms of each bound parameter (the vocabulary of
#   ``valueflow.kind_terms``), so that the value-flow layer counts the configuration among a
#   function's callers. A selector is resolved through the file's imports (``from t5x import
#   partitioning`` makes ``partitioning.PjitPartitioner`` the reference
#   ``ext:t5x.partitioning.PjitPartitioner``); one that no import of the file names is kept as
#   ``gin:<selector>``, for the value-flow layer to resolve through the imports of the files it
#   includes, else by suffix against the project's symbols, as gin matches it;
# * ``macros``: the kind terms of each macro the file binds (``RULES = [...]``), which
#   ``%RULES`` stands for wherever it is read;
# * ``imports`` (name -> module, None for the script's own) and ``includes`` (paths as written);
#
# and, beside them, the rules tables and mesh axis name lists bound under a parameter name, in
# the shape YAML's tables have (``config_tables``).


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


@functools.cache
def _gin_parser() -> tuple | None:
    """(gin's config_parser module, a delegate class that keeps references and macros as
    markers: nothing is looked up), imported when the first gin file is read (gin's import
    costs every run 8 ms); None without gin (a declared dependency: a gin file is then simply
    not read)."""
    try:
        from gin import config_parser
    except ImportError:  # pragma: no cover
        return None

    class Delegate(config_parser.ParserDelegate):
        def configurable_reference(self, scoped_name, evaluate):
            return _Ref(scoped_name, evaluate)

        def macro(self, macro_name):
            return _Macro(macro_name)

    return config_parser, Delegate


def read_gin(text: str) -> tuple[dict, list[dict]] | None:
    """(``gin`` summary data, tables) of a gin file's text; None when it does not parse."""
    gin = _gin_parser()
    if gin is None:
        return None
    parser, delegate = gin
    try:
        statements = list(parser.ConfigParser(text, delegate()))
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
