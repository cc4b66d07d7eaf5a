"""Faults on a timetable against a running job, every one logged (``events.jsonl``: seconds since the start, what,
the target, how long it waited), while the job is watched (``samples.jsonl``: its progress from ``status.json``,
and every ``memory_period`` s the resident memory and open files of all its processes, in all and by kind of
process: ``by_kind`` maps a kind to [processes, open files, MiB])."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Callable

from . import procs


@dataclasses.dataclass
class Fault:
    """``inject()`` every ``every`` seconds, the first time at ``first`` (default: ``every``), each time once the job
    has moved on since the fault before (see :meth:`Watch.run`). ``inject`` returns what it hit, or None where it
    found no target then (logged as skipped)."""

    kind: str
    every: float
    inject: Callable[[], dict[str, Any] | None]
    first: float | None = None


class Log:
    """Append-only JSON lines."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, row: dict[str, Any]) -> None:
        with open(self.path, "a", encoding="utf-8") as stream:
            stream.write(json.dumps(row) + "\n")

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]


class Watch:
    """What the harness sees of a job while faults fall on it.

    Args:
        folder: where ``events.jsonl`` and ``samples.jsonl`` go.
        run_id: the chaos run's id (its processes carry it, :func:`procs.marked`).
        status: a function returning the job's current ``status.json`` (or None).
        own: a function returning the pids of the harness's own children (not orphans).
        memory_period: seconds between memory samples.
    """

    def __init__(self, folder: Path, run_id: str, status: Callable[[], dict | None],
                 own: Callable[[], list[int]], memory_period: float = 10.0) -> None:
        self.events, self.samples = Log(folder / "events.jsonl"), Log(folder / "samples.jsonl")
        self.run_id, self.status, self.own = run_id, status, own
        self.memory_period = memory_period
        self.start = time.monotonic()
        self.last_memory = -float("inf")
        self.last_status: tuple[float, float] | None = None     # (status time, cost) last recorded
        self.cost = 0.0                                          # env steps the job last reported

    def now(self) -> float:
        return time.monotonic() - self.start

    def event(self, kind: str, **details: Any) -> None:
        self.events.write({"t": round(self.now(), 3), "kind": kind, **details})

    def observe(self) -> None:
        """Record new progress, and memory when due; collect re-parented orphans that exited."""
        status = self.status()
        if status is not None and (status.get("time"), status.get("cost")) != self.last_status:
            self.last_status = (status.get("time"), status.get("cost"))
            self.cost = float(status.get("cost") or 0.0)
            self.samples.write({"t": round(self.now(), 3), "cost": status.get("cost"), "pid": status.get("pid"),
                                **{k: status[k] for k in ("trained", "iteration") if k in status}})
        if self.now() - self.last_memory >= self.memory_period:
            self.last_memory = self.now()
            found = procs.marked(self.run_id)
            kinds: dict[str, list[int]] = {}
            for proc in found:
                kind = kinds.setdefault(procs.kind(proc), [0, 0, 0])
                kind[0], kind[1], kind[2] = kind[0] + 1, kind[1] + proc.fds, kind[2] + proc.rss // 2**20
            self.samples.write({"t": round(self.now(), 3), "rss_mb": round(sum(p.rss for p in found) / 2**20, 1),
                                "fds": sum(p.fds for p in found), "processes": len(found), "by_kind": kinds})
        procs.reap(self.own())

    def run(self, faults: list[Fault], seconds: float, period: float = 0.5,
            between: Callable[[], None] | None = None, until: Callable[[], bool] | None = None) -> None:
        """Inject ``faults`` on their timetable for ``seconds`` (or until ``until()`` holds), observing every
        ``period`` s and calling ``between()`` (the scenario's own upkeep: restarting what should be restarted).

        A fault that falls due waits until the job has reported more env steps than when the fault before fell
        (the first: any), so that every fault is judged by the job moving on from it: on a slow machine, where
        starting learners or restoring a checkpoint takes longer than a short run's interval, faults would
        otherwise fall on a job that never got going, and nothing could be told of them. The wait is logged
        (``waited``, s) and the fault's next time counts from when it fell."""
        due = [self.now() + (f.first if f.first is not None else f.every) for f in faults]
        cost_at_last_fault = 0.0
        while self.now() < seconds and not (until is not None and until()):
            for index, fault in enumerate(faults):
                if self.now() >= due[index] and self.cost > cost_at_last_fault:
                    waited = self.now() - due[index]
                    due[index] = self.now() + fault.every
                    hit = fault.inject()
                    if hit is not None:
                        cost_at_last_fault = self.cost
                    self.event(fault.kind, waited=round(waited, 1),
                               **(hit if hit is not None else {"hit": False, "why": "no target"}))
            if between is not None:
                between()
            self.observe()
            time.sleep(period)
