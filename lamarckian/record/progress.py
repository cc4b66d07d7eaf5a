"""A live progress line in the terminal (rich), plus one printed line per evaluation."""

from __future__ import annotations

import collections
import threading
import time
from typing import Mapping

from rich.console import Console
from rich.live import Live
from rich.text import Text


def format_number(value: float) -> str:
    """1234567 → '1.23M'."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.2f}{unit}"
    return f"{value:.3g}"


class StepRate:
    """Env steps per second of wall clock over the last ``window`` seconds or more (a run's first seconds: since
    training started; ``-`` until ``min_span`` seconds have passed, so an iteration that ends at once, as the first
    after a resume, whose segments were in flight, shows no absurd rate)."""

    def __init__(self, now: float = 0.0, cost: int = 0, window: float = 10.0, min_span: float = 1.0) -> None:
        self.samples: collections.deque[tuple[float, int]] = collections.deque([(now, cost)])   # (time s, env steps)
        self.window, self.min_span = window, min_span

    def update(self, now: float, cost: int) -> float | None:
        """The rate at ``now`` with ``cost`` env steps done (None: too soon to say)."""
        samples = self.samples
        samples.append((now, cost))
        while len(samples) > 2 and now - samples[1][0] >= self.window:
            samples.popleft()
        then, before = samples[0]
        return (cost - before) / (now - then) if now - then >= self.min_span else None

    def text(self, now: float, cost: int) -> str:
        """:meth:`update` for the status line."""
        rate = self.update(now, cost)
        return "-" if rate is None else format_number(rate)


class Progress:
    """The status line updated in place (when the terminal allows) and permanent lines for milestones.

    Where the status line is not shown in place (output to a file or a pipe) and where it has not changed for a
    while (an iteration that waits on a slow game), the latest status is printed as a permanent line after
    ``every`` seconds without one, from the start of the run on: a user always sees within ``every`` seconds that
    the run is alive and where it is.
    """

    def __init__(self, enabled: bool = True, every: float = 30.0) -> None:
        self.console = Console(stderr=True)
        self.live = Live(Text(""), console=self.console, refresh_per_second=4, transient=True) \
            if enabled and self.console.is_terminal else None
        if self.live is not None:
            self.live.start()
        self.every = every
        self.printed = 0                                # permanent lines so far
        self.fields: dict[str, str] = {}
        self.started = self.seen = time.monotonic()     # when the user last saw something new
        self.stopped = threading.Event()
        if enabled:
            threading.Thread(target=self._heartbeat, name="status line", daemon=True).start()

    def update(self, fields: Mapping[str, str]) -> None:
        self.fields = dict(fields)
        if self.live is not None:
            self.live.update(Text(self.line()))
            self.seen = time.monotonic()

    def line(self) -> str:
        """The status line of the latest fields."""
        return " | ".join(f"{k} {v}" for k, v in self.fields.items())

    def print(self, line: str) -> None:
        self.console.print(line, highlight=False, soft_wrap=True)
        self.seen = time.monotonic()
        self.printed += 1

    def _heartbeat(self) -> None:
        shown: dict[str, str] | None = None
        while not self.stopped.wait(1.0):
            now = time.monotonic()
            if now - self.seen < self.every:
                continue
            if not self.fields:
                self.print(f"starting: no iteration finished yet ({now - self.started:.0f}s)")
            elif self.fields == shown:
                self.print(f"{self.line()} | still waiting for the next iteration")
            else:
                self.print(self.line())
            shown = self.fields

    def close(self) -> None:
        self.stopped.set()
        if self.live is not None:
            self.live.stop()


class SinceLine:
    """Counters as they grew since the status line's last permanent line (an evaluation's, a heartbeat's), so the
    status line says what happened since the line above it: updates made, env steps dropped...

    Args:
        progress: the status line (None: never a line).
        start: the counters now (missing ones: 0).
    """

    def __init__(self, progress: Progress | None, start: Mapping[str, float] | None = None) -> None:
        self.progress = progress
        self.printed = progress.printed if progress is not None else 0
        self.base: dict[str, float] = dict(start or {})
        self.last: dict[str, float] = dict(self.base)

    def grown(self, totals: Mapping[str, float]) -> list[float]:
        """How much each of ``totals`` grew since the last permanent line (in their order); a line printed since the
        previous call showed the totals of that call, which become the base."""
        printed = self.progress.printed if self.progress is not None else 0
        if printed != self.printed:
            self.printed, self.base = printed, self.last
        self.last = dict(totals)
        return [value - self.base.get(name, 0.0) for name, value in totals.items()]
