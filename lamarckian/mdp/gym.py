"""gymnasium environments (discrete, box and dict spaces) as one-player MDPs."""

from __future__ import annotations

from typing import Any, Mapping

import gymnasium
import numpy as np

from ..extras import EXTRA_OF_GYM_FAMILY, install_hint
from .base import MDP, Controller, Episode, PlayerSpec
from .hitch import HitchGuard

ATARI_NAMESPACE = "ALE/"


class ObservationSubset(gymnasium.ObservationWrapper):
    """Only the entries ``indices`` of a 1-D Box observation (a partially observed task: CartPole without its
    velocities is ``[0, 2]``)."""

    def __init__(self, env: gymnasium.Env, indices: list[int]) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gymnasium.spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"mdp.gym.observe picks entries of a 1-D Box observation; this one is {space}")
        if not indices or any(not isinstance(i, int) or not 0 <= i < space.shape[0] for i in indices):
            raise ValueError(f"mdp.gym.observe={indices}: expected indices in [0, {space.shape[0]})")
        self.indices = np.asarray(indices)
        self.observation_space = gymnasium.spaces.Box(space.low[self.indices], space.high[self.indices],
                                                      dtype=space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[self.indices]


def make_env(env_id: str, kwargs: dict[str, Any], preprocess: str | None = None, frame_stack: int = 1,
             observe: list[int] | None = None, atari: Mapping[str, Any] | None = None) -> gymnasium.Env:
    """A gymnasium environment; ``preprocess: atari`` applies the standard Atari preprocessing of ``atari``
    (``mdp.gym.atari``: :mod:`.atari`) and stacks ``frame_stack`` frames. ale-py ships the ROMs. ``observe``: only
    these entries of a vector observation (None: all)."""
    if env_id.startswith(ATARI_NAMESPACE) or preprocess == "atari":
        import ale_py

        gymnasium.register_envs(ale_py)
    try:
        env = gymnasium.make(env_id, **kwargs)
    except gymnasium.error.DependencyNotInstalled as error:
        family = str(gymnasium.spec(env_id).entry_point).split(":")[0].split(".")[-2]
        raise ValueError(f"mdp.gym.id={env_id!r} needs packages that are not installed ({error}): "
                         f"{install_hint(EXTRA_OF_GYM_FAMILY.get(family), family)}") from None
    except gymnasium.error.Error as error:
        raise ValueError(f"mdp.gym.id={env_id!r}: {error}") from None
    if preprocess == "atari":
        from .atari import atari_settings, atari_wrappers

        env = atari_wrappers(env, atari_settings(atari), skip_in_env=kwargs.get("frameskip") != 1)
    elif preprocess is not None:
        raise ValueError(f"mdp.gym.preprocess={preprocess!r}: expected null or 'atari'")
    if observe is not None:
        env = ObservationSubset(env, list(observe))
    if frame_stack > 1:
        env = gymnasium.wrappers.FrameStackObservation(env, frame_stack)
    return env


class GymController(Controller):
    """The single player of a :class:`GymMDP` episode; each call steps the environment (on ``guard``'s thread once
    it hitched)."""

    def __init__(self, env: gymnasium.Env, observation: Any, guard: HitchGuard) -> None:
        self.env, self.guard = env, guard
        self.observation = observation
        self.reward = 0.0
        self.total = 0.0
        self.terminated = self.time_limit = False

    def get_state(self) -> Any:
        return self.observation

    async def __call__(self, action: Any) -> None:
        if isinstance(self.env.action_space, gymnasium.spaces.Box):
            action = np.clip(action, self.env.action_space.low, self.env.action_space.high)
        outcome = self.env.step(action) if self.guard.thread is None else await self.guard.run(self.env.step, action)
        self.observation, reward, self.terminated, self.time_limit, _ = outcome
        self.reward = float(reward)
        self.total += self.reward

    def get_reward(self) -> float:
        return self.reward

    @property
    def done(self) -> bool:
        return self.terminated or self.time_limit

    @property
    def truncated(self) -> bool:
        return self.time_limit and not self.terminated

    def get_result(self) -> dict[str, Any]:
        return {"fitness": self.total, "win": None, "objectives": {}}

    def hitched(self, seconds: float) -> None:
        self.guard.offload(seconds)

    def location(self) -> str:
        spec = self.env.spec
        return spec.id if spec is not None else type(self.env.unwrapped).__name__


class GymMDP(MDP):
    """One gymnasium environment as a one-player MDP (no ticks: the player's call advances it)."""

    def __init__(self, env_id: str, kwargs: dict[str, Any] | None = None, *, preprocess: str | None = None,
                 frame_stack: int = 1, observe: list[int] | None = None, atari: Mapping[str, Any] | None = None,
                 seed: int | None = None) -> None:
        self.env = make_env(env_id, dict(kwargs or {}), preprocess, frame_stack, observe, atari)
        self.spec = PlayerSpec(self.env.observation_space, self.env.action_space)
        self.seed = seed
        self.guard = HitchGuard(env_id)

    @classmethod
    def from_mdp(cls, mdp: Mapping[str, Any], seed: int | None = None) -> GymMDP:
        """``mdp.gym``'s environment: ``id``, ``kwargs``, ``preprocess``, ``frame_stack``, ``observe``, ``atari``."""
        gym = mdp["gym"]
        return cls(gym["id"], gym.get("kwargs"), preprocess=gym.get("preprocess"),
                   frame_stack=gym.get("frame_stack") or 1, observe=gym.get("observe"), atari=gym.get("atari"),
                   seed=seed)

    def describe(self) -> list[PlayerSpec]:
        return [self.spec]

    def reset(self, *players: int, seed: int | None = None) -> Episode:
        if players != (0,):
            raise ValueError(f"a gymnasium MDP has one player (0), got {players}")
        if seed is None and self.seed is not None:
            seed, self.seed = self.seed, None  # seed the first episode; later ones continue the stream
        self.guard.settle()
        observation, _ = self.env.reset(seed=seed)
        return Episode([GymController(self.env, observation, self.guard)], [])

    def hitched(self, seconds: float) -> None:
        self.guard.offload(seconds)

    def render(self) -> np.ndarray:
        return np.asarray(self.env.render())

    def close(self) -> None:
        self.guard.close()
        self.env.close()
