"""``shardlint`` command line: check, rule, rules, server, memory.

Exit codes: 0 clean, 1 findings, 2 usage / configuration / internal error.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path

from shardlint import __version__
from shardlint.errors import ShardlintError, UsageError

FORMATS = ("concise", "full", "json", "sarif", "github", "junit", "gitlab")


def _codes(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser; ``memory``'s own arguments are added only when ``argv`` (default: this
    process's) may run it, since defining them imports the memory check (a ``check`` run, as
    pre-commit starts one per commit, does not pay for that)."""
    parser = argparse.ArgumentParser(
        prog="shardlint",
        description="Find silent sharding and memory pitfalls in JAX/Flax code.")
    parser.add_argument("--version", action="version", version=f"shardlint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = sub.add_parser("check", help="lint files or the whole project")
    check.add_argument("paths", nargs="*", type=Path,
                       help="files or folders (default: the project); '-' reads stdin")
    check.add_argument("--format", choices=FORMATS, default=None,
                       help="output format (default: concise; github inside GitHub Actions)")
    check.add_argument("--select", type=_codes, help="comma-separated codes or prefixes")
    check.add_argument("--extend-select", type=_codes, help="add codes to the selection")
    check.add_argument("--ignore", type=_codes, help="comma-separated codes or prefixes to skip")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even with findings")
    check.add_argument("--preview", action="store_true",
                       help="also run the rules and behaviours in preview (see `shardlint rules`)")
    check.add_argument("--statistics", action="store_true", help="count findings per rule")
    check.add_argument("--stdin-filename", help="the path of the text read from stdin")
    check.add_argument("--config", type=Path,
                       help="a TOML file (pyproject.toml or any name) whose [tool.shardlint] "
                            "table configures the run")
    check.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    check.add_argument("--output-file", "-o", type=Path, help="write the report to this file")
    check.add_argument("--jax-version", help="assume this jax version")
    check.add_argument("--flax-version", help="assume this flax version")
    check.add_argument("--memory", action="store_true",
                       help="also run the memory probes and add measured findings (SHL9xx)")
    check.add_argument("--fix", action="store_true", help="apply safe fixes")
    check.add_argument("--unsafe-fixes", action="store_true",
                       help="with --fix or --diff, also apply unsafe fixes")
    check.add_argument("--diff", action="store_true",
                       help="print the fixes as a diff and change nothing (exit 1 if any)")
    check.add_argument("--baseline", type=Path, help="report only findings not in this baseline")
    check.add_argument("--write-baseline", type=Path, metavar="FILE",
                       help="record today's findings in FILE and exit 0")
    check.add_argument("--jobs", "-j", type=int, default=None,
                       help="worker processes (default: the number of cores)")

    rule = sub.add_parser("rule", help="show a rule's documentation")
    rule.add_argument("code", nargs="?", help="e.g. SHL401")
    rule.add_argument("--all", action="store_true", help="every rule")
    rule.add_argument("--format", choices=("text", "json"), default="text")

    rules = sub.add_parser("rules", help="list all rules")
    rules.add_argument("--format", choices=("text", "json", "markdown"), default="text",
                       help="markdown: the rule reference (docs/rules.md is generated with it)")

    sub.add_parser("server", help="run the language server over stdio")

    memory = sub.add_parser("memory", help="trace probes and report per-device memory")
    if "memory" in (sys.argv[1:] if argv is None else argv):
        from shardlint.memory.cli import add_arguments

        add_arguments(memory)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help exits 0, a usage error exits 2
        return int(exc.code or 0)
    try:
        if args.command == "check":
            return _check(args, sys.argv[1:] if argv is None else argv)
        if args.command == "rule":
            return _rule(args)
        if args.command == "rules":
            return _rules(args)
        if args.command == "server":
            from shardlint.lsp.server import run_stdio

            run_stdio()
            return 0
        if args.command == "memory":
            from shardlint.memory.cli import run

            return run(args)
        parser.print_help()
        return 2
    except ShardlintError as exc:
        print(f"shardlint: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def _check(args: argparse.Namespace, argv: list[str]) -> int:
    """A check run, or its last output again when nothing it read has changed (``warm``: then
    the analysis is not even imported)."""
    from shardlint import warm

    key = warm.invocation_key(argv) if warm.replayable(args) else None
    if key is not None:
        code = warm.replay(args, key)
        if code is not None:
            return code
    from shardlint.check import run_check

    # The collector stays off for the whole run, not only the lint (engine.gc_paused): turned
    # back on under a heap of millions of objects (the cache, the findings) it walks them all
    # once before the report is printed (0.17 s of a 1.2 s warm run).
    was = gc.isenabled()
    gc.disable()
    try:
        with warm.recording(key) as record:
            code = run_check(args, record)
        record.finish(code)
        return code
    finally:
        if was:
            gc.enable()


def _rule_json(cls) -> dict:
    return {"code": cls.code, "name": cls.name, "severity": cls.severity,
            "enabled_by_default": cls.enabled_by_default, "preview": bool(cls.preview),
            "summary": cls.summary,
            "versions": cls.versions, "fix_safety": cls.fix_safety,
            "explanation": cls.docs_markdown()}


def _rule(args: argparse.Namespace) -> int:
    from shardlint.rules.base import all_rules, get_rule

    if args.all:
        selected = all_rules()
    elif args.code:
        cls = get_rule(args.code)
        if cls is None:
            raise UsageError(f"unknown rule {args.code!r}; see `shardlint rules`")
        selected = [cls]
    else:
        raise UsageError("give a rule code (e.g. `shardlint rule SHL401`) or --all")
    if args.format == "json":
        data = [_rule_json(c) for c in selected]
        print(json.dumps(data if args.all else data[0], indent=2))
    else:
        print("\n\n".join(c.docs_markdown() for c in selected))
    return 0


def _rules(args: argparse.Namespace) -> int:
    from shardlint.rules.base import all_rules

    rules = all_rules()
    if args.format == "json":
        print(json.dumps([_rule_json(c) for c in rules], indent=2))
        return 0
    if args.format == "markdown":
        from shardlint.rules.base import reference_markdown

        sys.stdout.write(reference_markdown())
        return 0
    for cls in rules:
        off = "  (preview)" if cls.preview else "" if cls.enabled_by_default \
            else "  (off by default)"
        print(f"{cls.code}  {cls.name:<36} {cls.severity:<8} {cls.summary}{off}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
