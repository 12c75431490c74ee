"""`python -m shardlint.memory ...`: the memory check on its own (same as `shardlint memory`)."""

from __future__ import annotations

import argparse

from shardlint.memory.cli import add_arguments, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="shardlint memory", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
