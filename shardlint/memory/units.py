"""Byte sizes: parse what users type (`24GiB`, `80 GB`, `512MiB`) and print what they read."""

from __future__ import annotations

import re

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1000,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1000**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1000**3,
    "gib": 1024**3,
    "t": 1024**4,
    "tb": 1000**4,
    "tib": 1024**4,
}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str | float) -> int:
    """Bytes from `24GiB`, `24 GB` (decimal), `24G` (binary, like most tools) or a plain number.

    Raises ValueError with the accepted forms when the text is not a size.
    """
    if isinstance(text, bool):  # callers turn ValueError into a message naming the option
        raise ValueError(f"not a size: {text!r}")  # noqa: TRY004
    if isinstance(text, (int, float)):
        if text < 0:
            raise ValueError(f"a size cannot be negative: {text!r}")
        return int(text)
    match = _SIZE.match(text)
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(
            f"not a size: {text!r} (write e.g. 24GiB, 80GB, 512MiB or a number of bytes)"
        )
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def format_bytes(n: float | None) -> str:
    """Binary units with two decimals, so 1/N ratios stay readable (`64.00 MiB` -> `32.00 MiB`)."""
    if n is None:
        return "-"
    sign = "-" if n < 0 else ""
    n = abs(n)
    if n < 1024:
        return f"{sign}{int(n)} B"
    for unit, scale in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            return f"{sign}{n / scale:.2f} {unit}"
    return f"{sign}{int(n)} B"  # pragma: no cover - unreachable
