"""Self-play opponent pools: frozen snapshots of the learner, per-opponent statistics, and choosers
(uniform, latest-heavy, prioritized fictitious self-play)."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ...config import Expression
from ...config.sections import Section
from .window import ScoreWindow, outcome_score

CHOOSERS = ("uniform", "latest", "pfsp")
WEIGHTINGS = ("linear", "squared", "variance")


@dataclasses.dataclass
class Snapshot:
    """A frozen copy of the learner and the learner's record against it.

    ``iteration``, ``cost`` (env steps) and ``elapsed`` (seconds of training) say when it was frozen.
    ``decayed_score`` / ``decayed_games`` are the learner's score (win 1, draw 0.5) and game count, each
    multiplied by ``decay`` per new game against this opponent: recent games count most.
    """

    id: int
    iteration: int
    blob: np.ndarray
    cost: int = 0
    elapsed: float = 0.0
    games: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0
    decayed_score: float = 0.0
    decayed_games: float = 0.0

    def win_rate(self) -> float:
        """The learner's decayed win rate against this opponent (draws half); 0.5 before any game."""
        return 0.5 if self.decayed_games <= 0 else self.decayed_score / self.decayed_games


@dataclasses.dataclass(frozen=True)
class PoolSettings(Section):
    """The ``rl.opponent.pool`` keys (see lamarckian.yml; ``initial`` is the learner's)."""

    KEY = "rl.opponent.pool"
    OTHER_KEYS = ("initial",)

    capacity: int
    add: str
    games_to_check: int
    chooser: str
    weighting: str
    decay: float
    latest_share: float

    def __post_init__(self) -> None:
        if self.chooser not in CHOOSERS:
            raise ValueError(f"rl.opponent.pool.chooser={self.chooser!r}: expected one of {CHOOSERS}")
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"rl.opponent.pool.weighting={self.weighting!r}: expected one of {WEIGHTINGS}")
        if self.capacity < 1 or not 0 < self.decay <= 1 or not 0 <= self.latest_share <= 1:
            raise ValueError("rl.opponent.pool: capacity >= 1, 0 < decay <= 1, 0 <= latest_share <= 1")


def pfsp_weight(win_rate: float, weighting: str) -> float:
    """Prioritized fictitious self-play weight of an opponent the learner beats with probability ``win_rate``."""
    if weighting == "linear":
        return 1.0 - win_rate
    if weighting == "squared":
        return (1.0 - win_rate) ** 2
    return win_rate * (1.0 - win_rate)


def fold_decayed(decayed_score: float, decayed_games: float, games: float, score: float, decay: float
                 ) -> tuple[float, float]:
    """A decayed record after ``games`` more games scoring ``score`` in all: each game multiplies the earlier ones by
    ``decay``, so n unordered games of mean s add s·(1 + d + … + d^(n−1)) and scale the record by d^n."""
    weight = games if decay == 1.0 else (1.0 - decay ** games) / (1.0 - decay)
    return decayed_score * decay ** games + score / games * weight, decayed_games * decay ** games + weight


