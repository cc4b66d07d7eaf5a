"""What the learner knows of its actors while an iteration collects, said when no update happens in time.

An actor whose segments are not complete after a few seconds sends a progress report instead (:func:`report`: the
env steps and episodes so far, the slowest environment call, the late lanes and where they wait, what its
environments counted: lost episodes by cause), then goes on with the same segments. Segments whose weights are too
old for the learner are dropped and counted here, so a run whose env steps go on while no update is made says why.
The learner's :class:`StallWatch` adds reports and segments up per actor. When an iteration has collected for
``sample.stall`` seconds it prints what the run waits for (every
``sample.stall`` seconds while it lasts); when not one env step finished in that time (environments that do not
return), or in half of it while every episode was lost, the run cannot progress and
:class:`~lamarckian.errors.NoProgress` ends it with the reason.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Mapping, Sequence

from ...errors import NoProgress
from ...record import Progress, format_number
from ..segment import REPORT


def report(progress: Mapping[str, float], counters: Mapping[str, float]) -> dict[str, Any]:
    """An actor's progress report (the wire form): :meth:`SlotSampler.progress` and its environments' counters grown
    since its previous message."""
    return {REPORT: dict(progress), "counters": dict(counters)}


def report_interval(stall: float) -> float:
    """Seconds an actor works on its segments before it reports instead: often enough for the learner to see every
    actor a few times within ``sample.stall``, at most every 5 seconds."""
    return min(5.0, stall / 4)


@dataclasses.dataclass
class ActorView:
    """One actor as its messages since the watch began tell it.

    Attributes:
        heard: monotonic seconds of its newest message (the watch's start before the first).
        sent: env steps of the segments it sent.
        making: env steps of the segments it is making (its newest report's; 0 after a segment).
        episodes: episodes that ended (sent, and in the making).
        lost: episodes its environments lost, by cause.
        slowest: seconds of the slowest environment call it reported.
        lanes: (complete, all) lanes of its newest report.
        late: its newest report's late lanes by where they wait (:meth:`SlotSampler.late`).
        dropped: env steps of its segments dropped as stale.
    """

    heard: float
    sent: float = 0.0
    making: float = 0.0
    episodes: float = 0.0
    making_episodes: float = 0.0
    lost: dict[str, float] = dataclasses.field(default_factory=dict)
    slowest: float = 0.0
    lanes: tuple[float, float] | None = None
    late: list[list[Any]] = dataclasses.field(default_factory=list)
    dropped: float = 0.0
    messages: int = 0

    @property
    def steps(self) -> float:
        return self.sent + self.making

    def take(self, counters: Mapping[str, float]) -> None:
        add_lost(self.lost, counters)


def add_lost(lost: dict[str, float], counters: Mapping[str, float]) -> None:
    """Add the ``lost_<cause>`` counters to ``lost`` (by cause)."""
    for name, value in counters.items():
        if name.startswith("lost_"):
            cause = name[len("lost_"):]
            lost[cause] = lost.get(cause, 0.0) + value


def lost_text(lost: Mapping[str, float]) -> str:
    """``340 lost (timeout 300, garbage 40)``, or '' where nothing was lost."""
    total = sum(lost.values())
    if not total:
        return ""
    causes = ", ".join(f"{cause} {format_number(count)}" for cause, count in sorted(lost.items(), key=lambda i: -i[1])
                       if count)
    return f"{format_number(total)} lost ({causes})"


class StallWatch:
    """Follows the actors through each iteration's collection (:meth:`begin`, then :meth:`segment` and
    :meth:`report` per message, :meth:`check` between them).

    Args:
        say: prints one permanent console line.
        clock: monotonic seconds.

    Attributes:
        limit: ``sample.stall`` of the iteration (:meth:`begin`): seconds it may collect before the console says
            what it waits for.
        status_line: the run loop's status line (lost episodes are shown there as reports bring them), if any.
    """

    def __init__(self, say: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.say, self.clock = say, clock
        self.limit = 60.0
        self.status_line: Progress | None = None
        self.actors: dict[int, ActorView] = {}
        self.started = self.told = clock()
        self.need = 0
        self.moved = False            # an env step finished since the iteration began
        self.messages = 0             # messages since the iteration began
        self.lost: dict[str, float] = {}    # episodes lost since the iteration began, by cause
        self.dropped = 0.0            # env steps dropped as stale since the iteration began

    def begin(self, need: int, limit: float) -> None:
        """An iteration starts collecting ``need`` env steps, for ``limit`` seconds before the console hears of it."""
        self.started = self.told = self.clock()
        self.need, self.limit = need, limit
        self.moved, self.messages, self.lost, self.dropped = False, 0, {}, 0.0

    def _view(self, actor: int | None) -> ActorView | None:
        if actor is None:                   # a message of an actor that has left the fleet
            return None
        if actor not in self.actors:
            self.actors[actor] = ActorView(self.started)
        return self.actors[actor]

    def forget(self, actor: int) -> None:
        """Actor ``actor`` was replaced (the indices after it moved down by one)."""
        views = sorted(self.actors.items())
        self.actors = {index - (index > actor): view for index, view in views if index != actor}

    def segment(self, actor: int | None, steps: int, episodes: int, counters: Mapping[str, float],
                dropped: int = 0) -> None:
        """Actor ``actor`` sent segments of ``steps`` env steps in which ``episodes`` ended; ``dropped`` of those
        env steps came too old for the learner."""
        self.dropped += dropped
        view = self._view(actor)
        if view is None:
            return
        self._heard(view, counters)
        view.sent += steps
        view.dropped += dropped
        self.moved = self.moved or steps > 0
        view.episodes += episodes
        view.making = view.making_episodes = 0.0

    def report(self, actor: int | None, message: Mapping[str, Any]) -> None:
        """Actor ``actor``'s progress report (:func:`report`)."""
        view = self._view(actor)
        if view is None:
            return
        progress = message[REPORT]
        self._heard(view, message.get("counters") or {})
        making = float(progress.get("steps", 0.0))
        self.moved = self.moved or making > view.making
        view.making = making
        view.making_episodes = float(progress.get("episodes", 0.0))
        view.slowest = max(view.slowest, float(progress.get("slowest_step", 0.0)))
        view.lanes = (float(progress.get("lanes_ready", 0.0)), float(progress.get("lanes", 0.0)))
        late = progress.get("late")
        view.late = [list(place) for place in late] if isinstance(late, list) else []

    def show(self, fields: Mapping[str, str]) -> None:
        """Put ``fields`` on the status line beside its others (before the iteration ends)."""
        if self.status_line is not None:
            self.status_line.update({**self.status_line.fields, **fields})

    def _heard(self, view: ActorView, counters: Mapping[str, float]) -> None:
        view.heard, view.messages = self.clock(), view.messages + 1
        self.messages += 1
        view.take(counters)
        add_lost(self.lost, counters)

    def check(self, collected: int, in_flight: Sequence[int], placing: int = 0) -> None:
        """Between messages: say what the run waits for once the iteration has collected for ``limit`` seconds (and
        every ``limit`` seconds after); NoProgress when not one env step finished in that time, or in half of it
        while episodes were lost (every one of them, then). ``collected``: the
        env steps the iteration has; ``in_flight``: each actor's segments asked for and not yet received;
        ``placing``: replacement actors waiting for Ray to place them (while the fleet has no actor, the iteration
        waits for them: said every ``limit`` seconds, never NoProgress)."""
        now = self.clock()
        waited = now - self.started
        if placing and not in_flight:
            if now - self.told >= self.limit:
                self.told = now
                self.say(f"no actor for {waited:.0f} s: {placing} replacement{'s' * (placing > 1)} wait for Ray to "
                         "place them (the cluster lost the capacity they need; they start when it returns)")
            return
        if not self.moved and waited >= self.limit / 2 and any(self.lost.values()):
            raise NoProgress(self._why_stuck(waited, in_flight))    # every episode lost: certain in half the time
        if waited < self.limit or now - self.told < self.limit:
            return
        self.told = now
        if not self.moved:
            raise NoProgress(self._why_stuck(waited, in_flight))
        lines = [self._actor_line(index, flying, now) for index, flying in enumerate(in_flight)]
        stale = (f"; {format_number(self.dropped)} env steps came from weights too old for the learner "
                 "(rl.ppo.max_staleness) and were dropped") if self.dropped else ""
        self.say(f"no update for {waited:.0f} s (sample.stall={self.limit:g}): the batch has "
                 f"{format_number(collected)} of {format_number(self.need)} env steps{stale}; " + "; ".join(lines))

    def _actor_line(self, index: int, in_flight: int, now: float) -> str:
        view = self.actors.get(index)
        if in_flight == 0:
            return f"actor {index} waits for the learner (no segment asked of it)"
        if view is None or view.messages == 0:
            return (f"actor {index} has sent nothing for {now - self.started:.0f} s (an environment call that has not "
                    "returned?)")
        parts = [f"{format_number(view.steps)} env steps", f"{format_number(view.episodes + view.making_episodes)} "
                 "episodes ended"]
        lost = lost_text(view.lost)
        if lost:
            parts.append(lost)
        if view.lanes is not None:
            parts.append(f"{view.lanes[0]:.0f} of {view.lanes[1]:.0f} lanes full")
        parts.append(f"slowest env step {view.slowest:.2f} s")
        for where, count, waited in view.late:
            parts.append(f"{count:.0f} episode{'s' * (count != 1)} wait{'s' * (count == 1)} on {where} (the longest "
                         f"{waited:.1f} s)")
        if view.dropped:
            parts.append(f"{format_number(view.dropped)} of its env steps dropped as stale")
        silent = now - view.heard
        if silent > self.limit / 2:
            parts.append(f"silent for {silent:.0f} s (an environment call that has not returned?)")
        return f"actor {index}: " + ", ".join(parts)

    def _why_stuck(self, waited: float, in_flight: Sequence[int]) -> str:
        reason = f"not one env step finished in {waited:.0f} s (sample.stall={self.limit:g})"
        if sum(self.lost.values()):
            return (f"{reason}: every episode was lost, {lost_text(self.lost)} (the first fault of each kind is "
                    "logged above)")
        if not any(in_flight):
            return f"{reason}: the learner asked no actor for a segment (a fault of the learner's: please report it)"
        if not self.messages:
            return f"{reason}: no actor has sent anything (their environments' calls have not returned)"
        return f"{reason}: the environments have not answered a reset or step"
