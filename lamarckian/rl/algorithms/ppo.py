"""PPO: advantages (GAE with V-trace-style truncated importance weights), the clipped loss, the update.

Read top to bottom like CleanRL's ``ppo.py``; every trick is a named setting of :class:`PPOSettings`.
Shapes: ``T`` steps per segment, ``L`` lanes, ``N = T * L`` samples in a batch.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np
import torch
from torch import nn

from ...model import ActorCritic
from ...model.normalizer import RunningNormalizer
from ..distributed import Ranks, owned_samples
from ..segment import Segment
from .optim import OwnsAdam
from .ppo_settings import PPOSettings

SCORE_BYTES = 256 << 20     # float input of one chunk of the batch's re-scoring, at most (bytes)


def score(model: ActorCritic, observations: torch.Tensor, actions: torch.Tensor,
          sequences: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities ``(N,)`` of ``actions`` and normalized values ``(N,)`` of a flat batch, the current
    network's (no gradient). A feed-forward network goes over the batch in chunks of at most
    :data:`SCORE_BYTES` of float input, so a batch of images is never converted to float whole (a recurrent one
    replays its ``sequences`` at once)."""
    row = max(1, observations[0].numel() * 4)
    chunk = len(observations) if sequences else max(1, SCORE_BYTES // row)
    scored = []
    for start in range(0, len(observations), chunk):
        part = {"observations": observations[start:start + chunk], **sequences}
        distribution, normalized = model.replay(part)
        scored.append((model.log_prob(distribution, actions[start:start + chunk]), normalized))
    return torch.cat([s[0] for s in scored]), torch.cat([s[1] for s in scored])


def vtrace_advantages(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, truncated: torch.Tensor,
                      final_values: torch.Tensor, ratios: torch.Tensor, discount: float, lam: float, rho: float
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and value targets ``[T, L]``.

    GAE(λ) where every TD error is weighted by ``min(rho, π/μ)`` and every trace by ``λ·min(1, π/μ)``
    (V-trace); with on-policy data (ratio 1) this is exactly GAE. An episode cut by a time limit is
    bootstrapped from the value of its last observation (``final_values``), a terminated one from 0.

    Args:
        rewards, dones, truncated, final_values, ratios: ``[T, L]``.
        values: ``[T + 1, L]`` in reward units (the last row bootstraps the segment).
    """
    steps = rewards.shape[0]
    rewards = rewards + discount * final_values * truncated
    continues = 1.0 - dones.float()
    weights = ratios.clamp(max=rho)
    traces = lam * ratios.clamp(max=1.0)
    deltas = weights * (rewards + discount * values[1:] * continues - values[:-1])
    advantages = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in range(steps - 1, -1, -1):
        running = deltas[t] + discount * traces[t] * continues[t] * running
        advantages[t] = running
    return advantages, advantages + values[:-1]


def vtrace_policy_advantages(rewards: torch.Tensor, values: torch.Tensor, targets: torch.Tensor, dones: torch.Tensor,
                             truncated: torch.Tensor, final_values: torch.Tensor, discount: float) -> torch.Tensor:
    """IMPALA's policy-gradient advantages ``[T, L]``: ``r_t + γ v_{t+1} − V(x_t)`` with ``v`` the V-trace targets
    (``targets [T, L]``; the segment's last step bootstraps from ``values[T]``, an episode cut by a time limit from
    its last observation's value, a terminated one from 0). ``values``: ``[T + 1, L]`` in reward units."""
    following = torch.cat([targets[1:], values[-1:]])
    continues = 1.0 - dones.float()
    return rewards + discount * (final_values * truncated + following * continues) - values[:-1]


def episode_starts(dones: torch.Tensor) -> torch.Tensor:
    """``[T, L]`` bool: the step starts an episode because the step before it ended one (a recurrent state is
    zeroed there). Step 0 is never marked: the actor's state stored before it is already a fresh one."""
    starts = torch.zeros_like(dones, dtype=torch.bool)
    starts[1:] = dones[:-1].bool()
    return starts


def explained_variance(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``1 − Var(target − predicted) / Var(target)`` (a 0-d tensor): 1 when the critic is exact, 0 when it tells
    nothing, negative when it misleads; nan for a constant target."""
    return 1.0 - (target - predicted).var() / target.var()


@dataclasses.dataclass(frozen=True)
class MinibatchScale:
    """A minibatch spread over ranks (:mod:`.distributed`): its size over all ranks, and the mean and (unbiased)
    standard deviation of all its advantages."""

    count: float
    advantage_mean: torch.Tensor
    advantage_std: torch.Tensor


def ppo_loss(model: ActorCritic, batch: Mapping[str, torch.Tensor], settings: PPOSettings,
             coefficients: Mapping[str, torch.Tensor] | None = None, scale: MinibatchScale | None = None
             ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The clipped surrogate + ``critic`` × the (clipped) value's mean squared error − ``entropy`` × the entropy for one
    minibatch ``(n,)`` (the value error in normalized units where ``model.normalize_value``). ``coefficients``
    may replace ``clip``, ``critic`` and ``entropy`` of ``settings`` by 0-d tensors (a vectorized population's
    member values). ``scale``: this is a rank's share of a minibatch; means are sums over ``scale.count`` and the
    advantages are normalized by the whole minibatch's moments (the ranks' losses and statistics then add up to the
    whole minibatch's)."""
    clip, critic, entropy_weight = (settings.clip, settings.critic, settings.entropy) if coefficients is None else \
        (coefficients["clip"], coefficients["critic"], coefficients["entropy"])
    average = (lambda x: x.mean()) if scale is None else (lambda x: x.sum() / scale.count)  # noqa: E731
    distribution, value = model.replay(batch)
    log_prob = model.log_prob(distribution, batch["actions"])
    log_ratio = log_prob - batch["log_probs"]
    ratio = log_ratio.exp()
    advantages = batch["advantages"]
    if settings.normalize_advantage and (advantages.numel() if scale is None else scale.count) > 1:
        mean, std = (advantages.mean(), advantages.std()) if scale is None else \
            (scale.advantage_mean, scale.advantage_std)
        advantages = (advantages - mean) / (std + 1e-8)
    policy_loss = average(torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - clip, 1 + clip)))
    target, old_value = batch["targets"], batch["old_values"]
    value_loss = (value - target).square()
    if settings.clip_value is not None:
        clipped = old_value + (value - old_value).clamp(-settings.clip_value, settings.clip_value)
        value_loss = torch.max(value_loss, (clipped - target).square())
    value_loss = average(value_loss)
    entropy = average(model.entropy(distribution))
    loss = policy_loss + critic * value_loss - entropy_weight * entropy
    with torch.no_grad():
        stats = {"loss/policy": policy_loss, "loss/value": value_loss, "entropy": entropy,
                 "kl": average((ratio - 1) - log_ratio), "clip_fraction": average(((ratio - 1).abs() > clip).float())}
    return loss, stats


def vtrace_loss(model: ActorCritic, batch: Mapping[str, torch.Tensor], settings: PPOSettings
                ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """IMPALA's loss for one minibatch ``(n,)`` (Espeholt et al. 2018): the policy gradient weighted by the truncated
    importance weights ``min(ρ̄, π/μ)`` (constants), ``critic`` × the value's mean squared error against the V-trace
    targets, ``entropy`` × the entropy bonus."""
    distribution, value = model.replay(batch)
    log_prob = model.log_prob(distribution, batch["actions"])
    log_ratio = log_prob - batch["log_probs"]
    ratio = log_ratio.detach().exp()
    advantages = batch["advantages"]
    if settings.normalize_advantage and advantages.numel() > 1:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    policy_loss = -(ratio.clamp(max=settings.rho) * advantages * log_prob).mean()
    value_loss = (value - batch["targets"]).square().mean()
    entropy = model.entropy(distribution).mean()
    loss = policy_loss + settings.critic * value_loss - settings.entropy * entropy
    with torch.no_grad():
        stats = {"loss/policy": policy_loss, "loss/value": value_loss, "entropy": entropy,
                 "kl": ((ratio - 1) - log_ratio).mean(), "clip_fraction": (ratio > settings.rho).float().mean()}
    return loss, stats


def linear_lr(settings: PPOSettings, cost: int) -> float:
    """The linear schedule's learning rate after ``cost`` env steps (0 at ``lr_horizon``)."""
    return settings.lr * max(0.0, 1.0 - cost / settings.lr_horizon)


def adapted_lr(settings: PPOSettings, lr: float, kl: float) -> float:
    """The adaptive schedule's next learning rate (rl_games): ÷1.5 when the update's mean KL exceeded twice
    ``kl_target``, ×1.5 when it stayed under half of it (kept within [1e-6, 1e-2])."""
    if kl > 2.0 * settings.kl_target:
        return max(1e-6, lr / 1.5)
    if kl < 0.5 * settings.kl_target:
        return min(1e-2, lr * 1.5)
    return lr


def sequence_minibatch(batch: Mapping[str, torch.Tensor], lanes: torch.Tensor) -> dict[str, torch.Tensor]:
    """The sequences ``lanes (m,)`` of a recurrent batch (flat fields ``(T·L, ...)`` in ``[T, L]`` order, ``states
    (L, S)``, ``starts [T, L]``): flat fields ``(T·m, ...)`` in ``[T, m]`` order, ``states (m, S)``, ``starts
    [T, m]``."""
    steps, count = batch["starts"].shape
    rows = (torch.arange(steps, device=lanes.device).unsqueeze(1) * count + lanes.unsqueeze(0)).reshape(-1)
    minibatch = {key: value[rows] for key, value in batch.items() if key not in ("states", "starts")}
    return {**minibatch, "states": batch["states"][lanes], "starts": batch["starts"][:, lanes]}


def joined(segments: list[Segment], name: str, device: torch.device) -> torch.Tensor:
    """The segments' field ``name`` (``[T, L_i, ...]`` each) joined along the lanes, on ``device``."""
    parts = [getattr(s, name) for s in segments]
    if isinstance(parts[0], torch.Tensor):
        return torch.cat(parts, dim=1).to(device)
    return torch.from_numpy(np.concatenate(parts, axis=1)).to(device)


def recurrent_sequences(model: ActorCritic, segments: list[Segment], device: torch.device) -> dict[str, torch.Tensor]:
    """A recurrent network's ``states (L, S)`` before each lane's first step and ``starts [T, L]``; {} for a
    feed-forward one."""
    if not getattr(model, "state_size", 0):
        return {}
    if any(s.states is None for s in segments):
        raise ValueError("a recurrent network's segments must carry the actors' states")
    return {"states": torch.from_numpy(np.concatenate([s.states for s in segments])).to(device),
            "starts": episode_starts(joined(segments, "dones", device))}


class PPO(OwnsAdam):
    """Owns the optimizer; :meth:`update` takes segments ``[T, L]`` and returns statistics."""

    def __init__(self, model: ActorCritic, settings: PPOSettings, seed: int = 0, ranks: Ranks | None = None) -> None:
        self.model, self.settings, self.ranks = model, settings, ranks
        if ranks is not None and model.state_size:
            raise ValueError("model.recurrent trains on one learner process (train.gpus: 1)")
        self.lr = settings.lr
        self.generator = torch.Generator().manual_seed(seed)   # the same on every rank: one global permutation
        if ranks is not None:
            ranks.sync_parameters(model)

    adam_eps = 1e-5

    def optimized(self) -> Any:
        return self.model.parameters()

    @property
    def max_staleness(self) -> int:
        """Segments more weight versions behind than this are dropped (``rl.ppo.max_staleness``)."""
        return self.settings.max_staleness

    def state_dict(self) -> dict[str, Any]:
        """Optimizer moments, the lr where the schedule stands, the minibatch shuffling generator."""
        return {"optimizer": self.optimizer.state_dict(), "lr": self.lr, "ppo_generator": self.generator.get_state()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Undo :meth:`state_dict` (a checkpoint of format 1 has no generator: it keeps its own)."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.set_lr(float(state["lr"]))
        if state.get("ppo_generator") is not None:
            self.generator.set_state(state["ppo_generator"])

    def prepare(self, segments: list[Segment], version: int) -> dict[str, torch.Tensor]:
        """Flat batch ``(N, ...)`` in ``[T, L]`` order with advantages and targets computed by the current network,
        on its device; a recurrent network's batch also holds ``states (L, S)`` and ``starts [T, L]`` (an episode
        starts at the step: the previous one ended it). Segment fields are numpy arrays (from remote actors) or
        tensors (from a vectorized task, already there). The observation normalizer is left as the actors had it
        (:meth:`fold_observations` folds the batch in after the update), so fresh data scores a ratio of 1 and its
        advantages are plain GAE."""
        model = self.model
        device = next(model.parameters()).device

        def cat(name: str) -> torch.Tensor:
            return joined(segments, name, device)

        observations = cat("observations")
        steps, lanes = observations.shape[:2]
        actions, behaviour = cat("actions"), cat("log_probs")
        sequences = recurrent_sequences(model, segments, device)
        with torch.no_grad():
            flat = observations.reshape(steps * lanes, *observations.shape[2:])
            log_prob, normalized = score(model, flat, actions.reshape(steps * lanes, *actions.shape[2:]), sequences)
            ratios = (log_prob.reshape(steps, lanes) - behaviour).exp()
            values = model.denormalize_value(normalized).reshape(steps, lanes)
            bootstrap = cat("values")[-1:]  # value of the observation after each segment, as the actor saw it
            rewards, dones, truncated, final_values = cat("rewards"), cat("dones"), cat("truncated").float(), \
                cat("final_values")
            advantages, targets = vtrace_advantages(rewards, torch.cat([values, bootstrap]), dones, truncated,
                                                    final_values, ratios, self.settings.discount, self.settings.gae,
                                                    self.settings.rho)
            if self.settings.objective == "vtrace":
                advantages = vtrace_policy_advantages(rewards, torch.cat([values, bootstrap]), targets, dones,
                                                      truncated, final_values, self.settings.discount)
            explained = explained_variance(values, targets)
        if model.settings.normalize_value:        # targets, old values and the critic's output in the NEW statistics
            normalizer = model.value_normalizer
            self._fold(normalizer, targets.reshape(-1))
            targets = (targets - normalizer.mean) / normalizer.std()
            old_values = (values - normalizer.mean) / normalizer.std()
        else:
            old_values = values
        staleness = torch.tensor([version - s.version for s in segments], dtype=torch.float32, device=device)
        return {"observations": flat, "actions": actions.reshape(steps * lanes, *actions.shape[2:]),
                "log_probs": behaviour.reshape(-1), "advantages": advantages.reshape(-1),
                "targets": targets.reshape(-1), "old_values": old_values.reshape(-1), "staleness": staleness,
                "explained_variance": explained, **sequences}

    def fold_observations(self, batch: Mapping[str, torch.Tensor]) -> None:
        """Fold a prepared batch's observations ``(N, ...)`` into the observation normalizer (none: nothing), after
        the epochs over it: every ratio and value of the batch is computed in the statistics the actors acted with,
        and the next weights carry the new ones."""
        if self.model.observation_normalizer is not None:
            self._fold(self.model.observation_normalizer, self.model.normalized_part(batch["observations"]))

    def _fold(self, normalizer: RunningNormalizer, batch: torch.Tensor) -> None:
        """Fold ``batch`` into a running normalizer (every rank's rows, with ranks)."""
        if self.ranks is None:
            normalizer.update(batch)
        else:
            normalizer.update_moments(*self.ranks.moments(batch.reshape(-1, *normalizer.mean.shape)))

    def update(self, segments: list[Segment], version: int, cost: int) -> dict[str, float]:
        """One PPO update over the segments; ``cost`` (env steps so far) drives the linear lr schedule."""
        settings = self.settings
        if settings.lr_schedule == "linear":
            self.set_lr(linear_lr(settings, cost))
        batch = self.prepare(segments, version)
        staleness = batch.pop("staleness")
        explained = batch.pop("explained_variance")
        count = batch["advantages"].shape[0]
        totals, updates = self._epochs(batch, sum(int(s.observations.shape[1]) for s in segments))
        self.fold_observations(batch)
        result = {key: float(value) / max(1, updates) for key, value in totals.items()}
        result["explained_variance"] = float(explained)
        if settings.lr_schedule == "adaptive":
            self.set_lr(adapted_lr(settings, self.lr, result.get("kl", 0.0)))
        result["lr"] = self.lr
        std = self.model.gaussian_std
        if std is not None:
            result["policy/std"] = float(std.mean())
        result["staleness"] = float(staleness.mean())          # the policy lag: weight versions behind
        result["staleness_max"] = float(staleness.max())
        result["samples"] = float(count * (self.ranks.size if self.ranks else 1))
        return result

    def _epochs(self, batch: Mapping[str, torch.Tensor], lanes: int) -> tuple[dict[str, torch.Tensor], int]:
        """The minibatch steps of ``settings.epochs`` passes over ``batch`` (``lanes`` of this rank); summed
        statistics (over the ranks too) and the number of steps. With ranks, each minibatch is drawn from the global
        permutation, each rank computes its samples' share of the loss, and the gradients are summed: every rank
        takes the step one process would take on the whole batch."""
        settings, ranks, parameters = self.settings, self.ranks, list(self.model.parameters())
        recurrent = "states" in batch                   # minibatches of whole sequences (lanes)
        count = batch["starts"].shape[1] if recurrent else batch["advantages"].shape[0] * (ranks.size if ranks else 1)
        size = max(1, count // settings.minibatches)
        device = batch["advantages"].device
        totals: dict[str, torch.Tensor] = {}
        updates = 0
        for _ in range(settings.epochs):
            order = torch.randperm(count, generator=self.generator).to(device)
            for start in range(0, count - size + 1, size):
                index, scale = order[start:start + size], None
                if ranks is not None:
                    mine, local = owned_samples(index, lanes, ranks)
                    index = local[mine]
                    scale = self._scale(batch["advantages"][index], size)
                minibatch = sequence_minibatch(batch, index) if recurrent else {k: v[index] for k, v in batch.items()}
                if settings.objective == "vtrace":
                    if ranks is not None:
                        raise ValueError("rl.ppo.objective=vtrace (IMPALA) updates on one process")
                    loss, stats = vtrace_loss(self.model, minibatch, settings)
                else:
                    loss, stats = ppo_loss(self.model, minibatch, settings, scale=scale)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if ranks is not None:
                    ranks.sum_gradients(parameters)
                if settings.grad_clip is not None:
                    stats["grad_norm"] = nn.utils.clip_grad_norm_(parameters, settings.grad_clip)
                self.optimizer.step()
                for key, value in stats.items():   # summed on the device: one synchronization per update
                    totals[key] = totals.get(key, 0.0) + value.detach()
                updates += 1
        if ranks is not None and totals:                # each rank holds its share of the minibatch means
            keys = [key for key in totals if key != "grad_norm"]    # (the gradient norm is the same everywhere)
            summed = ranks.sum(torch.stack([torch.as_tensor(totals[key], device=device) for key in keys]))
            totals.update(zip(keys, summed))
        return totals, updates

    def _scale(self, advantages: torch.Tensor, size: int) -> MinibatchScale:
        """The whole minibatch's size and advantage moments, this rank holding ``advantages`` of it."""
        assert self.ranks is not None, "scaled over the ranks' minibatch only with train.gpus > 1"
        sums = self.ranks.sum(torch.stack([advantages.sum(), advantages.square().sum()]))
        mean = sums[0] / size
        variance = (sums[1] - size * mean.square()) / max(1, size - 1)
        return MinibatchScale(float(size), mean, variance.clamp(min=0.0).sqrt())
