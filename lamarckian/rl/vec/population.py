"""A vectorized population on one device: P members of one architecture train together on one VecTask, each on its
own ``num_envs / P`` environments, acting in ONE forward (:meth:`PopulationPPO.act`) and updated in ONE batched PPO
step (:meth:`PopulationPPO.optimize`), with per-member settings (learning rate, PPO coefficients, reward weights),
Adam moments and shuffling.

Each member trains as :class:`~.vec_learner.VecLearner` trains alone: its agent 0 against its own opponent pool
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

from ...config.sections import EvaluatorSettings, OpponentSettings, RunSettings, Section
from ...mdp.vec import VecTask, create_vec_task, reward_settings
from ...model import ModelSettings, to_blob
from ...model.network import seeded
from ...model.stacked import StackedPolicies
from ...rating.tournament import Tally
from ..algorithms.population_ppo import PopulationPPO
from ..algorithms.ppo import PPO, PPOSettings
from ..evaluator import Evaluator
from ..loop import Trainer
from ..seeds import VEC_EVALUATION_SEED_OFFSET
from ..segment import Segment
from ..selfplay.pool import OpponentPool, PoolSettings, fold_decayed, pfsp_weight
from ..selfplay.window import ScoreWindow, outcome_score
from .evaluation import VecEvaluation
from .learner import vec_model
from .opponents import OpponentDraws, outcome_rows

WINDOW = 500   # training games each member's running scores are taken over
INITIAL = ("initial",)


@dataclasses.dataclass(frozen=True)
class LeagueSettings(Section):
    """``ec.league``: how the members of a vectorized population play each other (with ``ec.selfplay``)."""

    KEY = "ec.league"

    share: float
    refresh: int

    def __post_init__(self) -> None:
        if not 0 <= self.share <= 1 or self.refresh < 1:
            raise ValueError(f"ec.league: share in [0, 1] (got {self.share}), refresh >= 1 (got {self.refresh})")


class VecPopulationLearner(OpponentDraws, Trainer):
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
        lanes = torch.arange(task.num_envs, device=self.device)
        self.member_of_env = lanes // self.member_envs
        self.initial_lane = lanes % self.member_envs < round(float(vec["initial_share"]) * self.member_envs)
        settings = PPOSettings.from_config(config, self.device.type)
        self.members = []
        for member in range(self.size):
            with seeded(seed + member):
                self.members.append(vec_model(task, ModelSettings.from_config(config)))
        self.preparers = [PPO(model, settings) for model in self.members]          # advantages and targets
        self.population = PopulationPPO(self.members, [settings] * self.size, [seed + m for m in range(self.size)])
        self.member_configs: list[Mapping[str, Any]] = [config] * self.size
        self.horizon = int(vec["horizon"])
        self.initial_blob = to_blob(self.members[0])
        self.pools = [self._fresh_pool() for _ in range(self.size)]
        self.league = league if league is not None and self.size > 1 else None
        self.league_blobs = [to_blob(model) for model in self.members]
        self.external: dict[int, np.ndarray] = {}      # other learners' members in the league (id → blob)
        self.records: dict[tuple, np.ndarray] = {}     # league opponent → each member's decayed (score, games) (2, P)
        self.tally = Tally(self.size + 1)              # members, the external members, last the initial policy
        self.generator = torch.Generator(device=self.device).manual_seed(seed)
        self.mean_share = OpponentSettings.from_config(config).deterministic
        self.anneal = vec["reward"]["anneal"]
        self.evaluator = Evaluator(EvaluatorSettings.from_config(config))
        games = self.evaluator.episodes
        self.evaluation = (VecEvaluation(vec, games, INITIAL, seed=seed + VEC_EVALUATION_SEED_OFFSET, players=self.size)
                           if games > 0 else None)
        self.iteration = self.cost = self.version = 0
        self.elapsed = 0.0
        self.training: dict[str, float] = {}
        self.scores = [ScoreWindow(WINDOW) for _ in range(self.size)]          # all training games
        self.initial_scores = [ScoreWindow(WINDOW) for _ in range(self.size)]  # those of the initial lanes
        self.observations: torch.Tensor | None = None
        self.fixed_width = self.device.type != "cpu"     # opponent forwards without a host sync (see VecLearner)
        self.keys: list[tuple] = []
        self.stack()

    def _fresh_pool(self) -> OpponentPool:
        pool = OpponentPool(PoolSettings.from_config(self.config))
        pool.add(self.initial_blob, iteration=0)
        return pool

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
        pool = self._fresh_pool()
        if state is not None and state.get("pool") is not None:
            pool.load_state_dict(state["pool"])
        self.pools[member] = pool
        self.league_blobs[member] = to_blob(self.members[member])
        self.records.pop(("member", member), None)
        for record in self.records.values():
            record[:, member] = 0.0
        self.scores[member].load([])
        self.initial_scores[member].load([])
        self.stack()

    def member_state(self, member: int) -> dict[str, Any]:
        """What travels with a member's network between rounds: its weights, optimizer state, opponent pool."""
        return {"model": {k: v.detach().cpu().clone() for k, v in self.members[member].state_dict().items()},
                "optimizer": self.population.member_state(member), "pool": self.pools[member].state_dict()}

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
        return {field: torch.tensor([r[field] for r in rewards], device=self.device)[self.member_of_env]
                for field in rewards[0]}

    # ---- opponents ----------------------------------------------------------------------------------------------
    def league_keys(self) -> list[tuple]:
        """The league's opponents: every member's snapshot, then the external members (none without a league)."""
        if not self.league:
            return []
        return [("member", m) for m in range(self.size)] + [("external", i) for i in self.external]

    def set_external(self, blobs: Mapping[int, np.ndarray]) -> None:
        """Members trained by other learners (id → weight blob) join the league, replacing the previous ones; the
        records against those that stay are kept. Call :meth:`reset_tally` after it."""
        self.external = {int(i): np.asarray(blob) for i, blob in blobs.items()}
        self.records = {k: v for k, v in self.records.items() if k[0] != "external" or k[1] in self.external}
        self.stack()

    def stack(self) -> None:
        """Stack every opponent: the members' league snapshots (with a league) and, last, the initial policy (the
        fixed opponent of the initial lanes) in one set that any environment may draw; each member's pool in a
        second set that only the member's environments draw (so a GPU's fixed-width forward pads a pool snapshot
        to ``num_envs / P`` rows, not ``num_envs``). Games in progress keep their opponent if it is still there;
        the others (and every environment at the start) draw one."""
        previous = self.keys
        league = self.league_keys()
        pools = [("pool", m, i) for m, pool in enumerate(self.pools) for i in pool.snapshots]
        keys = self.keys = league + pools + [INITIAL]      # an opponent's number: its place here
        blobs = [self.league_blobs[k[1]] if k[0] == "member" else self.external[k[1]] for k in league]
        self.shared = StackedPolicies(self.members[0], [*blobs, self.initial_blob], self.device)
        self.pool_stack = StackedPolicies(self.members[0], [self.pools[k[1]].snapshots[k[2]].blob for k in pools],
                                          self.device)
        in_pool = [k[0] == "pool" for k in keys]
        tensor = lambda values: torch.tensor(values, dtype=torch.int64, device=self.device)  # noqa: E731
        self.to_pool = tensor([i - len(league) if pooled else -1 for i, pooled in enumerate(in_pool)])
        self.to_shared = tensor([-1 if pooled else min(i, len(league)) for i, pooled in enumerate(in_pool)])
        self.first_pool = tensor([pools.index(("pool", m, next(iter(pool.snapshots))))
                                  for m, pool in enumerate(self.pools)])
        self.weights = torch.tensor(self._probabilities(), dtype=torch.float32, device=self.device)
        drawn = self._draw()
        if not previous:
            self.opponent, self.opponent_mean = drawn, self._draw_mean()
            return
        position = {key: index for index, key in enumerate(keys)}
        moved = tensor([position.get(key, -1) for key in previous])
        kept = moved[self.opponent]
        self.opponent = torch.where(kept >= 0, kept, drawn)

    def _opponent_actions(self, observations: torch.Tensor) -> torch.Tensor:
        """The opponents' actions ``(E × seats, A)`` for their observations (seat-major, as the task orders them):
        the pool set acts for the rows whose opponent is a pool snapshot, the shared set for the others. On the
        CPU each set gets exactly its rows; on a GPU every row goes to both (no host synchronization: a row of
        the other set is parked on its member's first pool snapshot, or on the first shared policy) and the
        right action is picked."""
        seats = self.task.num_agents - 1
        opponent, mean = self.opponent.repeat(seats), self.opponent_mean.repeat(seats)
        pool_row = self.to_pool[opponent]
        in_pool = pool_row >= 0
        pool_policy = torch.where(in_pool, pool_row, self.first_pool[self.member_of_env.repeat(seats)])
        shared_policy = self.to_shared[opponent].clamp(min=0)
        sets = ((self.pool_stack, pool_policy, in_pool, self.member_envs * seats),
                (self.shared, shared_policy, ~in_pool, self.task.num_envs * seats))
        if not self.fixed_width:
            actions = observations.new_zeros(len(observations), self.task.num_actions)
            for stacked, policy, rows, _ in sets:
                if bool(rows.any()):
                    actions[rows] = stacked.act(observations[rows], policy[rows], deterministic=mean[rows],
                                                generator=self.generator)
            return actions
        pooled, shared = (stacked.act(observations, policy, deterministic=mean, generator=self.generator,
                                      width=width) for stacked, policy, _, width in sets)
        return torch.where(in_pool[:, None], pooled, shared)

    def _probabilities(self) -> np.ndarray:
        """``(P, K)``: each member's chance to draw each stacked opponent outside the initial lanes."""
        weights = np.zeros((self.size, len(self.keys)))
        share = self.league.share if self.league else 0.0
        column = {key: index for index, key in enumerate(self.keys)}
        for member, pool in enumerate(self.pools):
            for snapshot_id, probability in pool.probabilities().items():
                weights[member, column[("pool", member, snapshot_id)]] = (1.0 - share) * probability
            others = [key for key in self.league_keys() if key != ("member", member)]
            if share and others:
                records = np.array([self.records.get(key, np.zeros((2, self.size)))[:, member] for key in others])
                rates = np.where(records[:, 1] > 0, records[:, 0] / np.maximum(records[:, 1], 1e-9), 0.5)
                pfsp = np.array([pfsp_weight(rate, pool.settings.weighting) for rate in rates]) + 1e-6
                for key, weight in zip(others, pfsp / pfsp.sum()):
                    weights[member, column[key]] = share * weight
        return weights

    def _draw(self) -> torch.Tensor:
        """A stacked opponent per environment ``(E,)`` by its member's probabilities (the initial policy in the
        initial lanes); sampled on the device."""
        drawn = torch.multinomial(self.weights[self.member_of_env], 1, replacement=True,
                                  generator=self.generator).squeeze(1)
        return torch.where(self.initial_lane, len(self.keys) - 1, drawn)

    # ---- sampling -------------------------------------------------------------------------------------------------
    def rollout(self) -> tuple[list[Segment], torch.Tensor]:
        """``horizon`` steps of every environment: one segment per member (tensors ``[T, E/P, ...]``) and each
        member's (wins, draws, losses) against each stacked opponent ``(P, K, 3)`` of the games that ended."""
        task, size, envs, steps = self.task, self.size, self.task.num_envs, self.horizon
        if self.observations is None:
            self.observations = task.reset().to(self.device)
        zeros = lambda *shape: torch.zeros(*shape, device=self.device)  # noqa: E731
        member_envs, count = self.member_envs, len(self.keys)
        buffers = {name: zeros(steps, size, member_envs, *tail) for name, tail in
                   (("observations", (task.num_obs,)), ("actions", (task.num_actions,)), ("log_probs", ()),
                    ("rewards", ()), ("dones", ()))}
        values = zeros(steps + 1, size, member_envs)
        outcomes = zeros(size * count, 3)
        for t in range(steps):
            own = self.observations[:envs].reshape(size, member_envs, -1)
            action, log_prob, value = self.population.act(own, self.generator)
            others = self._opponent_actions(self.observations[envs:])
            self.observations, reward, done, extras = task.step(torch.cat([action.reshape(envs, -1), others])
                                                                .clamp(-1, 1))
            done = done.to(self.device)
            for name, tensor in (("observations", own), ("actions", action), ("log_probs", log_prob),
                                 ("rewards", reward[:envs].to(self.device).reshape(size, member_envs)),
                                 ("dones", done.float().reshape(size, member_envs))):
                buffers[name][t] = tensor
            values[t] = value
            outcomes.index_add_(0, self.member_of_env * count + self.opponent,
                                outcome_rows(extras, self.device) * done.float()[:, None])
            self._redraw_finished(done)
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
        self.record(outcomes)
        self.version += 1
        self.iteration += 1
        steps = self.horizon * self.task.num_envs
        self.cost += steps
        restack = False
        for member, pool in enumerate(self.pools):
            if pool.should_add(self.iteration):
                pool.add(to_blob(self.members[member]), self.iteration, cost=self.cost, elapsed=self.elapsed)
                restack = True
        if self.league and self.iteration % self.league.refresh == 0:
            self.league_blobs = [to_blob(model) for model in self.members]
            restack = True
        if restack:
            self.stack()
        stats = {key: float(np.mean([s[key] for s in member_stats])) for key in member_stats[0]}
        stats.update({"fps/overall": steps * self.task.num_agents / max(1e-9, time.monotonic() - started),
                      "time/rollout": rolled - started, "time/update": time.monotonic() - rolled})
        return stats

    def record(self, outcomes: np.ndarray) -> None:
        """Fold one rollout's game counts ``(P, K, 3)`` into the pools, the league record and tally, and the running
        scores."""
        decay = self.pools[0].settings.decay
        external = {i: self.size + position for position, i in enumerate(self.external)}
        for column, key in enumerate(self.keys):
            counts = outcomes[:, column]
            if key[0] == "pool":
                self.pools[key[1]].record_counts({key[2]: counts[key[1]]})
                continue
            for member in range(self.size):
                wins, draws, losses = counts[member]
                if not wins + draws + losses:
                    continue
                if key[0] == "member":
                    opponent = key[1]
                elif key[0] == "external":
                    opponent = external[key[1]]
                else:                                     # the initial policy: the tally's last entrant
                    opponent = self.tally.games.shape[0] - 1
                self.tally.add_counts(member, opponent, wins, draws, losses)
                if key[0] != "initial":
                    record = self.records.setdefault(key, np.zeros((2, self.size)))
                    decayed_score, decayed_games = record[:, member]
                    record[:, member] = fold_decayed(decayed_score, decayed_games, *outcome_score(wins, draws, losses),
                                                     decay)
        for member in range(self.size):
            self.scores[member].add_outcomes(*outcomes[member].sum(0))
            self.initial_scores[member].add_outcomes(*outcomes[member, -1])
        means = [window.mean() for window in self.initial_scores]
        known = [m for m in means if not math.isnan(m)]
        self.training = {f"win/{member}": mean for member, mean in enumerate(means)}
        if known:
            self.training.update({"win": float(np.max(known)), "fitness": 2.0 * float(np.max(known)) - 1.0})

    def reset_tally(self) -> None:
        """Start counting the members' games anew (a round begins)."""
        self.tally = Tally(self.size + len(self.external) + 1)

    def ratings(self) -> np.ndarray:
        """Bradley-Terry Elo ``(P + X + 1,)`` of the members, the X external members and, last, the initial policy,
        from the games tallied since :meth:`reset_tally` (training games: the members' stochastic actions, the
        opponents' share of mean actions)."""
        return self.tally.ratings()

    # ---- the run loop's view ------------------------------------------------------------------------------------
    def evaluate(self) -> dict[str, float]:
        """Each member's deterministic games against the initial policy; ``win`` is the best member's score."""
        if self.evaluation is None:
            return {}
        results = self.evaluation.evaluate_many(self.members, [self.initial_blob])
        summary = {f"member{member}/score": result["initial/score"] for member, result in enumerate(results)}
        best = max(summary.values())
        summary.update({"episodes": float(self.evaluator.episodes * self.size), "win": best,
                        "fitness": 2.0 * best - 1.0})
        self.evaluator.latest = dict(summary)
        return summary

    def opening_line(self) -> str:
        return (f"training a population of {self.size} × {self.member_envs} {type(self.task).__name__} environments "
                f"on {self.device}, horizon {self.horizon}" + (", a league" if self.league else ""))

    def status(self, stats: Mapping[str, float]) -> dict[str, str]:
        best = self.training.get("win", math.nan)
        return {"members": str(self.size), "best train vs initial": f"{best:.2f}",
                "pools": "/".join(str(len(pool)) for pool in self.pools)}

    def evaluation_line(self, summary: Mapping[str, float]) -> str:
        scores = [summary[f"member{m}/score"] for m in range(self.size) if f"member{m}/score" in summary]
        return "vs initial, per member: " + " ".join(f"{s:.2f}" for s in scores)

    def state_dict(self) -> dict[str, Any]:
        """The members' weights (``model``: the first member's, for tools that read one), the batched optimizer, the
        pools, the league, the initial policy, the running scores, counters."""
        return {"model": self.members[0].state_dict(), "members": [m.state_dict() for m in self.members],
                "population": self.population.state_dict(), "initial": torch.from_numpy(self.initial_blob.copy()),
                "pools": [pool.state_dict() for pool in self.pools],
                "league": {"blobs": [torch.from_numpy(b.copy()) for b in self.league_blobs],
                           "external": {i: torch.from_numpy(b.copy()) for i, b in self.external.items()},
                           "records": [[list(key), torch.from_numpy(record.copy())]
                                       for key, record in self.records.items()]},
                "scores": [w.state() for w in self.scores], "initial_scores": [w.state() for w in self.initial_scores],
                "generator": self.generator.get_state(), "iteration": self.iteration, "cost": self.cost,
                "elapsed": self.elapsed}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for model, saved in zip(self.members, state["members"]):
            model.load_state_dict(saved)
        self.population.load_state_dict(state["population"])
        self.initial_blob = state["initial"].numpy().copy()
        for pool, saved in zip(self.pools, state["pools"]):
            pool.load_state_dict(saved)
        self.league_blobs = [blob.numpy().copy() for blob in state["league"]["blobs"]]
        self.external = {int(i): blob.numpy().copy() for i, blob in state["league"]["external"].items()}
        self.records = {tuple(key): record.numpy().copy() for key, record in state["league"]["records"]}
        for windows, key in ((self.scores, "scores"), (self.initial_scores, "initial_scores")):
            for window, saved in zip(windows, state[key]):
                window.load(saved)
        self.iteration, self.cost, self.elapsed = int(state["iteration"]), int(state["cost"]), float(state["elapsed"])
        self.version = self.iteration
        self.keys = []                            # games restart: every environment draws its opponent anew
        self.stack()
        self.generator.set_state(state["generator"])

    def close(self) -> None:
        self.task.close()
        if self.evaluation is not None:
            self.evaluation.close()
