"""A user's own evolution algorithm and PBT rules, outside the package: named in the config as ``module:Name``
(``ec.algorithm``, ``ec.pbt.exploit``, ``ec.pbt.explore``)."""

from __future__ import annotations

from typing import Mapping

from lamarckian.ec.base import SlotEvolutionAlgorithm
from lamarckian.ec.individual import Individual
from lamarckian.ec.pbt import PBT
from lamarckian.ec.space import SearchSpace


class Restarts(SlotEvolutionAlgorithm):
    """Each member trains ``rounds`` rounds, then its slot starts over with fresh hyper-parameters and a fresh
    network (random search with restarts). ``rounds`` comes from ``ec.kwargs``."""

    name = "restarts"

    def __init__(self, space: SearchSpace, size: int, objectives: list[str], seed: int, rounds: int) -> None:
        super().__init__(space, size, objectives, seed)
        self.rounds = rounds

    def replace(self, slot: int) -> Individual | None:
        return self.fresh() if self.slots[slot].age >= self.rounds else None


def copy_the_best(pbt: PBT, slot: int) -> int | None:
    """Exploit: a member worse than the best scored member copies it."""
    best = max((i for i, member in enumerate(pbt.slots) if member.fitness == member.fitness),    # not nan
               key=lambda i: pbt.slots[i].fitness)
    return best if pbt.slots[best].fitness > pbt.slots[slot].fitness else None


def halve(pbt: PBT, hparams: Mapping[str, float | int]) -> dict[str, float | int]:
    """Explore: every searched value halved (clipped to its range)."""
    return {d.key: d.clip(hparams[d.key] / 2) for d in pbt.space}
