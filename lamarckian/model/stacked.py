"""P policies of one architecture held as stacked weights and run in ONE batched forward (torch.func vmap).

Used to evaluate populations (tournaments, opponent pools): the cost of one forward over P policies is close
to that of a single policy on a P-times larger batch, instead of P Python-level forwards.
"""

from __future__ import annotations

import copy
from typing import Sequence

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, stack_module_state

from .blob import load_blob
from .network import ILLEGAL, ActorCritic


class PolicyOutputs(nn.Module):
    """A policy's head outputs and its values in reward units (the module a stacked forward calls)."""

    def __init__(self, model: ActorCritic) -> None:
        super().__init__()
        self.model = model

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out, value = self.model.outputs(observation)
        return out, self.model.denormalize_value(value)


class StackedPolicies:
    """Stacked copies of ``template`` loaded with ``blobs`` (one flat blob per policy), held on ``device``.

    Shapes: ``P`` policies, ``B`` observations per policy, ``A`` action outputs.
    """

    def __init__(self, template: ActorCritic, blobs: Sequence[np.ndarray], device: torch.device | str = "cpu") -> None:
        if not blobs:
            raise ValueError("StackedPolicies needs at least one policy")
        if template.state_size:
            raise ValueError("stacked policies are feed-forward; this network is recurrent (model.recurrent)")
        if template.settings.sde and not template.discrete:
            raise ValueError(f"model.sde={template.settings.sde}: stacked policies (opponent pools, populations) "
                             "draw independent Gaussian noise; state-dependent exploration is for single-player or "
                             "shared-seat MDPs on the actor fleet")
        members = []
        for blob in blobs:
            member = PolicyOutputs(copy.deepcopy(template))
            load_blob(member.model, blob)
            members.append(member)
        self.template = template
        self.count = len(members)
        parameters, buffers = stack_module_state(members)
        self.parameters = {name: tensor.to(device) for name, tensor in parameters.items()}
        self.buffers = {name: tensor.to(device) for name, tensor in buffers.items()}
        self.base = copy.deepcopy(members[0]).to("meta")

    def _one(self, parameters: dict, buffers: dict, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return functional_call(self.base, (parameters, buffers), (observation,))

    @torch.no_grad()
    def outputs(self, observations: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(P, B, ...)`` observations → policy outputs ``(P, B, A)`` and values ``(P, B)`` in reward units.

        MLP policies run as batched matrix products (``baddbmm``) over the stacked weights; other
        architectures (CNN encoders) through ``torch.vmap`` of ``functional_call``.
        """
        if observations.shape[0] != self.count:
            raise ValueError(f"expected observations for {self.count} policies, got {observations.shape[0]}")
        if self.template.batcher.stored_as_bytes:
            return torch.vmap(self._one)(self.parameters, self.buffers, observations)
        outputs, values = self._mlp(observations, value=True)
        assert values is not None
        return outputs, values

    def _linear(self, name: str, x: torch.Tensor) -> torch.Tensor:
        weight, bias = self.parameters[f"{name}.weight"], self.parameters[f"{name}.bias"]
        return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))

    def _encode(self, name: str, x: torch.Tensor) -> torch.Tensor:
        for index, layer in enumerate(getattr(self.template, name)):
            x = self._linear(f"model.{name}.{index}", x) if isinstance(layer, nn.Linear) else layer(x)
        return x

    def _mlp(self, observations: torch.Tensor, value: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Policy outputs ``(P, B, A)`` and, if ``value``, values ``(P, B)`` (else None: acting needs no critic)."""
        model, buffers = self.template, self.buffers
        x = observations.float()
        if model.settings.normalize_observation:
            normalizer = model.observation_normalizer
            assert normalizer is not None
            mean = buffers["model.observation_normalizer.mean"].unsqueeze(1)
            var = buffers["model.observation_normalizer.var"].unsqueeze(1)
            x = ((x - mean) / torch.sqrt(var + normalizer.epsilon)).clamp(-normalizer.clip, normalizer.clip)
        features = self._encode("actor_encoder", x)
        out = self._linear("model.policy_head", features)
        if model.mask is not None:          # illegal choices never drawn, as ActorCritic.outputs does
            out = out.masked_fill(observations[..., model.mask] < 0.5, ILLEGAL)
        if not value:
            return out, None
        critic = features if model.settings.shared else self._encode("critic_encoder", x)
        values = self._linear("model.value_head", critic).squeeze(-1)
        if model.settings.normalize_value:
            mean = buffers["model.value_normalizer.mean"].unsqueeze(1)
            var = buffers["model.value_normalizer.var"].unsqueeze(1)
            values = values * torch.sqrt(var + model.value_normalizer.epsilon) + mean
        return out, values

    @torch.no_grad()
    def act(self, observations: torch.Tensor, policy: torch.Tensor, deterministic: bool | torch.Tensor = True,
            generator: torch.Generator | None = None, width: int | None = None) -> torch.Tensor:
        """Actions ``(N,)`` (or ``(N, A)``) for ``N`` observations, observation ``n`` acted on by policy ``policy[n]``;
        ``deterministic`` for all rows (mean actions, greedy choices) or per row (an ``(N,)`` bool mask).

        Observations are grouped by policy into a padded ``(P, width, ...)`` block: one forward in all. ``width``
        None: the largest group (one host synchronization to learn it); ``width=N``: no synchronization, at the cost
        of a forward over ``P × N`` rows (what a GPU rollout wants).
        """
        policy = policy.long()
        counts = torch.zeros(self.count, dtype=torch.int64, device=policy.device).index_add_(  # (bincount would
            0, policy, torch.ones_like(policy))                                                  # synchronize)
        width = int(counts.max()) if width is None else width
        order = torch.argsort(policy, stable=True)
        starts = torch.cumsum(counts, 0) - counts
        slot = torch.empty_like(policy)
        slot[order] = torch.arange(len(policy), device=policy.device) - starts[policy[order]]
        block = observations.new_zeros((self.count, width, *observations.shape[1:]))
        block[policy, slot] = observations
        if self.template.batcher.stored_as_bytes:
            out = self.outputs(block)[0][policy, slot]
        else:
            out = self._mlp(block, value=False)[0][policy, slot]
        factored = self.template.factored
        if factored is not None:        # each part drawn on its own (the rows' own policies' log_std)
            log_std = self.parameters["model.log_std"][policy] if factored.gaussian else None
            return factored.draw(out, log_std, deterministic, generator)[0]
        if isinstance(deterministic, bool) and deterministic:
            return out.argmax(-1) if self.template.discrete else out
        if self.template.discrete:
            sampled = torch.multinomial(torch.softmax(out, -1), 1, generator=generator).squeeze(-1)
            return sampled if isinstance(deterministic, bool) else torch.where(deterministic, out.argmax(-1), sampled)
        noise = torch.randn(out.shape, generator=generator, device=out.device)
        if not isinstance(deterministic, bool):
            noise = noise * (~deterministic).unsqueeze(-1)
        return out + self.parameters["model.log_std"][policy].exp() * noise
