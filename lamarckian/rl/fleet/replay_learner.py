"""The off-policy learner on the actor fleet (DQN, SAC): the actors' segments fill a replay buffer, the learner
makes ``train.replay.ratio`` gradient updates per env step from it and broadcasts the new weights (and DQN's ε).

Once ``train.replay.start`` transitions are stored, each iteration takes the segments that have arrived and makes the
updates they are owed, waiting for the actors only when not one update is owed: updates ÷ env steps stays
``train.replay.ratio`` whether the actors are fast or slow. A segment with a non-finite reward or observation is
dropped and counted (``nonfinite``), never stored. The buffer lives in the learner, so a replaced actor loses no data;
it is in checkpoints only with ``train.replay.checkpoint`` (a resume without it refills before updating again).
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import Any, Iterator, Mapping

import torch

from ...config.sections import RLSettings, RunSettings
from ..algorithms.dqn_settings import EpsilonSettings
from ..algorithms.replay import ReplayBuffer
from ..algorithms.replay_settings import ReplaySettings
from ..evaluator import summarize
from ..segment import Segment
from .learner import Learner

POLL_SECONDS = 0.001   # how long an iteration listens for more segments once the buffer may be trained on


class OffPolicyLearner(Learner):
    """DQN (``rl.algorithm: dqn``) or SAC (``sac``) with a fleet of ``sample.actors`` Ray actors; single-player
    MDPs, one learner process (run it with :class:`.loop.TrainingLoop`)."""

    learns_from_any_age = True

    def build_update(self, config: Mapping[str, Any]) -> None:
        self.replay_settings = replay = ReplaySettings.from_config(config)
        self.replay = ReplayBuffer(replay.capacity, replay.steps, RLSettings.from_config(config).discount, replay.alpha,
                                   replay.beta, seed=RunSettings.from_config(config).seed)
        self.replay_update = self.algorithm.replay_update(self.model, config)
        self.epsilon: EpsilonSettings | None = self.algorithm.exploration_schedule(config)   # DQN's ε
        self.device = next(self.model.parameters()).device
        self.updates_owed = 0.0            # updates due but not made yet (a fraction of one)
        self.nonfinite = 0

    def set_lr(self, lr: float) -> None:
        self.replay_update.set_lr(lr)

    @property
    def max_staleness(self) -> int:
        return 0                    # replay keeps old data; a new network (evolve.py) starts a new buffer anyway

    # ---- state ---------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Weights, the algorithm's state (targets, optimizers, temperature), the buffer where configured,
        counters."""
        replay = self.replay.state_dict() if self.replay_settings.checkpoint else None
        return {"model": self.model.state_dict(), "algorithm": self.replay_update.state_dict(), "replay": replay,
                "owed": self.updates_owed, "nonfinite": self.nonfinite, **self.counters()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.model.load_state_dict(state["model"])
        self.replay_update.load_state_dict(state["algorithm"])
        if state.get("replay") is not None:
            self.replay.load_state_dict(state["replay"])
        self.updates_owed, self.nonfinite = float(state["owed"]), int(state["nonfinite"])
        self.load_counters(state)

    # ---- training ------------------------------------------------------------------------------------------
    def _receive(self) -> tuple[int, list[Any]]:
        """Store the segments that have arrived, waiting for more while no update is due (the buffer below
        ``start``, or fewer env steps since the last update than one update needs at ``ratio``); their env steps and
        finished episodes. A wait longer than ``sample.stall`` says on the console what it waits for."""
        steps, results = 0, []
        gather, watch, own = self.fleet.gather, self.fleet.watch, self.remote is None
        if own:
            self.fleet.poll()           # replacements that Ray has started join now
        watch.begin(self._steps_to_an_update(0), self.sample.stall)
        taken = 0
        while True:
            waiting = self._steps_to_an_update(steps) > 0
            if not waiting and taken >= self.segments_per_poll:
                break
            try:
                wire = self.fleet.next_message(min(1.0, self.sample.stall / 4) if waiting else POLL_SECONDS)
            except TimeoutError:
                if not waiting:
                    break
                if own:
                    self.fleet.check_stall(steps)
                continue
            if wire is None:                 # a progress report, or a dead actor replaced
                continue
            taken += 1
            segment = Segment.from_wire(wire)
            steps += segment.steps
            results.extend(segment.results)
            self.fleet.counts.update(segment.counters)
            watch.segment(gather.last_index, segment.steps, len(segment.results), segment.counters)
            if segment.next_observations is None:
                raise ValueError(f"actor {gather.last_index} sent a segment without next_observations")
            if not segment.finite():
                self.nonfinite += 1
                continue
            self.replay.add_segment(segment.observations, segment.actions, segment.rewards, segment.dones,
                                    segment.truncated, segment.next_observations)
        return steps, results

    def _steps_to_an_update(self, steps: int) -> int:
        """Env steps still missing before an update is due, ``steps`` having arrived this iteration: to fill the
        buffer to ``start``, or to make up one whole update at ``ratio`` updates per env step (0: one is due)."""
        settings = self.replay_settings
        if len(self.replay) < settings.start:
            return settings.start - len(self.replay)
        missing = 1.0 - self.updates_owed - settings.ratio * steps
        return max(0, math.ceil(missing / settings.ratio)) if settings.ratio > 0 else 0

    def _updates_due(self, steps: int) -> int:
        """``ratio × steps`` updates, fractions carried over (so that updates ÷ env steps is ``ratio`` whatever the
        actors' speed); none while the buffer is below ``start``."""
        if len(self.replay) < self.replay_settings.start:
            return 0
        self.updates_owed += self.replay_settings.ratio * steps
        due = int(self.updates_owed)
        self.updates_owed -= due
        return due

    def _train(self, updates: int) -> dict[str, float]:
        """``updates`` gradient steps on batches drawn from the buffer (priorities renewed), the weights sent to the
        actors every ``train.replay.refresh`` of them; their mean statistics."""
        totals: dict[str, torch.Tensor] = {}
        counts: dict[str, int] = {}
        refresh = self.replay_settings.refresh
        for made in range(1, updates + 1):
            batch, slots, weights = self.replay.sample(self.replay_settings.batch)
            tensors = {name: torch.from_numpy(array).to(self.device) for name, array in batch.items()}
            errors, stats = self.replay_update.update(tensors, torch.from_numpy(weights).to(self.device))
            if self.replay.tree is not None:
                self.replay.update_priorities(slots, errors.cpu().numpy())
            for name, value in stats.items():       # some statistics are not every update's (SAC's policy delay)
                totals[name] = totals[name] + value if name in totals else value
                counts[name] = counts.get(name, 0) + 1
            if refresh and made % refresh == 0 and made < updates:     # the last one is the iteration's own
                self.publish_weights()
        return {name: float(total) / counts[name] for name, total in totals.items()}

    def step(self) -> dict[str, float]:
        """One iteration: store what arrived, update, broadcast weights (and ε). Returns its statistics."""
        started = time.monotonic()
        steps, results = self._receive()
        received = time.monotonic()
        updates = self._updates_due(steps)
        stats = self._train(updates) if updates else {}
        updated = time.monotonic()
        if updates:
            self._mark_first_update()
        self.advance(steps)
        if self.epsilon is not None:
            epsilon = self.epsilon.at(self.cost)
            self.fleet.call_all(lambda: self.fleet.everyone.broadcast("set_exploration", epsilon))
            stats["epsilon"] = epsilon
        if results:
            self.training = summarize(results)
        stats.update(self.fleet.statistics())
        stats.update({"updates": float(updates), "replay": float(len(self.replay)), "nonfinite": float(self.nonfinite),
                      "replaced": float(self.fleet.replaced), "fps/sampling": steps / max(1e-9, received - started),
                      "fps/learning": updates * self.replay_settings.batch / max(1e-9, updated - received),
                      "fps/overall": steps / max(1e-9, updated - started)})
        return stats

    # ---- the run loop's view ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Actors started (if not yet) and streaming segments while the loop runs."""
        if not self.fleet.started:
            self.start_actors()
        with self.fleet.gather.gathering("sample"):
            yield

    def opening_line(self) -> str:
        return f"{super().opening_line()}; {self.algorithm.name} from a replay of " \
               f"{self.replay_settings.capacity} transitions"

    def status(self, stats: Mapping[str, float]) -> dict[str, str]:
        fields = {"return": f"{self.training.get('return', float('nan')):.3g}", "replay": str(len(self.replay)),
                  "loss": f"{stats.get('loss', float('nan')):.3g}"}
        if "epsilon" in stats:
            fields["eps"] = f"{stats['epsilon']:.2f}"
        if self.evaluator.latest.get("episodes"):
            fields["eval"] = f"{self.evaluator.latest['fitness']:.3g}"
        return fields
