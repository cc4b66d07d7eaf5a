"""Batched inference for asyncio players: every waiting player's observation goes into ONE forward per policy."""

from __future__ import annotations

import asyncio
from typing import Hashable

import numpy as np
import torch

from ..model import ActorCritic

IDLE_YIELDS = 3  # loop turns without a new request before a partial batch is served


class Policy:
    """A model used for acting: stochastic (drawing from ``generator``) or deterministic (evaluation)."""

    def __init__(self, model: ActorCritic, deterministic: bool = False, generator: torch.Generator | None = None
                 ) -> None:
        self.model, self.deterministic, self.generator = model, deterministic, generator


class BatchedInference:
    """Collects ``act`` requests and answers them with one forward pass per policy.

    Players ``register`` while they play. A batch is served as soon as every registered player waits;
    otherwise (some player is blocked on something else) after the event loop has been idle for a few turns,
    so a batch is never held back for long and no arrangement of waits can deadlock.
    """

    def __init__(self) -> None:
        self.pending: dict[Hashable, tuple[Policy, list[np.ndarray], list[asyncio.Future]]] = {}
        self.players = 0
        self.waiting = 0
        self.forwards = 0
        self.requests = 0
        self._watchdog: asyncio.Task | None = None
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

    async def act(self, key: Hashable, policy: Policy, observation: np.ndarray
                  ) -> tuple[np.ndarray, float, float]:
        """(action, log-probability, value) for one observation (as converted by the model's batcher)."""
        future = asyncio.get_running_loop().create_future()
        entry = self.pending.get(key)
        if entry is None:
            entry = self.pending[key] = (policy, [], [])
        entry[1].append(observation)
        entry[2].append(future)
        self.waiting += 1
        if self.waiting >= self.players:
            self._schedule_flush()
        elif self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())
        return await future

    async def _watch(self) -> None:
        try:
            seen, idle = -1, 0
            while self.waiting:
                await asyncio.sleep(0)
                if self.waiting != seen:
                    seen, idle = self.waiting, 0
                    continue
                idle += 1
                if idle >= IDLE_YIELDS:
                    self.flush()
        finally:
            self._watchdog = None

    def flush(self) -> None:
        """Serve every waiting request now (one forward per policy)."""
        self._flush_scheduled = False
        pending, self.pending, self.waiting = self.pending, {}, 0
        for policy, observations, futures in pending.values():
            batch = torch.from_numpy(np.stack(observations))
            actions, log_probs, values = policy.model.act(batch, policy.deterministic, policy.generator)
            actions, log_probs, values = actions.numpy(), log_probs.numpy(), values.numpy()
            self.forwards += 1
            self.requests += len(futures)
            for index, future in enumerate(futures):
                if not future.done():
                    future.set_result((actions[index], float(log_probs[index]), float(values[index])))
