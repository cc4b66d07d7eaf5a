"""Controller wrappers: frame skip, an idle-action bonus, episode statistics (return, length, idle fraction) and the
global state beside the observation for a central critic."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from .base import MDP, Controller


class ControllerWrapper(Controller):
    """Forwards everything to the wrapped controller."""

    def __init__(self, controller: Controller) -> None:
        self.controller = controller

    def get_state(self) -> Any:
        return self.controller.get_state()

    async def __call__(self, action: Any) -> None:
        await self.controller(action)

    async def ready(self) -> bool:
        return await self.controller.ready()

    def get_reward(self) -> float:
        return self.controller.get_reward()

    @property
    def done(self) -> bool:
        return self.controller.done

    @property
    def truncated(self) -> bool:
        return self.controller.truncated

    def get_result(self) -> dict[str, Any]:
        return self.controller.get_result()

    def hitched(self, seconds: float) -> None:
        self.controller.hitched(seconds)

    def location(self) -> str:
        return self.controller.location()


class CentralState(ControllerWrapper):
    """The seat's observation with the game's global state beside it, ``{"observation": ..., "state": ...}``
    (``model.central_value``: the critic sees both, the policy the observation only)."""

    def __init__(self, controller: Controller, mdp: MDP) -> None:
        super().__init__(controller)
        self.mdp = mdp

    def get_state(self) -> dict[str, Any]:
        return {"observation": self.controller.get_state(), "state": self.mdp.global_state()}


def central_observation_space(mdp: MDP, seat: int = 0) -> gymnasium.spaces.Dict:
    """The space of :class:`CentralState`'s observations for ``seat``; ValueError where ``mdp`` has no global
    state."""
    state = mdp.global_state_space()
    if state is None:
        raise ValueError(f"model.central_value: {type(mdp).__name__} has no global state (MDP.global_state_space); "
                         "simultaneous-move games and PettingZoo parallel games have one")
    return gymnasium.spaces.Dict({"observation": mdp.describe()[seat].observation, "state": state})


class FrameSkip(ControllerWrapper):
    """Repeat each action ``skip`` times (fewer if the episode ends); the reward is the sum.

    In a simultaneous game every player's controller must be wrapped with the same ``skip``.
    """

    def __init__(self, controller: Controller, skip: int) -> None:
        if skip < 1:
            raise ValueError(f"mdp.frame_skip must be at least 1, got {skip}")
        super().__init__(controller)
        self.skip = skip
        self.reward = 0.0

    async def __call__(self, action: Any) -> None:
        self.reward = 0.0
        for _ in range(self.skip):
            await self.controller(action)
            self.reward += self.controller.get_reward()
            if self.controller.done:
                break

    def get_reward(self) -> float:
        return self.reward


class IdleBonus(ControllerWrapper):
    """Adds ``bonus`` to the reward of each decision that was the idle action (behaviour shaping: NSGA-II over
    ``mdp.idle_reward`` finds agents from busy to lazy). Fitness, from the game's result, is unchanged."""

    def __init__(self, controller: Controller, idle_action: int, bonus: float) -> None:
        super().__init__(controller)
        self.idle_action, self.bonus, self.idle = idle_action, bonus, False

    async def __call__(self, action: Any) -> None:
        self.idle = isinstance(action, (int, np.integer)) and action == self.idle_action
        await self.controller(action)

    def get_reward(self) -> float:
        return self.controller.get_reward() + (self.bonus if self.idle else 0.0)


class Statistics(ControllerWrapper):
    """Adds ``return`` (sum of rewards), ``length`` (decisions) and ``lazy`` (fraction of idle actions) to the
    result's objectives. ``idle_action`` is the no-op of a discrete action space (None: never idle)."""

    def __init__(self, controller: Controller, idle_action: int | None = 0) -> None:
        super().__init__(controller)
        self.idle_action = idle_action
        self.total = 0.0
        self.length = 0
        self.idle = 0

    async def __call__(self, action: Any) -> None:
        await self.controller(action)
        self.length += 1
        self.total += self.controller.get_reward()
        if self.idle_action is not None and isinstance(action, (int, np.integer)) and action == self.idle_action:
            self.idle += 1

    def get_result(self) -> dict[str, Any]:
        result = dict(self.controller.get_result())
        objectives = dict(result.get("objectives") or {})
        objectives.update({"return": self.total, "length": float(self.length),
                           "lazy": self.idle / max(1, self.length)})
        result["objectives"] = objectives
        return result
