"""Population-based training (Jaderberg et al. 2017), asynchronous: each member that reports may exploit (copy
a better member's weights, optimizer state and hyper-parameters) and explore (perturb or resample them)."""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping

from ..config.sections import Section
from .base import SlotAlgorithm
from .individual import Individual
from .operators import quantiles, significantly_better
from .space import SearchSpace

EXPLOITS = ("truncation", "ttest", "none")
EXPLORES = ("perturb", "resample")


@dataclasses.dataclass(frozen=True)
class PBTSettings(Section):
    """``ec.pbt``: see lamarckian.yml."""

    KEY = "ec.pbt"

    quantile: float
    exploit: str
    significance: float
    explore: str
    factors: tuple[float, ...]
    resample: float
    ready: int

    def __post_init__(self) -> None:
        if self.exploit not in EXPLOITS:
            raise ValueError(f"ec.pbt.exploit={self.exploit!r}: expected one of {EXPLOITS}")
        if self.explore not in EXPLORES:
            raise ValueError(f"ec.pbt.explore={self.explore!r}: expected one of {EXPLORES}")
        if not 0 < self.quantile <= 0.5:
            raise ValueError(f"ec.pbt.quantile must be in (0, 0.5], got {self.quantile}")
        if not self.factors:
            raise ValueError("ec.pbt.factors must list at least one factor")


class PBT(SlotAlgorithm):
    """Truncation (or Welch t-test) exploit and perturb/resample explore over ``size`` members.
    ``exploit: none`` trains every member with its initial hyper-parameters (a random-search baseline)."""

    name = "pbt"

    def __init__(self, space: SearchSpace, size: int, objectives: list[str], seed: int,
                 settings: PBTSettings) -> None:
        super().__init__(space, size, objectives, seed)
        self.settings = settings

    def replace(self, slot: int) -> Individual | None:
        """Exploit if the reporting member has trained ``ready`` rounds and ranks in the bottom quantile of every
        scored member (a child not yet trained stands with its donor's scores): it copies a member of the top
        quantile that is better than it (none when they tie, as every member of a solved task does)."""
        settings, member = self.settings, self.slots[slot]
        if settings.exploit == "none" or member.age < settings.ready:
            return None
        scored = [i for i, m in enumerate(self.slots) if not math.isnan(m.fitness)]
        if len(scored) < 2:
            return None
        bottom, top = quantiles([self.slots[i].fitness for i in scored], settings.quantile)
        better = [scored[i] for i in top if self.slots[scored[i]].fitness > member.fitness]
        if slot not in [scored[i] for i in bottom] or not better:   # ties (a solved task): nothing to copy
            return None
        donor = self.slots[better[int(self.random.integers(len(better)))]]
        if settings.exploit == "ttest" and not significantly_better(donor.episodes, member.episodes,
                                                                    settings.significance):
            return None
        return donor.child(self.new_id(), f"exploit+{settings.explore}", self.explore(donor.hparams), self.clock())

    def explore(self, hparams: Mapping[str, float | int]) -> dict[str, float | int]:
        """Perturb each searched value by a random factor (clipped to its range); with ``explore: resample`` each
        is instead redrawn from its range with probability ``resample``."""
        explored = {}
        for dimension in self.space:
            value = hparams[dimension.key]
            if self.settings.explore == "resample" and self.random.random() < self.settings.resample:
                explored[dimension.key] = dimension.sample(self.random)
            else:
                factor = self.settings.factors[int(self.random.integers(len(self.settings.factors)))]
                explored[dimension.key] = dimension.clip(value * factor)
        return explored
