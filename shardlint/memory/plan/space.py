"""What `--fit` may vary in a probe, read from its source: the rules table it enters.

The worker varies the rules by rebinding a module-level name of the probe's module before each
compile, so the table must be one: a name bound once, at the top level of the probe's file, to a
literal sequence of ``(logical name, mesh axis | (axes...) | None)`` pairs, and entered with
``nn.logical_axis_rules(NAME)`` / ``nn.set_logical_axis_rules(NAME)``, passed to
``nn.logical_to_mesh_sharding(tree, mesh, NAME)`` (``logical_to_mesh_axes``, ``logical_to_mesh``),
or handed to a helper that enters it under a name of its own (``train_step(LAYERS, NAME)``).
Anything else (a table built by a function, read from a config file, written inline in the call,
two different tables) cannot be rebound from outside, and :func:`rules_table` says why instead.
The mesh shape is varied in the worker itself (``search.py``), not here.

Reads source only (stdlib ``ast``): this runs in shardlint's own process.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

Value = Union[str, tuple[str, ...], None]
Row = tuple[str, Value]

# Callee attribute name -> (position, keyword) of its rules argument.
_RULE_ARGS = {
    "logical_axis_rules": (0, "rules"),
    "set_logical_axis_rules": (0, "rules"),
    "logical_to_mesh_sharding": (2, "rules"),
    "logical_to_mesh_axes": (1, "rules"),
    "logical_to_mesh": (1, "rules"),
}


@dataclass(frozen=True)
class RulesTable:
    """A module-level literal rules table and where its value is written."""

    name: str
    rows: tuple[Row, ...]
    path: Path
    line: int  # the value expression: 1-based lines, 0-based UTF-8 byte columns (ast's)
    col: int
    end_line: int
    end_col: int
    container: str  # "tuple" or "list": how the table is written, kept when it is rewritten

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "rows": [[n, _json_value(v)] for n, v in self.rows],
                "path": str(self.path), "line": self.line, "col": self.col,
                "end_line": self.end_line, "end_col": self.end_col,
                "container": self.container}


def _json_value(value: Value) -> Any:
    return list(value) if isinstance(value, tuple) else value


def row_value(value: Any) -> Value:
    """A rule's mesh side from JSON (a list for several axes) or from a literal."""
    if isinstance(value, (list, tuple)):
        return tuple(str(v) for v in value) if len(value) != 1 else str(value[0])
    return value if value is None else str(value)


def _rows(value: Any) -> tuple[Row, ...] | None:
    if not isinstance(value, (tuple, list)):
        return None
    rows: list[Row] = []
    for row in value:
        if not (isinstance(row, (tuple, list)) and len(row) == 2 and isinstance(row[0], str)):
            return None
        axes = row[1]
        if isinstance(axes, (tuple, list)):
            if not all(isinstance(a, str) for a in axes):
                return None
        elif not (axes is None or isinstance(axes, str)):
            return None
        rows.append((row[0], row_value(axes)))
    return tuple(rows)


def _callee(func: ast.expr) -> str | None:
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _rules_args(tree: ast.Module) -> list[ast.expr]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        where = _RULE_ARGS.get(_callee(node.func) or "")
        if where is None:
            continue
        pos, keyword = where
        arg = next((k.value for k in node.keywords if k.arg == keyword), None)
        if arg is None and len(node.args) > pos:
            arg = node.args[pos]
        if arg is not None:
            found.append(arg)
    return sorted(found, key=lambda a: (a.lineno, a.col_offset))


def _bindings(tree: ast.Module, name: str) -> list[ast.stmt]:
    """Every statement anywhere in the file that binds ``name`` at module level or globally."""
    out: list[ast.stmt] = []
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            if node.name == name:
                out.append(node)
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                out.append(node)
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            out.append(node)
    return out


def _passed_for(tree: ast.Module, params: set[str]) -> list[ast.expr]:
    """What this file's calls of its own functions pass for the parameters named ``params``."""
    found: list[ast.expr] = []
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for fn in defs:
        positional = [a.arg for a in (*fn.args.posonlyargs, *fn.args.args)]
        wanted = params & {*positional, *(a.arg for a in fn.args.kwonlyargs)}
        if not wanted:
            continue
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _callee(node.func) == fn.name):
                continue
            for name in wanted:
                arg = next((k.value for k in node.keywords if k.arg == name), None)
                if arg is None and name in positional:
                    i = positional.index(name) - (1 if isinstance(node.func, ast.Attribute)
                                                  and positional[:1] == ["self"] else 0)
                    arg = node.args[i] if 0 <= i < len(node.args) else None
                if arg is not None:
                    found.append(arg)
    return sorted(found, key=lambda a: (a.lineno, a.col_offset))


