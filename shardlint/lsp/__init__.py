"""The language server: ``shardlint server`` (pygls 2, stdio).

Modules, each a thin layer over the engine:

- ``server``: handler registration and ``run_stdio``;
- ``session``: open documents, debounced analysis, push/pull diagnostics, cross-file refresh;
- ``analyzer``: the engines of the workspace's projects (runs on one worker thread only);
- ``documents``: text documents and notebooks, with LSP line and column semantics;
- ``convert``: findings to diagnostics, spans to ranges in the negotiated position encoding;
- ``actions``, ``hover``, ``settings``, ``protocol``.

Holds: the handlers above and the memory code lens (``memory_lens``, ``memory_run``).
May import: the engine and what it reads (``config``, ``cache``, ``incremental``), ``findings``,
``rules.base``, ``memory``, ``report.sarif`` (rule links) and the ground (``source``, ``errors``);
nothing imports the server.
"""
