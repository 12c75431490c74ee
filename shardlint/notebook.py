"""Jupyter notebooks: the code cells analysed together as one source, findings mapped back.

A mesh or rules table defined in cell 1 counts in cell 5, as it does when the notebook runs top
to bottom. IPython magics (``%time``, ``!pip``) become ``pass`` statements and ``%%bash`` cells
comments, line for line, so positions stay exact. Fixes are written back into the cells' ``source``
without touching outputs or metadata.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from shardlint.errors import UsageError
from shardlint.fsio import write_atomic


@dataclass
class Notebook:
    path: Path
    data: dict
    cells: list[int] = field(default_factory=list)  # notebook cell index of each code cell
    starts: list[int] = field(default_factory=list)  # first line (1-based) of each in `text`
    lengths: list[int] = field(default_factory=list)
    text: str = ""
    magic_lines: set[int] = field(default_factory=set)

    def locate(self, line: int) -> tuple[int, int]:
        """A line of ``text`` -> (cell number as Jupyter shows it, 1-based; line in the cell)."""
        for i in range(len(self.starts) - 1, -1, -1):
            if line >= self.starts[i]:
                return self.cells[i] + 1, line - self.starts[i] + 1
        return 1, line


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _mask_magics(lines: list[str]) -> tuple[list[str], set[int]]:
    if lines and lines[0].lstrip().startswith("%%"):
        return ["#" + line for line in lines], set(range(len(lines)))
    out, masked = [], set()
    for i, line in enumerate(lines):
        stripped = line.lstrip()
        if stripped.startswith(("%", "!", "?")) or stripped.endswith("?") and \
                stripped[:-1].isidentifier():
            # (a statement, not a comment: a magic may be all a block holds, `except
            # ImportError:` then `!pip install ...`; write_fixed puts the original back)
            indent = line[: len(line) - len(stripped)]
            out.append(f"{indent}pass  # {stripped}")
            masked.add(i)
        else:
            out.append(line)
    return out, masked


def load(path: Path) -> Notebook:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read notebook: {exc}") from None
    except ValueError as exc:
        raise UsageError(f"{path}: not a notebook (invalid JSON: {exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise UsageError(f"{path}: not a notebook (no `cells` list)")
    language = str(data.get("metadata", {}).get("language_info", {}).get("name", "python"))
    nb = Notebook(path, data)
    if language.lower() not in ("python", "ipython", "python3"):
        return nb
    parts: list[str] = []
    line = 1
    for index, cell in enumerate(data["cells"]):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        lines = _source(cell).split("\n")
        masked_lines, masked = _mask_magics(lines)
        nb.cells.append(index)
        nb.starts.append(line)
        nb.lengths.append(len(lines))
        nb.magic_lines.update(line + i for i in masked)
        parts.append("\n".join(masked_lines))
        line += len(lines)
    nb.text = "\n".join(parts)
    return nb


def write_fixed(nb: Notebook, fixed: str) -> bool:
    """Put fixed text back into the cells. Refuses (returns False) if a fix changed the number
    of lines of a cell's region or touched a magic line: cell boundaries would be guesses."""
    lines = fixed.split("\n")
    if len(lines) != sum(nb.lengths):
        return False
    original = nb.text.split("\n")
    for ln in nb.magic_lines:
        if lines[ln - 1] != original[ln - 1]:
            return False
    for k, index in enumerate(nb.cells):
        start = nb.starts[k] - 1
        new_lines = lines[start: start + nb.lengths[k]]
        old_src = _source(nb.data["cells"][index]).split("\n")
        for i in range(len(new_lines)):
            if (nb.starts[k] + i) in nb.magic_lines:
                new_lines[i] = old_src[i]
        text = "\n".join(new_lines)
        cell = nb.data["cells"][index]
        if text == _source(cell):
            continue
        cell["source"] = text.splitlines(keepends=True) if isinstance(cell.get("source"), list) \
            else text
    raw = nb.path.read_text(encoding="utf-8")
    indent = 1
    if raw.startswith("{\n"):
        first = raw[2:].split("\n", 1)[0]
        indent = len(first) - len(first.lstrip(" ")) or 1
    out = json.dumps(nb.data, indent=indent, ensure_ascii=False) + ("\n" if raw.endswith("\n") else "")
    try:
        write_atomic(nb.path, out, newline=None)
    except OSError as exc:
        raise UsageError(f"cannot write {nb.path}: {exc.strerror}") from None
    return True
