"""The jobs faults fall on (bench/chaos.py's scenarios): what runs, which faults hit it and how often, how it is
kept going (a killed driver or relay is restarted as the same command), and what it produced at the end."""

from __future__ import annotations

import csv
import json
import os
import random
import re
import sys
import time
from pathlib import Path
from typing import Any, Callable

from . import faults, procs
from .job import Job
from .schedule import Fault, Watch

REPOSITORY = Path(__file__).resolve().parents[2]
SOAK_SECONDS = 1800.0        # the intervals below are a 30-minute soak's; shorter runs scale them down
RESUMED = re.compile(r"resuming from \S+ \((?:iteration \d+|\d+ rounds), (\d+) env steps\)")
DISK_FULL = "disk is full"


def python(*arguments: str) -> list[str]:
    return [sys.executable, *arguments]


def last_line(path: Path) -> str:
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def checkpoints_load(folder: Path) -> bool:
    """Every checkpoint file in ``folder`` loads (no truncated file), and there is at least one."""
    from lamarckian.record import Checkpoints

    paths = Checkpoints(folder).paths()
    if not paths:
        return False
    import torch

    for path in paths:
        try:
            torch.load(path, map_location="cpu", weights_only=True)
        except Exception:  # noqa: BLE001 - any unreadable checkpoint fails the check
            return False
    return True


def last_row(path: Path) -> dict[str, str]:
    """The last complete row of an evaluations.csv (an empty dict if none)."""
    if not path.exists():
        return {}
    with open(path, newline="") as stream:
        rows = list(csv.DictReader(stream))
    return rows[-1] if rows else {}


class Scenario:
    """One job (or several: a relay, its workers, a trainer) with its faults.

    Args:
        folder: this scenario's folder (run directory, logs).
        run_id: the chaos run's id (the processes' marker).
        rng: picks the faults' targets.
        seconds: how long faults fall.
    """

    name = ""

    def __init__(self, folder: Path, run_id: str, rng: random.Random, seconds: float) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.run_id, self.rng, self.seconds = run_id, rng, seconds
        self.run = self.folder / "run"
        self.jobs: dict[str, Job] = {}
        self.to_restart: dict[str, float] = {}       # job name -> when to start it again
        self.restarts: dict[str, int] = {}
        self.unexpected_exits: list[str] = []
        self.resumes: list[tuple[float, int]] = []   # each driver kill: env steps last reported, the log's size
        self.checks: dict[str, bool] = {}
        self.watch: Watch | None = None
        self.checkpoint_interval = 60.0              # seconds of work a driver restart may roll back

    # ---- what the harness asks ---------------------------------------------------------------------------
    def start(self) -> None:
        raise NotImplementedError

    def faults(self, seconds: float) -> list[Fault]:
        raise NotImplementedError

    def result(self) -> dict[str, Any]:
        """The run's own result (to set beside the run without faults)."""
        raise NotImplementedError

    def status(self) -> dict[str, Any] | None:
        from lamarckian.record import read_status

        return read_status(self.run)

    def own_pids(self) -> list[int]:
        return [job.pid for job in self.jobs.values() if job.pid is not None]

    def scaled(self, every: float, shortest: float) -> float:
        """A soak interval for this run's length: ``every`` × seconds / 30 min, no shorter than ``shortest``."""
        return max(shortest, every * min(1.0, self.seconds / SOAK_SECONDS))

    # ---- keeping it going ----------------------------------------------------------------------------------
    def job(self, name: str, command: list[str], **environment: str) -> Job:
        self.jobs[name] = Job(name, command, self.folder / f"{name}.log", self.run_id, REPOSITORY, environment)
        return self.jobs[name]

    def kill_job(self, name: str, restart_after: float = 0.0) -> dict[str, Any] | None:
        """SIGKILL job ``name``'s main process; it is started again after ``restart_after`` seconds."""
        job = self.jobs[name]
        if not job.running():
            return None
        pid = job.pid
        if name == "driver":
            status = self.status()
            self.resumes.append((float(status["cost"]) if status else 0.0, job.log.stat().st_size))
        job.kill()
        self.to_restart[name] = time.monotonic() + restart_after
        return {"pid": pid, "name": name, "hit": True}

    def upkeep(self) -> None:
        """Restart what was killed on purpose when due; an exit nobody caused is recorded and restarted too."""
        for name, job in self.jobs.items():
            if job.running() or job.process is None:
                continue
            if name not in self.to_restart:
                self.unexpected_exits.append(f"{name} exit {job.process.returncode}: {last_line(job.log)[:200]}")
                self.watch.event("exited", job=name, code=job.process.returncode, line=last_line(job.log)[:300])
                self.to_restart[name] = time.monotonic()
            if time.monotonic() >= self.to_restart[name]:
                del self.to_restart[name]
                job.start()
                self.restarts[name] = self.restarts.get(name, 0) + 1
                self.watch.event("restarted", job=name, pid=job.pid)

    def targets(self, test: Callable[[procs.Proc], bool]) -> list[procs.Proc]:
        return [p for p in procs.marked(self.run_id) if p.state not in ("Z", "T", "t", "X") and test(p)]

    def pick(self, test: Callable[[procs.Proc], bool]) -> procs.Proc | None:
        found = self.targets(test)
        return self.rng.choice(sorted(found, key=lambda p: p.pid)) if found else None

    def steps_lost(self) -> list[float]:
        """Env steps rolled back by each driver restart: the last reported count before the kill less the count
        the restarted run resumed from."""
        if not self.resumes:
            return []
        log = self.jobs["driver"].log.read_bytes()
        lost = []
        for before, offset in self.resumes:
            resumed = RESUMED.search(log[offset:].decode(errors="replace"))
            lost.append(max(0.0, before - (float(resumed.group(1)) if resumed else 0.0)))
        return lost

    def stop(self) -> dict[str, Any]:
        """Ctrl-C every running job (drivers save and exit), then the measurements. A job that is down, waiting
        for the harness to start it again (a fault killed it moments before the end, or it stopped as a fault
        meant it to), is not Ctrl-C'd: it is named in ``down_at_stop``, and its last exit is judged where the
        fault is."""
        down = sorted(self.to_restart)
        codes = {name: job.interrupt() for name, job in reversed(self.jobs.items())     # workers before servers
                 if name not in down}
        self.checks["every job ended on Ctrl-C (exit 0 or 130)"] = all(c in (0, 130) for c in codes.values())
        return {"result": self.result(), "steps_lost": self.steps_lost(), "restarts": self.restarts,
                "checkpoint_interval": self.checkpoint_interval, "unexpected_exits": self.unexpected_exits,
                "checks": self.checks, "exit_codes": codes, "down_at_stop": down,
                "last_lines": {name: last_line(self.jobs[name].log)[:300] for name in codes
                               if codes[name] not in (0, 130)}}

    def close(self) -> None:
        for job in self.jobs.values():
            job.kill()

    def training_result(self, columns: tuple[str, ...]) -> dict[str, Any]:
        """A train.py run's: every checkpoint loads (a check), and ``columns`` of its last evaluation."""
        self.checks["every checkpoint loads"] = checkpoints_load(self.run / "checkpoints")
        row = last_row(self.run / "evaluations.csv")
        return {key: row.get(key) for key in columns if key in row}


