"""The done-when checks: the seed ensemble's per-device parameters stay flat (original) or halve
(fixed) from 1 to 2 devices, in the table, the JSON and the HTML; the 1B decoder completes."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from .memory_support import DECODER_PROBE, REPO, SEED_PROBES, CliResult, needs_flax

pytestmark = [pytest.mark.memory, needs_flax]

MIB = 1024**2
PARAMS = 128 * MIB + 128 * 1024  # 8 x (1024x4096 + 4096x1) float32
ORIGINAL = f"{SEED_PROBES}:shardlint_probe_original"
FIXED = f"{SEED_PROBES}:shardlint_probe_fixed"


@pytest.fixture(scope="module")
def seed_json(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path, str]:
    """One run for the JSON and HTML checks (both device counts in parallel workers)."""
    import contextlib
    import io
    import json

    from shardlint.memory.__main__ import main

    html = tmp_path_factory.mktemp("html") / "report.html"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(
            [
                ORIGINAL,
                FIXED,
                "--devices",
                "1,2",
                "--jobs",
                "2",
                "--format",
                "json",
                "--hardware",
                "A100-40GB",
                "--html",
                str(html),
            ]
        )
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue()), html, err.getvalue()


def _params(data: dict, function: str) -> dict[str, int]:
    probe = next(p for p in data["probes"] if p["function"] == function)
    return probe["groups"]["out['params']"]


@pytest.mark.slow
def test_json_original_flat_fixed_halves(seed_json: tuple[dict, Path, str]) -> None:
    data, _, _ = seed_json
    assert _params(data, "shardlint_probe_original") == {"1": PARAMS, "2": PARAMS}
    assert _params(data, "shardlint_probe_fixed") == {"1": PARAMS, "2": PARAMS // 2}
    original, fixed = data["probes"]
    assert (
        original["scaling"]["2"]["verdict"] == "flat"
        and fixed["scaling"]["2"]["verdict"] == "ideal"
    )
    at_two = original["runs"][1]
    assert at_two["devices_used"] == 1 and at_two["per_device"]["output"] >= PARAMS
    assert at_two["exact"] == ["argument", "output", "alias"] and "temp" in at_two["estimated"]
    assert at_two["fits"] is True and data["capacity"] == 40 * 1024**3
    kernel = next(leaf for leaf in fixed["runs"][1]["leaves"] if "Dense_0" in leaf["path"])
    assert kernel["spec"] == "P('model', None, None)" and kernel["per_device"] == 64 * MIB
    codes = {(f["code"], f["probe"]) for f in data["findings"]}
    assert codes == {("SHL902", "shardlint_probe_original"), ("SHL905", "shardlint_probe_original")}
    finding = next(f for f in data["findings"] if f["code"] == "SHL905")
    assert finding["path"].endswith("examples/seed_ensemble/probes.py") and finding["line"] > 1


def _init_line() -> int:
    lines = SEED_PROBES.read_text(encoding="utf-8").splitlines()
    return lines.index("    return jax.jit(model.init), (_key(), x)") + 1


@pytest.mark.slow
def test_json_original_params_carry_their_static_causes(seed_json: tuple[dict, Path, str]) -> None:
    """The worker calls the original probe with no context: its own SHL102/SHL103 and the init
    jitted without out_shardings (SHL302) explain why the 128 MiB kernel sits whole on one
    device; the fixed probe has nothing to explain."""
    data, _, _ = seed_json
    original, fixed = data["probes"]
    (kernel,) = original["runs"][1]["unsharded"]  # the 128 KiB kernel is under the threshold
    assert kernel["path"] == "out['params']['Dense_0']['kernel'].value"
    assert kernel["spec"] == "single device" and kernel["per_device"] == 128 * MIB
    reasons = {r["code"]: r for r in kernel["reasons"]}
    assert set(reasons) == {"SHL102", "SHL103", "SHL302"}
    for r in reasons.values():
        assert r["path"].endswith("examples/seed_ensemble/probes.py") and r["line"] == _init_line()
        assert r["link"] == "likely cause"
    for code in ("SHL102", "SHL103"):
        assert "the memory worker calls the probe" in reasons[code]["message"]
    assert reasons["SHL302"]["because"] == "it comes from a jitted init with no out_shardings"
    assert reasons["SHL102"]["because"] == (
        "its partition names (ensemble, input, hidden) take effect only with axis rules"
    )
    assert original["runs"][0]["unsharded"] == []  # one device: nothing to split
    assert all(run["unsharded"] == [] for run in fixed["runs"])
    assert not any("reasons" in leaf for run in fixed["runs"] for leaf in run["leaves"])
    single = next(f for f in data["findings"] if f["code"] == "SHL902")
    assert [r["message"].split(":")[1].strip() for r in single["related"]] == [
        "SHL102 constraint-without-rules",
        "SHL103 constraint-without-mesh",
        "SHL302 jit-init-without-out-shardings",
    ]


@pytest.mark.slow
def test_html_is_written_and_self_contained(seed_json: tuple[dict, Path, str]) -> None:
    _, html, err = seed_json
    page = html.read_text(encoding="utf-8")
    assert f"wrote {html}" in err
    # Two probes' figures, and the original's savings: before/after bars per finding and count.
    assert page.startswith("<!DOCTYPE html>") and page.count("<svg") == 3
    section = page.split("What fixing the findings it reaches saves")[1].split("</svg>")[0]
    for label in ("SHL103 examples/seed_ensemble/probes.py:", "SHL302 examples/seed_ensemble/",
                  "all together", "256.19 MiB"):  # SHL302 at 2 devices: 512.38 -> 256.19 MiB
        assert label in section, label
    assert section.count("<title>before: ") == section.count("<title>after: ") == 4 * 2
    assert "shardlint_probe_fixed" in page and "P(&#x27;model&#x27;, None, None)" in page
    assert "64.00 MiB" in page and "128.00 MiB" in page
    assert "likely cause: <b>SHL102</b> examples/seed_ensemble/probes.py:" in page
    # Nothing is fetched: no scripts, stylesheets, images or links to elsewhere.
    assert not re.search(r"<(script|link|img|iframe)\b|\b(src|href)=|url\(|@import", page)


@pytest.mark.slow
def test_table_original_flat_fixed_halves(shardlint_memory: Callable[..., CliResult]) -> None:
    result = shardlint_memory(ORIGINAL, FIXED, "--devices", "1,2", "--jobs", "2", cwd=REPO)
    assert result.code == 0, result.err
    original, fixed = result.out.split("\n\nexamples/seed_ensemble/probes.py:shardlint_probe_fixed")
    row = r"out\['params'\]\s+128\.12 MiB\s+{}\s+{}"
    assert re.search(row.format(r"128\.12 MiB", r"1\.00x \(ideal 0\.50x\) flat"), original)
    assert re.search(row.format(r"64\.06 MiB", r"0\.50x \(ideal 0\.50x\) ideal"), fixed)
    assert "devices used" in original and "1 of 2" in original
    assert "SHL902 single-device-step" in original and "SHL9" not in fixed
    line = _init_line()
    assert "likely causes of unsharded leaves at 2 devices (static analysis)" in original
    assert f"SHL102 at examples/seed_ensemble/probes.py:{line}: its partition names" in original
    assert "single device  cause: SHL102,SHL103" in re.sub(r" {2,}", "  ", original)
    assert "likely cause" not in fixed
    assert "shardlint_probe_original @ 2 device(s): done" in result.err


@pytest.mark.slow
def test_decoder_1b_on_eight_simulated_devices(shardlint_memory: Callable[..., CliResult]) -> None:
    result = shardlint_memory(
        str(DECODER_PROBE),
        "--devices",
        "8",
        "--hardware",
        "H100-80GB",
        "--format",
        "json",
        cwd=REPO,
    )
    assert result.code == 0, result.err
    run = result.json()["probes"][0]["runs"][0]
    per_device = run["per_device"]
    # adamw state (params, mu, nu) of 1.07B float32 parameters is 12 GiB; 1/8 of it per device.
    assert 1.45 * 1024**3 < per_device["argument"] < 1.55 * 1024**3
    assert per_device["alias"] >= 0.99 * per_device["output"]  # donation reused the state
    assert run["devices_used"] == 8 and run["donated_unused"] == 0 and run["fits"] is True
    assert run["worker_max_rss"] < 3 * 1024**3  # nothing materialised
