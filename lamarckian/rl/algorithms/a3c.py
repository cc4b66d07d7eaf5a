"""A3C (Mnih et al. 2016) on the actor fleet, the actors' half (the learner is :mod:`.gradient_learner`): each actor
computes the actor-critic gradient of its own segment (GAE advantages, value regression, entropy bonus) with the
weights it acted with and sends the gradient, not the trajectory; the learner applies gradients as they arrive
(Hogwild-style order; more than ``rl.ppo.max_staleness`` weight versions behind is dropped and counted) and broadcasts
the new weights.

The gradient is one flat float32 array in ``model.parameters()`` order (one zero-copy RPC frame). The normalizers of
:class:`~lamarckian.model.ActorCritic` are off (``rl/a3c.yml``): statistics gathered apart by every actor would not
agree with the learner's.
"""

from __future__ import annotations

import numpy as np
import torch

from ...model import ActorCritic
from ..segment import Segment
from .ppo import episode_starts, vtrace_advantages
from .ppo_settings import PPOSettings


def segment_gradient(model: ActorCritic, segment: Segment, settings: PPOSettings) -> tuple[np.ndarray, float]:
    """The gradient ``(P,)`` of the actor-critic loss on ``segment`` ``[T, L]`` at ``model``'s weights (on-policy GAE
    with ``settings.discount`` and ``settings.gae``; value and entropy weights ``settings.critic`` and
    ``settings.entropy``: ``rl.ac.weight_loss``) and the loss."""
    steps, lanes = segment.rewards.shape
    observations = torch.from_numpy(segment.observations.reshape(steps * lanes, *segment.observations.shape[2:]))
    actions = torch.from_numpy(segment.actions.reshape(steps * lanes, *segment.actions.shape[2:]))
    inputs = {"observations": observations}
    if segment.states is not None:                      # a recurrent network replays the segment's sequences
        inputs.update(states=torch.from_numpy(segment.states), starts=episode_starts(torch.from_numpy(segment.dones)))
    distribution, values = model.replay(inputs)
    with torch.no_grad():
        advantages, targets = vtrace_advantages(
            torch.from_numpy(segment.rewards), torch.cat([values.detach().reshape(steps, lanes),
                                                          torch.from_numpy(segment.values[-1:])]),
            torch.from_numpy(segment.dones), torch.from_numpy(segment.truncated).float(),
            torch.from_numpy(segment.final_values), torch.ones(steps, lanes), settings.discount, settings.gae, 1.0)
    policy_loss = -(advantages.reshape(-1) * model.log_prob(distribution, actions)).mean()
    value_loss = (values - targets.reshape(-1)).square().mean()
    loss = policy_loss + settings.critic * value_loss - settings.entropy * model.entropy(distribution).mean()
    parameters = list(model.parameters())
    gradients = torch.autograd.grad(loss, parameters, allow_unused=True)
    flat = torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(gradients, parameters)])
    return flat.numpy().astype(np.float32), float(loss.detach())
