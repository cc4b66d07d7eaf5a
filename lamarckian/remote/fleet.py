"""The trainer's side of remote workers (``rl.remote.server``): what the Learner calls its actors.

:class:`RemoteGather` stands where the Learner's ``Gather`` stands (``gather(timeout)`` → one segment) and takes
segments from the server in batches; :class:`RemoteAll` stands where its ``All`` stands: ``broadcast("set_weights",
...)`` uploads the newest weights at most every ``rl.remote.publish`` seconds, and ``("evaluate", ...)`` plays the
evaluation episodes in this process (deterministic, on the same MDP, in real time where it is real-time).
"""

from __future__ import annotations

import collections
import contextlib
import time
from typing import Any, Iterator, Mapping

import numpy as np
import torch

from ..config.sections import RemoteSettings
from ..model import load_blob
from .client import Client, ServerSilent
from .worker import FIXED_VERSION

#: the server's counters the trainer records (TensorBoard ``remote/...``)
RECORDED = ("refused", "garbage", "dropped_workers", "ignored", "rate_limited", "overflow", "received", "delivered",
            "queued")


class RemoteLink:
    """The trainer's connection to the server and the server's latest counters."""

    def __init__(self, settings: RemoteSettings) -> None:
        self.settings = settings
        if settings.server is None or settings.key is None or settings.server_key is None:
            raise ValueError("rl.remote.server, rl.remote.key and rl.remote.server_key must be set to reach remote "
                             "workers")
        self.client: Client | None = Client(settings.server, settings.key, settings.server_key, settings.timeout,
                                            hwm=16)
        self.server_stats: dict[str, Any] = {}

    def request(self, message: Mapping[str, Any], timeout: float | None = None) -> dict[str, Any]:
        if self.client is None:
            raise RuntimeError("rl.remote.server: the connection was closed")
        try:
            return self.client.request(message, timeout)
        except ServerSilent as error:
            raise RuntimeError(f"rl.remote.server: {error}") from None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


class RemoteGather:
    """Segments from the server, one per call, checked against the learner's network.

    Args:
        link: the connection.
        model: the learner's network (observation and action shapes a segment must have).
        keep_fixed: keep segments of exported (ONNX) policies (off-policy learners); on-policy learners drop them.
    """

    def __init__(self, link: RemoteLink, model: torch.nn.Module, keep_fixed: bool) -> None:
        self.link, self.keep_fixed = link, keep_fixed
        network: Any = model          # an ActorCritic or an off-policy network: both have these
        self.observation_shape = tuple(network.batcher.shape)
        self.action_shape = () if network.discrete else tuple(network.action_space.shape)
        self.buffer: collections.deque[tuple[str, dict[str, Any]]] = collections.deque()
        self.workers: list[str] = []          # names seen, in order; last_index indexes it
        self.last_index = 0
        self.counts = {"mismatched": 0, "fixed_dropped": 0}

    def __call__(self, timeout: float | None = None) -> dict[str, Any]:
        """The next segment (wire form); TimeoutError after ``timeout`` seconds (None: wait for one)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            while self.buffer:
                name, segment = self.buffer.popleft()
                if self._fits(segment):
                    if name not in self.workers:
                        self.workers.append(name)
                    self.last_index = self.workers.index(name)
                    return segment
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no segment from the remote workers")
            answer = self.link.request({"op": "pull", "max": self.link.settings.batch, "wait": min(1.0, left)},
                                       timeout=self.link.settings.timeout + min(1.0, left))
            self.link.server_stats = answer.get("stats") or {}
            self.buffer.extend((str(item["worker"]), item["segment"]) for item in answer.get("segments", []))

    def _fits(self, segment: Mapping[str, Any]) -> bool:
        """The segment's shapes are this network's and it has what the learner needs (a worker with other -c
        files sends others: dropped and counted); on-policy learners take no exported policy's segments."""
        if "gradient" in segment:              # A3C: the learner checks the gradient's size itself
            return True
        observations, actions = segment["observations"], segment["actions"]
        if observations.shape[2:] != self.observation_shape or actions.shape[2:] != self.action_shape \
                or (self.keep_fixed and "next_observations" not in segment):
            self.counts["mismatched"] += 1
            return False
        if int(segment["version"]) == FIXED_VERSION and not self.keep_fixed:
            self.counts["fixed_dropped"] += 1
            return False
        return True

    @contextlib.contextmanager
    def gathering(self, method: str) -> Iterator[None]:
        """The workers sample on their own; nothing to start."""
        yield

    def statistics(self) -> dict[str, float]:
        """``remote/...`` scalars: the server's counters, workers that delivered, this side's drops."""
        stats = {f"remote/{name}": float(self.link.server_stats.get(name, 0)) for name in RECORDED}
        stats["remote/workers"] = float(len(self.link.server_stats.get("workers", {})))
        stats.update({f"remote/{name}": float(count) for name, count in self.counts.items()})
        return stats

    def close(self) -> None:
        """Drop what was not taken and close the connection (the Learner closes its All first)."""
        self.buffer.clear()
        self.link.close()


