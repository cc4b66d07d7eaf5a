"""The sampling Actor: K environments as asyncio tasks, one batched forward per round, segments for Gather."""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ... import rpc
from ...config.sections import EvaluatorSettings, OpponentSettings, RLSettings, RunSettings, SampleSettings
from ...mdp import MDP, Controller, Episode, create_mdp, wrap_controller
from ...mdp.wrap import CentralState
from ...model import ActorCritic, ModelSettings, load_blob
from ...model.network import seeded
from ...model.stacked import StackedPolicies
from ...rating.results import NONE, POOL, RULE, SELF, EpisodeResult, pairwise_scores
from ..acting import BatchPolicy, PopulationPolicy, RecurrentPolicy, acting_policy
from ..algorithms import algorithm_of, build_model
from ..policies import roles_of
from ..seeds import (
    ACTIONS_SLOT,
    CHOICES_SLOT,
    EVALUATION_SEED_OFFSET,
    EXPLORATION_SLOT,
    FIRST_ENVIRONMENT_SLOT,
    NETWORK_SLOT,
    actor_seed,
)
from ..segment import Lane, Segment, stack_lanes
from .inference import BatchedInference
from .snapshots import SnapshotServers

EVALUATION_ENVS = 32     # evaluation environments an actor may make (more than sample.envs: one round of games)


