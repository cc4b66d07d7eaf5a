"""Self-play training on a vectorized task (rl_games style): the task steps ``num_envs`` games per call; the learner
plays agent 0's rows, a stacked opponent pool plays the others' (one batched forward, the opponent drawn per
environment at each episode start by the pool's chooser, PFSP by default). Rollouts of ``mdp.vec.horizon`` steps
× ``num_envs`` environments feed the same PPO update as train.py's actors. No Ray: everything is in this process.

Tensors stay on the task's device during the rollout; the update receives them as ``[T, E]`` arrays.
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
from ..record import Checkpoints, Progress, Scalars, format_number
from .evaluator import Evaluator, summarize
from .pool import OpponentPool, PoolSettings
from .ppo import PPO, PPOSettings


class VecLearner:
    """Trains agent 0 of a :class:`VecTask` against snapshots of itself.

    Args:
        config: the resolved configuration (``mdp.create: vec``).
        run: the run directory (None: nothing on disk).
    """

    def __init__(self, config: Mapping[str, Any], run: Path | None = None) -> None:
        self.config = config
        torch.manual_seed(config["seed"])
        torch.set_num_threads(max(1, int(config["train"]["threads"])))
        self.task: VecTask = create_vec_task(config["mdp"]["vec"], seed=config["seed"])
        task = self.task
        spaces = (gymnasium.spaces.Box(-np.inf, np.inf, (task.num_obs,), np.float32),
                  gymnasium.spaces.Box(-1.0, 1.0, (task.num_actions,), np.float32))
        self.model = ActorCritic(*spaces, ModelSettings.from_mapping(config["model"]))
        self.ppo = PPO(self.model, PPOSettings.from_config(config), seed=config["seed"])
        self.horizon = int(config["mdp"]["vec"]["horizon"])
        self.pool = OpponentPool(PoolSettings.from_mapping(config["rl"]["opponent"]["pool"]))
        self.pool.add(to_blob(self.model), iteration=0)
        self.generator = torch.Generator().manual_seed(int(config["seed"]))
        self.random = np.random.default_rng(int(config["seed"]))
        self.evaluator = Evaluator(config["evaluator"])
        self.iteration = self.cost = self.version = 0
        self.elapsed = 0.0
        self.training: dict[str, float] = {}
        self.run = run
        keep = config["evaluator"]["checkpoint"]["keep"]
        self.checkpoints = Checkpoints(run / "checkpoints", keep) if run is not None else None
        self.observations: torch.Tensor | None = None
        self._stack_pool()

    def _stack_pool(self) -> None:
        ids = list(self.pool.snapshots)
        self.pool_ids = ids
        self.stacked = StackedPolicies(self.model, [self.pool.snapshots[i].blob for i in ids])
        self.opponent = self._draw(self.task.num_envs)

    def _draw(self, count: int) -> torch.Tensor:
        """Pool positions for ``count`` new episodes, by the chooser's probabilities."""
        probabilities = self.pool.probabilities()
        weights = np.array([probabilities[i] for i in self.pool_ids])
        return torch.as_tensor(self.random.choice(len(self.pool_ids), size=count, p=weights / weights.sum()))

    def rollout(self) -> tuple[dict[str, np.ndarray], list[dict[str, Any]]]:
        """``horizon`` steps of every environment: a PPO segment ``[T, E]`` and the finished games' results."""
        task, model, envs = self.task, self.model, self.task.num_envs
        if self.observations is None:
            self.observations = task.reset()
        columns: dict[str, list[torch.Tensor]] = {k: [] for k in ("observations", "actions", "log_probs", "values",
                                                                   "rewards", "dones")}
        results = []
        for _ in range(self.horizon):
            own, others = self.observations[:envs], self.observations[envs:]
            action, log_prob, value = model.act(own, generator=self.generator)
            opponent_index = self.opponent.repeat(task.num_agents - 1)
            opponent_action = self.stacked.act(others, opponent_index, deterministic=False, generator=self.generator)
            self.observations, reward, done, extras = task.step(torch.cat([action, opponent_action]).clamp(-1, 1))
            for name, tensor in zip(columns, (own, action, log_prob, value, reward[:envs], done)):
                columns[name].append(tensor)
            finished = torch.nonzero(done).flatten()
            for env in finished.tolist():
                win = 1.0 if extras["win"][env] else 0.5 if extras["draw"][env] else 0.0
                results.append({"fitness": 2.0 * win - 1.0, "win": win,
                                "opponent": self.pool_ids[int(self.opponent[env])]})
            if len(finished):
                self.opponent[finished] = self._draw(len(finished))
        bootstrap = model.act(self.observations[:envs], generator=self.generator)[2]
        segment = {name: torch.stack(values).cpu().numpy() for name, values in columns.items()}
        segment["values"] = np.concatenate([segment["values"], bootstrap.cpu().numpy()[None]])
        segment["truncated"] = np.zeros_like(segment["dones"])
        segment["final_values"] = np.zeros_like(segment["rewards"])
        segment["version"] = self.version
        return segment, results

    def step(self) -> dict[str, float]:
        """One rollout and one PPO update; pool bookkeeping (record games, maybe freeze a snapshot)."""
        started = time.monotonic()
        segment, results = self.rollout()
        sampled = time.monotonic()
        stats = self.ppo.update([segment], self.version, self.cost)
        self.version += 1
        self.iteration += 1
        steps = self.horizon * self.task.num_envs
        self.cost += steps
        for result in results:
            self.pool.record(result["opponent"], result["win"])
        if self.pool.should_add(self.iteration):
            self.pool.add(to_blob(self.model), self.iteration)
            self._stack_pool()
        if results:
            self.training = summarize(results)
        stats.update({"fps/sampling": steps * self.task.num_agents / max(1e-9, sampled - started),
                      "fps/overall": steps * self.task.num_agents / max(1e-9, time.monotonic() - started)})
        return stats

    def win_rate_against_initial(self) -> float:
        """Share of the latest games against snapshot 0 (the initial policy) won, draws half (nan: none)."""
        snapshot = self.pool.snapshots.get(0)
        return snapshot.win_rate() if snapshot is not None and snapshot.games else math.nan

    def train(self, stop: Callable[["VecLearner"], bool] | None = None) -> dict[str, float]:
        """Run until ``stop(self)`` (default: ``evaluator.terminate`` over self.cost/iteration/time/training)."""
        settings = self.config["evaluator"]
        scalars = Scalars(self.run / "tensorboard" if self.run is not None and settings["tensorboard"] else None)
        progress = Progress(settings["progress"])
        clock = time.monotonic() - self.elapsed
        task = self.task
        progress.print(f"training: {task.num_envs} × {type(task).__name__} ({task.num_agents} agents) in this "
                       f"process, horizon {self.horizon}, run directory {self.run}")
        try:
            while True:
                stats = self.step()
                self.elapsed = time.monotonic() - clock
                scalars.write(self.cost, {**{f"train/{k}": v for k, v in self.training.items()}, **stats,
                                          "pool/size": len(self.pool),
                                          "pool/win_rate_initial": self.win_rate_against_initial()})
                progress.update({"iter": str(self.iteration), "steps": format_number(self.cost),
                                 "agent-steps/s": format_number(stats["fps/overall"]),
                                 "win": f"{self.training.get('win', math.nan):.2f}", "time": f"{self.elapsed:.0f}s"})
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

    def save(self) -> Path | None:
        """A checkpoint train.py's other tools read (``model``, counters) plus optimizer and pool."""
        if self.checkpoints is None:
            return None
        return self.checkpoints.save(self.iteration, {
            "model": self.model.state_dict(), "optimizer": self.ppo.optimizer.state_dict(), "lr": self.ppo.lr,
            "iteration": self.iteration, "cost": self.cost, "elapsed": self.elapsed, "pool": self.pool.state_dict()})

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
        self._stack_pool()
        return path

    def close(self) -> None:
        self.task.close()
