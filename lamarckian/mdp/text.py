"""Text parts of observations (gymnasium ``Text``, MiniGrid's ``MissionSpace``: any space of ``str`` samples) made
numbers a network takes: a bag of words hashed into a fixed number of buckets, or left out.

A word is a run of letters and digits, lower-cased; its bucket is its CRC-32 modulo the bucket count, so the
encoding is the same in every process and run, needs no vocabulary, and two words share a bucket only by a
collision (MiniGrid's missions use a few dozen words: with 64 buckets a collision is rare and only blurs two
words into one input).
"""

from __future__ import annotations

import logging
import re
import zlib
from typing import Any

import gymnasium
import numpy as np

from ..said import warn_once

LOG = logging.getLogger("lamarckian.mdp")
WORD = re.compile(r"[a-z0-9]+")


def is_text(space: gymnasium.Space) -> bool:
    """A space whose samples are strings (``Text``, MiniGrid's ``MissionSpace``)."""
    return space.dtype is not None and np.dtype(space.dtype).kind == "U"


def text_paths(space: gymnasium.Space, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Where ``space`` holds text: the keys (Dict) and positions (Tuple) down to each text part."""
    if is_text(space):
        return [path]
    if isinstance(space, gymnasium.spaces.Dict):
        return [p for key, sub in space.spaces.items() for p in text_paths(sub, (*path, key))]
    if isinstance(space, gymnasium.spaces.Tuple):
        return [p for index, sub in enumerate(space.spaces) for p in text_paths(sub, (*path, index))]
    return []


def word_counts(text: str, buckets: int) -> np.ndarray:
    """``(buckets,)`` float32: how many of ``text``'s words fall in each bucket."""
    counts = np.zeros(buckets, np.float32)
    for word in WORD.findall(str(text).lower()):
        counts[zlib.crc32(word.encode()) % buckets] += 1.0
    return counts


class TextAsWords(gymnasium.ObservationWrapper):
    """Each text part of the observation as its :func:`word_counts` (a ``Box(0, inf, (buckets,))``), or, with
    ``buckets`` 0, left out of its Dict or Tuple. ``key``: the setting named in messages (``mdp.gym.text``)."""

    def __init__(self, env: gymnasium.Env, buckets: int, key: str = "mdp.gym.text") -> None:
        super().__init__(env)
        self.buckets = buckets
        self.paths = text_paths(env.observation_space)
        if buckets == 0 and () in self.paths:
            raise ValueError(f"{key}=0 leaves text parts out, but the whole observation is text "
                             f"({env.observation_space}): set {key} to a number of buckets")
        self.observation_space = self._space(env.observation_space)
        names = ", ".join(".".join(map(str, p)) or "the observation" for p in self.paths)
        warn_once(LOG, f"{names} is text: " + (f"its words counted in {buckets} hashed buckets ({key}: 0 leaves it "
                                              "out)" if buckets else f"left out ({key}: a number of buckets keeps its "
                                                                    "words)"))

    def _space(self, space: gymnasium.Space) -> gymnasium.Space:
        if is_text(space):
            return gymnasium.spaces.Box(0.0, np.inf, (self.buckets,), np.float32)
        if isinstance(space, gymnasium.spaces.Dict):
            return gymnasium.spaces.Dict({key: self._space(sub) for key, sub in space.spaces.items()
                                          if self.buckets or not is_text(sub)})
        if isinstance(space, gymnasium.spaces.Tuple):
            return gymnasium.spaces.Tuple([self._space(sub) for sub in space.spaces
                                           if self.buckets or not is_text(sub)])
        return space

    def observation(self, observation: Any) -> Any:
        return self._convert(self.env.observation_space, observation)

    def _convert(self, space: gymnasium.Space, value: Any) -> Any:
        if is_text(space):
            return word_counts(value, self.buckets)
        if isinstance(space, gymnasium.spaces.Dict):
            return {key: self._convert(sub, value[key]) for key, sub in space.spaces.items()
                    if self.buckets or not is_text(sub)}
        if isinstance(space, gymnasium.spaces.Tuple):
            return tuple(self._convert(sub, part) for sub, part in zip(space.spaces, value)
                         if self.buckets or not is_text(sub))
        return value
