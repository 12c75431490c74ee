"""``shardlint check``: lint, optionally fix, and report in the chosen format."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

from shardlint import config as config_mod
from shardlint.config import Config
from shardlint.engine import Engine
from shardlint.errors import ShardlintError, UsageError
from shardlint.findings.fixes import apply_fixes, fixable, unified_diff
from shardlint.fsio import write_atomic
from shardlint.report import formats
from shardlint.rules.base import Finding, all_rules
from shardlint.source import SourceText, decode_source, decoded
from shardlint.warm import Recorder


def _start(args: argparse.Namespace, paths: list[Path], stdin: bool) -> Path:
    """Where the configuration is looked up from."""
    return args.config if args.config else (
        Path(args.stdin_filename) if stdin and args.stdin_filename else
        (paths[0] if paths else Path.cwd()))


def _config(args: argparse.Namespace, paths: list[Path], stdin: bool,
            start: Path | None = None) -> Config:
    if args.config and not args.config.is_file():
        raise UsageError(f"{args.config}: no such file")
    if args.config and start is None:
        cfg = config_mod.load_file(args.config)
    else:
        cfg = config_mod.load(_start(args, paths, stdin) if start is None else start)
    known = {r.code for r in all_rules()} | {"SHL000", "SHL900"}
    for code in (args.select or []) + (args.ignore or []) + (args.extend_select or []):
        c = code.upper()
        if c != "ALL" and not any(k.startswith(c) for k in known):
            raise UsageError(f"no rule matches {code!r}; see `shardlint rules`")
    cfg = cfg.with_overrides(select=args.select, ignore=args.ignore,
                             extend_select=args.extend_select)
    if getattr(args, "preview", False):
        cfg = replace(cfg, preview=True)
    if args.jax_version or args.flax_version:
        cfg = replace(cfg, jax_version=args.jax_version or cfg.jax_version,
                      flax_version=args.flax_version or cfg.flax_version)
    return cfg


def _projects(args: argparse.Namespace, paths: list[Path]) -> list[tuple[Config, list[Path]]]:
    """The paths grouped by the project each belongs to (its root and configuration), in the
    order given: ``shardlint check libA libB`` lints each with its own index, configuration
    and versions, as two runs would (one index over both would mix two ``utils`` modules)."""
    if args.config or len(paths) <= 1:
        return [(_config(args, paths, False), paths)]
    groups: dict[tuple, tuple[Config, list[Path]]] = {}
    for p in paths:
        cfg = _config(args, paths, False, start=p)
        groups.setdefault((cfg.root, cfg.path), (cfg, []))[1].append(p)
    return list(groups.values())


def _read(path: str) -> SourceText | None:
    try:
        if path.endswith(".ipynb"):
            from shardlint.notebook import load

            return SourceText(path, load(Path(path)).text)
        return SourceText(path, decode_source(Path(path).read_bytes()))
    except (OSError, UnicodeDecodeError, SyntaxError, ShardlintError):
        return None


def run_check(args: argparse.Namespace, record: Recorder | None = None) -> int:
    """``record``: what observes the run for a later replay (``warm``); told the project's root
    and what its configuration lookup probed, when the run has one project."""
    paths: list[Path] = args.paths
    stdin = len(paths) == 1 and str(paths[0]) == "-"
    if not stdin:
        for p in paths:
            if not p.exists():
                raise UsageError(f"{p}: no such file or folder")
    projects = [(_config(args, paths, stdin), paths)] if stdin else _projects(args, paths)
    cfg = projects[0][0]
    if len(projects) > 1:  # (reports name paths from the folder the projects share)
        cfg = replace(cfg, root=Path(os.path.commonpath([str(c.root) for c, _ in projects])))
    elif record is not None and not stdin:
        record.project(cfg.root, config_mod.looked_up(_start(args, paths, stdin)))
    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
    if jobs < 1:
        raise UsageError("--jobs must be at least 1")
    engine = Engine(projects[0][0], use_cache=not args.no_cache)
    errors = engine.errors
    sources: dict[str, SourceText] = {}
    fixing = args.fix or args.diff
    changed = 0

    if stdin:
        text = sys.stdin.read()
        name = str(Path(args.stdin_filename or "<stdin>"))
        findings = engine.lint_text(Path(name), text)
        if fixing:
            result = apply_fixes(text, findings, args.unsafe_fixes)
            if args.diff:
                diff = unified_diff(name, text, result.text)
                sys.stdout.write(diff)
                return 1 if diff else 0
            sys.stdout.write(result.text)
            return 0
        sources[name] = SourceText(name, text)
        files = [name]
    else:
        findings, files = [], []
        for i, (project_cfg, project_paths) in enumerate(projects):
            if i:
                engine = Engine(project_cfg, use_cache=not args.no_cache)
                engine.errors = errors
            targets = engine.expand(project_paths or [project_cfg.root])
            files.extend(str(p) for p in targets)
            found = engine.lint_paths(targets, jobs=jobs)
            if fixing:
                found, fixed = _fix_files(engine, targets, found, args)
                changed += fixed
            findings.extend(found)
        if fixing and args.diff:
            return 1 if changed else 0
        findings.sort(key=Finding.sort_key)
        for f in findings:
            if f.path not in sources:
                src = _read(f.path)
                if src is not None:
                    sources[f.path] = src

    if args.memory:
        specs = None if stdin or not paths else [str(p.resolve()) for p in paths]
        savings: list[dict] = []
        measured = _memory_findings(cfg, specs, savings)
        findings = sorted(_with_savings(cfg, findings, savings) + measured, key=Finding.sort_key)
        for f in findings:
            if f.path not in sources:
                src = _read(f.path)
                if src is not None:
                    sources[f.path] = src

    for err in errors:
        print(f"shardlint: error: {formats.display_path(err.path)}: {err.message}", file=sys.stderr)

    if args.write_baseline is not None:
        from shardlint.findings import baseline

        baseline.write(args.write_baseline, findings, sources, cfg.root)
        print(f"wrote {len(findings)} finding(s) to {args.write_baseline}", file=sys.stderr)
        return 2 if errors else 0
    if args.baseline is not None:
        from shardlint.findings import baseline

        known = baseline.load(args.baseline)
        findings = baseline.new_findings(findings, sources, cfg.root, known)

    _emit(args, cfg, findings, sources, files, changed)
    if errors:
        return 2
    if findings and not args.exit_zero:
        return 1
    return 0


# A fix can bring out a finding the first one hid (SHL404's nnx.jit, then SHL401's donation):
# fixes are applied again on the re-linted files until nothing changes, as a second run would.
MAX_FIX_ROUNDS = 10


def _fix_files(engine: Engine, targets: list[Path], findings: list[Finding],
               args: argparse.Namespace) -> tuple[list[Finding], int]:
    """Apply fixes file by file (or print them with --diff); re-lint and fix again until no
    fix changes anything. Returns the findings left and the number of files changed."""
    changed: set[Path] = set()
    current = findings
    for _ in range(MAX_FIX_ROUNDS):
        touched = _fix_round(current, args)
        if args.diff or not touched:
            return current, len(changed | set(touched))
        changed.update(touched)
        fresh = Engine(engine.config, versions=engine.versions, use_cache=engine.use_cache,
                       version_map=engine.version_map)
        current = fresh.lint_paths(targets)
        engine.errors.extend(fresh.errors)
        if not any(fixable(f, args.unsafe_fixes) for f in current):
            break
    else:
        print(f"shardlint: fixes still changed files after {MAX_FIX_ROUNDS} rounds; stopped",
              file=sys.stderr)
    print(f"Fixed {len(findings) - len(current)} finding(s) in {len(changed)} file(s).",
          file=sys.stderr)
    return current, len(changed)


def _fix_round(findings: list[Finding], args: argparse.Namespace) -> list[Path]:
    """One pass of fixes over the files; the files changed (or, with --diff, printed)."""
    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        if fixable(f, args.unsafe_fixes):
            by_path.setdefault(f.path, []).append(f)
    changed: list[Path] = []
    for path_s, items in sorted(by_path.items()):
        path = Path(path_s)
        if path.suffix == ".ipynb":
            if _fix_notebook(path, items, args):
                changed.append(path)
            continue
        try:
            text, encoding = decoded(path.read_bytes())
        except (OSError, UnicodeDecodeError, SyntaxError):
            continue
        result = apply_fixes(text, items, args.unsafe_fixes)
        if result.text == text:
            continue
        try:
            result.text.encode(encoding)
        except UnicodeEncodeError:
            print(f"shardlint: {formats.display_path(path_s)}: the fixed text does not fit its "
                  f"declared encoding ({encoding}); left unchanged", file=sys.stderr)
            continue
        if args.diff:
            sys.stdout.write(unified_diff(formats.display_path(path_s), text, result.text))
            changed.append(path)
            continue
        try:
            write_atomic(path, result.text, encoding=encoding)  # (a coding line's encoding kept)
        except OSError as exc:
            raise UsageError(f"cannot write {path}: {exc.strerror}") from None
        changed.append(path)
    return changed


def _fix_notebook(path: Path, items: list[Finding], args: argparse.Namespace) -> bool:
    from shardlint.notebook import load, write_fixed

    nb = load(path)
    result = apply_fixes(nb.text, items, args.unsafe_fixes)
    if result.text == nb.text:
        return False
    if args.diff:
        sys.stdout.write(unified_diff(formats.display_path(str(path)), nb.text, result.text))
        return True
    if not write_fixed(nb, result.text):
        print(f"shardlint: {formats.display_path(str(path))}: a fix would move cell boundaries; "
              f"left unchanged", file=sys.stderr)
        return False
    return True


def _emit(args, cfg: Config, findings: list[Finding], sources: dict[str, SourceText],
          files: list[str], changed: int) -> None:
    from shardlint.report import ci
    from shardlint.report.sarif import to_sarif

    fmt = args.format or ("github" if os.environ.get("GITHUB_ACTIONS") == "true" else "concise")
    located = formats.locate(findings, sources)
    color = sys.stdout.isatty() and args.output_file is None and "NO_COLOR" not in os.environ
    if fmt == "json":
        out = formats.to_json(located, sources)
    elif fmt == "sarif":
        out = to_sarif(located, sources, all_rules(), cfg.root)
    elif fmt == "github":
        out = formats.github(located)
    elif fmt == "junit":
        out = ci.junit(located, sorted({formats.display_path(f) for f in files}))
    elif fmt == "gitlab":
        out = ci.gitlab(located, sources, cfg.root)
    elif args.statistics:
        out = formats.statistics(findings)
    else:
        out = formats.full(located, sources, color) if fmt == "full" else \
            formats.concise(located, color)
        if findings:
            n = len(findings)
            fixes = sum(1 for f in findings if f.fix is not None)
            out += f"\nFound {n} finding{'s' if n != 1 else ''}"
            out += f" ({fixes} with a fix; `--fix` applies the safe ones)." if fixes else "."
    if args.output_file is not None:
        try:
            write_atomic(args.output_file, out + "\n", newline=None)
        except OSError as exc:
            raise UsageError(f"cannot write {args.output_file}: {exc.strerror}") from None
    elif out:
        print(out)


def _with_savings(cfg: Config, findings: list[Finding], savings: list[dict]) -> list[Finding]:
    """Static findings a probe reaches, with what their fix saved in a what-if compile: a
    sentence added to the message and the figures (``saving``, one entry per probe)."""
    by_key: dict[tuple, list[dict]] = {}
    for s in savings:
        if s.get("text") is None:
            print(f"shardlint memory: {s['code']} at {s['path']}:{s['line']} "
                  f"({s['probe']}): no what-if compile: {s['why']}", file=sys.stderr)
            continue
        by_key.setdefault((s["code"], str((cfg.root / s["path"]).resolve()), s["line"],
                           s["column"]), []).append(s)
    out = []
    for f in findings:
        found = by_key.get((f.code, str(Path(f.path).resolve()), f.span.line, f.span.col))
        if found:
            f = replace(f, message=" ".join([f.message, *(s["text"] for s in found)]),
                        saving=[{"probe": s["probe"], **s["saving"]} for s in found])
        out.append(f)
    return out


def _memory_findings(cfg: Config, specs: list[str] | None,
                     savings: list[dict] | None = None) -> list[Finding]:
    """Measured findings from the memory probes, as engine findings (SHL900-SHL905);
    ``savings`` is filled with what fixing each static finding a probe reaches saves."""
    from shardlint.memory.findings import measured_findings
    from shardlint.rules.base import Related
    from shardlint.source import Span

    out = []
    for item in measured_findings(specs, root=cfg.root, savings=savings,
                                  progress=lambda line: print(line, file=sys.stderr)):
        if not cfg.is_selected(item["code"], True, item["path"]):
            continue
        path = str(cfg.root / item["path"])
        line, col = item["line"], item["column"]
        # Static findings that likely explain the measured leaves (e.g. SHL102 at the init).
        related = tuple(Related(str(cfg.root / r["path"]), Span(r["line"], r["column"], r["line"],
                                                                 r["column"]), r["message"])
                        for r in item.get("related", ()))
        out.append(Finding(item["code"], item["name"],
                           cfg.severity_of(item["code"], item["severity"]), item["message"],
                           path, Span(line, col, item.get("end_line") or line, col),
                           related=related))
    return out
