"""The memory check: per-device memory of a jitted step, measured in a worker subprocess.

Public API (nothing here imports jax; only the worker does, in the user's interpreter):

- `shardlint.memory.cli.add_arguments(parser)` / `run(args) -> int`: `shardlint memory [PROBE...]`
- `shardlint.memory.findings.measured_findings(...) -> list[dict]`: SHL900-SHL905 findings for
  `shardlint check --memory`
- `shardlint.memory.settings.MemorySettings.from_table(table)`: the `[tool.shardlint.memory]` table
- `shardlint.memory.probes.discover(root)` / `probes_in_file(path)`: probes found with `ast` only
- `shardlint.memory.runner.run_probes(...)`: the worker protocol, for the language server

Layout: probes (find) -> runner + process (spawn, limit, kill) -> worker + step_facts + device_peak
(inside the subprocess) -> report (figures, scaling, fit) -> findings -> render_text/json/html.
"""
