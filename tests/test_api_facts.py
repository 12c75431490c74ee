"""The API facts read from every jax and flax release (``catalog/api_facts.json``, rebuilt by
``python scripts/api_facts.py``) and every version fact shardlint states, held to them.

These read the shipped table, never the network: a fact checked here was read from the
released files, and the catalogue, the rules' constants, their messages and docs/rules.md must
agree with it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shardlint.semantics.catalog import api, facts
from shardlint.semantics.catalog import versions as V
from shardlint.semantics.catalog.versions import parse

ROOT = Path(__file__).resolve().parent.parent


# ---- the reading API, on facts checked by hand in the released files ------------------------------
def test_the_release_lists_are_every_release_oldest_first():
    for package in ("jax", "flax"):
        found = facts.releases(package)
        assert found[0] == "0.3.0" and len(found) > 50
        assert [parse(v) for v in found] == sorted(parse(v) for v in found)
        assert len(set(found)) == len(found)
    assert "0.4.16" in facts.releases("jax") and "0.4.15" not in facts.releases("jax")
    assert V.RELEASES["jax"] == facts.releases("jax") and V.CURRENT["flax"] == \
        facts.releases("flax")[-1]


def test_jax_tree_map_was_deprecated_in_0_4_26_and_removed_in_0_6_0():
    assert facts.exists("jax.tree_map", "0.5.3") is True
    assert facts.exists("jax.tree_map", "0.6.0") is False
    assert facts.removed_in("jax.tree_map") == "0.6.0"
    deprecation = facts.deprecated_in("jax.tree_map")
    assert deprecation is not None and deprecation.version == "0.4.26"
    assert "jax.tree.map" in deprecation.message and deprecation.still_answers
    # jax.tree_util.tree_map works at every release: the advice that fits any pin
    assert all(facts.exists("jax.tree_util.tree_map", v) for v in facts.releases("jax"))


def test_jax_tree_map_the_new_spelling_is_there_from_0_4_25():
    assert facts.first_release("jax.tree.map") == "0.4.25"
    assert facts.exists("jax.tree.map", "0.4.24") is False
    assert facts.exists("jax.tree", "0.4.25") is True  # (a module)


def test_set_mesh_from_0_7_1_and_use_mesh_from_0_5_0_to_0_7_0():
    assert facts.first_release("jax.set_mesh") == "0.7.1"
    assert facts.exists("jax.set_mesh", "0.7.0") is False
    assert facts.first_release("jax.sharding.use_mesh") == "0.5.0"
    assert facts.removed_in("jax.sharding.use_mesh") == "0.7.1"
    assert facts.first_release("flax.linen.with_logical_constraint") == "0.6.4"


def test_jit_takes_fun_positionally_only_from_0_7_0():
    """0.6.x declares `fun` positional-only but wraps jit in a decorator that still accepts the
    old spellings (it warns): the table says the signature is not exact there."""
    def fun_kind(version: str):
        sig = facts.signature("jax.jit", version)
        assert sig is not None, version
        return sig.param("fun").kind, sig.exact  # type: ignore[union-attr]

    first = next(v for v in facts.releases("jax")
                 if fun_kind(v) == ("positional_only", True))
    assert first == "0.7.0"
    assert fun_kind("0.6.2") == ("positional_only", False)
    assert fun_kind("0.5.3") == ("positional_or_keyword", True)
    sig = facts.signature("jax.jit", "0.7.0")
    assert sig is not None and sig.accepts_keyword("fun") is False
    assert sig.accepts_keyword("donate_argnames") is True


def test_jit_as_a_decorator_factory_needs_fun_to_have_a_default():
    """`@jax.jit(donate_argnums=...)` (SHL401's fix) works where `fun` has a default."""
    first = next(v for v in facts.releases("jax")
                 if (s := facts.signature("jax.jit", v)) and s.param("fun").has_default)  # type: ignore[union-attr]
    assert first == "0.8.1"


def test_pmap_never_takes_donate_argnames():
    read = 0
    for version in facts.releases("jax"):
        sig = facts.signature("jax.pmap", version)
        if sig is None:
            continue
        read += 1
        assert sig.param("donate_argnums") is not None, version
        assert sig.param("donate_argnames") is None, version
        assert sig.accepts_keyword("donate_argnames") in (False, None)
    assert read == len(facts.releases("jax"))


def test_python_bounds_and_what_flax_requires():
    assert facts.python_bounds("jax", "0.6.2") == ">=3.10"
    newest_on_310 = [v for v in facts.releases("jax") if facts.allows_python("jax", v, "3.10")]
    assert newest_on_310[-1] == "0.6.2"  # (python=3.10 pins jax to 0.6.2 at most)
    assert facts.flax_needs_jax("0.12.0") == "0.7.1"
    assert facts.flax_needs_jax("0.12.5") == "0.8.1"
    assert facts.flax_needs_jax("0.10.0") == "0.4.27"


def test_not_known_is_a_third_answer():
    assert facts.exists("jax.numpy.asarray", "0.9.0") is True
    assert facts.exists("jax.numpy.no_such_name", "0.9.0") is False
    assert facts.exists("jax.config.update", "0.9.0") is None  # (an attribute of an object)
    # jax.config is both the package's config object and (to 0.4.x) a submodule whose import
    # warns: the object's attributes are neither missing nor deprecated
    assert facts.exists("jax.config", "0.4.25") is True
    assert facts.exists("jax.config.update", "0.4.25") is None
    assert facts.deprecated_in("jax.config") is not None
    assert facts.deprecated_in("jax.config.update") is None
    # a name of a module whose import warns is deprecated with it
    xmap = facts.deprecated_in("jax.experimental.maps.xmap")
    assert xmap is not None and xmap.version == "0.4.26"
    assert facts.exists("jax.jit", "99.0") is None  # (a release the table did not read)
    assert facts.exists("optax.apply_updates", "0.2.0") is None
    assert facts.release_index("jax", "0.4.32") == facts.release_index("jax", "0.4.31")


def test_deprecations_keep_the_release_s_own_message():
    d = facts.deprecated_in("jax.experimental.pjit.pjit")
    assert d is not None and d.version == "0.8.0" and "jax.jit" in d.message
    d = facts.deprecated_in("flax.nnx.vars_as")  # (flax's deprecated(new) alias)
    assert d is not None and d.version == "0.12.8" and "with_vars" in d.message
    d = facts.deprecated_in("jax.sharding.Mesh.__enter__")  # (a method's warning)
    assert d is not None and "jax.set_mesh" in d.message


# ---- the catalogue against the table ----------------------------------------------------------
JAX_FLAX = [a for a in api.APIS if a.package in ("jax", "flax")]


@pytest.mark.parametrize("entry", JAX_FLAX, ids=[a.name for a in JAX_FLAX])
def test_the_catalogue_s_versions_are_the_table_s(entry):
    first = facts.first_release(entry.name)
    deprecation = facts.deprecated_in(entry.name)
    read = {"added": first if first != facts.releases(entry.package)[0] else None,
            "deprecated": deprecation.version if deprecation else None,
            "removed": facts.removed_in(entry.name)}
    for field, value in read.items():
        if field in entry.by_hand:
            continue
        assert getattr(entry, field) == value, (
            f"{entry.name}: {field} {getattr(entry, field)} in the catalogue, {value} in the "
            f"releases (python scripts/api_facts.py --catalogue-only)")


# A fact by hand is one the table cannot show: it fails here once the table shows it.
def test_facts_by_hand_are_those_the_table_cannot_show():
    by_hand = {a.name: a.by_hand for a in JAX_FLAX if a.by_hand}
    assert by_hand == {"jax.host_ids": ("deprecated",)}
    assert facts.deprecated_in("jax.host_ids") is None
    assert facts.exists("jax.host_ids", facts.releases("jax")[-1]) is True


@pytest.mark.parametrize("entry", JAX_FLAX, ids=[a.name for a in JAX_FLAX])
def test_every_spelling_exists_in_some_release(entry):
    for spelling in (entry.name, *entry.spellings):
        presence = {facts.exists(spelling, v) for v in facts.releases(entry.package)}
        assert presence != {False}, f"{spelling} exists in no {entry.package} release read"


def _keyword_warned(keyword: str) -> str | None:
    return facts.first_warning("flax.nnx.variablelib", f"'{keyword}' is deprecated")


def test_the_keyword_moves_are_dated_by_the_release_s_warning():
    """`.sharding_names` warns first (0.12.4, its property); both keywords warn from the release
    whose remapping of keywords warns, the first to say `'sharding' is deprecated`."""
    keywords = _keyword_warned("sharding")
    expected = {("sharding", True): keywords, ("sharding_names", True): keywords,
                ("sharding_names", False): _keyword_warned("sharding_names")}
    assert {(m.keyword, m.call_keyword): m.deprecated for m in api.KEYWORD_MOVES} == expected
    assert expected[("sharding_names", False)] == "0.12.4" and keywords == "0.12.6"


def test_the_rules_constants_are_the_table_s():
    from shardlint.rules.contexts import shl101_legacy_mesh_context as shl101

    assert shl101.SET_MESH_ADDED == facts.first_release("jax.set_mesh")
    d = facts.deprecated_in("jax.sharding.Mesh.__enter__")
    assert d is not None and shl101.DEPRECATED == d.version


# ---- every version a rule's text or docs/rules.md states ----------------------------------------
CLAIM = re.compile(r"(?P<kind>deprecated (?:since|in)|deprecated|removed in|removed|gone by|"
                   r"since|renamed in|warn from)\s+(?P<pkg>jax|flax)\s*"
                   r"(?P<version>\d+\.\d+(?:\.\d+)*)"
                   r"|(?P<kind2>needs|on) (?P<pkg2>jax|flax) ?>= ?(?P<version2>\d+\.\d+(?:\.\d+)*)")
ALIASES = {"nnx.": "flax.nnx.", "nn.": "flax.linen.", "jnp.": "jax.numpy.",
           "pjit": "jax.experimental.pjit.pjit"}
# Version facts about behaviour, not names: the releases' names and signatures cannot show them
# (each was reproduced on that release; see shared/RULES.md and shared/experiments/).
BEHAVIOUR_FACTS = {
    ("flax", "0.12.2"): "a legacy `with mesh:` no longer activates Linen constraints (behaviour)",
    ("flax", "0.12.0"): "NNX eager sharding of annotated Variables is on by default (a default)",
    ("jax", "0.5.0"): "jax_threefry_partitionable defaults to True (a config default)",
    ("jax", "0.3.24"): "the jax_threefry_partitionable flag exists from jax 0.3.24 (a config "
                       "flag: the sdists' jax/_src/config.py define it from 0.3.24, not in 0.3.23)",
}


# Version facts of signatures and warnings, computed from the table here.
CHECKED_ELSEWHERE = {
    # `@jax.jit(donate_argnums=...)`: `fun` has a default
    ("jax", "0.8.1"): lambda: next(
        v for v in facts.releases("jax") if (s := facts.signature("jax.jit", v))
        and s.param("fun").has_default),  # type: ignore[union-attr]
    # `sharding=` / `sharding_names=` of nnx.Variable warn; `.sharding_names` reads warn
    ("flax", "0.12.6"): lambda: _keyword_warned("sharding"),
    ("flax", "0.12.4"): lambda: _keyword_warned("sharding_names"),
}


def _claims() -> list[tuple[str, str, str, str, str]]:
    out = []
    files = sorted((ROOT / "shardlint" / "rules").rglob("*.py")) + [ROOT / "docs" / "rules.md"]
    for path in files:
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            for m in CLAIM.finditer(line):
                context = "\n".join(lines[max(0, i - 8): i + 1])
                kind, package, version = (m.group("kind"), m.group("pkg"), m.group("version")) \
                    if m.group("kind") else (m.group("kind2"), m.group("pkg2"),
                                             m.group("version2"))
                out.append((path.relative_to(ROOT).as_posix(), kind, package, version, context))
    return out


def _mentioned(context: str) -> set[str]:
    names = set()
    imported = [f"{m.group(1)}.{n.strip()}" for m in re.finditer(
        r"from ([\w.]+) import ([\w, ]+)", context) for n in m.group(2).split(",")]
    for raw in re.findall(r"[A-Za-z_][\w.]*", context) + imported:
        for short, full in ALIASES.items():
            if raw.startswith(short) and not raw.startswith(("jax.", "flax.")):
                raw = full + raw[len(short):]
        if raw.startswith(("jax.", "flax.")) and raw.count(".") >= 1:
            names.add(raw.rstrip("."))
    return names


def _facts_of(name: str) -> set[str]:
    out = {facts.first_release(name), facts.removed_in(name)}
    d = facts.deprecated_in(name)
    out.add(d.version if d else None)
    a = api.lookup(name)
    if a is not None:
        out |= {a.added, a.deprecated, a.removed}
    return {v for v in out if v}


def test_every_version_a_rule_states_is_the_table_s():
    claims = _claims()
    assert len(claims) > 20  # (the pattern still finds them)
    unverified = []
    used = set()
    for where, kind, package, version, context in claims:
        if (package, version) in BEHAVIOUR_FACTS:
            used.add((package, version))
            continue
        if (package, version) in CHECKED_ELSEWHERE:
            assert CHECKED_ELSEWHERE[package, version]() == version, (where, version)
            continue
        if any(version in _facts_of(name) for name in _mentioned(context)
               if name.split(".")[0] == package):
            continue
        unverified.append(f"{where}: {kind} {package} {version}")
    assert not unverified, "versions no API fact of the table states:\n" + "\n".join(unverified)
    assert used == set(BEHAVIOUR_FACTS), f"stale behaviour facts: {set(BEHAVIOUR_FACTS) - used}"
