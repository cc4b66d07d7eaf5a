"""TD3's settings (``rl.td3``): torch-free, so ``load()`` checks them before any process starts."""

from __future__ import annotations

import dataclasses

from ...config.sections import Section, require


@dataclasses.dataclass(frozen=True)
class TD3Settings(Section):
    """``rl.td3``: the delayed policy updates, target averaging and the two noises of TD3 (actions in ``[-1, 1]``).

    Attributes:
        policy_delay: critic updates per policy (and target) update.
        tau: Polyak averaging of the target policy and critics per update.
        noise: standard deviation of the Gaussian noise the actors add to the policy's action (exploration).
        target_noise, noise_clip: the target policy smoothing: Gaussian noise of ``target_noise`` clipped to
            ``±noise_clip`` added to the target policy's action.
    """

    KEY = "rl.td3"

    policy_delay: int
    tau: float
    noise: float
    target_noise: float
    noise_clip: float

    def __post_init__(self) -> None:
        require(self, policy_delay=self.policy_delay >= 1, tau=0 < self.tau <= 1, noise=self.noise >= 0,
                target_noise=self.target_noise >= 0, noise_clip=self.noise_clip >= 0)
