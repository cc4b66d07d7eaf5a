"""What an algorithm is to the actor fleet: one small class whose methods the fleet calls, so neither the actor nor
the learners compare algorithm names. A user's own algorithm subclasses :class:`Algorithm` and is named in the
config as ``rl.algorithm: package.module:ClassName`` (as a user's own MDP is named in ``mdp.create``).

Which fleet learner runs an algorithm is its ``kind``:

* ``on_policy``: :class:`~lamarckian.rl.fleet.learner.Learner` gathers ``train.batch`` env steps of segments and hands
  them to the algorithm's :meth:`Algorithm.update_rule` (PPO, IMPALA, a user's REINFORCE...);
* ``gradients``: the actors send :meth:`Algorithm.actor_message` (A3C's gradient) and the learner applies them;
* ``replay``: the segments fill a replay buffer the algorithm's :meth:`Algorithm.replay_update` learns from (DQN,
  SAC).

``learner_class`` (a :class:`~lamarckian.rl.loop.Trainer` subclass) overrides the learner of the kind.
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Protocol

import torch

from ...config.sections import MDPSettings
from ...mdp import MDP
from ...mdp.wrap import central_observation_space
from ...model import ActorCritic, ModelSettings
from ..acting import acting_policy
from ..segment import Segment

KINDS = ("on_policy", "gradients", "replay")


class UpdateRule(Protocol):
    """An on-policy algorithm's learning step, held by the fleet learner (see
    :class:`~lamarckian.rl.algorithms.ppo.PPO`)."""

    @property
    def lr(self) -> float:
        """The learning rate now."""

    @property
    def max_staleness(self) -> int:
        """Segments more weight versions behind than this are dropped."""

    def update(self, segments: list[Segment], version: int, cost: int) -> dict[str, float]:
        """Learn from ``segments`` (each ``[T, L]``) collected up to weight ``version``, after ``cost`` env steps;
        the statistics to record (``samples`` among them: the samples learned from)."""

    def set_lr(self, lr: float) -> None: ...

    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state and ``lr`` (its keys are merged into the learner's checkpoint)."""

    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


class Algorithm:
    """One reinforcement-learning algorithm as the actor fleet runs it (the defaults are an actor-critic's).

    Class attributes: ``name`` (what status lines and errors call it), ``kind`` (which fleet learner runs it, see
    the module), ``off_policy`` (the actors' lanes keep each step's next observation, as replay needs),
    ``single_player`` (games of several seats are refused), ``data_parallel`` (its update rule runs on several
    GPUs, ``train.gpus``), ``learner_class`` (a learner of your own, else the kind's).
    """

    name: ClassVar[str] = "algorithm"
    kind: ClassVar[str] = "on_policy"
    off_policy: ClassVar[bool] = False
    single_player: ClassVar[bool] = False
    data_parallel: ClassVar[bool] = False
    learner_class: ClassVar[type | None] = None

    def acting_network(self, mdp: MDP, config: Mapping[str, Any], seat: int = 0) -> torch.nn.Module:
        """The network the actors act with and the learner trains, for ``seat`` of ``mdp`` (the seats it plays share
        its spaces): an :class:`ActorCritic`, its critic on the game's global state with ``model.central_value``."""
        spec = mdp.describe()[seat]
        settings = ModelSettings.from_config(config)
        observation = central_observation_space(mdp) if settings.central_value else spec.observation
        return ActorCritic(observation, spec.action, settings)

    def acting_policy(self, model: torch.nn.Module, generator: torch.Generator, lanes: tuple[int, int],
                      seed: int, config: Mapping[str, Any]) -> Any:
        """What serves the actor's batched forward passes (``serve(items) -> answers``): sampling from ``model``'s
        distribution with ``generator``. ``lanes`` is ``(first, total)``: this actor's first lane in the fleet and
        the fleet's lane count; ``seed`` seeds any stream of the policy's own."""
        return acting_policy(model, generator=generator)

    def actor_message(self, model: torch.nn.Module, segment: Segment, config: Mapping[str, Any]
                      ) -> dict[str, Any] | None:
        """What an actor sends instead of its segment (A3C: the segment's gradient at ``model``), or None: the
        segment itself."""
        return None

    def update_rule(self, model: torch.nn.Module, config: Mapping[str, Any]) -> UpdateRule:
        """``kind: on_policy``: the learning step the fleet learner calls with each batch of segments."""
        raise NotImplementedError(f"rl.algorithm={self.name}: an on_policy algorithm defines update_rule()")

    def replay_update(self, model: torch.nn.Module, config: Mapping[str, Any]) -> Any:
        """``kind: replay``: the update from replayed n-step transitions (see
        :class:`~lamarckian.rl.algorithms.dqn.DQN`)."""
        raise NotImplementedError(f"rl.algorithm={self.name}: a replay algorithm defines replay_update()")

    def exploration_schedule(self, config: Mapping[str, Any]) -> Any:
        """``kind: replay``: what the learner broadcasts as ``set_exploration(ε)`` (``.at(env_steps) -> ε``; DQN's
        ``rl.dqn.epsilon``), or None: nothing."""
        return None

    def check(self, model: torch.nn.Module, seats: int, config: Mapping[str, Any]) -> None:
        """ValueError when this algorithm cannot train ``model`` on an MDP of ``seats`` seats with ``config``."""
        if self.single_player and seats > 1:
            raise ValueError(f"rl.algorithm={self.name} trains single-player MDPs; mdp.create="
                             f"{MDPSettings.from_config(config).create} has {seats} seats (self-play trains with "
                             "rl.algorithm=ppo)")
