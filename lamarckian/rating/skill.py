"""A Bayesian skill rating for N-player games (Plackett-Luce, from the maintained ``openskill`` package)."""

from __future__ import annotations

from typing import Sequence

from openskill.models import PlackettLuce, PlackettLuceRating


class SkillRating:
    """Keeps ``(mu, sigma)`` per player id; ``rate`` takes one game's players and ranks (1 = best, ties equal)."""

    def __init__(self) -> None:
        self.model = PlackettLuce()
        self.ratings: dict[str, PlackettLuceRating] = {}

    def rating(self, player: str) -> tuple[float, float]:
        current = self.ratings.setdefault(player, self.model.rating(name=player))
        return current.mu, current.sigma

    def rate(self, players: Sequence[str], ranks: Sequence[float]) -> None:
        teams = [[self.ratings.setdefault(p, self.model.rating(name=p))] for p in players]
        for player, (updated,) in zip(players, self.model.rate(teams, ranks=list(ranks))):
            self.ratings[player] = updated

    def conservative(self, player: str) -> float:
        """mu − 3·sigma: the usual leaderboard value."""
        mu, sigma = self.rating(player)
        return mu - 3 * sigma
