"""A running score over the most recent games, fed in batches of outcome counts.

A vectorized learner learns which games ended once per iteration (hundreds at a time), with no order among them.
The window keeps one ``(games, score)`` entry per batch; when the window's edge falls inside a batch, that batch
counts in proportion. The mean is then exactly the expected mean of the last ``size`` games had the games of
each batch arrived in random order.
"""

from __future__ import annotations

import collections
import math
from typing import Sequence

DRAW = 0.5  # a draw's score (a win scores 1, a loss 0)


def outcome_score(wins: float, draws: float, losses: float) -> tuple[float, float]:
    """``(games, score)`` of outcome counts: wins count 1, draws one half."""
    return wins + draws + losses, wins + DRAW * draws


class ScoreWindow:
    """The mean score of the last ``size`` games.

    Args:
        size: games in the window (at least 1).
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a score window holds at least 1 game, got {size}")
        self.size = size
        self.batches: collections.deque[tuple[float, float]] = collections.deque()
        self.games = 0.0
        self.score = 0.0

    def add(self, games: float, score: float) -> None:
        """One batch: ``games`` games with ``score`` summed (a win 1, a draw 0.5)."""
        games, score = float(games), float(score)          # plain numbers: the window goes into checkpoints
        if games <= 0:
            return
        self.batches.append((games, score))
        self.games += games
        self.score += score
        while self.games - self.batches[0][0] >= self.size:      # whole batches that fell out of the window
            old_games, old_score = self.batches.popleft()
            self.games -= old_games
            self.score -= old_score
        excess = self.games - self.size
        if excess > 0:                                           # the oldest batch straddles the edge
            old_games, old_score = self.batches[0]
            kept = old_games - excess
            self.batches[0] = (kept, old_score * kept / old_games)
            self.score -= old_score - self.batches[0][1]
            self.games = float(self.size)

    def add_outcomes(self, wins: float, draws: float, losses: float) -> None:
        """One batch given as outcome counts."""
        self.add(*outcome_score(wins, draws, losses))

    def mean(self) -> float:
        """The mean score (nan before any game)."""
        return self.score / self.games if self.games > 0 else math.nan

    def __len__(self) -> int:
        return round(self.games)

    def clear(self) -> None:
        self.batches.clear()
        self.games = self.score = 0.0

    def state(self) -> list[list[float]]:
        return [list(batch) for batch in self.batches]

    def load(self, batches: Sequence[Sequence[float]]) -> None:
        """Restore :meth:`state` (a legacy list of single scores loads as one-game batches)."""
        self.clear()
        for batch in batches:
            games, score = (1.0, float(batch)) if isinstance(batch, (int, float)) else batch
            self.add(games, score)
