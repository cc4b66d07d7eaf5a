"""A vectorized population on one device: P members of one architecture train together on one VecTask, each on its
own ``num_envs / P`` environments, acting in ONE forward (:meth:`PopulationPPO.act`) and updated in ONE batched PPO
step (:meth:`PopulationPPO.optimize`), with per-member settings (learning rate, PPO coefficients, reward weights),
Adam moments and shuffling.

Each member trains as :class:`~.learner.OnDeviceLearner` trains alone: its agent 0 against its own opponent pool
(frozen snapshots of itself, drawn per environment at each episode start by the pool's chooser, PFSP by default;
a snapshot added when ``rl.opponent.pool.add`` holds), ``mdp.vec.initial_share`` of its environments against the
initial policy. With a league (``ec.selfplay``), ``league.share`` of the other games go to the other members'
snapshots (refreshed every ``league.refresh`` iterations) and to members that other learners train
(:meth:`set_external`: a population split over several GPUs), drawn by PFSP over the member's record against each;
the games are tallied for a Bradley-Terry (Elo) rating of the members (:meth:`ratings`). All opponents
of all members act in two stacked forwards (:meth:`stack`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Mapping

import numpy as np
import torch

from ...config.sections import EvaluatorSettings, OpponentSettings, RunSettings
from ...mdp.vec import VecTask, create_vec_task, reward_settings
from ...model import ModelSettings, to_blob
from ...model.network import seeded
from ..algorithms.population_ppo import PopulationPPO
from ..algorithms.ppo import PPO
from ..algorithms.ppo_settings import PPOSettings
from ..evaluator import Evaluator
from ..loop import Trainer
from ..seeds import VEC_EVALUATION_SEED_OFFSET
from ..segment import Segment
from ..selfplay.pool import PoolSettings
from ..selfplay.window import ScoreWindow
from .evaluation import OnDeviceEvaluation
from .league import INITIAL, LeagueOpponents, LeagueSettings
from .learner import vec_model
from .opponents import outcome_rows

WINDOW = 500   # training games each member's running scores are taken over


class OnDevicePopulationLearner(Trainer):
    """Trains ``size`` members together (run it with :class:`.loop.TrainingLoop`).

    Args:
        config: the resolved configuration (``mdp.create: vec``); ``mdp.vec.num_envs`` must be a multiple of P.
            Every member starts with its settings; :meth:`load_member` gives a member its own.
        size: P, the number of members.
        league: the members play each other (None: each plays its own pool and the initial policy only).
    """

    def __init__(self, config: Mapping[str, Any], size: int, league: LeagueSettings | None = None) -> None:
        self.config = config
        vec = config["mdp"]["vec"]
        seed = RunSettings.from_config(config).seed
        self.task: VecTask = create_vec_task(vec, seed=seed)
        task = self.task
        self.device, self.size = task.device, int(size)
        if self.size < 1 or task.num_envs % self.size:
            task.close()
            raise ValueError(f"mdp.vec.num_envs={task.num_envs} must be a positive multiple of the population "
                             f"size {self.size}")
        self.member_envs = task.num_envs // self.size
        settings = PPOSettings.from_config(config, self.device.type)
        self.members = []
        for member in range(self.size):
            with seeded(seed + member):
                self.members.append(vec_model(task, ModelSettings.from_config(config)))
        self.preparers = [PPO(model, settings) for model in self.members]          # advantages and targets
        self.population = PopulationPPO(self.members, [settings] * self.size, [seed + m for m in range(self.size)])
        self.member_configs: list[Mapping[str, Any]] = [config] * self.size
        self.horizon = int(vec["horizon"])
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.anneal = vec["reward"]["anneal"]
        # a fixed batch of vectorized games (one compiled shape): no budget in steps
        self.evaluator = Evaluator(dataclasses.replace(EvaluatorSettings.from_config(config), steps=0))
        games = self.evaluator.episodes
        self.evaluation = (OnDeviceEvaluation(vec, games, INITIAL, seed=seed + VEC_EVALUATION_SEED_OFFSET,
                                              players=self.size)
                           if games > 0 else None)
        self.iteration = self.cost = self.version = 0
        self.elapsed = 0.0
        self.training: dict[str, float] = {}
        self.scores = [ScoreWindow(WINDOW) for _ in range(self.size)]          # all training games
        self.initial_scores = [ScoreWindow(WINDOW) for _ in range(self.size)]  # those of the initial lanes
        self.observations: torch.Tensor | None = None
        self.opponents = LeagueOpponents(task, self.generator, OpponentSettings.from_config(config).deterministic,
                                         self.size, PoolSettings.from_config(config), to_blob(self.members[0]),
                                         float(vec["initial_share"]), self.members, league)

    # ---- members ----------------------------------------------------------------------------------------------
    def load_member(self, member: int, config: Mapping[str, Any], weights: Mapping[str, torch.Tensor],
                    state: Mapping[str, Any] | None) -> None:
        """Slot ``member`` takes another network: its config (PPO settings, reward weights; the rest must equal
        the run's), its weights, and its optimizer state and opponent pool (``state``, as :meth:`member_state`
        gives; None: fresh). Its running scores and league record start over."""
        self.members[member].load_state_dict(weights)
        settings = PPOSettings.from_config(config, self.device.type)
        self.preparers[member].settings = settings
        self.population.load_member(member, state["optimizer"] if state else None, settings)
        self.member_configs[member] = config
        self._set_rewards()
        pool = self.opponents.fresh_pool()
        if state is not None and state.get("pool") is not None:
            pool.load_state_dict(state["pool"])
        self.scores[member].load([])
        self.initial_scores[member].load([])
        self.opponents.replace_member(member, pool)

    def member_state(self, member: int) -> dict[str, Any]:
        """What travels with a member's network between rounds: its weights, optimizer state, opponent pool."""
        return {"model": {k: v.detach().cpu().clone() for k, v in self.members[member].state_dict().items()},
                "optimizer": self.population.member_state(member), "pool": self.opponents.pools[member].state_dict()}

    def _set_rewards(self) -> None:
        """Each member's ``mdp.vec.reward`` weights on its environments (only where some member's differ)."""
        rewards = [reward_settings(c["mdp"]["vec"]) for c in self.member_configs]
        if all(r == rewards[0] for r in rewards):
            if getattr(self, "_per_env_rewards", False):
                self.task.set_reward_weights(self._per_env(rewards))
            return
        if not hasattr(self.task, "set_reward_weights"):
            raise ValueError(f"mdp.vec.reward: {type(self.task).__name__} has no per-environment reward weights; "
                             f"vectorized members must share them")
        self.task.set_reward_weights(self._per_env(rewards))
        self._per_env_rewards = True

    def _per_env(self, rewards: list[dict[str, float]]) -> dict[str, torch.Tensor]:
        return {field: torch.tensor([r[field] for r in rewards], device=self.device)[self.opponents.member_of_env]
                for field in rewards[0]}

    # ---- sampling -------------------------------------------------------------------------------------------------
    def rollout(self) -> tuple[list[Segment], torch.Tensor]:
        """``horizon`` steps of every environment: one segment per member (tensors ``[T, E/P, ...]``) and each
        member's (wins, draws, losses) against each stacked opponent ``(P, K, 3)`` of the games that ended."""
        task, size, envs, steps = self.task, self.size, self.task.num_envs, self.horizon
        if self.observations is None:
            self.observations = task.reset().to(self.device)
        zeros = lambda *shape: torch.zeros(*shape, device=self.device)  # noqa: E731
        opponents = self.opponents
        member_envs, count = self.member_envs, len(opponents.keys)
        buffers = {name: zeros(steps, size, member_envs, *tail) for name, tail in
                   (("observations", (task.num_obs,)), ("actions", (task.num_actions,)), ("log_probs", ()),
                    ("rewards", ()), ("dones", ()))}
        values = zeros(steps + 1, size, member_envs)
        outcomes = zeros(size * count, 3)
        for t in range(steps):
            own = self.observations[:envs].reshape(size, member_envs, -1)
            action, log_prob, value = self.population.act(own, self.generator)
            others = opponents.act(self.observations[envs:])
            self.observations, reward, done, extras = task.step(torch.cat([action.reshape(envs, -1), others])
                                                                .clamp(-1, 1))
            done = done.to(self.device)
            for name, tensor in (("observations", own), ("actions", action), ("log_probs", log_prob),
                                 ("rewards", reward[:envs].to(self.device).reshape(size, member_envs)),
                                 ("dones", done.float().reshape(size, member_envs))):
                buffers[name][t] = tensor
            values[t] = value
            outcomes.index_add_(0, opponents.member_of_env * count + opponents.opponent,
                                outcome_rows(extras, self.device) * done.float()[:, None])
            opponents.redraw_finished(done)
        values[steps] = self.population.act(self.observations[:envs].reshape(size, member_envs, -1),
                                            self.generator)[2]
        member_buffers: list[dict[str, Any]] = [{name: tensor[:, member] for name, tensor in buffers.items()}
                                                for member in range(size)]
        segments = [Segment(**member_buffers[member],
                            values=values[:, member], truncated=zeros(steps, member_envs),
                            final_values=zeros(steps, member_envs), version=self.version,
                            steps=steps * member_envs) for member in range(size)]
        return segments, outcomes.reshape(size, count, 3)

    def step(self) -> dict[str, float]:
        """One rollout of every member and one batched update; snapshots frozen and the league refreshed when
        due."""
        started = time.monotonic()
        if self.anneal:
            self.task.dense_scale = max(0.0, 1.0 - self.cost / float(self.anneal))
        segments, outcome_counts = self.rollout()
        outcomes = outcome_counts.cpu().numpy()
        rolled = time.monotonic()
        batches = [ppo.prepare([segment], self.version) for ppo, segment in zip(self.preparers, segments)]
        member_stats = self.population.optimize(batches, self.cost)
        for ppo, batch in zip(self.preparers, batches):
            ppo.fold_observations(batch)
        self.record(outcomes)
        self.version += 1
        self.iteration += 1
        steps = self.horizon * self.task.num_envs
        self.cost += steps
        opponents, restack = self.opponents, False
        for member, pool in enumerate(opponents.pools):
            if pool.should_add(self.iteration):
                pool.add(to_blob(self.members[member]), self.iteration, cost=self.cost, elapsed=self.elapsed)
                restack = True
        if opponents.league and self.iteration % opponents.league.refresh == 0:
            opponents.refresh()
        elif restack:
            opponents.stack()
        stats = {key: float(np.mean([s[key] for s in member_stats])) for key in member_stats[0]}
        stats.update({"fps/overall": steps * self.task.num_agents / max(1e-9, time.monotonic() - started),
                      "time/rollout": rolled - started, "time/update": time.monotonic() - rolled})
        return stats

    def record(self, outcomes: np.ndarray) -> None:
        """Fold one rollout's game counts ``(P, K, 3)`` into the opponents' pools, league record and tally, and the
        running scores."""
        self.opponents.record(outcomes)
        for member in range(self.size):
            self.scores[member].add_outcomes(*outcomes[member].sum(0))
            self.initial_scores[member].add_outcomes(*outcomes[member, -1])
        means = [window.mean() for window in self.initial_scores]
        known = [m for m in means if not math.isnan(m)]
        self.training = {f"win/{member}": mean for member, mean in enumerate(means)}
        if known:
            self.training.update({"win": float(np.max(known)), "fitness": 2.0 * float(np.max(known)) - 1.0})

    # ---- the run loop's view ------------------------------------------------------------------------------------
    def evaluate(self) -> dict[str, float]:
        """Each member's deterministic games against the initial policy; ``win`` is the best member's score."""
        if self.evaluation is None:
            return {}
        results = self.evaluation.evaluate_many(self.members, [self.opponents.initial_blob])
        summary = {f"member{member}/score": result["initial/score"] for member, result in enumerate(results)}
        best = max(summary.values())
        summary.update({"episodes": float(self.evaluator.episodes * self.size), "win": best,
                        "fitness": 2.0 * best - 1.0})
        self.evaluator.latest = dict(summary)
        return summary

    def opening_line(self) -> str:
        return (f"training a population of {self.size} × {self.member_envs} {type(self.task).__name__} environments "
                f"on {self.device}, horizon {self.horizon}" + (", a league" if self.opponents.league else ""))

    def status(self, stats: Mapping[str, float]) -> dict[str, str]:
        best = self.training.get("win", math.nan)
        return {"members": str(self.size), "best train vs initial": f"{best:.2f}",
                "pools": "/".join(str(len(pool)) for pool in self.opponents.pools)}

    def evaluation_line(self, summary: Mapping[str, float]) -> str:
        scores = [summary[f"member{m}/score"] for m in range(self.size) if f"member{m}/score" in summary]
        return "vs initial, per member: " + " ".join(f"{s:.2f}" for s in scores)

    def state_dict(self) -> dict[str, Any]:
        """The members' weights (``model``: the first member's, for tools that read one), the batched optimizer, the
        pools, the league, the initial policy, the running scores, counters."""
        return {"model": self.members[0].state_dict(), "members": [m.state_dict() for m in self.members],
                "population": self.population.state_dict(),
                "initial": torch.from_numpy(self.opponents.initial_blob.copy()), **self.opponents.state_dict(),
                "scores": [w.state() for w in self.scores], "initial_scores": [w.state() for w in self.initial_scores],
                "generator": self.generator.get_state(), "iteration": self.iteration, "cost": self.cost,
                "elapsed": self.elapsed}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for model, saved in zip(self.members, state["members"]):
            model.load_state_dict(saved)
        self.population.load_state_dict(state["population"])
        self.opponents.initial_blob = state["initial"].numpy().copy()
        for windows, key in ((self.scores, "scores"), (self.initial_scores, "initial_scores")):
            for window, saved in zip(windows, state[key]):
                window.load(saved)
        self.iteration, self.cost, self.elapsed = int(state["iteration"]), int(state["cost"]), float(state["elapsed"])
        self.version = self.iteration
        self.opponents.load_state_dict(state)     # games restart: every environment draws its opponent anew
        self.generator.set_state(state["generator"])

    def close(self) -> None:
        self.task.close()
        if self.evaluation is not None:
            self.evaluation.close()
