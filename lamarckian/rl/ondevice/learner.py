"""Self-play training on a vectorized task (rl_games style): the task steps ``num_envs`` games per call; the learner
plays agent 0's rows, a stacked opponent pool plays the others' (one batched forward, the opponent drawn per
environment at each episode start by the pool's chooser, PFSP by default). Rollouts of ``mdp.vec.horizon`` steps
× ``num_envs`` environments feed the same PPO update as train.py's actors. No Ray: everything is in this process.

Everything stays on the task's device (``mdp.vec.device``): observations, actions, rewards, the rollout buffers,
the opponent assignment and the game outcomes. The host reads statistics once per iteration (after the update).
A share of the environments (``mdp.vec.initial_share``) always plays the initial policy: its games, which are
training data like any other, give a running (stochastic) score against it. What the run reports as its result is
the periodic deterministic evaluation (:mod:`.vec_evaluation`): ``evaluator.episodes`` games with mean actions
against the initial policy and against the newest pool snapshot, both seats, on spawns that every evaluation
replays. ``self.win`` in ``evaluator.terminate`` is the score of those games against the initial policy.

It runs in the one run loop (:mod:`.loop`) like the actor-fleet learner: the same checkpoints, snapshots,
evaluation cadence and status line.

Under ``torchrun --nproc_per_node N`` (several GPUs, or processes on CPUs) each rank steps its ``num_envs / N``
environments with its own seed on its own device, the PPO update is data-parallel (:mod:`.distributed`: the step one
process would take on the whole batch), the game counts are summed over the ranks (so every rank's pool and scores
agree) and rank 0 decides pool additions and the stop, evaluates, and writes checkpoints and the status line. A
checkpoint does not depend on N.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Mapping

import gymnasium
import numpy as np
import torch

from ...config.sections import EvaluatorSettings, OpponentSettings, RunSettings, TrainSettings
from ...mdp.vec import VecTask, create_vec_task, placement
from ...model import ActorCritic, ModelSettings, to_blob
from ...model.network import seeded
from ..algorithms.ppo import PPO
from ..algorithms.ppo_settings import PPOSettings
from ..distributed import Ranks
from ..evaluator import Evaluator
from ..loop import Trainer
from ..seeds import VEC_EVALUATION_SEED_OFFSET
from ..segment import Segment
from ..selfplay.pool import OpponentPool, PoolSettings
from ..selfplay.window import ScoreWindow
from .evaluation import OnDeviceEvaluation, evaluation_line
from .opponents import PoolOpponents, outcome_rows

WINDOW = 500                          # games the running (training) scores are taken over
OPPONENTS = ("initial", "newest")     # the deterministic evaluation's opponents: initial policy, newest snapshot


def vec_model(task: VecTask, model_settings: ModelSettings) -> ActorCritic:
    """The actor-critic for ``task``'s observations and actions in [-1, 1], on its device."""
    spaces = (gymnasium.spaces.Box(-np.inf, np.inf, (task.num_obs,), np.float32),
              gymnasium.spaces.Box(-1.0, 1.0, (task.num_actions,), np.float32))
    if model_settings.recurrent is not None:
        raise ValueError(f"model.recurrent={model_settings.recurrent}: a vectorized task (mdp.create: vec) trains "
                         "feed-forward networks; recurrent ones train on the actor fleet")
    return ActorCritic(*spaces, model_settings).to(task.device)