def _handed_tables(tree: ast.Module) -> list[ast.Name]:
    """Module-level names bound once to a literal rules table and passed to some call."""
    found: dict[str, ast.Name] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            if not isinstance(arg, ast.Name) or arg.id in found:
                continue
            bound = _bindings(tree, arg.id)
            if len(bound) != 1 or not isinstance(bound[0], (ast.Assign, ast.AnnAssign)):
                continue
            try:
                literal = ast.literal_eval(bound[0].value) if bound[0].value else None
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if literal and _rows(literal):
                found[arg.id] = arg
    return sorted(found.values(), key=lambda a: (a.lineno, a.col_offset))


def rules_table(path: Path) -> tuple[RulesTable | None, str | None]:
    """The probe file's literal rules table, or None and why it cannot be varied."""
    try:
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
    except (OSError, SyntaxError, UnicodeDecodeError) as exc:
        return None, f"{path.name} cannot be read ({type(exc).__name__})"
    args = _rules_args(tree)
    # A table handed to a helper that enters it under a parameter name (`def train_step(layers,
    # rules): ... nn.logical_axis_rules(rules)`), of this file or another module's: the
    # module-level name passed in is what the worker rebinds.
    local = [a for a in args if isinstance(a, ast.Name) and not _bindings(tree, a.id)]
    passed = _passed_for(tree, {a.id for a in local}) if local else []
    handed = [] if passed else _handed_tables(tree)
    if passed or (handed and (local or not args)):
        args = [a for a in args if a not in local] + passed + handed
    if not args:
        return None, (f"{path.name} enters no rules table (no nn.logical_axis_rules(...) and "
                      "no nn.logical_to_mesh_sharding(..., rules) in it)")
    names = []
    for arg in args:
        if not isinstance(arg, ast.Name):
            shown = ast.get_source_segment(text, arg) or "an expression"
            if len(shown) > 40:
                shown = shown[:37] + "..."
            return None, (f"the rules at {path.name}:{arg.lineno} are `{shown}`, not a "
                          "module-level name: --fit varies a table by rebinding that name, so "
                          "bind the table to one (RULES = (...)) and pass RULES")
        if arg.id not in names:
            names.append(arg.id)
    if len(names) > 1:
        return None, (f"{path.name} uses {len(names)} rules tables ({', '.join(names)}): which "
                      "one to vary is not known")
    name = names[0]
    bound = _bindings(tree, name)
    if not bound:
        return None, (f"{name} is not bound at the top level of {path.name} (a local name?): "
                      "--fit rebinds only a module-level table of the probe's own file")
    if len(bound) > 1:
        return None, (f"{name} is bound {len(bound)} times in {path.name} (lines "
                      f"{', '.join(str(b.lineno) for b in bound)}): not one literal table")
    stmt = bound[0]
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return None, (f"{name} is imported into {path.name} (line {stmt.lineno}), not written "
                      "in it: --fit varies only a literal table bound in the probe's own file")
    value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
    if value is None:
        return None, f"{name} at {path.name}:{stmt.lineno} is not an assignment of a table"
    try:
        literal = ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        shown = ast.get_source_segment(text, value) or "an expression"
        if len(shown) > 40:
            shown = shown[:37] + "..."
        return None, (f"{name} at {path.name}:{stmt.lineno} is built at run time (`{shown}`), "
                      "not a literal table: --fit cannot vary it; write the pairs out "
                      "(RULES = ((\"batch\", \"data\"), ...)) to let it")
    rows = _rows(literal)
    if rows is None:
        return None, (f"{name} at {path.name}:{stmt.lineno} is not a sequence of "
                      "(logical name, mesh axis | (axes...) | None) pairs")
    assert value.end_lineno is not None and value.end_col_offset is not None
    return RulesTable(name, rows, path.resolve(), value.lineno, value.col_offset,
                      value.end_lineno, value.end_col_offset,
                      "list" if isinstance(value, ast.List) else "tuple"), None
