"""gymnasium environments (discrete, box and dict spaces) as one-player MDPs."""

from __future__ import annotations

import importlib
import importlib.metadata
import warnings
from typing import Any, Mapping

import gymnasium
import numpy as np

from ..errors import EnvironmentFailed
from ..extras import EXTRA_OF_GYM_FAMILY, EXTRA_OF_MODULE, install_hint
from ..registry import is_plugin, load_plugin
from .atari import AtariSettings, atari_settings
from .base import MDP, Controller, Episode, PlayerSpec
from .gym_settings import GymSettings, Wrapper
from .hitch import HitchGuard
from .text import TextAsWords, text_paths

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


def make_env(settings: GymSettings, atari: AtariSettings | None = None) -> gymnasium.Env:
    """The environment of ``settings`` (``mdp.gym``): ``register`` called, ``gymnasium.make``, the Atari
    preprocessing of ``atari`` (``preprocess: atari``, :mod:`.atari`; ale-py ships the ROMs), the ``wrappers`` in
    order, text parts of the observation encoded (``text``, :mod:`.text`), only the ``observe`` entries, the last
    ``frame_stack`` observations stacked."""
    if settings.register is not None:
        call_register(settings.register)
    if settings.id.startswith(ATARI_NAMESPACE) or settings.preprocess == "atari":
        import ale_py

        gymnasium.register_envs(ale_py)
    try:
        env = gymnasium.make(settings.id, **settings.kwargs)
    except ModuleNotFoundError as error:
        module = missing_module(error, settings.id)
        if module is None:
            raise
        raise ValueError(f"mdp.gym.id={settings.id} needs the Python package {module!r}, which is not installed: "
                         f"{install_hint(EXTRA_OF_MODULE.get(module), module)}") from None
    except gymnasium.error.DependencyNotInstalled as error:
        cause = error.__cause__
        if isinstance(cause, ModuleNotFoundError) and cause.name:     # another package's environment needing it
            module = cause.name.split(".")[0]
            hint = install_hint(EXTRA_OF_MODULE.get(module), module)
        else:
            family = str(gymnasium.spec(registered_id(settings.id)).entry_point).split(":")[0].split(".")[-2]
            hint = install_hint(EXTRA_OF_GYM_FAMILY.get(family), family)
        raise ValueError(f"mdp.gym.id={settings.id!r} needs packages that are not installed ({error}): "
                         f"{hint}") from None
    except gymnasium.error.Error as error:
        raise ValueError(f"mdp.gym.id={settings.id!r}: {error}") from None
    except Exception as error:
        raise EnvironmentFailed(f"mdp.gym.id={settings.id!r}: the environment raised while it was made, in "
                                f"{package_of(settings.id)}: {type(error).__name__}: {error}") from error
    if settings.preprocess == "atari":
        from .atari import atari_wrappers

        env = atari_wrappers(env, atari or AtariSettings.defaults(), skip_in_env=settings.kwargs.get("frameskip") != 1)
    for index, wrapper in enumerate(settings.parsed_wrappers()):
        env = apply_wrapper(env, wrapper, f"mdp.gym.wrappers[{index}]")
    if text_paths(env.observation_space):
        env = TextAsWords(env, settings.text)
    if settings.observe is not None:
        env = ObservationSubset(env, list(settings.observe))
    if settings.frame_stack > 1:
        env = gymnasium.wrappers.FrameStackObservation(env, settings.frame_stack)
    return env


def missing_module(error: ModuleNotFoundError, env_id: str) -> str | None:
    """The package of a ``package:Id`` whose import gymnasium re-raised in words of its own (no ``name``); None
    otherwise (an import error with its ``name`` reaches the programs, which name the extra and the key)."""
    if error.name:
        return None
    package = env_id.split(":")[0].split(".")[0] if ":" in env_id else None
    return package if package is not None and f"'{package}" in str(error) else None


def registered_id(env_id: str) -> str:
    """``env_id`` as the registry knows it: without the ``package:`` that ``gymnasium.make`` imports first."""
    return env_id.split(":", 1)[1] if ":" in env_id else env_id


