"""Population-based training (Jaderberg et al. 2017), asynchronous: each member that reports may exploit (copy
a better member's weights, optimizer state and hyper-parameters) and explore (perturb or resample them)."""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Mapping

from ..config.sections import Section
from ..registry import EXPLOITS, EXPLORES
from .base import SlotEvolutionAlgorithm
from .individual import Individual
from .operators import quantiles, significantly_better
from .space import Dimension, SearchSpace


@dataclasses.dataclass(frozen=True)
class PBTSettings(Section):
    """``ec.pbt``: see lamarckian.yml. ``exploit`` and ``explore`` name rules of :data:`~lamarckian.registry.EXPLOITS`
    and :data:`~lamarckian.registry.EXPLORES` (or your own ``module:function``)."""

    KEY = "ec.pbt"

    quantile: float
    exploit: str
    significance: float
    explore: str
    factors: tuple[float, ...]
    resample: float
    ready: int

    def __post_init__(self) -> None:
        for registry, name in ((EXPLOITS, self.exploit), (EXPLORES, self.explore)):
            if not registry.knows(name):
                raise ValueError(f"{registry.key}={name!r}: expected one of {', '.join(registry.names())} or "
                                 f"{registry.form}")
        if not 0 < self.quantile <= 0.5:
            raise ValueError(f"ec.pbt.quantile must be in (0, 0.5], got {self.quantile}")
        if not self.factors:
            raise ValueError("ec.pbt.factors must list at least one factor")


ExploitRule = Callable[["PBT", int], "int | None"]
ExploreRule = Callable[["PBT", Mapping[str, "float | int"]], "dict[str, float | int]"]


class PBT(SlotEvolutionAlgorithm):
    """Exploit (``ec.pbt.exploit``: which better member a reporting member copies, if any) and explore
    (``ec.pbt.explore``: how the copy's hyper-parameters change) over ``size`` members. ``exploit: none`` trains
    every member with its initial hyper-parameters (a random-search baseline)."""

    name = "pbt"
    SETTINGS = PBTSettings

    def __init__(self, space: SearchSpace, size: int, objectives: list[str], seed: int,
                 settings: PBTSettings) -> None:
        super().__init__(space, size, objectives, seed)
        self.settings = settings
        self.exploit_rule: ExploitRule = EXPLOITS.get(settings.exploit)
        self.explore_rule: ExploreRule = EXPLORES.get(settings.explore)

    def replace(self, slot: int) -> Individual | None:
        """The exploit rule's donor's child, its hyper-parameters explored; None: the member trains on."""
        donor_slot = self.exploit_rule(self, slot)
        if donor_slot is None:
            return None
        donor = self.slots[donor_slot]
        return donor.child(self.new_id(), f"exploit+{self.settings.explore}", self.explore(donor.hparams),
                           self.clock())

    def explore(self, hparams: Mapping[str, float | int]) -> dict[str, float | int]:
        return self.explore_rule(self, hparams)


# ---- exploit rules: (pbt, the reporting member's slot) -> the slot of the member it copies, or None -------------
def truncation(pbt: PBT, slot: int) -> int | None:
    """A member that has trained ``ready`` rounds and ranks in the bottom quantile of every scored member (a child
    not yet trained stands with its donor's scores) copies a random member of the top quantile better than it
    (none when they tie, as every member of a solved task does)."""
    settings, member = pbt.settings, pbt.slots[slot]
    if member.age < settings.ready:
        return None
    scored = [i for i, m in enumerate(pbt.slots) if not math.isnan(m.fitness)]
    if len(scored) < 2:
        return None
    bottom, top = quantiles([pbt.slots[i].fitness for i in scored], settings.quantile)
    better = [scored[i] for i in top if pbt.slots[scored[i]].fitness > member.fitness]
    if slot not in [scored[i] for i in bottom] or not better:   # ties (a solved task): nothing to copy
        return None
    return better[int(pbt.random.integers(len(better)))]


def ttest(pbt: PBT, slot: int) -> int | None:
    """:func:`truncation`, and only where the donor's episodes beat the member's by Welch's t-test at
    ``significance``."""
    donor = truncation(pbt, slot)
    if donor is None or not significantly_better(pbt.slots[donor].episodes, pbt.slots[slot].episodes,
                                                  pbt.settings.significance):
        return None
    return donor


def no_exploit(pbt: PBT, slot: int) -> int | None:
    """Never copy: every member trains with its initial hyper-parameters."""
    return None


# ---- explore rules: (pbt, the donor's hyper-parameters) -> the child's ------------------------------------------
def perturb(pbt: PBT, hparams: Mapping[str, float | int]) -> dict[str, float | int]:
    """Each searched value times a random one of ``factors``, clipped to its range."""
    return {d.key: _times_a_factor(pbt, d, hparams[d.key]) for d in pbt.space}


def resample(pbt: PBT, hparams: Mapping[str, float | int]) -> dict[str, float | int]:
    """Each searched value redrawn from its range with probability ``resample``, else perturbed."""
    return {d.key: d.sample(pbt.random) if pbt.random.random() < pbt.settings.resample
            else _times_a_factor(pbt, d, hparams[d.key]) for d in pbt.space}


def _times_a_factor(pbt: PBT, dimension: Dimension, value: float | int) -> float | int:
    factors = pbt.settings.factors
    return dimension.clip(value * factors[int(pbt.random.integers(len(factors)))])
