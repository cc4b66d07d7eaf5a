"""A rollout worker (``python -m lamarckian.remote worker``): this machine's environments and policy, segments to
the relay, new weights from it whenever they changed. No Ray; with ``--onnx`` no torch either.

The worker keeps up to ``credits`` segments unanswered; each answer says whether the segment was accepted and
carries the trainer's newest weights when the worker's are older. While the server is away the worker goes on
sampling and drops what it cannot send (counted), so a real-time environment never waits for the network.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Protocol

import numpy as np

from ..config.sections import RunSettings, SampleSettings
from ..mdp import create_mdp, wrap_controller
from ..model.observation import ObservationBatcher
from ..rating.results import EpisodeResult
from ..rl.seeds import FIRST_ENVIRONMENT_SLOT, actor_seed
from ..rl.segment import Lane, is_report, stack_lanes
from .client import Client

log = logging.getLogger(__name__)
FIXED_VERSION = -1          # the weight version of an exported (ONNX) policy's segments: no trainer version
WATCHED_MODULES = ("ray", "torch", "onnxruntime")
STATUS_SECONDS = 30.0


def imported() -> list[str]:
    """Which of :data:`WATCHED_MODULES` this process has imported (the server records it)."""
    return [name for name in WATCHED_MODULES if sys.modules.get(name) is not None]


class Source(Protocol):
    """What samples: the torch :class:`~lamarckian.rl.fleet.actor.Actor` or :class:`OnnxRollout`."""

    def sample(self) -> dict[str, Any]: ...

    def set_weights(self, version: int, blob: np.ndarray) -> int: ...

    def close(self) -> None: ...


class OnnxRollout:
    """``sample.envs`` environments acting with an exported policy in onnxruntime (numpy only, no torch); segments of
    ``sample.truncation`` steps for off-policy learners (no log-probabilities or values: zeros).

    Args:
        config: the run configuration (``mdp``, ``sample``, ``seed``).
        index: this worker's number (environment seeds).
        path: the ``.onnx`` file of ``export.py --onnx``.
    """

    def __init__(self, config: Mapping[str, Any], index: int, path: Path) -> None:
        import onnxruntime

        self.session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        outputs = [output.name for output in self.session.get_outputs()]
        if outputs[:2] != ["action", "policy_action"]:
            raise ValueError(f"--onnx {path}: outputs {outputs}, expected [action, policy_action] (export.py --onnx)")
        sample = SampleSettings.from_config(config)
        self.truncation, self.mdp_config = sample.truncation, config["mdp"]
        seed = RunSettings.from_config(config).seed
        self.mdps = [create_mdp(config["mdp"], seed=actor_seed(seed, index, FIRST_ENVIRONMENT_SLOT + slot))
                     for slot in range(sample.envs)]
        self.batcher = ObservationBatcher(self.mdps[0].describe()[0].observation)
        self.lanes = [Lane(keep_next=True) for _ in self.mdps]
        self.results: list[EpisodeResult] = []
        self.steps = 0
        self.loop = asyncio.new_event_loop()
        self.tasks: list[asyncio.Task] = []

    def set_weights(self, version: int, blob: np.ndarray) -> int:
        raise RuntimeError("an ONNX worker runs its exported policy; it takes no weights")

    def act(self, observation: np.ndarray) -> tuple[Any, np.ndarray]:
        """The environment's action and the learner's representation of it for one observation."""
        action, policy_action = self.session.run(None, {"observation": observation[None]})[:2]
        action = action[0]
        return (int(action) if action.ndim == 0 else action), policy_action[0]

    async def _run_slot(self, slot: int) -> None:
        mdp, lane = self.mdps[slot], self.lanes[slot]
        while True:
            controller = wrap_controller(mdp.reset(0).controllers[0], self.mdp_config)
            while await controller.ready():
                observation = self.batcher.convert(controller.get_state())
                action, policy_action = self.act(observation)
                lane.decide(observation, policy_action, 0.0, 0.0, FIXED_VERSION)
                if all(lane.ready(self.truncation) for lane in self.lanes):
                    self.loop.stop()
                await asyncio.sleep(0)       # inference does not wait: yield, so that stop() and the others run
                await controller(action)
                self.steps += 1
                lane.outcome(controller.get_reward(), controller.done, controller.truncated)
            if controller.truncated:
                lane.set_final(0.0, self.batcher.convert(controller.get_state()))
            self.results.append(EpisodeResult.of(controller.get_result()))

    def close(self) -> None:
        """Stop the environments' tasks and close the environments."""
        for task in self.tasks:
            task.cancel()
        if self.tasks:
            self.loop.run_until_complete(asyncio.gather(*self.tasks, return_exceptions=True))
        self.loop.close()
        for mdp in self.mdps:
            mdp.close()

    def sample(self) -> dict[str, Any]:
        """The next segment (wire form), ``[T, L]`` with L = environments."""
        if not self.tasks:
            self.tasks = [self.loop.create_task(self._run_slot(slot)) for slot in range(len(self.mdps))]
            for task in self.tasks:
                task.add_done_callback(lambda _: self.loop.stop())
        while not all(lane.ready(self.truncation) for lane in self.lanes):
            self.loop.run_forever()
            failed = [task for task in self.tasks if task.done()]
            if failed:
                raise failed[0].exception() or RuntimeError("an environment task ended")
        segment = stack_lanes([lane.take(self.truncation) for lane in self.lanes], self.steps, self.results)
        self.results, self.steps = [], 0
        return segment.to_wire()


