"""The README and docs/ say what shardlint does today: docs/rules.md is generated from the rule
files, every relative link resolves, every `shardlint ...` command parses, every file or option
they name exists, every configuration key and command-line option is documented, and every
example output (a ```console block that starts with `$ shardlint ...`) is what the command
prints."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from shardlint import config as config_mod
from shardlint.cli import build_parser
from shardlint.rules.base import all_rules, reference_markdown

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
INLINE = re.compile(r"`([^`\n]+)`")


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    text: str


def blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    return [Block(page, text.count("\n", 0, m.start()) + 1, m.group(1), m.group(2))
            for m in FENCE.finditer(text)]


def prose(page: Path) -> str:
    """The page without its fenced blocks."""
    return FENCE.sub("", page.read_text(encoding="utf-8"))


def all_blocks() -> list[Block]:
    return [b for page in PAGES for b in blocks(page)]


# -- docs/rules.md -------------------------------------------------------------------------------

def test_rules_reference_is_current():
    current = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert current == reference_markdown(), (
        "docs/rules.md is stale: run `shardlint rules --format markdown > docs/rules.md`")


def test_every_rule_is_documented():
    text = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    for r in all_rules():
        assert f"## {r.code} {r.name}" in text


# -- the README is a front page, its links and the docs' resolve --------------------------------

def test_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines < 200, f"README.md has {lines} lines: move reference material to docs/"
    linked = {m for m in LINK.findall(prose(ROOT / "README.md")) if m.startswith("docs/")}
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages <= {link.split("#")[0] for link in linked}, "a docs/ page the README omits"


def slugs(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, -1 on
    repeats."""
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", prose(page), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_relative_links_resolve(page):
    links = [m for m in LINK.findall(prose(page)) if not re.match(r"[a-z]+:", m)]
    for link in links:
        target, _, anchor = link.partition("#")
        path = (page.parent / target).resolve() if target else page
        assert path.exists(), f"{_id(page)}: the link {link!r} points to nothing"
        if anchor and path.suffix == ".md":
            assert anchor in slugs(path), f"{_id(page)}: no heading #{anchor} in {target or 'it'}"


