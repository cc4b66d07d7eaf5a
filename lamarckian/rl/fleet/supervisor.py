"""The learner's actors as one supervised fleet: started (or the remote workers of ``rl.remote.server`` connected),
reached through one ``All`` and one ``Gather``, a dead actor replaced by a fresh one, the evaluation actor beside
them, everything ended at the close.

An actor runs as a child process of the learner (``ray.launch: processes``, or auto while Ray is not running), as a
Ray actor, or (``ray.local_mode``) as an object in the learner's process whose RPC server runs on a thread. The
learner says what a new actor is built from (:data:`ActorArguments`: the current weights, version and pools), so a
replacement starts where the fleet is.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any, Callable, Mapping, Protocol

import torch

from ... import rpc
from ...config.sections import SampleSettings
from ...record import Progress
from ...rpc import processes
from ...rpc.sockets import running_ray
from ...timeline import TIMELINE
from ..loop import lost_field
from ..segment import is_report
from . import ACTOR_MODULES, stall
from .actor import Actor
from .beside import BesideEvaluation

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0             # between looks for a replacement while the fleet has no actor
EVALUATION_ACTOR = 1_000_000     # the index (seed stream) of the evaluation actor, apart from the fleet's
GRACEFUL_CLOSE_SECONDS = 10.0    # a Ray actor's close at the end of a run (its launched games' SIGTERM grace, 5 s)

#: what a new actor of index ``i`` is built from: ``Actor(*arguments(i))``
ActorArguments = Callable[[int], tuple[Any, ...]]


class RemoteConnect(Protocol):
    """How the learner reaches the remote workers of ``rl.remote.server`` (:func:`lamarckian.remote.fleet.connect`):
    their ``All`` (``set_weights``, ``evaluate``...) and their ``Gather`` of segments; ``keep_fixed``: segments of
    fixed-weight (ONNX) workers are learned from too (off-policy learners)."""

    def __call__(self, config: Mapping[str, Any], model: torch.nn.Module, keep_fixed: bool) -> tuple[Any, Any]: ...


class ActorFleet:
    """``sample.actors`` actors behind one ``All`` (:attr:`everyone`) and one ``Gather`` (:attr:`gather`), or the
    remote workers' pair (:meth:`connect_workers`); the evaluation actor (:meth:`evaluation`).

    Args:
        arguments: what actor ``i`` is built from (the learner's current weights...).
        sample: ``sample`` (the number of actors, their CPUs).
        local: ``ray.local_mode`` (actors are objects in this process).
        launch: ``ray.launch`` (processes | ray | auto).
        rpc_settings: the ``rpc`` section the links use.
        connect_remote: reaches the remote workers where ``rl.remote.server`` (:attr:`remote`) is set.
    """

    def __init__(self, arguments: ActorArguments, sample: SampleSettings, local: bool, launch: str,
                 rpc_settings: rpc.RpcSettings, connect_remote: RemoteConnect | None = None) -> None:
        self.arguments, self.sample, self.local, self.launch = arguments, sample, local, launch
        self.rpc_settings, self.connect_remote = rpc_settings, connect_remote
        self.remote: str | None = None      # rl.remote.server: remote workers instead of actors of its own
        self.beside: BesideEvaluation | None = None     # the evaluation actor (started at the first evaluation)
        self.counts: collections.Counter[str] = collections.Counter()   # the segments' environment counters
        self.actors: list[Any] = []
        self._everyone: Any = None          # rpc.All, or the remote workers' (None until started)
        self._gather: Any = None            # rpc.Gather, or the remote workers'
        self.spawned = 0                    # actors made so far: the next one's seed stream
        self.replaced = 0                   # dead actors replaced
        self.replacements = rpc.Replacements(self.spawn, self._join, self.discard)   # started, not joined yet
        self.progress = Progress(False)     # replacement notices (the loop's display is on stderr too)
        self.watch = stall.StallWatch(self.progress.print)    # the actors while an iteration collects

    @property
    def started(self) -> bool:
        return self._everyone is not None

    @property
    def everyone(self) -> Any:
        """Every actor's ``All`` (:meth:`start` or :meth:`attach` made it)."""
        if self._everyone is None:
            raise RuntimeError("the actors are not started (call start_actors() first)")
        return self._everyone

    @property
    def gather(self) -> Any:
        """The ``Gather`` of the actors' segments."""
        if self._gather is None:
            raise RuntimeError("the actors are not started (call start_actors() first)")
        return self._gather

    def spawn(self, index: int | None = None) -> Any:
        """A new actor: ``index`` is its seed stream (None: the fleet's next)."""
        if index is None:
            index, self.spawned = self.spawned, self.spawned + 1
        arguments = self.arguments(index)
        if self.local:
            return Actor(*arguments, own_process=False)
        if self.launch == "processes" or (self.launch == "auto" and running_ray() is None):
            processes.warm_up(ACTOR_MODULES)
            name = "Evaluator" if index == EVALUATION_ACTOR else f"Actor{index}"
            return processes.spawn(Actor, *arguments, name=name)
        import ray

        cpus = 0 if index == EVALUATION_ACTOR else self.sample.num_cpus   # it plays now and then: no CPU of its own
        return ray.remote(num_cpus=cpus, max_restarts=0)(Actor).remote(*arguments)

    def start(self, segments_in_flight: int) -> None:
        """Start ``sample.actors`` actors and connect them; each may have ``segments_in_flight`` at once."""
        self.actors = [self.spawn() for _ in range(self.sample.actors)]
        self._everyone = rpc.connect_replacing(self.actors, lambda actors: rpc.All(actors, settings=self.rpc_settings),
                                               self.spawn, self.discard)
        self._gather = rpc.Gather(self._everyone, credits=segments_in_flight)
        # an actor answers between two sample() calls, each at most a report interval (a stuck environment never)
        self._gather.stop_timeout = self.rpc_settings.timeout + 2 * stall.report_interval(self.sample.stall)
        TIMELINE.mark("actors started and connected")
        hosts = collections.Counter(self._everyone.hosts())
        if len(hosts) > 1:                   # a cluster of several machines: say where the actors landed
            self.progress.print(f"actors on {len(hosts)} hosts: "
                                + ", ".join(f"{host} ({count})" for host, count in sorted(hosts.items())))

    def connect_workers(self, config: Mapping[str, Any], model: torch.nn.Module, keep_fixed: bool) -> None:
        """Reach the remote workers of :attr:`remote` instead of actors of its own (``keep_fixed``: their ONNX
        workers' segments are learned from too)."""
        if self.connect_remote is None:
            raise ValueError("rl.remote.server: this learner was built without a way to reach remote workers (train.py "
                             "gives it lamarckian.remote.fleet.connect)")
        self._everyone, self._gather = self.connect_remote(config, model, keep_fixed)

    def statistics(self) -> dict[str, float]:
        """The environments' counters (``env/...``: a game server's lost episodes...) and the remote workers'
        (``remote/...``)."""
        counts = {f"env/{name}": float(value) for name, value in self.counts.items()}
        return {**counts, **self.gather.statistics()} if self.remote is not None else counts

    def next_message(self, timeout: float | None) -> Any | None:
        """The next message of an actor to learn from (a segment, a bundle, a gradient); None when what came was
        handled here: an actor died (replaced, :meth:`replace`) or sent a progress report (:meth:`take_report`).
        TimeoutError after ``timeout`` seconds without any (None: wait for one)."""
        try:
            received = self.gather(timeout)
        except rpc.ActorDiedError as error:
            self.replace(error)
            return None
        if is_report(received):
            self.take_report(received)
            return None
        return received

    def take_report(self, message: Mapping[str, Any]) -> None:
        """An actor's progress report (the gathered message just received): its environments' counters join the
        fleet's (lost episodes reach the status line before the iteration ends), the watch learns where it stands,
        and a credit kept back while :attr:`gather` holds goes back (the segment still needs it)."""
        gather = self.gather
        self.watch.report(gather.last_index, message)
        counters = message.get("counters") or {}
        self.counts.update(counters)
        if any(name.startswith("lost_") for name in counters):
            self.watch.show(lost_field(self.statistics()))
        if gather.holding and gather.last_index is not None:
            gather.release(gather.last_index, 1)

    def evaluation(self) -> BesideEvaluation:
        """The evaluation actor beside the fleet (started now if there is none)."""
        if self.beside is None:
            self.beside = BesideEvaluation(lambda: self.spawn(EVALUATION_ACTOR), self.kill, self.rpc_settings)
        return self.beside

    def close_evaluation(self) -> None:
        """End the evaluation actor (the next evaluation starts another)."""
        if self.beside is not None:
            self.beside.close()
            self.beside = None

    def replace(self, error: rpc.ActorDiedError) -> None:
        """Swap a dead actor for a fresh one that starts from the current weights: a child process joins at once, a
        Ray actor when Ray has placed it (the fleet goes on with the others meanwhile, see :meth:`poll`)."""
        if error.index is None:           # no longer one of the fleet's: nothing to replace
            log.warning("actor died (%s) after it left the fleet", error.actor)
            return
        dead = self.actors.pop(error.index)
        self.gather.remove(dead)
        self.watch.forget(error.index)
        self.kill(dead, graceful=False)
        self.replacements.request()
        self.replaced += 1
        self.poll()
        waiting = f"; {len(self.replacements)} waiting for Ray to place them" if self.replacements else ""
        self.progress.print(f"actor died ({error.actor}); replaced it ({self.replaced} so far){waiting}")

    def poll(self) -> None:
        """Join the replacements that serve by now (a learner calls it while it waits for segments)."""
        if self.replacements.poll():
            self.progress.print(f"a replacement actor joined ({len(self.actors)} of {self.sample.actors} actors)")

    def check_stall(self, collected: int) -> None:
        """Between segments: join the replacements that serve, then let the stall watch say what the iteration
        waits for (``collected``: its env steps so far)."""
        self.poll()
        gather = self.gather
        self.watch.check(collected, [gather.in_flight(index) for index in range(len(self.actors))],
                         placing=len(self.replacements))

    def _join(self, handle: Any) -> None:
        """A replacement that serves joins the fleet (the Gather, and the actors in the same order)."""
        self.gather.add(handle)
        self.actors.append(handle)

    def call_all(self, action: Callable[[], Any]) -> Any:
        """Run ``action()`` (an All call or broadcast), replacing actors that die, until it succeeds; while every
        actor is lost and their replacements wait for Ray, it waits for one first."""
        while True:
            self._wait_for_an_actor()
            try:
                return action()
            except rpc.ActorDiedError as error:
                self.replace(error)

    def _wait_for_an_actor(self) -> None:
        """Until a replacement joins, when the fleet has no actor left (its host lost): said every ``sample.stall``
        seconds."""
        waited, told = time.monotonic(), time.monotonic()
        while not self.actors and self.replacements and self.remote is None:
            time.sleep(POLL_SECONDS)
            self.poll()
            if time.monotonic() - told >= self.sample.stall:
                told = time.monotonic()
                self.progress.print(f"no actor for {told - waited:.0f} s: {len(self.replacements)} replacement(s) "
                                    "wait for Ray to place them (they start when the cluster has room)")

    def discard(self, actor: Any) -> None:
        """End an actor that died while starting (whatever is left of it)."""
        self.kill(actor, graceful=False)

    def kill(self, actor: Any, graceful: bool = True) -> None:
        """End ``actor``: ``graceful`` lets it close its environments first (the end of a run), else at once (a
        dead or hung one)."""
        if self.local:
            actor.close()
        elif isinstance(actor, processes.ProcessActor) and graceful:
            actor.close()
        elif isinstance(actor, processes.ProcessActor):
            actor.kill()
        else:
            import ray

            if graceful:                 # its environments close first (launched games get SIGTERM, then SIGKILL)
                try:
                    ray.get(actor.close.remote(), timeout=GRACEFUL_CLOSE_SECONDS)
                except Exception as error:  # noqa: BLE001 - a dead or hung actor is killed all the same
                    log.warning("an actor did not close within %g s (%s): killed", GRACEFUL_CLOSE_SECONDS, error)
            ray.kill(actor, no_restart=True)

    def close(self) -> None:
        """End every actor and the evaluation actor (with remote workers: close the link to them)."""
        self.close_evaluation()
        self.replacements.close()
        if self.remote is not None and self._everyone is not None:
            self._everyone.close()
        if self._gather is not None:
            try:
                self._gather.close()
            except rpc.RPCError as error:
                log.warning("closing the actors: %s", error)
        for actor in self.actors:
            self.kill(actor)
        self.actors = []
        self._everyone = self._gather = None
