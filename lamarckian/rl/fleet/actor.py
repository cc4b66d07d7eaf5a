"""The sampling Actor, the fleet's RPC front: it builds the acting networks and policies, and hands sampling
(:mod:`.sampler`), whole episodes (:mod:`.episodes`) and who plays which seat (:mod:`.seating`) to their parts."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ... import rpc
from ...config.sections import EvaluatorSettings, MDPSettings, RunSettings, SampleSettings
from ...mdp import MDP, create_mdp
from ...model import ModelSettings, load_blob
from ...model.network import seeded
from ...model.policy_set import PolicySet
from ...rating.results import RULE
from ..algorithms.build import algorithm_of, build_model
from ..seeds import (
    ACTIONS_SLOT,
    CHOICES_SLOT,
    EVALUATION_SEED_OFFSET,
    EXPLORATION_SLOT,
    FIRST_ENVIRONMENT_SLOT,
    NETWORK_SLOT,
    actor_seed,
)
from . import stall
from .episodes import EpisodeRunner
from .sampler import SlotSampler
from .seating import Seating


@rpc.gather
@rpc.all
@rpc.any
class Actor:
    """Runs ``sample.envs`` environments and streams segments of ``sample.truncation`` steps per lane.

    In games, every seat other than the learner's is played by a snapshot of the opponent pool drawn per
    episode and seat from the pool's distribution (or, with probability ``rl.opponent.rule``, by the MDP's
    rule); all snapshots act in ONE stacked forward per round.

    Args:
        config: the resolved run configuration.
        index: this actor's number (seeds differ per actor).
        blob: initial learner weights (None keeps the network's initialization).
        version: the weights' version number.
        pools: per policy ("" with one policy for every seat), ``(probabilities {id: p}, blobs {id: blob})`` of
            its opponent pool (see :meth:`set_pool`).
        own_process: the actor is alone in its process (a Ray actor): it sets torch to one thread and seeds the
            process's stream; False (``--debug``: an object in the learner's process) leaves both alone.
    """

    def __init__(self, config: Mapping[str, Any], index: int, blob: np.ndarray | None = None,
                 version: int = 0,
                 pools: Mapping[str, tuple[Mapping[int, float], Mapping[int, np.ndarray]]] | None = None,
                 *, own_process: bool = True) -> None:
        self.config, self.index = config, index
        self.seed = seed = RunSettings.from_config(config).seed
        if own_process:
            torch.set_num_threads(1)
            torch.manual_seed(actor_seed(seed, index, NETWORK_SLOT))
        sample = SampleSettings.from_config(config)
        self.report_after = stall.report_interval(sample.stall)
        mdps = self._make_mdps(config["mdp"], sample.envs)
        self.algorithm = algorithm_of(config)
        with seeded(actor_seed(seed, index, NETWORK_SLOT)):      # its own stream, not the process's
            self.model = build_model(mdps[0], config)
        if blob is not None:
            load_blob(self.model, blob)
        self.members: dict[str, Any] = dict(self.model.members()) if isinstance(self.model, PolicySet) \
            else {"": self.model}
        generator = torch.Generator().manual_seed(actor_seed(seed, index, ACTIONS_SLOT))
        self.seating = Seating(mdps[0], config, self.members, generator,
                               np.random.default_rng(actor_seed(seed, index, CHOICES_SLOT)))
        self.policies = self._acting_policies(config, sample, generator)
        for policy, (probabilities, blobs) in (pools or {}).items():
            self.set_pool(probabilities, blobs, policy)
        central = ModelSettings.from_config(config).central_value
        hitch = MDPSettings.from_config(config).hitch
        self.sampler = SlotSampler(mdps, config["mdp"], sample, self.seating, self.members, self.policies,
                                   self.algorithm.off_policy, central, version, hitch)
        self.episodes = EpisodeRunner(config["mdp"], sample.envs, actor_seed(seed + EVALUATION_SEED_OFFSET, index,
                                                                              NETWORK_SLOT),
                                      EvaluatorSettings.from_config(config).max_steps, self.members, self.seating,
                                      central, hitch)
        self.counted: dict[str, float] = {}         # the environments' counters as of the last segment

    def _make_mdps(self, mdp_config: Mapping[str, Any], envs: int) -> list[MDP]:
        """One environment per slot, each of its own seed."""
        return [create_mdp(mdp_config, seed=actor_seed(self.seed, self.index, FIRST_ENVIRONMENT_SLOT + slot))
                for slot in range(envs)]

    def _acting_policies(self, config: Mapping[str, Any], sample: SampleSettings, generator: torch.Generator
                         ) -> dict[str, Any]:
        """Each policy's acting policy (the algorithm's: sampling, ε-greedy...), drawing from ``generator``."""
        lanes = (self.index % sample.actors) * sample.envs, sample.actors * sample.envs   # its first lane, all
        seed = actor_seed(self.seed, self.index, EXPLORATION_SLOT)
        roles = self.seating.roles
        return {name: self.algorithm.acting_policy(member, generator, lanes, seed,
                                                   roles.config_of(config, name) if roles else config)
                for name, member in self.members.items()}

    @property
    def version(self) -> int:
        """The version of the weights acting now."""
        return self.sampler.version

    # ---- weights -------------------------------------------------------------------------------------------
    def set_weights(self, version: int, blob: np.ndarray) -> int:
        """Load the learner's weights (tagging later steps with ``version``)."""
        load_blob(self.model, blob)
        self.sampler.version = int(version)
        return self.sampler.version

    def set_exploration(self, value: float) -> None:
        """The acting policy's exploration now, from the learner's schedule (:meth:`Algorithm.exploration_schedule`:
        DQN's ε, each lane exploring with its own power of it)."""
        for policy in self.policies.values():
            policy.set_exploration(value)

    def set_pool(self, probabilities: Mapping[int, float], blobs: Mapping[int, np.ndarray] | None = None,
                 policy: str = "") -> None:
        """The opponent pool of ``policy`` (snapshots that play its seats when another policy learns): new
        snapshots' ``blobs`` and every member's sampling probability; members absent from ``probabilities`` leave.
        Episodes already running keep their opponents' weights."""
        pools = self.seating.pools
        if policy not in pools:
            raise ValueError(f"set_pool: no policy {policy!r} (this actor plays {', '.join(map(repr, pools))})")
        pools[policy].update(probabilities, blobs)

    @property
    def pools(self) -> Mapping[str, Any]:
        """Each policy's opponent pool as this actor holds it."""
        return self.seating.pools

    # ---- sampling ------------------------------------------------------------------------------------------
    def sample(self) -> dict[str, Any]:
        """The next :class:`Segment` (wire form): arrays ``[T, L]`` (L = environments), the episodes finished
        meanwhile, env steps; a progress report (:func:`.stall.report`) instead when it is not complete within a few
        seconds (the next call goes on with it)."""
        segments = self.sampler.next_segments(self.report_after)
        if segments is None:                                        # not done yet: say how far it got
            return stall.report(self.sampler.progress(), self._counted_since())
        segments[0].counters = self._counted_since()
        if self.seating.roles is not None:                          # one segment per policy
            return {"bundle": [segment.to_wire() for segment in segments]}
        message = self.algorithm.actor_message(self.model, segments[0], self.config)   # A3C: the segment's gradient
        return segments[0].to_wire() if message is None else message

    def _counted_since(self) -> dict[str, float]:
        """How the environments' counters (:meth:`MDP.counters`) grew since the previous call."""
        totals: dict[str, float] = {}
        for mdp in (*self.sampler.mdps, *self.episodes.mdps):
            for name, value in mdp.counters().items():
                totals[name] = totals.get(name, 0.0) + value
        grown = {name: value - self.counted.get(name, 0.0) for name, value in totals.items()
                 if value != self.counted.get(name, 0.0)}
        self.counted = totals
        return grown

    # ---- whole episodes ------------------------------------------------------------------------------------
    def evaluate(self, episodes: int, opponent: str = RULE) -> list[dict[str, Any]]:
        """See :meth:`.episodes.EpisodeRunner.evaluate` (sampling pauses meanwhile)."""
        return self.episodes.evaluate(episodes, opponent)

    def set_population(self, blobs: Sequence[np.ndarray]) -> int:
        """Policies for :meth:`play_matches` (one architecture, stacked for one batched forward)."""
        return self.episodes.set_population(blobs)

    def play_matches(self, matches: Sequence[Sequence[int]]) -> list[list[dict[str, Any]]]:
        """See :meth:`.episodes.EpisodeRunner.play_matches`."""
        return self.episodes.play_matches(matches)

    # ---- the fleet's view ----------------------------------------------------------------------------------
    def first_step(self) -> float | None:
        """The wall-clock time of this actor's first env step (None before it)."""
        return self.sampler.clock.first_step_at

    def statistics(self) -> dict[str, float]:
        """Inference batching: forwards served and the mean batch size."""
        inference = self.sampler.inference
        return {"forwards": inference.forwards, "batch": inference.requests / max(1, inference.forwards)}

    def set_mdp(self, mdp_config: Mapping[str, Any]) -> None:
        """Rebuild the environments from another ``mdp`` section whose players have the same spaces (evolve.py
        children that differ in MDP settings): running episodes and partial segments are discarded.
        ValueError if the spaces differ (the network would not fit)."""
        mdps = self._make_mdps(mdp_config, len(self.sampler.mdps))
        if [(s.observation, s.action) for s in mdps[0].describe()] != \
                [(s.observation, s.action) for s in self.sampler.mdps[0].describe()]:
            for mdp in mdps:
                mdp.close()
            raise ValueError("the new mdp section changes the players' spaces: restart the actor instead")
        self.sampler.replace_environments(mdps, mdp_config)
        self.episodes.set_mdp_config(mdp_config)
        self.counted = {}

    def close(self) -> None:
        """Stop the environments' tasks and close the environments (not while ``sample`` runs)."""
        self.sampler.close()
        self.episodes.close()
