"""Starting actors that may die while they start (a node removed, a process killed, the OOM killer): the one that
died is swapped for a new one and the start tried again, a bounded number of times, so that a fault during a
replacement does not end the run that was replacing a fault; replacements of dead actors start beside the running
loop (:class:`Replacements`), which goes on with the actors it has while Ray finds room for them."""

from __future__ import annotations

import logging
import sys
import time
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


class Replacements:
    """Actors started in the place of dead ones and joined (``join(handle)``) once they serve, without blocking the
    caller, who calls :meth:`poll` now and then (its loop goes on with the actors it has meanwhile).

    A Ray actor that Ray cannot place yet (the cluster lost the host whose CPUs it needs) stays queued in Ray and
    joins when capacity returns, instead of being given up after ``rpc.start_timeout`` and started again in a loop;
    one that dies while starting is discarded and another started after a backoff (``backoff[0]`` seconds doubling
    to ``backoff[1]``), ``attempts`` deaths in a row at most: then :meth:`poll` raises its ActorDiedError. A child
    process or a local object serves at once: it is joined by the :meth:`poll` after :meth:`request`.

    Args:
        spawn: makes a new actor (a Ray handle, a ProcessActor or a local object).
        join: adds a serving actor to the caller's All / Any / Gather (its ``add``).
        discard: ends what is left of an actor that died while starting.
    """

    def __init__(self, spawn: Callable[[], Any], join: Callable[[Any], None], discard: Callable[[Any], None],
                 attempts: int = START_ATTEMPTS, backoff: tuple[float, float] = (1.0, 60.0)) -> None:
        self.spawn, self.join, self.discard = spawn, join, discard
        self.attempts, self.backoff = attempts, backoff
        self.starting: list[tuple[Any, Any, float]] = []   # (handle, Ray's readiness reference or None, since when)
        self.due: list[float] = []                          # when each requested actor is spawned (monotonic s)
        self.deaths = 0                                     # replacements in a row that died while starting

    def __len__(self) -> int:
        """Replacements requested and not joined yet."""
        return len(self.starting) + len(self.due)

    def request(self) -> None:
        """One more actor, spawned at the next :meth:`poll`."""
        self.due.append(time.monotonic())

    def waited(self) -> float:
        """Seconds the longest-waiting replacement has waited (0: none waits)."""
        now = time.monotonic()
        return max((now - since for _, _, since in self.starting), default=0.0)

    def poll(self) -> list[Any]:
        """Spawn the replacements that are due and join those that serve; the handles joined now."""
        now = time.monotonic()
        for at in [at for at in self.due if at <= now]:
            self.due.remove(at)
            handle = self.spawn()
            self.starting.append((handle, _readiness(handle), now))
        joined = []
        for entry in [entry for entry in self.starting if _ready(entry[1])]:
            self.starting.remove(entry)
            try:
                self.join(entry[0])
            except ActorDiedError as error:
                self.discard(entry[0])
                self.deaths += 1
                if self.deaths >= self.attempts:
                    raise
                delay = min(self.backoff[1], self.backoff[0] * 2 ** (self.deaths - 1))
                log.warning("a replacement actor died while starting (%s); starting another in %.0f s (%d of %d)",
                            error, delay, self.deaths, self.attempts)
                self.due.append(now + delay)
                continue
            self.deaths = 0
            joined.append(entry[0])
        return joined

    def close(self) -> None:
        """Give up the replacements not joined yet (ending those spawned)."""
        for handle, _, _ in self.starting:
            self.discard(handle)
        self.starting, self.due = [], []


def _readiness(handle: Any) -> Any:
    """A Ray actor's readiness reference (resolved once Ray has placed and built it); None for other actors."""
    ray = sys.modules.get("ray")
    if ray is not None and isinstance(handle, ray.actor.ActorHandle):
        return handle.__ray_ready__.remote()
    return None


def _ready(reference: Any) -> bool:
    """Whether the actor of a readiness reference is built (or died: its join then says so); True for None."""
    if reference is None:
        return True
    import ray

    done, _ = ray.wait([reference], timeout=0)
    return bool(done)