def is_actor(proc: procs.Proc) -> bool:
    """A sampling actor: a child process named ``lam:Actor`` or a Ray worker ``ray::Actor``."""
    return proc.comm.startswith("lam:Actor") or proc.cmdline.startswith("ray::Actor")


class Train(Scenario):
    """train.py's default job (PPO self-play on the built-in Pong, actors as child processes)."""

    name = "train"
    arguments: tuple[str, ...] = ()

    def start(self) -> None:
        self.checkpoint_interval = min(60.0, self.scaled(600, 60) / 3)   # the default, or 3 in a driver's life
        self.job("driver", python("train.py", *self.arguments, "-m", f"root={self.run}",
                                  "evaluator.terminate=self.time >= 10**9",
                                  f"evaluator.checkpoint.interval={self.checkpoint_interval:g}")).start()

    def faults(self, seconds: float) -> list[Fault]:
        hang = self.scaled(300, 40)
        return [Fault("actor killed", 20.0, lambda: self._hit(faults.kill)),
                Fault("actor hung", hang, lambda: self._hit(lambda p: faults.hang(p, 12.0)), first=hang / 2),
                Fault("driver killed", self.scaled(600, 60), lambda: self.kill_job("driver"))]

    def _hit(self, action: Callable[[procs.Proc], dict[str, Any]]) -> dict[str, Any] | None:
        target = self.pick(is_actor)
        return action(target) if target is not None else None

    def result(self) -> dict[str, Any]:
        return self.training_result(("cost", "fitness", "win", "time"))


