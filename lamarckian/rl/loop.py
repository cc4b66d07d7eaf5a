"""The one run loop of every trainer: step, evaluate when due and at the end, stop test, checkpoints and
snapshots, the status line, TensorBoard (and Weights & Biases), Ctrl-C.

A trainer (:class:`Trainer`: the actor-fleet :class:`~lamarckian.rl.fleet.learner.Learner`, the in-process
:class:`~lamarckian.rl.ondevice.learner.OnDeviceLearner`, evolve.py's round learners through them) only says how to
take one step, how to evaluate and what its state is; :class:`TrainingLoop` does the rest, the same way for all.

A run directory holds ``checkpoints/`` (the newest ``evaluator.checkpoint.keep``, everything to resume),
``snapshots/`` (the weights at every checkpoint and at the start, all kept: ``evaluate.py --checkpoints`` rates a
whole run from them), ``evaluations.csv`` and ``tensorboard/``.

An evaluation judges the weights of the moment it began: its row's ``iteration`` and ``cost`` are theirs, ``time``
is the training seconds when its result came in (so "time to the threshold" is the moment the evaluation that
crossed it finished), ``cost_now`` the env steps then, and ``evaluating`` the seconds training waited for
evaluations so far (a trainer that evaluates beside training waits only for the last one).
"""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path
from typing import Any, Callable, ContextManager, Mapping

from ..config.sections import CheckpointSettings
from ..errors import NoProgress
from ..record import Checkpoints, CsvLog, Progress, Scalars, SinceLine, StatusFile, StepRate, format_number, plain
from ..record.checkpoint import CHECKPOINT_FORMAT, process_rng_state, restore_process_rng, upgrade_checkpoint
from ..record.wandb import WandbScalars
from ..timeline import TIMELINE
from .evaluator import Evaluator

SNAPSHOTS_KEPT = 10**6   # snapshots/ keeps every file


class Trainer:
    """What :class:`TrainingLoop` drives. A subclass sets ``config``, ``evaluator`` and the counters below, and
    implements :meth:`step`, :meth:`evaluate`, :meth:`state_dict`, :meth:`load_state_dict` and :meth:`close`."""

    config: Mapping[str, Any]
    evaluator: Evaluator
    iteration: int = 0            # updates so far
    cost: int = 0                 # env steps so far
    elapsed: float = 0.0          # seconds of training so far (over restarts)
    training: dict[str, float]    # running means of the training episodes (``self.training.<name>`` in rules)

    def step(self) -> dict[str, float]:
        """One iteration (collect, update, publish); its statistics (TensorBoard scalars)."""
        raise NotImplementedError

    def evaluate(self) -> dict[str, float]:
        """Deterministic games against fixed opponents now; their summary (``{}``: this trainer has none).
        Sets ``self.evaluator.latest`` for the stop rule."""
        raise NotImplementedError

    def begin_evaluation(self) -> None:
        """Start evaluating the current weights. Default: :meth:`evaluate` now (training waits); a trainer that
        evaluates beside training returns at once."""
        self._finished_evaluation: dict[str, float] | None = self.evaluate()

    def evaluation_result(self, wait: bool = False) -> dict[str, float] | None:
        """The summary of the evaluation begun last once it is over, then None until the next one begins (also
        while it plays; ``wait``: block until it is over)."""
        summary: dict[str, float] | None = getattr(self, "_finished_evaluation", None)
        self._finished_evaluation = None
        return summary

    def state_dict(self) -> dict[str, Any]:
        """Everything to resume (tensors, numbers, strings, containers): at least ``model``, ``iteration``,
        ``cost``, ``elapsed``."""
        raise NotImplementedError

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def model_state(self) -> dict[str, Any]:
        """The network's weights (a snapshot's ``model``): ``state_dict()["model"]``, which a subclass may give
        without building the rest."""
        return self.state_dict()["model"]

    def close(self) -> None:
        raise NotImplementedError

    def running(self) -> ContextManager[Any]:
        """Held while the loop runs (the actor fleet streams segments meanwhile)."""
        return contextlib.nullcontext()

    @property
    def main(self) -> bool:
        """This process evaluates and writes files and the status line (False: a data-parallel rank other than 0)."""
        return True

    def agree(self, decision: bool) -> bool:
        """A decision every process of a data-parallel run takes together (the main one's)."""
        return decision

    def attach_progress(self, progress: Progress) -> None:
        """The loop's status line, for a trainer that has something to show before its step ends (default: none)."""

    def opening_line(self) -> str:
        return f"training {type(self).__name__}"

    def status(self, stats: Mapping[str, float]) -> dict[str, str]:
        """Fields of the status line beyond the loop's own (iteration, steps, time)."""
        return {}

    def scalars(self, stats: Mapping[str, float]) -> dict[str, float]:
        """TensorBoard scalars of one iteration (default: ``stats`` and ``train/<training mean>``)."""
        return {**{f"train/{k}": v for k, v in self.training.items()}, **stats}

    def evaluation_line(self, summary: Mapping[str, float]) -> str:
        """The evaluation's summary in words, for the line printed with each evaluation."""
        line = f"fitness {summary.get('fitness', math.nan):.3g} over {summary.get('episodes', 0):.0f} episodes"
        if summary.get("capped"):
            line += f" ({summary['capped']:.0%} cut at evaluator.max_steps)"
        if summary.get("lost"):
            line += f" ({summary['lost']:.0f} more lost by the environment, left out)"
        return line


