"""What every evolution algorithm shares: fresh individuals from the search space, ids, the random state, and
for PBT and tournaments a fixed set of slots that each hold the current individual of one lineage.

An algorithm is driven by the engine through four calls: ``ask()`` the next individual to train, ``tell(individual,
report)`` its round's outcome, ``retry(individual)`` when its learner died, ``members()`` the population now.
"""

from __future__ import annotations

import collections
import json
from typing import Any, Callable, ClassVar, Mapping, Sequence

import numpy as np

from ..config.sections import Section
from .individual import Individual
from .space import SearchSpace


class EvolutionAlgorithm:
    """Base of the evolution algorithms (``ec.algorithm``: :data:`~lamarckian.registry.EVOLUTION`, a built-in name or
    your own ``module:ClassName``). A subclass with a settings section of its own names it in ``SETTINGS`` and takes
    it as its last argument (PBT: ``ec.pbt``); one without (yours) takes ``ec.kwargs`` as keyword arguments.

    Args:
        space: the searched hyper-parameters.
        size: the population size ``ec.population``.
        objectives: the names of the maximized objectives (``ec.objectives``).
        seed: seeds the algorithm's random choices and each fresh individual's network (seed + id).
    """

    name = "algorithm"
    SETTINGS: ClassVar[type[Section] | None] = None

    def __init__(self, space: SearchSpace, size: int, objectives: list[str], seed: int) -> None:
        if size < 1:
            raise ValueError(f"ec.population must be at least 1, got {size}")
        self.space, self.size, self.objective_names, self.seed = space, size, list(objectives), seed
        self.random = np.random.default_rng(seed)
        self.next_id = 0
        self.clock: Callable[[], float] = lambda: 0.0

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def fresh(self) -> Individual:
        """A new network with hyper-parameters sampled from the space."""
        new_id = self.new_id()
        return Individual(id=new_id, hparams=self.space.sample(self.random), seed=self.seed + new_id,
                          born=self.clock())

    def ask(self) -> Individual:
        raise NotImplementedError

    def tell(self, individual: Individual, report: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def tell_round(self, reports: Sequence[tuple[Individual, Mapping[str, Any]]]) -> None:
        """The outcomes of individuals trained together (a vectorized population's round), told at once."""
        for individual, report in reports:
            self.tell(individual, report)

    def retry(self, individual: Individual) -> None:
        """The learner training ``individual`` died: it will be trained again from its stored state."""
        raise NotImplementedError

    def members(self) -> list[Individual]:
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        return {"next_id": self.next_id, "random": json.dumps(self.random.bit_generator.state)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.next_id = int(state["next_id"])
        self.random.bit_generator.state = json.loads(state["random"])


class SlotEvolutionAlgorithm(EvolutionAlgorithm):
    """``size`` slots, each training its current individual round after round; a slot's individual may be
    replaced between rounds (PBT exploit, tournament re-seeding). Idle slots are handed out oldest first."""

    def __init__(self, space: SearchSpace, size: int, objectives: list[str], seed: int) -> None:
        super().__init__(space, size, objectives, seed)
        self.slots: list[Individual] = []
        self.idle: collections.deque[int] = collections.deque()

    def first_round_scale(self, slot: int) -> float:
        """Length factor of a slot's first round (1: all equal)."""
        return 1.0

    def ask(self) -> Individual:
        if len(self.slots) < self.size:
            individual = self.fresh()
            individual.scale = self.first_round_scale(len(self.slots))
            self.slots.append(individual)
            return individual
        if not self.idle:
            raise RuntimeError("every slot is training: ec.learners must not exceed ec.population")
        return self.slots[self.idle.popleft()]

    def slot_of(self, individual: Individual) -> int:
        for index, member in enumerate(self.slots):
            if member.id == individual.id:
                return index
        raise KeyError(f"individual {individual.id} is not in the population")

    def tell(self, individual: Individual, report: Mapping[str, Any]) -> None:
        individual.absorb(report, self.objective_names)
        slot = self.slot_of(individual)
        replacement = self.replace(slot)
        if replacement is not None:
            self.slots[slot] = replacement
        self.idle.append(slot)

    def tell_round(self, reports: Sequence[tuple[Individual, Mapping[str, Any]]]) -> None:
        """Every member's outcome first, then each slot's replacement decided against those same standings (told
        one by one, a child standing with its donor's scores would push the next reporter into the bottom)."""
        for individual, report in reports:
            individual.absorb(report, self.objective_names)
        slots = [self.slot_of(individual) for individual, _ in reports]
        replacements = [self.replace(slot) for slot in slots]
        for slot, replacement in zip(slots, replacements):
            if replacement is not None:
                self.slots[slot] = replacement
            self.idle.append(slot)

    def replace(self, slot: int) -> Individual | None:
        """The individual that continues the slot after its member reported (None: the member itself)."""
        raise NotImplementedError

    def retry(self, individual: Individual) -> None:
        self.idle.appendleft(self.slot_of(individual))

    def members(self) -> list[Individual]:
        return list(self.slots)

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "slots": [m.to_dict() for m in self.slots]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore; every slot is idle (rounds in flight when the run stopped are trained again)."""
        super().load_state_dict(state)
        self.slots = [Individual.from_dict(m) for m in state["slots"]]
        self.idle = collections.deque(sorted(range(len(self.slots)), key=lambda i: self.slots[i].age))