class OpponentPool:
    """Snapshots in insertion order; the oldest leaves when ``capacity`` is exceeded."""

    def __init__(self, settings: PoolSettings) -> None:
        self.settings = settings
        self.add_rule = Expression(settings.add)
        self.snapshots: collections.OrderedDict[int, Snapshot] = collections.OrderedDict()
        self.next_id = 0
        self.last_add_iteration = 0
        self.recent = ScoreWindow(max(1, settings.games_to_check))
        self.games_since_add = 0

    def __len__(self) -> int:
        return len(self.snapshots)

    def add(self, blob: np.ndarray, iteration: int, snapshot_id: int | None = None, cost: int = 0,
            elapsed: float = 0.0) -> Snapshot:
        """Freeze ``blob`` as a new opponent at ``iteration`` / ``cost`` env steps / ``elapsed`` seconds (evicting
        the oldest beyond capacity); ids count up unless given."""
        snapshot_id = self.next_id if snapshot_id is None else snapshot_id
        snapshot = Snapshot(snapshot_id, iteration, np.array(blob, np.float32, copy=True), int(cost), float(elapsed))
        self.snapshots[snapshot.id] = snapshot
        self.next_id = max(self.next_id, snapshot_id) + 1
        while len(self.snapshots) > self.settings.capacity:
            self.snapshots.popitem(last=False)
        self.last_add_iteration = iteration
        self.recent.clear()
        self.games_since_add = 0
        return snapshot

    def record(self, opponent: int, score: float) -> None:
        """One finished game of the learner against snapshot ``opponent`` (score 1 win, 0.5 draw, 0 loss, or a
        pairwise score in between); games against evicted snapshots count only toward the add rule."""
        self.recent.add(1, score)
        self.games_since_add += 1
        self._fold(opponent, 1, score, int(score == 1.0), int(score == 0.5), int(score == 0.0))

    def record_counts(self, counts: Mapping[int, Sequence[float] | np.ndarray]) -> None:
        """The games of one iteration: ``counts[opponent] = (wins, draws, losses)``. The games have no order among
        them; every statistic is what they give fed one by one in random order, in expectation (the decayed
        statistics in closed form, the recent window as one batch)."""
        total_games = total_score = 0.0
        for opponent, outcomes in counts.items():
            wins, draws, losses = (float(count) for count in outcomes)   # plain numbers go into checkpoints
            games, score = outcome_score(wins, draws, losses)
            if games:
                self._fold(opponent, int(games), score, int(wins), int(draws), int(losses))
                total_games += games
                total_score += score
        self.recent.add(total_games, total_score)
        self.games_since_add += int(total_games)

    def _fold(self, opponent: int, games: int, score: float, wins: int, draws: int, losses: int) -> None:
        """Add ``games`` games scoring ``score`` in all to ``opponent``'s record (decayed: :func:`fold_decayed`)."""
        snapshot = self.snapshots.get(opponent)
        if snapshot is None:
            return
        snapshot.games += games
        snapshot.wins += wins
        snapshot.draws += draws
        snapshot.losses += losses
        snapshot.decayed_score, snapshot.decayed_games = fold_decayed(
            snapshot.decayed_score, snapshot.decayed_games, games, score, self.settings.decay)

    def should_add(self, iteration: int) -> bool:
        """After ``games_to_check`` games since the last addition, the ``add`` rule over ``self.win_rate``
        (those recent games), ``self.iterations_since_add``, ``self.games`` and ``self.size``."""
        if self.games_since_add < self.settings.games_to_check:
            return False
        names = {"win_rate": self.recent.mean() if self.recent.games else 0.0,
                 "iterations_since_add": iteration - self.last_add_iteration,
                 "games": self.games_since_add, "size": len(self.snapshots)}
        return bool(self.add_rule.evaluate({"self": names}))

    def probabilities(self) -> dict[int, float]:
        """The chooser's distribution over snapshot ids."""
        ids = list(self.snapshots)
        if not ids:
            return {}
        chooser = self.settings.chooser
        if chooser == "uniform" or len(ids) == 1:
            weights = np.ones(len(ids))
        elif chooser == "latest":
            share = self.settings.latest_share
            weights = np.full(len(ids), (1.0 - share) / (len(ids) - 1))
            weights[-1] = share
        else:
            weights = np.array([pfsp_weight(self.snapshots[i].win_rate(), self.settings.weighting) for i in ids])
            if weights.sum() <= 0:
                weights = np.ones(len(ids))
        weights = weights / weights.sum()
        return {i: float(w) for i, w in zip(ids, weights)}

    def state_dict(self) -> dict[str, Any]:
        return {"next_id": self.next_id, "last_add_iteration": self.last_add_iteration,
                "games_since_add": self.games_since_add, "recent": self.recent.state(),
                "snapshots": [{**{f.name: getattr(s, f.name) for f in dataclasses.fields(s) if f.name != "blob"},
                               "blob": torch.from_numpy(s.blob.copy())} for s in self.snapshots.values()]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.next_id = int(state["next_id"])
        self.last_add_iteration = int(state["last_add_iteration"])
        self.games_since_add = int(state["games_since_add"])
        self.recent.load(state["recent"])
        self.snapshots.clear()
        for entry in state["snapshots"]:
            fields = {k: v for k, v in entry.items() if k != "blob"}
            self.snapshots[int(fields["id"])] = Snapshot(blob=entry["blob"].numpy().copy(), **fields)

    def statistics(self) -> dict[str, float]:
        """TensorBoard scalars: size, and per snapshot its sampling probability and the learner's win rate."""
        scalars: dict[str, float] = {"pool/size": float(len(self.snapshots))}
        for snapshot_id, probability in self.probabilities().items():
            scalars[f"pool/probability/{snapshot_id}"] = probability
            scalars[f"pool/win_rate/{snapshot_id}"] = self.snapshots[snapshot_id].win_rate()
        return scalars
