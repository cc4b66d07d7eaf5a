"""The Learner: owns the network and PPO, runs the Actors, streams their segments, broadcasts new weights.

Data flow per iteration: Gather segments until ``train.batch`` env steps → PPO update → ``All.broadcast``
of the new weight blob (fire-and-check: the learner does not wait). Evaluation games run beside training in an
evaluation actor of their own (:mod:`.beside`; ``evaluator.beside: false``: on the fleet, training waiting);
when to evaluate, records and checkpoints are the run loop's (:mod:`.loop`).
"""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import logging
import math
import time
from pathlib import Path
from typing import Any, Iterator, Mapping, Protocol, cast

import numpy as np
import torch

from ... import rpc
from ...config import lookup
from ...config.sections import (
    EvaluatorSettings,
    MDPSettings,
    RaySettings,
    RemoteSettings,
    RLSettings,
    SampleSettings,
    TrainSettings,
)
from ...model import ModelSettings, to_blob
from ...model.policy_set import PolicySet
from ...rating.results import POOL, RULE, SELF, EpisodeResult
from ...record.checkpoint import upgrade_checkpoint
from ...timeline import TIMELINE
from ..algorithms import algorithm_of
from ..algorithms.base import UpdateRule
from ..algorithms.per_policy import PerPolicyUpdate
from ..evaluator import Evaluator, summarize
from ..loop import Trainer
from ..segment import Segment, segments_of
from ..selfplay.pool import OpponentPool, PoolSettings
from .beside import BesideEvaluation, Pool
from .supervisor import EVALUATION_ACTOR, ActorFleet
from .update_ranks import RankedUpdate, UpdateGroup, learner_network

log = logging.getLogger(__name__)

SNAPSHOT_ID_STRIDE = 1_000_000   # rl.policies: the k-th policy's pool numbers its snapshots from k × this


def evaluation_shape(config: Mapping[str, Any]) -> tuple[Any, ...]:
    """What an evaluation actor is built from beyond the weights it is sent: the MDP, the network, the algorithm and
    its policies (evolve.py's next individual keeps the evaluation actor where these are the same)."""
    rl = RLSettings.from_config(config)
    return (MDPSettings.from_config(config), ModelSettings.from_config(config), rl.algorithm, rl.policies,
            SampleSettings.from_config(config).envs)


class RemoteConnect(Protocol):
    """How the learner reaches the remote workers of ``rl.remote.server`` (:func:`lamarckian.remote.fleet.connect`):
    their ``All`` (``set_weights``, ``evaluate``...) and their ``Gather`` of segments; ``keep_fixed``: segments of
    fixed-weight (ONNX) workers are learned from too (off-policy learners)."""

    def __call__(self, config: Mapping[str, Any], model: torch.nn.Module, keep_fixed: bool) -> tuple[Any, Any]: ...


def seats_text(seats: list[int]) -> str:
    """``seat 3`` or ``seats 0, 1, 2``."""
    return f"seat {seats[0]}" if len(seats) == 1 else f"seats {', '.join(map(str, seats))}"


