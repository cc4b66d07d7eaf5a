"""Turn per-player observations (arrays, or dicts and tuples of arrays) into one batched float tensor."""

from __future__ import annotations

from typing import Any, Sequence

import gymnasium
import numpy as np

SMALLEST_FRAME = 36    # pixels a side the Nature CNN's kernels (8 stride 4, 4 stride 2, 3) need


def is_frame(space: gymnasium.Space) -> bool:
    """A uint8 Box of rank 3 (frames ``(C, H, W)`` or ``(H, W, C)``), of any size."""
    return isinstance(space, gymnasium.spaces.Box) and space.dtype == np.uint8 and len(space.shape) == 3


def is_image(space: gymnasium.Space) -> bool:
    """Frames (:func:`is_frame`) at least :data:`SMALLEST_FRAME` pixels a side: the Nature CNN's input. Smaller
    ones (MiniGrid's 7 × 7 grid of object codes, a tiny game screen) are flattened into the vector part."""
    return is_frame(space) and min(frame_shape(space)[0][1:]) >= SMALLEST_FRAME


def small_frames(space: gymnasium.Space) -> list[tuple[int, int, int]]:
    """The ``(C, H, W)`` of every part of ``space`` that is a frame too small for the Nature CNN."""
    if isinstance(space, (gymnasium.spaces.Dict, gymnasium.spaces.Tuple)):
        return [shape for sub in parts(space).values() for shape in small_frames(sub)]
    return [frame_shape(space)[0]] if is_frame(space) and not is_image(space) else []


def flat_size(space: gymnasium.Space) -> int:
    """Length of the flat float vector a non-image observation becomes."""
    if isinstance(space, gymnasium.spaces.Box):
        return int(np.prod(space.shape))
    if isinstance(space, gymnasium.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gymnasium.spaces.MultiBinary):
        return int(np.prod(space.shape))
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return int(space.nvec.sum())
    if isinstance(space, (gymnasium.spaces.Dict, gymnasium.spaces.Tuple)):
        return sum(flat_size(s) for s in parts(space).values())
    raise TypeError(f"observation space {space} is not supported (Box, Discrete, MultiDiscrete, MultiBinary, Dict, "
                    "Tuple)")


def parts(space: gymnasium.spaces.Dict | gymnasium.spaces.Tuple) -> dict[Any, gymnasium.Space]:
    """A composite space's parts by key: a Dict's names, a Tuple's positions (a Tuple is a Dict with keys 0…n−1)."""
    if isinstance(space, gymnasium.spaces.Tuple):
        return dict(enumerate(space.spaces))
    return dict(space.spaces)


def _flatten_one(space: gymnasium.Space, observation: Any) -> np.ndarray:
    if isinstance(space, gymnasium.spaces.Discrete):
        one_hot = np.zeros(space.n, np.float32)
        one_hot[int(observation) - space.start] = 1.0
        return one_hot
    if isinstance(space, gymnasium.spaces.MultiDiscrete):        # one-hot per element, side by side
        one_hot = np.zeros(int(space.nvec.sum()), np.float32)
        offsets = np.concatenate([[0], np.cumsum(space.nvec.reshape(-1))[:-1]])
        one_hot[offsets + (np.asarray(observation).reshape(-1) - space.start.reshape(-1))] = 1.0
        return one_hot
    if isinstance(space, (gymnasium.spaces.Dict, gymnasium.spaces.Tuple)):
        return np.concatenate([_flatten_one(s, observation[k]) for k, s in parts(space).items()])
    return np.asarray(observation, np.float32).reshape(-1)


def frame_shape(space: gymnasium.Space) -> tuple[tuple[int, int, int], bool]:
    """An image space's ``(C, H, W)`` and whether its frames come channels last (``H × W × C``)."""
    shape = space.shape
    assert shape is not None and len(shape) == 3, "an image space is a rank-3 Box"
    channels_last = shape[-1] < shape[0]
    return ((shape[2], shape[0], shape[1]) if channels_last else (shape[0], shape[1], shape[2])), channels_last


