"""The Evaluator: periodic evaluation episodes, the ``evaluator.terminate`` test, records and checkpoints."""

from __future__ import annotations

import math
import time
from typing import Any, Mapping, Sequence

import numpy as np

from ..config import Expression
from ..config.sections import EvaluatorSettings
from ..rating.results import EpisodeResult


def summarize(results: Sequence[EpisodeResult]) -> dict[str, float]:
    """Means over episode results: ``fitness``, ``win`` (nan when not a game), each objective; ``episodes``;
    ``capped``, the share cut at ``evaluator.max_steps``, when there was one; ``lost``, the number of episodes the
    environment lost (a game server's faults), when there was one: they are left out of everything else."""
    lost = sum(r.lost for r in results)
    results = [r for r in results if not r.lost]
    if not results:
        return {"episodes": 0.0, "fitness": math.nan, "win": math.nan, **({"lost": float(lost)} if lost else {})}
    wins = [r.win for r in results if r.win is not None]
    summary = {"episodes": float(len(results)), "fitness": float(np.mean([r.fitness for r in results])),
               "win": float(np.mean(wins)) if wins else math.nan}
    if any(r.capped for r in results):              # episodes ended by evaluator.max_steps, not by the game
        summary["capped"] = float(np.mean([r.capped for r in results]))
    if lost:
        summary["lost"] = float(lost)
    for name in sorted({name for r in results for name in r.objectives}):
        summary[name] = float(np.mean([r.objectives[name] for r in results if name in r.objectives]))
    return summary


class Evaluator:
    """Decides when to evaluate and when to stop.

    Args:
        settings: the ``evaluator`` section (interval in seconds and in env steps, the share of the clock evaluations
            may take, episodes, opponent, terminate expression).
    """

    def __init__(self, settings: EvaluatorSettings) -> None:
        self.settings = settings
        self.interval = settings.interval
        self.interval_steps = settings.interval_steps
        self.share = settings.share
        self.episodes = settings.episodes
        self.steps = settings.steps
        self.planned = settings.episodes          # episodes of the evaluation begun last (see plan)
        self.opponent = settings.opponent
        self.terminate = Expression(settings.terminate) if settings.terminate else None
        self.last = -math.inf                     # monotonic time of the latest evaluation's start
        self.last_mark = -1                       # env steps // interval_steps at the latest evaluation's start
        self.took = math.nan                      # seconds from the latest finished evaluation's start to its result
        self.results: list[EpisodeResult] = []  # the latest evaluation's episode results
        self.history: list[dict[str, Any]] = []  # every evaluation of the run: time, cost, iteration, summary
        self.spent = 0.0                          # seconds the run's evaluations took (part of its time)
        self.latest: dict[str, float] = {"episodes": 0.0, "fitness": math.nan, "win": math.nan}

    def due(self, now: float | None = None, cost: float | None = None) -> bool:
        """An evaluation is due: ``evaluator.interval`` seconds since the latest one started, or sooner, once
        ``took / evaluator.share`` seconds passed (a cheap evaluation comes often: its games take at most that share
        of the clock), or (when set, and ``cost`` is given) a multiple of ``evaluator.interval_steps`` env steps was
        passed since (as stable-baselines3's evaluation callback: at 1,000, 2,000... env steps)."""
        if self.episodes <= 0:
            return False
        if self.interval_steps and cost is not None and cost // self.interval_steps > self.last_mark:
            return True
        gap = (now if now is not None else time.monotonic()) - self.last
        return gap >= self.interval or (self.share > 0 and gap >= self.took / self.share)

    def started(self, cost: float) -> None:
        """An evaluation starts now, at ``cost`` env steps (the intervals count from here)."""
        self.last = time.monotonic()
        self.last_mark = int(cost // self.interval_steps) if self.interval_steps else -1

    def plan(self, length: float) -> int:
        """The episodes of the next evaluation: ``episodes``, or with ``evaluator.steps`` as many as that budget holds
        (at least one) at the mean decisions per episode of the latest evaluation (the deterministic policy's), before
        the first one at ``length``, the training episodes' mean; while neither is known (nan: no episode ended yet,
        as in the first minute of a task of 1,000-step episodes), one. Kept as :attr:`planned`."""
        self.planned = self.episodes
        length = self.latest.get("length", length)
        if self.steps and self.episodes:
            self.planned = max(1, min(self.episodes, int(self.steps // length))) if length > 0 else 1
        return self.planned

    def shares(self, actors: int) -> list[int]:
        """:attr:`planned` episodes split over ``actors`` (the first ones play one more where it does not divide)."""
        return [self.planned // actors + (1 if i < self.planned % actors else 0) for i in range(actors)]

    def conclude(self, per_actor: Sequence[Sequence[dict[str, Any]]], shares: Sequence[int]) -> dict[str, float]:
        """Keep and return the summary of the actors' results (wire form; each actor's first ``share``); the seconds
        since the evaluation started are :attr:`took`."""
        self.took = time.monotonic() - self.last
        self.results = [EpisodeResult.from_wire(r) for share, actor_results in zip(shares, per_actor)
                        for r in actor_results[:share]]
        self.latest = summarize(self.results)
        return self.latest

    def evaluate(self, everyone: Any) -> dict[str, float]:
        """Split :attr:`planned` episodes over the actors of ``everyone`` (an All), play them, keep and return the
        summary."""
        self.last = time.monotonic()
        shares = self.shares(len(everyone))
        return self.conclude(everyone("evaluate", max(shares), self.opponent), shares)

    def should_stop(self, cost: int, iteration: int, elapsed: float, training: Mapping[str, float]) -> bool:
        """``evaluator.terminate`` with ``self`` = cost (env steps; also ``env_steps``), iteration, time (s), the
        latest evaluation's means (``fitness``, ``win``, objectives, also under ``result``) and ``training`` means."""
        if self.terminate is None:
            return False
        names = {**self.latest, "cost": cost, "env_steps": cost, "iteration": iteration, "time": elapsed,
                 "result": dict(self.latest), "training": dict(training)}
        return bool(self.terminate.evaluate({"self": names}))
