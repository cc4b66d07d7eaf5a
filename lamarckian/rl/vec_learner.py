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

A run directory holds ``checkpoints/`` (the newest few, everything to resume), ``snapshots/`` (the weights every
``evaluator.checkpoint.interval``, all kept, for ``evaluate.py`` to rate a whole run), ``evaluations.csv`` and
``tensorboard/``.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import gymnasium
import numpy as np
import torch

from ..mdp.vec import VecTask, create_vec_task
from ..model import ActorCritic, ModelSettings, to_blob
from ..model.stacked import StackedPolicies
from ..record import Checkpoints, CsvLog, Progress, Scalars, format_number, plain
from .evaluator import Evaluator
from .pool import OpponentPool, PoolSettings
from .ppo import PPO, PPOSettings
from .vec_evaluation import VecEvaluation, evaluation_line
from .window import ScoreWindow

WINDOW = 500                          # games the running (training) scores are taken over
OPPONENTS = ("initial", "newest")     # the deterministic evaluation's opponents: initial policy, newest snapshot
SNAPSHOTS_KEPT = 10**6                # snapshots/ keeps every file


def vec_model(task: VecTask, settings: Mapping[str, Any]) -> ActorCritic:
    """The actor-critic for ``task``'s observations and actions in [-1, 1] (``model`` section), on its device."""
    spaces = (gymnasium.spaces.Box(-np.inf, np.inf, (task.num_obs,), np.float32),
              gymnasium.spaces.Box(-1.0, 1.0, (task.num_actions,), np.float32))
    return ActorCritic(*spaces, ModelSettings.from_mapping(settings)).to(task.device)