class ObservationBatcher:
    """Stack observations of one space into a tensor: images ``(N, C, H, W)`` uint8, vectors ``(N, D)`` float32,
    and a Dict or Tuple with image parts ("mixed") ``(N, B)`` uint8 rows: the other parts' flat float32 vector
    ``(D,)`` as its bytes, then every image part ``(C, H, W)`` in the space's order (:attr:`frames`), padded to a
    multiple of 4 bytes; images stay ``uint8`` until the network's forward (``network.split_mixed``)."""

    def __init__(self, space: gymnasium.Space) -> None:
        self.space = space
        self.image = is_image(space)
        self.channels_last = self.image and frame_shape(space)[1]
        self.plain_box = isinstance(space, gymnasium.spaces.Box) and not self.image
        members = parts(space) if isinstance(space, (gymnasium.spaces.Dict, gymnasium.spaces.Tuple)) else {}
        self.frames = [(key, *frame_shape(sub)) for key, sub in members.items() if is_image(sub)]
        self.mixed = bool(self.frames)
        self.vectors = [(key, sub) for key, sub in members.items() if not is_image(sub)] if self.mixed else []
        self.vector_size = sum(flat_size(sub) for _, sub in self.vectors)

    @property
    def mask(self) -> slice | None:
        """Where a dict observation's ``action_mask`` (1: legal) lies in the flat vector (of a mixed space: in its
        vector part); None without one."""
        if not isinstance(self.space, gymnasium.spaces.Dict) or "action_mask" not in self.space.spaces:
            return None
        start = 0
        for key, space in self.space.spaces.items():
            if key == "action_mask":
                return slice(start, start + flat_size(space))
            if not (self.mixed and is_image(space)):
                start += flat_size(space)
        return None

    @property
    def shape(self) -> tuple[int, ...]:
        """Shape of one batched sample."""
        if self.image:
            return frame_shape(self.space)[0]
        if self.mixed:
            size = 4 * self.vector_size + sum(int(np.prod(shape)) for _, shape, _ in self.frames)
            return (size + (-size) % 4,)
        return (flat_size(self.space),)

    @property
    def stored_as_bytes(self) -> bool:
        """Samples are ``uint8`` (images, mixed rows), not ``float32``."""
        return self.image or self.mixed

    def convert(self, observation: Any) -> np.ndarray:
        """One observation as the array that :meth:`__call__` would stack (``shape``)."""
        if self.image:
            array = np.asarray(observation, np.uint8)
            return np.ascontiguousarray(array.transpose(2, 0, 1)) if self.channels_last else array
        if self.plain_box:
            return np.asarray(observation, np.float32).reshape(-1)
        if self.mixed:
            return self._pack(observation)
        return _flatten_one(self.space, observation)

    def _pack(self, observation: Any) -> np.ndarray:
        row = np.zeros(self.shape[0], np.uint8)
        if self.vectors:
            vector = np.concatenate([_flatten_one(sub, observation[key]) for key, sub in self.vectors])
            row[:4 * self.vector_size] = vector.astype(np.float32).view(np.uint8)
        offset = 4 * self.vector_size
        for key, shape, channels_last in self.frames:
            frame = np.asarray(observation[key], np.uint8)
            size = int(np.prod(shape))
            row[offset:offset + size] = (frame.transpose(2, 0, 1) if channels_last else frame).reshape(-1)
            offset += size
        return row

    def __call__(self, observations: Sequence[Any]) -> np.ndarray:
        if self.image:
            batch = np.stack([np.asarray(o, np.uint8) for o in observations])
            return np.ascontiguousarray(batch.transpose(0, 3, 1, 2)) if self.channels_last else batch
        if self.plain_box:
            return np.stack([np.asarray(o, np.float32).reshape(-1) for o in observations])
        return np.stack([self.convert(o) for o in observations])

