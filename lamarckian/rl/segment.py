"""Trajectory segments ``[T, L]`` for the update (:class:`Segment`) and the per-lane buffers the actors cut them
from (:class:`Lane`)."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np

from ..rating.results import EpisodeResult

ARRAYS = ("observations", "actions", "log_probs", "values", "rewards", "dones", "truncated", "final_values")
OPTIONAL = ("next_observations", "states", "versions")   # arrays only some segments carry


@dataclasses.dataclass
class Segment:
    """``T`` steps of ``L`` lanes: numpy arrays from the actors, torch tensors on a vectorized task's device.

    Attributes:
        observations: ``[T, L, ...]``; actions ``[T, L, ...]`` (as sampled, before any clipping).
        log_probs, rewards: ``[T, L]`` float; dones, truncated ``[T, L]`` (episode ended; ended by a time limit).
        values: ``[T + 1, L]``, the behaviour policy's values; the last row bootstraps the segment.
        final_values: ``[T, L]``, the value of the last observation of an episode cut by a time limit, else 0.
        version: the oldest weight version that acted in it (staleness = learner version − this).
        versions: ``[L]`` int, the oldest weight version that acted in each lane (the fleet's actors send it, so a
            learner judges every lane by its own age: :meth:`trimmed`); None: the segment is judged whole.
        steps: env steps it accounts for (beyond T × L when frames are skipped).
        results: the episodes that finished while it was recorded.
        next_observations: ``[T, L, ...]``, the observation after each step (the episode's last one where a time
            limit cut it), for the off-policy learners' replay; None for the on-policy ones.
        states: ``(L, S)``, a recurrent policy's state before each lane's first step (zeros where an episode
            starts there); None for feed-forward policies.
        counters: what the environments counted since the actor's previous segment (``MDP.counters``: a game
            server's lost episodes...), added up by the learner.
        policy: the policy that played its lanes (``rl.policies``); "" with one policy for every seat.
    """

    observations: Any
    actions: Any
    log_probs: Any
    values: Any
    rewards: Any
    dones: Any
    truncated: Any
    final_values: Any
    version: int
    steps: int = 0
    results: list[EpisodeResult] = dataclasses.field(default_factory=list)
    next_observations: Any = None
    states: Any = None
    versions: Any = None
    counters: dict[str, float] = dataclasses.field(default_factory=dict)
    policy: str = ""

    @property
    def lanes(self) -> int:
        """``L``, the lanes side by side."""
        return int(self.rewards.shape[1])

    def trimmed(self, oldest: int) -> "Segment | None":
        """The segment without the lanes that acted with weights older than ``oldest`` (a lane that waited on a
        slow environment while the others went on is judged by its own age, not the whole segment by it); None when
        no lane is left. ``steps`` shrinks in proportion to the lanes kept; ``results`` stay (the episodes were
        played either way). A segment without :attr:`versions` is judged whole."""
        if self.version >= oldest:
            return self
        if self.versions is None:
            return None
        keep = np.flatnonzero(np.asarray(self.versions) >= oldest)
        if keep.size == 0:
            return None

        def lanes(array: Any) -> Any:
            return None if array is None else array[:, keep]

        return dataclasses.replace(
            self, **{name: lanes(getattr(self, name)) for name in (*ARRAYS, "next_observations")},
            states=None if self.states is None else self.states[keep], versions=np.asarray(self.versions)[keep],
            version=int(np.asarray(self.versions)[keep].min()), steps=self.steps * len(keep) // self.lanes)

    def finite(self) -> bool:
        """No NaN or infinity in the rewards and observations (a broken environment's output)."""
        arrays = (self.rewards, self.observations, self.next_observations)
        return all(a is None or not np.issubdtype(a.dtype, np.floating) or bool(np.isfinite(a).all()) for a in arrays)

    def to_wire(self) -> dict[str, Any]:
        """Arrays and plain data for the RPC layer (arrays travel as raw frames)."""
        wire = {**{name: getattr(self, name) for name in ARRAYS}, "version": int(self.version),
                "steps": int(self.steps), "results": [r.to_wire() for r in self.results]}
        for name in OPTIONAL:
            if getattr(self, name) is not None:
                wire[name] = getattr(self, name)
        if self.counters:
            wire["counters"] = dict(self.counters)
        if self.policy:
            wire["policy"] = self.policy
        return wire

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> "Segment":
        """Undo :meth:`to_wire`; ValueError naming what is missing or not an array (a peer's malformed report)."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a segment is a mapping, got {type(data).__name__}")
        missing = [name for name in (*ARRAYS, "version", "steps", "results") if name not in data]
        if missing:
            raise ValueError(f"segment without {', '.join(missing)}")
        bad = [name for name in (*ARRAYS, *OPTIONAL) if name in data and not isinstance(data[name], np.ndarray)]
        if bad:
            raise ValueError(f"segment fields {', '.join(bad)} are not arrays")
        versions = data.get("versions")
        if versions is not None and (versions.ndim != 1 or not np.issubdtype(versions.dtype, np.integer)
                                     or versions.shape[0] != data["rewards"].shape[-1]):
            raise ValueError(f"segment versions must be one integer per lane, got {versions.dtype} "
                             f"{tuple(versions.shape)}")
        counters = data.get("counters") or {}
        if not isinstance(counters, Mapping) or not all(isinstance(k, str) and isinstance(v, (int, float))
                                                        for k, v in counters.items()):
            raise ValueError("segment counters must map names to numbers")
        policy = data.get("policy", "")
        if not isinstance(policy, str):
            raise ValueError(f"segment policy must be a name, got {policy!r:.50}")
        return cls(**{name: data[name] for name in ARRAYS}, version=int(data["version"]), steps=int(data["steps"]),
                   results=[EpisodeResult.from_wire(r) for r in data["results"]],
                   **{name: data.get(name) for name in OPTIONAL}, counters=dict(counters), policy=policy)


REPORT = "progress"          # the key of an actor's progress report among its gathered messages (rl/fleet/stall.py)


def is_report(message: Any) -> bool:
    """Whether an actor's message is a progress report (sent while a slow segment fills), not segments."""
    return isinstance(message, Mapping) and REPORT in message


def segments_of(message: Mapping[str, Any]) -> list[Segment]:
    """The segments of an actor's message: one segment, or with ``rl.policies`` a ``{"bundle": [segment, ...]}`` of
    one per policy; ValueError for anything else (a peer's malformed report)."""
    if isinstance(message, Mapping) and "bundle" in message:
        bundle = message["bundle"]
        if not isinstance(bundle, list) or not bundle:
            raise ValueError("a segment bundle is a non-empty list of segments")
        return [Segment.from_wire(part) for part in bundle]
    return [Segment.from_wire(message)]


class Lane:
    """One learner seat's continuous stream of steps (episodes follow each other in the same lane).

    A step is recorded in two halves: ``decide`` (observation, action, log-probability, value, weight
    version, a recurrent policy's state before the step) and ``outcome`` (reward, episode end). ``final_value`` is
    the value of the last observation of an episode cut by a time limit (to bootstrap from), 0 otherwise.

    Args:
        keep_next: also cut ``next_observations`` (the off-policy learners' replay needs them).
    """

    def __init__(self, keep_next: bool = False) -> None:
        self.keep_next = keep_next
        self.final_observations: dict[int, np.ndarray] = {}    # step index in the lane → its episode's last observation
        self.observations: list[np.ndarray] = []
        self.actions: list[np.ndarray] = []
        self.log_probs: list[float] = []
        self.values: list[float] = []
        self.versions: list[int] = []
        self.rewards: list[float] = []
        self.dones: list[bool] = []
        self.truncated: list[bool] = []
        self.final_values: list[float] = []
        self.states: list[np.ndarray] = []

    def decide(self, observation: np.ndarray, action: np.ndarray, log_prob: float, value: float, version: int,
               state: np.ndarray | None = None) -> None:
        if state is not None:
            self.states.append(state)
        self.observations.append(observation)
        self.actions.append(action)
        self.log_probs.append(log_prob)
        self.values.append(value)
        self.versions.append(version)

    def redecide(self, action: np.ndarray, log_prob: float, value: float, version: int) -> None:
        """Replace the newest decision (its step's outcome not yet known) by one of newer weights."""
        self.actions[-1], self.log_probs[-1], self.values[-1], self.versions[-1] = action, log_prob, value, version

    def outcome(self, reward: float, done: bool, truncated: bool) -> None:
        self.rewards.append(reward)
        self.dones.append(done)
        self.truncated.append(truncated)
        self.final_values.append(0.0)

    def set_final(self, value: float, observation: np.ndarray) -> None:
        """The value and (kept with ``keep_next``) the observation after the last step, its episode cut by a time
        limit."""
        self.final_values[-1] = value
        if self.keep_next:
            self.final_observations[len(self.rewards) - 1] = observation

    def ready(self, length: int) -> bool:
        """``length`` complete steps and the value of the observation after them."""
        return len(self.rewards) >= length and len(self.values) > length

    def take(self, length: int) -> dict[str, Any]:
        """The first ``length`` steps (plus the bootstrap value); they leave the lane."""
        part = {
            "observations": np.stack(self.observations[:length]),
            "actions": np.stack(self.actions[:length]),
            "log_probs": np.asarray(self.log_probs[:length], np.float32),
            "values": np.asarray(self.values[:length + 1], np.float32),
            "rewards": np.asarray(self.rewards[:length], np.float32),
            "dones": np.asarray(self.dones[:length], np.bool_),
            "truncated": np.asarray(self.truncated[:length], np.bool_),
            "final_values": np.asarray(self.final_values[:length], np.float32),
            "version": min(self.versions[:length]),
        }
        if self.states:
            part["states"] = self.states[0]
        if self.keep_next:
            following = [self.final_observations.pop(t, None) for t in range(length)]
            part["next_observations"] = np.stack([self.observations[t + 1] if seen is None else seen
                                                  for t, seen in enumerate(following)])
            self.final_observations = {t - length: o for t, o in self.final_observations.items()}
        for name in ("observations", "actions", "log_probs", "values", "versions", "rewards", "dones", "truncated",
                     "final_values", "states"):
            del getattr(self, name)[:length]
        return part


def stack_lanes(parts: list[dict[str, Any]], steps: int, results: list[EpisodeResult]) -> Segment:
    """Lane parts ``[T]`` (:meth:`Lane.take`) side by side as one segment ``[T, L]``; ``version`` is the oldest,
    ``versions`` each part's."""
    following = np.stack([p["next_observations"] for p in parts], axis=1) if "next_observations" in parts[0] else None
    states = np.stack([p["states"] for p in parts]) if "states" in parts[0] else None
    arrays: dict[str, Any] = {name: np.stack([p[name] for p in parts], axis=1) for name in ARRAYS}
    versions = np.asarray([p["version"] for p in parts], np.int64)
    return Segment(**arrays, version=int(versions.min()), steps=steps, results=results,
                   next_observations=following, states=states, versions=versions)
