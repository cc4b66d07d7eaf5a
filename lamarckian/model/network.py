"""Actor-critic networks: MLP or Nature-CNN encoders, categorical or Gaussian heads, normalizers in buffers."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
from typing import Any, Iterator, Mapping, TypeVar

import gymnasium
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Normal

from ..config.sections import Section
from ..said import warn_once
from .actions import FACTORED, FactoredActions, FactoredDistribution
from .normalizer import RunningNormalizer
from .observation import SMALLEST_FRAME, ObservationBatcher, small_frames

LOG = logging.getLogger("lamarckian.model")
ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "silu": nn.SiLU}
BOUNDS = ("clip", "tanh")
RECURRENT = ("lstm", "gru")
Distribution = torch.distributions.Distribution | FactoredDistribution   # what :meth:`ActorCritic.distribution` gives
ILLEGAL = -1e9   # the logit of a masked action: exp() is 0, and 0 × ILLEGAL keeps entropies finite


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Torch's CPU random stream seeded with ``seed`` inside the block (a network initialized there is the same for
    the same seed) and put back as it was afterwards: the process's own stream is the entry point's business."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


@dataclasses.dataclass(frozen=True)
class ModelSettings(Section):
    """The ``model`` keys.

    Attributes:
        hidden: widths of the MLP layers (after the CNN for images).
        activation: one of tanh, relu, elu, silu.
        shared: one encoder for policy and value (else two).
        normalize_observation: running mean/std normalization of vector observations.
        normalize_value: the critic predicts returns normalized by their running statistics.
        log_std: initial log standard deviation of Gaussian actions (with ``sde``: of each exploration weight).
        sde: generalized state-dependent exploration (gSDE; 0: off): a Gaussian action is ``mean(s) + z(s)ᵀθ``,
            ``z`` the policy's last features ``(W,)`` and ``θ (W, A)`` drawn with standard deviations
            ``exp(log_std)`` (a ``(W, A)`` parameter), held for ``sde`` steps of an environment (the acting
            policy's business: :meth:`ActorCritic.act_sde`). Given ``s`` the action is Gaussian with variance
            ``z(s)² · exp(2 log_std)`` per dimension, which :meth:`ActorCritic.distribution` uses.
        bound: how a Gaussian action meets the action space's bounds: ``clip`` (cut at the bounds) or ``tanh``
            (squashed into them; the policy's log-probabilities stay those of the unsquashed sample, which
            leaves PPO's ratios unchanged).
        recurrent: None, or ``lstm`` / ``gru``: a recurrent core after the encoder (one per encoder) whose hidden
            state the actors keep per environment (:class:`RecurrentCore`).
        central_value: the critic also sees the game's global state (observations ``{observation, state}``, the
            policy the ``observation`` only; MAPPO's centralized critic). Needs ``shared: false``.
    """

    KEY = "model"

    hidden: tuple[int, ...]
    activation: str
    shared: bool
    normalize_observation: bool
    normalize_value: bool
    log_std: float
    sde: int
    bound: str
    recurrent: str | None
    central_value: bool

    def __post_init__(self) -> None:
        if self.central_value and self.shared:
            raise ValueError("model.central_value needs model.shared: false (the policy must not see the state)")
        if self.recurrent is not None and self.recurrent not in RECURRENT:
            raise ValueError(f"model.recurrent={self.recurrent!r}: expected null or one of {RECURRENT}")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"model.activation={self.activation!r}: expected one of {sorted(ACTIVATIONS)}")
        if self.bound not in BOUNDS:
            raise ValueError(f"model.bound={self.bound!r}: expected one of {BOUNDS}")
        if self.sde < 0:
            raise ValueError(f"model.sde={self.sde}: steps between exploration draws, 0 (off) or more")
        if self.sde and self.recurrent is not None:
            raise ValueError(f"model.sde={self.sde}: state-dependent exploration acts with feed-forward networks "
                             f"(model.recurrent={self.recurrent!r})")


Layer = TypeVar("Layer", nn.Linear, nn.Conv2d)


def init_layer(layer: Layer, gain: float) -> Layer:
    """``layer`` with orthogonal weights of ``gain`` and zero biases."""
    nn.init.orthogonal_(layer.weight, gain)
    if layer.bias is not None:
        nn.init.zeros_(layer.bias)
    return layer


def nature_cnn(shape: tuple[int, ...]) -> tuple[nn.Sequential, int]:
    """The Nature DQN convolutions for frames ``(C, H, W)`` (scaled to [0, 1]; at least :data:`SMALLEST_FRAME`
    pixels a side), flattened; its output width."""
    channels, height, width = shape
    cnn = nn.Sequential(init_layer(nn.Conv2d(channels, 32, 8, 4), math.sqrt(2)), nn.ReLU(),
                        init_layer(nn.Conv2d(32, 64, 4, 2), math.sqrt(2)), nn.ReLU(),
                        init_layer(nn.Conv2d(64, 64, 3, 1), math.sqrt(2)), nn.ReLU(), nn.Flatten())
    with torch.no_grad():
        return cnn, int(cnn(torch.zeros(1, channels, height, width)).shape[1])


def mlp(width_in: int, settings: ModelSettings) -> tuple[list[nn.Module], int]:
    """The layers of ``model.hidden`` after ``width_in`` inputs; their output width."""
    layers: list[nn.Module] = []
    for width_out in settings.hidden:
        layers += [init_layer(nn.Linear(width_in, width_out), math.sqrt(2)), ACTIVATIONS[settings.activation]()]
        width_in = width_out
    return layers, width_in


class MixedEncoder(nn.Module):
    """A Dict or Tuple observation with image parts (what stable-baselines3's MultiInputPolicy takes): a Nature CNN
    per image part and the vector parts as they are, side by side, then the MLP of ``model.hidden``. Its input is
    :meth:`ActorCritic.prepare`'s ``(N, D + pixels)`` float row: the normalized vector ``(D,)``, then each image's
    pixels in [0, 1]."""

    def __init__(self, batcher: ObservationBatcher, settings: ModelSettings) -> None:
        super().__init__()
        self.vector_size = batcher.vector_size
        self.shapes = [shape for _, shape, _ in batcher.frames]
        cnns = [nature_cnn(shape) for shape in self.shapes]
        self.cnns = nn.ModuleList(cnn for cnn, _ in cnns)
        layers, self.width = mlp(self.vector_size + sum(width for _, width in cnns), settings)
        self.mlp = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features, offset = [x[:, :self.vector_size]], self.vector_size
        for cnn, shape in zip(self.cnns, self.shapes):
            size = int(np.prod(shape))
            features.append(cnn(x[:, offset:offset + size].reshape(-1, *shape)))
            offset += size
        return self.mlp(torch.cat(features, -1))


def build_encoder(batcher: ObservationBatcher, settings: ModelSettings) -> tuple[nn.Module, int]:
    """The Nature CNN (images; one per image part of a mixed Dict) and the MLP of ``model.hidden``; the module and
    its output width."""
    for channels, height, width in small_frames(batcher.space):
        warn_once(LOG, f"image observations of {height}x{width} pixels ({channels} channels) are smaller than the "
                       f"Nature CNN's {SMALLEST_FRAME}x{SMALLEST_FRAME}: the MLP takes them as a vector (mdp.resize "
                       "makes them CNN input)")
    if batcher.mixed:
        encoder = MixedEncoder(batcher, settings)
        return encoder, encoder.width
    layers: list[nn.Module] = []
    if batcher.image:
        cnn, width_in = nature_cnn(batcher.shape)
        layers += list(cnn)
    else:
        width_in = batcher.shape[0]
    hidden, width_out = mlp(width_in, settings)
    return nn.Sequential(*layers, *hidden), width_out


def split_mixed(batcher: ObservationBatcher, rows: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Mixed rows ``(N, B)`` uint8 (:class:`ObservationBatcher`) → the vector part ``(N, D)`` float32 and each
    image part ``(N, C, H, W)`` uint8."""
    vector = rows[:, :4 * batcher.vector_size].contiguous().view(torch.float32)
    frames, offset = [], 4 * batcher.vector_size
    for _, shape, _ in batcher.frames:
        size = int(np.prod(shape))
        frames.append(rows[:, offset:offset + size].reshape(-1, *shape))
        offset += size
    return vector, frames


class RecurrentCore(nn.Module):
    """An LSTM or GRU cell of width ``W`` over encoder features; its state is one flat row per environment
    (``S = 2W`` for an LSTM: ``h`` then ``c``; ``W`` for a GRU), zero at an episode's start."""

    def __init__(self, kind: str, width: int) -> None:
        super().__init__()
        self.kind, self.width = kind, width
        self.cell = nn.LSTMCell(width, width) if kind == "lstm" else nn.GRUCell(width, width)
        self.state_size = 2 * width if kind == "lstm" else width

    def forward(self, features: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Features ``(N, W)`` and state ``(N, S)`` → output ``(N, W)`` and the next state ``(N, S)``."""
        if self.kind == "lstm":
            hidden, cell = self.cell(features, (state[:, :self.width], state[:, self.width:]))
            return hidden, torch.cat([hidden, cell], -1)
        hidden = self.cell(features, state)
        return hidden, hidden


class ActorCritic(nn.Module):
    """Policy and value for one player's spaces.

    ``forward(obs)`` takes a batch from :class:`ObservationBatcher` (``(N, D)`` float32 or ``(N, C, H, W)`` uint8)
    and returns the action distribution and the critic's normalized value ``(N,)``;
    :meth:`value` returns values in reward units. With ``model.recurrent`` the network also carries a state
    ``(N, S)`` per environment: :meth:`act_step` acts one step, :meth:`unroll` replays sequences ``[T, L]``.
    """

    def __init__(self, observation_space: gymnasium.Space, action_space: gymnasium.Space,
                 settings: ModelSettings | None = None) -> None:
        super().__init__()
        self.settings = settings = settings or ModelSettings.defaults()
        self.batcher = ObservationBatcher(observation_space)
        self.action_space = action_space
        policy_input, self.private = self.batcher, None     # central value: the policy sees the first `private`
        if settings.central_value:
            if not isinstance(observation_space, gymnasium.spaces.Dict) or \
                    list(observation_space.spaces) != ["observation", "state"]:
                raise ValueError("model.central_value needs observations {observation, state} (the actors add the "
                                 f"MDP's global state), got {observation_space}")
            policy_input = ObservationBatcher(observation_space["observation"])
            if policy_input.image:
                raise ValueError("model.central_value takes vector observations, not images")
            self.private = policy_input.shape[0]
        if self.batcher.mixed and settings.central_value:
            raise ValueError("model.central_value takes vector observations, not a Dict with images")
        if self.batcher.image or (self.batcher.mixed and not self.batcher.vector_size):
            self.observation_normalizer = None
        else:
            self.observation_normalizer = RunningNormalizer((self.batcher.vector_size,) if self.batcher.mixed
                                                            else self.batcher.shape)
        self.value_normalizer = RunningNormalizer(())
        self.actor_encoder, width = build_encoder(policy_input, settings)
        self.critic_encoder = self.actor_encoder if settings.shared else build_encoder(self.batcher, settings)[0]
        self.actor_core = self.critic_core = None
        if settings.recurrent is not None:
            self.actor_core = RecurrentCore(settings.recurrent, width)
            self.critic_core = None if settings.shared else RecurrentCore(settings.recurrent, width)
        self.mask = policy_input.mask
        self.factored: FactoredActions | None = None     # MultiDiscrete, MultiBinary, Dict, Tuple: one head per part
        self.discrete = isinstance(action_space, gymnasium.spaces.Discrete)
        if self.discrete:
            assert isinstance(action_space, gymnasium.spaces.Discrete)
            self.policy_head = init_layer(nn.Linear(width, int(action_space.n)), 0.01)
        elif isinstance(action_space, gymnasium.spaces.Box):
            size = int(np.prod(action_space.shape))
            self.policy_head = init_layer(nn.Linear(width, size), 0.01)
            shape = (width, size) if settings.sde else (size,)       # gSDE: a deviation per exploration weight
            self.log_std = nn.Parameter(torch.full(shape, settings.log_std))
        elif isinstance(action_space, FACTORED):
            self.factored = self._factor(action_space, settings, width)
        else:
            raise TypeError(f"action space {action_space} is not supported (Discrete, Box, MultiDiscrete, "
                            "MultiBinary, and Dict or Tuple of those)")
        self._check_mask(action_space)
        self.value_head = init_layer(nn.Linear(width, 1), 1.0)

    def _factor(self, action_space: gymnasium.Space, settings: ModelSettings, width: int) -> FactoredActions:
        """The head of a factorised action space: every part's logits and Gaussian means from one layer, a log
        standard deviation per Gaussian dimension."""
        factored = FactoredActions(action_space)
        if settings.sde:
            raise ValueError(f"model.sde={settings.sde}: state-dependent exploration is for Box actions; this action "
                             f"space is {action_space}")
        self.policy_head = init_layer(nn.Linear(width, factored.head), 0.01)
        if factored.gaussian:
            self.log_std = nn.Parameter(torch.full((factored.gaussian,), settings.log_std))
        return factored

    def _check_mask(self, action_space: gymnasium.Space) -> None:
        """An ``action_mask`` in the observations must flag every categorical choice (a Discrete's, or every
        element's of a MultiDiscrete/MultiBinary: their legal flags side by side)."""
        if self.mask is None:
            return
        width = self.mask.stop - self.mask.start
        choices = int(action_space.n) if isinstance(action_space, gymnasium.spaces.Discrete) else \
            self.factored.logits if self.factored is not None and not self.factored.gaussian else None
        if choices is None:
            raise ValueError(f"the observations carry an action_mask but the action space {action_space} is not "
                             "discrete: masks apply to categorical actions only")
        if width != choices:
            raise ValueError(f"the observations' action_mask has {width} flags, the action space {action_space} has "
                             f"{choices} choices (a flag per choice, MultiDiscrete elements side by side)")

    @property
    def gaussian_std(self) -> torch.Tensor | None:
        """The standard deviations of the Gaussian actions (their learned parameter, exponentiated); None when no
        part of the action is Gaussian."""
        log_std = getattr(self, "log_std", None)
        return None if log_std is None else log_std.detach().exp()

    def prepare(self, observation: torch.Tensor) -> torch.Tensor:
        """Scale images to [0, 1]; normalize vectors (if configured); a mixed row becomes its normalized vector
        followed by its images' pixels in [0, 1] (:class:`MixedEncoder`'s input)."""
        if self.batcher.image:
            return observation.float() / 255.0
        if self.batcher.mixed:
            vector, frames = split_mixed(self.batcher, observation)
            if self.observation_normalizer is not None:
                vector = self.observation_normalizer(vector)
            return torch.cat([vector, *(frame.reshape(len(frame), -1).float() / 255.0 for frame in frames)], -1)
        if self.observation_normalizer is not None:       # model.normalize_observation
            return self.observation_normalizer(observation)
        return observation

    def normalized_part(self, observations: torch.Tensor) -> torch.Tensor:
        """What the observation normalizer learns from, of a batch ``(N, ...)``: the vectors (a mixed row's
        vector part)."""
        return split_mixed(self.batcher, observations)[0] if self.batcher.mixed else observations

    def mask_flags(self, observation: torch.Tensor) -> torch.Tensor:
        """``(N, choices)`` legal flags of a batch whose observations carry an ``action_mask``."""
        assert self.mask is not None, "the observations carry no action_mask"
        vector = split_mixed(self.batcher, observation)[0] if self.batcher.mixed else observation
        return vector[..., self.mask]

    @property
    def state_size(self) -> int:
        """Width ``S`` of the recurrent state (0: a feed-forward network)."""
        return sum(core.state_size for core in (self.actor_core, self.critic_core) if core is not None)

    def initial_state(self, count: int) -> torch.Tensor:
        """``(count, S)`` zeros: the state at an episode's start."""
        return torch.zeros(count, self.state_size, device=self.value_head.weight.device)

    def _heads(self, actor: torch.Tensor, critic: torch.Tensor, observation: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy head output ``(N, A)`` (illegal actions' logits :data:`ILLEGAL` where the observation carries a
        mask; with ``model.sde`` ``(N, 2A)``: the means, then the log standard deviations the features give) and
        the normalized value ``(N,)`` from actor and critic features."""
        out = self.policy_head(actor)
        if self.mask is not None:
            out = out.masked_fill(self.mask_flags(observation) < 0.5, ILLEGAL)
        if self.settings.sde and not self.discrete:
            out = torch.cat([out, self._sde_log_std(actor)], -1)
        return out, self.value_head(critic).squeeze(-1)

    def _sde_log_std(self, features: torch.Tensor) -> torch.Tensor:
        """gSDE's ``(N, A)`` log standard deviations of ``z(s)ᵀθ`` for features ``(N, W)`` (the features detached,
        as stable-baselines3's default: exploration does not train the encoder)."""
        variance = features.detach().square() @ (2.0 * self.log_std).exp()
        return 0.5 * torch.log(variance + 1e-6)

    def action_mean(self, out: torch.Tensor) -> torch.Tensor:
        """The Gaussian means ``(N, A)`` of policy head outputs (the logits of a categorical policy)."""
        return out.chunk(2, -1)[0] if self.settings.sde and not self.discrete else out

    def _encode(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.prepare(observation)
        features = self.actor_encoder(x if self.private is None else x[..., :self.private])
        return features, features if self.settings.shared else self.critic_encoder(x)

    def _recur(self, actor: torch.Tensor, critic: torch.Tensor, state: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Encoder features through the recurrent cores: actor and critic features and the next state ``(N, S)``."""
        assert self.actor_core is not None, "a feed-forward network has no recurrent state"
        split = self.actor_core.state_size
        actor, actor_state = self.actor_core(actor, state[:, :split])
        if self.critic_core is None:
            return actor, actor, actor_state
        critic, critic_state = self.critic_core(critic, state[:, split:])
        return actor, critic, torch.cat([actor_state, critic_state], -1)

    def outputs(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Policy head output ``(N, A)`` (logits, or Gaussian means) and the critic's normalized value ``(N,)``.
        Where the observation carries an action mask, illegal actions' logits are :data:`ILLEGAL` (probability 0 in
        sampling, never the argmax while a legal action exists, no entropy). Feed-forward networks only."""
        if self.actor_core is not None:
            raise ValueError("a recurrent network (model.recurrent) acts with act_step and replays with unroll")
        return self._heads(*self._encode(observation), observation)

    def step(self, observation: torch.Tensor, state: torch.Tensor
             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One step of a recurrent network: observation ``(N, ...)`` and state ``(N, S)`` → policy head output
        ``(N, A)``, normalized value ``(N,)`` and the next state ``(N, S)``."""
        actor, critic, state = self._recur(*self._encode(observation), state)
        return *self._heads(actor, critic, observation), state

    def unroll(self, observations: torch.Tensor, state: torch.Tensor, starts: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Replay sequences: observations ``[T, L, ...]`` from state ``(L, S)`` (the state before step 0), the state
        zeroed before every step that starts an episode (``starts [T, L]``, bool) → policy head outputs
        ``(T·L, A)`` and normalized values ``(T·L,)`` in ``[T, L]`` order. The encoders run once on all steps."""
        steps, lanes = starts.shape
        flat = observations.reshape(steps * lanes, *observations.shape[2:])
        actor, critic = (x.reshape(steps, lanes, -1) for x in self._encode(flat))
        keep = (~starts.bool()).unsqueeze(-1).to(state.dtype)
        actor_out, critic_out = [], []
        for t in range(steps):
            a, c, state = self._recur(actor[t], critic[t], state * keep[t])
            actor_out.append(a)
            critic_out.append(c)
        return self._heads(torch.cat(actor_out), torch.cat(critic_out), flat)

    def distribution(self, out: torch.Tensor) -> torch.distributions.Distribution | FactoredDistribution:
        """The action distribution of policy head outputs ``(N, A)``."""
        if self.discrete:
            return Categorical(logits=out)
        if self.factored is not None:
            return self.factored.distribution(out, getattr(self, "log_std", None))
        if self.settings.sde:
            mean, log_std = out.chunk(2, -1)
            return Normal(mean, log_std.exp())
        return Normal(out, self.log_std.exp().expand_as(out))

    def forward(self, observation: torch.Tensor) -> tuple[Distribution, torch.Tensor]:
        out, value = self.outputs(observation)
        return self.distribution(out), value

    def replay(self, batch: Mapping[str, torch.Tensor]) -> tuple[Distribution, torch.Tensor]:
        """The distribution and normalized value ``(N,)`` of a training batch: :meth:`forward` of its flat
        ``observations``, or for a recurrent network :meth:`unroll` of its sequences (``states (L, S)`` and
        ``starts [T, L]`` present; ``N = T·L``)."""
        if "states" not in batch:
            return self(batch["observations"])
        observations, starts = batch["observations"], batch["starts"]
        out, value = self.unroll(observations.reshape(*starts.shape, *observations.shape[1:]), batch["states"],
                                 starts)
        return self.distribution(out), value

    def log_prob(self, distribution: Distribution, action: torch.Tensor) -> torch.Tensor:
        """``(N,)`` log-probabilities of actions (Gaussian dimensions and factorised parts summed)."""
        if self.discrete:
            return distribution.log_prob(action.long())
        if isinstance(distribution, FactoredDistribution):
            return distribution.log_prob(action)
        return distribution.log_prob(action).sum(-1)

    def entropy(self, distribution: Distribution) -> torch.Tensor:
        """``(N,)`` entropies."""
        entropy = distribution.entropy()
        return entropy if self.discrete or self.factored is not None else entropy.sum(-1)

    def denormalize_value(self, value: torch.Tensor) -> torch.Tensor:
        """Critic output in reward units."""
        return self.value_normalizer.denormalize(value) if self.settings.normalize_value else value

    @torch.no_grad()
    def act(self, observation: torch.Tensor, deterministic: bool = False, generator: torch.Generator | None = None
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Actions ``(N,)`` or ``(N, A)``, their log-probabilities ``(N,)`` and values ``(N,)`` in reward units.
        Sampling draws from ``generator`` (the global generator if None). The hot path of every actor: it
        works on logits and means directly instead of building distribution objects."""
        return self._draw(*self.outputs(observation), deterministic, generator)

    @torch.no_grad()
    def act_step(self, observation: torch.Tensor, state: torch.Tensor, deterministic: bool = False,
                 generator: torch.Generator | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`act` for a recurrent network from state ``(N, S)``; also returns the next state ``(N, S)``."""
        out, value, state = self.step(observation, state)
        return *self._draw(out, value, deterministic, generator), state

    def _draw(self, out: torch.Tensor, value: torch.Tensor, deterministic: bool, generator: torch.Generator | None
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        value = self.denormalize_value(value)
        if self.factored is not None:
            action, log_prob = self.factored.draw(out, getattr(self, "log_std", None), deterministic, generator)
            return action, log_prob, value
        if self.discrete:
            log_probs = torch.log_softmax(out, -1)
            if deterministic:
                action = log_probs.argmax(-1)
            else:
                action = torch.multinomial(log_probs.exp(), 1, generator=generator).squeeze(-1)
            return action, log_probs.gather(-1, action.unsqueeze(-1)).squeeze(-1), value
        out, log_std = out.chunk(2, -1) if self.settings.sde else (out, self.log_std.expand_as(out))
        noise = (torch.zeros_like(out) if deterministic
                 else torch.randn(out.shape, generator=generator, device=out.device))
        action = out + log_std.exp() * noise
        log_prob = (-0.5 * noise.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        return action, log_prob, value

    @torch.no_grad()
    def act_sde(self, observation: torch.Tensor, exploration: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """gSDE's sampling (``model.sde``): actions ``mean(s) + z(s)ᵀ(exp(log_std) ⊙ ε)`` for observations ``(N, ...)``
        and each one's standard normal draws ``exploration (N, W, A)`` (the acting policy holds them per
        environment); their log-probabilities ``(N,)`` under :meth:`distribution` and values ``(N,)`` in reward
        units, as :meth:`act`."""
        actor, critic = self._encode(observation)
        out, value = self._heads(actor, critic, observation)
        mean, log_std = out.chunk(2, -1)
        action = mean + torch.einsum("nw,nwa->na", actor, exploration * self.log_std.exp())
        log_prob = (-0.5 * ((action - mean) / log_std.exp()).square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        return action, log_prob, self.denormalize_value(value)

    @torch.no_grad()
    def value(self, observation: torch.Tensor) -> torch.Tensor:
        """``(N,)`` values in reward units (feed-forward networks)."""
        if self.critic_core is not None or self.actor_core is not None:
            raise ValueError("a recurrent network (model.recurrent) values observations with step or unroll")
        x = self.prepare(observation)
        return self.denormalize_value(self.value_head(self.critic_encoder(x)).squeeze(-1))

    def env_action(self, action: np.ndarray) -> Any:
        """One row of :meth:`act`'s output as the environment expects it (inside the bounds)."""
        if self.discrete:
            assert isinstance(self.action_space, gymnasium.spaces.Discrete)
            return int(action) + int(self.action_space.start)
        if self.factored is not None:
            return self.factored.env_action(action, self.settings.bound)
        space = self.action_space
        assert isinstance(space, gymnasium.spaces.Box)
        action = np.asarray(action, np.float32).reshape(space.shape)
        low, high = space.low, space.high
        if self.settings.bound == "tanh":
            return (low + (np.tanh(action) + 1.0) * 0.5 * (high - low)).astype(np.float32)
        return np.clip(action, low, high)
