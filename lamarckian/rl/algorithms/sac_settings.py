"""SAC's settings (``rl.sac``): torch-free, so ``load()`` checks them before any process starts."""

from __future__ import annotations

import dataclasses

from ...config.sections import Section, require


@dataclasses.dataclass(frozen=True)
class SACSettings(Section):
    """``rl.sac``: critics (twin, or a REDQ ensemble), target averaging, the entropy temperature."""

    KEY = "rl.sac"

    critics: int
    target_critics: int
    policy_delay: int
    tau: float
    alpha: float
    learn_alpha: bool
    target_entropy: float | None

    def __post_init__(self) -> None:
        require(self, critics=self.critics >= 1, target_critics=1 <= self.target_critics <= self.critics,
                 policy_delay=self.policy_delay >= 1, tau=0 < self.tau <= 1, alpha=self.alpha > 0)
