"""Errors a program reports to its user in one line with an exit code of its own (no traceback)."""


class NoProgress(RuntimeError):
    """The run cannot make progress (every episode lost, environments that do not return): the message says why, in
    one line; the programs end with exit code 1 after saving a checkpoint."""


class EnvironmentFailed(RuntimeError):
    """A user's environment raised while it was made: its own traceback stays (chained), and this error's one line
    closes it, naming the environment and the package it comes from (whose code failed, not the platform's)."""
