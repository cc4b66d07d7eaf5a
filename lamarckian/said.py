"""Notes a process says once however often their cause recurs (one per environment built, one per model)."""

from __future__ import annotations

import logging

_SAID: set[str] = set()


def warn_once(logger: logging.Logger, message: str) -> None:
    """``logger.warning(message)`` the first time this process says ``message``."""
    if message not in _SAID:
        _SAID.add(message)
        logger.warning("%s", message)
