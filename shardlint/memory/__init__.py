"""The memory check: per-device memory of a jitted step, measured in a worker subprocess.

Public API (nothing here imports jax; only the worker does, in the user's interpreter):

- `shardlint.memory.cli.add_arguments(parser)` / `run(args) -> int`: `shardlint memory [PROBE...]`
- `shardlint.memory.findings.measured_findings(...) -> list[dict]`: SHL900-SHL905 findings for
  `shardlint check --memory`
- `shardlint.memory.settings.MemorySettings.from_table(table)`: the `[tool.shardlint.memory]` table
- `shardlint.memory.probes.discover(root)` / `probes_in_file(path)`: probes found with `ast` only
- `shardlint.memory.runner.run_probes(...)`: the worker protocol, for the language server

Layout: probes (find) -> runner + worker.process (spawn, limit, kill) -> the ``worker`` package
(inside the subprocess: worker, step_facts, device_peak, remedies) -> report (figures, scaling,
fit) -> reasons and whatif (why, and what would help) -> findings -> the ``render`` package (text,
JSON, HTML). ``cli`` drives them for ``shardlint memory``.

Holds: the parent side of the check, the modules above; ``worker`` and ``render`` below.
May import: ``shardlint.errors``, ``shardlint.fsio``, and, where a report is explained with the
linter's own findings, ``shardlint.engine``, ``shardlint.config`` and ``shardlint.cache``; never
the rules, the CLI of the linter or the language server.
"""
