"""An actor's sampling: ``sample.envs`` environments as asyncio tasks, every learner seat recording its steps in a
lane, one batched forward per round; a segment per policy once every lane holds ``sample.truncation`` steps."""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any, Coroutine, Mapping, Sequence

import numpy as np

from ...config.sections import SampleSettings
from ...mdp import MDP, Controller
from ...model import ActorCritic
from ...rating.results import EpisodeResult, pairwise_scores
from ..acting import BatchPolicy, RecurrentPolicy
from ..segment import Lane, Segment, stack_lanes
from .inference import BatchedInference
from .seat_play import cancel_tasks, play_seat, wrap_controllers
from .seating import Seating


class SlotSampler:
    """Runs one episode after another in each environment slot and cuts the lanes into segments.

    Args:
        mdps: one environment per slot.
        mdp_config: the ``mdp`` section (how controllers are wrapped).
        sample: ``sample`` (envs, truncation, sync, batch_wait).
        seating: who plays which seat.
        members: the network per policy; policies: its acting policy per policy.
        off_policy: lanes keep the next observations (replay).
        central: ``model.central_value`` (controllers carry the global state).
        version: the weights' version the first steps are tagged with.
    """

    def __init__(self, mdps: list[MDP], mdp_config: Mapping[str, Any], sample: SampleSettings, seating: Seating,
                 members: Mapping[str, ActorCritic], policies: Mapping[str, BatchPolicy], off_policy: bool,
                 central: bool, version: int) -> None:
        self.mdps, self.mdp_config = mdps, mdp_config
        self.truncation, self.sync = sample.truncation, sample.sync   # sync: a lane waits for the next segment
        self.seating, self.members, self.policies = seating, members, policies
        self.off_policy, self.central, self.version = off_policy, central, version
        self.round = asyncio.Event()                  # set when the next segment begins (sample() is called)
        self.loop = asyncio.new_event_loop()
        self.inference = BatchedInference(sample.batch_wait)
        self.tasks: list[asyncio.Task[None]] = []
        self.failure: BaseException | None = None
        self.first_step_at: float | None = None       # wall-clock time of this actor's first env step
        self.slowest = 0.0                            # seconds of the slowest environment call since the last segments
        self.build_lanes()

    def build_lanes(self) -> None:
        """The lanes each environment slot records (``slot_lanes``) and the policy of each lane: every seat with
        ``rl.shared_seats``; with ``rl.policies`` otherwise, the seats of one role per slot (slot ``i`` the
        ``i % policies``-th), the other roles from their pools; else one seat, chosen per episode. Recorded steps
        and episodes start afresh."""
        roles, envs = self.seating.roles, len(self.mdps)
        if roles is not None and not self.seating.shared and envs < len(roles.names):
            raise ValueError(f"sample.envs={envs}: each of the {len(roles.names)} policies of rl.policies "
                             "learns in environments of its own; give at least one each (or rl.shared_seats: true)")
        self.slot_lanes: list[list[int]] = []
        self.lane_policy: list[str] = []
        for slot in range(envs):
            seats = self.seating.fixed_learners(slot) or [0]
            self.slot_lanes.append(list(range(len(self.lane_policy), len(self.lane_policy) + len(seats))))
            self.lane_policy += [self.seating.seat_policy[seat] for seat in seats]
        self.lanes = [Lane(self.off_policy) for _ in self.lane_policy]
        self.results: list[tuple[str, EpisodeResult]] = []   # (policy, training episode) since the last segment
        self.steps: collections.Counter[str] = collections.Counter()   # env steps per policy since the last one
        self.failure = None
        self.ready: asyncio.Future[None] | None = None      # the segments in the making are complete

    def next_segments(self, report_after: float | None = None) -> list[Segment] | None:
        """Run the environments until every lane holds ``sample.truncation`` steps more; a segment ``[T, L]`` per
        policy (in the order of ``members``) with its finished episodes and env steps. With ``report_after``
        (seconds): None when the segments are not complete by then (the caller reports :meth:`progress`; the next
        call goes on with the same segments)."""
        if self.failure is not None:
            raise self.failure
        if not self.tasks:
            self.tasks = [self.loop.create_task(self._run_slot(slot)) for slot in range(len(self.mdps))]
            for task in self.tasks:
                task.add_done_callback(self._on_slot_done)
        if self.ready is None or self.ready.done():   # a new segment (else: the one a report interrupted)
            self.ready = self.loop.create_future()
            self.round.set()                          # lanes waiting for this segment go on (sample.sync)
            self.round = asyncio.Event()
            self._check_ready()
        timer = None if report_after is None else self.loop.call_later(report_after, self.loop.stop)
        try:
            self.loop.run_until_complete(self.ready)  # stops the turn the segments are complete (or failed)
        except RuntimeError:
            if self.ready.done():                     # an environment's failure
                raise
            return None                               # the timer stopped the loop first: a report is due
        finally:
            if timer is not None:
                timer.cancel()
        segments = [self._segment_of(name) for name in self.members]
        self.results, self.steps = [], collections.Counter()
        self.slowest = 0.0
        return segments

    def progress(self) -> dict[str, float]:
        """Where the segments in the making stand: env steps and finished episodes since the last segments, lanes
        complete (of all), the slowest environment call since the last segments (seconds)."""
        complete = sum(1 for lane in self.lanes if lane.ready(self.truncation))
        return {"steps": float(sum(self.steps.values())), "episodes": float(len(self.results)),
                "lanes_ready": float(complete), "lanes": float(len(self.lanes)), "slowest_step": self.slowest}

    def _segment_of(self, policy: str) -> Segment:
        """The next ``sample.truncation`` steps of the lanes ``policy`` plays, with its finished episodes."""
        lanes = [lane.take(self.truncation) for lane, own in zip(self.lanes, self.lane_policy) if own == policy]
        segment = stack_lanes(lanes, self.steps[policy], [result for own, result in self.results if own == policy])
        segment.policy = policy
        return segment

    def _on_slot_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        self.failure = task.exception() or RuntimeError("an environment task ended")
        if self.ready is not None and not self.ready.done():
            self.ready.set_exception(self.failure)

    def _check_ready(self) -> None:
        if self.ready is not None and not self.ready.done() and all(
                lane.ready(self.truncation) for lane in self.lanes):
            self.ready.set_result(None)

    async def _run_slot(self, slot: int) -> None:
        mdp, lanes, seating = self.mdps[slot], self.slot_lanes[slot], self.seating
        while True:
            learners = seating.learners(slot)
            opponents, kind, snapshot_ids = seating.pick_opponents(learners)
            episode = mdp.reset(*learners, *(seat for seat, _ in opponents))
            controllers = wrap_controllers(episode, mdp, self.mdp_config, self.central)
            team = len(learners)
            players: list[Coroutine[Any, Any, Any]] = [self._learn(controller, lane)
                                                       for controller, lane in zip(controllers, lanes)]
            mean = seating.draws_mean()
            players += [play_seat(c, seating.opponent_policy(seat, mean), self.members[seating.seat_policy[seat]],
                                  self.inference, index)
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

    async def _learn(self, controller: Controller, lane_index: int) -> None:
        """Play one seat for the learner (its lane's policy), recording its steps in lane ``lane_index``, which also
        tags its requests (its recurrent memory, its ε)."""
        lane, policy_name = self.lanes[lane_index], self.lane_policy[lane_index]
        model, policy = self.members[policy_name], self.policies[policy_name]
        batcher = model.batcher
        memory = policy if isinstance(policy, RecurrentPolicy) else None
        if memory is not None:
            memory.reset(lane_index)                    # an episode starts from the zero state
        self.inference.register()
        try:
            while await controller.ready():
                observation = batcher.convert(controller.get_state())
                state = None if memory is None else memory.state(lane_index)
                action, log_prob, value = await self.inference.act(policy, observation, lane_index)
                lane.decide(observation, action, log_prob, value, self.version, state)
                if len(lane.values) == self.truncation + 1:  # this lane just filled: maybe all have
                    self._check_ready()
                    if self.sync:
                        action = await self._decide_again(lane, policy, observation, lane_index, memory)
                began = time.monotonic()
                await controller(model.env_action(action))
                self.slowest = max(self.slowest, time.monotonic() - began)
                if self.first_step_at is None:
                    self.first_step_at = time.time()
                self.steps[policy_name] += 1
                lane.outcome(controller.get_reward(), controller.done, controller.truncated)
            if controller.truncated:
                final = batcher.convert(controller.get_state())
                lane.set_final((await self.inference.act(policy, final, lane_index))[2], final)
        finally:
            self.inference.unregister()

    async def _decide_again(self, lane: Lane, policy: BatchPolicy, observation: np.ndarray, lane_index: int,
                            memory: RecurrentPolicy | None) -> np.ndarray:
        """``sample.sync``: the lane's segment is complete and its newest decision only gave the bootstrap value;
        wait for the next segment and, if new weights came meanwhile, decide that step again with them (the next
        segment then holds no step of older weights); a recurrent policy (its ``memory``) decides it from the state it
        had before the step (the one the segment records). The action to take."""
        version = self.version
        await self.round.wait()
        action = lane.actions[-1]
        if self.version != version:
            if memory is not None:
                memory.rewind(lane_index, lane.states[-1])
            action, log_prob, value = await self.inference.act(policy, observation, lane_index)
            lane.redecide(action, log_prob, value, self.version)
        return action

    def replace_environments(self, mdps: Sequence[MDP], mdp_config: Mapping[str, Any]) -> None:
        """Play on ``mdps`` (made from ``mdp_config``) from now on: running episodes and partial segments are
        discarded and the old environments closed (not while :meth:`next_segments` runs)."""
        self.stop()
        for mdp in self.mdps:
            mdp.close()
        self.mdps, self.mdp_config = list(mdps), mdp_config
        self.build_lanes()

    def stop(self) -> None:
        """Cancel the environments' tasks (not while :meth:`next_segments` runs)."""
        cancel_tasks(self.loop)
        self.tasks = []

    def close(self) -> None:
        """Stop the environments' tasks and close the environments."""
        self.stop()
        self.loop.close()
        for mdp in self.mdps:
            mdp.close()
