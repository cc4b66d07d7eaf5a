"""Errors a program reports to its user in one line with an exit code of its own (no traceback)."""


class NoProgress(RuntimeError):
    """The run cannot make progress (every episode lost, environments that do not return): the message says why, in
    one line; the programs end with exit code 1 after saving a checkpoint."""
