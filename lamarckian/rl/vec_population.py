"""A vectorized population on one device: P members of one architecture train together on one VecTask, each on its
own ``num_envs / P`` environments, acting in ONE forward (:meth:`PopulationPPO.act`) and updated in ONE batched PPO
step (:meth:`PopulationPPO.optimize`), with per-member learning rates, Adam moments and shuffling.

The members play agent 0 of their environments; the other seats are played by a league: the initial policy and a
snapshot of every member, refreshed every ``snapshot_every`` iterations, one drawn uniformly per environment at each
episode start (all of them in one stacked forward). A trainer of the one run loop (:mod:`.loop`).
"""

from __future__ import annotations

import math
import time
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ..config.sections import EvaluatorSettings
from ..mdp.vec import VecTask, create_vec_task
from ..model import to_blob
from ..model.network import seeded
from ..model.stacked import StackedPolicies
from .evaluator import Evaluator
from .loop import Trainer
from .population_ppo import PopulationPPO
from .ppo import PPO, PPOSettings
from .segment import Segment
from .vec_evaluation import VecEvaluation
from .vec_learner import vec_model
from .window import ScoreWindow, outcome_score

WINDOW = 500   # training games each member's running score is taken over


class VecPopulationLearner(Trainer):
    """Trains ``len(lrs)`` members together (run it with :class:`.loop.TrainingLoop`).

    Args:
        config: the resolved configuration (``mdp.create: vec``); ``mdp.vec.num_envs`` must be a multiple of P.
        lrs: each member's learning rate (P = ``len(lrs)``).
        snapshot_every: iterations between refreshes of the members' snapshots in the league.
    """

    def __init__(self, config: Mapping[str, Any], lrs: Sequence[float], snapshot_every: int = 10) -> None:
        self.config = config
        vec = config["mdp"]["vec"]
        self.task: VecTask = create_vec_task(vec, seed=config["seed"])
        self.device, self.size = self.task.device, len(lrs)
        if self.size < 1 or self.task.num_envs % self.size:
            raise ValueError(f"mdp.vec.num_envs={self.task.num_envs} must be a positive multiple of the population "
                             f"size {self.size}")
        self.member_envs = self.task.num_envs // self.size
        settings = PPOSettings.from_config(config, self.device.type)
        seed = int(config["seed"])
        self.members = []
        for member in range(self.size):
            with seeded(seed + member):
                self.members.append(vec_model(self.task, config["model"]))
        self.preparers = [PPO(model, settings) for model in self.members]          # advantages and targets
        self.population = PopulationPPO(self.members, settings, lrs, [seed + m for m in range(self.size)])
        self.horizon, self.snapshot_every = int(vec["horizon"]), max(1, int(snapshot_every))
        self.initial_blob = to_blob(self.members[0])
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.evaluator = Evaluator(EvaluatorSettings.from_config(config))
        games = self.evaluator.episodes
        self.evaluation = VecEvaluation(vec, games, ("initial",), seed=seed + 1) if games > 0 else None
        self.iteration = self.cost = self.version = 0
        self.elapsed = 0.0
        self.training: dict[str, float] = {}
        self.scores = [ScoreWindow(WINDOW) for _ in range(self.size)]
        self.observations: torch.Tensor | None = None
        self._stack_league()

    # ---- the league -------------------------------------------------------------------------------------------
    def _stack_league(self) -> None:
        """The initial policy and every member's current weights, stacked; every environment draws anew."""
        self.league = StackedPolicies(self.members[0], [self.initial_blob, *map(to_blob, self.members)], self.device)
        self.opponent = self._draw()

    def _draw(self) -> torch.Tensor:
        return torch.randint(self.league.count, (self.task.num_envs,), generator=self.generator, device=self.device)

    # ---- sampling -------------------------------------------------------------------------------------------------
    def rollout(self) -> tuple[list[Segment], torch.Tensor]:
        """``horizon`` steps of every environment: one segment per member (tensors ``[T, E/P, ...]``) and each
        member's (wins, draws, losses) ``(P, 3)`` of the games that ended."""
        task, size, envs, steps = self.task, self.size, self.task.num_envs, self.horizon
        if self.observations is None:
            self.observations = task.reset().to(self.device)
        zeros = lambda *shape: torch.zeros(*shape, device=self.device)  # noqa: E731
        member_envs = self.member_envs
        buffers = {name: zeros(steps, size, member_envs, *tail) for name, tail in
                   (("observations", (task.num_obs,)), ("actions", (task.num_actions,)), ("log_probs", ()),
                    ("rewards", ()), ("dones", ()))}
        values = zeros(steps + 1, size, member_envs)
        outcomes = zeros(size, 3)
        seats = task.num_agents - 1
        width = envs * seats if self.device.type != "cpu" else None     # no host sync on a GPU (see VecLearner)
        for t in range(steps):
            own = self.observations[:envs].reshape(size, member_envs, -1)
            action, log_prob, value = self.population.act(own, self.generator)
            others = self.league.act(self.observations[envs:], self.opponent.repeat(seats), deterministic=False,
                                     generator=self.generator, width=width)
            self.observations, reward, done, extras = task.step(torch.cat([action.reshape(envs, -1), others])
                                                                .clamp(-1, 1))
            done = done.to(self.device)
            for name, tensor in (("observations", own), ("actions", action), ("log_probs", log_prob),
                                 ("rewards", reward[:envs].to(self.device).reshape(size, member_envs)),
                                 ("dones", done.float().reshape(size, member_envs))):
                buffers[name][t] = tensor
            values[t] = value
            result = torch.stack([extras["win"], extras["draw"], extras["lose"]], 1).to(self.device).float()
            outcomes += (result * done.float()[:, None]).reshape(size, member_envs, 3).sum(1)
            self.opponent = torch.where(done, self._draw(), self.opponent)
        values[steps] = self.population.act(self.observations[:envs].reshape(size, member_envs, -1),
                                            self.generator)[2]
        segments = [Segment(**{name: tensor[:, member] for name, tensor in buffers.items()},
                            values=values[:, member], truncated=zeros(steps, member_envs),
                            final_values=zeros(steps, member_envs), version=self.version,
                            steps=steps * member_envs) for member in range(size)]
        return segments, outcomes

    def step(self) -> dict[str, float]:
        """One rollout of every member and one batched update; the league refreshed when due."""
        started = time.monotonic()
        segments, outcomes = self.rollout()
        outcomes = outcomes.cpu().numpy()
        rolled = time.monotonic()
        batches = [ppo.prepare([segment], self.version) for ppo, segment in zip(self.preparers, segments)]
        member_stats = self.population.optimize(batches)
        self._record(outcomes)
        self.version += 1
        self.iteration += 1
        steps = self.horizon * self.task.num_envs
        self.cost += steps
        if self.iteration % self.snapshot_every == 0:
            self._stack_league()
        stats = {key: float(np.mean([s[key] for s in member_stats])) for key in member_stats[0]}
        stats.update({"fps/overall": steps * self.task.num_agents / max(1e-9, time.monotonic() - started),
                      "time/rollout": rolled - started, "time/update": time.monotonic() - rolled})
        return stats

    def _record(self, outcomes: np.ndarray) -> None:
        for window, (wins, draws, losses) in zip(self.scores, outcomes):
            window.add(*outcome_score(wins, draws, losses))
        means = [window.mean() for window in self.scores]
        known = [m for m in means if not math.isnan(m)]
        self.training = {f"win/{member}": mean for member, mean in enumerate(means)}
        if known:
            self.training.update({"win": float(np.max(known)), "fitness": 2.0 * float(np.max(known)) - 1.0})

    # ---- the run loop's view ------------------------------------------------------------------------------------
    def evaluate(self) -> dict[str, float]:
        """Each member's deterministic games against the initial policy; ``win`` is the best member's score."""
        if self.evaluation is None:
            return {}
        summary: dict[str, float] = {}
        for member, model in enumerate(self.members):
            result = self.evaluation.evaluate(model, [self.initial_blob])
            summary[f"member{member}/score"] = result["initial/score"]
        best = max(summary.values())
        summary.update({"episodes": float(self.evaluator.episodes * self.size), "win": best,
                        "fitness": 2.0 * best - 1.0})
        self.evaluator.latest = dict(summary)
        return summary

    def opening_line(self) -> str:
        return (f"training a population of {self.size} × {self.member_envs} {type(self.task).__name__} environments "
                f"on {self.device}, horizon {self.horizon}")

    def status(self, stats: Mapping[str, float]) -> dict[str, str]:
        best = self.training.get("win", math.nan)
        return {"members": str(self.size), "best train win": f"{best:.2f}"}

    def evaluation_line(self, summary: Mapping[str, float]) -> str:
        scores = [summary[f"member{m}/score"] for m in range(self.size) if f"member{m}/score" in summary]
        return "vs initial, per member: " + " ".join(f"{s:.2f}" for s in scores)

    def state_dict(self) -> dict[str, Any]:
        """The members' weights (``model``: the first member's, for tools that read one), the batched optimizer, the
        league's initial policy, the running scores, counters."""
        return {"model": self.members[0].state_dict(), "members": [m.state_dict() for m in self.members],
                "population": self.population.state_dict(), "initial": torch.from_numpy(self.initial_blob.copy()),
                "scores": [w.state() for w in self.scores], "generator": self.generator.get_state(),
                "iteration": self.iteration, "cost": self.cost, "elapsed": self.elapsed}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for model, saved in zip(self.members, state["members"]):
            model.load_state_dict(saved)
        self.population.load_state_dict(state["population"])
        self.initial_blob = state["initial"].numpy().copy()
        for window, saved in zip(self.scores, state["scores"]):
            window.load(saved)
        self.iteration, self.cost, self.elapsed = int(state["iteration"]), int(state["cost"]), float(state["elapsed"])
        self.version = self.iteration
        self._stack_league()
        self.generator.set_state(state["generator"])

    def close(self) -> None:
        self.task.close()
        if self.evaluation is not None:
            self.evaluation.close()
