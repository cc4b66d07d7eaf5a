"""Images as observations. Large frames made small (``mdp.resize``): an image observation (``uint8``, height × width ×
channels) with a side over ``above`` pixels reaches the network resized to ``to`` (area interpolation), as
PettingZoo's own tutorials resize pistonball's 457×120 frames to 84×84 before training. A Nature CNN on full-size
frames costs about 9 times as much per frame (measured: 2.2 s for the 320 frames of 16 pistonball games, on one
core); the environment itself is unchanged (its rendering, its videos). Rendered frames as the observation
(:class:`RenderedObservations`): any MDP that renders becomes a pixel game, as the game server's ``--pixels`` serves
it."""

from __future__ import annotations

from typing import Any, Mapping

import gymnasium
import numpy as np

from .base import MDP, Controller, Episode, PlayerSpec
from .wrap import ControllerWrapper


def large_frame(space: gymnasium.Space, above: int) -> bool:
    """A ``uint8`` height × width × channels Box with a side over ``above`` pixels."""
    return isinstance(space, gymnasium.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3 \
        and space.shape[-1] <= 4 and max(space.shape[:2]) > above


def frame_space(space: gymnasium.Space, size: tuple[int, int]) -> gymnasium.spaces.Box:
    """``space``'s frames (a :func:`large_frame` Box) at ``size``."""
    shape = space.shape
    assert shape is not None, "a frame space has a shape"
    return gymnasium.spaces.Box(0, 255, (*size, shape[-1]), np.uint8)


class ResizedController(ControllerWrapper):
    """Hands out the wrapped controller's frames resized to ``(height, width)``."""

    def __init__(self, controller: Controller, size: tuple[int, int]) -> None:
        super().__init__(controller)
        self.size = size

    def get_state(self) -> np.ndarray:
        return area_resized(np.asarray(self.controller.get_state(), np.uint8), self.size)


class ImagesOf(MDP):
    """An MDP whose seats' observations are images made from ``mdp``'s (``specs``: the seats' new spaces, set by
    the subclass); everything else is ``mdp``'s."""

    def __init__(self, mdp: MDP, specs: list[PlayerSpec]) -> None:
        self.mdp, self.specs = mdp, specs

    def describe(self) -> list[PlayerSpec]:
        return self.specs

    def seat_names(self) -> list[str]:
        return self.mdp.seat_names()

    def global_state_space(self) -> gymnasium.Space | None:
        return self.mdp.global_state_space()

    def global_state(self) -> Any:
        return self.mdp.global_state()

    def counters(self) -> dict[str, float]:
        return self.mdp.counters()

    def render(self) -> np.ndarray:
        return self.mdp.render()

    def close(self) -> None:
        self.mdp.close()


class ResizedImages(ImagesOf):
    """``mdp`` with every seat's large frames (:func:`large_frame`) resized to ``size``."""

    def __init__(self, mdp: MDP, above: int, size: tuple[int, int]) -> None:
        self.size = size
        specs = mdp.describe()
        self.resized = [large_frame(spec.observation, above) for spec in specs]
        super().__init__(mdp, [PlayerSpec(frame_space(spec.observation, size), spec.action) if resized else spec
                               for spec, resized in zip(specs, self.resized)])

    def reset(self, *players: int, seed: int | None = None) -> Episode:
        episode = self.mdp.reset(*players, seed=seed)
        seats = players or tuple(range(len(self.specs)))
        return Episode([ResizedController(controller, self.size) if self.resized[seat] else controller
                        for seat, controller in zip(seats, episode.controllers)], episode.ticks)


def area_resized(frame: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``frame (H, W, C)`` uint8 at ``size`` (height, width), area interpolation; unchanged when it is that size."""
    if frame.shape[:2] == tuple(size):
        return frame
    import cv2  # opencv: only runs with images import it

    return cv2.resize(frame, (size[1], size[0]), interpolation=cv2.INTER_AREA).reshape(*size, frame.shape[-1])


class RenderedController(ControllerWrapper):
    """Hands out the MDP's rendered frame (:meth:`RenderedObservations.frame`) instead of the seat's observation."""

    def __init__(self, controller: Controller, rendered: "RenderedObservations") -> None:
        super().__init__(controller)
        self.rendered = rendered

    def get_state(self) -> np.ndarray:
        return self.rendered.frame()


class RenderedObservations(ImagesOf):
    """``mdp`` whose every seat observes its rendered frame, ``(size, size, 3)`` uint8 (area-resized), instead of
    its own observation: a pixel game made of any MDP that renders (one episode at a time per instance, as the game
    server runs them). Every seat sees the same frame."""

    def __init__(self, mdp: MDP, size: int) -> None:
        self.size = size
        space = gymnasium.spaces.Box(0, 255, (size, size, 3), np.uint8)
        super().__init__(mdp, [PlayerSpec(space, spec.action) for spec in mdp.describe()])

    def frame(self) -> np.ndarray:
        return area_resized(np.ascontiguousarray(self.mdp.render()[..., :3], np.uint8), (self.size, self.size))

    def reset(self, *players: int, seed: int | None = None) -> Episode:
        episode = self.mdp.reset(*players, seed=seed)
        return Episode([RenderedController(controller, self) for controller in episode.controllers], episode.ticks)


def resized(mdp: MDP, settings: Mapping[str, Any] | None) -> MDP:
    """``mdp`` behind :class:`ResizedImages` where ``mdp.resize`` (``above``, ``to``) applies to a seat's frames."""
    if not settings or settings.get("above") is None:
        return mdp
    above, to = int(settings["above"]), settings.get("to")
    if not (isinstance(to, (list, tuple)) and len(to) == 2 and all(isinstance(n, int) and n > 0 for n in to)):
        raise ValueError(f"mdp.resize.to={to!r}: expected [height, width] in pixels")
    if not any(large_frame(spec.observation, above) for spec in mdp.describe()):
        return mdp
    return ResizedImages(mdp, above, (int(to[0]), int(to[1])))
