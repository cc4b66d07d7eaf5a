"""evolve.py on a vectorized task: the whole population trains in this process, on one device, as one
:class:`~lamarckian.rl.vec_population.VecPopulationLearner` (one member per individual, one forward and one batched
update for all), round after round. It stands where the Ray learners stand for the actor-fleet tasks: the engine asks
the algorithm for individuals and gets their reports back (:meth:`VecRounds.as_completed`), so PBT, NSGA-II and the
tournament, lineage, population checkpoints and resume work unchanged.

Only ``train.lr`` may be searched (each member has its own learning rate); a key that would change the task or the
network for some members only is refused in one line.
"""

from __future__ import annotations

import itertools
import socket
import time
from typing import Any, Iterable, Iterator, Mapping, Sequence

import torch

from ..config.sections import SampleSettings, TrainSettings
from ..model.network import seeded
from ..rl.loop import TrainingLoop
from ..rl.vec_evaluation import VecEvaluation
from ..rl.vec_learner import vec_model
from ..rl.vec_population import VecPopulationLearner
from .settings import RoundSettings
from .worker import RoundStopper, owned, round_config

SEARCHABLE = ("train.lr",)


class VecRounds:
    """Trains ``size`` individuals at a time on a vectorized task.

    Args:
        config: the run's base configuration (search ranges resolved), ``mdp.create: vec``.
        size: the population size (members trained together).
        searched: the searched keys (only ``train.lr`` is allowed).
    """

    def __init__(self, config: Mapping[str, Any], size: int, searched: Sequence[str]) -> None:
        others = [key for key in searched if key not in SEARCHABLE]
        if others:
            raise ValueError(f"a vectorized population searches {', '.join(SEARCHABLE)} only (its members share "
                             f"one task and one architecture); {', '.join(others)} would need separate learners")
        self.base, self.size = config, size
        self.config = round_config(config, {}, int(config["seed"]))
        lr = TrainSettings.from_config(config).lr
        self.learner = VecPopulationLearner(self.config, [lr] * size)
        games = SampleSettings.from_config(config).eval
        self.evaluation = VecEvaluation(config["mdp"]["vec"], games, ("initial",), seed=int(config["seed"]) + 1) \
            if games > 0 else None

    def as_completed(self, calls: Iterable[tuple[str, Mapping[str, Any]]]) -> Iterator[tuple[Any, dict[str, Any]]]:
        """Take up to ``size`` calls at a time, train them as one round, yield ``(call, report)`` for each."""
        calls = iter(calls)
        while True:
            batch = list(itertools.islice(calls, self.size))
            if not batch:
                return
            yield from zip(batch, self.train_round([task for _, task in batch]))

    def train_round(self, tasks: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """Load each task into a member slot, train all members until ``ec.train.stopper`` holds, evaluate each
        against the initial policy; one report per task (as :meth:`PopulationLearner.train` gives)."""
        learner = self.learner
        for member, task in enumerate(tasks):
            self._load(member, task)
        started, cost, iterations = time.monotonic(), learner.cost, learner.iteration
        scale = max(float(task.get("scale", 1.0)) for task in tasks)
        TrainingLoop(learner, announce=False).run(stop=RoundStopper(RoundSettings.from_config(self.base).stopper, learner, scale))
        seconds = time.monotonic() - started
        share = (learner.cost - cost) // self.size
        return [self._report(member, task, share, learner.iteration - iterations, seconds)
                for member, task in enumerate(tasks)]

    def _load(self, member: int, task: Mapping[str, Any]) -> None:
        learner, model = self.learner, self.learner.members[member]
        lr = float(task["hparams"].get("train.lr", TrainSettings.from_config(self.base).lr))
        state = owned(task["state"]) if task.get("state") is not None else None
        if state is None:
            with seeded(int(task["seed"])):
                fresh = vec_model(learner.task, self.base["model"])
            model.load_state_dict(fresh.state_dict())
        else:
            model.load_state_dict(state["model"])
        if task.get("weight_noise"):
            generator = torch.Generator().manual_seed(int(task["id"]))
            with torch.no_grad():
                for parameter in model.parameters():
                    noise = torch.randn(parameter.shape, generator=generator) * float(task["weight_noise"])
                    parameter.add_(noise.to(parameter.device))
        learner.population.load_member(member, state.get("optimizer") if state else None, lr)
        learner.scores[member].load([])

    def _report(self, member: int, task: Mapping[str, Any], cost: int, iterations: int,
                seconds: float) -> dict[str, Any]:
        learner, model = self.learner, self.learner.members[member]
        summary: dict[str, float] = {}
        episodes: list[float] = []
        if self.evaluation is not None:
            result = self.evaluation.evaluate(model, [learner.initial_blob])
            wins, draws, losses = (int(result[f"initial/{k}"]) for k in ("wins", "draws", "losses"))
            episodes = [1.0] * wins + [0.0] * draws + [-1.0] * losses
            summary = {"episodes": float(len(episodes)), "win": result["initial/score"],
                       "fitness": 2.0 * result["initial/score"] - 1.0}
        state = {"model": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
                 "optimizer": {key: value for key, value in learner.population.member_state(member).items()},
                 "iteration": learner.iteration, "cost": cost, "elapsed": seconds}
        return {"id": task["id"], "state": state, "summary": summary, "episodes": episodes,
                "training": {"win": learner.scores[member].mean()}, "cost": cost, "iterations": iterations,
                "seconds": seconds, "learner": member, "node": socket.gethostname()}

    def close(self) -> None:
        self.learner.close()
        if self.evaluation is not None:
            self.evaluation.close()
