"""How a network acts: the acting policies that answer a batch of ``(observation, tag)`` items with one forward
each — the sampling or deterministic policy of an actor-critic (recurrent, state-dependent), DQN's ε-greedy, many
frozen policies at once. The algorithms choose one (:meth:`~lamarckian.rl.algorithms.base.Algorithm.acting_policy`); the
actors' batched inference (:mod:`lamarckian.rl.fleet.inference`) calls it."""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np
import torch

from ..model import ActorCritic
from ..model.stacked import StackedPolicies

Answer = tuple[Any, float, float]  # (action, log-probability, value)


class BatchPolicy(Protocol):
    """What answers a batch of waiting players in one forward (the actors' batched inference calls it)."""

    def serve(self, items: Sequence[tuple[np.ndarray, int]]) -> list[Answer]:
        """Answers for ``(observation, tag)`` items, in order, from one forward."""


class Policy:
    """A model used for acting: stochastic (drawing from ``generator``) or deterministic (evaluation)."""

    def __init__(self, model: ActorCritic, deterministic: bool = False, generator: torch.Generator | None = None
                 ) -> None:
        self.model, self.deterministic, self.generator = model, deterministic, generator

    def serve(self, items: Sequence[tuple[np.ndarray, int]]) -> list[Answer]:
        batch = torch.from_numpy(np.stack([observation for observation, _ in items]))
        actions, log_probs, values = self.model.act(batch, self.deterministic, self.generator)
        return list(zip(actions.numpy(), log_probs.tolist(), values.tolist()))


class RecurrentPolicy(Policy):
    """A recurrent model used for acting: an item's tag names its memory (an environment slot, an evaluation game),
    whose state ``(S,)`` each forward advances. :meth:`reset` starts a memory afresh (an episode's start),
    :meth:`forget` drops it, :meth:`rewind` sets it back (a step decided again)."""

    def __init__(self, model: ActorCritic, deterministic: bool = False, generator: torch.Generator | None = None
                 ) -> None:
        super().__init__(model, deterministic, generator)
        self.zero = np.zeros(model.state_size, np.float32)
        self.memories: dict[int, np.ndarray] = {}

    def reset(self, tag: int) -> None:
        self.memories[tag] = self.zero

    def forget(self, tag: int) -> None:
        self.memories.pop(tag, None)

    def state(self, tag: int) -> np.ndarray:
        """``(S,)`` the state the next forward of ``tag`` starts from."""
        return self.memories.get(tag, self.zero)

    def rewind(self, tag: int, state: np.ndarray) -> None:
        """The next forward of ``tag`` starts from ``state (S,)`` (the one its last forward started from)."""
        self.memories[tag] = state

    def serve(self, items: Sequence[tuple[np.ndarray, int]]) -> list[Answer]:
        batch = torch.from_numpy(np.stack([observation for observation, _ in items]))
        states = torch.from_numpy(np.stack([self.state(tag) for _, tag in items]))
        actions, log_probs, values, states = self.model.act_step(batch, states, self.deterministic, self.generator)
        for (_, tag), state in zip(items, states.numpy()):
            self.memories[tag] = state
        return list(zip(actions.numpy(), log_probs.tolist(), values.tolist()))


class StateDependentPolicy(Policy):
    """gSDE's acting (``model.sde``): an item's tag (an environment slot) holds standard normal draws ``(W, A)``,
    redrawn every ``model.sde`` of its forwards; the action is :meth:`ActorCritic.act_sde` of them."""

    def __init__(self, model: ActorCritic, generator: torch.Generator | None = None) -> None:
        super().__init__(model, False, generator)
        self.every = model.settings.sde
        self.draws: dict[int, torch.Tensor] = {}
        self.ages: dict[int, int] = {}

    def _draw(self, tag: int) -> torch.Tensor:
        age = self.ages.get(tag, 0)
        if age % self.every == 0:
            self.draws[tag] = torch.randn(self.model.log_std.shape, generator=self.generator)
        self.ages[tag] = age + 1
        return self.draws[tag]

    def serve(self, items: Sequence[tuple[np.ndarray, int]]) -> list[Answer]:
        batch = torch.from_numpy(np.stack([observation for observation, _ in items]))
        exploration = torch.stack([self._draw(tag) for _, tag in items])
        actions, log_probs, values = self.model.act_sde(batch, exploration)
        return list(zip(actions.numpy(), log_probs.tolist(), values.tolist()))


def acting_policy(model: ActorCritic, deterministic: bool = False, generator: torch.Generator | None = None
                  ) -> Policy:
    """The acting policy of ``model``: :class:`RecurrentPolicy` when it carries a state, :class:`StateDependentPolicy`
    when it explores state-dependently (``model.sde``, sampling), else :class:`Policy`."""
    if getattr(model, "state_size", 0):
        return RecurrentPolicy(model, deterministic, generator)
    if not deterministic and isinstance(model, ActorCritic) and model.settings.sde and not model.discrete:
        return StateDependentPolicy(model, generator)
    return Policy(model, deterministic, generator)


class EpsilonGreedy:
    """DQN's acting: the Q-network's greedy action, or with probability ε of the item's lane (its tag: a slot of
    this actor) a uniform random one. Lane ``i`` of the fleet's ``G`` explores with ``ε^(1 + spread · i / (G − 1))``
    (Ape-X, Horgan et al. 2018; spread 0: every lane ``ε``).

    Args:
        first, total: this actor's first lane in the fleet and the fleet's lane count.
    """

    def __init__(self, model: Any, epsilon: float, spread: float, first: int, total: int,
                 random: np.random.Generator) -> None:
        self.model, self.random = model, random
        self.actions = int(model.action_space.n)
        self.exponents = 1.0 + spread * np.arange(first, total) / max(1, total - 1)
        self.set_exploration(epsilon)

    def set_exploration(self, epsilon: float) -> None:
        """ε now: lane ``i`` explores with ``ε^exponent_i``."""
        self.epsilons = float(epsilon) ** self.exponents

    def serve(self, items: Sequence[tuple[np.ndarray, int]]) -> list[Answer]:
        batch = torch.from_numpy(np.stack([observation for observation, _ in items]))
        actions, log_probs, values = self.model.act(batch)
        actions = actions.numpy()
        slots = np.array([tag for _, tag in items])
        explore = self.random.random(len(items)) < self.epsilons[slots]
        actions[explore] = self.random.integers(self.actions, size=int(explore.sum()))
        return list(zip(actions, log_probs.tolist(), values.tolist()))


class PopulationPolicy:
    """Many frozen policies in one forward: an item's tag is the index of the policy that acts on it."""

    def __init__(self, stacked: StackedPolicies, deterministic: bool = False,
                 generator: torch.Generator | None = None) -> None:
        self.stacked, self.deterministic, self.generator = stacked, deterministic, generator

    def serve(self, items: Sequence[tuple[np.ndarray, int]]) -> list[Answer]:
        observations = torch.from_numpy(np.stack([observation for observation, _ in items]))
        tags = torch.tensor([tag for _, tag in items])
        actions = self.stacked.act(observations, tags, self.deterministic, self.generator).numpy()
        return [(action, 0.0, 0.0) for action in actions]
