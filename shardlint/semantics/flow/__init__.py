"""What crosses files: one summary per module, the project index joining them, value flow.

Holds: ``summary`` (what a module exports to the others), ``project`` (the
``ProjectIndex``: symbols, contexts, programs), ``valueflow`` (what flows through calls across
modules), ``compiled`` (the function a jit site compiles, across modules) and ``models`` (which
values are Flax models, through the project's classes). May import: ``semantics.catalog`` and
``semantics.file``.
"""
