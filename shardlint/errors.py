"""Errors that reach the user as a clear message and exit code 2, never a traceback."""

from __future__ import annotations


class ShardlintError(Exception):
    """Base class: the message is shown to the user as is."""

    exit_code = 2


class ConfigError(ShardlintError):
    """A bad `[tool.shardlint]` table: unknown key or bad value (the message names the key)."""


class UsageError(ShardlintError):
    """Bad command-line input: a path that does not exist, an unknown rule code."""
