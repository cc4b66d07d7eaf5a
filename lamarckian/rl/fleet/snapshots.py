"""One policy's opponent pool as an actor holds it: the snapshots' weights, their sampling probabilities, and the
stacked acting policies that let all of them act in one forward."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import torch

from ...model import ActorCritic
from ...model.stacked import StackedPolicies
from ..acting import PopulationPolicy


class PoolPolicies:
    """The snapshots of one policy's pool (``set_pool``), as acting policies for an actor's batched inference.

    Args:
        template: a network of the policy's architecture (the snapshots' weights are loaded into stacked copies).
        generator: the actor's action stream (the sampling server draws from it).
    """

    def __init__(self, template: ActorCritic, generator: torch.Generator) -> None:
        self.template, self.generator = template, generator
        self.blobs: dict[int, np.ndarray] = {}
        self.ids: list[int] = []
        self.probabilities = np.zeros(0)
        self.sampling: PopulationPolicy | None = None   # the snapshots sampling their actions
        self.mean: PopulationPolicy | None = None       # the same snapshots playing their mean actions

    def update(self, probabilities: Mapping[int, float], blobs: Mapping[int, np.ndarray] | None = None) -> None:
        """New snapshots' ``blobs`` and every member's sampling probability; members absent from ``probabilities``
        leave. ValueError for a member without weights."""
        for snapshot_id, blob in (blobs or {}).items():
            self.blobs[int(snapshot_id)] = np.asarray(blob, np.float32)
        ids = [int(i) for i in probabilities]
        missing = [i for i in ids if i not in self.blobs]
        if missing:
            raise ValueError(f"pool snapshots {missing} have probabilities but no weights")
        if ids != self.ids or blobs:
            self.blobs = {i: self.blobs[i] for i in ids}
            self.ids = ids
            if ids:
                stacked = StackedPolicies(self.template, [self.blobs[i] for i in ids])
                self.sampling = PopulationPolicy(stacked, generator=self.generator)
                self.mean = PopulationPolicy(stacked, deterministic=True)
        self.probabilities = np.array([float(probabilities[i]) for i in probabilities])

    def draw(self, random: np.random.Generator, count: int) -> list[int]:
        """``count`` members' indices drawn from the probabilities."""
        return [int(p) for p in random.choice(len(self.ids), size=count, p=self.probabilities)]

    def policy(self, mean: bool) -> PopulationPolicy:
        """The snapshots playing their mean actions, or sampling (RuntimeError while the pool is empty)."""
        chosen = self.mean if mean else self.sampling
        if chosen is None:
            raise RuntimeError("the opponent pool has no snapshots yet")
        return chosen

    def newest(self) -> PopulationPolicy:
        """The newest snapshot alone, deterministic (evaluation against ``self``)."""
        return PopulationPolicy(StackedPolicies(self.template, [self.blobs[self.ids[-1]]]), deterministic=True)
