"""What runs inside the worker subprocess, in the user's interpreter (the one that has jax).

Holds: ``worker`` (the script the parent starts by path: imports the probe, traces, compiles,
appends events), the sibling modules it loads by path (``step_facts``: the figures of one
lowered step; ``device_peak``: a device's peak bytes on a GPU; ``remedies``: the what-if
variants) and ``process`` (the worker's environment, memory and stopping, also used by the parent
side in ``memory.runner``). ``WORKER`` is the path of the script.

May import: the standard library, and jax inside the worker; nothing of ``shardlint``, because
the worker runs where shardlint need not be installed.
"""

from pathlib import Path

WORKER = Path(__file__).with_name("worker.py")
