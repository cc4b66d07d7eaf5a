"""An individual: hyper-parameters plus everything its learner learned (Lamarckian inheritance)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Sequence

import numpy as np


@dataclasses.dataclass
class Individual:
    """One member of a population.

    ``state`` is the learner's ``state_dict`` (weights with normalizers, optimizer, opponent pool, counters) as
    its last training round left it, or None for a fresh network. A child gets its parent's ``state``.
    """

    id: int
    hparams: dict[str, float | int]
    parent: int | None = None
    parents: list[int] = dataclasses.field(default_factory=list)
    operator: str = "sample"
    state: dict[str, Any] | None = None
    seed: int = 0
    fitness: float = math.nan
    objectives: list[float] = dataclasses.field(default_factory=list)
    summary: dict[str, float] = dataclasses.field(default_factory=dict)
    episodes: list[float] = dataclasses.field(default_factory=list)  # last evaluation, fitness per episode
    age: int = 0            # training rounds
    cost: int = 0           # env steps trained, ancestors' included
    born: float = 0.0       # evolution clock (s) at creation
    scale: float = 1.0      # length of the next round relative to ec.train.stopper (staggered starts)
    weight_noise: float = 0.0  # std of Gaussian noise the learner adds to the weights before the next round

    @property
    def evaluated(self) -> bool:
        """Trained and evaluated at least once itself."""
        return self.age > 0 and not math.isnan(self.fitness)

    @property
    def scored(self) -> bool:
        """Has a fitness: its own, or (an untrained child) that of the weights it starts from."""
        return not math.isnan(self.fitness)

    def absorb(self, report: Mapping[str, Any], objective_names: Sequence[str]) -> None:
        """Write a training round's outcome back into the individual (weights, optimizer, scores). Its fitness is the
        first objective (``ec.objectives[0]``: what PBT and tournaments rank, ``ec.stop``'s ``self.best``)."""
        self.state = report["state"]
        self.summary = {k: float(v) for k, v in report["summary"].items()}
        self.fitness = self.summary.get(objective_names[0] if objective_names else "fitness", math.nan)
        self.objectives = [objective_value(self.summary, name) for name in objective_names]
        self.episodes = [float(x) for x in report["episodes"]]
        self.age += 1
        self.cost += int(report["cost"])
        self.scale = 1.0
        self.weight_noise = 0.0

    def child(self, new_id: int, operator: str, hparams: Mapping[str, float | int], born: float,
              parents: Sequence[int] = ()) -> "Individual":
        """A new individual that starts from this one's learned state with ``hparams``. Until it reports, it
        stands with this one's scores (the scores of the weights it starts from) but is not ``evaluated``."""
        return Individual(id=new_id, hparams=dict(hparams), parent=self.id, parents=list(parents) or [self.id],
                          operator=operator, state=self.state, seed=self.seed, fitness=self.fitness,
                          objectives=list(self.objectives), summary=dict(self.summary), episodes=list(self.episodes),
                          age=0, cost=self.cost, born=born)

    def task(self) -> dict[str, Any]:
        """What the learner needs for a round (sent over RPC: arrays, tensors, numbers, strings only)."""
        return {"id": self.id, "hparams": dict(self.hparams), "state": self.state, "seed": self.seed,
                "scale": self.scale, "weight_noise": self.weight_noise}

    def lineage_row(self) -> dict[str, Any]:
        """The JSON line of ``lineage.jsonl`` after a round: enough to draw the family tree."""
        return {"id": self.id, "parent": self.parent, "parents": self.parents, "operator": self.operator,
                "hparams": self.hparams, "fitness": _finite(self.fitness),
                "objectives": [_finite(v) for v in self.objectives], "age": self.age, "cost": self.cost,
                "born": round(self.born, 3)}

    def to_dict(self) -> dict[str, Any]:
        """For the population checkpoint (torch.save, loaded with weights_only=True)."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Individual":
        return cls(**{field.name: data[field.name] for field in dataclasses.fields(cls) if field.name in data})


def objective_value(summary: Mapping[str, float], name: str) -> float:
    """The objective ``name`` from an evaluation summary (missing → -inf: never preferred)."""
    value = summary.get(name, math.nan)
    return -math.inf if value is None or math.isnan(value) else float(value)


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None
