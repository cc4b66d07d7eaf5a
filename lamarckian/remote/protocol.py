"""The remote protocol: a message is one msgpack body (a mapping with ``op`` and a request ``id``) followed by the
raw frames of its arrays (:mod:`lamarckian.rpc.codec`: nothing is unpickled). CurveZMQ authenticates and encrypts
every frame, so the messages carry no tags of their own.

Worker → server: ``hello``, ``weights {have}``, ``segment {have, segment, imports}`` (for A3C the ``segment`` is
the report of the segment's gradient, :func:`check_gradient`).
Trainer → server: ``publish {version, blob, extras}``, ``pull {max, wait}``, ``stats``.
Every reply carries the request's ``id``; replies to workers carry the weights when ``have`` is not the newest
``version`` (weights travel only when they changed).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

import numpy as np

from ..rating.results import EpisodeResult
from ..rl.segment import Segment
from ..rpc import codec

WORKER_OPS = ("hello", "weights", "segment")
TRAINER_OPS = ("publish", "pull", "stats")
MAX_RESULTS = 100_000       # finished episodes one segment may report


class Malformed(ValueError):
    """A message that does not follow the protocol (the sender is dropped and counted)."""


def pack(message: Mapping[str, Any]) -> list[Any]:
    """Frames of ``message``: the msgpack body, then its arrays' buffers (sent without copying)."""
    body, buffers = codec.encode(dict(message))
    return [body, *buffers]


def unpack(frames: Sequence[Any]) -> dict[str, Any]:
    """Undo :func:`pack`; :class:`Malformed` for anything that is not a mapping with a string ``op`` and an integer
    ``id``."""
    if not frames:
        raise Malformed("an empty message")
    try:
        message = codec.decode(frames[0], [memoryview(frame) for frame in frames[1:]])
    except Exception as error:  # noqa: BLE001 - any decoding failure of a peer's bytes is that peer's fault
        raise Malformed(f"undecodable message ({type(error).__name__}: {error})") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str) \
            or not isinstance(message.get("id"), int) or isinstance(message.get("id"), bool):
        raise Malformed("a message is a mapping with a string 'op' and an integer 'id'")
    return message


def integer(message: Mapping[str, Any], key: str) -> int:
    """``message[key]`` as an int; :class:`Malformed` naming the key otherwise."""
    value = message.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise Malformed(f"{message.get('op')}: {key!r} must be an integer")
    return value


def number(message: Mapping[str, Any], key: str, default: float) -> float:
    """``message[key]`` (default if absent) as a finite float; :class:`Malformed` otherwise."""
    value = message.get(key, default)
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not np.isfinite(value):
        raise Malformed(f"{message.get('op')}: {key!r} must be a finite number")
    return float(value)


def check_segment(wire: Any) -> Segment:
    """A worker's segment after checking what the trainer relies on: every field an array of a numeric dtype,
    the shapes of ``T`` steps of ``L`` lanes agreeing, a sane step count. :class:`Malformed` naming the field."""
    try:
        segment = Segment.from_wire(wire)
    except (ValueError, TypeError, KeyError, AttributeError) as error:
        raise Malformed(f"segment: {error}") from None
    if len(segment.results) > MAX_RESULTS:
        raise Malformed(f"segment: {len(segment.results)} results")
    try:          # numbers where numbers belong (a single-player episode: no opponents)
        segment.results = [EpisodeResult.of(dataclasses.asdict(result)) for result in segment.results]
    except (ValueError, TypeError, AttributeError) as error:
        raise Malformed(f"segment: a result: {error}") from None
    rewards = segment.rewards
    if rewards.ndim != 2 or 0 in rewards.shape:
        raise Malformed(f"segment: rewards of shape {rewards.shape}, expected [T, L]")
    steps, lanes = rewards.shape
    expected = {"observations": (steps, lanes), "actions": (steps, lanes), "log_probs": (steps, lanes),
                "dones": (steps, lanes), "truncated": (steps, lanes), "final_values": (steps, lanes),
                "values": (steps + 1, lanes), "next_observations": (steps, lanes)}
    for name, leading in expected.items():
        array = getattr(segment, name)
        if array is None:
            continue
        if array.shape[:2] != leading or (name in ("log_probs", "dones", "truncated", "final_values", "values")
                                          and array.ndim != 2):
            raise Malformed(f"segment: {name} of shape {array.shape} does not fit rewards {rewards.shape}")
        if array.dtype.kind not in "biuf":
            raise Malformed(f"segment: {name} of dtype {array.dtype}")
    if segment.next_observations is not None and segment.next_observations.shape != segment.observations.shape:
        raise Malformed("segment: next_observations and observations differ in shape")
    if not 0 <= segment.steps <= 1_000 * steps * lanes:
        raise Malformed(f"segment: {segment.steps} env steps for {steps} x {lanes} decisions")
    return segment


def check_gradient(wire: Any) -> dict[str, Any]:
    """An A3C worker's report (its segment's gradient instead of the segment) after checking it: a 1-D float32
    ``gradient``, integer ``version`` and ``steps``, numeric results; re-built from the checked parts."""
    if not isinstance(wire, dict):
        raise Malformed("gradient: not a mapping")
    gradient = wire.get("gradient")
    if not isinstance(gradient, np.ndarray) or gradient.dtype != np.float32 or gradient.ndim != 1:
        raise Malformed("gradient: 'gradient' must be a 1-D float32 array")
    results = wire.get("results")
    if not isinstance(results, list) or len(results) > MAX_RESULTS:
        raise Malformed("gradient: 'results' must be a list")
    steps = integer(wire, "steps")
    checked = {"gradient": gradient, "version": integer(wire, "version"), "steps": steps}
    if steps < 0:
        raise Malformed("gradient: negative steps")
    try:
        checked["results"] = [EpisodeResult.of(EpisodeResult.from_wire(r).to_wire()).to_wire() for r in results]
    except (ValueError, TypeError, AttributeError, KeyError) as error:
        raise Malformed(f"gradient: a result: {error}") from None
    return checked


def nbytes(wire: Mapping[str, Any]) -> int:
    """Bytes of a segment's arrays (what it holds in a queue)."""
    return sum(value.nbytes for value in wire.values() if isinstance(value, np.ndarray))
