"""Factorised actions: a ``MultiDiscrete``, ``MultiBinary``, or a ``Dict``/``Tuple`` of those and of ``Discrete`` and
``Box`` spaces, as independent parts (one categorical per discrete choice, one Gaussian per continuous block) whose
log-probabilities and entropies add up: what stable-baselines3 and RLlib do for the same spaces.

A policy head's output row ``(A,)`` holds every categorical part's logits, then every Gaussian part's means. An
action row ``(D,)`` holds one column per categorical part (its index, counted from 0) and one per Gaussian
dimension, in the order :func:`flatten` lists the parts; :meth:`FactoredActions.env_action` rebuilds what the
environment takes (``space.start`` added back, a ``Dict``/``Tuple`` reassembled).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import gymnasium
import numpy as np
import torch

FACTORED = (gymnasium.spaces.MultiDiscrete, gymnasium.spaces.MultiBinary, gymnasium.spaces.Dict,
            gymnasium.spaces.Tuple)


@dataclasses.dataclass(frozen=True)
class Part:
    """One leaf of an action space: ``choices`` > 0 for a categorical (its index plus ``start`` is the action),
    else a Gaussian block of ``shape`` inside ``low``/``high``."""

    choices: int = 0
    start: int = 0
    shape: tuple[int, ...] = ()
    low: np.ndarray | None = None
    high: np.ndarray | None = None

    @property
    def width(self) -> int:
        """Columns of the action row: 1 for a categorical, the block's size for a Gaussian."""
        return 1 if self.choices else int(np.prod(self.shape, dtype=np.int64))


