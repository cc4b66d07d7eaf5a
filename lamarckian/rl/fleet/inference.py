"""Batched inference for asyncio players: every waiting player's observation goes into ONE forward per policy."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from ..acting import Answer, BatchPolicy

IDLE_YIELDS = 3  # loop turns without a new request before a partial batch is served


class BatchedInference:
    """Collects ``act`` requests and answers them with one forward pass per acting policy.

    Players ``register`` while they play. A batch is served as soon as every registered player waits;
    otherwise (some player is blocked on something else) after the event loop has been idle for a few turns,
    so a batch is never held back for long and no arrangement of waits can deadlock. With ``max_wait`` (seconds),
    also once the oldest request has waited that long while new ones keep arriving (answers that stream in from a
    network would otherwise gather into one wave that the actor and the environment process in turn).
    """

    def __init__(self, max_wait: float | None = None) -> None:
        self.max_wait = max_wait
        self.since = 0.0          # when the oldest waiting request came
        self.pending: dict[int, tuple[BatchPolicy, list[tuple[np.ndarray, int]], list[asyncio.Future[Any]]]] = {}
        self.players = 0
        self.waiting = 0
        self.forwards = 0
        self.requests = 0
        self._watchdog: asyncio.Task[None] | None = None
        self._flush_scheduled = False

    def register(self) -> None:
        self.players += 1

    def unregister(self) -> None:
        self.players -= 1
        if self.waiting and self.waiting >= self.players:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        # served after the tasks already scheduled in this loop turn, so they can join the batch
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)

    async def act(self, policy: BatchPolicy, observation: np.ndarray, tag: int = 0) -> Answer:
        """(action, log-probability, value) for one observation (as converted by the model's batcher); requests
        to the same policy object share its next forward."""
        future = asyncio.get_running_loop().create_future()
        entry = self.pending.get(id(policy))
        if entry is None:
            entry = self.pending[id(policy)] = (policy, [], [])
        entry[1].append((observation, tag))
        entry[2].append(future)
        if not self.waiting:
            self.since = asyncio.get_running_loop().time()
        self.waiting += 1
        if self.waiting >= self.players:
            self._schedule_flush()
        elif self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())
        return await future

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            seen, idle = -1, 0
            while self.waiting:
                await asyncio.sleep(0)
                if self.max_wait is not None and loop.time() - self.since >= self.max_wait:
                    self.flush()
                    continue
                if self.waiting != seen:
                    seen, idle = self.waiting, 0
                    continue
                idle += 1
                if idle >= IDLE_YIELDS:
                    self.flush()
        finally:
            self._watchdog = None

    def flush(self) -> None:
        """Serve every waiting request now (one forward per acting policy)."""
        self._flush_scheduled = False
        pending, self.pending, self.waiting = self.pending, {}, 0
        for policy, items, futures in pending.values():
            try:
                answers = policy.serve(items)
            except Exception as error:  # noqa: BLE001 - handed to every waiting player, never lost in a callback
                for future in futures:
                    if not future.done():
                        future.set_exception(error)
                continue
            self.forwards += 1
            self.requests += len(futures)
            for future, answer in zip(futures, answers):
                if not future.done():
                    future.set_result(answer)