def package_of(env_id: str) -> str:
    """The package whose code makes ``env_id`` (its entry point's top-level module) and its installed version."""
    try:
        entry = gymnasium.spec(registered_id(env_id)).entry_point
    except gymnasium.error.Error:
        return "an unknown package"
    module = (entry if isinstance(entry, str) else getattr(entry, "__module__", "")).split(":")[0].split(".")[0]
    distributions = importlib.metadata.packages_distributions().get(module, [])
    versions = [f"{name} {importlib.metadata.version(name)}" for name in distributions]
    return f"the package {module}" + (f" ({', '.join(versions)})" if versions else "")


def call_register(spec: str) -> None:
    """``mdp.gym.register``: ``module:function`` called, or ``module`` imported (ValueError naming the key when
    either fails)."""
    if not is_plugin(spec):
        try:
            importlib.import_module(spec)
        except ImportError as error:
            raise ValueError(f"mdp.gym.register={spec!r}: cannot import it ({error})") from None
        return
    function = load_plugin(spec, "mdp.gym.register")
    if not callable(function):
        raise ValueError(f"mdp.gym.register={spec!r}: not a function ({type(function).__name__})")
    try:
        function()
    except Exception as error:
        raise ValueError(f"mdp.gym.register={spec!r} failed: {type(error).__name__}: {error}") from error


def apply_wrapper(env: gymnasium.Env, wrapper: Wrapper, key: str) -> gymnasium.Env:
    """``env`` inside ``wrapper`` (ValueError naming ``key`` and the class when it cannot be imported, is no
    gymnasium wrapper, or fails on this environment)."""
    cls = load_plugin(wrapper.spec, key)
    if not (isinstance(cls, type) and issubclass(cls, gymnasium.Wrapper)):
        raise ValueError(f"{key}={wrapper.spec!r}: expected a gymnasium.Wrapper subclass, got {cls!r}")
    try:
        return cls(env, **dict(wrapper.kwargs))
    except Exception as error:
        raise ValueError(f"{key}={wrapper.spec!r} on {env.spec.id if env.spec else env}: "
                         f"{type(error).__name__}: {error}") from error


class GymController(Controller):
    """The single player of a :class:`GymMDP` episode; each call steps the environment (on ``guard``'s thread once
    it hitched). ``weights``: a vector reward's weights (its weighted sum is the reward; each entry's total is the
    objective ``reward_<i>``); None: the reward is a number."""

    def __init__(self, env: gymnasium.Env, observation: Any, guard: HitchGuard,
                 weights: np.ndarray | None = None) -> None:
        self.env, self.guard = env, guard
        self.observation = observation
        self.weights = weights
        self.components = np.zeros(0 if weights is None else len(weights))
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
        if self.weights is None:
            self.reward = number_reward(reward, self.location())
        else:
            vector = np.asarray(reward, np.float64).reshape(-1)
            self.components += vector
            self.reward = float(self.weights @ vector)
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
        return {"fitness": self.total, "win": None,
                "objectives": {f"reward_{i}": float(total) for i, total in enumerate(self.components)}}

    def hitched(self, seconds: float) -> None:
        self.guard.offload(seconds)

    def location(self) -> str:
        spec = self.env.spec
        return spec.id if spec is not None else type(self.env.unwrapped).__name__


def number_reward(reward: Any, env_id: str) -> float:
    """``reward`` as a float; a TypeError naming ``env_id`` and what to do when it is not a number."""
    try:
        return float(reward)
    except (TypeError, ValueError):
        raise TypeError(f"mdp.gym.id={env_id!r}: step() returned the reward {reward!r}, not a number: a vector reward "
                        "needs a reward_space on the environment (MO-Gymnasium's way) and mdp.reward.weights; an "
                        "environment of several agents needs a multi-agent adapter (mdp/pettingzoo.yml)") from None


