"""evolve.py's learner processes as one supervised set: started (child processes of evolve.py on one machine, Ray
actors where Ray is needed or running, objects of this process with ``--debug``), reached through one ``Any``, a
dead one replaced by a fresh one, all ended at the close.

On a Ray cluster the set is sized to the cluster: as many learners as its CPUs and GPUs hold (each with its
actors), at most ``ec.learners``; the population trains in turns on those. A learner lost with its host is replaced
beside the running evolution (the others go on), the replacement waits in Ray's queue while the cluster lacks room,
and a host that joins or comes back makes room for more: :meth:`poll` says so in one line each.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable, Mapping

from .. import rpc
from ..config.sections import RaySettings, SampleSettings
from ..rpc import processes
from ..rpc.sockets import running_ray
from .settings import LEARNER_MODULES, EvolutionSettings
from .worker import PopulationLearner

log = logging.getLogger(__name__)

LOOK_EVERY = 5.0       # seconds between looks at a Ray cluster's nodes


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
        self.say: Callable[[str], None] = log.warning     # the console (the engine gives its status line's)
        self.replacements = rpc.Replacements(self.spawn, self._join, self.kill)
        self.hosts: set[str] | None = None  # the Ray nodes alive at the last look (None: not looked, or no Ray)
        self._looked = 0.0                 # when the nodes were last looked at (monotonic s)

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
        if not self.on_ray:
            processes.warm_up(LEARNER_MODULES)
            return processes.spawn(kind, *arguments, name=f"Learner{index}")
        import ray

        return ray.remote(num_cpus=self.settings.learner_cpus, num_gpus=self.settings.learner_gpus,
                          max_restarts=0)(kind).remote(*arguments)

    @property
    def on_ray(self) -> bool:
        """The learners are Ray actors (their room is the cluster's)."""
        if self.local:
            return False
        launch = RaySettings.from_config(self.config).launch
        return not (launch == "processes" or (launch == "auto" and running_ray() is None))

    def need(self) -> dict[str, float]:
        """What one learner takes of a Ray cluster: its own CPUs and GPUs, and its actors' CPUs."""
        sample = SampleSettings.from_config(self.config)
        actors = 0.0 if self.vectorized else sample.actors * sample.num_cpus
        return {"CPU": self.settings.learner_cpus + actors, "GPU": self.settings.learner_gpus}

    def room(self) -> int:
        """Learners that train at once: ``count``, or on a Ray cluster as many as its resources hold (one at
        least: Ray queues it until the cluster has room)."""
        if not self.on_ray:
            return self.count
        import ray

        return max(1, min(self.count, fitting(ray.cluster_resources(), self.need())))

    def start(self) -> None:
        """Start the learners (as many as there is room for) and connect them."""
        settings = rpc.RpcSettings.from_config(self.config)
        room = self.room()
        if room < self.count:
            self.say(f"the cluster holds {room} of {self.count} learners at once ({self._sizes()}): the population "
                     f"trains in turns on {room}; more start when hosts join")
        self.learners = [self.spawn() for _ in range(room)]
        self.someone = rpc.connect_replacing(self.learners, lambda learners: rpc.Any(learners, settings=settings),
                                             self.spawn, self.kill)
        self._look()

    @property
    def started(self) -> rpc.Any:
        """The learners' ``Any`` (:meth:`start` made it)."""
        if self.someone is None:
            raise RuntimeError("the learners are not started (call start() first)")
        return self.someone

    def host_of(self, actor: Any) -> str:
        """The host a learner (by name, as in :class:`ActorDiedError`) served at."""
        someone = self.started
        try:
            return someone.hosts()[someone.actors.index(someone.handle(actor))]
        except ValueError:
            return "?"

    def replace(self, error: rpc.ActorDiedError) -> None:
        """Drop a dead learner and start another beside the running evolution if the cluster still has room for
        it (:meth:`poll` joins it)."""
        someone = self.started
        dead = someone.handle(error.actor)
        someone.remove(error.actor)
        self.kill(dead)
        self.learners = [learner for learner in self.learners if learner is not dead]
        self.replaced += 1
        self.replacements.request()
        self.poll()

    def poll(self) -> None:
        """Join the replacements that serve, look at the cluster's hosts now and then (a lost or joined host in one
        line each), and start learners where the cluster has more room than learners."""
        self.replacements.poll()
        if not self.on_ray or time.monotonic() - self._looked < LOOK_EVERY:
            return
        before = self.hosts
        self._look()
        if before is None or self.hosts is None or before == self.hosts:
            return
        room = self.room()
        for host in sorted(before - self.hosts):
            self.say(f"host {host} lost (Ray marked its node dead): the cluster holds {room} of {self.count} learners "
                     f"now ({self._sizes()})")
        for host in sorted(self.hosts - before):
            self.say(f"host {host} joined: the cluster holds {room} of {self.count} learners ({self._sizes()})")
        for _ in range(room - len(self.learners) - len(self.replacements)):
            self.replacements.request()
        self.replacements.poll()

    def waiting(self) -> str | None:
        """Why fewer learners than ``ec.learners`` train, if so (the status line's)."""
        if not self.replacements:
            return None
        waiting = len(self.replacements)
        return (f"{len(self.learners)} of {self.count} learners train; {waiting} more wait"
                f"{'s' * (waiting == 1)} for Ray to place {'it' if waiting == 1 else 'them'} "
                f"({self.replacements.waited():.0f} s" + (f"; {self._sizes()})" if self.on_ray else ")"))

    def _join(self, learner: Any) -> None:
        self.started.add(learner)
        self.learners.append(learner)

    def _look(self) -> None:
        """Note the Ray nodes alive now."""
        self._looked = time.monotonic()
        if self.on_ray:
            import ray

            self.hosts = {node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]}

    def _sizes(self) -> str:
        """The cluster's CPUs (and GPUs) against a learner's, for the console."""
        import ray

        total, need = ray.cluster_resources(), self.need()
        parts = [f"{total.get(kind, 0.0):g} {kind}s, a learner needs {amount:g}" for kind, amount in need.items()
                 if amount > 0]
        return "; ".join(parts) + (": ec.learner_cpus + sample.actors × sample.num_cpus" if parts else "")

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
        self.replacements.close()
        if self.someone is not None:
            self.someone.close()
            self.someone = None
        for learner in self.learners:
            if isinstance(learner, processes.ProcessActor):
                learner.close()
            else:
                self.kill(learner)
        self.learners = []


def fitting(resources: Mapping[str, float], need: Mapping[str, float]) -> int:
    """How many of ``need`` (amounts per kind) ``resources`` hold (a large number when nothing is needed)."""
    counts = [int(resources.get(kind, 0.0) / amount + 1e-9) for kind, amount in need.items() if amount > 0]
    return min(counts, default=1 << 30)
