"""The standard Atari preprocessing (the DQN Nature paper's, as in CleanRL and stable-baselines3's ``AtariWrapper``),
for any ``ALE/<Game>-v5`` id: no-op starts, max-and-skip, episodic life, fire on reset, reward clipping, 84×84 grey.
Frame stacking is ``mdp.gym.frame_stack``'s (:func:`lamarckian.mdp.gym.make_env`).

Training and evaluation differ (``mdp.evaluation`` overrides, ``mdp/gym/atari.yml``): training episodes end with a
lost life and see clipped rewards; evaluation plays full games with the game's own score, and presses FIRE after
every lost life in games that wait for it, so a deterministic policy that never fires cannot stall them.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import gymnasium
import numpy as np

from ..config.sections import Section

FIRE, NOOP = "FIRE", "NOOP"     # ALE action meanings
FIRE_RESET = ("never", "always", "auto")


@dataclasses.dataclass(frozen=True)
class AtariSettings(Section):
    """The ``mdp.gym.atari`` keys (``mdp.gym.preprocess: atari``).

    Attributes:
        noop_max: at most this many no-op actions (a uniform draw) after each reset: varied starting states.
        frame_skip: emulator frames per decision, the observation the max of the last two (flicker); applied only
            when the environment itself does not skip (``mdp.gym.kwargs.frameskip: 1``).
        screen_size: observations are ``screen_size × screen_size`` grey images, uint8.
        episodic_life: a lost life ends the training episode (the game goes on at the next reset).
        fire_reset: press FIRE after a reset (and after a lost life when lives do not end episodes): ``never``,
            ``always``, or ``auto``: where the game's action set has FIRE.
        clip_reward: rewards become their sign (−1, 0, 1).
    """

    KEY = "mdp.gym.atari"

    noop_max: int
    frame_skip: int
    screen_size: int
    episodic_life: bool
    fire_reset: str
    clip_reward: bool

    def __post_init__(self) -> None:
        for name in ("noop_max", "frame_skip", "screen_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name == "noop_max" else 1):
                raise ValueError(f"mdp.gym.atari.{name}={value!r}: expected an integer >= "
                                 f"{0 if name == 'noop_max' else 1}")
        if self.fire_reset not in FIRE_RESET:
            raise ValueError(f"mdp.gym.atari.fire_reset={self.fire_reset!r}: expected one of {', '.join(FIRE_RESET)}")


def lives(env: gymnasium.Env) -> int:
    """The lives the ALE game has left."""
    game: Any = env.unwrapped           # ALE's AtariEnv
    return int(game.ale.lives())


class EpisodicLife(gymnasium.Wrapper):
    """A lost life ends the episode (``terminated``) without ending the game: the next reset continues it with a
    no-op step, and only a real game over resets the emulator."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.lives = 0
        self.game_over = True

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.game_over = terminated or truncated
        left = lives(self.env)
        if 0 < left < self.lives:
            terminated = True
        self.lives = left
        return observation, float(reward), terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        if self.game_over:
            observation, info = self.env.reset(**kwargs)
        else:
            observation, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:                   # the no-op ended the game after all
                observation, info = self.env.reset(**kwargs)
        self.game_over = False
        self.lives = lives(self.env)
        return observation, info


class FireReset(gymnasium.Wrapper):
    """Press FIRE (then the next action, as the games that need it launch on the second) after a reset; with
    ``after_life_loss``, also after each lost life that does not end the game."""

    def __init__(self, env: gymnasium.Env, after_life_loss: bool) -> None:
        super().__init__(env)
        self.fire = action_meanings(env).index(FIRE)
        self.after_life_loss = after_life_loss
        self.lives = 0

    def _launch(self) -> tuple[Any, float, bool, bool, dict]:
        total = 0.0
        for action in (self.fire, (self.fire + 1) % len(action_meanings(self.env))):
            observation, reward, terminated, truncated, info = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        self.lives = lives(self.env)
        return observation, total, terminated, truncated, info

    def reset(self, **kwargs: Any) -> tuple[Any, dict]:
        self.env.reset(**kwargs)
        observation, _, terminated, truncated, info = self._launch()
        if terminated or truncated:
            observation, info = self.env.reset(**kwargs)
        return observation, info

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        if self.after_life_loss and not (terminated or truncated) and lives(self.env) < self.lives:
            observation, extra, terminated, truncated, info = self._launch()
            reward = float(reward) + extra
        self.lives = lives(self.env)
        return observation, float(reward), terminated, truncated, info


def action_meanings(env: gymnasium.Env) -> list[str]:
    """The names of the ALE game's actions, by index."""
    game: Any = env.unwrapped           # ALE's AtariEnv
    return list(game.get_action_meanings())


def has_fire(env: gymnasium.Env) -> bool:
    """Whether the game's action set has FIRE."""
    return FIRE in action_meanings(env)


def atari_wrappers(env: gymnasium.Env, settings: AtariSettings, skip_in_env: bool) -> gymnasium.Env:
    """``env`` (an ALE environment) with the standard preprocessing of ``settings``; ``skip_in_env``: the environment
    already skips frames (``frameskip`` > 1), so the wrapper does not. ValueError naming the key where the game cannot
    take a setting (no-op starts without a NOOP action, FIRE demanded without one)."""
    meanings = action_meanings(env)
    if settings.noop_max and meanings[0] != NOOP:
        raise ValueError(f"mdp.gym.atari.noop_max={settings.noop_max}: {env.spec.id if env.spec else 'this game'} has "
                         f"no NOOP action (its actions: {', '.join(meanings)}): set mdp.gym.atari.noop_max=0")
    env = gymnasium.wrappers.AtariPreprocessing(env, noop_max=settings.noop_max,
                                                frame_skip=1 if skip_in_env else settings.frame_skip,
                                                screen_size=settings.screen_size)
    if settings.episodic_life:
        env = EpisodicLife(env)
    fire = has_fire(env) if settings.fire_reset == "auto" else settings.fire_reset == "always"
    if fire:
        if not has_fire(env):
            raise ValueError(f"mdp.gym.atari.fire_reset=always: {env.spec.id if env.spec else 'this game'} has no "
                             "FIRE action")
        env = FireReset(env, after_life_loss=not settings.episodic_life)
    if settings.clip_reward:
        env = gymnasium.wrappers.TransformReward(env, lambda reward: float(np.sign(float(reward))))
    return env


def atari_settings(mapping: Mapping[str, Any] | None) -> AtariSettings:
    """``mdp.gym.atari`` as settings (the packaged defaults where it is absent: a config written before it)."""
    return AtariSettings.from_mapping(mapping) if mapping is not None else AtariSettings.defaults()
