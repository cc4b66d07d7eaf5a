"""What each policy of an actor has gathered toward its next segment (:class:`PolicyParts`)."""

from __future__ import annotations

import collections
from typing import Any, Iterable, Sequence

from ...rating.results import EpisodeResult
from ..segment import Segment, stack_lanes


class PolicyParts:
    """Per policy: the lane parts waiting (:meth:`~lamarckian.rl.segment.Lane.take`, oldest first), the env steps and
    the finished training episodes since its previous segment.

    Args:
        policies: the policies' names.
    """

    def __init__(self, policies: Iterable[str]) -> None:
        self.queues: dict[str, collections.deque[tuple[int, dict[str, Any]]]] = {
            name: collections.deque() for name in policies}     # (lane, part) per policy, oldest first
        self.steps: collections.Counter[str] = collections.Counter()
        self.results: list[tuple[str, EpisodeResult]] = []      # (policy, episode)

    def add(self, policy: str, lane: int, part: dict[str, Any]) -> None:
        self.queues[policy].append((lane, part))

    def count(self, policy: str) -> int:
        """The parts waiting for ``policy``."""
        return len(self.queues[policy])

    def lanes(self, policy: str) -> set[int]:
        """The lanes with a part waiting for ``policy``."""
        return {lane for lane, _ in self.queues[policy]}

    def queued(self) -> int:
        """The parts waiting, all policies together."""
        return sum(len(queue) for queue in self.queues.values())

    def segment(self, policy: str, width: int) -> Segment:
        """``policy``'s next ``width`` parts (or all it has) side by side, with its env steps and finished episodes
        since its previous segment."""
        queue = self.queues[policy]
        taken = [queue.popleft()[1] for _ in range(min(len(queue), width))]
        segment = stack_lanes(taken, self.steps.pop(policy, 0), [result for own, result in self.results
                                                                   if own == policy])
        self.results = [(own, result) for own, result in self.results if own != policy]
        segment.policy = policy
        return segment

    def finished(self, policies: Sequence[str], results: Sequence[EpisodeResult]) -> None:
        """Training episodes finished, ``results[i]`` played by ``policies[i]``."""
        self.results.extend(zip(policies, results))