class OnDeviceLearner(Trainer):
    """Trains agent 0 of a :class:`VecTask` against snapshots of itself (run it with :class:`.loop.TrainingLoop`).

    Args:
        config: the resolved configuration (``mdp.create: vec``).
    """

    def __init__(self, config: Mapping[str, Any], ranks: Ranks | None = None) -> None:
        self.config, self.ranks = config, ranks
        self.seed = RunSettings.from_config(config).seed
        vec = config["mdp"]["vec"]
        if ranks is not None:
            vec = self._join(vec, config)
        self.task: VecTask = create_vec_task(vec, seed=self.seed + (ranks.rank if ranks else 0))
        task = self.task
        self.device = task.device
        with seeded(self.seed):
            self.model = vec_model(task, ModelSettings.from_config(config))
        self.update_rule = PPO(self.model, PPOSettings.from_config(config, self.device.type), seed=self.seed,
                               ranks=ranks)
        self.horizon = int(vec["horizon"])
        initial_blob = to_blob(self.model)
        pool = OpponentPool(PoolSettings.from_config(config))
        pool.add(initial_blob, iteration=0)
        self.generator = torch.Generator(device=self.device).manual_seed(self._stream_seed(0))
        # a fixed batch of vectorized games (one compiled shape): no budget in steps
        self.evaluator = Evaluator(dataclasses.replace(EvaluatorSettings.from_config(config), steps=0))
        self.evaluation = self._evaluation(vec, config)
        self.anneal = vec["reward"]["anneal"]
        if self.anneal and not hasattr(task, "dense_scale"):
            raise ValueError(f"mdp.vec.reward.anneal: {type(task).__name__} has no dense rewards to anneal")
        self.iteration = self.cost = self.version = 0
        self.elapsed = 0.0
        self.training: dict[str, float] = {}
        self.recent_scores = ScoreWindow(WINDOW)      # all training games (stochastic actions)
        self.initial_scores = ScoreWindow(WINDOW)     # training games of the initial lanes
        self.observations: torch.Tensor | None = None
        self.opponents = PoolOpponents(task, self.generator, OpponentSettings.from_config(config).deterministic, pool,
                                       initial_blob, round(float(vec["initial_share"]) * task.num_envs), self.model)

    @property
    def pool(self) -> OpponentPool:
        """The opponent pool (snapshots of the learner)."""
        return self.opponents.pool

    def _join(self, vec: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
        """Join the ranks' group; this rank's ``mdp.vec`` section (its share of the environments, its device)."""
        ranks = self.ranks
        assert ranks is not None, "joined only with train.ranks > 1"
        backend, device, num_envs = placement(vec)
        if num_envs % ranks.size:
            raise ValueError(f"mdp.vec.num_envs={num_envs} must be a multiple of the {ranks.size} ranks")
        device_type = torch.device(device).type
        ranks.join(ranks.backend(device_type), TrainSettings.from_config(config).rank_timeout)
        return {**vec, "backend": backend, "device": str(ranks.device(device_type)), "num_envs": num_envs // ranks.size}

    def _stream_seed(self, iteration: int) -> int:
        """The seed of this rank's sampling stream (opponent draws, actions) from ``iteration`` on."""
        rank = self.ranks.rank if self.ranks else 0
        return self.seed + 1_000_003 * rank + iteration * (rank > 0)

    @property
    def main(self) -> bool:
        """This process decides and writes (rank 0, or alone)."""
        return self.ranks is None or self.ranks.main

    def agree(self, decision: bool) -> bool:
        """Rank 0's ``decision`` on every rank."""
        return decision if self.ranks is None else self.ranks.decide(decision, self.device)

    @property
    def total_envs(self) -> int:
        """Environments over all ranks."""
        return self.task.num_envs * (self.ranks.size if self.ranks else 1)

    def _evaluation(self, vec: Mapping[str, Any], config: Mapping[str, Any]) -> OnDeviceEvaluation | None:
        """The deterministic evaluation (None: ``evaluator.episodes`` is 0, the task lives in an Isaac Gym server,
        which holds one task only, or this is not rank 0)."""
        games = self.evaluator.episodes
        if games <= 0 or vec["backend"] == "isaacgym" or not self.main:
            return None
        return OnDeviceEvaluation(vec, games, OPPONENTS, seed=RunSettings.from_config(config).seed
                             + VEC_EVALUATION_SEED_OFFSET)

    # ---- sampling -------------------------------------------------------------------------------------------
    def rollout(self) -> tuple[Segment, torch.Tensor, torch.Tensor]:
        """``horizon`` steps of every environment, on the device.

        Returns the segment (tensors ``[T, E, ...]``; ``values`` ``[T + 1, E]``), the game outcomes per stacked
        opponent ``(P + 1, 3)`` (wins, draws, losses of the learner; the last row: the initial policy) and
        ``(sum of returns, count, sum of lengths)`` of the episodes that finished."""
        task, model, envs, steps = self.task, self.model, self.task.num_envs, self.horizon
        if self.observations is None:
            self.observations = task.reset().to(self.device)
            self.episode_return = torch.zeros(envs, device=self.device)
            self.episode_length = torch.zeros(envs, device=self.device)
        zeros = lambda *shape: torch.zeros(*shape, device=self.device)  # noqa: E731
        segment = Segment(observations=zeros(steps, envs, task.num_obs), actions=zeros(steps, envs, task.num_actions),
                          log_probs=zeros(steps, envs), values=zeros(steps + 1, envs), rewards=zeros(steps, envs),
                          dones=zeros(steps, envs), truncated=zeros(steps, envs), final_values=zeros(steps, envs),
                          version=self.version, steps=steps * envs)
        opponents = self.opponents
        outcomes = zeros(opponents.count, 3)
        returns = zeros(3)
        # a GPU pads every policy's block to all rows (learning the largest group would wait on the device); on the
        # CPU that wait is free and the smaller block is faster
        width = envs * (task.num_agents - 1) if self.device.type != "cpu" else None
        for t in range(steps):
            own = self.observations[:envs]
            action, log_prob, value = model.act(own, generator=self.generator)
            opponent_action = opponents.act(self.observations[envs:], width)
            self.observations, reward, done, extras = task.step(torch.cat([action, opponent_action]).clamp(-1, 1))
            reward, done = reward[:envs].to(self.device), done.to(self.device)
            for name, tensor in zip(("observations", "actions", "log_probs", "values", "rewards", "dones"),
                                    (own, action, log_prob, value, reward, done)):
                getattr(segment, name)[t] = tensor
            finished = done.float()
            outcomes.index_add_(0, opponents.opponent, outcome_rows(extras, self.device) * finished[:, None])
            self.episode_return += reward
            self.episode_length += 1.0
            returns += torch.stack([(self.episode_return * finished).sum(), finished.sum(),
                                    (self.episode_length * finished).sum()])
            self.episode_return *= 1.0 - finished
            self.episode_length *= 1.0 - finished
            opponents.redraw_finished(done)
        segment.values[steps] = model.value(self.observations[:envs])
        return segment, outcomes, returns

    def record(self, outcomes: np.ndarray, returns: np.ndarray) -> None:
        """Fold one rollout's game counts (host copies) into the pool, the running scores and the training summary.
        The games of a rollout have no order among them: each statistic takes them as one batch of counts."""
        self.opponents.record(outcomes)
        self.recent_scores.add_outcomes(*outcomes.sum(0))
        self.initial_scores.add_outcomes(*outcomes[-1])
        if self.recent_scores.games:
            score = self.recent_scores.mean()
            self.training = {"episodes": float(len(self.recent_scores)), "win": score, "fitness": 2.0 * score - 1.0}
        if returns[1]:
            self.training["return"] = float(returns[0] / returns[1])
            if len(returns) > 2:
                self.training["length"] = float(returns[2] / returns[1])

    def step(self) -> dict[str, float]:
        """One rollout and one PPO update; pool bookkeeping (record games, maybe freeze a snapshot). Statistics
        include ``time/rollout`` and ``time/update`` (s; the rollout's end waits for the device)."""
        started = time.monotonic()
        if self.anneal:
            self.task.dense_scale = max(0.0, 1.0 - self.cost / float(self.anneal))
        segment, outcomes, returns = self.rollout()
        if self.ranks is not None:                                   # every rank records every rank's games
            counts = self.ranks.sum(torch.cat([outcomes.reshape(-1), returns]))
            outcomes, returns = counts[:outcomes.numel()].reshape(outcomes.shape), counts[outcomes.numel():]
        episode_returns = returns.cpu().numpy()                      # waits for the rollout on the device
        rolled = time.monotonic()
        stats = self.update_rule.update([segment], self.version, self.cost)   # reads its statistics: a host sync
        stats.update({"time/rollout": rolled - started, "time/update": time.monotonic() - rolled})
        self.record(outcomes.cpu().numpy(), episode_returns)
        self.version += 1
        self.iteration += 1
        steps = self.horizon * self.total_envs
        self.cost += steps
        add = self.pool.should_add(self.iteration)
        if self.ranks is not None:
            add = self.ranks.decide(add, self.device)
        if add:
            self.pool.add(to_blob(self.model), self.iteration, cost=self.cost, elapsed=self.elapsed)
            self.opponents.stack()
        stats["fps/overall"] = steps * self.task.num_agents / max(1e-9, time.monotonic() - started)
        return stats

    def win_rate_against_initial(self) -> float:
        """The learner's training score (stochastic actions) against the initial policy over the last ``WINDOW``
        games of the ``initial_share`` environments (win 1, draw 0.5; nan: no game finished there yet)."""
        return self.initial_scores.mean()

    def evaluate(self) -> dict[str, float]:
        """The deterministic evaluation now (see the module docstring): recorded, printed, kept as ``self.win``
        etc. for ``evaluator.terminate``; ``{}`` when the run has none."""
        if self.evaluation is None:
            return {}
        newest = self.pool.snapshots[next(reversed(self.pool.snapshots))].blob
        summary = self.evaluation.evaluate(self.model, [self.opponents.initial_blob, newest])
        score = summary["initial/score"]
        self.evaluator.latest = {**summary, "win": score, "fitness": 2.0 * score - 1.0,
                                 "win_newest": summary["newest/score"]}
        return summary

    # ---- the run loop's view ------------------------------------------------------------------------------
    def opening_line(self) -> str:
        task, ranks = self.task, self.ranks
        where = f"{ranks.size} ranks × {task.num_envs} on {self.device.type}" if ranks else \
            f"{task.num_envs} × {type(task).__name__} ({task.num_agents} agents) on {self.device}"
        return f"training: {where}, horizon {self.horizon}"

    def scalars(self, stats: Mapping[str, float]) -> dict[str, float]:
        return {**super().scalars(stats), **self.pool.statistics(),
                "train/win_initial": self.win_rate_against_initial(),
                "reward/dense_scale": getattr(self.task, "dense_scale", 1.0)}

    def status(self, stats: Mapping[str, float]) -> dict[str, str]:
        fields = {"train win": f"{self.training.get('win', math.nan):.2f}",
                  "train vs initial": f"{self.win_rate_against_initial():.2f}", "pool": str(len(self.pool))}
        if "initial/score" in self.evaluator.latest:
            fields["eval vs initial"] = f"{self.evaluator.latest['initial/score']:.2f}"
        return fields

    def evaluation_line(self, summary: Mapping[str, float]) -> str:
        return f"{evaluation_line(summary, OPPONENTS)} (deterministic)" if "initial/score" in summary else ""

    # ---- state ------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Weights, optimizer, counters, the pool, the initial policy, the running scores, the device generator."""
        return {"model": self.model.state_dict(), **self.update_rule.state_dict(), "iteration": self.iteration,
                "cost": self.cost, "elapsed": self.elapsed, "pool": self.pool.state_dict(),
                "initial": torch.from_numpy(self.opponents.initial_blob.copy()),
                "scores": {"recent": self.recent_scores.state(), "initial": self.initial_scores.state()},
                "generator": self.generator.get_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.update_rule.load_state_dict(state)
        self.iteration, self.cost, self.elapsed = int(state["iteration"]), int(state["cost"]), float(state["elapsed"])
        self.version = self.iteration
        self.pool.load_state_dict(state["pool"])
        self.opponents.initial_blob = state["initial"].numpy().copy()
        scores = state.get("scores") or {}
        self.recent_scores.load(scores.get("recent", []))
        self.initial_scores.load(scores.get("initial", []))
        self.opponents.stack()                         # games restart: every environment draws its opponent anew
        if state.get("generator") is not None and self.main:   # then rank 0's stream goes on where it was saved
            self.generator.set_state(state["generator"])
        elif self.ranks is not None:              # the others start streams of their own (N may have changed)
            self.generator.manual_seed(self._stream_seed(self.iteration))

    def close(self) -> None:
        self.task.close()
        if self.evaluation is not None:
            self.evaluation.close()
        if self.ranks is not None:
            self.ranks.leave()