def flatten(space: gymnasium.Space) -> list[Part]:
    """The leaves of ``space`` in action-row order (a ``MultiDiscrete``'s elements in C order). TypeError names a
    space that cannot be an action."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return [Part(choices=int(space.n), start=int(space.start))]
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return [Part(choices=int(n), start=int(s)) for n, s in zip(space.nvec.reshape(-1), space.start.reshape(-1))]
    if isinstance(space, gymnasium.spaces.MultiBinary):
        return [Part(choices=2) for _ in range(int(np.prod(space.shape)))]
    if isinstance(space, gymnasium.spaces.Box):
        return [Part(shape=tuple(space.shape), low=space.low.reshape(-1), high=space.high.reshape(-1))]
    if isinstance(space, gymnasium.spaces.Tuple):
        return [part for inner in space.spaces for part in flatten(inner)]
    if isinstance(space, gymnasium.spaces.Dict):
        return [part for inner in space.spaces.values() for part in flatten(inner)]
    raise TypeError(f"action space {space} is not supported (Discrete, Box, MultiDiscrete, MultiBinary, and Dict or "
                    "Tuple of those)")


class FactoredDistribution:
    """Independent categoricals (``logits``, one ``(N, n)`` each) and a diagonal Gaussian (``mean``, ``std``
    ``(N, G)``, or None): log-probabilities ``(N,)`` and entropies ``(N,)`` are sums over the parts."""

    def __init__(self, logits: list[torch.Tensor], mean: torch.Tensor | None, std: torch.Tensor | None) -> None:
        self.logits = [torch.log_softmax(chunk, -1) for chunk in logits]
        self.mean, self.std = mean, std

    def log_prob(self, action: torch.Tensor) -> torch.Tensor:
        """``(N,)`` log-probabilities of action rows ``(N, D)``."""
        terms = [log_probs.gather(-1, action[:, column].long().unsqueeze(-1)).squeeze(-1)
                 for column, log_probs in enumerate(self.logits)]
        if self.mean is not None and self.std is not None:
            gaussian = torch.distributions.Normal(self.mean, self.std)
            terms.append(gaussian.log_prob(action[:, len(self.logits):].float()).sum(-1))
        return torch.stack(terms).sum(0)

    def entropy(self) -> torch.Tensor:
        """``(N,)`` entropies."""
        terms = [-(log_probs.exp() * log_probs).sum(-1) for log_probs in self.logits]
        if self.mean is not None and self.std is not None:
            terms.append((0.5 + 0.5 * math.log(2 * math.pi) + torch.log(self.std)).sum(-1))
        return torch.stack(terms).sum(0)


class FactoredActions:
    """The parts of one factorised action space and what a policy does with them.

    Attributes:
        parts: the leaves (:func:`flatten`); categoricals first in every array below, in their order.
        head: width ``A`` of the policy head's output row (logits, then Gaussian means).
        gaussian: Gaussian dimensions ``G`` (their log standard deviations are the network's ``log_std (G,)``).
        width: columns ``D`` of an action row.
    """

    def __init__(self, space: gymnasium.Space) -> None:
        self.space = space
        leaves = flatten(space)
        self.categorical = [part for part in leaves if part.choices]
        self.continuous = [part for part in leaves if not part.choices]
        self.choices = [part.choices for part in self.categorical]
        self.logits = sum(self.choices)
        self.gaussian = sum(part.width for part in self.continuous)
        self.head = self.logits + self.gaussian
        self.width = len(self.categorical) + self.gaussian
        self.dtype = np.float32 if self.gaussian else np.int64

    def split(self, out: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor | None]:
        """Head outputs ``(N, A)`` → each categorical's logits ``(N, n)`` and the Gaussian means ``(N, G)``."""
        logits = list(torch.split(out[..., :self.logits], self.choices, -1)) if self.choices else []
        return logits, (out[..., self.logits:] if self.gaussian else None)

    def distribution(self, out: torch.Tensor, log_std: torch.Tensor | None) -> FactoredDistribution:
        """The action distribution of head outputs ``(N, A)`` (``log_std (G,)`` or ``(N, G)`` of the Gaussian)."""
        logits, mean = self.split(out)
        std = None if mean is None or log_std is None else log_std.exp().expand_as(mean)
        return FactoredDistribution(logits, mean, std)

    def draw(self, out: torch.Tensor, log_std: torch.Tensor | None, deterministic: bool | torch.Tensor,
             generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Action rows ``(N, D)`` and their log-probabilities ``(N,)``; ``deterministic`` (a bool, or ``(N,)`` bool
        per row): the most likely index of each categorical and the Gaussian means."""
        logits, mean = self.split(out)
        columns, log_prob = [], torch.zeros(out.shape[0], device=out.device)
        rows = deterministic if isinstance(deterministic, torch.Tensor) else None   # per-row choice, or one for all
        for chunk in logits:
            log_probs = torch.log_softmax(chunk, -1)
            choice = log_probs.argmax(-1)
            if rows is not None or not deterministic:
                drawn = torch.multinomial(log_probs.exp(), 1, generator=generator).squeeze(-1)
                choice = drawn if rows is None else torch.where(rows, choice, drawn)
            columns.append(choice.to(out.dtype).unsqueeze(-1))
            log_prob = log_prob + log_probs.gather(-1, choice.unsqueeze(-1)).squeeze(-1)
        if mean is not None:
            assert log_std is not None, "Gaussian parts need the network's log_std"
            log_std = log_std.expand_as(mean)
            noise = torch.zeros_like(mean) if rows is None and deterministic else \
                torch.randn(mean.shape, generator=generator, device=mean.device)
            if rows is not None:
                noise = noise * (~rows).unsqueeze(-1)
            columns.append(mean + log_std.exp() * noise)
            log_prob = log_prob + (-0.5 * noise.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        action = torch.cat(columns, -1)
        return (action if self.gaussian else action.long()), log_prob

    def env_action(self, row: np.ndarray, bound: str) -> Any:
        """One action row ``(D,)`` as the environment takes it: indices plus ``start``, Gaussian blocks inside their
        bounds (``bound``: ``clip``, or ``tanh`` to squash), reassembled into the space's structure."""
        row = np.asarray(row).reshape(-1)
        values: list[Any] = [int(row[column]) + part.start for column, part in enumerate(self.categorical)]
        offset = len(self.categorical)
        blocks = []
        for part in self.continuous:
            block = row[offset:offset + part.width].astype(np.float32)
            offset += part.width
            assert part.low is not None and part.high is not None
            if bound == "tanh":
                block = part.low + (np.tanh(block) + 1.0) * 0.5 * (part.high - part.low)
            blocks.append(np.clip(block, part.low, part.high).astype(np.float32).reshape(part.shape))
        return _assemble(self.space, iter(values), iter(blocks))


def _assemble(space: gymnasium.Space, categorical: Any, blocks: Any) -> Any:
    """Rebuild ``space``'s structure from its categorical values and Gaussian blocks, each in :func:`flatten`'s
    order of its kind."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return next(categorical)
    if isinstance(space, gymnasium.spaces.MultiDiscrete):
        return np.array([next(categorical) for _ in range(space.nvec.size)], space.dtype).reshape(space.nvec.shape)
    if isinstance(space, gymnasium.spaces.MultiBinary):
        return np.array([next(categorical) for _ in range(int(np.prod(space.shape)))], space.dtype).reshape(space.shape)
    if isinstance(space, gymnasium.spaces.Box):
        return next(blocks)
    if isinstance(space, gymnasium.spaces.Tuple):
        return tuple(_assemble(inner, categorical, blocks) for inner in space.spaces)
    assert isinstance(space, gymnasium.spaces.Dict)
    return {key: _assemble(inner, categorical, blocks) for key, inner in space.spaces.items()}