def cancel_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel every task of ``loop`` (not running) and let them finish."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


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
        seed = RunSettings.from_config(config).seed
        if own_process:
            torch.set_num_threads(1)
            torch.manual_seed(actor_seed(seed, index, NETWORK_SLOT))
        self.mdp_config = config["mdp"]
        sample = SampleSettings.from_config(config)
        self.envs, self.truncation = sample.envs, sample.truncation
        self.sync = sample.sync                       # a lane waits for the next segment's weights (sample.sync)
        self.round = asyncio.Event()                  # set when the next segment begins (sample() is called)
        opponent = OpponentSettings.from_config(config)
        self.rule_probability, self.mean_probability = opponent.rule, opponent.deterministic
        rl = RLSettings.from_config(config)
        self.swap = rl.swap
        self.central = ModelSettings.from_config(config).central_value
        self.seed, self.index = seed, index
        self.random = np.random.default_rng(actor_seed(seed, index, CHOICES_SLOT))
        self.mdps = [create_mdp(self.mdp_config, seed=actor_seed(self.seed, index, FIRST_ENVIRONMENT_SLOT + slot))
                     for slot in range(self.envs)]
        self.seats = len(self.mdps[0])
        self.roles = roles_of(self.mdps[0], config)            # rl.policies: a policy per role (None: one)
        self.shared = rl.shared_seats                          # every seat learns (its role's policy)
        self.seat_policy = list(self.roles.of_seat) if self.roles is not None else [""] * self.seats
        self.algorithm = algorithm_of(config)
        self._build_policy(config, blob)
        self.version = version
        self.pools = {name: SnapshotServers(member, self.generator) for name, member in self.members.items()}
        self.population: StackedPolicies | None = None
        for policy, (probabilities, blobs) in (pools or {}).items():
            self.set_pool(probabilities, blobs, policy)
        self.config = config
        self.off_policy = self.algorithm.off_policy
        self._build_lanes()
        self.results: list[tuple[str, EpisodeResult]] = []   # (policy, training episode) since the last segment
        self.counted: dict[str, float] = {}         # the environments' counters as of the last segment
        self.steps: collections.Counter[str] = collections.Counter()   # env steps per policy since the last segment
        self.first_step_at: float | None = None       # wall-clock time of this actor's first env step
        self.loop = asyncio.new_event_loop()
        self.inference = BatchedInference(sample.batch_wait)
        self.tasks: list[asyncio.Task] = []
        self.failure: BaseException | None = None
        self.ready: asyncio.Future | None = None
        self.eval_mdps: list[MDP] = []
        self.eval_loop = asyncio.new_event_loop()     # kept between evaluations: their MDPs' connections live in it
        self.eval_seed = actor_seed(seed + EVALUATION_SEED_OFFSET, index, NETWORK_SLOT)
        self.max_steps = EvaluatorSettings.from_config(config).max_steps   # decisions per evaluation episode

    def _build_policy(self, config: Mapping[str, Any], blob: np.ndarray | None) -> None:
        """The algorithm's acting network (from the actor's own seed stream, then ``blob`` where given; with
        ``rl.policies`` one per policy) and the servers of each policy's batched forwards."""
        with seeded(actor_seed(self.seed, self.index, NETWORK_SLOT)):      # its own stream, not the process's
            self.model = build_model(self.mdps[0], config)
        if blob is not None:
            load_blob(self.model, blob)
        self.members: dict[str, Any] = dict(self.model.members()) if self.roles is not None else {"": self.model}
        self.generator = torch.Generator().manual_seed(actor_seed(self.seed, self.index, ACTIONS_SLOT))
        actors = SampleSettings.from_config(config).actors
        lanes = (self.index % actors) * self.envs, actors * self.envs   # its first lane in the fleet, all of them
        seed = actor_seed(self.seed, self.index, EXPLORATION_SLOT)
        self.servers = {name: self.algorithm.acting_policy(
            member, self.generator, lanes, seed, self.roles.config_of(config, name) if self.roles else config)
            for name, member in self.members.items()}

    # ---- weights -------------------------------------------------------------------------------------------
    def set_weights(self, version: int, blob: np.ndarray) -> int:
        """Load the learner's weights (tagging later steps with ``version``)."""
        load_blob(self.model, blob)
        self.version = int(version)
        return self.version

    def set_exploration(self, value: float) -> None:
        """The acting policy's exploration now, from the learner's schedule (:meth:`Algorithm.exploration_schedule`:
        DQN's ε, each lane exploring with its own power of it)."""
        for server in self.servers.values():
            server.set_exploration(value)

    def set_pool(self, probabilities: Mapping[int, float], blobs: Mapping[int, np.ndarray] | None = None,
                 policy: str = "") -> None:
        """The opponent pool of ``policy`` (snapshots that play its seats when another policy learns): new
        snapshots' ``blobs`` and every member's sampling probability; members absent from ``probabilities`` leave.
        Episodes already running keep their opponents' weights."""
        if policy not in self.pools:
            raise ValueError(f"set_pool: no policy {policy!r} (this actor plays {', '.join(map(repr, self.pools))})")
        self.pools[policy].update(probabilities, blobs)

    def _build_lanes(self) -> None:
        """The lanes each environment slot records (``slot_lanes``) and the policy of each lane: every seat with
        ``rl.shared_seats``; with ``rl.policies`` otherwise, the seats of one role per slot (slot ``i`` the
        ``i % policies``-th), the other roles from their pools; else one seat, chosen per episode."""
        if self.roles is not None and not self.shared and self.envs < len(self.roles.names):
            raise ValueError(f"sample.envs={self.envs}: each of the {len(self.roles.names)} policies of rl.policies "
                             "learns in environments of its own; give at least one each (or rl.shared_seats: true)")
        self.slot_lanes: list[list[int]] = []
        self.lane_policy: list[str] = []
        for slot in range(self.envs):
            seats = self._fixed_learners(slot) or [0]
            self.slot_lanes.append(list(range(len(self.lane_policy), len(self.lane_policy) + len(seats))))
            self.lane_policy += [self.seat_policy[seat] for seat in seats]
        self.lanes = [Lane(self.off_policy) for _ in self.lane_policy]

    def _fixed_learners(self, slot: int) -> list[int]:
        """The seats the learner plays in every episode of ``slot`` ([] where a seat is drawn per episode)."""
        if self.shared:
            return list(range(self.seats))
        if self.roles is not None:
            return self.roles.seats_of(self.roles.names[slot % len(self.roles.names)])
        return []

    # ---- sampling ------------------------------------------------------------------------------------------
    def sample(self) -> dict[str, Any]:
        """The next :class:`Segment` (wire form): arrays ``[T, L]`` (L = environments), the episodes finished
        meanwhile, env steps."""
        if self.failure is not None:
            raise self.failure
        if not self.tasks:
            self.tasks = [self.loop.create_task(self._run_slot(slot)) for slot in range(self.envs)]
            for task in self.tasks:
                task.add_done_callback(self._on_slot_done)
        self.ready = self.loop.create_future()
        self.round.set()                              # lanes waiting for this segment go on (sample.sync)
        self.round = asyncio.Event()
        self._check_ready()
        self.loop.run_until_complete(self.ready)
        segments = [self._segment_of(name) for name in self.members]
        segments[0].counters = self._counted_since()
        self.results, self.steps = [], collections.Counter()
        if self.roles is not None:                                  # one segment per policy
            return {"bundle": [segment.to_wire() for segment in segments]}
        message = self.algorithm.actor_message(self.model, segments[0], self.config)   # A3C: the segment's gradient
        return segments[0].to_wire() if message is None else message

    def _segment_of(self, policy: str) -> Segment:
        """The next ``sample.truncation`` steps of the lanes ``policy`` plays, with its finished episodes."""
        lanes = [lane.take(self.truncation) for lane, own in zip(self.lanes, self.lane_policy) if own == policy]
        segment = stack_lanes(lanes, self.steps[policy], [result for own, result in self.results if own == policy])
        segment.policy = policy
        return segment

    def _counted_since(self) -> dict[str, float]:
        """How the environments' counters (:meth:`MDP.counters`) grew since the previous call."""
        totals: dict[str, float] = {}
        for mdp in (*self.mdps, *self.eval_mdps):
            for name, value in mdp.counters().items():
                totals[name] = totals.get(name, 0.0) + value
        grown = {name: value - self.counted.get(name, 0.0) for name, value in totals.items()
                 if value != self.counted.get(name, 0.0)}
        self.counted = totals
        return grown

    def _on_slot_done(self, task: asyncio.Task) -> None:
        if task.cancelled():
            return
        self.failure = task.exception() or RuntimeError("an environment task ended")
        if self.ready is not None and not self.ready.done():
            self.ready.set_exception(self.failure)

    def _check_ready(self) -> None:
        if self.ready is not None and not self.ready.done() and all(
                lane.ready(self.truncation) for lane in self.lanes):
            self.ready.set_result(None)

    def _learners(self, slot: int) -> list[int]:
        """The seats the learner plays in the next episode of ``slot``."""
        fixed = self._fixed_learners(slot)
        if fixed or self.seats == 1:
            return fixed or [0]
        return [int(self.random.integers(self.seats)) if self.swap else 0]

    def _pick_opponents(self, learners: list[int]) -> tuple[list[tuple[int, int]], str, list[int]]:
        """([(opponent seat, index in the pool of its policy)], opponent kind: ``rule``, ``pool`` or ``none``, the
        pool snapshot ids) for a new episode of ``learners`` (the ids now: the pool may change while the episode
        runs)."""
        others = [seat for seat in range(self.seats) if seat not in learners]
        if not others:
            return [], NONE, []
        policies = list(dict.fromkeys(self.seat_policy[seat] for seat in others))
        if any(not self.pools[name].ids for name in policies) or (
                self.rule_probability > 0 and self.random.random() < self.rule_probability):
            return [], RULE, []
        picks: dict[int, int] = {}
        for name in policies:                          # one draw per policy's pool, its seats in order
            seats = [seat for seat in others if self.seat_policy[seat] == name]
            picks.update(zip(seats, self.pools[name].draw(self.random, len(seats))))
        opponents = [(seat, picks[seat]) for seat in others]
        return opponents, POOL, [self.pools[self.seat_policy[seat]].ids[index] for seat, index in opponents]

    def _controllers(self, episode: Episode, mdp: MDP) -> list[Controller]:
        """The episode's controllers wrapped (frame skip, statistics; the global state with a central critic)."""
        controllers = [wrap_controller(c, self.mdp_config) for c in episode.controllers]
        return [CentralState(c, mdp) for c in controllers] if self.central else controllers

    async def _run_slot(self, slot: int) -> None:
        mdp, lanes = self.mdps[slot], self.slot_lanes[slot]
        while True:
            learners = self._learners(slot)
            opponents, kind, snapshot_ids = self._pick_opponents(learners)
            episode = mdp.reset(*learners, *(seat for seat, _ in opponents))
            controllers = self._controllers(episode, mdp)
            team = len(learners)
            players = [self._learn(controller, lane) for controller, lane in zip(controllers, lanes)]
            mean = self.mean_probability > 0 and self.random.random() < self.mean_probability
            players += [self._play(c, self.pools[self.seat_policy[seat]].server(mean),
                                   self.members[self.seat_policy[seat]], index)
                        for c, (seat, index) in zip(controllers[team:], opponents)]
            await asyncio.gather(*players, *episode.ticks)
            if any(c.get_result().get("lost") for c in controllers):   # a game server lost it: counted, no result
                continue
            own = [EpisodeResult.of(c.get_result(), opponent=kind, snapshots=snapshot_ids) for c in controllers[:team]]
            if opponents:
                others = [EpisodeResult.of(c.get_result()) for c in controllers[team:]]
                for result in own:
                    result.scores = pairwise_scores(result, others)
            self.results.extend((self.lane_policy[lane], result) for lane, result in zip(lanes, own))

    async def _learn(self, controller: Controller, slot: int) -> None:
        """Play one seat for the learner (its lane's policy), recording its steps in lane ``slot``, which also tags
        its requests (its recurrent memory, its ε)."""
        lane, policy = self.lanes[slot], self.lane_policy[slot]
        model, server = self.members[policy], self.servers[policy]
        batcher = model.batcher
        memory = server if isinstance(server, RecurrentPolicy) else None
        if memory is not None:
            memory.reset(slot)                          # an episode starts from the zero state
        self.inference.register()
        try:
            while await controller.ready():
                observation = batcher.convert(controller.get_state())
                state = None if memory is None else memory.state(slot)
                action, log_prob, value = await self.inference.act(server, observation, slot)
                lane.decide(observation, action, log_prob, value, self.version, state)
                if len(lane.values) == self.truncation + 1:  # this lane just filled: maybe all have
                    self._check_ready()
                    if self.sync and memory is None:
                        action = await self._decide_again(lane, server, observation, slot)
                await controller(model.env_action(action))
                if self.first_step_at is None:
                    self.first_step_at = time.time()
                self.steps[policy] += 1
                lane.outcome(controller.get_reward(), controller.done, controller.truncated)
            if controller.truncated:
                final = batcher.convert(controller.get_state())
                lane.set_final((await self.inference.act(server, final, slot))[2], final)
        finally:
            self.inference.unregister()

    async def _decide_again(self, lane: Lane, server: BatchPolicy, observation: np.ndarray, slot: int) -> np.ndarray:
        """``sample.sync``: the lane's segment is complete and its newest decision only gave the bootstrap value;
        wait for the next segment and, if new weights came meanwhile, decide that step again with them (the next
        segment then holds no step of older weights). The action to take."""
        version = self.version
        await self.round.wait()
        action = lane.actions[-1]
        if self.version != version:
            action, log_prob, value = await self.inference.act(server, observation, slot)
            lane.redecide(action, log_prob, value, self.version)
        return action

    async def _play(self, controller: Controller, server: BatchPolicy, model: ActorCritic, tag: int = 0,
                    inference: BatchedInference | None = None, max_steps: int = 0) -> bool:
        """Act for one seat until the episode ends or, with ``max_steps`` > 0, that many decisions were made;
        whether the cap ended it."""
        inference = inference or self.inference
        memory = server if isinstance(server, RecurrentPolicy) else None
        if memory is not None:
            memory.reset(tag)
        inference.register()
        steps = 0
        try:
            while await controller.ready():
                if max_steps and steps >= max_steps:
                    return True
                observation = model.batcher.convert(controller.get_state())
                action = (await inference.act(server, observation, tag))[0]
                await controller(model.env_action(action))
                steps += 1
            return False
        finally:
            if memory is not None:
                memory.forget(tag)
            inference.unregister()

    # ---- evaluation ----------------------------------------------------------------------------------------
    def _run_episodes(self, jobs: Sequence[tuple[list[int], Sequence[tuple[BatchPolicy, int]]]]) -> list[list[dict]]:
        """Play one episode per job ``(seats, [(server, tag) per seat])`` on the evaluation environments (as many
        as jobs, up to the larger of ``sample.envs`` and :data:`EVALUATION_ENVS`), all at once; each job's per-seat
        results (wire form of
        :class:`EpisodeResult`). Uses its own event loop, so
        sampling is paused meanwhile."""
        while len(self.eval_mdps) < min(len(jobs), max(self.envs, EVALUATION_ENVS)):
            self.eval_mdps.append(create_mdp(self.mdp_config, seed=self.eval_seed + len(self.eval_mdps),
                                             evaluation=True))
        inference = BatchedInference()
        queue = list(enumerate(jobs))
        results: list[list[dict[str, Any]]] = [[] for _ in jobs]

        async def run(mdp: MDP) -> None:
            while queue:
                number, (seats, players) = queue.pop(0)
                episode = mdp.reset(*seats)
                controllers = self._controllers(episode, mdp)
                ticks = [asyncio.ensure_future(tick) for tick in episode.ticks]
                models = [self.members[self.seat_policy[seat]] for seat in seats]     # the seat's architecture
                capped = await asyncio.gather(*(self._play(c, server, model, tag, inference, self.max_steps)
                                                for c, (server, tag), model in zip(controllers, players, models)))
                if any(capped):                          # the environment would wait for actions forever
                    for tick in ticks:
                        tick.cancel()
                    await asyncio.gather(*ticks, return_exceptions=True)
                else:
                    await asyncio.gather(*ticks)
                lost = any(c.get_result().get("lost") for c in controllers)     # counted by the MDP
                results[number] = [EpisodeResult.of(c.get_result(), capped=any(capped) and not lost,
                                                    lost=lost).to_wire()
                                   for c in controllers]

        async def run_all() -> None:
            await asyncio.gather(*(run(mdp) for mdp in self.eval_mdps))

        self.eval_loop.run_until_complete(run_all())
        return results

    def evaluate(self, episodes: int, opponent: str = RULE) -> list[dict[str, Any]]:
        """Play ``episodes`` episodes with the deterministic policy against ``opponent`` (``rule``, or ``self``:
        the newest pool snapshot), alternating seats; the learner's results. With ``rl.shared_seats`` or
        ``rl.policies`` every seat plays its policy (``opponent`` does not apply) and the results are seat 0's."""
        if opponent not in (RULE, SELF):
            raise ValueError(f"evaluator.opponent={opponent!r}: expected {RULE!r} or {SELF!r}")
        if self.shared or self.roles is not None:              # a memory per seat and game
            return self._evaluate_every_seat(episodes)
        learner = acting_policy(self.model, deterministic=True)
        newest: BatchPolicy | None = None
        if opponent == SELF and self.seats > 1:
            if not self.pools[""].ids:
                raise ValueError("evaluator.opponent=self needs an opponent pool")
            newest = self.pools[""].newest()
        jobs = []
        for number in range(episodes):
            seat = number % self.seats
            others = [s for s in range(self.seats) if s != seat] if newest is not None else []
            jobs.append(([seat, *others], [(learner, number)] + [(newest, 0)] * len(others)))  # a memory per game
        results = [per_seat[0] for per_seat in self._run_episodes(jobs)]
        kind = opponent if self.seats > 1 else NONE
        return [{**result, "opponent": kind} for result in results]

    def _evaluate_every_seat(self, episodes: int) -> list[dict[str, Any]]:
        """``episodes`` games in which every seat plays its policy deterministically; seat 0's results, with
        ``rl.policies`` also each policy's mean over its seats as the objective ``fitness_<policy>``."""
        servers = {name: acting_policy(member, deterministic=True) for name, member in self.members.items()}
        team = self.seats
        jobs = [(list(range(team)), [(servers[self.seat_policy[i]], number * team + i) for i in range(team)])
                for number in range(episodes)]
        results = []
        for per_seat in self._run_episodes(jobs):
            result = {**per_seat[0], "opponent": NONE}
            if self.roles is not None:
                result["objectives"] = {**result["objectives"], **{
                    f"fitness_{name}": float(np.mean([per_seat[seat]["fitness"] for seat in self.roles.seats_of(name)]))
                    for name in self.roles.names}}
            results.append(result)
        return results

    def set_population(self, blobs: Sequence[np.ndarray]) -> int:
        """Policies for :meth:`play_matches` (one architecture, stacked for one batched forward)."""
        if self.roles is not None:
            raise ValueError("rl.policies: matches of a population play one policy in every seat; this run trains a "
                             "policy per role")
        self.population = StackedPolicies(self.model, list(blobs))
        return self.population.count

    def play_matches(self, matches: Sequence[Sequence[int]]) -> list[list[dict[str, Any]]]:
        """Play one game per match: ``match[seat]`` is the population index playing that seat (deterministic);
        every seat of every running game acts in one stacked forward. The per-seat results of each match."""
        if self.population is None:
            raise RuntimeError("call set_population first")
        server = PopulationPolicy(self.population, deterministic=True)
        jobs = [(list(range(len(match))), [(server, int(index)) for index in match]) for match in matches]
        return self._run_episodes(jobs)

    def first_step(self) -> float | None:
        """The wall-clock time of this actor's first env step (None before it)."""
        return self.first_step_at

    def statistics(self) -> dict[str, float]:
        """Inference batching: forwards served and the mean batch size."""
        return {"forwards": self.inference.forwards,
                "batch": self.inference.requests / max(1, self.inference.forwards)}

    def set_mdp(self, mdp_config: Mapping[str, Any]) -> None:
        """Rebuild the environments from another ``mdp`` section whose players have the same spaces (evolve.py
        children that differ in MDP settings): running episodes and partial segments are discarded.
        ValueError if the spaces differ (the network would not fit)."""
        mdps = [create_mdp(mdp_config, seed=actor_seed(self.seed, self.index, FIRST_ENVIRONMENT_SLOT + slot))
                for slot in range(self.envs)]
        if [(s.observation, s.action) for s in mdps[0].describe()] != \
                [(s.observation, s.action) for s in self.mdps[0].describe()]:
            for mdp in mdps:
                mdp.close()
            raise ValueError("the new mdp section changes the players' spaces: restart the actor instead")
        self._stop_slots()
        for mdp in (*self.mdps, *self.eval_mdps):
            mdp.close()
        self.mdp_config, self.mdps, self.eval_mdps = mdp_config, mdps, []
        self._build_lanes()
        self.results, self.steps, self.failure, self.counted = [], collections.Counter(), None, {}

    def _stop_slots(self) -> None:
        """Cancel the environments' tasks (not while ``sample`` runs)."""
        cancel_tasks(self.loop)
        self.tasks = []

    def close(self) -> None:
        """Stop the environments' tasks and close the environments (not while ``sample`` runs)."""
        self._stop_slots()
        cancel_tasks(self.eval_loop)
        self.loop.close()
        self.eval_loop.close()
        for mdp in (*self.mdps, *self.eval_mdps):
            mdp.close()
