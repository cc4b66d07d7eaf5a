"""The fleet learner's opponent pools, one per policy ("" with one policy for every seat): their first snapshots,
the games against them, new snapshots of the learning policies, and what the actors and checkpoints hold of them."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import torch

from ...config import lookup
from ...model import to_blob
from ...model.policy_set import PolicySet
from ...rating.results import POOL, EpisodeResult
from ...record.checkpoint import upgrade_checkpoint
from ..selfplay.pool import OpponentPool, PoolSettings
from .beside import Pool

SNAPSHOT_ID_STRIDE = 1_000_000   # rl.policies: the k-th policy's pool numbers its snapshots from k × this


def member_of(model: torch.nn.Module, policy: str) -> torch.nn.Module:
    """``policy``'s network in ``model`` (the model itself with one policy for every seat)."""
    return model[policy] if isinstance(model, PolicySet) else model


class PolicyPools:
    """A pool per policy, each with its first opponent: the initial policy, or the weights of
    ``rl.opponent.pool.initial`` (a checkpoint file). The ``k``-th policy's snapshot ids start at ``k`` ×
    :data:`SNAPSHOT_ID_STRIDE`, so an episode's snapshot ids name their pools. Empty where no seat is played by a
    snapshot (single-player MDPs, ``rl.shared_seats``).

    Args:
        config: the run's configuration (``rl.opponent.pool``).
        model: the learner's network (a :class:`PolicySet` with ``rl.policies``).
        policies: the names of ``rl.policies`` (None: one policy for every seat).
        opponents: some seats are played by snapshots (else there are no pools).
    """

    def __init__(self, config: Mapping[str, Any], model: torch.nn.Module, policies: Sequence[str] | None,
                 opponents: bool) -> None:
        self.config, self.per_policy = config, policies is not None
        self.frozen = False                   # play_against: the pool is exactly a population, no snapshots added
        names = (tuple(policies) if policies is not None else ("",)) if opponents else ()
        source = model
        initial = lookup(config, "rl.opponent.pool.initial") if names else None
        if initial:
            path = Path(initial).expanduser()
            state = upgrade_checkpoint(torch.load(path, map_location="cpu", weights_only=True), path)
            source = copy.deepcopy(model)
            source.load_state_dict(state["model"])
        self.pools: dict[str, OpponentPool] = {}
        for number, name in enumerate(names):
            pool = self.pools[name] = OpponentPool(PoolSettings.from_config(config))
            pool.next_id = number * SNAPSHOT_ID_STRIDE
            pool.add(to_blob(member_of(source, name)), iteration=0)

    def __bool__(self) -> bool:
        return bool(self.pools)

    def __iter__(self) -> Iterator[str]:
        return iter(self.pools)

    def __getitem__(self, policy: str) -> OpponentPool:
        return self.pools[policy]

    def pool_of(self, snapshot_id: int) -> OpponentPool:
        """The pool a snapshot id belongs to."""
        return list(self.pools.values())[snapshot_id // SNAPSHOT_ID_STRIDE] if self.per_policy else self.pools[""]

    def record(self, results: list[EpisodeResult]) -> None:
        """Record the games against snapshots (a snapshot's pool keeps the learners' scores against it: its chooser
        serves them)."""
        for result in results:
            if result.opponent != POOL:
                continue
            if len(result.snapshots) == 1 and result.win is not None:      # two players: the game's outcome
                self.pool_of(result.snapshots[0]).record(result.snapshots[0], result.win)
            else:                               # N players: the learner's score against each seat's snapshot
                for snapshot_id, score in zip(result.snapshots, result.scores):
                    self.pool_of(snapshot_id).record(snapshot_id, score)

    def grow(self, model: torch.nn.Module, iteration: int) -> Iterator[tuple[str, dict[int, float], dict[int, Any]]]:
        """Freeze each policy of ``model`` into its pool where the pool's add rule holds; per pool, what its actors
        are sent: ``(name, probabilities, new snapshots' blobs)``."""
        for name, pool in self.pools.items():
            added = {}
            if not self.frozen and pool.should_add(iteration):
                snapshot = pool.add(to_blob(member_of(model, name)), iteration)
                added[snapshot.id] = snapshot.blob
            yield name, pool.probabilities(), added

    def play_against(self, members: Mapping[int, np.ndarray], iteration: int) -> None:
        """The pool becomes exactly ``members`` (id → weight blob), drawn by the configured chooser, and no
        snapshots of the learner are added."""
        if self.per_policy:
            raise ValueError("rl.policies: a population's members play one policy in every seat")
        settings = dataclasses.replace(PoolSettings.from_config(self.config), capacity=max(1, len(members)))
        pool = self.pools[""] = OpponentPool(settings)
        for member_id, blob in members.items():
            pool.add(blob, iteration, snapshot_id=int(member_id))
        self.frozen = True

    def newest(self) -> Pool | None:
        """The pool the evaluation plays ``self`` from: the newest snapshot alone (None without a pool)."""
        pool = self.pools.get("")
        if pool is None or not pool.snapshots:
            return None
        newest = next(reversed(pool.snapshots))
        return {newest: 1.0}, {newest: pool.snapshots[newest].blob}

    def for_actors(self) -> dict[str, Pool]:
        """Every pool as an actor is built with it: ``(probabilities, blobs)`` per policy."""
        return {name: (pool.probabilities(), {i: s.blob for i, s in pool.snapshots.items()})
                for name, pool in self.pools.items()}

    def state_dict(self) -> dict[str, Any]:
        """The pools as checkpoints hold them (one pool under format 1's key ``pool``)."""
        states = {name: pool.state_dict() for name, pool in self.pools.items()}
        return {"pools": states} if self.per_policy else {"pool": states.get("")}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Undo :meth:`state_dict` (pools the checkpoint lacks keep their state)."""
        saved = state.get("pools") or {} if self.per_policy else {"": state.get("pool")}
        for name, pool in self.pools.items():
            entry = saved.get(name)
            if entry is not None:
                pool.load_state_dict(entry)

    def statistics(self) -> dict[str, float]:
        """Every pool's scalars (``pool/<policy>/...`` with several policies)."""
        return {key if not name else key.replace("pool/", f"pool/{name}/", 1): value
                for name, pool in self.pools.items() for key, value in pool.statistics().items()}