def reward_weights(env: gymnasium.Env, env_id: str, weights: tuple[float, ...] | None) -> np.ndarray | None:
    """``weights`` as an array when ``env`` declares a vector reward (a 1-D ``reward_space`` of several entries, as
    MO-Gymnasium's environments do) of their length; None for a number reward without weights; a ValueError naming
    ``mdp.reward.weights`` otherwise."""
    space = getattr(env.unwrapped, "reward_space", None)
    shape = getattr(space, "shape", None)
    entries = int(shape[0]) if shape is not None and len(shape) == 1 and shape[0] > 1 else 0
    if entries and weights is None:
        raise ValueError(f"mdp.gym.id={env_id!r} gives a vector reward of {entries} entries (its reward_space "
                         f"{space}): set mdp.reward.weights to one weight per entry, e.g. -m "
                         f"'mdp.reward.weights=[{', '.join(['1'] * entries)}]'")
    if entries:     # gymnasium's environment checker warns of every non-number reward: here that is the design
        warnings.filterwarnings("ignore", message=r".*reward returned by `step\(\)` must be a float")
    if weights is not None and len(weights) != entries:
        raise ValueError(f"mdp.reward.weights={list(weights)!r}: {env_id} gives "
                         + (f"a vector reward of {entries} entries" if entries else "a number reward, not a vector")
                         + (" (remove the key)" if not entries else ""))
    return None if weights is None else np.asarray(weights, np.float64)


class GymMDP(MDP):
    """One gymnasium environment as a one-player MDP (no ticks: the player's call advances it).

    Args:
        settings: ``mdp.gym`` (:class:`GymSettings`; :meth:`make` builds one from an id).
        atari: ``mdp.gym.atari``, for ``preprocess: atari`` (None: the packaged defaults).
        seed: seeds the first episode; later ones continue its stream.
        weights: ``mdp.reward.weights``: required for an environment with a vector reward, refused for others.
    """

    def __init__(self, settings: GymSettings, atari: AtariSettings | None = None, seed: int | None = None,
                 weights: tuple[float, ...] | None = None) -> None:
        self.env = make_env(settings, atari)
        self.weights = reward_weights(self.env, settings.id, weights)
        self.reward_components = 0 if self.weights is None else len(self.weights)
        self.spec = PlayerSpec(self.env.observation_space, self.env.action_space)
        self.seed = seed
        self.guard = HitchGuard(settings.id)

    @classmethod
    def make(cls, env_id: str, seed: int | None = None, weights: tuple[float, ...] | None = None,
             **changes: Any) -> GymMDP:
        """``env_id`` with the packaged ``mdp.gym`` defaults and ``changes`` to them (``kwargs``, ``wrappers``...)."""
        return cls(GymSettings.defaults(id=env_id, **changes), seed=seed, weights=weights)

    @classmethod
    def from_mdp(cls, mdp: Mapping[str, Any], seed: int | None = None) -> GymMDP:
        """``mdp.gym``'s environment (keys added since a checkpoint's configuration was written take their
        defaults)."""
        weights = (mdp.get("reward") or {}).get("weights")
        return cls(GymSettings.defaults(**mdp["gym"]), atari_settings(mdp["gym"].get("atari")), seed=seed,
                   weights=None if weights is None else tuple(weights))

    def describe(self) -> list[PlayerSpec]:
        return [self.spec]

    def reset(self, *players: int, seed: int | None = None) -> Episode:
        if players != (0,):
            raise ValueError(f"a gymnasium MDP has one player (0), got {players}")
        if seed is None and self.seed is not None:
            seed, self.seed = self.seed, None  # seed the first episode; later ones continue the stream
        self.guard.settle()
        try:
            observation, _ = self.env.reset(seed=seed)
        except Exception as error:
            raise EnvironmentFailed(f"mdp.gym.id={self.guard.name!r}: the environment raised while it reset, in "
                                    f"{package_of(self.guard.name)}: {type(error).__name__}: {error}") from error
        return Episode([GymController(self.env, observation, self.guard, self.weights)], [])

    def hitched(self, seconds: float) -> None:
        self.guard.offload(seconds)

    def render(self) -> np.ndarray:
        return np.asarray(self.env.render())

    def close(self) -> None:
        self.guard.close()
        self.env.close()