def individuals_lost(algorithm: dict[str, Any], lineage: Path, population: int) -> int:
    """Individuals missing from the final population (fewer slots than the individuals created, up to
    ``population``: the first ones are created as learners ask) or from the lineage (a member that trained rounds,
    ``age`` ≥ 1, with no row). A member of age 0 is a child not trained yet (PBT's exploit copies a donor,
    possibly another such child): it has no row by design. ``algorithm``: the population checkpoint's state."""
    rows = {json.loads(line)["id"] for line in lineage.read_text().splitlines() if line} if lineage.exists() else set()
    slots = algorithm["slots"]
    missing = max(0, min(population, int(algorithm["next_id"])) - len(slots))
    return missing + sum(1 for m in slots if m["age"] >= 1 and m["id"] not in rows)


def population_result(run: Path, population: int, checks: dict[str, bool]) -> dict[str, Any]:
    """An evolve.py run's: every population checkpoint loads and no individual is lost (checks), and its rounds,
    env steps and best fitness."""
    from lamarckian.record import Checkpoints

    checks["every population checkpoint loads"] = checkpoints_load(run / "population")
    found = Checkpoints(run / "population").load_newest()
    if found is None:
        return {}
    slots = found[1]["algorithm"]["slots"]
    lost = individuals_lost(found[1]["algorithm"], run / "lineage.jsonl", population)
    checks["no individual lost from the lineage"] = lost == 0
    fitness = [m["fitness"] for m in slots if m.get("fitness") is not None and m["fitness"] == m["fitness"]]
    return {"rounds": int(found[1]["trained"]), "cost": int(found[1]["cost"]),
            "best_fitness": max(fitness) if fitness else None, "individuals_lost": lost}


def is_learner(proc: procs.Proc) -> bool:
    """evolve.py's learner process: a Ray worker (this scenario's cluster) or a child process ``lam:Learner``."""
    return proc.cmdline.startswith("ray::PopulationLearner") or proc.comm.startswith("lam:Learner")


class Evolve(Scenario):
    """evolve.py PBT of 8 individuals (4 learners) on a 3-raylet local cluster; its run directory on a small
    tmpfs so that the disk can be filled (as root only: else on this disk, without the full-disk fault)."""

    name = "evolve"
    NODE_CPUS = 3           # two nodes hold the 4 learners and their actors (1.5 CPUs each) while one is away

    def __init__(self, folder: Path, run_id: str, rng: random.Random, seconds: float) -> None:
        super().__init__(folder, run_id, rng, seconds)
        self.disk = faults.SmallDisk(self.folder / "disk", 256) if os.geteuid() == 0 else None
        if self.disk is None:
            print("chaos: not root, so no tmpfs can be mounted: evolve runs without the full-disk fault",
                  file=sys.stderr)
        self.run = (self.disk.folder if self.disk else self.folder) / "run"
        self.cluster: Any = None
        self.nodes: list[Any] = []
        self.away: tuple[float, Any] | None = None        # (when to re-add it, the removed node)
        self.disk_full_at: float | None = None
        self.population = 8

    def start(self) -> None:
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": self.NODE_CPUS,
                                                                     "gcs_server_port": free_port(),
                                                                     "include_dashboard": False})
        self.nodes = [self.cluster.add_node(num_cpus=self.NODE_CPUS) for _ in range(2)]
        self.cluster.wait_for_nodes()
        self.checkpoint_interval = min(30.0, self.seconds / 10)        # the default, or 10 in a short run
        self.job("driver", python("evolve.py", "-m", f"root={self.run}", f"ray.address={self.cluster.address}",
                                  f"ec.population={self.population}", "ec.learners=4", "ec.stop=self.time >= 10**9",
                                  f"ec.checkpoint.interval={self.checkpoint_interval:g}")).start()

    def faults(self, seconds: float) -> list[Fault]:
        once = 10.0 ** 9
        listed = [Fault("node removed", self.scaled(300, 50), self.remove_node),
                  Fault("learner killed", self.scaled(120, 25), self._kill_learner, first=self.scaled(120, 25) / 2),
                  Fault("driver killed", once, lambda: self.kill_job("driver", restart_after=2.0),
                        first=seconds * 0.4)]
        if self.disk is not None:
            listed.append(Fault("disk filled", once, self.fill, first=seconds * 0.6))
        return listed

    def _kill_learner(self) -> dict[str, Any] | None:
        target = self.pick(is_learner)
        return faults.kill(target) if target is not None else None

    def remove_node(self) -> dict[str, Any] | None:
        if self.away is not None:
            return None
        node = self.rng.choice(self.nodes)
        self.cluster.remove_node(node, allow_graceful=False)
        self.nodes.remove(node)
        self.away = (time.monotonic() + self.scaled(60, 20), node)
        return {"hit": True, "node": node.node_id[:8]}

    def fill(self) -> dict[str, Any]:
        self.disk_full_at = time.monotonic()
        return {"hit": True, **self.disk.fill()}

    def upkeep(self) -> None:
        if self.away is not None and time.monotonic() >= self.away[0]:
            self.nodes.append(self.cluster.add_node(num_cpus=self.NODE_CPUS))
            self.away = None
            self.watch.event("node re-added", node=self.nodes[-1].node_id[:8])
        if self.disk_full_at is not None and (not self.jobs["driver"].running()
                                              or time.monotonic() - self.disk_full_at > 120):
            self.judge_full_disk()
        super().upkeep()

    def judge_full_disk(self) -> None:
        """The driver stopped on the full disk (or 2 minutes went by): the checks, the disk freed, the driver
        to be started again."""
        driver = self.jobs["driver"]
        line = last_line(driver.log)
        stopped = not driver.running()
        self.checks["a full disk stops the run with one clear line"] = stopped and DISK_FULL in line
        self.checks["every population checkpoint loads after the full disk"] = checkpoints_load(
            self.run / "population")
        self.watch.event("disk freed", stopped=stopped, line=line[:300], **self.disk.free())
        self.disk_full_at = None
        if stopped:
            self.to_restart["driver"] = time.monotonic()

    def stop(self) -> dict[str, Any]:
        if self.disk_full_at is not None:
            if self.jobs["driver"].running():        # the run wrote nothing since the disk filled: no stop to check
                self.watch.event("disk freed", stopped=False, line="", **self.disk.free())
                self.disk_full_at = None
            else:                                    # it stopped on the full disk since the last look
                self.judge_full_disk()
        return super().stop()

    def result(self) -> dict[str, Any]:
        return population_result(self.run, self.population, self.checks)

    def close(self) -> None:
        super().close()
        if self.cluster is not None:
            self.cluster.shutdown()
        if self.disk is not None:
            import shutil

            shutil.copytree(self.run, self.folder / "run", dirs_exist_ok=True)     # the tmpfs goes with umount
            self.disk.close()


