"""When each lane of an actor last stepped, and when a lane is late (:class:`LaneClock`)."""

from __future__ import annotations

import math
import time


class LaneClock:
    """Sampling time per lane: when each last stepped, with the pauses between segments (the actor waited for the
    learner, its environments did not act) left out; a lane is *late* when it has not stepped for ``hitch`` seconds
    (``mdp.hitch``) and for 8× the actor's mean environment call (an environment whose every step is slow is not
    late).

    Args:
        hitch: seconds (None: no lane is ever late).
    """

    CALLS = 8.0          # a lane is late after this many mean environment calls without a step (and the hitch)
    WEIGHT = 0.01        # of the newest call in :attr:`mean_call` (every call but the hitches goes in)
    THREADS_PAY = 1e-3   # seconds: a typical environment call this long makes a thread's handoff (~50 µs) cheap

    def __init__(self, hitch: float | None) -> None:
        self.hitch = hitch
        self.mean_call = 0.0                   # seconds, a running mean of the environment calls (hitches left out)
        self.slowest = 0.0                     # seconds, the slowest environment call since :meth:`restart_slowest`
        self.first_step_at: float | None = None   # wall-clock time of the first env step
        self.stepped: list[float] = []         # monotonic seconds of each lane's last step, pauses left out
        self.paused_at: float | None = None    # when the previous segment was handed over (None: sampling)

    def reset(self, lanes: int) -> None:
        """``lanes`` lanes, all stepped now."""
        self.stepped = [time.monotonic()] * lanes

    def step(self, lane: int) -> float:
        """Lane ``lane`` steps now (or goes on after waiting for the learner); the monotonic time."""
        self.stepped[lane] = now = time.monotonic()
        return now

    def called(self, took: float) -> bool:
        """An environment call took ``took`` seconds; whether that was a hitch (longer than ``hitch``)."""
        self.slowest = max(self.slowest, took)
        if self.first_step_at is None:
            self.first_step_at = time.time()
        if self.hitch is not None and took > self.hitch:
            return True
        self.mean_call += self.WEIGHT * (took - self.mean_call)
        return False

    def restart_slowest(self) -> None:
        self.slowest = 0.0

    def pause(self) -> None:
        """A segment was handed over: the time until :meth:`resume` counts against no lane."""
        self.paused_at = time.monotonic()

    def resume(self) -> None:
        if self.paused_at is not None:
            pause, self.paused_at = time.monotonic() - self.paused_at, None
            self.stepped = [since + pause for since in self.stepped]

    def now(self) -> float:
        """Monotonic seconds, as :attr:`stepped` counts them (a pause since the last segment left out)."""
        return self.paused_at if self.paused_at is not None else time.monotonic()

    def after(self) -> float:
        """Seconds without a step after which a lane is late (infinite without a hitch)."""
        return math.inf if self.hitch is None else max(self.hitch, self.CALLS * self.mean_call)

    def waited(self, lane: int) -> float:
        """Seconds since lane ``lane`` last stepped."""
        return self.now() - self.stepped[lane]

    def late(self, lane: int) -> bool:
        return self.waited(lane) > self.after()

    def threads_pay(self) -> bool:
        """The typical environment call is slow enough that a thread's handoff costs little beside it."""
        return self.mean_call > self.THREADS_PAY
