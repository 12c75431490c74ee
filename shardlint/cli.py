"""``shardlint`` command line: check, rule, rules, server, memory.

Exit codes: 0 clean, 1 findings, 2 usage / configuration / internal error.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from shardlint import __version__
from shardlint.errors import ShardlintError, UsageError

FORMATS = ("concise", "full", "json", "sarif", "github")


def _codes(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def build_parser() -> argparse.ArgumentParser:
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
    check.add_argument("--statistics", action="store_true", help="count findings per rule")
    check.add_argument("--stdin-filename", help="the path of the text read from stdin")
    check.add_argument("--config", type=Path, help="a pyproject.toml to read [tool.shardlint] from")
    check.add_argument("--no-cache", action="store_true", help="do not read or write the cache")
    check.add_argument("--output-file", "-o", type=Path, help="write the report to this file")
    check.add_argument("--jax-version", help="assume this jax version")
    check.add_argument("--flax-version", help="assume this flax version")
    check.add_argument("--memory", action="store_true",
                       help="also run the memory probes and add measured findings (SHL9xx)")

    rule = sub.add_parser("rule", help="show a rule's documentation")
    rule.add_argument("code", nargs="?", help="e.g. SHL401")
    rule.add_argument("--all", action="store_true", help="every rule")
    rule.add_argument("--format", choices=("text", "json"), default="text")

    rules = sub.add_parser("rules", help="list all rules")
    rules.add_argument("--format", choices=("text", "json"), default="text")

    sub.add_parser("server", help="run the language server over stdio")

    memory = sub.add_parser("memory", help="trace probes and report per-device memory")
    try:
        from shardlint.memory.cli import add_arguments
    except ImportError:  # pragma: no cover - the memory package is part of the wheel
        add_arguments = None
    if add_arguments is not None:
        add_arguments(memory)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help exits 0, a usage error exits 2
        return int(exc.code or 0)
    try:
        if args.command == "check":
            return _check(args)
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


def _check(args: argparse.Namespace) -> int:
    from shardlint import config as config_mod
    from shardlint.engine import Engine
    from shardlint.report import formats
    from shardlint.report.sarif import to_sarif
    from shardlint.source import SourceText

    paths: list[Path] = args.paths
    stdin = len(paths) == 1 and str(paths[0]) == "-"
    if not stdin:
        for p in paths:
            if not p.exists():
                raise UsageError(f"{p}: no such file or folder")
    start = args.config.parent if args.config else (
        Path(args.stdin_filename).parent if stdin and args.stdin_filename else
        (paths[0] if paths else Path.cwd()))
    if args.config and not args.config.is_file():
        raise UsageError(f"{args.config}: no such file")
    cfg = config_mod.load(args.config if args.config else start)
    cfg = cfg.with_overrides(select=args.select, ignore=args.ignore,
                             extend_select=args.extend_select)
    from shardlint.rules.base import all_rules, get_rule

    known = {r.code for r in all_rules()}
    for code in (args.select or []) + (args.ignore or []) + (args.extend_select or []):
        c = code.upper()
        if c != "ALL" and not any(k.startswith(c) for k in known | {"SHL000", "SHL900"}):
            raise UsageError(f"no rule matches {code!r}; see `shardlint rules`")
    if args.jax_version or args.flax_version:
        from dataclasses import replace

        cfg = replace(cfg, jax_version=args.jax_version or cfg.jax_version,
                      flax_version=args.flax_version or cfg.flax_version)
    engine = Engine(cfg, use_cache=not args.no_cache)
    sources: dict[str, SourceText] = {}
    if stdin:
        text = sys.stdin.read()
        name = args.stdin_filename or "<stdin>"
        findings = engine.lint_text(Path(name), text)
        sources[str(Path(name))] = SourceText(str(Path(name)), text)
    else:
        targets = paths or [cfg.root]
        findings = engine.lint_paths(targets)
        for f in findings:
            if f.path not in sources:
                try:
                    sources[f.path] = SourceText(f.path, Path(f.path).read_text(encoding="utf-8"))
                except (OSError, UnicodeDecodeError):
                    pass
    if args.memory:
        specs = None if stdin or not paths else [str(p.resolve()) for p in paths]
        findings = sorted(findings + _memory_findings(cfg, specs), key=lambda f: f.sort_key())
        for f in findings:
            if f.path not in sources and Path(f.path).is_file():
                sources[f.path] = SourceText(f.path, Path(f.path).read_text(encoding="utf-8"))
    for err in engine.errors:
        print(f"shardlint: error: {formats.display_path(err.path)}: {err.message}", file=sys.stderr)

    fmt = args.format or ("github" if _in_github_actions() else "concise")
    located = formats.locate(findings, sources)
    out_stream = sys.stdout
    color = out_stream.isatty() and args.output_file is None
    if fmt == "json":
        text_out = formats.to_json(located, sources)
    elif fmt == "sarif":
        text_out = to_sarif(located, sources, all_rules(), cfg.root)
    elif fmt == "github":
        text_out = formats.github(located)
    elif fmt == "full":
        text_out = formats.full(located, sources, color)
    else:
        text_out = formats.concise(located, color)
    if args.statistics and fmt in ("concise", "full"):
        text_out = formats.statistics(findings)
    elif fmt in ("concise", "full") and findings:
        fixable = sum(1 for f in findings if f.fix is not None)
        n = len(findings)
        text_out += f"\nFound {n} finding{'s' if n != 1 else ''}"
        text_out += f" ({fixable} with a fix)." if fixable else "."
    if args.output_file is not None:
        try:
            args.output_file.write_text(text_out + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write {args.output_file}: {exc.strerror}") from None
    elif text_out:
        print(text_out)
    del get_rule
    if engine.errors:
        return 2
    if findings and not args.exit_zero:
        return 1
    return 0


def _memory_findings(cfg, specs: list[str] | None) -> list:
    """Measured findings from the memory probes, as engine findings (SHL900-SHL905)."""
    from shardlint.memory.findings import measured_findings
    from shardlint.rules.base import Finding
    from shardlint.source import Span

    out = []
    if specs is None and cfg.memory.get("probes"):
        specs = None  # the configured probes
    for item in measured_findings(specs, root=cfg.root,
                                  progress=lambda line: print(line, file=sys.stderr)):
        if not cfg.is_selected(item["code"], True, item["path"]):
            continue
        path = str(cfg.root / item["path"])
        line, col = item["line"], item["column"]
        out.append(Finding(item["code"], item["name"], cfg.severity_of(item["code"], item["severity"]),
                           item["message"], path, Span(line, col, item.get("end_line") or line, col)))
    return out


def _in_github_actions() -> bool:
    import os

    return os.environ.get("GITHUB_ACTIONS") == "true"


def _rule_json(cls) -> dict:
    return {"code": cls.code, "name": cls.name, "severity": cls.severity,
            "enabled_by_default": cls.enabled_by_default, "summary": cls.summary,
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
    for cls in rules:
        off = "" if cls.enabled_by_default else "  (off by default)"
        print(f"{cls.code}  {cls.name:<36} {cls.severity:<8} {cls.summary}{off}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
