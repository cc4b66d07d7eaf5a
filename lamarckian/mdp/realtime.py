"""Real-time environments with elastic time steps (after rtgym): the world does not wait for the policy.

Wall-clock time is cut into periods of ``mdp.realtime.period`` seconds. The action the policy chose from the
observation captured at the end of period ``k`` takes effect at the start of period ``k + 1`` and holds for the
whole period; meanwhile the policy computes the next action from the observation captured at the end of period
``k + 1``. So every action acts one step late, and the observation carries the action in flight (the one whose
effect it does not show yet) to keep the process Markov.

A policy that answers after its period has ended is *late*: the step counts as a timeout, the period is stretched to
the moment the action arrived (elastic), and the episode goes on. Timeouts are each episode's ``timeouts``
objective (training and evaluation means, TensorBoard) and a warning in the log.

A simulated environment (Pendulum-v1) advances one environment step at the end of each period, with the action
that held during it, which is what a real system sampled at that rate would have done.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import Any

import gymnasium
import numpy as np

from .base import MDP, Controller, Episode, PlayerSpec
from .wrap import ControllerWrapper

log = logging.getLogger(__name__)
WARN_EVERY = 10.0      # seconds between timeout warnings of one process
SPIN = 0.0015          # seconds before a deadline when waiting turns from sleeping to yielding
KEPT_PERIODS = 100_000  # achieved periods an MDP remembers (bench/realtime.py reads them)


async def until(deadline: float) -> None:
    """Return at ``time.monotonic()`` ≈ ``deadline``: asyncio's timers wake up to 1 ms late (epoll counts in ms), so
    the last :data:`SPIN` seconds are spent yielding to the other tasks instead of sleeping."""
    left = deadline - time.monotonic()
    if left > SPIN:
        await asyncio.sleep(left - SPIN)
    while time.monotonic() < deadline:
        await asyncio.sleep(0)


def augmented_space(observation: gymnasium.Space, action: gymnasium.Space) -> gymnasium.spaces.Box:
    """The observation space with the action in flight appended: a 1-D Box observation followed by a Box action
    (flattened) or a Discrete one (one-hot). ValueError for other spaces."""
    if not isinstance(observation, gymnasium.spaces.Box) or len(observation.shape) != 1:
        raise ValueError(f"mdp.realtime appends the action in flight to a 1-D Box observation; this one is "
                         f"{observation}")
    if isinstance(action, gymnasium.spaces.Box):
        low, high = action.low.reshape(-1), action.high.reshape(-1)
    elif isinstance(action, gymnasium.spaces.Discrete):
        low, high = np.zeros(int(action.n)), np.ones(int(action.n))
    else:
        raise ValueError(f"mdp.realtime takes Box or Discrete actions; this MDP's are {action}")
    return gymnasium.spaces.Box(np.concatenate([observation.low, low]).astype(np.float32),
                                np.concatenate([observation.high, high]).astype(np.float32), dtype=np.float32)


class RealTimeController(ControllerWrapper):
    """One player's episode in real time (see the module's docstring).

    Args:
        periods: where the achieved periods (seconds between observation captures) are appended.

    Attributes:
        timeouts: steps whose action arrived after its period had ended.
    """

    warned_at = -WARN_EVERY

    def __init__(self, controller: Controller, period: float, action_space: gymnasium.Space,
                 periods: collections.deque) -> None:
        super().__init__(controller)
        self.period = period
        self.discrete = isinstance(action_space, gymnasium.spaces.Discrete)
        self.idle: Any = 0
        if isinstance(action_space, gymnasium.spaces.Discrete):
            self.width = int(action_space.n)
        else:
            self.idle = np.zeros(action_space.shape or (), np.float32)
            self.width = int(np.prod(action_space.shape or ()))
        self.active: Any = self.idle           # the action holding during the current period
        self.timeouts = 0
        self.steps = 0
        self.periods = periods
        self.captured = time.monotonic()       # the reset's observation is the first capture
        self.deadline = self.captured + period

    def _encoded(self, action: Any) -> np.ndarray:
        if self.discrete:
            return np.eye(self.width, dtype=np.float32)[int(action)]
        return np.asarray(action, np.float32).reshape(-1)

    def get_state(self) -> np.ndarray:
        """The latest captured observation followed by the action in flight."""
        observation = np.asarray(self.controller.get_state(), np.float32).reshape(-1)
        return np.concatenate([observation, self._encoded(self.active)])

    async def __call__(self, action: Any) -> None:
        """Wait for the end of the current period, capture the observation it ends with, then let ``action`` act
        during the next period. Late (the period is over): counted as a timeout, the period is stretched to now."""
        now = time.monotonic()
        if now > self.deadline:
            self.timeouts += 1
            self.deadline = now
        else:
            await until(self.deadline)
        await self.controller(self.active)
        now = time.monotonic()
        self.periods.append(now - self.captured)
        self.captured = now
        self.active = action if self.discrete else np.asarray(action, np.float32)
        self.steps += 1
        self.deadline += self.period
        if self.controller.done and self.timeouts:
            self._warn()

    def _warn(self) -> None:
        now = time.monotonic()
        if now - RealTimeController.warned_at >= WARN_EVERY:
            RealTimeController.warned_at = now
            log.warning("real time: the policy missed %d of %d periods of %.0f ms in an episode (it is too slow for "
                        "mdp.realtime.period; each late step was stretched)", self.timeouts, self.steps,
                        self.period * 1000)

    def get_result(self) -> dict[str, Any]:
        result = dict(self.controller.get_result())
        result["objectives"] = {**result.get("objectives", {}), "timeouts": float(self.timeouts)}
        return result


class RealTimeMDP(MDP):
    """A single-player MDP stepped in real time, ``period`` seconds per step.

    Args:
        mdp: the environment (one player, a 1-D Box observation, Box or Discrete actions).
        period: seconds per step of wall-clock time (> 0).

    Attributes:
        periods: the latest achieved periods in seconds, of all its episodes (their jitter: bench/realtime.py).
    """

    def __init__(self, mdp: MDP, period: float) -> None:
        if not period > 0:
            raise ValueError(f"mdp.realtime.period={period}: expected seconds > 0 (or null: off)")
        specs = mdp.describe()
        if len(specs) != 1:
            raise ValueError(f"mdp.realtime wraps single-player MDPs; this one has {len(specs)} players")
        self.mdp, self.period = mdp, float(period)
        self.periods: collections.deque[float] = collections.deque(maxlen=KEPT_PERIODS)
        self.action_space = specs[0].action
        self.spec = PlayerSpec(augmented_space(specs[0].observation, specs[0].action), specs[0].action)

    def describe(self) -> list[PlayerSpec]:
        return [self.spec]

    def reset(self, *players: int, seed: int | None = None) -> Episode:
        episode = self.mdp.reset(*players, seed=seed)
        return Episode([RealTimeController(c, self.period, self.action_space, self.periods)
                        for c in episode.controllers],
                       episode.ticks)

    def render(self) -> np.ndarray:
        return self.mdp.render()

    def close(self) -> None:
        self.mdp.close()