class Worker:
    """Streams segments from ``source`` to the server behind ``client``.

    Args:
        client: the connection (its key decides the worker's name on the server).
        in_flight: segments sent and not yet answered, at most.
        onnx: the source is an exported policy (no weights are asked for).
    """

    def __init__(self, client: Client, in_flight: int = 2, onnx: bool = False) -> None:
        self.client, self.credits, self.onnx = client, in_flight, onnx
        self.version = FIXED_VERSION
        self.counts = {"sent": 0, "accepted": 0, "refused": 0, "unsent": 0, "weights": 0}
        self.in_flight = 0
        self.last_answer = time.monotonic()
        self.name = ""

    def hello(self) -> dict[str, Any]:
        """Introduce this worker; the server's welcome (its name for us, the weight version)."""
        welcome = self.client.request({"op": "hello", "policy": "onnx" if self.onnx else "torch"})
        self.name = str(welcome.get("worker"))
        return welcome

    def first_weights(self, stop: threading.Event) -> tuple[int, np.ndarray, dict[str, Any]]:
        """Wait until the trainer has published weights; (version, blob, extras)."""
        told = False
        while not stop.is_set():
            answer = self.client.request({"op": "weights", "have": FIXED_VERSION})
            if "blob" in answer:
                return int(answer["version"]), answer["blob"], dict(answer.get("extras") or {})
            if not told:
                log.warning("waiting for the trainer's first weights")
                told = True
            stop.wait(0.5)
        raise KeyboardInterrupt

    def run(self, source: Source, stop: threading.Event, apply_extras: Any = None) -> None:
        """Sample and send until ``stop`` is set; new weights go into ``source`` (and their extras to
        ``apply_extras``)."""
        shown = time.monotonic()
        while not stop.is_set():
            segment = source.sample()
            if is_report(segment):           # the actor's progress while a slow segment fills: the trainer wants
                continue                     # segments only (and the loop sees `stop` meanwhile)
            message: dict[str, Any] = {"op": "segment", "segment": segment, "imports": imported()}
            if not self.onnx:
                message["have"] = self.version
            if self.client.send(message) is None:
                self.counts["unsent"] += 1
            else:
                self.counts["sent"] += 1
                self.in_flight += 1
            self._read_answers(source, apply_extras)
            if time.monotonic() - shown >= STATUS_SECONDS:
                shown = time.monotonic()
                log.info("worker %s: %s, weights version %d", self.name,
                         ", ".join(f"{k} {v}" for k, v in self.counts.items()), self.version)

    def _read_answers(self, source: Source, apply_extras: Any) -> None:
        """Take the answers that have come; wait for one while ``credits`` segments are unanswered (after the
        client's time-out of silence the count restarts, the connection is made anew and sampling goes on; a key
        revoked meanwhile is then refused: KeyRefused)."""
        while True:
            waiting = self.in_flight >= self.credits
            left = self.client.timeout - (time.monotonic() - self.last_answer)
            answer = self.client.receive(max(0.0, left) if waiting else 0.0)
            if answer is None:
                if waiting:
                    log.warning("no answer from the server for %.0f s; reconnecting, sampling on", self.client.timeout)
                    self.in_flight, self.last_answer = 0, time.monotonic()
                    self.client.reconnect()
                return
            self.last_answer = time.monotonic()
            if answer.get("op") != "ack":
                continue
            self.in_flight = max(0, self.in_flight - 1)
            self.counts["accepted" if answer.get("accepted") else "refused"] += 1
            if "blob" in answer and not self.onnx:
                self.version = source.set_weights(int(answer["version"]), answer["blob"])
                self.counts["weights"] += 1
                if apply_extras is not None:
                    apply_extras(answer.get("extras") or {})
