"""Networks of the off-policy learners: action values for DQN (:class:`QNetwork`), a tanh-squashed Gaussian policy
(:class:`SquashedGaussianPolicy`) and an ensemble of critics ``Q(s, a)`` evaluated in one batched forward
(:class:`CriticEnsemble`) for SAC.

The acting networks have the actors' interface of :class:`~lamarckian.model.network.ActorCritic`: ``batcher``,
``act(observation, deterministic, generator) -> (action, log_prob, value)``, ``env_action`` and ``discrete``.
"""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import torch
from torch import nn
from torch.nn import functional

from .actions import FACTORED
from .network import ACTIVATIONS, ModelSettings, build_encoder, init_layer
from .observation import ObservationBatcher

LOG_STD_RANGE = (-20.0, 2.0)    # SAC's clamp of the policy's log standard deviation



def instead(action_space: gymnasium.Space) -> str:
    """The algorithms that take ``action_space`` where DQN, SAC or TD3 cannot (one clause of a refusal)."""
    if isinstance(action_space, FACTORED):
        return "rl.algorithm=ppo, impala or a3c: they take factorised action spaces"
    if isinstance(action_space, gymnasium.spaces.Discrete):
        return "rl.algorithm=dqn, ppo, impala or a3c"
    return "rl.algorithm=sac, td3, ppo, impala or a3c"