class Relay(Scenario):
    """The remote relay: a server, a trainer (train.py, SAC on the real-time Pendulum) and 3 workers that reach
    the server through a loopback proxy that can stall."""

    name = "relay"
    CONFIG = ("-c", "mdp/realtime/pendulum.yml", "rl/sac.yml")

    def start(self) -> None:
        import subprocess

        keys = self.folder / "keys"
        subprocess.run(python("-m", "lamarckian.remote", "keygen", str(keys), "server", "trainer", "w0", "w1", "w2"),
                       check=True, cwd=REPOSITORY, capture_output=True)
        port = free_port()
        self.proxy = faults.StallProxy("127.0.0.1", port)
        self.job("server", python("-m", "lamarckian.remote", "server", "--bind", f"tcp://127.0.0.1:{port}",
                                  "--keys", str(keys))).start()
        self.job("driver", python("train.py", *self.CONFIG, "-m", f"root={self.run}",
                                  f"rl.remote.server=tcp://127.0.0.1:{port}",
                                  f"rl.remote.key={keys}/trainer.key_secret",
                                  f"rl.remote.server_key={keys}/server.key", "evaluator.terminate=self.time >= 10**9")
                 ).start()
        for index in range(3):
            self.job(f"worker{index}", python("-m", "lamarckian.remote", "worker", "--server",
                                              f"tcp://127.0.0.1:{self.proxy.port}", "--key",
                                              f"{keys}/w{index}.key_secret", *self.CONFIG)).start()

    def faults(self, seconds: float) -> list[Fault]:
        every = self.scaled(300, 45)
        return [Fault("server killed", every, lambda: self.kill_job("server", restart_after=2.0)),
                Fault("worker killed", self.scaled(60, 20),
                      lambda: self.kill_job(self.rng.choice(["worker0", "worker1", "worker2"]), restart_after=5.0)),
                Fault("link stalled", every, lambda: {"hit": True, **self.proxy.stall(15.0)}, first=every / 2)]

    def result(self) -> dict[str, Any]:
        return self.training_result(("cost", "return", "time"))

    def close(self) -> None:
        super().close()
        if getattr(self, "proxy", None) is not None:
            self.proxy.close()


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


SCENARIOS: dict[str, type[Scenario]] = {"train": Train, "evolve": Evolve, "relay": Relay}
