"""The env steps a learner received from its actors and those it dropped as too stale to learn from."""

from __future__ import annotations

from ...record import Progress, SinceLine, format_number


class StaleSteps:
    """Env steps received and dropped as stale (acted with weights more than ``max_staleness`` versions old), in
    total and since the status line's last permanent line."""

    def __init__(self) -> None:
        self.collected = self.dropped = 0     # env steps, since the learner was built
        self.since_line = SinceLine(None)

    def add(self, steps: int, usable: int) -> None:
        """A segment of ``steps`` env steps came, ``usable`` of them fresh enough (the rest are dropped)."""
        self.collected += steps
        self.dropped += steps - usable

    def attach(self, progress: Progress) -> None:
        """Count from now on for ``progress``'s lines."""
        self.since_line = SinceLine(progress, self._totals())

    def field(self) -> str:
        """The status line's field: ``dropped X of Y steps`` since its last permanent line."""
        dropped, collected = self.since_line.grown(self._totals())
        return f"{format_number(dropped)} of {format_number(collected)} steps"

    def statistics(self) -> dict[str, float]:
        """``dropped_steps`` and ``collected_steps``, the totals."""
        return {"dropped_steps": float(self.dropped), "collected_steps": float(self.collected)}

    def _totals(self) -> dict[str, float]:
        return {"dropped": self.dropped, "collected": self.collected}
