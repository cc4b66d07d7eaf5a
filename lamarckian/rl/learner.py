"""The Learner: owns the network and PPO, runs the Actors, streams their segments, broadcasts new weights.

Data flow per iteration: Gather segments until ``train.batch`` env steps → PPO update → ``All.broadcast``
of the new weight blob (fire-and-check: the learner does not wait) → evaluation, records, checkpoint when due.
"""

from __future__ import annotations

import copy
import logging
import math
import time
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import torch

from .. import rpc
from ..mdp import create_mdp
from ..model import to_blob
from ..record import Checkpoints, CsvLog, Progress, Scalars, format_number, plain
from .actor import Actor, build_model
from .evaluator import Evaluator, summarize
from .pool import OpponentPool, PoolSettings
from .ppo import PPO, PPOSettings

log = logging.getLogger(__name__)


class Learner:
    """Trains one policy with a fleet of ``sample.actors`` Ray actors.

    Args:
        config: the resolved configuration.
        run: the run directory (checkpoints, TensorBoard, resolved config); None keeps nothing on disk.
    """

    def __init__(self, config: Mapping[str, Any], run: Path | None = None) -> None:
        self.configure(config)
        self.version = 0
        self.training: dict[str, float] = {}
        self.dropped = self.replaced = 0
        self.run = run
        checkpoint = config["evaluator"]["checkpoint"]
        self.checkpoints = Checkpoints(run / "checkpoints", checkpoint["keep"]) if run is not None else None
        self.checkpoint_interval = float(checkpoint["interval"])
        self.scalars = Scalars(None)
        self.progress = Progress(False)
        self.evaluations = CsvLog(run / "evaluations.csv") if run is not None else None
        self.actors: list[Any] = []
        self.everyone: rpc.All | None = None
        self.gather: rpc.Gather | None = None
        self.spawned = 0
        self.local = bool(config["ray"]["local_mode"])

    def configure(self, config: Mapping[str, Any]) -> None:
        """(Re)build the network (initialized from ``config.seed``), PPO, the evaluator and the opponent pool from
        ``config``; counters restart at 0. Running actors are kept: the caller sends them the new weights.
        (evolve.py's learners call this for each individual they train.)"""
        self.config = config
        torch.manual_seed(config["seed"])
        torch.set_num_threads(max(1, int(config["train"]["threads"])))
        probe = create_mdp(config["mdp"], seed=config["seed"])
        self.seats = len(probe)
        self.model = build_model(probe, config["model"])
        probe.close()
        self.ppo = PPO(self.model, PPOSettings.from_config(config), seed=config["seed"])
        self.batch_steps = int(config["train"]["batch"])
        self.evaluator = Evaluator(config["evaluator"])
        self.iteration = self.cost = 0
        self.elapsed = 0.0
        self.pool = self._initial_pool(config["rl"]["opponent"]["pool"]) if self.seats > 1 else None
        self.pool_frozen = False

    # ---- state ---------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: weights (normalizers included), optimizer, counters, config."""
        return {"model": self.model.state_dict(), "optimizer": self.ppo.optimizer.state_dict(), "lr": self.ppo.lr,
                "pool": self.pool.state_dict() if self.pool is not None else None, "version": self.version,
                "iteration": self.iteration, "cost": self.cost, "elapsed": self.elapsed,
                "evaluation": dict(self.evaluator.latest), "config": plain(self.config)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.ppo.optimizer.load_state_dict(state["optimizer"])
        self.ppo._set_lr(float(state["lr"]))
        if self.pool is not None and state.get("pool") is not None:
            self.pool.load_state_dict(state["pool"])
        self.version, self.iteration, self.cost = int(state["version"]), int(state["iteration"]), int(state["cost"])
        self.elapsed = float(state["elapsed"])
        self.evaluator.latest = {k: float(v) for k, v in state["evaluation"].items()}

    def resume(self) -> Path | None:
        """Load the newest good checkpoint of the run directory, if any."""
        found = self.checkpoints.load_newest() if self.checkpoints is not None else None
        if found is None:
            return None
        path, state = found
        self.load_state_dict(state)
        return path

    def save(self) -> Path | None:
        return self.checkpoints.save(self.iteration, self.state_dict()) if self.checkpoints is not None else None

    # ---- actors --------------------------------------------------------------------------------------------
    def _spawn(self) -> Any:
        """A new actor from the current weights: a Ray actor, or (``ray.local_mode``) an object in this process
        whose RPC server runs on a thread (debuggable with breakpoints)."""
        pool = None
        if self.pool is not None:
            pool = (self.pool.probabilities(), {i: s.blob for i, s in self.pool.snapshots.items()})
        arguments = (dict(self.config), self.spawned, to_blob(self.model), self.version, pool)
        self.spawned += 1
        if self.local:
            return Actor(*arguments)
        import ray

        return ray.remote(num_cpus=self.config["sample"]["num_cpus"], max_restarts=0)(Actor).remote(*arguments)

    def start_actors(self) -> None:
        settings = rpc.RpcSettings.from_mapping(self.config["rpc"])
        self.actors = [self._spawn() for _ in range(int(self.config["sample"]["actors"]))]
        self.everyone = rpc.All(self.actors, settings=settings)
        self.gather = rpc.Gather(self.everyone, credits=int(self.config["sample"]["credits"]))

    def publish(self) -> None:
        """Send the current weights and the opponent pool to every actor and wait. For a learner whose network
        was swapped (evolve.py): the version jumps past ``rl.ppo.max_staleness``, so segments still holding steps
        of the previous network are dropped as stale instead of being learned from."""
        if self.everyone is None:
            self.start_actors()
            return
        self.version += self.ppo.settings.max_staleness + 1
        blob = to_blob(self.model)
        self._call_all(lambda: self.everyone("set_weights", self.version, blob))
        if self.pool is not None:
            blobs = {i: s.blob for i, s in self.pool.snapshots.items()}
            self._call_all(lambda: self.everyone("set_pool", self.pool.probabilities(), blobs))

    def play_against(self, members: Mapping[int, np.ndarray]) -> None:
        """Self-play against a population: the opponent pool becomes exactly ``members`` (id → weight blob), drawn
        by the configured chooser, and no snapshots of the learner are added. Call :meth:`publish` afterwards."""
        settings = dict(self.config["rl"]["opponent"]["pool"], capacity=max(1, len(members)))
        self.pool = OpponentPool(PoolSettings.from_mapping(settings))
        for member_id, blob in members.items():
            self.pool.add(blob, self.iteration, snapshot_id=int(member_id))
        self.pool_frozen = True

    def _replace(self, error: rpc.ActorDiedError) -> None:
        """Swap a dead actor for a fresh one that starts from the current weights."""
        dead = self.actors.pop(error.index)
        self.gather.remove(dead)
        self._kill(dead)
        replacement = self._spawn()
        self.actors.append(replacement)
        self.gather.add(replacement)
        self.replaced += 1
        self.progress.print(f"actor died ({error.actor}); replaced it ({self.replaced} so far)")

    def _call_all(self, action: Any) -> Any:
        """Run ``action()`` (an All call or broadcast), replacing actors that die, until it succeeds."""
        while True:
            try:
                return action()
            except rpc.ActorDiedError as error:
                self._replace(error)

    def _kill(self, actor: Any) -> None:
        if self.local:
            actor.close()
        else:
            import ray

            ray.kill(actor, no_restart=True)

    def close(self) -> None:
        if self.gather is not None:
            try:
                self.gather.close()
            except rpc.RPCError as error:
                log.warning("closing the actors: %s", error)
        for actor in self.actors:
            self._kill(actor)
        self.actors = []
        self.scalars.close()
        self.progress.close()

    # ---- training ------------------------------------------------------------------------------------------
    def _collect(self) -> tuple[list[dict[str, Any]], int, list[dict[str, Any]]]:
        """Segments worth ``train.batch`` env steps (stale ones dropped), their env steps, finished episodes."""
        segments, steps, results = [], 0, []
        limit = self.ppo.settings.max_staleness
        while steps < self.batch_steps:
            try:
                segment = self.gather()
            except rpc.ActorDiedError as error:
                self._replace(error)
                continue
            steps += int(segment["steps"])
            results.extend(segment["results"])
            if self.version - int(segment["version"]) > limit:
                self.dropped += 1
                continue
            segments.append(segment)
        return segments, steps, results

    def step(self) -> dict[str, float]:
        """One iteration: collect, update, broadcast. Returns its statistics."""
        started = time.monotonic()
        segments, steps, results = self._collect()
        collected = time.monotonic()
        stats = self.ppo.update(segments, self.version, self.cost) if segments else {}
        updated = time.monotonic()
        self.version += 1
        self.iteration += 1
        self.cost += steps
        blob = to_blob(self.model)
        self._call_all(lambda: self.everyone.broadcast("set_weights", self.version, blob))
        if self.pool is not None:
            self._update_pool(results, blob)
        training = summarize(results)
        for kind, against in (("rule", [r for r in results if r.get("opponent") == "rule"]),
                              ("pool", [r for r in results if isinstance(r.get("opponent"), (int, list))])):
            if against:
                training[f"win_{kind}"] = summarize(against)["win"]
        if results:
            self.training = training
        stats.update({"fps/sampling": steps / max(1e-9, collected - started),
                      "fps/learning": stats.get("samples", 0.0) / max(1e-9, updated - collected),
                      "fps/overall": steps / max(1e-9, updated - started), "dropped": float(self.dropped),
                      "replaced": float(self.replaced)})
        pool_scalars = self.pool.statistics() if self.pool is not None else {}
        self.scalars.write(self.cost, {**{f"train/{k}": v for k, v in self.training.items()}, **stats, **pool_scalars})
        return stats

    # ---- self-play -----------------------------------------------------------------------------------------
    def _initial_pool(self, settings: Mapping[str, Any]) -> OpponentPool:
        """The pool with its first opponent: the initial policy, or the weights of ``pool.initial`` (a checkpoint)."""
        pool = OpponentPool(PoolSettings.from_mapping(settings))
        blob = to_blob(self.model)
        if settings.get("initial"):
            state = torch.load(Path(settings["initial"]).expanduser(), map_location="cpu", weights_only=True)
            opponent = copy.deepcopy(self.model)
            opponent.load_state_dict(state["model"])
            blob = to_blob(opponent)
        pool.add(blob, iteration=0)
        return pool

    def _update_pool(self, results: list[dict[str, Any]], blob: np.ndarray) -> None:
        """Record the games against snapshots, freeze the learner when the add rule holds, send the pool."""
        for result in results:
            opponents = result.get("opponent")
            if isinstance(opponents, list):  # N players: the learner's score against each seat's snapshot
                for opponent, score in zip(opponents, result["scores"]):
                    self.pool.record(opponent, score)
            elif isinstance(opponents, int) and result.get("win") is not None:
                self.pool.record(opponents, float(result["win"]))
        added = {}
        if not self.pool_frozen and self.pool.should_add(self.iteration):
            snapshot = self.pool.add(blob, self.iteration)
            added[snapshot.id] = snapshot.blob
        probabilities = self.pool.probabilities()
        self._call_all(lambda: self.everyone.broadcast("set_pool", probabilities, added))

    def train(self, stop: Callable[["Learner"], bool] | None = None) -> dict[str, float]:
        """Run until ``stop(self)`` holds (default: ``evaluator.terminate``); the last evaluation's summary."""
        settings = self.config["evaluator"]
        if self.run is not None and settings["tensorboard"]:
            self.scalars = Scalars(self.run / "tensorboard")
        self.progress = Progress(settings["progress"])
        if self.gather is None:
            self.start_actors()
        clock = time.monotonic() - self.elapsed
        last_save = time.monotonic()
        self.progress.print(f"training: {len(self.actors)} actors × {self.config['sample']['envs']} environments, "
                            f"run directory {self.run}")
        with self.gather.gathering("sample"):
            while True:
                stats = self.step()
                self.elapsed = time.monotonic() - clock
                self._show(stats)
                if self.evaluator.due():
                    summary = self._call_all(lambda: self.evaluator.evaluate(self.everyone))
                    self.scalars.write(self.cost, {f"eval/{k}": v for k, v in summary.items()})
                    if self.evaluations is not None:
                        self.evaluations.write({"time": round(self.elapsed, 3), "cost": self.cost,
                                                "iteration": self.iteration, **summary})
                    self.progress.print(self._evaluation_line(summary))
                if stop is None:
                    done = self.evaluator.should_stop(self.cost, self.iteration, self.elapsed, self.training)
                else:
                    done = stop(self)
                if done or time.monotonic() - last_save >= self.checkpoint_interval:
                    self.save()
                    last_save = time.monotonic()
                if done:
                    break
        self.scalars.flush()
        rule = self.evaluator.terminate.source if stop is None and self.evaluator.terminate else "the stopper"
        self.progress.print(f"done: {rule} holds "
                            f"after {self.iteration} iterations, {format_number(self.cost)} env steps, "
                            f"{self.elapsed:.0f}s")
        return self.evaluator.latest

    def _evaluation_line(self, summary: Mapping[str, float]) -> str:
        win = summary.get("win", math.nan)
        parts = [f"eval @ {format_number(self.cost)} steps, {self.elapsed:.0f}s:",
                 f"fitness {summary['fitness']:.3g} over {summary['episodes']:.0f} episodes"]
        if not math.isnan(win):
            parts.append(f"win rate {win:.0%} vs {self.evaluator.opponent}")
        return " ".join(parts)

    def _show(self, stats: Mapping[str, float]) -> None:
        fields = {"iter": str(self.iteration), "steps": format_number(self.cost),
                  "sps": format_number(stats.get("fps/overall", 0.0)),
                  "return": f"{self.training.get('return', math.nan):.3g}",
                  "kl": f"{stats.get('kl', math.nan):.3g}", "lr": f"{self.ppo.lr:.2g}",
                  "stale": f"{stats.get('staleness', 0.0):.2f}", "time": f"{self.elapsed:.0f}s"}
        latest = self.evaluator.latest
        if latest.get("episodes"):
            fields["eval"] = f"{latest['fitness']:.3g}"
            if not math.isnan(latest.get("win", math.nan)):
                fields["win"] = f"{latest['win']:.0%}"
        self.progress.update(fields)

