"""What crosses files: one summary per module, the project index joining them, value flow.

Holds: ``summary`` (what a module exports to the others), ``project`` (the
``ProjectIndex``: symbols, contexts, programs), ``valueflow`` (what flows through calls across
modules), ``compiled`` (the function a jit site compiles, across modules), ``models`` (which
values are Flax models, through the project's classes) and ``liveness`` (reads of a value after
a call: what a caller keeps, which a module's summary records for the functions it calls).
May import: ``semantics.catalog`` and ``semantics.file``.
"""
