"""bench/chaos.py's ``hosts`` scenario: evolve.py and train.py on a Ray cluster of 3 hosts of their own (network
namespaces on a bridge, a Ray node in each: bench/hostlib; root only) while a worker host's link is cut or slowed and
whole worker hosts are SIGKILLed and started again. The drivers run on the head's host; the faults fall on the other
two. Judged as the other scenarios are (evolve.py's progress after every fault, no individual lost, every
checkpoint loads) and train.py's progress after the last fault."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from .scenarios import Scenario, checkpoints_load, last_row, population_result, python
from .schedule import Fault

CARTPOLE = ("-c", "mdp/gym.yml", "mdp/gym/cartpole.yml")


class OnHosts(Scenario):
    """3 hosts (the head 2 CPUs, two workers 3 CPUs each); evolve.py PBT of 4 (one actor a learner) and train.py
    with 2 actors, both driven from the head's host."""

    name = "hosts"
    CPUS = (2, 3, 3)

    def __init__(self, folder: Path, run_id: str, rng: Any, seconds: float) -> None:
        super().__init__(folder, run_id, rng, seconds)
        self.hosts: Any = None
        self.nodes: Any = None
        self.later: list[tuple[float, str, Callable[[], None]]] = []    # (when, what, action): mends, returns
        self.down: set[int] = set()                                      # worker hosts cut, slowed or killed now
        self.train_run = self.folder / "train-run"
        self.train_cost_at_fault = 0.0
        self.population = 4

    def start(self) -> None:
        import sys

        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from hostlib.netns import Hosts
        from hostlib.ray_nodes import RayNodes

        self.hosts = Hosts(3)
        self.hosts.__enter__()
        self.nodes = RayNodes(self.hosts, self.folder / "nodes", cpus=list(self.CPUS))
        self.nodes.start()
        self.checkpoint_interval = min(30.0, self.seconds / 10)
        inside = ["ip", "netns", "exec", self.hosts[0].namespace]
        cluster = (f"ray.address={self.nodes.address}", "ray.launch=ray")
        environment = self.nodes.environment()
        self.job("driver", inside + python(
            "evolve.py", *CARTPOLE, "ec/ea/pbt.yml", "ec/wrap/mdp.yml", "-m", f"root={self.run}", *cluster,
            f"ec.population={self.population}", "sample.actors=1", "train.lr=[0.0001,0.003]",
            "ec.stop=self.time >= 10**9", f"ec.checkpoint.interval={self.checkpoint_interval:g}"),
            **environment).start()
        self.job("train", inside + python(
            "train.py", *CARTPOLE, "-m", f"root={self.train_run}", *cluster, "sample.actors=2",
            "evaluator.beside=false", "evaluator.terminate=self.time >= 10**9",
            f"evaluator.checkpoint.interval={self.checkpoint_interval:g}"), **environment).start()

    def faults(self, seconds: float) -> list[Fault]:
        cut, slow, kill = self.scaled(120, 30), self.scaled(300, 60), self.scaled(600, 100)
        return [Fault("link cut", cut, self.cut),
                Fault("link slowed", slow, self.slow, first=slow * 0.75),
                Fault("host killed", kill, self.kill_host, first=kill * 0.5)]

    # ---- the faults ------------------------------------------------------------------------------------------
    def _worker(self) -> int | None:
        """A worker host no fault holds now (None: both are held)."""
        free = [index for index in (1, 2) if index not in self.down]
        return self.rng.choice(free) if free else None

    def _after(self, seconds: float, what: str, action: Callable[[], None]) -> None:
        self.later.append((time.monotonic() + seconds, what, action))

    def _held(self, index: int, seconds: float, what: str, undo: Callable[[], None]) -> None:
        """Host ``index`` is held by a fault for ``seconds``; then ``undo()``."""
        self.down.add(index)
        self._note_train()

        def release() -> None:
            undo()
            self.down.discard(index)

        self._after(seconds, what, release)

    def cut(self) -> dict[str, Any] | None:
        index = self._worker()
        if index is None:
            return None
        host, seconds = self.hosts[index], self.rng.uniform(2.0, 15.0)
        self.hosts.cut(host)
        self._held(index, seconds, "link mended", lambda: self.hosts.mend(host))
        return {"hit": True, "host": host.address, "seconds": round(seconds, 1)}

    def slow(self) -> dict[str, Any] | None:
        index = self._worker()
        if index is None:
            return None
        host = self.hosts[index]
        self.hosts.limit(host, 100.0)
        self._held(index, 30.0, "link restored", lambda: self.hosts.unlimit(host))
        return {"hit": True, "host": host.address, "mbit": 100, "seconds": 30}

    def kill_host(self) -> dict[str, Any] | None:
        index = self._worker()
        if index is None:
            return None
        host = self.hosts[index]
        killed = self.hosts.kill(host)
        self._held(index, self.scaled(60, 20), "host back", lambda: self.nodes.add(host, wait=False))
        return {"hit": True, "host": host.address, "processes": killed}

    def upkeep(self) -> None:
        now = time.monotonic()
        due = [entry for entry in self.later if entry[0] <= now]
        for entry in due:
            self.later.remove(entry)
            entry[2]()
            self.watch.event(entry[1])
        super().upkeep()

    # ---- the end ---------------------------------------------------------------------------------------------
    def _note_train(self) -> None:
        from lamarckian.record import read_status

        status = read_status(self.train_run)
        self.train_cost_at_fault = float(status["cost"]) if status else 0.0

    def result(self) -> dict[str, Any]:
        from lamarckian.record import read_status

        evolution = population_result(self.run, self.population, self.checks)
        status = read_status(self.train_run)
        trained = float(status["cost"]) if status else 0.0
        self.checks["train.py made progress after the last fault"] = trained > self.train_cost_at_fault
        self.checks["every train.py checkpoint loads"] = checkpoints_load(self.train_run / "checkpoints")
        row = last_row(self.train_run / "evaluations.csv")
        return {**evolution, "train_cost": trained, "train_fitness": row.get("fitness")}

    def close(self) -> None:
        """End the jobs, then every process of the hosts and the hosts themselves (cut or slowed links go too)."""
        super().close()
        if self.nodes is not None:
            self.nodes.close()
        if self.hosts is not None:
            self.hosts.close()
