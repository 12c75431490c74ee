"""The server never dies: half-typed code, syntax errors, binary data, huge files, bugs."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest
from conftest import HERE, SEED, TIMEOUT, position_of
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from shardlint.config import load
from shardlint.engine import Engine

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def alive(editor, uri: str) -> None:
    """The server answers, and its process is still running."""
    await editor.diagnostics(uri)
    assert editor.client._server.returncode is None


async def test_half_typed_code_and_syntax_errors(editor, project):
    root = project({"m.py": "import jax\n"})
    uri = editor.open(root / "m.py")
    await editor.diagnostics(uri)
    # Type a line character by character: every state is a valid request.
    line = "y = jax.tree_map(lambda a: a, [1])\n"
    for i, ch in enumerate(line):
        editor.edit(uri, [types.TextEdit(types.Range(types.Position(1, i), types.Position(1, i)), ch)])
    codes = {d.code for d in await editor.diagnostics(uri)}
    assert "SHL501" in codes and "SHL000" not in codes

    broken = "import jax\nx = jax.numpy.zeros(3\n"
    editor.edit(uri, [types.TextEdit(types.Range(types.Position(0, 0), types.Position(3, 0)), broken)])
    (err,) = [d for d in await editor.diagnostics(uri) if d.code == "SHL000"]
    (expected,) = Engine(load(root), use_cache=False).lint_text(root / "m.py", broken)
    assert (err.range.start.line + 1, err.range.start.character) == (expected.span.line, expected.span.col)
    assert err.message == expected.message and err.severity == types.DiagnosticSeverity.Error
    # No suppression offered for a syntax error, and hover still answers.
    assert await editor.code_actions(uri, err.range) == []
    assert (await editor.hover(uri, err.range.start)).contents.value.startswith("# SHL000")


async def test_binary_content(editor, project):
    root = project({})
    blob = "import jax\n\x00\x01\x02\ufffd\ufffd\x7fELF\x00" * 50 + "\udcff"
    uri = editor.open(root / "blob.py", text=blob)
    diags = await editor.diagnostics(uri)
    assert [d.code for d in diags] == ["SHL000"]
    assert (await editor.hover(uri, types.Position(0, 0))).contents.value.startswith("# SHL000")
    assert await editor.hover(uri, types.Position(1, 2)) is None
    await alive(editor, uri)


@pytest.mark.slow
@pytest.mark.parametrize("editor", ["neovim"], indirect=True)  # the engine's work: one client is enough
async def test_a_20000_line_file(editor, project):
    lines = ["import jax", "import jax.numpy as jnp", ""]
    i = 0
    while len(lines) < 20_000:
        lines += [f"def layer_{i}(x, w):", f"    y = jnp.dot(x, w) + {i}", "    return jax.nn.relu(y)", ""]
        i += 1
    text = "\n".join(lines) + "\nout = jax.tree_map(abs, [1])\n"
    root = project({"big.py": text})
    uri = editor.open(root / "big.py")
    t0 = time.perf_counter()
    diags = await editor.diagnostics(uri, timeout=120)
    print(f"20,000 lines: diagnostics in {time.perf_counter() - t0:.1f} s")
    assert [d.range.start for d in diags if d.code == "SHL501"] == [position_of(text, "jax.tree_map")]
    await alive(editor, uri)


async def test_a_rule_or_a_handler_that_raises(fresh, project):
    root = project({"original.py": (SEED / "original.py").read_text(encoding="utf-8")})
    async with fresh("neovim", [sys.executable, str(HERE / "broken_server.py")]) as editor:
        await editor.start(root)
        uri = editor.open(root / "original.py")
        codes = {d.code for d in await editor.diagnostics(uri)}
        assert {"SHL102", "SHL103", "SHL501"} <= codes  # the other rules still report

        async def logged():
            while not any("rule SHL998 failed" in m.message for m in editor.client.log_messages):
                await asyncio.sleep(0.02)
        await asyncio.wait_for(logged(), TIMEOUT)

        with pytest.raises(JsonRpcException, match="this hover has a bug"):
            await editor.hover(uri, types.Position(0, 3))
        text = editor.texts[uri]
        hover = await editor.hover(uri, position_of(text, "tree_map(\n"))
        assert hover.contents.value.startswith("# SHL501")
        editor.replace(uri, "jax.tree_map(", "jax.tree.map(")
        assert "SHL501" not in {d.code for d in await editor.diagnostics(uri)}
        await alive(editor, uri)
