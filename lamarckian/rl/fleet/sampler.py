"""An actor's sampling: ``sample.envs`` environments as asyncio tasks, every learner seat recording its steps in a
lane, one batched forward per round.

A lane is cut into a *part* of ``sample.truncation`` steps the moment it holds one (plus the value after it), and
parts queue per policy, oldest first. A policy's segment is its next parts, as many as it has lanes, side by side: a
lane whose environment waits (a late answer, a hitching step) does not hold the others, whose next parts fill the
segment meanwhile, and its own part comes later, judged by its own age (:meth:`Segment.trimmed`). Weights arrive
between segments, so every lane acts with weights as new as the segments are frequent.

With ``sample.sync`` a lane makes one part per segment and waits for the next weights; a policy's segment is then its
parts of this round, or, once every lane still missing has not stepped for a hitch (``mdp.hitch`` seconds, and 8×
the actor's mean environment call), the parts there are: the late lane's part goes into a later segment.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Coroutine, Mapping, Sequence

import numpy as np

from ...config.sections import SampleSettings
from ...mdp import MDP, Controller
from ...model import ActorCritic
from ...rating.results import EpisodeResult, pairwise_scores
from ..acting import BatchPolicy, RecurrentPolicy
from ..segment import Lane, Segment
from .inference import BatchedInference
from .lane_clock import LaneClock
from .policy_parts import PolicyParts
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
        hitch: ``mdp.hitch``, seconds without a step after which a lane is late (None: never).
    """

    def __init__(self, mdps: list[MDP], mdp_config: Mapping[str, Any], sample: SampleSettings, seating: Seating,
                 members: Mapping[str, ActorCritic], policies: Mapping[str, BatchPolicy], off_policy: bool,
                 central: bool, version: int, hitch: float | None = None) -> None:
        self.mdps, self.mdp_config = mdps, mdp_config
        self.sample = sample                          # sync: a lane waits for the next segment
        self.seating, self.members, self.policies = seating, members, policies
        self.off_policy, self.central, self.version = off_policy, central, version
        self.round = asyncio.Event()                  # set when the next segment begins (sample() is called)
        self.loop = asyncio.new_event_loop()
        self.inference = BatchedInference(sample.batch_wait)
        self.tasks: list[asyncio.Task[None]] = []
        self.failure: BaseException | None = None
        self.clock = LaneClock(hitch)
        self.recheck: asyncio.TimerHandle | None = None   # looks again once the missing lanes are late (sync)
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
        self.policy_lanes = {name: [lane for lane, own in enumerate(self.lane_policy) if own == name]
                             for name in self.members}
        self.parts = PolicyParts(self.members)
        self.clock.reset(len(self.lanes))
        self.controllers: dict[int, Controller] = {}        # the controller each lane plays now
        self.holding: set[int] = set()                      # lanes waiting for the next segment (sample.sync)
        self.failure = None
        self.ready: asyncio.Future[list[str]] | None = None   # the policies whose segment is complete

    def next_segments(self, report_after: float | None = None) -> list[Segment] | None:
        """Run the environments until a policy's segment ``[T, L]`` is complete (see the module's docstring); a
        segment per complete policy (in the order of ``members``) with its finished episodes and env steps since its
        previous one. With ``report_after`` (seconds): None when none is complete by then (the caller reports
        :meth:`progress`; the next call goes on)."""
        if self.failure is not None:
            raise self.failure
        if not self.tasks:
            self.tasks = [self.loop.create_task(self._run_slot(slot)) for slot in range(len(self.mdps))]
            for task in self.tasks:
                task.add_done_callback(self._on_slot_done)
        self.clock.resume()
        if self.ready is None or self.ready.done():   # a new segment (else: the one a report interrupted)
            self.ready = self.loop.create_future()
            self.round.set()                          # lanes waiting for this segment go on (sample.sync)
            self.round = asyncio.Event()
            self._check_ready()
        timer = None if report_after is None else self.loop.call_later(report_after, self.loop.stop)
        try:
            ready = self.loop.run_until_complete(self.ready)   # stops the turn a segment is complete (or failed)
        except RuntimeError:
            if self.ready.done():                     # an environment's failure
                raise
            return None                               # the timer stopped the loop first: a report is due
        finally:
            if timer is not None:
                timer.cancel()
            self.clock.pause()
        # those complete when the future was set (a late lane may have stepped since), and those completed since
        complete = [name for name in self.members if name in ready or self._complete(name)]
        segments = [self.parts.segment(name, len(self.policy_lanes[name])) for name in complete]
        self.clock.restart_slowest()
        return segments

    def progress(self) -> dict[str, Any]:
        """Where the segments in the making stand: env steps and finished episodes since the last segments, lanes
        with a part waiting (of all), the slowest environment call since the last segments (seconds), and the lanes
        that are late (:meth:`late`)."""
        return {"steps": float(sum(self.parts.steps.values())), "episodes": float(len(self.parts.results)),
                "lanes_ready": float(min(self.parts.queued(), len(self.lanes))), "lanes": float(len(self.lanes)),
                "slowest_step": self.clock.slowest, "late": self.late()}

    def late(self) -> list[list[Any]]:
        """The late lanes by where they wait: ``[[location, lanes, seconds the longest has waited], ...]``, longest
        first (the environment's :meth:`~lamarckian.mdp.Controller.location`: a game server's address, a gymnasium
        id)."""
        places = dict[str, list[Any]]()
        for lane in range(len(self.lanes)):
            if lane in self.holding or not self.clock.late(lane):
                continue
            controller = self.controllers.get(lane)
            place = places.setdefault(controller.location() if controller is not None else "between episodes",
                                      [0, 0.0])
            place[0] += 1
            place[1] = max(place[1], self.clock.waited(lane))
        return sorted(([where, count, round(waited, 3)] for where, (count, waited) in places.items()),
                      key=lambda item: -item[2])

    def _complete(self, policy: str) -> bool:
        """``policy``'s segment can go: a part for each of its lanes, or some parts and every lane without one late."""
        parts, lanes = self.parts.count(policy), self.policy_lanes[policy]
        if parts >= len(lanes):
            return True
        if not parts or self.clock.hitch is None:
            return False
        waiting = self.parts.lanes(policy) | self.holding      # lanes not missing: their part is in, or was
        return all(self.clock.late(lane) for lane in lanes if lane not in waiting)

    def _check_ready(self) -> None:
        if self.ready is None or self.ready.done():
            return
        complete = [name for name in self.members if self._complete(name)]
        if complete:
            self.ready.set_result(complete)
            return
        self._look_again()

    def _look_again(self) -> None:
        """When a policy has parts but waits for lanes that may turn late: look again the moment they all would be."""
        if self.recheck is not None:
            self.recheck.cancel()
            self.recheck = None
        if self.clock.hitch is None:
            return
        due = []
        for name in self.members:
            if self.parts.count(name):
                waiting = self.parts.lanes(name) | self.holding
                missing = [self.clock.stepped[lane] for lane in self.policy_lanes[name] if lane not in waiting]
                if missing:
                    due.append(max(missing))
        if due:
            delay = min(due) + self.clock.after() - self.clock.now()
            self.recheck = self.loop.call_later(max(0.0, delay) + 1e-3, self._check_ready)

    def _on_slot_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            return
        self.failure = task.exception() or RuntimeError("an environment task ended")
        if self.ready is not None and not self.ready.done():
            self.ready.set_exception(self.failure)

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
            self.parts.finished([self.lane_policy[lane] for lane in lanes], own)

    async def _learn(self, controller: Controller, lane_index: int) -> None:
        """Play one seat for the learner (its lane's policy), recording its steps in lane ``lane_index``, which also
        tags its requests (its recurrent memory, its ε); a part goes to its policy's queue the moment the lane holds
        one."""
        lane, policy_name = self.lanes[lane_index], self.lane_policy[lane_index]
        model, policy = self.members[policy_name], self.policies[policy_name]
        batcher, clock, truncation = model.batcher, self.clock, self.sample.truncation
        memory = policy if isinstance(policy, RecurrentPolicy) else None
        if memory is not None:
            memory.reset(lane_index)                    # an episode starts from the zero state
        self.controllers[lane_index] = controller
        self.inference.register()
        try:
            while await controller.ready():
                observation = batcher.convert(controller.get_state())
                state = None if memory is None else memory.state(lane_index)
                action, log_prob, value = await self.inference.act(policy, observation, lane_index)
                lane.decide(observation, action, log_prob, value, self.version, state)
                if len(lane.values) > truncation:       # a part (its steps and the value after): cut it
                    self.parts.add(policy_name, lane_index, lane.take(truncation))
                    self._check_ready()
                    if self.sample.sync:
                        action = await self._decide_again(lane, policy, observation, lane_index, memory)
                began = clock.step(lane_index)
                await controller(model.env_action(action))
                took = time.monotonic() - began
                if clock.called(took):
                    self._hitched(controller, took)
                self.parts.steps[policy_name] += 1
                lane.outcome(controller.get_reward(), controller.done, controller.truncated)
            if controller.truncated:
                final = batcher.convert(controller.get_state())
                lane.set_final((await self.inference.act(policy, final, lane_index))[2], final)
        finally:
            self.controllers.pop(lane_index, None)
            self.inference.unregister()

    def _hitched(self, controller: Controller, took: float) -> None:
        """An environment call took ``took`` seconds, longer than ``mdp.hitch``: a blocking environment moves to a
        thread of its own (:meth:`Controller.hitched`). Where the actor's typical call is slow enough that a thread's
        handoff costs little beside it (:meth:`LaneClock.threads_pay`), every environment of the actor moves at the
        first hitch (they share its cause: the same simulator), else only the one that hitched."""
        for playing in (self.controllers.values() if self.clock.threads_pay() else (controller,)):
            playing.hitched(took)

    async def _decide_again(self, lane: Lane, policy: BatchPolicy, observation: np.ndarray, lane_index: int,
                            memory: RecurrentPolicy | None) -> np.ndarray:
        """``sample.sync``: the lane's part is complete and its newest decision only gave the bootstrap value;
        wait for the next segment and, if new weights came meanwhile, decide that step again with them (the next
        part then holds no step of older weights); a recurrent policy (its ``memory``) decides it from the state it
        had before the step (the one the part records). The action to take."""
        version = self.version
        self.holding.add(lane_index)
        try:
            await self.round.wait()
        finally:
            self.holding.discard(lane_index)
        self.clock.step(lane_index)                     # it waited for the learner, not for its environment
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

