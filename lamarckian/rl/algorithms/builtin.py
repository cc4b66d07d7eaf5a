"""The algorithms this package ships, as the fleet sees them: PPO and IMPALA (on-policy updates of segments), A3C
(the actors send gradients), DQN and SAC (replay)."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import torch

from ...config.sections import RunSettings, TrainSettings
from ...mdp import MDP
from ...model import ModelSettings
from ...model.offpolicy import QNetwork, SquashedGaussianPolicy
from ..acting import EpsilonGreedy
from ..segment import Segment
from .a3c import segment_gradient
from .base import Algorithm, UpdateRule
from .dqn import DQN
from .dqn_settings import DQNSettings, EpsilonSettings
from .ppo import PPO
from .ppo_settings import PPOSettings
from .sac import SAC
from .sac_settings import SACSettings


class PPOAlgorithm(Algorithm):
    """PPO (Schulman et al. 2017), clipped surrogate, GAE; V-trace corrections for segments a few versions old."""

    name = "ppo"
    data_parallel = True

    def update_rule(self, model: torch.nn.Module, config: Mapping[str, Any]) -> UpdateRule:
        return PPO(model, PPOSettings.from_config(config), seed=RunSettings.from_config(config).seed)


class IMPALA(PPOAlgorithm):
    """IMPALA (Espeholt et al. 2018): one pass over each batch, V-trace targets, the importance-weighted policy
    gradient (``rl.ppo.objective: vtrace``; rl/impala.yml sets the rest)."""

    name = "impala"

    def update_rule(self, model: torch.nn.Module, config: Mapping[str, Any]) -> UpdateRule:
        settings = PPOSettings.from_config(config)
        if settings.objective != "vtrace":
            raise ValueError(f"rl.algorithm=impala learns with rl.ppo.objective=vtrace, not {settings.objective!r} "
                             "(-c rl/impala.yml sets it)")
        return PPO(model, settings, seed=RunSettings.from_config(config).seed)


class A3C(Algorithm):
    """A3C (Mnih et al. 2016): each actor sends the actor-critic gradient of its segment (:mod:`..a3c`)."""

    name = "a3c"
    kind = "gradients"
    single_player = True

    def __init__(self) -> None:
        super().__init__()
        self._settings: tuple[Mapping[str, Any], PPOSettings] | None = None     # (the config read, its settings)

    def actor_message(self, model: torch.nn.Module, segment: Segment, config: Mapping[str, Any]) -> dict[str, Any]:
        if self._settings is None or self._settings[0] is not config:       # read once per actor, not per segment
            self._settings = (config, PPOSettings.from_config(config))
        gradient, loss = segment_gradient(model, segment, self._settings[1]) if segment.finite() else \
            (np.zeros(0, np.float32), float("nan"))          # a broken environment's: counted, never applied
        return {"gradient": gradient, "loss": loss, "version": segment.version, "steps": segment.steps,
                "results": [r.to_wire() for r in segment.results]}

    def check(self, model: torch.nn.Module, seats: int, config: Mapping[str, Any]) -> None:
        super().check(model, seats, config)
        settings = ModelSettings.from_config(config)
        if settings.normalize_observation or settings.normalize_value:
            raise ValueError("rl.algorithm=a3c: set model.normalize_observation and model.normalize_value false "
                             "(each actor would keep statistics of its own; rl/a3c.yml does)")


class ReplayAlgorithm(Algorithm):
    """What DQN and SAC share: single-player, replayed transitions, no recurrent or central-value networks, no
    observation normalization (the stored observations would drift under it), one update device."""

    kind = "replay"
    off_policy = True
    single_player = True

    def acting_network(self, mdp: MDP, config: Mapping[str, Any], seat: int = 0) -> torch.nn.Module:
        settings = ModelSettings.from_config(config)
        if settings.recurrent is not None or settings.central_value:
            setting = f"model.recurrent={settings.recurrent}" if settings.recurrent else "model.central_value=true"
            raise ValueError(f"{setting} applies to rl.algorithm ppo or a3c, not {self.name}")
        spec = mdp.describe()[seat]
        return self.replay_network(spec.observation, spec.action, settings, config)

    def replay_network(self, observation: Any, action: Any, settings: ModelSettings, config: Mapping[str, Any]
                       ) -> torch.nn.Module:
        raise NotImplementedError

    def check(self, model: torch.nn.Module, seats: int, config: Mapping[str, Any]) -> None:
        super().check(model, seats, config)
        train = TrainSettings.from_config(config)
        if train.gpus > 1:
            raise ValueError(f"train.gpus={train.gpus}: rl.algorithm={self.name} updates on one device")
        if ModelSettings.from_config(config).normalize_observation:
            raise ValueError(f"model.normalize_observation=true: rl.algorithm={self.name} replays stored "
                             "observations, whose normalization would drift under the learner; set it false "
                             "(rl/dqn.yml, rl/sac.yml)")


class DQNAlgorithm(ReplayAlgorithm):
    """DQN (Mnih et al. 2015) with double Q, n-step returns, prioritized replay and Ape-X's ε per lane."""

    name = "dqn"

    def replay_network(self, observation: Any, action: Any, settings: ModelSettings, config: Mapping[str, Any]
                       ) -> torch.nn.Module:
        return QNetwork(observation, action, settings, DQNSettings.from_config(config).dueling)

    def acting_policy(self, model: torch.nn.Module, generator: torch.Generator, lanes: tuple[int, int],
                      seed: int, config: Mapping[str, Any]) -> EpsilonGreedy:
        """ε-greedy, ε per lane (Ape-X), set by the learner
        (:meth:`~lamarckian.rl.fleet.actor.Actor.set_exploration`)."""
        epsilon = EpsilonSettings.from_config(config)
        return EpsilonGreedy(model, epsilon.initial, epsilon.spread, *lanes, np.random.default_rng(seed))

    def exploration_schedule(self, config: Mapping[str, Any]) -> EpsilonSettings:
        return EpsilonSettings.from_config(config)

    def replay_update(self, model: torch.nn.Module, config: Mapping[str, Any]) -> DQN:
        train = TrainSettings.from_config(config)
        if not isinstance(model, QNetwork):
            raise TypeError(f"rl.algorithm=dqn learns a QNetwork, not a {type(model).__name__}")
        return DQN(model, DQNSettings.from_config(config), train.lr, train.grad_clip)


class SACAlgorithm(ReplayAlgorithm):
    """SAC (Haarnoja et al. 2018) with a critic ensemble and a learned temperature."""

    name = "sac"

    def replay_network(self, observation: Any, action: Any, settings: ModelSettings, config: Mapping[str, Any]
                       ) -> torch.nn.Module:
        return SquashedGaussianPolicy(observation, action, settings)

    def replay_update(self, model: torch.nn.Module, config: Mapping[str, Any]) -> SAC:
        train = TrainSettings.from_config(config)
        if not isinstance(model, SquashedGaussianPolicy):
            raise TypeError(f"rl.algorithm=sac learns a SquashedGaussianPolicy, not a {type(model).__name__}")
        return SAC(model, ModelSettings.from_config(config), SACSettings.from_config(config), train.lr,
                   train.grad_clip)

