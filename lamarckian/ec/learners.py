"""evolve.py's learner processes as one supervised set: started (child processes of evolve.py on one machine, Ray
actors where Ray is needed or running, objects of this process with ``--debug``), reached through one ``Any``, a
dead one replaced by a fresh one, all ended at the close."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Mapping

from .. import rpc
from ..config.sections import RaySettings
from ..rpc import processes
from ..rpc.sockets import running_ray
from .settings import LEARNER_MODULES, EvolutionSettings
from .worker import PopulationLearner

log = logging.getLogger(__name__)


class LearnerProcesses:
    """``count`` learners: each a :class:`PopulationLearner`, or for a vectorized population a
    :class:`~.vec_group.VecGroupLearner` of ``group_size`` members.

    Args:
        config: the base configuration (every learner's).
        count: the learners (``ec.learners``).
        settings: ``ec`` (each learner's CPUs and GPUs).
        local: ``ray.local_mode`` (learners are objects of this process).
        vectorized: the population trains as stacked groups of members.
        group_size: members a vectorized learner trains at once.
        searched: the searched keys (a vectorized learner checks them).
        folder: the run directory (a vectorized learner's league tables go under it; None: nothing on disk).
    """

    def __init__(self, config: Mapping[str, Any], count: int, settings: EvolutionSettings, local: bool,
                 vectorized: bool, group_size: int, searched: list[str], folder: Path | None) -> None:
        self.config, self.count, self.settings, self.local = config, count, settings, local
        self.vectorized, self.group_size, self.searched, self.folder = vectorized, group_size, searched, folder
        self.learners: list[Any] = []
        self.someone: rpc.Any | None = None
        self.spawned = 0                   # learners made so far: the next one's index
        self.replaced = 0                  # dead learners replaced

    def spawn(self) -> Any:
        """A new learner process."""
        index = self.spawned
        self.spawned += 1
        if self.vectorized:
            from .vec_group import VecGroupLearner

            league = str(self.folder / "league" / f"learner-{index}") if self.folder else None
            kind: Any = VecGroupLearner
            arguments: tuple = (dict(self.config), self.group_size, self.searched, index, league)
        else:
            kind, arguments = PopulationLearner, (dict(self.config), index)
        if self.local:
            return kind(*arguments, own_process=False)
        launch = RaySettings.from_config(self.config).launch
        if launch == "processes" or (launch == "auto" and running_ray() is None):
            processes.warm_up(LEARNER_MODULES)
            return processes.spawn(kind, *arguments, name=f"Learner{index}")
        import ray

        return ray.remote(num_cpus=self.settings.learner_cpus, num_gpus=self.settings.learner_gpus,
                          max_restarts=0)(kind).remote(*arguments)

    def start(self) -> None:
        """Start the learners and connect them."""
        settings = rpc.RpcSettings.from_config(self.config)
        self.learners = [self.spawn() for _ in range(self.count)]
        self.someone = rpc.connect_replacing(self.learners, lambda learners: rpc.Any(learners, settings=settings),
                                             self.spawn, self.kill)

    @property
    def started(self) -> rpc.Any:
        """The learners' ``Any`` (:meth:`start` made it)."""
        if self.someone is None:
            raise RuntimeError("the learners are not started (call start() first)")
        return self.someone

    def replace(self, error: rpc.ActorDiedError) -> None:
        """Swap a dead learner for a new one."""
        someone = self.started
        dead = someone.handle(error.actor)
        someone.remove(error.actor)
        self.kill(dead)
        replacement = rpc.join_new(self.spawn, someone.add, self.kill)
        self.learners = [replacement if learner is dead else learner for learner in self.learners]
        self.replaced += 1

    def kill(self, learner: Any) -> None:
        """End ``learner`` at once."""
        if self.local:
            learner.close()
            return
        if isinstance(learner, processes.ProcessActor):
            learner.kill()
            return
        import ray

        try:
            ray.kill(learner, no_restart=True)
        except Exception as error:  # noqa: BLE001 - already gone
            log.debug("killing learner: %s", error)

    def close(self) -> None:
        """End every learner (a learner process closes its actors first)."""
        if self.someone is not None:
            self.someone.close()
            self.someone = None
        for learner in self.learners:
            if isinstance(learner, processes.ProcessActor):
                learner.close()
            else:
                self.kill(learner)
        self.learners = []
