"""A plan's rules table as code the user can paste over their own, changed rows marked."""

from __future__ import annotations

from typing import Any

from shardlint.memory.plan.space import RulesTable, row_value


def _literal(value: Any) -> str:
    value = row_value(value)
    if value is None:
        return "None"
    if isinstance(value, tuple):
        return "(" + ", ".join(f'"{v}"' for v in value) + ")"
    return f'"{value}"'


def table_code(table: RulesTable, rules: list[list[Any]], indent: str = "") -> str:
    """The value to put where ``table``'s value is written (from its opening bracket), rows in
    the plan's order, each changed or added row with a comment saying what it was."""
    opening, closing = ("[", "]") if table.container == "list" else ("(", ")")
    lines = [opening]
    for i, (name, value) in enumerate(rules):
        row = f'{indent}    ("{name}", {_literal(value)}),'
        if i >= len(table.rows):
            row += "  # shardlint --fit: added"
        elif row_value(value) != table.rows[i][1]:
            row += f"  # shardlint --fit: was {_literal(table.rows[i][1])}"
        lines.append(row)
    lines.append(indent + closing)
    return "\n".join(lines)


def statement_indent(table: RulesTable) -> str:
    """The indentation of the line the table's value starts on."""
    try:
        line = table.path.read_text(encoding="utf-8").splitlines()[table.line - 1]
    except (OSError, IndexError, UnicodeDecodeError):
        return ""
    return line[: len(line) - len(line.lstrip())]


def paste(text: str, table: dict[str, Any], code: str) -> str:
    """``text`` (the probe's source) with the table's value replaced by ``code``; the range is
    ast's: 1-based lines, 0-based UTF-8 byte columns."""
    lines = text.splitlines(keepends=True)

    def offset(line: int, col: int) -> int:
        head = "".join(lines[: line - 1])
        return len(head) + len(lines[line - 1].encode("utf-8")[:col].decode("utf-8"))

    start = offset(table["line"], table["col"])
    end = offset(table["end_line"], table["end_col"])
    return text[:start] + code + text[end:]
