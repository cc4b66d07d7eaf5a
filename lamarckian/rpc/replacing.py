"""Starting actors that may die while they start (a node removed, a process killed, the OOM killer): the one that
died is swapped for a new one and the start tried again, a bounded number of times, so that a fault during a
replacement does not end the run that was replacing a fault."""

from __future__ import annotations

import logging
from typing import Any, Callable, TypeVar

from .errors import ActorDiedError

log = logging.getLogger(__name__)
C = TypeVar("C")

START_ATTEMPTS = 5     # actors tried for one place before the error is raised


def connect_replacing(handles: list[Any], connect: Callable[[list[Any]], C], spawn: Callable[[], Any],
                      discard: Callable[[Any], None], attempts: int = START_ATTEMPTS) -> C:
    """``connect(handles)`` (an All / Any / Gather of new actors); an actor that dies before it serves is
    ``discard``-ed and replaced in ``handles`` by ``spawn()``, and the connection tried again, ``attempts`` times
    in all; then the last :class:`ActorDiedError` is raised."""
    for attempt in range(1, attempts + 1):
        try:
            return connect(handles)
        except ActorDiedError as error:
            if error.index is None or attempt == attempts:
                raise
            log.warning("an actor died while starting (%s); starting another (%d of %d)", error, attempt, attempts)
            discard(handles[error.index])
            handles[error.index] = spawn()
    raise AssertionError("unreachable")


def join_new(spawn: Callable[[], Any], join: Callable[[Any], None], discard: Callable[[Any], None],
             attempts: int = START_ATTEMPTS) -> Any:
    """A new actor from ``spawn()`` added with ``join(handle)`` (a caller's ``add``); one that dies before it
    serves is ``discard``-ed and another spawned, ``attempts`` in all. The actor that joined."""
    for attempt in range(1, attempts + 1):
        handle = spawn()
        try:
            join(handle)
            return handle
        except ActorDiedError as error:
            discard(handle)
            if attempt == attempts:
                raise
            log.warning("a replacement actor died while starting (%s); starting another (%d of %d)", error,
                        attempt, attempts)
    raise AssertionError("unreachable")
