"""Evolve while a learner process is SIGKILLed mid-run (what the replacement tests share)."""

from __future__ import annotations

import os
import signal
import threading
import time

from lamarckian.ec import Evolution, Individual


def evolve_killing_a_learner(evolution: Evolution, after_rounds: int) -> tuple[list[Individual], list[int]]:
    """Run ``evolution`` (started) to its end, SIGKILLing its first learner process once ``after_rounds`` rounds
    were reported; the final population and the killed process ids."""
    victims: list[int] = []

    def kill() -> None:
        while evolution.trained < after_rounds:
            time.sleep(0.05)
        pid = evolution.processes.started.link.connections[0].endpoint["pid"]
        victims.append(pid)
        os.kill(pid, signal.SIGKILL)

    threading.Thread(target=kill, daemon=True).start()
    try:
        return evolution.run(), victims
    finally:
        evolution.close()