StopRule = Callable[[Trainer], bool]
EVALUATION_FIELDS = ("eval", "win")   # the status line's fields of the previous evaluation (not in a new one's line)


def lost_field(stats: Mapping[str, float]) -> dict[str, str]:
    """``lost`` for the status line where the environments lost episodes (a game server's faults, counted over
    the run by cause: ``env/lost_<cause>``): ``{"lost": "512: disconnected 500, timeout 12"}``; else nothing."""
    causes = {key[len("env/lost_"):]: value for key, value in stats.items() if key.startswith("env/lost_") and value}
    if not causes:
        return {}
    ranked = sorted(causes.items(), key=lambda item: -item[1])
    return {"lost": f"{sum(causes.values()):.0f}: " + ", ".join(f"{cause} {count:.0f}" for cause, count in ranked)}


class TrainingLoop:
    """Runs a :class:`Trainer` to its stop rule, keeping the run directory.

    Args:
        trainer: what to train.
        root: the run directory (None: nothing on disk).
        announce: print the opening and closing lines (evolve.py's rounds do not: the engine reports them).
    """

    def __init__(self, trainer: Trainer, root: Path | None = None, *, announce: bool = True) -> None:
        self.trainer = trainer
        self.root = root
        self.announce = announce
        self.settings = settings = trainer.evaluator.settings
        checkpoint = CheckpointSettings.from_config(trainer.config)
        self.checkpoints = Checkpoints(root / "checkpoints", checkpoint.keep) if root is not None else None
        self.snapshots = Checkpoints(root / "snapshots", SNAPSHOTS_KEPT) if root is not None else None
        self.evaluations = CsvLog(root / "evaluations.csv") if root is not None else None
        self.checkpoint_interval = checkpoint.interval
        self.writes = trainer.main                   # a data-parallel rank other than 0 only reads (resume)
        self.status_file = StatusFile(root if self.writes else None)
        self.wandb = WandbScalars(settings.wandb if self.writes else None, root, trainer.config)
        self.progress = Progress(False)
        self.since_line = SinceLine(None)            # the status line's updates since its last permanent line
        self.clock = time.monotonic()                # training time 0 (over restarts: minus the time before)
        self.judging: tuple[int, int] | None = None  # (iteration, env steps) of the weights being evaluated
        self.judged: int | None = None               # the iteration of the weights evaluated last
        self.decided: dict[str, Any] | None = None   # the newest evaluation's row when the stop rule held
        self.rate = StepRate()                       # the status line's env steps per second

    # ---- checkpoints ---------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """One checkpoint, the same format for every trainer (``format`` = :data:`CHECKPOINT_FORMAT`): the
        trainer's state, its running training means, the evaluation history, the process's RNG states, the
        config."""
        trainer = self.trainer
        return {**trainer.state_dict(), "format": CHECKPOINT_FORMAT, "trainer": type(trainer).__name__,
                "training": dict(trainer.training), "evaluation": dict(trainer.evaluator.latest),
                "evaluations": [dict(row) for row in trainer.evaluator.history],
                "evaluating": trainer.evaluator.spent, "rng": process_rng_state(),
                "config": plain(trainer.config)}

    def save(self) -> Path | None:
        """A checkpoint and a snapshot of the weights; None when the run keeps nothing on disk (or this process
        does not write)."""
        if self.checkpoints is None or not self.writes:
            return None
        self._snapshot()
        return self.checkpoints.save(self.trainer.iteration, self.state_dict())

    def _snapshot(self) -> None:
        trainer = self.trainer
        assert self.snapshots is not None        # beside self.checkpoints
        self.snapshots.save(trainer.iteration, {"format": CHECKPOINT_FORMAT, "model": trainer.model_state(),
                                                "iteration": trainer.iteration, "cost": trainer.cost,
                                                "elapsed": trainer.elapsed})

    def resume(self) -> Path | None:
        """Load the newest good checkpoint of the run directory (any format this project wrote), if any."""
        found = self.checkpoints.load_newest() if self.checkpoints is not None else None
        if found is None:
            return None
        path, state = found
        self.load_state_dict(upgrade_checkpoint(state, path))
        return path

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a checkpoint (already upgraded): the trainer, its running means, evaluation history, RNGs."""
        trainer = self.trainer
        trainer.load_state_dict(state)
        trainer.training = {k: float(v) for k, v in state["training"].items()}
        trainer.evaluator.latest = {k: float(v) for k, v in state["evaluation"].items()} or trainer.evaluator.latest
        trainer.evaluator.history = [dict(row) for row in state["evaluations"]]
        trainer.evaluator.spent = float(state.get("evaluating", 0.0))      # older checkpoints did not count it
        if state["rng"] is not None:
            restore_process_rng(state["rng"])

    # ---- the loop ------------------------------------------------------------------------------------------
    def run(self, stop: StopRule | None = None) -> dict[str, float]:
        """Train until ``stop(trainer)`` holds (default: ``evaluator.terminate``); an evaluation when due and one
        at the end, a checkpoint every ``evaluator.checkpoint.interval`` seconds and at the end (Ctrl-C: one
        checkpoint, then KeyboardInterrupt goes on). The summary of the final weights' evaluation; the one the stop
        rule acted on (an evaluation beside training judges earlier weights) is :attr:`decided`."""
        trainer, settings = self.trainer, self.settings
        writes = self.writes
        scalars = Scalars(self.root / "tensorboard" if self.root is not None and settings.tensorboard and writes
                          else None)
        wandb = self.wandb
        wandb.open()
        self.progress = Progress(settings.progress and writes)
        self.since_line = SinceLine(self.progress, {"iter": trainer.iteration})
        trainer.attach_progress(self.progress)
        announce = self.announce and writes
        if announce:
            self.progress.print(f"{trainer.opening_line()}, run directory {self.root}")
        if self.snapshots is not None and writes and not self.snapshots.paths():
            self._snapshot()                                  # the initial policy opens the run's rating curve
        rule = "the stopper" if stop is not None else (trainer.evaluator.terminate.source
                                                       if trainer.evaluator.terminate else "no rule")
        try:
            with trainer.running():                           # actors start before the clock does
                self._iterate(stop, scalars, wandb)
        except KeyboardInterrupt:
            self.save()
            if announce:
                self.progress.print("interrupted; checkpoint saved" if self.root is not None else "interrupted")
            raise
        except NoProgress:
            self.save()                                       # nothing the run learned before is lost
            raise
        finally:
            scalars.close()
            wandb.close()
            self.progress.close()
        self.save()
        latest = trainer.evaluator.latest
        if not announce:
            return latest
        line = (f"done: {rule} holds after {trainer.iteration} iterations, {format_number(trainer.cost)} env steps, "
                f"{trainer.elapsed:.0f}s")
        decided = self.decided
        if decided is not None and decided.get("iteration") != self.judged:    # it held on earlier weights
            line += (f" (on the eval of iter {decided['iteration']} @ {format_number(decided['cost'])} steps: "
                     f"{trainer.evaluation_line(decided)})")
            if latest.get("episodes"):
                line += f"; the final weights: {trainer.evaluation_line(latest)}"
        elif latest.get("episodes"):
            line += f"; {trainer.evaluation_line(latest)}"
        self.progress.print(line)
        return latest

    def _iterate(self, stop: StopRule | None, scalars: Scalars, wandb: WandbScalars) -> None:
        """Steps until the stop rule holds: scalars and the status line every step, evaluations begun when due
        and recorded when over, checkpoints when due, an evaluation of the final weights."""
        trainer = self.trainer
        self.clock = time.monotonic() - trainer.elapsed
        last_checkpoint = time.monotonic()
        self.rate = StepRate(time.monotonic(), trainer.cost)
        while True:
            stats = trainer.step()
            trainer.elapsed = time.monotonic() - self.clock
            iteration_scalars = {**trainer.scalars(stats), **self._time_scalars()}
            scalars.write(trainer.cost, iteration_scalars)
            wandb.write(trainer.cost, iteration_scalars)
            fields = self._fields(stats)
            self.progress.update(fields)
            self.status_file.write({"iteration": trainer.iteration, "cost": trainer.cost, "elapsed": trainer.elapsed})
            if self.writes:
                self._harvest(fields, scalars, wandb)
                if self.judging is None and trainer.evaluator.due(cost=trainer.cost):
                    self._begin(fields)
                    self._harvest(fields, scalars, wandb)         # a trainer that evaluates now is done already
            if trainer.agree(self._should_stop(stop)):
                TIMELINE.mark("stop rule holds")
                self.decided = dict(trainer.evaluator.history[-1]) if trainer.evaluator.history else None
                if self.writes and trainer.evaluator.episodes > 0:
                    self._harvest(fields, scalars, wandb, wait=True)
                    if self.judged != trainer.iteration:          # every run ends with its final weights evaluated
                        self._begin(fields)
                        self._harvest(fields, scalars, wandb, wait=True)
                return
            if time.monotonic() - last_checkpoint >= self.checkpoint_interval:
                self.save()
                last_checkpoint = time.monotonic()

    def _time_scalars(self) -> dict[str, float]:
        """What evaluation has cost training so far: seconds waited, and their share of the training clock."""
        trainer = self.trainer
        spent = trainer.evaluator.spent
        return {"time/evaluation_wait": spent, "time/evaluation_share": spent / max(trainer.elapsed, 1e-9)}

    def _should_stop(self, stop: StopRule | None) -> bool:
        trainer = self.trainer
        if stop is not None:
            return bool(stop(trainer))
        return trainer.evaluator.should_stop(trainer.cost, trainer.iteration, trainer.elapsed, trainer.training)

    def _fields(self, stats: Mapping[str, float]) -> dict[str, str]:
        trainer = self.trainer
        updates, = self.since_line.grown({"iter": trainer.iteration})
        fields = {"iter": f"{trainer.iteration} (+{updates:.0f})", "steps": format_number(trainer.cost),
                  "sps": self.rate.text(time.monotonic(), trainer.cost), **trainer.status(stats), **lost_field(stats),
                  "time": f"{trainer.elapsed:.0f}s"}
        return fields

    def _begin(self, fields: Mapping[str, str]) -> None:
        """Begin evaluating the current weights (the status line says so while training waits for it)."""
        trainer = self.trainer
        planned = trainer.evaluator.plan(trainer.training.get("length", math.nan))
        self.progress.update({**fields, "evaluating": f"{planned} episodes…"})
        started = time.monotonic()
        trainer.evaluator.started(trainer.cost)      # the intervals run from one evaluation's start to the next
        self.judging = (trainer.iteration, trainer.cost)
        trainer.begin_evaluation()
        self._waited(started)

    def _waited(self, since: float) -> None:
        trainer = self.trainer
        trainer.evaluator.spent += time.monotonic() - since
        trainer.elapsed = time.monotonic() - self.clock

    def _harvest(self, fields: Mapping[str, str], scalars: Scalars, wandb: WandbScalars, wait: bool = False) -> None:
        """Record the evaluation begun last if it is over (``wait``: wait for it): its row, scalars and line, each
        naming the weights it judged."""
        if self.judging is None:
            return
        trainer = self.trainer
        started = time.monotonic()
        summary = trainer.evaluation_result(wait)
        if wait:
            self._waited(started)
        if summary is None:
            return
        (iteration, cost), self.judging = self.judging, None
        self.judged = iteration
        updates, = self.since_line.grown({"iter": trainer.iteration})   # a heartbeat line may have come since
        fields = {**fields, "iter": f"{trainer.iteration} (+{updates:.0f})"}
        line = " | ".join(f"{k} {v}" for k, v in fields.items() if not (summary and k in EVALUATION_FIELDS))
        if not summary:
            self.progress.print(line)
            return
        row = {"time": round(trainer.elapsed, 3), "evaluating": round(trainer.evaluator.spent, 3), "cost": cost,
               "iteration": iteration, "cost_now": trainer.cost, **summary}
        trainer.evaluator.history.append(row)
        scalars.write(cost, {f"eval/{k}": v for k, v in summary.items()})
        wandb.write(cost, {f"eval/{k}": v for k, v in summary.items()})
        if self.evaluations is not None:
            self.evaluations.write(row)
        TIMELINE.mark("first evaluation")
        self.progress.print(f"{line} | eval of iter {iteration} @ {format_number(cost)} steps: "
                            f"{trainer.evaluation_line(summary)}")
