"""evolve.py's typed sections: ``ec`` (the evolution), ``ec.train`` (one round) and ``ec.checkpoint`` (the population
checkpoints); the algorithms' own sections (``ec.pbt``, ``ec.nsga_ii``, ``ec.tournament``) live beside them."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ..config.sections import CheckpointSettings, MDPSettings, RaySettings, Section, TrainSettings
from ..registry import EVOLUTION, VECTORIZED


@dataclasses.dataclass(frozen=True)
class EvolutionSettings(Section):
    """``ec``: see lamarckian.yml."""

    KEY = "ec"
    OTHER_KEYS = ("train", "checkpoint", "league", *EVOLUTION.names())    # each built-in algorithm: its section

    algorithm: str
    kwargs: dict
    population: int
    learners: int | None
    learner_cpus: float
    learner_gpus: float
    log: tuple[str, ...]
    objectives: tuple[str, ...]
    selfplay: bool
    stop: str
    vectorized: bool | None

    def __post_init__(self) -> None:
        if not EVOLUTION.knows(self.algorithm):
            raise ValueError(f"ec.algorithm={self.algorithm!r}: expected one of {', '.join(EVOLUTION.names())} or "
                             f"{EVOLUTION.form}")
        if not self.objectives:
            raise ValueError("ec.objectives must name at least one objective")
        if self.population < 1 or self.learner_cpus < 0 or self.learner_gpus < 0:
            raise ValueError("ec.population must be at least 1, ec.learner_cpus and ec.learner_gpus at least 0")
        if not 1 <= self.learner_count <= self.population:
            raise ValueError(f"ec.learners must be between 1 and ec.population ({self.population}), "
                             f"got {self.learner_count}")

    def vectorized_for(self, config: Mapping[str, Any]) -> bool:
        """Whether the population trains as one vectorized learner: ``ec.vectorized`` (null: exactly when the task
        is vectorized, ``mdp.create: vec``); ValueError with one line for a combination that does not exist."""
        task_is_vectorized = MDPSettings.from_config(config).create == VECTORIZED
        if self.vectorized is None or self.vectorized == task_is_vectorized:
            return task_is_vectorized
        if self.vectorized:
            raise ValueError("ec.vectorized: true needs a vectorized task (mdp.create: vec, e.g. -c "
                             "mdp/vec/ant_sumo.yml); an actor-fleet task trains a learner process per individual")
        raise ValueError("ec.vectorized: false on a vectorized task: separate vectorized learners are not "
                         "available; leave ec.vectorized null (or true) to train the members as one stacked learner")

    @property
    def learner_count(self) -> int:
        """Learner processes training at once (``ec.learners``, or one per individual)."""
        return self.learners or self.population


@dataclasses.dataclass(frozen=True)
class RoundSettings(Section):
    """``ec.train``: when a learner ends its round and reports."""

    KEY = "ec.train"

    stopper: str


@dataclasses.dataclass(frozen=True)
class PopulationCheckpointSettings(CheckpointSettings):
    """``ec.checkpoint``: seconds between population checkpoints, how many are kept."""

    KEY = "ec.checkpoint"


#: what the warm fork server of learner processes imports, so each learner starts at once
LEARNER_MODULES = ("lamarckian.ec.worker",)


def learners_use_ray(config: Mapping[str, Any], vectorized: bool) -> bool:
    """Whether evolve.py's learners need Ray: ``ray.launch: ray``, a cluster ``ray.address``, GPUs reserved per
    learner (``ec.learner_gpus``), a learner's update over several GPUs (``train.gpus`` > 1) or vectorized groups
    (Ray actors of their GPUs). Else (``ray.launch`` auto or processes) the learners are child processes of
    evolve.py, forked from a warm server, and so are their actors: no Ray, and the first round starts seconds
    sooner (docs/evolution.md, "Against Ray Tune"). Never in ``local_mode``."""
    ray = RaySettings.from_config(config)
    if ray.local_mode:
        return False
    gpus = EvolutionSettings.from_config(config).learner_gpus > 0 and ray.launch != "processes"
    return ray.uses_ray(TrainSettings.from_config(config).gpus) or vectorized or gpus