class Learner(Trainer):
    """Trains one policy with a fleet of ``sample.actors`` Ray actors, or with the remote workers of
    ``rl.remote.server`` (run it with :class:`.loop.TrainingLoop`).

    Args:
        config: the resolved configuration.
        connect_remote: reaches the remote workers where ``rl.remote.server`` is set (else unused).
    """

    learns_from_any_age = False   # segments of any age are useful (replay): remote ONNX workers' segments too

    def __init__(self, config: Mapping[str, Any], connect_remote: RemoteConnect | None = None) -> None:
        self.connect_remote = connect_remote
        ray_settings = RaySettings.from_config(config)
        self.fleet = ActorFleet(self._actor_arguments, SampleSettings.from_config(config), ray_settings.local_mode,
                                ray_settings.launch, rpc.RpcSettings.from_config(config))
        self.update_group: UpdateGroup | None = None    # train.gpus > 1: the other ranks of the update
        self.beside: BesideEvaluation | None = None     # the evaluation actor (started at the first evaluation)
        self.configure(config)
        self.version = 0
        self.training: dict[str, float] = {}
        self.dropped = 0
        self.environment_counts: collections.Counter[str] = collections.Counter()   # segments' counters, summed

    def configure(self, config: Mapping[str, Any]) -> None:
        """(Re)build the network (initialized from ``config.seed``), PPO, the evaluator and the opponent pool from
        ``config``; counters restart at 0. Running actors are kept: the caller sends them the new weights.
        (evolve.py's learners call this for each individual they train.)"""
        if self.beside is not None and evaluation_shape(config) != evaluation_shape(self.config):
            self.beside.close()                          # its MDP and network were the previous config's
            self.beside = None
        self.config = config
        self.algorithm = algorithm_of(config)
        self.model, self.seats, self.roles = learner_network(config)
        self.algorithm.check(self.model, self.seats, config)
        opponents = self.seats > 1 and not RLSettings.from_config(config).shared_seats    # other seats: snapshots
        if opponents and int(getattr(self.model, "state_size", 0)):
            raise ValueError(f"model.recurrent={ModelSettings.from_config(config).recurrent} trains single-player MDPs "
                             "or "
                             f"rl.shared_seats games; this one has {self.seats} seats played by opponent snapshots "
                             "(they act in one stacked feed-forward pass)")
        self.build_update(config)
        self.sample = self.fleet.sample = SampleSettings.from_config(config)
        self.segments_per_poll = self.sample.actors * self.sample.credits   # at most in flight at once
        self.remote = RemoteSettings.from_config(config).server
        if self.remote is not None and self.connect_remote is None:
            raise ValueError("rl.remote.server: this learner was built without a way to reach remote workers (train.py "
                             "gives it lamarckian.remote.fleet.connect)")
        if self.remote is not None and self.seats > 1:
            raise ValueError(f"rl.remote.server: remote workers play single-player MDPs; mdp.create="
                             f"{MDPSettings.from_config(config).create} has {self.seats} seats")
        self.batch_steps = TrainSettings.from_config(config).batch
        self.evaluator = Evaluator(EvaluatorSettings.from_config(config))
        self.iteration = self.cost = 0
        self.elapsed = 0.0
        self.pools = self._initial_pools(config) if opponents else {}   # per policy ("": one for every seat)
        self.pool_frozen = False

    def build_update(self, config: Mapping[str, Any]) -> None:
        """The algorithm's update rule on ``self.model`` (and, PPO on several GPUs, its replicas); with
        ``rl.policies`` one rule per policy."""
        gpus = TrainSettings.from_config(config).gpus
        if self.roles is not None:
            if gpus > 1:
                raise ValueError(f"train.gpus={gpus}: rl.policies (a policy per role) updates on one device")
            assert isinstance(self.model, PolicySet)      # a network per policy
            self.update_rule: UpdateRule = PerPolicyUpdate({
                name: self.algorithm.update_rule(member, self.roles.config_of(config, name))
                for name, member in self.model.members()})
            return
        self.update_rule = self.algorithm.update_rule(self.model, config)
        if gpus > 1 and not self.algorithm.data_parallel:
            raise ValueError(f"train.gpus={gpus}: rl.algorithm={self.algorithm.name} updates on one device (the "
                             "data-parallel update is PPO's and IMPALA's)")
        if self.update_group is not None:              # a new individual (evolve.py): the replicas follow
            rule = self._ranked_rule()
            rule.ranks, self.update_group.ppo = self.update_group.ranks, rule
            self.update_group.load(self.state_dict())

    def _ranked_rule(self) -> RankedUpdate:
        """The update rule as the data-parallel one it is (``train.gpus > 1`` was checked against the algorithm)."""
        if not self.algorithm.data_parallel:
            raise ValueError(f"rl.algorithm={self.algorithm.name} updates on one device")
        return cast(RankedUpdate, self.update_rule)

    def set_lr(self, lr: float) -> None:
        """The learning rate from now on (evolve.py's searched ``train.lr``)."""
        self.update_rule.set_lr(lr)

    @property
    def max_staleness(self) -> int:
        """Segments more weight versions behind than this are dropped."""
        return self.update_rule.max_staleness

    # ---- state ---------------------------------------------------------------------------------------------
    def counters(self) -> dict[str, Any]:
        """The weight version, iterations, env steps and training seconds, as checkpoints hold them."""
        return {"version": self.version, "iteration": self.iteration, "cost": self.cost, "elapsed": self.elapsed}

    def load_counters(self, state: Mapping[str, Any]) -> None:
        """Undo :meth:`counters`."""
        self.version, self.iteration, self.cost = int(state["version"]), int(state["iteration"]), int(state["cost"])
        self.elapsed = float(state["elapsed"])

    def state_dict(self) -> dict[str, Any]:
        """Weights (normalizers included), optimizer and lr, the opponent pool, counters."""
        pools = {name: pool.state_dict() for name, pool in self.pools.items()}
        kept = {"pools": pools} if self.roles is not None else {"pool": pools.get("")}     # one pool: format 1's key
        return {"model": self.model.state_dict(), **self.update_rule.state_dict(), **kept, **self.counters()}

    def model_state(self) -> dict[str, Any]:
        return self.model.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.update_rule.load_state_dict(state)
        saved = state.get("pools") or {} if self.roles is not None else {"": state.get("pool")}
        for name, pool in self.pools.items():
            entry = saved.get(name)
            if entry is not None:
                pool.load_state_dict(entry)
        self.load_counters(state)
        if self.update_group is not None:
            self.update_group.load(state)

    # ---- actors --------------------------------------------------------------------------------------------
    def _actor_arguments(self, index: int) -> tuple[Any, ...]:
        """What actor ``index`` is built from: the configuration, its seed stream, the current weights and version,
        the opponent pools."""
        pools = {name: (pool.probabilities(), {i: s.blob for i, s in pool.snapshots.items()})
                 for name, pool in self.pools.items()}
        return dict(self.config), index, to_blob(self.model), self.version, pools

    def start_actors(self) -> None:
        if self.remote is not None:            # workers on other machines, through the relay server
            if self.connect_remote is None:
                raise ValueError("rl.remote.server: this learner was built without a way to reach remote workers")
            self.fleet.attach(*self.connect_remote(self.config, self.model, self.learns_from_any_age))
            self.segments_per_poll = RemoteSettings.from_config(self.config).batch
            self.fleet.everyone("set_weights", self.version, to_blob(self.model))    # the workers start from these
            return
        self.fleet.start(self.gather_credits)

    def publish(self) -> None:
        """Send the current weights and the opponent pool to every actor and wait. For a learner whose network
        was swapped (evolve.py): the version jumps past ``rl.ppo.max_staleness``, so segments still holding steps
        of the previous network are dropped as stale instead of being learned from."""
        if not self.fleet.started:
            self.start_actors()
            return
        self.version += self.max_staleness + 1
        blob, fleet = to_blob(self.model), self.fleet
        fleet.call_all(lambda: fleet.everyone("set_weights", self.version, blob))
        for name, pool in self.pools.items():
            blobs = {i: s.blob for i, s in pool.snapshots.items()}
            fleet.call_all(lambda: fleet.everyone("set_pool", pool.probabilities(), blobs, name))

    def play_against(self, members: Mapping[int, np.ndarray]) -> None:
        """Self-play against a population: the opponent pool becomes exactly ``members`` (id → weight blob), drawn
        by the configured chooser, and no snapshots of the learner are added. Call :meth:`publish` afterwards."""
        if self.roles is not None:
            raise ValueError("rl.policies: a population's members play one policy in every seat")
        settings = dataclasses.replace(PoolSettings.from_config(self.config), capacity=max(1, len(members)))
        pool = self.pools[""] = OpponentPool(settings)
        for member_id, blob in members.items():
            pool.add(blob, self.iteration, snapshot_id=int(member_id))
        self.pool_frozen = True

    def close(self) -> None:
        self.fleet.close(remote=self.remote is not None)
        if self.beside is not None:
            self.beside.close()
            self.beside = None
        if self.update_group is not None:
            self.update_group.close()
            self.update_group = None

    # ---- training ------------------------------------------------------------------------------------------
    def _collect(self) -> tuple[list[Segment], int, dict[str, list[EpisodeResult]]]:
        """Segments worth ``train.batch`` env steps (stale ones dropped), their env steps, the finished episodes per
        policy (every segment's, stale ones too)."""
        segments: list[Segment] = []
        steps, results = 0, dict[str, list[EpisodeResult]]()
        limit, gather = self.max_staleness, self.fleet.gather
        if self.remote is None:
            gather.holding = self.synchronous
        while steps < self.batch_steps:
            try:
                message = segments_of(gather())
            except rpc.ActorDiedError as error:
                self.fleet.replace(error)
                continue
            TIMELINE.mark("first segment at the learner")
            for segment in message:
                steps += segment.steps
                results.setdefault(segment.policy, []).extend(segment.results)
                self.environment_counts.update(segment.counters)
                if self.version - segment.version > limit:
                    self.dropped += 1
                    continue
                segments.append(segment)
            if self.synchronous and gather.in_flight() * sum(s.steps for s in message) < self.batch_steps - steps:
                gather.release(gather.last_index)     # those in flight cannot fill the batch: one more
        return segments, steps, results

    @property
    def gather_credits(self) -> int:
        """Segments an actor may have in flight: ``sample.credits``; under :attr:`synchronous` no more than one
        batch needs from each actor (a credit left over at the end of a batch would sample the next one's first
        segment with the old weights; fewer are made up by :meth:`_collect`)."""
        if not self.synchronous:
            return self.sample.credits
        per_actor = self.batch_steps / (self.sample.actors * self.sample.envs * self.sample.truncation)
        return max(1, min(self.sample.credits, math.ceil(per_actor)))

    @property
    def synchronous(self) -> bool:
        """``sample.sync`` on the actor fleet: an actor makes a segment for the next batch only once that batch's
        weights were sent to it (credits are kept back meanwhile)."""
        return self.sample.sync and self.remote is None

    def step(self) -> dict[str, float]:
        """One iteration: collect, update, broadcast. Returns its statistics."""
        started = time.monotonic()
        segments, steps, results_of = self._collect()     # the finished episodes per policy
        results = [result for own in results_of.values() for result in own]
        collected = time.monotonic()
        update = self.update_group.update if self.update_group is not None else self.update_rule.update
        stats = update(segments, self.version, self.cost) if segments else {}
        updated = time.monotonic()
        self.advance(steps)
        if self.pools:
            self._update_pools(results)
        if self.synchronous:
            self.fleet.gather.release()            # after the weights and the pool: each link delivers them first
        training = summarize(results)
        for name in self.roles.names if self.roles is not None else ():
            training[f"fitness_{name}"] = summarize(results_of.get(name, []))["fitness"]
        for kind in (RULE, POOL):
            against = [r for r in results if r.opponent == kind]
            if against:
                training[f"win_{kind}"] = summarize(against)["win"]
        if results:
            self.training = training
        stats.update(self.fleet_statistics())
        self._mark_first_update()
        stats.update({"fps/sampling": steps / max(1e-9, collected - started),
                      "fps/learning": stats.get("samples", 0.0) / max(1e-9, updated - collected),
                      "fps/overall": steps / max(1e-9, updated - started), "dropped": float(self.dropped),
                      "replaced": float(self.fleet.replaced)})
        return stats

    def _mark_first_update(self) -> None:
        """``--profile``: the first update and the earliest actor's first env step (asked once)."""
        if TIMELINE.enabled and "first update" not in TIMELINE.moments:
            TIMELINE.mark("first update")
            firsts = [at for at in self.fleet.call_all(lambda: self.fleet.everyone("first_step")) if at is not None]
            if firsts:
                TIMELINE.mark("first env step (the earliest actor)", min(firsts))

    def fleet_statistics(self) -> dict[str, float]:
        """The environments' counters (``env/...``: a game server's lost episodes...) and the remote workers'
        (``remote/...``)."""
        counts = {f"env/{name}": float(value) for name, value in self.environment_counts.items()}
        return {**counts, **self.fleet.gather.statistics()} if self.remote is not None else counts

    def advance(self, steps: int) -> np.ndarray:
        """Count one iteration of ``steps`` env steps under a new weight version and broadcast the weights (without
        waiting); the weight blob."""
        self.iteration += 1
        self.cost += steps
        return self.publish_weights()

    def publish_weights(self) -> np.ndarray:
        """Send the current weights to every actor under a new version (without waiting); the weight blob."""
        self.version += 1
        blob = to_blob(self.model)
        self.fleet.call_all(lambda: self.fleet.everyone.broadcast("set_weights", self.version, blob))
        return blob

    # ---- self-play -----------------------------------------------------------------------------------------
    def _member(self, model: torch.nn.Module, policy: str) -> torch.nn.Module:
        """``policy``'s network in ``model`` (the model itself with one policy for every seat)."""
        return model[policy] if isinstance(model, PolicySet) else model

    def _initial_pools(self, config: Mapping[str, Any]) -> dict[str, OpponentPool]:
        """A pool per policy with its first opponent: the initial policy, or the weights of
        ``rl.opponent.pool.initial`` (a checkpoint file). The ``k``-th policy's snapshot ids start at ``k`` ×
        :data:`SNAPSHOT_ID_STRIDE`, so an episode's snapshot ids name their pools."""
        source = self.model
        initial = lookup(config, "rl.opponent.pool.initial")
        if initial:
            path = Path(initial).expanduser()
            state = upgrade_checkpoint(torch.load(path, map_location="cpu", weights_only=True), path)
            source = copy.deepcopy(self.model)
            source.load_state_dict(state["model"])
        pools = {}
        for number, name in enumerate(self.roles.names if self.roles is not None else ("",)):
            pool = pools[name] = OpponentPool(PoolSettings.from_config(config))
            pool.next_id = number * SNAPSHOT_ID_STRIDE
            pool.add(to_blob(self._member(source, name)), iteration=0)
        return pools

    def _pool_of(self, snapshot_id: int) -> OpponentPool:
        """The pool a snapshot id belongs to."""
        return list(self.pools.values())[snapshot_id // SNAPSHOT_ID_STRIDE] if self.roles is not None \
            else self.pools[""]

    def _update_pools(self, results: list[EpisodeResult]) -> None:
        """Record the games against snapshots (a snapshot's pool keeps the learners' scores against it: its
        chooser serves them), freeze a policy into its pool when that pool's add rule holds, send the pools."""
        for result in results:
            if result.opponent != POOL:
                continue
            if len(result.snapshots) == 1 and result.win is not None:      # two players: the game's outcome
                self._pool_of(result.snapshots[0]).record(result.snapshots[0], result.win)
            else:                               # N players: the learner's score against each seat's snapshot
                for snapshot_id, score in zip(result.snapshots, result.scores):
                    self._pool_of(snapshot_id).record(snapshot_id, score)
        for name, pool in self.pools.items():
            added = {}
            if not self.pool_frozen and pool.should_add(self.iteration):
                snapshot = pool.add(to_blob(self._member(self.model, name)), self.iteration)
                added[snapshot.id] = snapshot.blob
            probabilities = pool.probabilities()
            self.fleet.call_all(lambda: self.fleet.everyone.broadcast("set_pool", probabilities, added, name))

    # ---- the run loop's view ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Actors started (if not yet) and streaming segments while the loop runs."""
        if not self.fleet.started:
            self.start_actors()
        if self.update_group is None and TrainSettings.from_config(self.config).gpus > 1:
            self.update_group = UpdateGroup(self.config, self._ranked_rule(), self.fleet.local)
            self.update_group.load(self.state_dict())
        with self.fleet.gather.gathering("sample"):
            yield

    def opening_line(self) -> str:
        device = next(self.model.parameters()).device
        if self.remote is not None:
            return f"training from the remote workers of {self.remote}, the learner on {device}"
        line = f"training: {self.sample.actors} actors × {self.sample.envs} environments, the learner on {device}"
        if self.roles is not None:
            line += "; policies: " + ", ".join(f"{name} ({seats_text(self.roles.seats_of(name))})"
                                               for name in self.roles.names)
        return line

    def evaluate(self) -> dict[str, float]:
        """``evaluator.episodes`` deterministic episodes split over the actors against ``evaluator.opponent``."""
        if self.evaluator.episodes <= 0:
            return {}
        return self.fleet.call_all(lambda: self.evaluator.evaluate(self.fleet.everyone))

    @property
    def evaluates_beside(self) -> bool:
        """Evaluation games run in the evaluation actor while training goes on (``evaluator.beside``; not with
        remote workers, whose fleet is the only one)."""
        return self.evaluator.settings.beside and self.remote is None and self.evaluator.episodes > 0

    def begin_evaluation(self) -> None:
        """Send the current weights (and, against ``self``, the newest pool snapshot) to the evaluation actor and
        return; :meth:`evaluation_result` brings the summary. Without ``evaluator.beside``: evaluate now."""
        if not self.evaluates_beside:
            super().begin_evaluation()
            return
        if self.beside is None:
            self.beside = BesideEvaluation(lambda: self.fleet.spawn(EVALUATION_ACTOR), self.fleet.kill,
                                           rpc.RpcSettings.from_config(self.config))
        self.evaluator.started(self.cost)
        self.beside.start(self.version, to_blob(self.model), self.evaluator.episodes, self.evaluator.opponent,
                          self._newest_opponent())

    def _newest_opponent(self) -> Pool | None:
        """The opponent pool the evaluation plays ``self`` from: the newest snapshot alone."""
        pool = self.pools.get("")
        if self.evaluator.opponent != SELF or pool is None or not pool.snapshots:
            return None
        newest = next(reversed(pool.snapshots))
        return {newest: 1.0}, {newest: pool.snapshots[newest].blob}

    def evaluation_result(self, wait: bool = False) -> dict[str, float] | None:
        """The summary of the evaluation begun last, once its games are over (None while they play; ``wait``:
        block for them)."""
        if not self.evaluates_beside or self.beside is None:
            return super().evaluation_result(wait)
        results = self.beside.wait() if wait else self.beside.poll()
        if results is None:
            return None
        return self.evaluator.conclude([results], [self.evaluator.episodes])

    def scalars(self, stats: Mapping[str, float]) -> dict[str, float]:
        pools = {key if not name else key.replace("pool/", f"pool/{name}/", 1): value
                 for name, pool in self.pools.items() for key, value in pool.statistics().items()}
        return {**super().scalars(stats), **pools}

    def evaluation_line(self, summary: Mapping[str, float]) -> str:
        win = summary.get("win", math.nan)
        line = super().evaluation_line(summary)
        return line if math.isnan(win) else f"{line}, win rate {win:.0%} vs {self.evaluator.opponent}"

    def status(self, stats: Mapping[str, float]) -> dict[str, str]:
        fields = {"return": f"{self.training.get('return', math.nan):.3g}"}
        if "kl" in stats:                      # PPO's and IMPALA's
            fields["kl"] = f"{stats['kl']:.3g}"
        fields.update({"lr": f"{self.update_rule.lr:.2g}",
                       "stale": f"{stats.get('staleness', 0.0):.2f}/{stats.get('staleness_max', 0.0):.0f}"})
        latest = self.evaluator.latest
        if latest.get("episodes"):
            fields["eval"] = f"{latest['fitness']:.3g}"
            if not math.isnan(latest.get("win", math.nan)):
                fields["win"] = f"{latest['win']:.0%}"
        return fields
