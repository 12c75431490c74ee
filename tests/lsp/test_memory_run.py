"""What the memory lens reads without running anything: probes (named or configured), the jitted
function a probe returns, and the client's memory settings."""

from __future__ import annotations

import textwrap
from pathlib import Path

from shardlint.lsp import settings
from shardlint.lsp.memory_run import jitted_target, plan_for, probes_of
from shardlint.lsp.settings import MemoryClientSettings
from shardlint.memory.probes import probes_in_source

MODEL = '''
import jax

@jax.jit
def train_step(state, batch):
    return state

def plain(x):
    return x
'''


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def target_of(root: Path, body: str) -> tuple[str, str] | None:
    path = write(root, "probes.py", "import jax\nfrom model import train_step\n"
                 "from .model import plain\n\n" + textwrap.dedent(body))
    (probe,) = probes_in_source(path.read_text(), path)
    found = jitted_target(probe)
    return (found[0].name, found[1]) if found else None


def test_the_jitted_function_a_probe_returns_is_found_in_the_module_it_comes_from(tmp_path):
    write(tmp_path, "model.py", MODEL)
    assert target_of(tmp_path, "def shardlint_probe_a():\n    return train_step, (1, 2)\n") \
        == ("model.py", "train_step")
    assert target_of(tmp_path, "def shardlint_probe_a():\n"
                     "    return jax.jit(plain).lower(1)\n") == ("model.py", "plain")
    assert target_of(tmp_path, "def shardlint_probe_a():\n    step = jax.jit(plain, donate_argnums=0)\n"
                     "    return step, (1,)\n") == ("model.py", "plain")
    assert target_of(tmp_path, "def local(x):\n    return x\n\ndef shardlint_probe_a():\n"
                     "    return jax.jit(local), (1,)\n") == ("probes.py", "local")


def test_no_target_when_the_function_cannot_be_located(tmp_path):
    write(tmp_path, "model.py", MODEL)
    assert target_of(tmp_path, "def shardlint_probe_a():\n    return make_step(), (1,)\n") is None
    assert target_of(tmp_path, "def shardlint_probe_a():\n    return jax.jit(lambda x: x), (1,)\n") \
        is None
    assert target_of(tmp_path, "def shardlint_probe_a():\n    from elsewhere import f\n"
                     "    return f, (1,)\n") is None


def test_configured_probes_need_not_follow_the_naming_convention(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.shardlint.memory]\nprobes = ["probes.py:measure"]\n'
          "devices = [1, 4]\n")
    path = write(tmp_path, "probes.py", "def measure():\n    pass\n\n"
                 "def shardlint_probe_b():\n    pass\n\ndef helper():\n    pass\n")
    plan = plan_for(path, MemoryClientSettings(enabled=True, trusted=True))
    assert plan.settings.devices == (1, 4) and plan.root == tmp_path.resolve()
    text = path.read_text()
    assert [p.function for p in probes_of(text, path, plan)] == ["measure", "shardlint_probe_b"]
    assert [p.function for p in probes_of(text, path, None)] == ["shardlint_probe_b"]
    # The client's settings override the table, and change the cache key.
    other = plan_for(path, MemoryClientSettings(enabled=True, trusted=True, devices=(2,)))
    assert other.settings.devices == (2,) and other.key != plan.key


def test_client_memory_settings_are_off_unless_enabled_and_trusted():
    assert not settings.parse({}).memory.active
    assert not settings.parse({"shardlint": {"memory": {"enabled": True}}}).memory.active
    parsed = settings.parse({"shardlint": {"memory": {
        "enabled": True, "trusted": True, "devices": [8, 1], "hardware": "h100-80gb",
        "python": " /venv/bin/python "}}})
    assert parsed.memory == MemoryClientSettings(
        enabled=True, trusted=True, devices=(1, 8), hardware="H100-80GB",
        capacity=80 * 1024**3, python="/venv/bin/python")
    assert settings.parse({"memory": {"enabled": True, "trusted": True, "capacity": "24GiB"}}) \
        .memory.capacity == 24 * 1024**3
    bad = settings.parse({"memory": {"enabled": True, "trusted": True, "hardware": "nope"}})
    assert bad.memory.active and bad.problems and "unknown hardware" in bad.problems[0]
    assert settings.parse({"memory": "on"}).problems == ["`memory` must be an object"]
