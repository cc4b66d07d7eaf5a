"""DQN's settings (``rl.dqn`` and its ε-greedy schedule ``rl.dqn.epsilon``): torch-free, so ``load()`` checks them
before any process starts."""

from __future__ import annotations

import dataclasses

from ...config.sections import Section, require


@dataclasses.dataclass(frozen=True)
class DQNSettings(Section):
    """``rl.dqn``: double and dueling DQN, the target network (``epsilon`` is :class:`EpsilonSettings`)."""

    KEY = "rl.dqn"
    OTHER_KEYS = ("epsilon",)

    double: bool
    dueling: bool
    target_update: int
    tau: float

    def __post_init__(self) -> None:
        require(self, target_update=self.target_update >= 1, tau=0 < self.tau <= 1)


@dataclasses.dataclass(frozen=True)
class EpsilonSettings(Section):
    """``rl.dqn.epsilon``: the actors' ε-greedy schedule (linear in env steps) and its Ape-X spread over lanes."""

    KEY = "rl.dqn.epsilon"

    initial: float
    final: float
    decay: int
    spread: float

    def __post_init__(self) -> None:
        require(self, initial=0 <= self.initial <= 1, final=0 <= self.final <= 1, decay=self.decay >= 0,
                 spread=self.spread >= 0)

    def at(self, steps: int) -> float:
        """ε after ``steps`` env steps."""
        share = min(1.0, steps / self.decay) if self.decay else 1.0
        return self.initial + share * (self.final - self.initial)
