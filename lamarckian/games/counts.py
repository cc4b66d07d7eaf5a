"""What the MDPs of this package count for the learner (``MDP.counters``): episodes started, and lost by cause."""

from __future__ import annotations

import collections
from typing import Sequence


class EpisodeCounts:
    """Counts of one MDP: ``episodes`` started, ``faults[cause]`` lost."""

    def __init__(self, causes: Sequence[str]) -> None:
        self.faults: collections.Counter[str] = collections.Counter({cause: 0 for cause in causes})
        self.episodes = 0

    def counters(self) -> dict[str, float]:
        """Episodes started and lost (in all and by cause) since this MDP was made."""
        return {"episodes": float(self.episodes), "lost": float(sum(self.faults.values())),
                **{f"lost_{cause}": float(count) for cause, count in self.faults.items()}}
