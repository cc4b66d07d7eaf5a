"""The opponents of a vectorized population's members: each member's own pool of snapshots, with a league the other
members' snapshots and members that other learners train, and the initial policy; per environment the one that
plays it, drawn on the device; the games tallied for a Bradley-Terry (Elo) rating of the members.

Every opponent of every member acts in two stacked forwards (:meth:`LeagueOpponents.act`): the members' pools in
one set that only each member's environments draw, everything else in a shared set.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ...config.sections import Section
from ...mdp.vec import VecTask
from ...model import ActorCritic, to_blob
from ...model.stacked import StackedPolicies
from ...rating.tournament import Tally
from ..selfplay.pool import OpponentPool, PoolSettings, fold_decayed, pfsp_weight
from ..selfplay.window import outcome_score
from .opponents import OpponentDraws

LeagueKey = tuple[Any, ...]   # an opponent: ("initial",), ("member", m), ("external", id), ("pool", m, snapshot)
INITIAL: LeagueKey = ("initial",)


@dataclasses.dataclass(frozen=True)
class LeagueSettings(Section):
    """``ec.league``: how the members of a vectorized population play each other (with ``ec.selfplay``)."""

    KEY = "ec.league"

    share: float
    refresh: int

    def __post_init__(self) -> None:
        if not 0 <= self.share <= 1 or self.refresh < 1:
            raise ValueError(f"ec.league: share in [0, 1] (got {self.share}), refresh >= 1 (got {self.refresh})")



class LeagueOpponents(OpponentDraws):
    """Opponents for ``size`` members, each on its own ``num_envs / size`` environments.

    Args:
        task, generator, mean_share: see :class:`OpponentDraws`.
        size: the members.
        pool_settings: ``rl.opponent.pool`` (each member's pool).
        initial_blob: the initial policy's weights (the first snapshot of every pool, the opponent of the initial
            lanes).
        initial_share: ``mdp.vec.initial_share`` of each member's environments play the initial policy.
        members: the members' networks (stacked copies of their architecture play).
        league: with a league, its share of the other games and its refresh (None: each member plays its own pool
            and the initial policy only).
    """

    def __init__(self, task: VecTask, generator: torch.Generator, mean_share: float, size: int,
                 pool_settings: PoolSettings, initial_blob: np.ndarray, initial_share: float,
                 members: Sequence[ActorCritic], league: LeagueSettings | None) -> None:
        super().__init__(task, generator, mean_share)
        self.size, self.pool_settings, self.initial_blob, self.members = size, pool_settings, initial_blob, members
        member_envs = task.num_envs // size
        lanes = torch.arange(task.num_envs, device=self.device)
        self.member_of_env = lanes // member_envs
        self.initial_lane = lanes % member_envs < round(initial_share * member_envs)
        self.league = league if league is not None and size > 1 else None
        self.pools = [self.fresh_pool() for _ in range(size)]
        self.league_blobs = [to_blob(model) for model in members]
        self.external: dict[int, np.ndarray] = {}      # other learners' members in the league (id → blob)
        self.records: dict[LeagueKey, np.ndarray] = {}  # league opponent → each member's decayed (score, games) (2, P)
        self.tally = Tally(size + 1)                   # members, the external members, last the initial policy
        self.fixed_width = self.device.type != "cpu"   # opponent forwards without a host sync (see OnDeviceLearner)
        self.keys: list[LeagueKey] = []
        self.stack()

    def fresh_pool(self) -> OpponentPool:
        """A pool with the initial policy as its first snapshot."""
        pool = OpponentPool(self.pool_settings)
        pool.add(self.initial_blob, iteration=0)
        return pool

    def league_keys(self) -> list[LeagueKey]:
        """The league's opponents: every member's snapshot, then the external members (none without a league)."""
        if not self.league:
            return []
        return [("member", m) for m in range(self.size)] + [("external", i) for i in self.external]

    def set_external(self, blobs: Mapping[int, np.ndarray]) -> None:
        """Members trained by other learners (id → weight blob) join the league, replacing the previous ones; the
        records against those that stay are kept. Call :meth:`reset_tally` after it."""
        self.external = {int(i): np.asarray(blob) for i, blob in blobs.items()}
        self.records = {k: v for k, v in self.records.items() if k[0] != "external" or k[1] in self.external}
        self.stack()

    def replace_member(self, member: int, pool: OpponentPool) -> None:
        """Slot ``member`` took another network: its pool, its league snapshot now; its league record starts over."""
        self.pools[member] = pool
        self.league_blobs[member] = to_blob(self.members[member])
        self.records.pop(("member", member), None)
        for record in self.records.values():
            record[:, member] = 0.0
        self.stack()

    def refresh(self) -> None:
        """The members' league snapshots become their current weights."""
        self.league_blobs = [to_blob(model) for model in self.members]
        self.stack()

    def stack(self) -> None:
        """Stack every opponent: the members' league snapshots (with a league) and, last, the initial policy (the
        fixed opponent of the initial lanes) in one set that any environment may draw; each member's pool in a
        second set that only the member's environments draw (so a GPU's fixed-width forward pads a pool snapshot
        to ``num_envs / P`` rows, not ``num_envs``). Games in progress keep their opponent if it is still there;
        the others (and every environment at the start) draw one."""
        previous = self.keys
        league = self.league_keys()
        pools: list[LeagueKey] = [("pool", m, i) for m, pool in enumerate(self.pools) for i in pool.snapshots]
        keys = self.keys = league + pools + [INITIAL]      # an opponent's number: its place here
        blobs = [self.league_blobs[k[1]] if k[0] == "member" else self.external[k[1]] for k in league]
        self.shared = StackedPolicies(self.members[0], [*blobs, self.initial_blob], self.device)
        self.pool_stack = StackedPolicies(self.members[0], [self.pools[k[1]].snapshots[k[2]].blob for k in pools],
                                          self.device)
        in_pool = [k[0] == "pool" for k in keys]
        tensor = lambda values: torch.tensor(values, dtype=torch.int64, device=self.device)  # noqa: E731
        self.to_pool = tensor([i - len(league) if pooled else -1 for i, pooled in enumerate(in_pool)])
        self.to_shared = tensor([-1 if pooled else min(i, len(league)) for i, pooled in enumerate(in_pool)])
        self.first_pool = tensor([pools.index(("pool", m, next(iter(pool.snapshots))))
                                  for m, pool in enumerate(self.pools)])
        self.weights = torch.tensor(self._probabilities(), dtype=torch.float32, device=self.device)
        drawn = self._draw()
        if not previous:
            self.opponent, self.opponent_mean = drawn, self._draw_mean()
            return
        position = {key: index for index, key in enumerate(keys)}
        moved = tensor([position.get(key, -1) for key in previous])
        kept = moved[self.opponent]
        self.opponent = torch.where(kept >= 0, kept, drawn)

    def act(self, observations: torch.Tensor) -> torch.Tensor:
        """The opponents' actions ``(E × seats, A)`` for their observations (seat-major, as the task orders them):
        the pool set acts for the rows whose opponent is a pool snapshot, the shared set for the others. On the
        CPU each set gets exactly its rows; on a GPU every row goes to both (no host synchronization: a row of
        the other set is parked on its member's first pool snapshot, or on the first shared policy) and the
        right action is picked."""
        seats = self.task.num_agents - 1
        opponent, mean = self.opponent.repeat(seats), self.opponent_mean.repeat(seats)
        pool_row = self.to_pool[opponent]
        in_pool = pool_row >= 0
        pool_policy = torch.where(in_pool, pool_row, self.first_pool[self.member_of_env.repeat(seats)])
        shared_policy = self.to_shared[opponent].clamp(min=0)
        sets = ((self.pool_stack, pool_policy, in_pool, self.task.num_envs // self.size * seats),
                (self.shared, shared_policy, ~in_pool, self.task.num_envs * seats))
        if not self.fixed_width:
            actions = observations.new_zeros(len(observations), self.task.num_actions)
            for stacked, policy, rows, _ in sets:
                if bool(rows.any()):
                    actions[rows] = stacked.act(observations[rows], policy[rows], deterministic=mean[rows],
                                                generator=self.generator)
            return actions
        pooled, shared = (stacked.act(observations, policy, deterministic=mean, generator=self.generator,
                                      width=width) for stacked, policy, _, width in sets)
        return torch.where(in_pool[:, None], pooled, shared)

    def _probabilities(self) -> np.ndarray:
        """``(P, K)``: each member's chance to draw each stacked opponent outside the initial lanes."""
        weights = np.zeros((self.size, len(self.keys)))
        share = self.league.share if self.league else 0.0
        column = {key: index for index, key in enumerate(self.keys)}
        for member, pool in enumerate(self.pools):
            for snapshot_id, probability in pool.probabilities().items():
                weights[member, column[("pool", member, snapshot_id)]] = (1.0 - share) * probability
            others = [key for key in self.league_keys() if key != ("member", member)]
            if share and others:
                records = np.array([self.records.get(key, np.zeros((2, self.size)))[:, member] for key in others])
                rates = np.where(records[:, 1] > 0, records[:, 0] / np.maximum(records[:, 1], 1e-9), 0.5)
                pfsp = np.array([pfsp_weight(rate, pool.settings.weighting) for rate in rates]) + 1e-6
                for key, weight in zip(others, pfsp / pfsp.sum()):
                    weights[member, column[key]] = share * weight
        return weights

    def _draw(self) -> torch.Tensor:
        """A stacked opponent per environment ``(E,)`` by its member's probabilities (the initial policy in the
        initial lanes); sampled on the device."""
        drawn = torch.multinomial(self.weights[self.member_of_env], 1, replacement=True,
                                  generator=self.generator).squeeze(1)
        return torch.where(self.initial_lane, len(self.keys) - 1, drawn)

    def record(self, outcomes: np.ndarray) -> None:
        """Fold one rollout's game counts ``(P, K, 3)`` into the pools, the league record and the tally."""
        decay = self.pools[0].settings.decay
        external = {i: self.size + position for position, i in enumerate(self.external)}
        for column, key in enumerate(self.keys):
            counts = outcomes[:, column]
            if key[0] == "pool":
                self.pools[key[1]].record_counts({key[2]: counts[key[1]]})
                continue
            for member in range(self.size):
                wins, draws, losses = counts[member]
                if not wins + draws + losses:
                    continue
                if key[0] == "member":
                    opponent = key[1]
                elif key[0] == "external":
                    opponent = external[key[1]]
                else:                                     # the initial policy: the tally's last entrant
                    opponent = self.tally.games.shape[0] - 1
                self.tally.add_counts(member, opponent, wins, draws, losses)
                if key[0] != "initial":
                    record = self.records.setdefault(key, np.zeros((2, self.size)))
                    decayed_score, decayed_games = record[:, member]
                    record[:, member] = fold_decayed(decayed_score, decayed_games, *outcome_score(wins, draws, losses),
                                                     decay)

    def reset_tally(self) -> None:
        """Start counting the members' games anew (a round begins)."""
        self.tally = Tally(self.size + len(self.external) + 1)

    def ratings(self) -> np.ndarray:
        """Bradley-Terry Elo ``(P + X + 1,)`` of the members, the X external members and, last, the initial policy,
        from the games tallied since :meth:`reset_tally` (training games: the members' stochastic actions, the
        opponents' share of mean actions)."""
        return self.tally.ratings()

    def state_dict(self) -> dict[str, Any]:
        """The pools and the league as checkpoints hold them."""
        return {"pools": [pool.state_dict() for pool in self.pools],
                "league": {"blobs": [torch.from_numpy(b.copy()) for b in self.league_blobs],
                           "external": {i: torch.from_numpy(b.copy()) for i, b in self.external.items()},
                           "records": [[list(key), torch.from_numpy(record.copy())]
                                       for key, record in self.records.items()]}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Undo :meth:`state_dict`; games restart: every environment draws its opponent anew."""
        for pool, saved in zip(self.pools, state["pools"]):
            pool.load_state_dict(saved)
        self.league_blobs = [blob.numpy().copy() for blob in state["league"]["blobs"]]
        self.external = {int(i): blob.numpy().copy() for i, blob in state["league"]["external"].items()}
        self.records = {tuple(key): record.numpy().copy() for key, record in state["league"]["records"]}
        self.keys = []
        self.stack()
