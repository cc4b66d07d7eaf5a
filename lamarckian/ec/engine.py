"""The evolution engine: P learner processes kept busy by ``Any.as_completed`` (no generation barrier), the
algorithm asked for the next individual whenever one is free and told each round's outcome; records and the
population checkpoint are written as reports arrive. A learner that dies is replaced and its individual trained
again from the population's stored state; a restarted run resumes from the newest population checkpoint.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any, Iterator, Mapping

from .. import rpc
from ..config import Expression
from ..config.sections import EvaluatorSettings, RaySettings, RunSettings, SampleSettings
from ..errors import NoProgress
from ..record import Checkpoints, Progress, StatusFile, format_number
from ..registry import EVOLUTION
from .base import EvolutionAlgorithm
from .individual import Individual
from .learners import LearnerProcesses
from .nsga_ii import NSGA2
from .records import Boards, Lineage, plot_lineage, save_weights, write_front
from .settings import EvolutionSettings, PopulationCheckpointSettings, learners_use_ray
from .space import SearchSpace

log = logging.getLogger(__name__)
NO_PROGRESS = f"{NoProgress.__module__}.{NoProgress.__qualname__}"   # its name in a learner's RemoteError
TICK = 1.0     # seconds without a finished round before the status line's clock is moved on


def build_algorithm(config: Mapping[str, Any], space: SearchSpace) -> EvolutionAlgorithm:
    """The algorithm named by ``ec.algorithm`` (:data:`~lamarckian.registry.EVOLUTION`) with its settings section,
    or, for your own class without one, ``ec.kwargs``."""
    ec = EvolutionSettings.from_config(config)
    cls = EVOLUTION.get_class(ec.algorithm, EvolutionAlgorithm)       # its constructor: see EvolutionAlgorithm
    arguments = (space, ec.population, list(ec.objectives), RunSettings.from_config(config).seed)
    if cls.SETTINGS is not None:
        if ec.kwargs:
            raise ValueError(f"ec.kwargs={ec.kwargs}: the arguments of your own ec.algorithm (module:ClassName); "
                             f"{ec.algorithm}'s settings are its own section ({cls.SETTINGS.KEY})")
        return cls(*arguments, cls.SETTINGS.from_config(config))
    try:
        return cls(*arguments, **ec.kwargs)
    except TypeError as error:
        raise ValueError(f"ec.kwargs={ec.kwargs}: {ec.algorithm} refuses them ({error})") from None


class Evolution:
    """Runs ``ec.algorithm`` over ``ec.population`` individuals with ``ec.learners`` learner processes.

    Args:
        config: the resolved configuration (loaded with ``ranges=True``).
        run: the run directory (None: nothing on disk).
    """

    def __init__(self, config: Mapping[str, Any], run: Path | None) -> None:
        self.space = SearchSpace.from_config(config)           # ranges out of place are refused first
        self.config = self.space.base
        self.settings = ec = EvolutionSettings.from_config(self.config)
        self.algorithm = build_algorithm(self.config, self.space)
        self.learner_count = ec.learner_count
        self.vectorized = ec.vectorized_for(self.config)  # the population trains as stacked groups of members
        self.group_size = 1                                # individuals a learner trains at once
        self.rounds: Any = None                            # one vectorized group in this process (no Ray)
        if self.vectorized:
            from .ondevice_rounds import OnDeviceRounds, check_vectorized

            self.learner_count = ec.learners or 1
            if ec.population % self.learner_count:
                raise ValueError(f"ec.learners={self.learner_count} must divide ec.population={ec.population}: "
                                 f"each learner trains an equal group of the vectorized population")
            self.group_size = ec.population // self.learner_count
            check_vectorized(self.config, self.group_size, [d.key for d in self.space])
            if self.learner_count == 1:
                self.rounds = OnDeviceRounds(self.config, ec.population, [d.key for d in self.space],
                                        run / "league" if run else None)
        self.stop_rule = Expression(ec.stop)
        self.folder = run
        self.processes = LearnerProcesses(self.config, self.learner_count, ec,
                                          RaySettings.from_config(config).local_mode, self.vectorized,
                                          self.group_size, [d.key for d in self.space], run)
        checkpoint = PopulationCheckpointSettings.from_config(self.config)
        self.checkpoints = Checkpoints(run / "population", checkpoint.keep) if run else None
        self.checkpoint_interval = checkpoint.interval
        self.lineage = Lineage(run / "lineage.jsonl") if run else None
        self.status_file = StatusFile(run)
        self.boards = Boards(None)
        self.progress = Progress(False)
        self.trained = self.cost = 0
        self.restarted: list[int] = []  # individuals whose learner died mid-round
        self.in_flight: dict[int, Individual] = {}
        self.rate = 0.0  # env steps per second over the last few reports
        self._clock_start = time.monotonic()
        self.algorithm.clock = self.clock

    def clock(self) -> float:
        """Seconds of evolution, resumed runs included."""
        return time.monotonic() - self._clock_start

    # ---- state ---------------------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm.state_dict(), "elapsed": self.clock(), "trained": self.trained,
                "cost": self.cost}

    def resume(self) -> Path | None:
        """Load the newest good population checkpoint, if any."""
        found = self.checkpoints.load_newest() if self.checkpoints is not None else None
        if found is None:
            return None
        path, state = found
        self.algorithm.load_state_dict(state["algorithm"])
        self.trained, self.cost = int(state["trained"]), int(state["cost"])
        self._clock_start = time.monotonic() - float(state["elapsed"])
        dropped = self.lineage.keep_first(self.trained) if self.lineage is not None else 0
        if dropped:
            log.warning("lineage.jsonl: %d rounds reported after %s are trained again (their rows dropped)",
                        dropped, path.name)
        return path

    def save(self) -> None:
        if self.checkpoints is None or self.folder is None:
            return
        self.checkpoints.save(self.trained, self.state_dict())
        members = self.algorithm.members()
        best = best_member(members)
        if best is not None:
            save_weights(self.folder / "best.pt", best, self.config)
        if isinstance(self.algorithm, NSGA2):
            write_front(self.folder, self.algorithm.front(), members, self.algorithm.objective_names, self.config)

    # ---- learners ------------------------------------------------------------------------------------------
    @property
    def in_process(self) -> bool:
        """The population trains in this process (one vectorized group): no Ray needed."""
        return self.rounds is not None

    @property
    def uses_ray(self) -> bool:
        """Whether the learners need Ray (:func:`~.settings.learners_use_ray`); else they are child processes."""
        return not self.in_process and learners_use_ray(self.config, self.vectorized)

    @property
    def replaced(self) -> int:
        """Learners that died and were replaced."""
        return self.processes.replaced

    def start(self) -> None:
        if not self.in_process:
            self.processes.start()

    def _replace(self, error: rpc.ActorDiedError, individuals: list[Individual]) -> None:
        """Drop a dead learner (another starts beside the evolution where the cluster has room); its individuals
        are trained again from their stored state, by whichever learner is free first."""
        host = self.processes.host_of(error.actor)
        self.processes.replace(error)
        for individual in individuals:
            self.algorithm.retry(individual)
            self.restarted.append(individual.id)
        names = ", ".join(str(individual.id) for individual in individuals)
        self.progress.print(f"[{self.clock():6.0f}s] learner died ({error.actor}, host {host}) while training "
                            f"individual{'s' * (len(individuals) > 1)} {names}; replaced it ({self.replaced} so far), "
                            f"training again from the population checkpoint"
                            + (f"; {self.processes.waiting()}" if self.processes.waiting() else ""))

    def close(self) -> None:
        self.processes.close()
        if self.in_process:
            self.rounds.close()
            self.rounds = None
        self.boards.close()
        self.progress.close()

    # ---- the loop ------------------------------------------------------------------------------------------
    def should_stop(self) -> bool:
        """``ec.stop`` over self.time (s), self.trained (rounds), self.cost (env steps), self.best (fitness)."""
        best = best_member(self.algorithm.members())
        names = {"time": self.clock(), "trained": self.trained, "cost": self.cost,
                 "best": best.fitness if best is not None else -math.inf}
        return bool(self.stop_rule.evaluate({"self": names}))

    def _calls(self) -> Iterator[tuple[Any, ...]]:
        """``("train", task)`` per individual, or for a vectorized population ``("train", [task, ...])`` per group
        of ``group_size`` individuals, until ``ec.stop`` holds."""
        while not self.should_stop():
            individuals = [self.algorithm.ask() for _ in range(self.group_size)]
            for individual in individuals:
                self.in_flight[individual.id] = individual
            tasks = [self._task(individual) for individual in individuals]
            if not self.vectorized:
                yield "train", tasks[0]
            elif self.settings.selfplay and not self.in_process:   # a league across the groups
                ids = {individual.id for individual in individuals}
                yield "train", tasks, {m.id: m.state["model"] for m in self.algorithm.members()
                                       if m.id not in ids and m.state is not None}
            else:
                yield "train", tasks

    def _outcomes(self) -> Iterator[tuple[list[Individual], Any] | None]:
        """``(individuals, outcome)`` as rounds finish: the outcome is the list of their reports, or the error that
        ended the round; None after a second without one (the clock and the learners' replacements go on)."""
        calls = self._calls()
        if self.in_process:
            outcomes: Iterator = ((call, self.rounds.train_round(*call[1:])) for call in calls)
        else:
            outcomes = self.processes.started.as_completed(calls, idle=TICK)
        for finished in outcomes:
            if finished is None:
                yield None
                continue
            call, outcome = finished
            tasks = call[1] if self.vectorized else [call[1]]
            reports = outcome if self.vectorized or isinstance(outcome, BaseException) else [outcome]
            yield [self.in_flight.pop(task["id"]) for task in tasks], reports

    def _task(self, individual: Individual) -> dict[str, Any]:
        task = individual.task()
        if self.settings.selfplay and not self.vectorized:   # a vectorized league: the group call carries them
            task["opponents"] = {m.id: m.state["model"] for m in self.algorithm.members()
                                 if m.id != individual.id and m.state is not None}
        return task

    def run(self) -> list[Individual]:
        """Evolve until ``ec.stop`` holds (rounds in flight then finish); the final population."""
        ec, evaluator = self.settings, EvaluatorSettings.from_config(self.config)
        if self.folder is not None and evaluator.tensorboard:
            self.boards = Boards(self.folder / "tensorboard")
        self.progress = Progress(evaluator.progress)
        self.processes.say = self.progress.print
        if self.processes.someone is None:
            self.start()
        workers = (f"one vectorized learner ({self.rounds.learner.member_envs} environments a member)"
                   if self.in_process else f"{self.learner_count} vectorized learners × {self.group_size} members"
                   + (" (on CPUs: ec.learner_gpus is 0)" if not self.settings.learner_gpus and _has_cuda() else "")
                   if self.vectorized
                   else f"{self.learner_count} learners × {SampleSettings.from_config(self.config).actors} actors")
        self.progress.print(f"evolving: {ec.algorithm}, population {ec.population}, {workers}, searching "
                            f"{', '.join(d.key for d in self.space) or 'nothing'}; run directory {self.folder}")
        self._last_save, self._window = time.monotonic(), (time.monotonic(), self.cost)
        self._write_status(force=True)                     # up (and resumed): before the first round reports
        for finished in self._outcomes():
            if not self.in_process:
                self.processes.poll()
            if finished is None:
                self._waiting()
                continue
            individuals, outcome = finished
            if isinstance(outcome, rpc.ActorDiedError):
                self._replace(outcome, individuals)
                continue
            if isinstance(outcome, rpc.RemoteError) and outcome.type_name == NO_PROGRESS:
                raise NoProgress(f"{outcome.actor}: {outcome.remote_message}")   # one line, exit 1 (not a traceback)
            if isinstance(outcome, BaseException):
                raise outcome
            told = list(zip(individuals, outcome))
            self.algorithm.tell_round(told)
            for individual, report in told:
                self._record(individual, report)
            self._reported()
        self.save()
        if self.lineage is not None and self.folder is not None:
            plot_lineage(self.lineage.read(), self.folder / "lineage.png")
        members = self.algorithm.members()
        best = best_member(members)
        self.progress.print(f"done after {self.trained} rounds, {format_number(self.cost)} env steps, "
                            f"{self.clock():.0f}s" + (f"; best: individual {best.id}, fitness {best.fitness:.3g}, "
                                                      f"{_format(best.hparams)}" if best else ""))
        return members

    def _reported(self) -> None:
        """After reports: the rate, the status line, a population checkpoint when due."""
        if time.monotonic() - self._window[0] >= 5.0:
            self.rate = (self.cost - self._window[1]) / (time.monotonic() - self._window[0])
            self._window = (time.monotonic(), self.cost)
        self._show()
        self._write_status()
        if time.monotonic() - self._last_save >= self.checkpoint_interval:
            self.save()
            self._last_save = time.monotonic()

    def _waiting(self) -> None:
        """A second without a finished round: the status line's clock goes on (:meth:`_show` says why fewer
        learners than asked for train, if so)."""
        self._show()
        self._write_status()

    def _write_status(self, force: bool = False) -> None:
        self.status_file.write({"trained": self.trained, "cost": self.cost, "replaced": self.replaced,
                                "elapsed": self.clock()}, force=force)

    def _record(self, individual: Individual, report: Mapping[str, Any]) -> None:
        """Account for a round the algorithm has been told: counters, lineage, boards, the report line."""
        self.trained += 1
        self.cost += int(report["cost"])
        row = {**individual.lineage_row(), "time": round(self.clock(), 3), "learner": int(report["learner"]),
               "node": str(report["node"]), "round_seconds": round(float(report["seconds"]), 3),
               "round_cost": int(report["cost"])}
        if self.lineage is not None:
            self.lineage.write(row)
        training = {f"train/{k}": float(v) for k, v in report["training"].items()}
        self.boards.individual(individual, self.algorithm.objective_names, training)
        self.boards.population_step(self.cost, self.algorithm.members(),
                                    {"trained": self.trained, "fps": self.rate, "replaced": self.replaced})
        self.progress.print(f"[{self.clock():6.0f}s] individual {individual.id} (parent {individual.parent}, "
                            f"{individual.operator}, age {individual.age}): fitness {individual.fitness:.3g}"
                            + (f" | {_format(individual.hparams)}" if individual.hparams else ""))

    def _show(self) -> None:
        best = best_member(self.algorithm.members())
        self.progress.update({"best": f"{best.fitness:.3g}" if best is not None else "-", "rounds": str(self.trained),
                              "steps": format_number(self.cost), "sps": format_number(self.rate),
                              "training": str(len(self.in_flight)), "time": f"{self.clock():.0f}s",
                              **({"waiting": waiting} if (waiting := self.processes.waiting()) else {})})


def _has_cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def best_member(members: list[Individual]) -> Individual | None:
    """The member with the highest fitness that has weights (an untrained child counts with its donor's)."""
    return max((m for m in members if m.scored and m.state is not None), key=lambda m: m.fitness, default=None)


def _format(hparams: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in hparams.items())
