"""The Learner: owns the network and PPO, runs the Actors, streams their segments, broadcasts new weights.

Data flow per iteration: Gather segments until ``train.batch`` env steps → PPO update → ``All.broadcast``
of the new weight blob (fire-and-check: the learner does not wait). Evaluation games run beside training in an
evaluation actor of their own (:mod:`.beside`; ``evaluator.beside: false``: on the fleet, training waiting);
when to evaluate, records and checkpoints are the run loop's (:mod:`.loop`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from typing import Any, Iterator, Mapping, cast

import numpy as np

from ... import rpc
from ...cli import learner_threads
from ...config.sections import (
    EvaluatorSettings,
    MDPSettings,
    RaySettings,
    RemoteSettings,
    RLSettings,
    RunSettings,
    SampleSettings,
    TrainSettings,
)
from ...model import ModelSettings, to_blob
from ...model.policy_set import PolicySet
from ...rating.results import POOL, RULE, SELF, EpisodeResult
from ...record import Progress
from ...timeline import TIMELINE
from ..algorithms.base import UpdateRule
from ..algorithms.build import algorithm_of
from ..algorithms.per_policy import PerPolicyUpdate
from ..evaluator import Evaluator, summarize
from ..loop import Trainer
from ..segment import Segment, segments_of
from . import footprint
from .policy_pools import PolicyPools
from .stale_steps import StaleSteps
from .supervisor import ActorFleet, RemoteConnect
from .update_ranks import RankedUpdate, UpdateGroup, learner_network

log = logging.getLogger(__name__)

SNAPSHOT_ID_STRIDE = 1_000_000   # rl.policies: the k-th policy's pool numbers its snapshots from k × this


def evaluation_shape(config: Mapping[str, Any]) -> tuple[Any, ...]:
    """What an evaluation actor is built from beyond the weights it is sent: the MDP, the network, the algorithm and
    its policies (evolve.py's next individual keeps the evaluation actor where these are the same)."""
    rl = RLSettings.from_config(config)
    return (MDPSettings.from_config(config), ModelSettings.from_config(config), rl.algorithm, rl.policies,
            SampleSettings.from_config(config).envs)


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
        ray_settings = RaySettings.from_config(config)
        self.fleet = ActorFleet(self._actor_arguments, SampleSettings.from_config(config), ray_settings.local_mode,
                                ray_settings.launch, rpc.RpcSettings.from_config(config), connect_remote)
        self.update_group: UpdateGroup | None = None    # train.gpus > 1: the other ranks of the update
        self.configure(config)
        self.version = 0
        self.training: dict[str, float] = {}
        self.stale_steps = StaleSteps()

    def configure(self, config: Mapping[str, Any]) -> None:
        """(Re)build the network (initialized from ``config.seed``), PPO, the evaluator and the opponent pool from
        ``config``; counters restart at 0. Running actors are kept: the caller sends them the new weights.
        (evolve.py's learners call this for each individual they train.)"""
        if self.fleet.beside is not None and evaluation_shape(config) != evaluation_shape(self.config):
            self.fleet.close_evaluation()                # its MDP and network were the previous config's
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
        self.fleet.remote = RemoteSettings.from_config(config).server
        if self.remote is None:       # a run that would not fit in memory is refused before anything starts
            footprint.check(self.memory_footprint(), footprint.free_memory())
        if self.remote is not None and self.fleet.connect_remote is None:
            raise ValueError("rl.remote.server: this learner was built without a way to reach remote workers (train.py "
                             "gives it lamarckian.remote.fleet.connect)")
        if self.remote is not None and self.seats > 1:
            raise ValueError(f"rl.remote.server: remote workers play single-player MDPs; mdp.create="
                             f"{MDPSettings.from_config(config).create} has {self.seats} seats")
        self.batch_steps = TrainSettings.from_config(config).batch
        self.evaluator = Evaluator(EvaluatorSettings.from_config(config))
        self.iteration = self.cost = 0
        self.elapsed = 0.0
        self.pools = PolicyPools(config, self.model, self.roles.names if self.roles is not None else None, opponents)

    def memory_footprint(self) -> footprint.Footprint:
        """The memory this run will take with actors of its own (:mod:`.footprint`)."""
        return footprint.of_run(self.config, self.model, self.seats, self.roles, self.algorithm.off_policy)

    @property
    def remote(self) -> str | None:
        """``rl.remote.server``: the learner trains from remote workers (None: from actors of its own)."""
        return self.fleet.remote

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
        return {"model": self.model.state_dict(), **self.update_rule.state_dict(), **self.pools.state_dict(),
                **self.counters()}

    def model_state(self) -> dict[str, Any]:
        return self.model.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.update_rule.load_state_dict(state)
        self.pools.load_state_dict(state)
        self.load_counters(state)
        if self.update_group is not None:
            self.update_group.load(state)

    # ---- actors --------------------------------------------------------------------------------------------
    def _actor_arguments(self, index: int) -> tuple[Any, ...]:
        """What actor ``index`` is built from: the configuration, its seed stream, the current weights and version,
        the opponent pools."""
        return dict(self.config), index, to_blob(self.model), self.version, self.pools.for_actors()

    def start_actors(self) -> None:
        if self.remote is not None:            # workers on other machines, through the relay server
            self.fleet.connect_workers(self.config, self.model, self.learns_from_any_age)
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
        for name, (probabilities, blobs) in self.pools.for_actors().items():
            fleet.call_all(lambda: fleet.everyone("set_pool", probabilities, blobs, name))

    def play_against(self, members: Mapping[int, np.ndarray]) -> None:
        """Self-play against a population: the opponent pool becomes exactly ``members`` (id → weight blob), drawn
        by the configured chooser, and no snapshots of the learner are added. Call :meth:`publish` afterwards."""
        self.pools.play_against(members, self.iteration)

    def close(self) -> None:
        self.fleet.close()
        if self.update_group is not None:
            self.update_group.close()
            self.update_group = None

    # ---- training ------------------------------------------------------------------------------------------
    def _collect(self) -> tuple[list[Segment], int, dict[str, list[EpisodeResult]]]:
        """Segments worth ``train.batch`` env steps of weights no more than ``max_staleness`` versions old (a
        segment's older lanes are trimmed off, :meth:`Segment.trimmed`, and counted as dropped), all the env steps
        they cost, the finished episodes per policy (every segment's, dropped ones too)."""
        segments: list[Segment] = []
        steps = fresh = 0
        results = dict[str, list[EpisodeResult]]()
        limit, gather, watch = self.max_staleness, self.fleet.gather, self.fleet.watch
        own = self.remote is None                     # actors of its own (they report while a segment takes long)
        if own:
            self.fleet.poll()                         # replacements that Ray has started join now
            gather.holding = self.synchronous
        watch.begin(self.batch_steps, self.sample.stall)
        while fresh < self.batch_steps or (own and self.synchronous and gather.in_flight() > 0):
            try:
                received = self.fleet.next_message(min(1.0, self.sample.stall / 4) if own else None)
            except TimeoutError:
                self.fleet.check_stall(fresh)
                continue
            if received is None:                      # a report, or a dead actor replaced
                continue
            message = segments_of(received)
            TIMELINE.mark("first segment at the learner")
            for segment in message:
                steps += segment.steps
                results.setdefault(segment.policy, []).extend(segment.results)
                self.fleet.counts.update(segment.counters)
                kept = segment.trimmed(self.version - limit)
                usable = kept.steps if kept is not None else 0
                self.stale_steps.add(segment.steps, usable)
                watch.segment(gather.last_index, segment.steps, len(segment.results), segment.counters,
                              dropped=segment.steps - usable)
                if kept is not None:
                    fresh += usable
                    segments.append(kept)
            if self.synchronous and gather.in_flight() * sum(s.steps for s in message) < self.batch_steps - fresh:
                gather.release(gather.last_index)     # those in flight cannot fill the batch: one more
            if own:
                self.fleet.check_stall(fresh)
        return segments, steps, results

    @property
    def gather_credits(self) -> int:
        """Segments an actor may have in flight: ``sample.credits``; under :attr:`synchronous` no more than the
        batch needs from every actor, rounded down (a credit left over at the end of a batch would sample the next
        one's first segment with the old weights): :meth:`_collect` makes up the rest one segment at a time, and
        where one segment from every actor is more than the batch, takes them all."""
        if not self.synchronous:
            return self.sample.credits
        return max(1, min(self.sample.credits, self.batch_steps // self.round_steps))

    @property
    def round_steps(self) -> int:
        """Env steps of one segment from every local actor (``sample.actors × envs × truncation``)."""
        return self.sample.actors * self.sample.envs * self.sample.truncation

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
            self.pools.record(results)
            for name, probabilities, added in self.pools.grow(self.model, self.iteration):
                self.fleet.call_all(lambda: self.fleet.everyone.broadcast("set_pool", probabilities, added, name))
        if self.synchronous:     # the credits after the weights and the pool have arrived: to an actor on another
            self.fleet.call_all(self.fleet.everyone.wait)   # node they go through its relay, the credits direct
            self.fleet.gather.release()
        training = summarize(results)
        for name in self.roles.names if self.roles is not None else ():
            training[f"fitness_{name}"] = summarize(results_of.get(name, []))["fitness"]
        for kind in (RULE, POOL):
            against = [r for r in results if r.opponent == kind]
            if against:
                training[f"win_{kind}"] = summarize(against)["win"]
        if results:
            self.training = training
        stats.update(self.fleet.statistics())
        self._mark_first_update()
        stats.update({"fps/sampling": steps / max(1e-9, collected - started),
                      "fps/learning": stats.get("samples", 0.0) / max(1e-9, updated - collected),
                      "fps/overall": steps / max(1e-9, updated - started), **self.stale_steps.statistics(),
                      "replaced": float(self.fleet.replaced)})
        return stats

    def _mark_first_update(self) -> None:
        """``--profile``: the first update and the earliest actor's first env step (asked once)."""
        if TIMELINE.enabled and "first update" not in TIMELINE.moments:
            TIMELINE.mark("first update")
            firsts = [at for at in self.fleet.call_all(lambda: self.fleet.everyone("first_step")) if at is not None]
            if firsts:
                TIMELINE.mark("first env step (the earliest actor)", min(firsts))

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

    # ---- the run loop's view ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Actors started (if not yet) and streaming segments while the loop runs."""
        if not self.fleet.started:
            self.start_actors()
        if self.update_group is None and TrainSettings.from_config(self.config).gpus > 1:
            self.update_group = UpdateGroup(TrainSettings.from_config(self.config), self.fleet.rpc_settings,
                                            self._ranked_rule(), RunSettings.from_config(self.config).seed,
                                            learner_threads(self.config), self.fleet.local)
            self.update_group.load(self.state_dict())
        with self.fleet.gather.gathering("sample"):
            yield

    def attach_progress(self, progress: Progress) -> None:
        self.fleet.watch.status_line = progress
        self.stale_steps.attach(progress)

    def opening_line(self) -> str:
        device = next(self.model.parameters()).device
        if self.remote is not None:
            return f"training from the remote workers of {self.remote}, the learner on {device}"
        line = f"training: {self.sample.actors} actors × {self.sample.envs} environments, the learner on {device}"
        if self.roles is not None:
            line += "; policies: " + ", ".join(f"{name} ({seats_text(self.roles.seats_of(name))})"
                                               for name in self.roles.names)
        if self.synchronous and self.batch_steps < self.round_steps:
            line += (f"; sample.sync takes one segment from every actor into each batch: {self.round_steps:,} env "
                     f"steps, more than train.batch={self.batch_steps:,}")
        return line

    def evaluate(self) -> dict[str, float]:
        """The planned deterministic episodes (``evaluator.episodes``, fewer under ``evaluator.steps``) split over
        the actors against ``evaluator.opponent``."""
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
        self.evaluator.started(self.cost)
        self.fleet.evaluation().start(self.version, to_blob(self.model), self.evaluator.planned,
                                      self.evaluator.opponent,
                                      self.pools.newest() if self.evaluator.opponent == SELF else None)

    def evaluation_result(self, wait: bool = False) -> dict[str, float] | None:
        """The summary of the evaluation begun last, once its games are over (None while they play; ``wait``:
        block for them)."""
        beside = self.fleet.beside
        if not self.evaluates_beside or beside is None:
            return super().evaluation_result(wait)
        results = beside.wait() if wait else beside.poll()
        if results is None:
            return None
        return self.evaluator.conclude([results], [self.evaluator.planned])

    def scalars(self, stats: Mapping[str, float]) -> dict[str, float]:
        return {**super().scalars(stats), **self.pools.statistics()}

    def evaluation_line(self, summary: Mapping[str, float]) -> str:
        win = summary.get("win", math.nan)
        line = super().evaluation_line(summary)
        if math.isnan(win):
            return line
        against = f" vs {self.evaluator.opponent}" if self.seats > 1 else ""   # one seat: its opponent is the game's
        return f"{line}, win rate {win:.0%}{against}"

    def status(self, stats: Mapping[str, float]) -> dict[str, str]:
        fields = {"return": f"{self.training.get('return', math.nan):.3g}"}
        if "kl" in stats:                      # PPO's and IMPALA's
            fields["kl"] = f"{stats['kl']:.3g}"
        fields.update({"lr": f"{self.update_rule.lr:.2g}",
                       "stale": f"{stats.get('staleness', 0.0):.2f}/{stats.get('staleness_max', 0.0):.0f}"})
        fields["dropped"] = self.stale_steps.field()
        latest = self.evaluator.latest
        if latest.get("episodes"):
            fields["eval"] = f"{latest['fitness']:.3g}"
            if not math.isnan(latest.get("win", math.nan)):
                fields["win"] = f"{latest['win']:.0%}"
        return fields