class QNetwork(nn.Module):
    """``Q(s, ·)`` for a discrete action space: ``forward(obs)`` → ``(N, A)`` in reward units.

    Args:
        dueling: a value head and an advantage head, ``Q = V + A − mean(A)`` (Wang et al. 2016).
    """

    discrete = True

    def __init__(self, observation_space: gymnasium.Space, action_space: gymnasium.Space, settings: ModelSettings,
                 dueling: bool) -> None:
        super().__init__()
        if not isinstance(action_space, gymnasium.spaces.Discrete):
            raise ValueError(f"rl.algorithm=dqn needs a discrete action space, this MDP's is {action_space} "
                             f"(use {instead(action_space)})")
        self.settings, self.action_space = settings, action_space
        self.batcher = ObservationBatcher(observation_space)
        if self.batcher.mixed:
            raise ValueError("rl.algorithm=dqn takes vector or image observations; a Dict with image parts trains with "
                             "rl.algorithm=ppo, impala or a3c (a CNN per image part)")
        self.encoder, width = build_encoder(self.batcher, settings)
        self.advantage_head = init_layer(nn.Linear(width, int(action_space.n)), 1.0)
        self.value_head = init_layer(nn.Linear(width, 1), 1.0) if dueling else None

    def prepare(self, observation: torch.Tensor) -> torch.Tensor:
        return observation.float() / 255.0 if self.batcher.image else observation

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        features = self.encoder(self.prepare(observation))
        advantage = self.advantage_head(features)
        if self.value_head is None:
            return advantage
        return self.value_head(features) + advantage - advantage.mean(-1, keepdim=True)

    @torch.no_grad()
    def act(self, observation: torch.Tensor, deterministic: bool = False, generator: torch.Generator | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Greedy actions ``(N,)``, log-probabilities 0 ``(N,)`` and their values ``(N,)`` (exploration is the
        actor's: :class:`~lamarckian.rl.exploration.EpsilonGreedy`)."""
        values, actions = self(observation).max(-1)
        return actions, torch.zeros_like(values), values

    def env_action(self, action: np.ndarray) -> int:
        return int(action)


def continuous_control(observation_space: gymnasium.Space, action_space: gymnasium.Space, algorithm: str
                       ) -> tuple[ObservationBatcher, gymnasium.spaces.Box]:
    """The batcher of vector observations and the bounded Box of actions for an algorithm of bounded continuous
    actions (SAC, TD3); ValueError naming ``algorithm`` and what takes the spaces instead for anything else."""
    if not isinstance(action_space, gymnasium.spaces.Box) or not np.all(np.isfinite(action_space.low)) \
            or not np.all(np.isfinite(action_space.high)):
        raise ValueError(f"rl.algorithm={algorithm} needs a bounded continuous (Box) action space, this MDP's is "
                         f"{action_space} (use {instead(action_space)})")
    batcher = ObservationBatcher(observation_space)
    if batcher.image or batcher.mixed:
        raise ValueError(f"rl.algorithm={algorithm} takes vector observations; this MDP's hold images "
                         "(rl.algorithm=ppo, impala or a3c take them)")
    return batcher, action_space


class SquashedGaussianPolicy(nn.Module):
    """SAC's policy: ``a = tanh(u)``, ``u ~ N(μ(s), σ(s))`` with both from one encoder; actions in ``[-1, 1]^A``,
    scaled to the action space's bounds by :meth:`env_action`."""

    discrete = False

    def __init__(self, observation_space: gymnasium.Space, action_space: gymnasium.Space,
                 settings: ModelSettings) -> None:
        super().__init__()
        self.settings = settings
        self.batcher, self.action_space = continuous_control(observation_space, action_space, "sac")
        self.encoder, width = build_encoder(self.batcher, settings)
        size = int(np.prod(self.action_space.shape))
        self.mean_head = init_layer(nn.Linear(width, size), 0.01)
        self.log_std_head = init_layer(nn.Linear(width, size), 0.01)

    def parameters_of(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Mean ``(N, A)`` and log standard deviation ``(N, A)`` (clamped to :data:`LOG_STD_RANGE`) of ``u``."""
        features = self.encoder(observation)
        return self.mean_head(features), self.log_std_head(features).clamp(*LOG_STD_RANGE)

    def sample(self, observation: torch.Tensor, generator: torch.Generator | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterized squashed actions ``(N, A)`` and their log-densities ``(N,)``: the Gaussian's minus the
        tanh's log-Jacobian ``Σ log(1 − tanh(u)²) = Σ 2 (log 2 − u − softplus(−2u))`` (the stable form)."""
        mean, log_std = self.parameters_of(observation)
        noise = torch.randn(mean.shape, generator=generator, device=mean.device)
        unsquashed = mean + log_std.exp() * noise
        gaussian = (-0.5 * noise.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        jacobian = (2.0 * (math.log(2.0) - unsquashed - functional.softplus(-2.0 * unsquashed))).sum(-1)
        return torch.tanh(unsquashed), gaussian - jacobian

    @torch.no_grad()
    def act(self, observation: torch.Tensor, deterministic: bool = False, generator: torch.Generator | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Actions ``(N, A)`` in ``[-1, 1]`` (deterministic: ``tanh(μ)``), their log-densities ``(N,)`` (0 when
        deterministic) and values 0 ``(N,)`` (the critics are the learner's)."""
        if deterministic:
            mean = self.parameters_of(observation)[0]
            zeros = torch.zeros(len(mean), device=mean.device)
            return torch.tanh(mean), zeros, zeros
        action, log_prob = self.sample(observation, generator)
        return action, log_prob, torch.zeros_like(log_prob)

    def env_action(self, action: np.ndarray) -> np.ndarray:
        """A squashed action scaled from ``[-1, 1]`` to the action space's bounds."""
        return to_bounds(action, self.action_space)


def to_bounds(action: np.ndarray, space: gymnasium.spaces.Box) -> np.ndarray:
    """An action in ``[-1, 1]^A`` (clipped there) scaled to the bounds of ``space``, in its shape."""
    action = np.asarray(action, np.float32).reshape(space.shape)
    return (space.low + (np.clip(action, -1.0, 1.0) + 1.0) * 0.5 * (space.high - space.low)).astype(np.float32)


class EnsembleLinear(nn.Module):
    """``E`` independent linear layers applied in one batched matmul: ``(E, N, in)`` → ``(E, N, out)``; each member
    initialized as ``nn.Linear`` would be."""

    def __init__(self, members: int, width_in: int, width_out: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(width_in)
        self.weight = nn.Parameter(torch.empty(members, width_in, width_out).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(members, 1, width_out).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class CriticEnsemble(nn.Module):
    """``E`` critics ``Q_i(s, a)`` (MLPs of ``model.hidden`` over the observation (``D = observation_width``) and
    the squashed action (``A = action_width``)): ``forward(obs (N, D), action (N, A))`` → ``(E, N)``."""

    def __init__(self, observation_width: int, action_width: int, settings: ModelSettings, members: int) -> None:
        super().__init__()
        width = observation_width + action_width
        layers: list[nn.Module] = []
        for width_out in settings.hidden:
            layers += [EnsembleLinear(members, width, width_out), ACTIVATIONS[settings.activation]()]
            width = width_out
        layers.append(EnsembleLinear(members, width, 1))
        self.members = members
        self.network = nn.Sequential(*layers)

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([observation, action], -1)
        return self.network(x.unsqueeze(0).expand(self.members, *x.shape)).squeeze(-1)
