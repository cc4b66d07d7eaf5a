"""Environments of which one straggles: it waits until the learner beside it has made a number of updates (counted by
the test in :data:`UPDATES`), so a test sees whether learning goes on while one episode or environment is held,
without sizing a sleep for the machine. A wait gives up after :data:`GIVE_UP` seconds (the learning it waited for
never came) and says so in :data:`SEEN`.

- :class:`WaitingEpisodes` (``mdp.create: tests.rl.fleet.straggling:WaitingEpisodes``): CartPole whose first episode
  to reach step 20 awaits the updates (an asyncio wait, as a late answer of a game server is).
- ``LamarckianHitching-v0`` (``mdp.gym.id``): CartPole whose first instance to reach step 20 blocks in ``step`` for
  0.3 s (a hitch: more than the tests' ``mdp.hitch``), and at step 40 blocks until the updates came.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import gymnasium

from lamarckian.mdp.gym import GymController, GymMDP, GymSettings

GIVE_UP = 60.0             # seconds a straggler waits for the learner's updates before it gives up
AHEAD = 3                  # updates the learner must make while one waits
UPDATES = [0]              # the learner's updates so far (the test adds them)
CHANGED = threading.Condition()
SEEN: dict[str, Any] = {}  # "began", "ended": the updates when the wait began and ended; "gave_up": True if it did
_claimed = threading.Lock()
_straggler: list[int] = []


def reset() -> None:
    """Before a test: no straggler chosen, no update counted."""
    UPDATES[0] = 0
    SEEN.clear()
    _straggler.clear()


def updated() -> None:
    """The test made one more update."""
    with CHANGED:
        UPDATES[0] += 1
        CHANGED.notify_all()


def claim(owner: int) -> bool:
    """Whether ``owner`` is the one straggler (the first to ask)."""
    with _claimed:
        if not _straggler:
            _straggler.append(owner)
        return _straggler[0] == owner


def wait_blocking() -> None:
    """Block this thread until the learner made :data:`AHEAD` more updates (or :data:`GIVE_UP` passed)."""
    deadline = time.monotonic() + GIVE_UP
    with CHANGED:
        SEEN["began"] = UPDATES[0]
        while UPDATES[0] < SEEN["began"] + AHEAD and time.monotonic() < deadline:
            CHANGED.wait(deadline - time.monotonic())
        SEEN["ended"], SEEN["gave_up"] = UPDATES[0], UPDATES[0] < SEEN["began"] + AHEAD


class WaitingController(GymController):
    """CartPole's seat whose 20th step, in the one episode that claims it, waits for the learner's updates."""

    def __init__(self, *arguments: Any) -> None:
        super().__init__(*arguments)
        self.steps = 0

    async def __call__(self, action: Any) -> None:
        self.steps += 1
        if self.steps == 20 and claim(id(self.env)):
            SEEN["began"] = began = UPDATES[0]
            deadline = time.monotonic() + GIVE_UP
            while UPDATES[0] < began + AHEAD and time.monotonic() < deadline:
                await asyncio.sleep(0.01)                 # an answer that has not come (the loop serves the rest)
            SEEN["ended"], SEEN["gave_up"] = UPDATES[0], UPDATES[0] < began + AHEAD
        await super().__call__(action)


class WaitingEpisodes(GymMDP):
    """CartPole-v1 of which one episode waits (see the module's docstring)."""

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(GymSettings.defaults(id="CartPole-v1"), seed=seed)

    @classmethod
    def from_mdp(cls, mdp: Any, seed: int | None = None) -> "WaitingEpisodes":
        return cls(seed=seed)

    def reset(self, *players: int, seed: int | None = None) -> Any:
        episode = super().reset(*players, seed=seed)
        first = episode.controllers[0]
        assert isinstance(first, GymController)
        episode.controllers[0] = WaitingController(first.env, first.observation, first.guard)
        return episode


class Hitching(gymnasium.Wrapper):
    """CartPole-v1 of which one instance hitches (see the module's docstring)."""

    def __init__(self) -> None:
        super().__init__(gymnasium.make("CartPole-v1"))
        self.steps = 0

    def step(self, action: Any) -> Any:
        self.steps += 1
        if self.steps in (20, 40) and claim(id(self)):
            if self.steps == 20:
                time.sleep(0.3)                     # the first hitch: the environment moves to a thread of its own
            else:
                wait_blocking()
        return self.env.step(action)


gymnasium.register("LamarckianHitching-v0", entry_point=Hitching)
