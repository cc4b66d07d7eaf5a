"""NSGA-II over learners, steady state and asynchronous: every report is inserted into the population, which is
cut back to ``size`` by non-dominated sorting and crowding distance; each free learner trains a child bred by
binary tournament, SBX crossover and polynomial mutation of the hyper-parameters, starting from its first
parent's weights (optionally perturbed). Sorting, crowding, selection and the operators are DEAP's
(:mod:`.deap_tools`)."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np

from ..config.sections import Section
from .base import EvolutionAlgorithm
from .deap_tools import crossover, mutate, non_dominated_fronts, ranks_and_crowding, select_survivors
from .individual import Individual
from .space import SearchSpace


@dataclasses.dataclass(frozen=True)
class NSGA2Settings(Section):
    """``ec.nsga_ii``: see lamarckian.yml."""

    KEY = "ec.nsga_ii"

    crossover: float
    eta_crossover: float
    mutation: float | None
    eta_mutation: float
    weight_noise: float


class NSGA2(EvolutionAlgorithm):
    name = "nsga_ii"
    SETTINGS = NSGA2Settings

    def __init__(self, space: SearchSpace, size: int, objectives: list[str], seed: int,
                 settings: NSGA2Settings) -> None:
        super().__init__(space, size, objectives, seed)
        if size < 2:
            raise ValueError("NSGA-II needs ec.population >= 2")
        self.settings = settings
        self.population: list[Individual] = []
        self.created = 0

    def ask(self) -> Individual:
        if self.created < self.size or not self.population:
            self.created += 1
            return self.fresh()
        return self.breed()

    def _tournament(self, rank: np.ndarray, crowding: np.ndarray) -> Individual:
        """Binary tournament: the lower front wins, then the larger crowding distance."""
        a, b = (int(i) for i in self.random.integers(len(self.population), size=2))
        better = a if (rank[a], -crowding[a]) <= (rank[b], -crowding[b]) else b
        return self.population[better]

    def breed(self) -> Individual:
        rank, crowding = ranks_and_crowding(self.objectives())
        first, second = self._tournament(rank, crowding), self._tournament(rank, crowding)
        genes = self.space.to_unit(first.hparams)
        operator = "mutation"
        if len(self.space) and first.id != second.id and self.random.random() < self.settings.crossover:
            genes, _ = crossover(genes, self.space.to_unit(second.hparams), self.settings.eta_crossover, self.random)
            operator = "sbx+mutation"
        probability = self.settings.mutation if self.settings.mutation is not None else 1.0 / max(1, len(self.space))
        genes = mutate(genes, self.settings.eta_mutation, probability, self.random)
        parents = [first.id] + ([second.id] if operator.startswith("sbx") else [])
        child = first.child(self.new_id(), operator, self.space.from_unit(genes), self.clock(), parents)
        child.weight_noise = self.settings.weight_noise
        return child

    def objectives(self) -> np.ndarray:
        return np.array([m.objectives for m in self.population], dtype=np.float64).reshape(len(self.population), -1)

    def tell(self, individual: Individual, report: Mapping[str, Any]) -> None:
        individual.absorb(report, self.objective_names)
        self.population = [m for m in self.population if m.id != individual.id] + [individual]
        if len(self.population) > self.size:
            survivors = select_survivors(np.nan_to_num(self.objectives(), neginf=-1e300), self.size)
            self.population = [self.population[i] for i in sorted(survivors)]

    def retry(self, individual: Individual) -> None:
        """A child whose learner died is simply lost; a fresh one of the first generation is re-created."""
        if individual.age == 0 and individual.parent is None:
            self.created -= 1

    def members(self) -> list[Individual]:
        return list(self.population)

    def front(self) -> list[Individual]:
        """The non-dominated members."""
        if not self.population:
            return []
        return [self.population[i] for i in non_dominated_fronts(np.nan_to_num(self.objectives(), neginf=-1e300))[0]]

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "created": self.created,
                "population": [m.to_dict() for m in self.population]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        super().load_state_dict(state)
        self.created = int(state["created"])
        self.population = [Individual.from_dict(m) for m in state["population"]]
