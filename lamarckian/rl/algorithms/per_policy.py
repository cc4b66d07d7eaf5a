"""The update of several policies (``rl.policies``): each its own rule, optimizer and statistics."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..segment import Segment
from .base import UpdateRule

SUMMED = ("samples",)          # statistics that add up over the policies; the rest are averaged


class PerPolicyUpdate:
    """An :class:`~.base.UpdateRule` of one update rule per policy: each segment goes to the rule of the policy that
    played it (:attr:`Segment.policy`). Statistics are recorded per policy (``<policy>/kl``...) and over all of them
    (samples summed, the rest averaged), checkpoints hold every rule's state under ``policies.<policy>``.

    Args:
        rules: policy name → its update rule (PPO on the policy's network).
    """

    def __init__(self, rules: Mapping[str, UpdateRule]) -> None:
        self.rules = dict(rules)

    @property
    def lr(self) -> float:
        """The first policy's learning rate (every policy follows the same ``train`` schedule)."""
        return next(iter(self.rules.values())).lr

    @property
    def max_staleness(self) -> int:
        return min(rule.max_staleness for rule in self.rules.values())

    def update(self, segments: list[Segment], version: int, cost: int) -> dict[str, float]:
        unknown = sorted({segment.policy for segment in segments} - set(self.rules))
        if unknown:
            raise ValueError(f"segments of policies {unknown} that this learner does not train "
                             f"({', '.join(self.rules)})")
        per_policy: dict[str, dict[str, float]] = {}
        for name, rule in self.rules.items():
            own = [segment for segment in segments if segment.policy == name]
            if own:
                per_policy[name] = rule.update(own, version, cost)
        stats = {f"{name}/{key}": value for name, own in per_policy.items() for key, value in own.items()}
        for key in sorted({key for own in per_policy.values() for key in own}):
            values = [own[key] for own in per_policy.values() if key in own]
            stats[key] = float(np.sum(values) if key in SUMMED else np.mean(values))
        return stats

    def set_lr(self, lr: float) -> None:
        for rule in self.rules.values():
            rule.set_lr(lr)

    def state_dict(self) -> dict[str, Any]:
        return {"policies": {name: rule.state_dict() for name, rule in self.rules.items()}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = state.get("policies") or {}
        missing = [name for name in self.rules if name not in saved]
        if missing:
            raise ValueError(f"the checkpoint has no update state of policies {missing} (rl.policies changed?)")
        for name, rule in self.rules.items():
            rule.load_state_dict(saved[name])