def test_link_check_sees_a_broken_link(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# A b\n\n[x](#a-b) [y](#nope) [z](missing.md)\n")
    assert slugs(page) == {"a-b"}
    assert [m for m in LINK.findall(prose(page))] == ["#a-b", "#nope", "missing.md"]


# -- commands, files and options named in the docs ----------------------------------------------

def commands() -> list[tuple[str, str]]:
    """(where, command line) of each `shardlint ...` in inline code and shell blocks."""
    found = []
    for page in PAGES:
        for span in INLINE.findall(prose(page)):
            if re.match(r"(\.venv/bin/)?shardlint (check|rules?|server|memory|--)", span):
                found.append((_id(page), span))
        for b in blocks(page):
            if b.lang in ("sh", "console", ""):
                for line in b.text.splitlines():
                    for part in re.split(r"&&|;", line.removeprefix("$ ")):
                        part = part.strip()
                        if re.match(r"(\.venv/bin/)?shardlint ", part):
                            found.append((f"{_id(page)}:{b.line}", part))
    return found


def _argv(command: str) -> list[str]:
    words = []
    for word in shlex.split(command.replace("\\|", "|"), comments=True):
        if word in ("|", ">", ">>", "2>&1"):
            break
        words.append(word)
    return words[1:]


@pytest.mark.parametrize("where, command", commands())
def test_commands_parse(where, command):
    argv = _argv(command)
    parser = build_parser(argv)
    try:
        parser.parse_args(argv)
    except SystemExit as stop:  # --help and --version exit 0, a bad option 2
        assert stop.code == 0, f"{where}: `{command}` does not parse"


def test_commands_are_found():
    found = {c for _, c in commands()}
    assert "shardlint check examples/" in found
    assert ".venv/bin/shardlint check examples/" in found
    with pytest.raises(SystemExit):
        build_parser(["check", "--no-such-option"]).parse_args(["check", "--no-such-option"])


def mentioned_paths() -> list[tuple[str, str]]:
    roots = ("bench/", "scripts/", "tests/", "examples/", "shardlint/", "docs/",
             "vscode-extension/", ".ci/", ".pre-commit-hooks.yaml", "action.yml", "pyproject.toml")
    found = []
    for page in PAGES:
        words = [w for span in INLINE.findall(prose(page)) for w in span.split()]
        words += [w for b in blocks(page) if b.lang in ("sh", "console", "")
                  for w in b.text.split()]
        for word in words:
            word = word.strip("()[],;'\"").split(":")[0]
            if word.startswith(roots) and not re.search(r"[<*{$]|\.\.\.", word):
                found.append((_id(page), word))
    return sorted(set(found))


@pytest.mark.parametrize("where, path", mentioned_paths())
def test_named_files_exist(where, path):
    assert (ROOT / path).exists(), f"{where} names {path}, which is not in the repository"


def bench_options() -> list[tuple[str, str, str]]:
    found = []
    for page in PAGES:
        spans = INLINE.findall(prose(page))
        spans += [line for b in blocks(page) for line in b.text.splitlines()]
        for span in spans:
            m = re.search(r"(bench/[\w/]+\.py)((?: [^`]*)?)", span)
            # `shardlint memory bench/some_probe.py --devices 64`: a probe, not a bench script
            if m and "shardlint " not in span[: m.start()]:
                for option in re.findall(r"--[\w-]+", m.group(2)):
                    found.append((_id(page), m.group(1), option))
    return sorted(set(found))


@pytest.mark.parametrize("where, script, option", bench_options())
def test_bench_options_exist(where, script, option):
    assert f'"{option}"' in (ROOT / script).read_text(encoding="utf-8"), (
        f"{where}: {script} has no {option}")


def _long_options(parser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings
            if o.startswith("--") and o != "--help"}


def test_every_command_line_option_is_documented():
    text = (ROOT / "docs" / "commands.md").read_text(encoding="utf-8")
    parser = build_parser(["memory"])
    subs = next(a for a in parser._actions if a.dest == "command").choices
    for name in ("check", "rule", "rules", "memory"):
        for option in _long_options(subs[name]):
            assert f"`{option}" in text, f"docs/commands.md does not document {name} {option}"
    assert _long_options(subs["memory"]) >= {"--devices", "--no-whatif", "--list-hardware"}


def test_every_configuration_key_is_documented_and_the_example_is_valid(tmp_path):
    from shardlint.memory.settings import KEYS as MEMORY_KEYS

    page = ROOT / "docs" / "configuration.md"
    example = next(b for b in blocks(page) if b.lang == "toml").text
    table = tomllib.loads(example)["tool"]["shardlint"]
    config_mod.from_table(table, tmp_path)  # raises ConfigError on a bad key or value
    for key in config_mod.KNOWN_KEYS:
        assert key in table, f"the example in docs/configuration.md lacks {key}"
    for key in MEMORY_KEYS:
        assert re.search(rf"^(\w.*# or )?{key} = ", example, re.M), (
            f"docs/configuration.md does not show [tool.shardlint.memory] {key}")


# -- YAML snippets: they parse, and the action's inputs are the action's ------------------------

def test_yaml_snippets_parse_and_use_the_actions_inputs():
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    uses = 0
    for b in all_blocks():
        if b.lang != "yaml":
            continue
        data = yaml.safe_load(b.text)
        steps = data if isinstance(data, list) else [
            s for job in (data.get("jobs") or {}).values() for s in job.get("steps", [])]
        for step in steps:
            if isinstance(step, dict) and str(step.get("uses", "")).startswith("shardlint/"):
                uses += 1
                assert set(step.get("with", {})) <= set(action["inputs"]), (_id(b.page), b.line)
    assert uses >= 2  # the README's and docs/ci.md's


# -- example outputs ----------------------------------------------------------------------------

def examples() -> list[Block]:
    return [b for b in all_blocks() if b.lang == "console" and b.text.startswith("$ shardlint ")]


def _normal(line: str) -> str:
    """Spaces collapsed (an excerpt's table is narrower than the whole) and the installed jax's
    version in what shardlint says it judged or ran on."""
    line = re.sub(r"(judged for jax |; jax )[\w.]+", r"\1<jax>", line)
    return " ".join(line.split())


_RUNS: dict[str, subprocess.CompletedProcess] = {}


def _run(command: str) -> subprocess.CompletedProcess:
    if command not in _RUNS:
        env = {**os.environ, "GITHUB_ACTIONS": ""}
        _RUNS[command] = subprocess.run([sys.executable, "-m", "shardlint", *_argv(command)],
                                        cwd=ROOT, env=env, capture_output=True, text=True,
                                        timeout=600)
    return _RUNS[command]


def _has_libtpu() -> bool:
    from importlib import metadata

    for dist in ("libtpu", "libtpu-nightly"):
        try:
            metadata.version(dist)
            return True
        except metadata.PackageNotFoundError:
            pass
    return False


def matches(expected: list[str], actual: list[str]) -> str | None:
    """None when ``expected`` is ``actual`` with `...` lines standing for any lines; else the
    first expected line not found in its place."""
    want = [_normal(x) for x in expected]
    got = [_normal(x) for x in actual]
    i = 0
    for k, line in enumerate(want):
        if line == "...":
            continue
        skipping = k > 0 and want[k - 1] == "..."
        while i < len(got) and got[i] != line and skipping:
            i += 1
        if i >= len(got) or got[i] != line:
            return expected[k]
        i += 1
    return None if i == len(got) or (want and want[-1] == "...") else "(more output)"


def test_example_matching():
    assert matches(["a", "...", "c"], ["a", "b", "b2", "c"]) is None
    assert matches(["a", "c"], ["a", "b", "c"]) == "c"
    assert matches(["a"], ["a", "b"]) == "(more output)"
    assert matches(["x  1.00x", "..."], ["x 1.00x", "y"]) is None


@pytest.mark.slow
@pytest.mark.parametrize("block", examples(), ids=lambda b: f"{_id(b.page)}:{b.line}")
def test_example_output_is_what_the_command_prints(block):
    command, *expected = block.text.rstrip("\n").split("\n")
    command = command.removeprefix("$ ")
    if _argv(command)[0] == "memory":
        pytest.importorskip("jax", reason="the memory check needs jax in the test interpreter")
        if "--target" in _argv(command) and not _has_libtpu():
            pytest.skip("a TPU --target needs libtpu in the test interpreter (bash "
                        "scripts/tpu-env.sh installs the one its jax pins)")
    run = _run(command)
    assert run.returncode in (0, 1), run.stderr
    miss = matches(expected, run.stdout.splitlines())
    assert miss is None, (f"{_id(block.page)}:{block.line}: `{command}` no longer prints\n"
                          f"{miss}\nit prints:\n{run.stdout}")


def test_there_are_examples():
    where = {(_id(b.page), b.text.split("\n")[0]) for b in examples()}
    assert ("README.md", "$ shardlint check examples/") in where
    assert any(page == "docs/memory.md" for page, _ in where)
