"""evolve.py on a vectorized task: the whole population trains in this process, on one device, as one
:class:`~lamarckian.rl.ondevice.population.OnDevicePopulationLearner` (one member per individual, one forward and one
batched update for all), round after round. It stands where the Ray learners stand for the actor-fleet tasks: the
engine asks the algorithm for a round's individuals and tells it their reports together
(:meth:`OnDeviceRounds.train_round`), so PBT, NSGA-II and the tournament, lineage, population checkpoints and resume
work unchanged.

Searchable per member (:data:`SEARCHABLE`): the learning rate and the PPO settings a batched update can vary per
member, and the reward weights of ``mdp.vec.reward``. Anything else would change the task (the physics compiled
for the whole batch) or the architecture the members share: refused in one line before anything starts.

With ``ec.selfplay`` the members form a league (they play each other's snapshots); a member's fitness is then its
Bradley-Terry Elo above the initial policy's from the round's games among the members and the initial policy (the
initial policy anchors the scale, so ratings of different rounds and groups compare), and every round writes
``ratings.csv``, ``winrate.csv`` and ``winrate.png`` to the league folder (as evaluate.py does).
"""

from __future__ import annotations

import copy
import socket
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ..config.sections import RunSettings, SampleSettings
from ..mdp.vec import placement
from ..mdp.vec.ring import REWARD_WEIGHTS
from ..model import ModelSettings
from ..model.network import seeded
from ..rating.tournament import Entrant, plot, write_tables
from ..rl.algorithms.ppo_settings import member_keys
from ..rl.loop import TrainingLoop
from ..rl.ondevice.evaluation import OnDeviceEvaluation
from ..rl.ondevice.league import LeagueSettings
from ..rl.ondevice.learner import vec_model
from ..rl.ondevice.population import OnDevicePopulationLearner
from ..rl.seeds import VEC_EVALUATION_SEED_OFFSET
from .settings import EvolutionSettings, RoundSettings
from .worker import RoundStopper, member_blobs, owned, round_config

#: keys a vectorized population may search (each member has its own value): the PPO settings declared per member
#: (:func:`~lamarckian.rl.algorithms.ppo_settings.member_keys`) and every reward weight of ``mdp.vec.reward``
SEARCHABLE = (*member_keys(), *(f"mdp.vec.reward.{name}" for name in REWARD_WEIGHTS))


def check_vectorized(config: Mapping[str, Any], size: int, searched: Sequence[str]) -> None:
    """ValueError with one line for what a vectorized population cannot do: a searched key outside
    :data:`SEARCHABLE` (task settings need the physics recompiled, model settings another architecture), a
    population size that does not divide ``mdp.vec.num_envs``."""
    for key in searched:
        if key in SEARCHABLE:
            continue
        if key.startswith("mdp."):
            raise ValueError(f"{key} cannot be searched in a vectorized population: the members share one task, "
                             f"and changing it for some would recompile the physics; searchable task keys: "
                             f"{', '.join(k for k in SEARCHABLE if k.startswith('mdp.'))}")
        if key.startswith("model."):
            raise ValueError(f"{key} cannot be searched in a vectorized population: its members share one "
                             f"architecture (stacked weights)")
        raise ValueError(f"{key} cannot be searched in a vectorized population (one batched update for all "
                         f"members); searchable: {', '.join(SEARCHABLE)}")
    vec = config["mdp"]["vec"]
    if vec.get("backend") != "isaacgym" and not str(vec["task"]).count(":"):
        num_envs = placement(vec)[2]
        if num_envs % size:
            raise ValueError(f"ec.population={size} must divide mdp.vec.num_envs={num_envs} (each member plays "
                             f"an equal share of the environments)")


