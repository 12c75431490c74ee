"""What a user reads of a memory run: a finished ``RunReport`` as text, JSON or HTML.

Holds: ``render_text`` (the terminal table), ``render_json`` (``--format json``, the dict the
language server and scripts read) and ``render_html`` (the chart page). Each takes a report and
returns a string; none runs or measures anything.

May import: ``memory.report``, ``memory.reasons``, ``memory.whatif`` and ``memory.units``; not
the worker side, the CLI or anything above ``shardlint.memory``.
"""
