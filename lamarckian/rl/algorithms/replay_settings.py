"""The off-policy learners' replay buffer and update-to-data ratio (``train.replay``): torch-free, so ``load()``
checks it before any process starts."""

from __future__ import annotations

import dataclasses

from ...config.sections import Section, require


@dataclasses.dataclass(frozen=True)
class ReplaySettings(Section):
    """``train.replay``: the off-policy learners' replay buffer and update-to-data ratio."""

    KEY = "train.replay"

    capacity: int
    start: int
    batch: int
    ratio: float
    steps: int
    refresh: int
    alpha: float
    beta: float
    checkpoint: bool

    def __post_init__(self) -> None:
        require(self, capacity=self.capacity >= 1, start=1 <= self.start <= self.capacity, batch=self.batch >= 1,
                 ratio=self.ratio > 0, steps=self.steps >= 1, refresh=self.refresh >= 0, alpha=self.alpha >= 0,
                 beta=0 <= self.beta <= 1)
