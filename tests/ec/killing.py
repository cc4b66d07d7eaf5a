"""Evolve while a learner process is SIGKILLed mid-run (what the replacement tests share)."""

from __future__ import annotations

import os
import signal
import threading
import time

from lamarckian.ec import Evolution, Individual


def evolve_killing_a_learner(evolution: Evolution, after_rounds: int) -> tuple[list[Individual], list[int]]:
    """Run ``evolution`` (started) to its end, SIGKILLing its first learner process once ``after_rounds`` rounds
    were reported and every learner reported one (so the replacement's first round, and every later round, starts
    with states of the other learners' members, however long a learner's first round compiles); the final
    population and the killed process ids."""
    victims: list[int] = []
    connections = evolution.processes.started.link.connections

    def every_learner_reported() -> bool:
        assert evolution.lineage is not None
        return len({row["learner"] for row in evolution.lineage.read()}) >= len(connections)

    def kill() -> None:
        while evolution.trained < after_rounds or not every_learner_reported():
            time.sleep(0.05)
        pid = connections[0].endpoint["pid"]
        victims.append(pid)
        os.kill(pid, signal.SIGKILL)

    threading.Thread(target=kill, daemon=True).start()
    try:
        return evolution.run(), victims
    finally:
        evolution.close()
