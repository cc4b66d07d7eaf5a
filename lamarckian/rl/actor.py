"""The sampling Actor: K environments as asyncio tasks, one batched forward per round, segments for Gather."""

from __future__ import annotations

import asyncio
import copy
from typing import Any, Mapping

import numpy as np
import torch

from .. import rpc
from ..mdp import MDP, Controller, create_mdp, wrap_controller
from ..model import ActorCritic, ModelSettings, load_blob
from .inference import BatchedInference, Policy
from .segment import Lane, stack_lanes

LEARNER, OPPONENT = "learner", "opponent"
RULE, SELF = "rule", "self"


def build_model(mdp: MDP, model_config: Mapping[str, Any]) -> ActorCritic:
    """The learner's network for seat 0 of ``mdp`` (every seat must share spaces)."""
    spec = mdp.describe()[0]
    return ActorCritic(spec.observation, spec.action, ModelSettings.from_mapping(model_config))


def actor_seed(seed: int, index: int, slot: int) -> int:
    """A distinct, reproducible seed per (run seed, actor, environment slot)."""
    return (seed * 1_000_003 + index * 10_007 + slot) % (2**31)


@rpc.gather
@rpc.all
@rpc.any
class Actor:
    """Runs ``sample.envs`` environments and streams segments of ``sample.truncation`` steps per lane.

    Args:
        config: the resolved run configuration.
        index: this actor's number (seeds differ per actor).
        blob: initial learner weights (None keeps the network's initialization).
        version: the weights' version number.
        opponents: frozen opponent weights ``{opponent slot: blob}`` (see :meth:`set_opponents`); a slot without
            weights plays a copy of the initial learner.
    """

    def __init__(self, config: Mapping[str, Any], index: int, blob: np.ndarray | None = None,
                 version: int = 0, opponents: Mapping[int, np.ndarray] | None = None) -> None:
        torch.set_num_threads(1)
        torch.manual_seed(actor_seed(config["seed"], index, 0))
        self.mdp_config = config["mdp"]
        self.envs = int(config["sample"]["envs"])
        self.truncation = int(config["sample"]["truncation"])
        self.rule_probability = float(config["rl"]["opponent"]["rule"])
        self.swap = bool(config["rl"]["swap"])
        self.random = np.random.default_rng(actor_seed(config["seed"], index, 1))
        self.mdps = [create_mdp(self.mdp_config, seed=actor_seed(config["seed"], index, slot + 2))
                     for slot in range(self.envs)]
        self.seats = len(self.mdps[0])
        self.model = build_model(self.mdps[0], config["model"])
        if blob is not None:
            load_blob(self.model, blob)
        self.version = version
        self.generator = torch.Generator().manual_seed(actor_seed(config["seed"], index, 2**20))
        self.policy = Policy(self.model, generator=self.generator)
        self.opponents: dict[int, Policy] = {}
        self.set_opponents(opponents or {})
        self.lanes = [Lane() for _ in range(self.envs)]
        self.results: list[dict[str, Any]] = []
        self.steps = 0
        self.loop = asyncio.new_event_loop()
        self.inference = BatchedInference()
        self.tasks: list[asyncio.Task] = []
        self.failure: BaseException | None = None
        self.ready: asyncio.Future | None = None
        self.eval_mdps: list[MDP] = []
        self.eval_seed = actor_seed(config["seed"] + 7919, index, 0)

    # ---- weights -------------------------------------------------------------------------------------------
    def set_weights(self, version: int, blob: np.ndarray) -> int:
        """Load the learner's weights (tagging later steps with ``version``)."""
        load_blob(self.model, blob)
        self.version = int(version)
        return self.version

    def set_opponents(self, opponents: Mapping[int, np.ndarray]) -> None:
        """Frozen opponent weights ``{opponent slot: blob}``. In an episode the seats other than the learner's
        get slots 1, 2, ... in seat order (in a 2-player game the opponent is slot 1); a slot never given
        weights plays as slot 1 (or, before any weights, as a copy of the initial learner)."""
        for slot, blob in opponents.items():
            slot = int(slot)
            if slot < 1:
                raise ValueError(f"opponent slots start at 1, got {slot}")
            if slot not in self.opponents:
                self.opponents[slot] = Policy(copy.deepcopy(self.model), generator=self.generator)
            load_blob(self.opponents[slot].model, blob)

    def _opponent(self, slot: int, deterministic: bool = False) -> Policy:
        policy = self.opponents.get(slot) or self.opponents.get(1)
        if policy is None:
            policy = self.opponents[1] = Policy(copy.deepcopy(self.model), generator=self.generator)
        return Policy(policy.model, deterministic, policy.generator) if deterministic else policy

    # ---- sampling ------------------------------------------------------------------------------------------
    def sample(self) -> dict[str, Any]:
        """The next segment: arrays ``[T, L]`` (L = environments), the episodes finished meanwhile, env steps."""
        if self.failure is not None:
            raise self.failure
        if not self.tasks:
            self.tasks = [self.loop.create_task(self._run_slot(slot)) for slot in range(self.envs)]
            for task in self.tasks:
                task.add_done_callback(self._on_slot_done)
        self.ready = self.loop.create_future()
        self._check_ready()
        self.loop.run_until_complete(self.ready)
        segment = stack_lanes([lane.take(self.truncation) for lane in self.lanes])
        segment["results"], self.results = self.results, []
        segment["steps"], self.steps = self.steps, 0
        return segment

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

    def _pick_seats(self, mdp: MDP) -> tuple[int, list[int], str | None]:
        """(learner seat, opponent seats played by the frozen model, opponent kind) for a new episode."""
        if self.seats == 1:
            return 0, [], None
        learner = int(self.random.integers(self.seats)) if self.swap else 0
        others = [seat for seat in range(self.seats) if seat != learner]
        if self.rule_probability > 0 and self.random.random() < self.rule_probability:
            return learner, [], RULE
        return learner, others, SELF

    async def _run_slot(self, slot: int) -> None:
        mdp, lane = self.mdps[slot], self.lanes[slot]
        while True:
            learner, opponents, kind = self._pick_seats(mdp)
            episode = mdp.reset(learner, *opponents)
            controllers = [wrap_controller(c, self.mdp_config) for c in episode.controllers]
            players = [self._learn(controllers[0], lane)]
            players += [self._play(c, (OPPONENT, slot), self._opponent(slot))
                        for slot, c in enumerate(controllers[1:], start=1)]
            await asyncio.gather(*players, *episode.ticks)
            result = controllers[0].get_result()
            result["opponent"] = kind
            self.results.append(result)

    async def _learn(self, controller: Controller, lane: Lane) -> None:
        batcher = self.model.batcher
        self.inference.register()
        try:
            while not controller.done:
                observation = batcher.convert(controller.get_state())
                action, log_prob, value = await self.inference.act(LEARNER, self.policy, observation)
                lane.decide(observation, action, log_prob, value, self.version)
                if len(lane.values) == self.truncation + 1:  # this lane just filled: maybe all have
                    self._check_ready()
                await controller(self.model.env_action(action))
                self.steps += 1
                lane.outcome(controller.get_reward(), controller.done, controller.truncated)
            if controller.truncated:
                final = batcher.convert(controller.get_state())
                lane.set_final_value((await self.inference.act(LEARNER, self.policy, final))[2])
        finally:
            self.inference.unregister()

    async def _play(self, controller: Controller, key: Any, policy: Policy,
                    inference: BatchedInference | None = None) -> None:
        inference = inference or self.inference
        model = policy.model
        inference.register()
        try:
            while not controller.done:
                action = (await inference.act(key, policy, model.batcher.convert(controller.get_state())))[0]
                await controller(model.env_action(action))
        finally:
            inference.unregister()

    # ---- evaluation ----------------------------------------------------------------------------------------
    def evaluate(self, episodes: int, opponent: str = RULE) -> list[dict[str, Any]]:
        """Play ``episodes`` episodes with the deterministic policy against ``opponent`` (``rule`` or ``self``);
        the episodes' results. Runs on its own event loop: sampling is paused meanwhile."""
        if opponent not in (RULE, SELF):
            raise ValueError(f"evaluator.opponent={opponent!r}: expected {RULE!r} or {SELF!r}")
        while len(self.eval_mdps) < min(episodes, self.envs):
            self.eval_mdps.append(create_mdp(self.mdp_config, seed=self.eval_seed + len(self.eval_mdps)))
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(self._evaluate(episodes, opponent))
        finally:
            loop.close()

    async def _evaluate(self, episodes: int, opponent: str) -> list[dict[str, Any]]:
        inference = BatchedInference()
        learner = Policy(self.model, deterministic=True)
        remaining = [episodes]
        results: list[dict[str, Any]] = []

        async def run(mdp: MDP, first_seat: int) -> None:
            seat = first_seat
            while remaining[0] > 0:
                remaining[0] -= 1
                others = [s for s in range(self.seats) if s != seat] if opponent == SELF else []
                episode = mdp.reset(seat, *others)
                controllers = [wrap_controller(c, self.mdp_config) for c in episode.controllers]
                await asyncio.gather(self._play(controllers[0], LEARNER, learner, inference),
                                     *(self._play(c, (OPPONENT, slot), self._opponent(slot, True), inference)
                                       for slot, c in enumerate(controllers[1:], start=1)),
                                     *episode.ticks)
                result = controllers[0].get_result()
                result["opponent"] = opponent if self.seats > 1 else None
                results.append(result)
                seat = (seat + 1) % self.seats  # alternate sides

        await asyncio.gather(*(run(mdp, slot % self.seats) for slot, mdp in enumerate(self.eval_mdps)))
        return results

    def statistics(self) -> dict[str, float]:
        """Inference batching: forwards served and the mean batch size."""
        return {"forwards": self.inference.forwards,
                "batch": self.inference.requests / max(1, self.inference.forwards)}

    def close(self) -> None:
        """Stop the environments' tasks and close the environments (not while ``sample`` runs)."""
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()
        self.tasks = []
        for mdp in (*self.mdps, *self.eval_mdps):
            mdp.close()
