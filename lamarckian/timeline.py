"""Where a run's seconds go (``train.py --profile``): named moments, in wall-clock seconds since the process
started, printed as a table at the end."""

from __future__ import annotations

import os
import time
from pathlib import Path


def process_start() -> float:
    """The wall-clock time this process started (Linux: from ``/proc``, so the interpreter's own start-up counts);
    elsewhere the time this module was imported."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])                         # starttime: clock ticks after boot
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


class Timeline:
    """Moments of one run: :meth:`mark` records the first time each name happens (later calls are ignored), only
    while :attr:`enabled`."""

    def __init__(self) -> None:
        self.enabled = False
        self.start = process_start()
        self.moments: dict[str, float] = {}

    def mark(self, name: str, at: float | None = None) -> None:
        """``name`` happened now (or at wall-clock ``at``), if it had not yet."""
        if self.enabled and name not in self.moments:
            self.moments[name] = time.time() if at is None else at

    def table(self) -> str:
        """The moments in order: seconds since the process started and since the moment before."""
        lines = [f"{'moment':<40} {'since start (s)':>15} {'step (s)':>9}"]
        previous = 0.0
        for name, at in sorted(self.moments.items(), key=lambda item: item[1]):
            since = at - self.start
            lines.append(f"{name:<40} {since:>15.2f} {since - previous:>9.2f}")
            previous = since
        return "\n".join(lines)


TIMELINE = Timeline()      # the process's one timeline (a profiler, like logging's root logger)
