"""Blocking environment calls (a gymnasium or PettingZoo step) on an actor's event loop, without one hitching
environment holding the others.

An environment's calls run inline, on the loop's thread, while they are quick: that costs nothing. When the actor
sees one take longer than ``mdp.hitch`` seconds (a garbage-collector pause, an asset load, a simulator catching up)
it tells the seat (:meth:`~lamarckian.mdp.Controller.hitched`), and the environment's calls run on a thread of their
own from then on: the actor's other environments act and learn while it waits (the thread costs tens of microseconds
a call, paid by that environment only). The first hitch itself still holds the loop for its length.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import Any, Callable, TypeVar

LOG = logging.getLogger(__name__)
R = TypeVar("R")
_said = False                # the first environment that hitched in this process has been logged


class HitchGuard:
    """Runs one environment's blocking calls: inline, or on a thread of its own once :meth:`offload` was called.

    Args:
        name: the environment, for the log line.

    Attributes:
        thread: the environment's thread (None: its calls run inline; a caller may check this itself and call
            inline, saving the coroutine of :meth:`run` on the fast path).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.thread: concurrent.futures.ThreadPoolExecutor | None = None
        self.running: concurrent.futures.Future[Any] | None = None   # the newest call on the thread

    def offload(self, seconds: float) -> None:
        """A call took ``seconds`` (more than ``mdp.hitch``): the environment's later calls run on its thread."""
        global _said
        if self.thread is not None:
            return
        self.thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lamarckian-hitching-environment")
        if not _said:
            _said = True
            LOG.warning("%s: a step took %.2f s (over mdp.hitch): it steps on a thread of its own from now on, so the "
                        "actor's other environments act while it waits (later ones in this process are not logged)",
                        self.name, seconds)

    async def run(self, call: Callable[..., R], *args: Any) -> R:
        """``call(*args)``, inline or on the environment's thread."""
        if self.thread is None:
            return call(*args)
        self.settle()
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[R] = loop.create_future()    # a cancelled caller cancels this, not the call

        def hand_over(call_done: concurrent.futures.Future[R]) -> None:
            try:
                loop.call_soon_threadsafe(_copy_outcome, call_done, answer)
            except RuntimeError:                             # the loop closed meanwhile: nobody waits
                pass

        self.running = self.thread.submit(call, *args)
        self.running.add_done_callback(hand_over)
        return await answer

    def settle(self) -> None:
        """Wait for a call still running on the thread (its caller was cancelled: an evaluation's step cap), so the
        environment serves one call at a time."""
        running, self.running = self.running, None
        if running is not None:
            concurrent.futures.wait([running])

    def close(self) -> None:
        """Let a running call end and stop the thread."""
        if self.thread is not None:
            self.thread.shutdown(wait=True)
            self.thread = None


def _copy_outcome(done: concurrent.futures.Future[R], answer: asyncio.Future[R]) -> None:
    if answer.done():
        return
    error = done.exception()
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(done.result())
