"""Environments for the off-policy learner's tests: a walk whose environment breaks now and then (NaN rewards), a
slow walk (actors slower than the learner)."""

from __future__ import annotations

import asyncio

from lamarckian.mdp.base import Episode

from ...plugins.tasks import Walk, WalkController


class BrokenWalkController(WalkController):
    """The walk of :class:`Walk`, but its reward is NaN at the first step of every ``every``-th episode."""

    def __init__(self, goal: int, limit: int, broken: bool) -> None:
        super().__init__(goal, limit)
        self.broken = broken

    def get_reward(self) -> float:
        return float("nan") if self.broken and self.steps == 1 else self.reward


class BrokenWalk(Walk):
    """``mdp.kwargs``: ``goal``, ``limit``, ``every`` (one episode in ``every`` has a NaN reward)."""

    def __init__(self, goal: int = 4, limit: int = 10, every: int = 3, seed: int | None = None) -> None:
        super().__init__(goal, limit, seed)
        self.every, self.episodes = every, 0

    def reset(self, *players: int) -> Episode:
        self.episodes += 1
        return Episode([BrokenWalkController(self.goal, self.limit, self.episodes % self.every == 0)], [])


class SlowWalkController(WalkController):
    """The walk of :class:`Walk`, each step taking ``delay`` seconds (awaited: a game that makes its players wait)."""

    def __init__(self, goal: int, limit: int, delay: float) -> None:
        super().__init__(goal, limit)
        self.delay = delay

    async def __call__(self, action) -> None:
        await asyncio.sleep(self.delay)
        await super().__call__(action)


class SlowWalk(Walk):
    """``mdp.kwargs``: ``goal``, ``limit``, ``delay`` (seconds an env step takes)."""

    def __init__(self, goal: int = 4, limit: int = 10, delay: float = 0.005, seed: int | None = None) -> None:
        super().__init__(goal, limit, seed)
        self.delay = delay

    def reset(self, *players: int) -> Episode:
        return Episode([SlowWalkController(self.goal, self.limit, self.delay)], [])
