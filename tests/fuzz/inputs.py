"""Ways to break source text, shared by the fuzz targets."""

from __future__ import annotations

import random

# Pieces a user might type or paste anywhere (incomplete statements, brackets, encodings).
SNIPPETS = ["#", "x", "\n", "\n\n", "(", ")", "[", "]", "{", "}", "'", '"', '"""', "    ", "\t",
            ":", "\\\n", "; z = 2", "@dec\n", "def f(:", "class C:\n    pass\n", "else:\n",
            "from __future__ import annotations\n", "import jax\n", "with mesh:\n",
            "jax.jit(", "donate_argnums=(0,)", "nn.vmap(", "P('data', None)", "é", "😀",
            "\ufeff", "\x00", "\ud800", "\udcff", "\r", "\r\n", "\x0c", "\u2028", "= =", "f'{",
            "lambda: ", "*", "**", "->", "async ", "await ", "yield", "match x:\n    case 1:\n"]


def mutate(rng: random.Random, text: str) -> tuple[str, str]:
    """A random damaged version of ``text`` and a short description of the damage."""
    lines = text.split("\n")
    kind = rng.choice(("delete", "duplicate", "indent", "dedent", "swap", "insert", "noise",
                       "truncate", "endings", "bom"))
    i = rng.randrange(len(lines))
    if kind == "delete":
        n = rng.randint(1, 3)
        del lines[i:i + n]
        return "\n".join(lines), f"delete lines {i + 1}-{i + n}"
    if kind == "duplicate":
        lines.insert(i, lines[i])
        return "\n".join(lines), f"duplicate line {i + 1}"
    if kind == "indent":
        lines[i] = rng.choice(("    ", "\t", " ")) + lines[i]
        return "\n".join(lines), f"indent line {i + 1}"
    if kind == "dedent":
        lines[i] = lines[i][rng.randint(1, 4):]
        return "\n".join(lines), f"dedent line {i + 1}"
    if kind == "swap":
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        return "\n".join(lines), f"swap lines {i + 1} and {j + 1}"
    if kind == "insert":
        at = rng.randint(0, len(text))
        piece = rng.choice(SNIPPETS)
        return text[:at] + piece + text[at:], f"insert {piece!r} at {at}"
    if kind == "noise":
        chars = list(text)
        for _ in range(rng.randint(1, 8)):
            if chars:
                code = rng.choice((rng.randint(0, 0x7f), rng.randint(0x80, 0xffff),
                                   rng.randint(0x10000, 0x10ffff)))
                chars[rng.randrange(len(chars))] = chr(code)
        out = "".join(chars)
        return out, "character noise"
    if kind == "truncate":
        at = rng.randint(0, len(text))
        return text[:at], f"first {at} characters"
    if kind == "endings":
        style = rng.choice(("crlf", "cr", "mixed"))
        if style == "crlf":
            return text.replace("\n", "\r\n"), "CRLF endings"
        if style == "cr":
            return text.replace("\n", "\r"), "CR endings"
        return "".join(line + rng.choice(("\n", "\r\n", "\r")) for line in lines), "mixed endings"
    return "\ufeff" + text, "a BOM"


def byte_noise(rng: random.Random, text: str) -> bytes:
    """``text`` as UTF-8 with random bytes written over it (often not UTF-8 any more)."""
    data = bytearray(text.encode("utf-8", "surrogatepass"))
    for _ in range(rng.randint(1, 12)):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


DEPTH = 5000


def deep_inputs(depth: int = DEPTH) -> dict[str, str]:
    """Code nested ``depth`` deep in each way Python allows (and some it refuses)."""
    head = "import jax\nfrom jax.sharding import Mesh\n"
    return {
        "sum": head + "x = " + " + ".join(["jax"] * depth) + "\n",
        "unary": head + "x = " + "-" * depth + "jax\n",
        "not": head + "x = " + "not " * depth + "jax\n",
        "attribute": head + "x = jax" + ".a" * depth + "\n",
        "call": head + "x = jax.jit" + "()" * depth + "\n",
        "subscript": head + "x = jax" + "[0]" * depth + "\n",
        "parentheses": head + "x = " + "(" * depth + "jax" + ")" * depth + "\n",
        "lists": head + "x = " + "[" * depth + "jax" + "]" * depth + "\n",
        "blocks": head + "".join(" " * i + "if jax:\n" for i in range(depth)) + " " * depth
        + "pass\n",
        "and": head + "x = " + " and ".join(["jax"] * depth) + "\n",
        "compare": head + "x = " + " < ".join(["jax"] * depth) + "\n",
        "lambda": head + "x = " + "lambda: " * depth + "jax\n",
        "conditional": head + "x = " + "jax if jax else " * depth + "jax\n",
        "strings": head + "x = " + " ".join(['"a"'] * depth) + "\n",
        "mesh attribute": head + "mesh = Mesh(jax.devices(), ('d',))\nm = mesh" + ".a" * depth
        + "\nwith m:\n    pass\n",
        "jit of jit": head + "f = " + "jax.jit(" * 150 + "lambda x: x" + ")" * 150 + "\n",
        "comprehension": head + "x = [" + " ".join(f"for a{i} in jax" for i in range(depth))
        .replace("for", "a0 for", 1) + "]\n",
        "decorators": head + "".join("@jax.jit\n" for _ in range(depth))
        + "def f(x):\n    return x\n",
    }


def long_file(lines: int = 50_000) -> str:
    """A generated module of ``lines`` lines: a jitted function every two lines."""
    body = "".join(f"def f{i}(x):\n    return jax.jit(lambda y: y + {i})(x)\n"
                   for i in range((lines - 1) // 2))
    return "import jax\n" + body
