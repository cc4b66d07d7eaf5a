"""Large frames reach the network resized (``mdp.resize``); small ones, and every other space, come as they are."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from lamarckian.mdp.base import MDP, Controller, Episode, PlayerSpec
from lamarckian.mdp.images import resized

SETTINGS = {"above": 128, "to": [84, 84]}


class FrameController(Controller):
    def __init__(self, shape: tuple[int, ...]) -> None:
        self.frame = np.arange(np.prod(shape), dtype=np.int64).reshape(shape).astype(np.uint8)

    def get_state(self) -> np.ndarray:
        return self.frame

    async def __call__(self, action) -> None:
        pass

    def get_reward(self) -> float:
        return 0.0

    @property
    def done(self) -> bool:
        return False

    def get_result(self) -> dict:
        return {"fitness": 0.0, "win": None, "objectives": {}}


class Frames(MDP):
    """Two seats: seat 0 sees ``shape`` frames, seat 1 a small vector."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.specs = [PlayerSpec(gymnasium.spaces.Box(0, 255, shape, np.uint8), gymnasium.spaces.Discrete(2)),
                      PlayerSpec(gymnasium.spaces.Box(-1, 1, (3,), np.float32), gymnasium.spaces.Discrete(2))]

    def describe(self) -> list[PlayerSpec]:
        return self.specs

    def reset(self, *players: int, seed: int | None = None) -> Episode:
        return Episode([FrameController(self.specs[p].observation.shape) for p in players], [])


def test_a_large_frames_space_is_the_resized_one():
    mdp = resized(Frames((457, 120, 3)), SETTINGS)
    assert mdp.describe()[0].observation == gymnasium.spaces.Box(0, 255, (84, 84, 3), np.uint8)


def test_a_large_frame_arrives_resized_and_other_seats_untouched():
    episode = resized(Frames((457, 120, 3)), SETTINGS).reset(0, 1)
    shapes = [np.asarray(controller.get_state()).shape for controller in episode.controllers]
    assert shapes == [(84, 84, 3), (3,)]


def test_a_single_channel_keeps_its_axis():
    episode = resized(Frames((300, 300, 1)), SETTINGS).reset(0)
    assert episode.controllers[0].get_state().shape == (84, 84, 1)


def test_frames_within_the_limit_are_left_as_they_are():
    mdp = Frames((96, 96, 3))
    assert resized(mdp, SETTINGS) is mdp


def test_null_never_resizes():
    mdp = Frames((457, 120, 3))
    assert resized(mdp, {"above": None, "to": [84, 84]}) is mdp


def test_a_bad_size_is_named():
    with pytest.raises(ValueError, match=r"mdp.resize.to=\[84\]"):
        resized(Frames((457, 120, 3)), {"above": 128, "to": [84]})
