"""Who plays which seat of an actor's games: the learner's seats of each episode, the policy of every seat, and the
opponents drawn for the others from the policies' pools (or the MDP's rule)."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch

from ...config.sections import OpponentSettings, RLSettings
from ...mdp import MDP
from ...rating.results import NONE, POOL, RULE
from ..acting import PopulationPolicy
from ..policies import roles_of
from .snapshots import PoolPolicies


class Seating:
    """The seats of one game and who plays them.

    Args:
        mdp: one of the actor's environments (its seats).
        config: the run's configuration (``rl.policies``, ``rl.shared_seats``, ``rl.swap``, ``rl.opponent``).
        members: the actor's network per policy ("" with one policy for every seat).
        generator: the actor's action stream (the pools' sampling policies draw from it).
        random: the actor's choice stream (seats, opponents).
    """

    def __init__(self, mdp: MDP, config: Mapping[str, Any], members: Mapping[str, torch.nn.Module],
                 generator: torch.Generator, random: np.random.Generator) -> None:
        rl = RLSettings.from_config(config)
        opponent = OpponentSettings.from_config(config)
        self.seats = len(mdp)
        self.roles = roles_of(mdp, config)                     # rl.policies: a policy per role (None: one)
        self.shared = rl.shared_seats                          # every seat learns (its role's policy)
        self.swap = rl.swap
        self.rule_probability, self.mean_probability = opponent.rule, opponent.deterministic
        self.seat_policy = list(self.roles.of_seat) if self.roles is not None else [""] * self.seats
        self.random = random
        self.pools = {name: PoolPolicies(member, generator) for name, member in members.items()}

    def fixed_learners(self, slot: int) -> list[int]:
        """The seats the learner plays in every episode of environment ``slot`` ([] where a seat is drawn per
        episode)."""
        if self.shared:
            return list(range(self.seats))
        if self.roles is not None:
            return self.roles.seats_of(self.roles.names[slot % len(self.roles.names)])
        return []

    def learners(self, slot: int) -> list[int]:
        """The seats the learner plays in the next episode of ``slot``."""
        fixed = self.fixed_learners(slot)
        if fixed or self.seats == 1:
            return fixed or [0]
        return [int(self.random.integers(self.seats)) if self.swap else 0]

    def pick_opponents(self, learners: list[int]) -> tuple[list[tuple[int, int]], str, list[int]]:
        """([(opponent seat, index in the pool of its policy)], opponent kind: ``rule``, ``pool`` or ``none``, the
        pool snapshot ids) for a new episode of ``learners`` (the ids now: the pool may change while the episode
        runs)."""
        others = [seat for seat in range(self.seats) if seat not in learners]
        if not others:
            return [], NONE, []
        policies = list(dict.fromkeys(self.seat_policy[seat] for seat in others))
        if any(not self.pools[name].ids for name in policies) or (
                self.rule_probability > 0 and self.random.random() < self.rule_probability):
            return [], RULE, []
        picks: dict[int, int] = {}
        for name in policies:                          # one draw per policy's pool, its seats in order
            seats = [seat for seat in others if self.seat_policy[seat] == name]
            picks.update(zip(seats, self.pools[name].draw(self.random, len(seats))))
        opponents = [(seat, picks[seat]) for seat in others]
        return opponents, POOL, [self.pools[self.seat_policy[seat]].ids[index] for seat, index in opponents]

    def opponent_policy(self, seat: int, mean: bool) -> PopulationPolicy:
        """The stacked snapshots of ``seat``'s pool, playing their mean actions or sampling (the pool has
        snapshots: :meth:`pick_opponents` drew from it)."""
        return self.pools[self.seat_policy[seat]].policy(mean)

    def draws_mean(self) -> bool:
        """Whether a new episode's opponents play their mean actions (probability ``rl.opponent.deterministic``)."""
        return self.mean_probability > 0 and self.random.random() < self.mean_probability
