"""Elo for two players and its multi-player generalization from ranks; Bradley-Terry Elo fitted to a tournament."""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Elo:
    """Classic Elo.

    Attributes:
        k: the step (rating points for a full surprise).
        scale: rating difference at which the stronger player is expected to score 10 : 1.
        initial: a new player's rating.
    """

    k: float = 32.0
    scale: float = 400.0
    initial: float = 1200.0

    def expected(self, rating: float, other: float) -> float:
        """Expected score (win 1, draw 0.5) of a player rated ``rating`` against ``other``."""
        return 1.0 / (1.0 + 10.0 ** ((other - rating) / self.scale))

    def update(self, rating: float, other: float, score: float) -> tuple[float, float]:
        """Both ratings after one game in which the first player scored ``score`` (1, 0.5 or 0)."""
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"a score is between 0 and 1, got {score}")
        change = self.k * (score - self.expected(rating, other))
        return rating + change, other - change

    def update_ranks(self, ratings: Sequence[float], ranks: Sequence[float]) -> list[float]:
        """Multi-player Elo: every pair is a game scored by rank (lower is better, equal ranks draw); each
        player's change is the sum over its N−1 pairs with K divided by N−1, so a 2-player game is classic Elo."""
        count = len(ratings)
        if count != len(ranks) or count < 2:
            raise ValueError(f"need one rank per rating and at least two players, got {len(ratings)} and {len(ranks)}")
        k = self.k / (count - 1)
        changes = [0.0] * count
        for i in range(count):
            for j in range(count):
                if i != j:
                    score = 1.0 if ranks[i] < ranks[j] else 0.5 if ranks[i] == ranks[j] else 0.0
                    changes[i] += k * (score - self.expected(ratings[i], ratings[j]))
        return [rating + change for rating, change in zip(ratings, changes)]


def fit_elo(scores: np.ndarray, games: np.ndarray, *, scale: float = 400.0, mean: float = 1200.0,
            prior_games: float = 0.5, iterations: int = 10_000, tolerance: float = 1e-10) -> np.ndarray:
    """Order-free Elo ratings from a tournament: the Bradley-Terry maximum-likelihood fit (MM algorithm).

    Args:
        scores: ``(P, P)``; ``scores[i, j]`` is what ``i`` scored against ``j`` summed over their games
            (win 1, draw 0.5).
        games: ``(P, P)`` symmetric game counts.
        prior_games: each pair gets this many virtual draws, so an unbeaten player has a finite rating.
    Returns:
        ``(P,)`` ratings with mean ``mean``; a difference of ``scale`` means 10 : 1 expected odds.
    """
    scores = np.asarray(scores, float)
    games = np.asarray(games, float)
    count = scores.shape[0]
    if scores.shape != (count, count) or games.shape != (count, count) or not np.allclose(games, games.T):
        raise ValueError("scores and games must be square (P, P) and games symmetric")
    off_diagonal = 1.0 - np.eye(count)
    games = games + prior_games * off_diagonal
    wins = scores.sum(1) + prior_games * off_diagonal.sum(1) / 2
    strength = np.ones(count)
    for _ in range(iterations):
        denominator = (games / (strength[:, None] + strength[None, :])).sum(1)
        updated = wins / denominator
        updated /= np.exp(np.log(updated).mean())
        done = np.max(np.abs(np.log(updated) - np.log(strength))) < tolerance
        strength = updated
        if done:
            break
    ratings = scale * np.log10(strength)
    return ratings - ratings.mean() + mean
