"""Tournament-style asynchronous ensembles (as in ElegantRL's Podracer): a leaderboard keeps the best snapshots;
a learner that reports is re-seeded from a leaderboard entry drawn by softmax over z-scored fitness, only if that
entry beats it. Slots start with staggered round lengths so that reports spread out; there is no barrier."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ..config.sections import Section
from .base import SlotEvolutionAlgorithm
from .individual import Individual
from .operators import softmax_of_z_scores
from .space import SearchSpace


@dataclasses.dataclass(frozen=True)
class TournamentSettings(Section):
    """``ec.tournament``: see lamarckian.yml."""

    KEY = "ec.tournament"

    leaderboard: int | None
    temperature: float
    stagger: bool


class Tournament(SlotEvolutionAlgorithm):
    """The leaderboard holds up to ``leaderboard`` (default 2 × size) snapshots, best first."""

    name = "tournament"
    SETTINGS = TournamentSettings

    def __init__(self, space: SearchSpace, size: int, objectives: list[str], seed: int,
                 settings: TournamentSettings) -> None:
        super().__init__(space, size, objectives, seed)
        self.settings = settings
        self.capacity = int(settings.leaderboard or 2 * size)
        if self.capacity < 1:
            raise ValueError(f"ec.tournament.leaderboard must be at least 1, got {self.capacity}")
        self.leaderboard: list[Individual] = []

    def first_round_scale(self, slot: int) -> float:
        return (slot + 1) / self.size if self.settings.stagger else 1.0

    def insert(self, member: Individual) -> int | None:
        """Enter a snapshot of ``member`` where it ranks; its place (0 = best), or None if it does not rank."""
        snapshot = dataclasses.replace(member, parents=list(member.parents), objectives=list(member.objectives))
        place = sum(entry.fitness >= member.fitness for entry in self.leaderboard)
        if place >= self.capacity:
            return None
        self.leaderboard.insert(place, snapshot)
        del self.leaderboard[self.capacity:]
        return place

    def replace(self, slot: int) -> Individual | None:
        member = self.slots[slot]
        self.insert(member)
        probabilities = softmax_of_z_scores([e.fitness for e in self.leaderboard], self.settings.temperature)
        entry = self.leaderboard[int(self.random.choice(len(self.leaderboard), p=probabilities))]
        if entry.fitness <= member.fitness:
            return None
        child = entry.child(self.new_id(), "reseed", entry.hparams, self.clock())
        return child

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "leaderboard": [e.to_dict() for e in self.leaderboard]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.leaderboard = [Individual.from_dict(e) for e in state["leaderboard"]]