class OnDeviceRounds:
    """Trains ``size`` individuals at a time on a vectorized task.

    Args:
        config: the run's base configuration (search ranges resolved), ``mdp.create: vec``.
        size: the population size (members trained together).
        searched: the searched keys (see :data:`SEARCHABLE`).
        league_folder: where a league's tables go (None: nowhere).
    """

    def __init__(self, config: Mapping[str, Any], size: int, searched: Sequence[str],
                 league_folder: Path | None = None) -> None:
        check_vectorized(config, size, searched)
        self.base, self.size, self.league_folder = config, size, league_folder
        seed = RunSettings.from_config(config).seed
        self.config = round_config(config, {}, seed)
        self.selfplay = EvolutionSettings.from_config(config).selfplay
        league = LeagueSettings.from_config(config) if self.selfplay else None
        self.learner = OnDevicePopulationLearner(self.config, size, league)
        games = SampleSettings.from_config(config).eval
        self.evaluation = OnDeviceEvaluation(config["mdp"]["vec"], games, ("initial",),
                                        seed=seed + VEC_EVALUATION_SEED_OFFSET, players=size) if games > 0 else None

    def train_round(self, tasks: Sequence[Mapping[str, Any]],
                    opponents: Mapping[int, Mapping[str, torch.Tensor]] | None = None) -> list[dict[str, Any]]:
        """Load each task into a member slot, train all members until ``ec.train.stopper`` holds, evaluate each
        against the initial policy (and, in a league, rate them); one report per task (as
        :meth:`PopulationLearner.train` gives). ``opponents``: the weights of members other learners train (id →
        model state dict), who join a league."""
        learner = self.learner
        for member, task in enumerate(tasks):
            self._load(member, task)
        if self.selfplay:
            learner.opponents.set_external(member_blobs(learner.members[0], opponents or {}))
        learner.opponents.reset_tally()
        started, cost, iterations = time.monotonic(), learner.cost, learner.iteration
        scale = max(float(task.get("scale", 1.0)) for task in tasks)
        TrainingLoop(learner, announce=False).run(stop=RoundStopper(RoundSettings.from_config(self.base).stopper,
                                                                    learner, scale))
        seconds = time.monotonic() - started
        share = (learner.cost - cost) // self.size
        ratings = self._rate(tasks) if self.selfplay else None
        results = self.evaluation.evaluate_many(learner.members, [learner.opponents.initial_blob]) \
            if self.evaluation is not None else [None] * self.size
        return [self._report(member, task, share, learner.iteration - iterations, seconds, ratings, result)
                for member, (task, result) in enumerate(zip(tasks, results))]

    def _load(self, member: int, task: Mapping[str, Any]) -> None:
        learner = self.learner
        config = round_config(self.base, task["hparams"], int(task["seed"]))
        state = owned(task["state"]) if task.get("state") is not None else None
        if state is None:
            with seeded(int(task["seed"])):
                weights = vec_model(learner.task, ModelSettings.from_config(self.base)).state_dict()
        else:
            weights = state["model"]
        if task.get("weight_noise"):                 # NSGA-II's weight noise on the inherited parameters
            noisy = copy.deepcopy(learner.members[member])
            noisy.load_state_dict(weights)
            generator = torch.Generator().manual_seed(int(task["id"]))
            with torch.no_grad():
                for parameter in noisy.parameters():
                    noise = torch.randn(parameter.shape, generator=generator) * float(task["weight_noise"])
                    parameter.add_(noise.to(parameter.device))
            weights = noisy.state_dict()
        learner.load_member(member, config, weights, state if state and "optimizer" in state else None)

    def _rate(self, tasks: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """The round's Elo of the members and the initial policy; the league tables written."""
        learner = self.learner
        ratings = learner.opponents.ratings()
        if self.league_folder is not None:
            entrants = [Entrant(f"individual {task['id']}", np.empty(0), learner.iteration, learner.cost)
                        for task in tasks] + [Entrant(f"individual {i} (another learner)", np.empty(0))
                                              for i in learner.opponents.external] + [Entrant("initial", np.empty(0))]
            write_tables(self.league_folder, entrants, learner.opponents.tally, ratings)
            plot(self.league_folder, entrants, learner.opponents.tally, ratings)
        return ratings

    def _report(self, member: int, task: Mapping[str, Any], cost: int, iterations: int, seconds: float,
                ratings: np.ndarray | None, result: Mapping[str, float] | None) -> dict[str, Any]:
        """One member's report: its state, its deterministic ``result`` against the initial policy, its league
        rating."""
        learner = self.learner
        summary: dict[str, float] = {}
        episodes: list[float] = []
        if result is not None:
            wins, draws, losses = (int(result[f"initial/{k}"]) for k in ("wins", "draws", "losses"))
            episodes = [1.0] * wins + [0.0] * draws + [-1.0] * losses
            summary = {"episodes": float(len(episodes)), "win": result["initial/score"],
                       "fitness": 2.0 * result["initial/score"] - 1.0}
        if ratings is not None:
            summary.update({"elo": float(ratings[member]), "elo_initial": float(ratings[-1]),
                            "fitness": float(ratings[member] - ratings[-1])})
        state = {**learner.member_state(member), "iteration": learner.iteration, "cost": cost, "elapsed": seconds}
        training = {"win": learner.initial_scores[member].mean(), "win_all": learner.scores[member].mean()}
        return {"id": task["id"], "state": state, "summary": summary, "episodes": episodes, "training": training,
                "cost": cost, "iterations": iterations, "seconds": seconds, "learner": member,
                "node": socket.gethostname()}

    def close(self) -> None:
        self.learner.close()
        if self.evaluation is not None:
            self.evaluation.close()

