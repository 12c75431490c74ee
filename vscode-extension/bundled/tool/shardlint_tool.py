"""shardlint as bundled in the VS Code extension: ``python -I shardlint_tool.py server``.

The extension runs this when neither ``shardlint.path`` nor an interpreter that has shardlint is
available, and always in an untrusted folder. ``bundled/libs`` goes first on ``sys.path``, so the
bundled shardlint and pygls win over any other version installed in that Python.
"""

import os
import sys

if sys.version_info < (3, 10):  # noqa: UP036  (this file runs under whatever python3 is on PATH)
    sys.stderr.write(
        "shardlint: the bundled server needs Python >= 3.10, not "
        f"{sys.version.split()[0]} ({sys.executable})\n"
    )
    sys.exit(3)

sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "libs")
)

from shardlint.cli import main  # after the path is set

sys.exit(main(sys.argv[1:]))