class RemoteAll:
    """The workers as the Learner's ``All``: weights go to the server, evaluation runs in this process.

    Args:
        link: the connection.
        config: the run configuration (the local evaluation actor's).
    """

    def __init__(self, link: RemoteLink, config: Mapping[str, Any]) -> None:
        self.link, self.config = link, config
        self.blob: np.ndarray | None = None
        self.version = 0
        self.extras: dict[str, Any] = {}
        self.uploaded = -float("inf")
        self.evaluator_actor: Any = None

    def __len__(self) -> int:
        return 1

    def broadcast(self, method: str, *args: Any) -> None:
        """``set_weights(version, blob)``: uploaded if ``rl.remote.publish`` seconds passed since the last upload;
        ``set_exploration(epsilon)``: sent with the next weights."""
        if method == "set_weights":
            self.version, self.blob = int(args[0]), np.asarray(args[1], np.float32)
            if time.monotonic() - self.uploaded >= self.link.settings.publish:
                self._upload()
        elif method == "set_exploration":
            self.extras["epsilon"] = float(args[0])
        else:
            raise ValueError(f"remote workers play single-player MDPs; {method!r} does not apply to them")

    def __call__(self, method: str, *args: Any) -> list[Any]:
        """``set_weights`` uploads now; ``evaluate(episodes, opponent)`` plays them here with the newest weights."""
        if method == "set_weights":
            self.version, self.blob = int(args[0]), np.asarray(args[1], np.float32)
            self._upload()
            return [self.version]
        if method == "evaluate":
            actor = self._evaluation_actor()
            if self.blob is not None:
                load_blob(actor.model, self.blob)
            return [actor.evaluate(*args)]
        raise ValueError(f"remote workers do not answer {method!r}")

    def _upload(self) -> None:
        self.link.request({"op": "publish", "version": self.version, "blob": self.blob, "extras": self.extras})
        self.uploaded = time.monotonic()

    def _evaluation_actor(self) -> Any:
        if self.evaluator_actor is None:
            from ..rl.fleet.actor import Actor

            self.evaluator_actor = Actor(self.config, 0, own_process=False)
        return self.evaluator_actor

    def close(self) -> None:
        if self.evaluator_actor is not None:
            self.evaluator_actor.close()
            self.evaluator_actor = None


def connect(config: Mapping[str, Any], model: torch.nn.Module, keep_fixed: bool) -> tuple[RemoteAll, RemoteGather]:
    """The trainer's view of the remote workers of ``rl.remote`` (checked: a wrong key fails here)."""
    link = RemoteLink(RemoteSettings.from_config(config))
    try:
        link.request({"op": "stats"})
    except Exception:
        link.close()
        raise
    return RemoteAll(link, config), RemoteGather(link, model, keep_fixed)
