"""PPO for a population of P members of one architecture in ONE batched update (fastpbrl-style, in torch).

The members' parameters are stacked (``(P, ...)`` per tensor); every minibatch step runs the PPO loss of all members
at once (``torch.func.vmap`` of ``grad`` over ``functional_call``), clips each member's gradient by its own norm and
takes a per-member Adam step with the member's own learning rate and moments. Each member shuffles its batch with
its own generator, so the update equals P separate :class:`~lamarckian.rl.algorithms.ppo.PPO` updates on the same
batches (``tests/rl/algorithms/test_population_ppo.py``: max abs difference ≤ 1e-5), at about the cost of one on a
GPU.

Members may differ in the settings listed in :data:`MEMBER_KEYS` (the learning rate and its KL target, the
discount and GAE λ, the clip range and the loss weights: each member's values ride along the vmap as tensors); the
others (epochs, minibatches, schedules...) shape the update itself and must be equal. Advantages and targets are
computed per member by :meth:`PPO.prepare` on the member's own module and settings (:meth:`PopulationPPO.members`
keeps those in step).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any, Mapping, Sequence

import torch
from torch import nn
from torch.func import functional_call, grad, stack_module_state

from ...model import ActorCritic
from ...model.stacked import PolicyOutputs
from .ppo import adapted_lr, linear_lr, ppo_loss
from .ppo_settings import PPOSettings, member_keys

BETAS, EPS = (0.9, 0.999), 1e-5   # what PPO's torch.optim.Adam uses
#: PPOSettings fields a member may have its own value of (the rest must be equal across the population): the fields
#: PPOSettings declares per member
MEMBER_KEYS = tuple(member_keys().values())
LOSS_KEYS = ("clip", "critic", "entropy")      # the ones the loss reads (as per-member tensors)


class _Loss(nn.Module):
    """The PPO loss of one member as a module call, so that ``functional_call`` can swap its parameters."""

    def __init__(self, model: ActorCritic, settings: PPOSettings) -> None:
        super().__init__()
        self.model, self.settings = model, settings

    def forward(self, batch: Mapping[str, torch.Tensor], coefficients: Mapping[str, torch.Tensor]
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        return ppo_loss(self.model, batch, self.settings, coefficients)


def shared_settings(settings: Sequence[PPOSettings]) -> PPOSettings:
    """The settings every member shares (the first member's); ValueError naming a field that differs outside
    :data:`MEMBER_KEYS`."""
    first = settings[0]
    for other in settings[1:]:
        for field in dataclasses.fields(PPOSettings):
            if field.name not in MEMBER_KEYS and getattr(other, field.name) != getattr(first, field.name):
                raise ValueError(f"vectorized members must share the PPO setting {field.name!r} (only "
                                 f"{', '.join(MEMBER_KEYS)} may differ per member)")
    return first


class PopulationPPO:
    """P members trained by one batched PPO update.

    Args:
        models: the members (one architecture); they stay usable as modules: after each update their parameters
            hold the member's new weights.
        settings: each member's PPO settings (they may differ only in :data:`MEMBER_KEYS`).
        seeds: each member's minibatch-shuffling seed (as :class:`PPO`'s ``seed``).
    """

    def __init__(self, models: Sequence[ActorCritic], settings: Sequence[PPOSettings], seeds: Sequence[int]) -> None:
        if not models or len(models) != len(settings) or len(models) != len(seeds):
            raise ValueError(f"{len(models)} members need as many settings and seeds "
                             f"(got {len(settings)} and {len(seeds)})")
        shapes = [[(name, tuple(p.shape)) for name, p in model.named_parameters()] for model in models]
        if any(shape != shapes[0] for shape in shapes):
            raise ValueError("a vectorized population needs members of one architecture (model section)")
        self.models, self.settings, self.count = list(models), shared_settings(settings), len(models)
        if self.settings.objective != "clip":
            raise ValueError(f"rl.ppo.objective={self.settings.objective}: a vectorized population trains with PPO's "
                             "clipped objective")
        device = next(models[0].parameters()).device
        losses = [_Loss(model, self.settings) for model in models]
        parameters, self.buffers = stack_module_state(losses)
        self.parameters = {name: tensor.detach().clone() for name, tensor in parameters.items()}
        self.base = copy.deepcopy(losses[0]).to("meta")
        self.acting = PolicyOutputs(copy.deepcopy(models[0])).to("meta")   # same parameter names: model.<name>
        self.member_settings = list(settings)
        self.lrs = torch.tensor([float(s.lr) for s in settings], device=device)
        self.coefficients = {key: torch.tensor([float(getattr(s, key)) for s in settings], device=device)
                             for key in LOSS_KEYS}
        self.generators = [torch.Generator().manual_seed(int(seed)) for seed in seeds]
        self.moments = {name: torch.zeros_like(tensor) for name, tensor in self.parameters.items()}
        self.squares = {name: torch.zeros_like(tensor) for name, tensor in self.parameters.items()}
        self.steps = torch.zeros(self.count, device=device)       # each member's Adam step count

    def configure(self, member: int, settings: PPOSettings) -> None:
        """A member's own settings from now on (its learning rate restarts at ``settings.lr``)."""
        shared_settings([self.settings, settings])
        self.member_settings[member] = settings
        with torch.no_grad():
            self.lrs[member] = float(settings.lr)
            for key, values in self.coefficients.items():
                values[member] = float(getattr(settings, key))

    # ---- acting ---------------------------------------------------------------------------------------------
    @torch.no_grad()
    def act(self, observations: torch.Tensor, generator: torch.Generator | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every member acts on its own rows in ONE forward: observations ``(P, B, obs)`` → sampled actions
        ``(P, B)`` or ``(P, B, A)``, their log-probabilities ``(P, B)`` and values ``(P, B)`` in reward units (as
        :meth:`ActorCritic.act` gives for one member)."""
        def one(parameters: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], observation: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
            return functional_call(self.acting, (parameters, buffers), (observation,))

        out, values = torch.vmap(one)(self.parameters, self.buffers, observations)
        if self.models[0].discrete:
            log_probs = torch.log_softmax(out, -1)
            flat = log_probs.exp().reshape(-1, out.shape[-1])
            actions = torch.multinomial(flat, 1, generator=generator).reshape(out.shape[:-1])
            return actions, log_probs.gather(-1, actions.unsqueeze(-1)).squeeze(-1), values
        log_std = self.parameters["model.log_std"].unsqueeze(1).expand_as(out)
        noise = torch.randn(out.shape, generator=generator, device=out.device)
        log_prob = (-0.5 * noise.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        return out + log_std.exp() * noise, log_prob, values

    # ---- the batched step -------------------------------------------------------------------------------------
    def _member_loss(self, parameters: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor],
                     batch: dict[str, torch.Tensor], coefficients: dict[str, torch.Tensor]
                     ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        loss, stats = functional_call(self.base, (parameters, buffers), (batch, coefficients))
        return loss, stats

    def _adam(self, grads: Mapping[str, torch.Tensor]) -> None:
        """One Adam step per member (torch's formula; each member's own lr and step count)."""
        self.steps += 1
        beta1, beta2 = BETAS
        correction1, correction2 = 1 - beta1 ** self.steps, (1 - beta2 ** self.steps).sqrt()
        for name, parameter in self.parameters.items():
            gradient, moment, square = grads[name], self.moments[name], self.squares[name]
            shape = (-1, *[1] * (parameter.dim() - 1))
            moment.mul_(beta1).add_(gradient, alpha=1 - beta1)
            square.mul_(beta2).addcmul_(gradient, gradient, value=1 - beta2)
            denominator = (square.sqrt() / correction2.view(shape)).add_(EPS)
            parameter.sub_((self.lrs / correction1).view(shape) * moment / denominator)

    def _clip(self, grads: dict[str, torch.Tensor]) -> torch.Tensor:
        """Scale each member's gradient to norm at most ``grad_clip`` (as ``clip_grad_norm_``); the norms ``(P,)``."""
        assert self.settings.grad_clip is not None, "clipped only with train.grad_clip set"
        squares = torch.stack([g.reshape(self.count, -1).square().sum(1) for g in grads.values()]).sum(0)
        norms = squares.sqrt()
        scale = (self.settings.grad_clip / (norms + 1e-6)).clamp(max=1.0)
        for name, gradient in grads.items():
            gradient.mul_(scale.view(-1, *[1] * (gradient.dim() - 1)))
        return norms

    def optimize(self, batches: Sequence[Mapping[str, torch.Tensor]], cost: int = 0) -> list[dict[str, float]]:
        """The minibatch epochs over P prepared batches (one per member, as :meth:`PPO.prepare` returns them, of
        equal size): the members' parameters change in place, each member's learning rate follows the schedule
        (``cost``: env steps so far, for the linear one); each member's mean statistics (``lr`` included)."""
        settings = self.settings
        if settings.lr_schedule == "linear":
            self.lrs.copy_(torch.tensor([linear_lr(s, cost) for s in self.member_settings]))
        self.read_buffers()
        stacked = {key: torch.stack([b[key] for b in batches]) for key in batches[0]
                   if key not in ("staleness", "explained_variance")}
        count = stacked["advantages"].shape[1]
        size = max(1, count // settings.minibatches)
        members = torch.arange(self.count, device=stacked["advantages"].device)[:, None]
        gradient = torch.vmap(grad(self._member_loss, has_aux=True))
        totals: dict[str, torch.Tensor] = {}
        updates = 0
        validate = torch.distributions.Distribution._validate_args
        torch.distributions.Distribution.set_default_validate_args(False)   # no data-dependent checks in vmap
        try:
            for _ in range(settings.epochs):
                orders = torch.stack([torch.randperm(count, generator=g) for g in self.generators])
                orders = orders.to(members.device)
                for start in range(0, count - size + 1, size):
                    index = orders[:, start:start + size]
                    minibatch = {key: value[members, index] for key, value in stacked.items()}
                    grads, stats = gradient(self.parameters, self.buffers, minibatch, self.coefficients)
                    if settings.grad_clip is not None:
                        stats["grad_norm"] = self._clip(grads)
                    with torch.no_grad():
                        self._adam(grads)
                    for key, value in stats.items():
                        totals[key] = totals.get(key, 0.0) + value.detach()
                    updates += 1
        finally:
            torch.distributions.Distribution.set_default_validate_args(validate)
        self._write_back()
        means = {key: (value / max(1, updates)).tolist() for key, value in totals.items()}
        stats = [{key: values[member] for key, values in means.items()} for member in range(self.count)]
        if settings.lr_schedule == "adaptive":
            self.lrs.copy_(torch.tensor([adapted_lr(s, float(lr), member.get("kl", 0.0))
                                         for s, lr, member in zip(self.member_settings, self.lrs, stats)]))
        for member, lr in zip(stats, self.lrs.tolist()):
            member["lr"] = lr
        return stats

    def read_buffers(self) -> None:
        """The members' normalizer statistics into the stack (the value statistics as :meth:`PPO.prepare` has just
        updated them, the observation statistics as the actors had them)."""
        with torch.no_grad():
            for member, model in enumerate(self.models):
                for name, buffer in model.named_buffers():
                    self.buffers[f"model.{name}"][member].copy_(buffer)

    def _write_back(self) -> None:
        """Copy the stacked parameters into the member modules (acting and :meth:`PPO.prepare` use those)."""
        with torch.no_grad():
            for member, model in enumerate(self.models):
                for name, parameter in model.named_parameters():
                    parameter.copy_(self.parameters[f"model.{name}"][member])

    def member_state(self, member: int) -> dict[str, Any]:
        """One member's optimizer state: its Adam moments, its learning rate."""
        return {"moments": {k: v[member].clone() for k, v in self.moments.items()},
                "squares": {k: v[member].clone() for k, v in self.squares.items()}, "lr": float(self.lrs[member]),
                "steps": float(self.steps[member])}

    def load_member(self, member: int, state: Mapping[str, Any] | None, settings: PPOSettings) -> None:
        """Put a member's weights (already in its module) into the stack, with its moments (None: fresh) and
        its settings."""
        self.configure(member, settings)
        with torch.no_grad():
            for name, parameter in self.models[member].named_parameters():
                self.parameters[f"model.{name}"][member].copy_(parameter)
            for name in self.moments:
                self.moments[name][member] = state["moments"][name] if state else 0.0
                self.squares[name][member] = state["squares"][name] if state else 0.0
            self.steps[member] = float(state.get("steps", 0.0)) if state else 0.0

    def state_dict(self) -> dict[str, Any]:
        """Moments, step count, learning rates and generator states (the weights live in the members)."""
        return {"moments": self.moments, "squares": self.squares, "steps": self.steps, "lrs": self.lrs,
                "generators": [g.get_state() for g in self.generators]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.moments = {k: v.clone() for k, v in state["moments"].items()}
        self.squares = {k: v.clone() for k, v in state["squares"].items()}
        steps = state["steps"]
        self.steps = steps.clone() if isinstance(steps, torch.Tensor) else torch.full_like(self.lrs, float(steps))
        self.lrs = state["lrs"].clone()
        for generator, saved in zip(self.generators, state["generators"]):
            generator.set_state(saved)
        with torch.no_grad():
            for member, model in enumerate(self.models):
                for name, parameter in model.named_parameters():
                    self.parameters[f"model.{name}"][member].copy_(parameter)
