"""Self-play training on a vectorized task (rl_games style): the task steps ``num_envs`` games per call; the learner
plays agent 0's rows, a stacked opponent pool plays the others' (one batched forward, the opponent drawn per
environment at each episode start by the pool's chooser, PFSP by default). Rollouts of ``mdp.vec.horizon`` steps
× ``num_envs`` environments feed the same PPO update as train.py's actors. No Ray: everything is in this process.

Everything stays on the task's device (``mdp.vec.device``): observations, actions, rewards, the rollout buffers,
the opponent assignment and the game outcomes. The host reads statistics once per iteration (after the update).
A share of the environments (``mdp.vec.initial_share``) always plays the initial policy: its games, which are
training data like any other, measure the win rate against the initial policy throughout the run.
"""

from __future__ import annotations

import collections
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
from ..record import Checkpoints, Progress, Scalars, format_number
from .evaluator import Evaluator
from .pool import OpponentPool, PoolSettings
from .ppo import PPO, PPOSettings

SCORES = (1.0, 0.5, 0.0)  # win, draw, loss (the columns of the outcome counts)
WINDOW = 500              # games the running win rates are taken over


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
        self.ppo = PPO(self.model, PPOSettings.from_config(config), seed=config["seed"])
        self.horizon = int(vec["horizon"])
        self.initial_blob = to_blob(self.model)
        self.initial_envs = round(float(vec["initial_share"]) * task.num_envs)
        self.pool = OpponentPool(PoolSettings.from_mapping(config["rl"]["opponent"]["pool"]))
        self.pool.add(self.initial_blob, iteration=0)
        self.generator = torch.Generator(device=self.device).manual_seed(int(config["seed"]))
        self.evaluator = Evaluator(config["evaluator"])
        self.iteration = self.cost = self.version = 0
        self.elapsed = 0.0
        self.training: dict[str, float] = {}
        self.recent_scores: collections.deque[float] = collections.deque(maxlen=WINDOW)       # all games
        self.initial_scores: collections.deque[float] = collections.deque(maxlen=WINDOW)      # initial lanes
        self.run = run
        keep = config["evaluator"]["checkpoint"]["keep"]
        self.checkpoints = Checkpoints(run / "checkpoints", keep) if run is not None else None
        self.observations: torch.Tensor | None = None
        self._stack_pool()

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
            self.opponent = drawn
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

    # ---- sampling -------------------------------------------------------------------------------------------
    def rollout(self) -> tuple[dict[str, Any], torch.Tensor, torch.Tensor]:
        """``horizon`` steps of every environment, on the device.

        Returns a PPO segment (tensors ``[T, E, ...]``; ``values`` ``[T + 1, E]``), the game outcomes per stacked
        opponent ``(P + 1, 3)`` (wins, draws, losses of the learner; the last row: the initial policy) and
        ``(sum, count)`` of the finished episodes' returns."""
        task, model, envs, steps = self.task, self.model, self.task.num_envs, self.horizon
        if self.observations is None:
            self.observations = task.reset().to(self.device)
            self.episode_return = torch.zeros(envs, device=self.device)
        zeros = lambda *shape: torch.zeros(*shape, device=self.device)  # noqa: E731
        segment: dict[str, Any] = {"observations": zeros(steps, envs, task.num_obs),
                                   "actions": zeros(steps, envs, task.num_actions), "log_probs": zeros(steps, envs),
                                   "values": zeros(steps + 1, envs), "rewards": zeros(steps, envs),
                                   "dones": zeros(steps, envs)}
        outcomes = zeros(self.stacked.count, 3)
        returns = zeros(2)
        others = envs * (task.num_agents - 1)
        for t in range(steps):
            own = self.observations[:envs]
            action, log_prob, value = model.act(own, generator=self.generator)
            opponent_action = self.stacked.act(self.observations[envs:], self.opponent.repeat(task.num_agents - 1),
                                               deterministic=False, generator=self.generator, width=others)
            self.observations, reward, done, extras = task.step(torch.cat([action, opponent_action]).clamp(-1, 1))
            reward, done = reward[:envs].to(self.device), done.to(self.device)
            for name, tensor in zip(("observations", "actions", "log_probs", "values", "rewards", "dones"),
                                    (own, action, log_prob, value, reward, done)):
                segment[name][t] = tensor
            finished = done.float()
            result = torch.stack([extras["win"], extras["draw"], extras["lose"]], dim=1).to(self.device).float()
            outcomes.index_add_(0, self.opponent, result * finished[:, None])
            self.episode_return += reward
            returns += torch.stack([(self.episode_return * finished).sum(), finished.sum()])
            self.episode_return *= 1.0 - finished
            self.opponent = torch.where(done, self._draw(), self.opponent)
        segment["values"][steps] = model.value(self.observations[:envs])
        segment["truncated"] = zeros(steps, envs)
        segment["final_values"] = zeros(steps, envs)
        segment["version"] = self.version
        return segment, outcomes, returns

    def _record(self, outcomes: np.ndarray, returns: np.ndarray) -> None:
        """Fold one rollout's game counts (host copies) into the pool, the running scores and the training summary."""
        for row, snapshot_id in enumerate(self.pool_ids):
            for score, count in zip(SCORES, outcomes[row]):
                for _ in range(int(count)):
                    self.pool.record(snapshot_id, score)
        for row, scores in ((slice(None), self.recent_scores), (slice(-1, None), self.initial_scores)):
            for score, count in zip(SCORES, outcomes[row].sum(0)):
                scores.extend([score] * int(count))
        if self.recent_scores:
            score = float(np.mean(self.recent_scores))
            self.training = {"episodes": float(len(self.recent_scores)), "win": score, "fitness": 2.0 * score - 1.0}
        if returns[1]:
            self.training["return"] = float(returns[0] / returns[1])

    def step(self) -> dict[str, float]:
        """One rollout and one PPO update; pool bookkeeping (record games, maybe freeze a snapshot)."""
        started = time.monotonic()
        segment, outcomes, returns = self.rollout()
        stats = self.ppo.update([segment], self.version, self.cost)   # reads its statistics: the one host sync
        self._record(outcomes.cpu().numpy(), returns.cpu().numpy())
        self.version += 1
        self.iteration += 1
        steps = self.horizon * self.task.num_envs
        self.cost += steps
        if self.pool.should_add(self.iteration):
            self.pool.add(to_blob(self.model), self.iteration)
            self._stack_pool()
        stats["fps/overall"] = steps * self.task.num_agents / max(1e-9, time.monotonic() - started)
        return stats

    def win_rate_against_initial(self) -> float:
        """The learner's score against the initial policy over the last ``WINDOW`` games of the ``initial_share``
        environments (win 1, draw 0.5; nan: no game finished there yet)."""
        return float(np.mean(self.initial_scores)) if self.initial_scores else math.nan

    def train(self, stop: Callable[["VecLearner"], bool] | None = None) -> dict[str, float]:
        """Run until ``stop(self)`` (default: ``evaluator.terminate``; there ``self.win``/``self.fitness`` are the
        score against the initial policy). A status line every ``evaluator.interval`` seconds, a checkpoint every
        ``evaluator.checkpoint.interval`` seconds and at the end."""
        settings = self.config["evaluator"]
        scalars = Scalars(self.run / "tensorboard" if self.run is not None and settings["tensorboard"] else None)
        progress = Progress(settings["progress"])
        clock = time.monotonic() - self.elapsed
        task = self.task
        progress.print(f"training: {task.num_envs} × {type(task).__name__} ({task.num_agents} agents) on "
                       f"{self.device}, horizon {self.horizon}, run directory {self.run}")
        report_interval, checkpoint_interval = float(settings["interval"]), float(settings["checkpoint"]["interval"])
        last_report = last_checkpoint = time.monotonic()
        try:
            while True:
                stats = self.step()
                self.elapsed = time.monotonic() - clock
                against = self.win_rate_against_initial()
                self.evaluator.latest = {"episodes": float(len(self.initial_scores)),
                                         "win": against, "fitness": 2.0 * against - 1.0}
                scalars.write(self.cost, {**{f"train/{k}": v for k, v in self.training.items()}, **stats,
                                          **self.pool.statistics(), "pool/win_rate_initial": against})
                fields = {"iter": str(self.iteration), "steps": format_number(self.cost),
                          "agent-steps/s": format_number(stats["fps/overall"]),
                          "win": f"{self.training.get('win', math.nan):.2f}", "vs initial": f"{against:.2f}",
                          "pool": str(len(self.pool)), "time": f"{self.elapsed:.0f}s"}
                progress.update(fields)
                now = time.monotonic()
                if now - last_report >= report_interval:
                    progress.print(" | ".join(f"{k} {v}" for k, v in fields.items()))
                    last_report = now
                if now - last_checkpoint >= checkpoint_interval:
                    self.save()
                    last_checkpoint = now
                done = stop(self) if stop is not None else self.evaluator.should_stop(
                    self.cost, self.iteration, self.elapsed, self.training)
                if done:
                    break
        finally:
            scalars.close()
            progress.close()
        self.save()
        progress.print(f"done after {self.iteration} iterations, {format_number(self.cost)} env steps, "
                       f"{self.elapsed:.0f}s; games won {self.training.get('win', math.nan):.0%} (draws half), "
                       f"against the initial policy {self.win_rate_against_initial():.0%}")
        return self.training

    # ---- checkpoints ------------------------------------------------------------------------------------------
    def save(self) -> Path | None:
        """A checkpoint train.py's other tools read (``model``, counters) plus optimizer, pool and initial policy."""
        if self.checkpoints is None:
            return None
        return self.checkpoints.save(self.iteration, {
            "model": self.model.state_dict(), "optimizer": self.ppo.optimizer.state_dict(), "lr": self.ppo.lr,
            "iteration": self.iteration, "cost": self.cost, "elapsed": self.elapsed, "pool": self.pool.state_dict(),
            "initial": torch.from_numpy(self.initial_blob.copy())})

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
        self._stack_pool()
        return path

    def close(self) -> None:
        self.task.close()