class VecLearner:
    """Trains agent 0 of a :class:`VecTask` against snapshots of itself.

    Args:
        config: the resolved configuration (``mdp.create: vec``).
        run: the run directory (None: nothing on disk).
    """

    def __init__(self, config: Mapping[str, Any], run: Path | None = None) -> None:
        self.config = config
        vec = config["mdp"]["vec"]
        torch.manual_seed(config["seed"])
        torch.set_num_threads(max(1, int(config["train"]["threads"])))
        self.task: VecTask = create_vec_task(vec, seed=config["seed"])
        task = self.task
        self.device = task.device
        self.model = vec_model(task, config["model"])
        self.ppo = PPO(self.model, PPOSettings.from_config(config, self.device.type), seed=config["seed"])
        self.horizon = int(vec["horizon"])
        self.initial_blob = to_blob(self.model)
        self.initial_envs = round(float(vec["initial_share"]) * task.num_envs)
        self.pool = OpponentPool(PoolSettings.from_mapping(config["rl"]["opponent"]["pool"]))
        self.pool.add(self.initial_blob, iteration=0)
        self.generator = torch.Generator(device=self.device).manual_seed(int(config["seed"]))
        self.mean_share = float(config["rl"]["opponent"]["deterministic"])
        self.evaluator = Evaluator(config["evaluator"])
        self.evaluation = self._evaluation(vec, config)
        self.anneal = vec["reward"]["anneal"]
        if self.anneal and not hasattr(task, "dense_scale"):
            raise ValueError(f"mdp.vec.reward.anneal: {type(task).__name__} has no dense rewards to anneal")
        self.iteration = self.cost = self.version = 0
        self.elapsed = 0.0
        self.training: dict[str, float] = {}
        self.recent_scores = ScoreWindow(WINDOW)      # all training games (stochastic actions)
        self.initial_scores = ScoreWindow(WINDOW)     # training games of the initial lanes
        self.run = run
        keep = config["evaluator"]["checkpoint"]["keep"]
        self.checkpoints = Checkpoints(run / "checkpoints", keep) if run is not None else None
        self.snapshots = Checkpoints(run / "snapshots", SNAPSHOTS_KEPT) if run is not None else None
        self.evaluations = CsvLog(run / "evaluations.csv") if run is not None else None
        self.observations: torch.Tensor | None = None
        self._stack_pool()

    def _evaluation(self, vec: Mapping[str, Any], config: Mapping[str, Any]) -> VecEvaluation | None:
        """The deterministic evaluation (None: ``evaluator.episodes`` is 0, or the task lives in an Isaac Gym
        server, which holds one task only)."""
        games = int(config["evaluator"]["episodes"])
        if games <= 0 or vec["backend"] == "isaacgym":
            return None
        return VecEvaluation(vec, games, OPPONENTS, seed=int(config["seed"]) + 1)

    # ---- opponents ------------------------------------------------------------------------------------------
    def _stack_pool(self) -> None:
        """Stack the pool's snapshots and, last, the initial policy (the fixed opponent of the first
        ``initial_envs`` environments). Games in progress keep their opponent if it is still in the pool; the
        others (and every environment at the start) draw one."""
        previous = getattr(self, "pool_ids", None)
        self.pool_ids = list(self.pool.snapshots)
        blobs = [self.pool.snapshots[i].blob for i in self.pool_ids] + [self.initial_blob]
        self.stacked = StackedPolicies(self.model, blobs, self.device)
        probabilities = self.pool.probabilities()
        self.pool_weights = torch.tensor([probabilities[i] for i in self.pool_ids], device=self.device)
        self.initial_lane = torch.arange(self.task.num_envs, device=self.device) < self.initial_envs
        drawn = self._draw()
        if previous is None:
            self.opponent, self.opponent_mean = drawn, self._draw_mean()
            return
        position = {snapshot_id: index for index, snapshot_id in enumerate(self.pool_ids)}
        moved = torch.tensor([position.get(i, -1) for i in previous] + [len(self.pool_ids)], device=self.device)
        kept = moved[self.opponent]
        self.opponent = torch.where(kept >= 0, kept, drawn)

    def _draw(self) -> torch.Tensor:
        """A pool position per environment ``(E,)`` by the chooser's probabilities (the initial policy's index in
        its fixed lanes); sampled on the device."""
        drawn = torch.multinomial(self.pool_weights, self.task.num_envs, replacement=True, generator=self.generator)
        return torch.where(self.initial_lane, len(self.pool_ids), drawn)

    def _draw_mean(self) -> torch.Tensor:
        """Per environment ``(E,)``: whether its opponent plays mean actions (probability ``rl.opponent.deterministic``)."""
        return torch.rand(self.task.num_envs, generator=self.generator, device=self.device) < self.mean_share

    # ---- sampling -------------------------------------------------------------------------------------------
    def rollout(self) -> tuple[dict[str, Any], torch.Tensor, torch.Tensor]:
        """``horizon`` steps of every environment, on the device.

        Returns a PPO segment (tensors ``[T, E, ...]``; ``values`` ``[T + 1, E]``), the game outcomes per stacked
        opponent ``(P + 1, 3)`` (wins, draws, losses of the learner; the last row: the initial policy) and
        ``(sum of returns, count, sum of lengths)`` of the episodes that finished."""
        task, model, envs, steps = self.task, self.model, self.task.num_envs, self.horizon
        if self.observations is None:
            self.observations = task.reset().to(self.device)
            self.episode_return = torch.zeros(envs, device=self.device)
            self.episode_length = torch.zeros(envs, device=self.device)
        zeros = lambda *shape: torch.zeros(*shape, device=self.device)  # noqa: E731
        segment: dict[str, Any] = {"observations": zeros(steps, envs, task.num_obs),
                                   "actions": zeros(steps, envs, task.num_actions), "log_probs": zeros(steps, envs),
                                   "values": zeros(steps + 1, envs), "rewards": zeros(steps, envs),
                                   "dones": zeros(steps, envs)}
        outcomes = zeros(self.stacked.count, 3)
        returns = zeros(3)
        # a GPU pads every policy's block to all rows (learning the largest group would wait on the device); on the
        # CPU that wait is free and the smaller block is faster
        width = envs * (task.num_agents - 1) if self.device.type != "cpu" else None
        for t in range(steps):
            own = self.observations[:envs]
            action, log_prob, value = model.act(own, generator=self.generator)
            seats = task.num_agents - 1
            opponent_action = self.stacked.act(self.observations[envs:], self.opponent.repeat(seats),
                                               deterministic=self.opponent_mean.repeat(seats),
                                               generator=self.generator, width=width)
            self.observations, reward, done, extras = task.step(torch.cat([action, opponent_action]).clamp(-1, 1))
            reward, done = reward[:envs].to(self.device), done.to(self.device)
            for name, tensor in zip(("observations", "actions", "log_probs", "values", "rewards", "dones"),
                                    (own, action, log_prob, value, reward, done)):
                segment[name][t] = tensor
            finished = done.float()
            result = torch.stack([extras["win"], extras["draw"], extras["lose"]], dim=1).to(self.device).float()
            outcomes.index_add_(0, self.opponent, result * finished[:, None])
            self.episode_return += reward
            self.episode_length += 1.0
            returns += torch.stack([(self.episode_return * finished).sum(), finished.sum(),
                                    (self.episode_length * finished).sum()])
            self.episode_return *= 1.0 - finished
            self.episode_length *= 1.0 - finished
            self.opponent = torch.where(done, self._draw(), self.opponent)
            self.opponent_mean = torch.where(done, self._draw_mean(), self.opponent_mean)
        segment["values"][steps] = model.value(self.observations[:envs])
        segment["truncated"] = zeros(steps, envs)
        segment["final_values"] = zeros(steps, envs)
        segment["version"] = self.version
        return segment, outcomes, returns

    def _record(self, outcomes: np.ndarray, returns: np.ndarray) -> None:
        """Fold one rollout's game counts (host copies) into the pool, the running scores and the training summary.
        The games of a rollout have no order among them: each statistic takes them as one batch of counts."""
        self.pool.record_counts({snapshot_id: outcomes[row] for row, snapshot_id in enumerate(self.pool_ids)})
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
        """One rollout and one PPO update; pool bookkeeping (record games, maybe freeze a snapshot)."""
        started = time.monotonic()
        if self.anneal:
            self.task.dense_scale = max(0.0, 1.0 - self.cost / float(self.anneal))
        segment, outcomes, returns = self.rollout()
        stats = self.ppo.update([segment], self.version, self.cost)   # reads its statistics: the one host sync
        self._record(outcomes.cpu().numpy(), returns.cpu().numpy())
        self.version += 1
        self.iteration += 1
        steps = self.horizon * self.task.num_envs
        self.cost += steps
        if self.pool.should_add(self.iteration):
            self.pool.add(to_blob(self.model), self.iteration, cost=self.cost, elapsed=self.elapsed)
            self._stack_pool()
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
        self.evaluator.last = time.monotonic()
        newest = self.pool.snapshots[next(reversed(self.pool.snapshots))].blob
        summary = self.evaluation.evaluate(self.model, [self.initial_blob, newest])
        score = summary["initial/score"]
        self.evaluator.latest = {**summary, "win": score, "fitness": 2.0 * score - 1.0,
                                 "win_newest": summary["newest/score"]}
        return summary

    def train(self, stop: Callable[["VecLearner"], bool] | None = None) -> dict[str, float]:
        """Run until ``stop(self)`` (default: ``evaluator.terminate``, where ``self.win``/``self.fitness`` are the
        deterministic score against the initial policy). A status line every ``evaluator.interval`` seconds with an
        evaluation, a checkpoint and a snapshot every ``evaluator.checkpoint.interval`` seconds; all three at the
        end. The latest evaluation's summary."""
        settings = self.config["evaluator"]
        scalars = Scalars(self.run / "tensorboard" if self.run is not None and settings["tensorboard"] else None)
        progress = Progress(settings["progress"])
        clock = time.monotonic() - self.elapsed
        task = self.task
        progress.print(f"training: {task.num_envs} × {type(task).__name__} ({task.num_agents} agents) on "
                       f"{self.device}, horizon {self.horizon}, run directory {self.run}")
        checkpoint_interval = float(settings["checkpoint"]["interval"])
        last_checkpoint = time.monotonic()
        if self.snapshots is not None and not self.snapshots.paths():
            self._snapshot()                              # the initial policy opens the run's rating curve
        try:
            while True:
                stats = self.step()
                self.elapsed = time.monotonic() - clock
                against = self.win_rate_against_initial()
                scalars.write(self.cost, {**{f"train/{k}": v for k, v in self.training.items()}, **stats,
                                          **self.pool.statistics(), "train/win_initial": against,
                                          "reward/dense_scale": getattr(task, "dense_scale", 1.0)})
                fields = {"iter": str(self.iteration), "steps": format_number(self.cost),
                          "agent-steps/s": format_number(stats["fps/overall"]),
                          "train win": f"{self.training.get('win', math.nan):.2f}",
                          "train vs initial": f"{against:.2f}", "pool": str(len(self.pool)),
                          "time": f"{self.elapsed:.0f}s"}
                if "initial/score" in self.evaluator.latest:
                    fields["eval vs initial"] = f"{self.evaluator.latest['initial/score']:.2f}"
                progress.update(fields)
                done = stop(self) if stop is not None else self.evaluator.should_stop(
                    self.cost, self.iteration, self.elapsed, self.training)
                if done or self.evaluator.due():
                    self._evaluate_and_record(scalars, progress, fields)
                    done = done or (stop is None and self.evaluator.should_stop(
                        self.cost, self.iteration, self.elapsed, self.training))
                if time.monotonic() - last_checkpoint >= checkpoint_interval:
                    self.save()
                    last_checkpoint = time.monotonic()
                if done:
                    break
        finally:
            scalars.close()
            progress.close()
        self.save()
        latest = self.evaluator.latest
        result = f"; {evaluation_line(latest, OPPONENTS)} (deterministic)" if "initial/score" in latest else ""
        progress.print(f"done after {self.iteration} iterations, {format_number(self.cost)} env steps, "
                       f"{self.elapsed:.0f}s{result}")
        return latest

    def _evaluate_and_record(self, scalars: Scalars, progress: Progress, fields: Mapping[str, str]) -> None:
        """Evaluate; TensorBoard ``eval/*``, a row of ``evaluations.csv``, the status line printed with it."""
        summary = self.evaluate()
        line = " | ".join(f"{k} {v}" for k, v in fields.items() if k != "eval vs initial")
        if not summary:
            progress.print(line)
            return
        scalars.write(self.cost, {f"eval/{k}": v for k, v in summary.items()})
        if self.evaluations is not None:
            self.evaluations.write({"time": round(self.elapsed, 3), "cost": self.cost, "iteration": self.iteration,
                                    **summary})
        progress.print(f"{line} | eval {evaluation_line(summary, OPPONENTS)}")

    # ---- checkpoints ------------------------------------------------------------------------------------------
    def save(self) -> Path | None:
        """A checkpoint (everything to resume: weights, optimizer, counters, pool, initial policy, running scores,
        latest evaluation, config) and a snapshot of the weights (``snapshots/``, kept for rating)."""
        if self.checkpoints is None:
            return None
        self._snapshot()
        return self.checkpoints.save(self.iteration, {
            "model": self.model.state_dict(), "optimizer": self.ppo.optimizer.state_dict(), "lr": self.ppo.lr,
            **self._counters(), "pool": self.pool.state_dict(), "initial": torch.from_numpy(self.initial_blob.copy()),
            "scores": {"recent": self.recent_scores.state(), "initial": self.initial_scores.state()},
            "evaluation": dict(self.evaluator.latest), "config": plain(self.config)})

    def _counters(self) -> dict[str, float]:
        return {"iteration": self.iteration, "cost": self.cost, "elapsed": self.elapsed}

    def _snapshot(self) -> None:
        """The weights and counters into ``snapshots/`` (a file ``evaluate.py --checkpoints`` reads)."""
        self.snapshots.save(self.iteration, {"model": self.model.state_dict(), **self._counters()})

    def resume(self) -> Path | None:
        """Load the newest good checkpoint of the run directory, if any."""
        found = self.checkpoints.load_newest() if self.checkpoints is not None else None
        if found is None:
            return None
        path, state = found
        self.model.load_state_dict(state["model"])
        self.ppo.optimizer.load_state_dict(state["optimizer"])
        self.ppo._set_lr(float(state["lr"]))
        self.iteration, self.cost, self.elapsed = int(state["iteration"]), int(state["cost"]), float(state["elapsed"])
        self.version = self.iteration
        self.pool.load_state_dict(state["pool"])
        self.initial_blob = state["initial"].numpy().copy()
        scores = state.get("scores") or {}
        self.recent_scores.load(scores.get("recent", []))
        self.initial_scores.load(scores.get("initial", []))
        self.evaluator.latest = {k: float(v) for k, v in (state.get("evaluation") or self.evaluator.latest).items()}
        self._stack_pool()
        return path

    def close(self) -> None:
        self.task.close()
        if self.evaluation is not None:
            self.evaluation.close()

