"""The relay between internet rollout workers and the trainer (``python -m lamarckian.remote server``).

One ROUTER socket under CurveZMQ: a peer gets in only with a key on the allow-list (workers) or the trainer's key;
the ZAP handler refuses and counts the rest. Each message then names its sender through ZeroMQ's ``User-Id``
(its public key), so a key deleted from the folder, or banned, is refused from its next message on, even on a
connection opened before.

Memory is bounded whatever the peers send: libzmq drops messages above ``max_message_bytes`` and reads at most
``hwm`` messages ahead per peer (and queues at most ``hwm`` replies to a peer that reads none: the rest are counted
as ``unsent``); accepted segments wait in one queue of at most ``queue`` segments and
``queue_bytes`` bytes (the oldest leave first, counted as ``overflow``); each worker may deliver ``rate`` segments
per second (a token bucket of ``burst``; the excess is counted as ``rate_limited``). A message that breaks the
protocol gets no answer and bans its key for ``ban`` seconds (``garbage``, ``dropped_workers``).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import time
from typing import Any

import numpy as np
import zmq
from zmq.auth.thread import ThreadAuthenticator

from .keys import AllowList
from .protocol import (
    TRAINER_OPS,
    WORKER_OPS,
    Malformed,
    check_gradient,
    check_segment,
    integer,
    nbytes,
    number,
    pack,
    unpack,
)

log = logging.getLogger(__name__)
MAX_WAIT = 5.0           # seconds a trainer's pull may wait for segments
STATUS_SECONDS = 60.0    # between the server's status lines in its log


@dataclasses.dataclass(frozen=True)
class ServerSettings:
    """Limits of the relay (the ``server`` command's options)."""

    queue: int = 256                          # segments waiting for the trainer
    queue_bytes: int = 256 * 2**20            # their arrays' bytes
    rate: float = 20.0                        # segments per second per worker
    burst: float = 40.0                       # the token bucket's depth
    max_message_bytes: int = 32 * 2**20       # larger messages are dropped by libzmq
    hwm: int = 4                              # messages read ahead (and queued to send) per peer; at 1 libzmq
                                              # was seen to deliver no message of several frames
    ban: float = 300.0                        # seconds a worker that broke the protocol is refused

    def __post_init__(self) -> None:
        bad = [name for name, ok in (("queue", self.queue >= 1), ("queue_bytes", self.queue_bytes >= 1),
                                     ("rate", self.rate > 0), ("burst", self.burst >= 1),
                                     ("max_message_bytes", self.max_message_bytes >= 1024), ("hwm", self.hwm >= 2),
                                     ("ban", self.ban >= 0)) if not ok]
        if bad:
            raise ValueError(f"server settings out of range: {', '.join(bad)}")


@dataclasses.dataclass
class WorkerRecord:
    """What the server knows of one worker (by key name)."""

    tokens: float
    refilled: float
    segments: int = 0            # accepted into the queue
    steps: int = 0               # env steps of the accepted segments
    rate_limited: int = 0
    garbage: int = 0
    imports: list[str] = dataclasses.field(default_factory=list)   # of ray and torch, what the worker has imported
    policy: str = ""

    def take_token(self, rate: float, burst: float) -> bool:
        now = time.monotonic()
        self.tokens = min(burst, self.tokens + (now - self.refilled) * rate)
        self.refilled = now
        if self.tokens < 1.0:
            return False
        self.tokens -= 1.0
        return True


class _Credentials:
    """The ZAP handler's view: the trainer's key, or a worker on the allow-list."""

    def __init__(self, allow: AllowList, trainer: bytes) -> None:
        self.allow, self.trainer = allow, trainer

    def callback(self, domain: str, key: bytes) -> bool:
        return key == self.trainer or self.allow.callback(domain, key)


class RemoteServer:
    """Serves workers and one trainer until :meth:`close` (call :meth:`serve` on a thread or as the main loop).

    Args:
        bind: ``tcp://HOST:PORT`` (port ``*`` picks a free one; :attr:`endpoint` says which).
        allow: the worker keys.
        server_pair: this server's (public, secret) Z85 keys.
        trainer_key: the trainer's public Z85 key.
        settings: the limits.
    """

    def __init__(self, bind: str, allow: AllowList, server_pair: tuple[bytes, bytes], trainer_key: bytes,
                 settings: ServerSettings | None = None) -> None:
        self.settings = settings = settings or ServerSettings()
        self.allow, self.trainer_key = allow, trainer_key.decode() if isinstance(trainer_key, bytes) else trainer_key
        self.context = zmq.Context()
        self.authenticator = ThreadAuthenticator(self.context, log=logging.getLogger(f"{__name__}.zap"))
        self.authenticator.start()
        self.authenticator.configure_curve_callback("*", _Credentials(allow, self.trainer_key.encode()))
        self.socket = self.context.socket(zmq.ROUTER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.RCVHWM, settings.hwm)
        self.socket.setsockopt(zmq.SNDHWM, settings.hwm)
        self.socket.setsockopt(zmq.ROUTER_MANDATORY, 1)     # a reply that cannot go raises (else: dropped unsaid)
        self.socket.setsockopt(zmq.MAXMSGSIZE, settings.max_message_bytes)
        self.socket.curve_publickey, self.socket.curve_secretkey = server_pair
        self.socket.curve_server = True
        try:
            self.socket.bind(bind)
        except zmq.ZMQError as error:
            self.close()
            raise ValueError(f"--bind {bind}: {error}") from None
        self.endpoint = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        self.workers: dict[str, WorkerRecord] = {}
        self.queue: collections.deque[tuple[str, dict[str, Any], int]] = collections.deque()
        self.queued_bytes = 0
        self.version, self.blob = -1, np.zeros(0, np.float32)
        self.extras: dict[str, Any] = {}
        self.pending_pull: tuple[bytes, int, int, float] | None = None   # (identity, id, max, deadline)
        self.counters: collections.Counter[str] = collections.Counter()
        self.running = True

    # ---- the loop ------------------------------------------------------------------------------------------
    def serve(self) -> None:
        """Answer messages until :meth:`stop` (a poll at least every 0.1 s notices it)."""
        poller = zmq.Poller()
        poller.register(self.socket, zmq.POLLIN)
        shown = time.monotonic()
        while self.running:
            wait = 0.1 if self.pending_pull is None else max(0.0, min(0.1, self.pending_pull[3] - time.monotonic()))
            if poller.poll(round(wait * 1000)):
                for _ in range(64):               # a burst, then the pull and the allow-list get their turn
                    try:
                        frames = self.socket.recv_multipart(zmq.NOBLOCK, copy=False)
                    except zmq.Again:
                        break
                    self._handle(frames)
            self._answer_pull(force=False)
            self.allow.refresh()
            if time.monotonic() - shown >= STATUS_SECONDS:
                shown = time.monotonic()
                log.info("%d workers, %d connections refused; %s", len(self.workers), self.allow.refused, ", ".join(
                    f"{name} {self.counters[name]}" for name in ("received", "delivered", "rate_limited", "overflow",
                                                                 "garbage", "ignored")))

    def stop(self) -> None:
        self.running = False

    def close(self) -> None:
        self.running = False
        self.socket.close(0)
        self.authenticator.stop()
        self.context.term()

    # ---- messages ------------------------------------------------------------------------------------------
    def _handle(self, frames: list[zmq.Frame]) -> None:
        identity, payload = frames[0].bytes, frames[1:]
        key = str(payload[0].get("User-Id")) if payload else ""
        trainer = key == self.trainer_key
        name = "trainer" if trainer else self.allow.name_of(key.encode())
        if name is None:                   # revoked or banned since it connected
            self.counters["ignored"] += 1
            return
        try:
            message = unpack(payload)
            op = message["op"]
            if op not in (TRAINER_OPS if trainer else WORKER_OPS):
                raise Malformed(f"{'the trainer' if trainer else 'a worker'} may not send {op!r}")
            reply = self._trainer(identity, message) if trainer else self._worker(name, message)
        except Malformed as error:
            self._drop(name, key, error)
            return
        if reply is not None:
            self._send(identity, {**reply, "id": message["id"]})

    def _send(self, identity: bytes, message: dict[str, Any]) -> None:
        """Send ``message`` to the peer ``identity``; a peer gone, or one whose ``hwm`` replies wait unread, gets
        none (counted as ``unsent``): replies never pile up."""
        frames = [identity, *pack(message)]
        for attempt in range(2):
            try:
                self.socket.send_multipart(frames, zmq.NOBLOCK, copy=False)
                return
            except zmq.Again:              # full, or so it seems: libzmq learns of the peer's reads from commands
                if attempt == 0:           # it processes at most once a millisecond in a send, always in EVENTS
                    self.socket.getsockopt(zmq.EVENTS)
            except zmq.ZMQError as error:
                if error.errno != zmq.EHOSTUNREACH:
                    raise
                break                      # the peer has gone
        self.counters["unsent"] += 1

    def _drop(self, name: str, key: str, error: Exception) -> None:
        self.counters["garbage"] += 1
        if name == "trainer":
            log.warning("the trainer sent a malformed message: %s", error)
            return
        self.counters["dropped_workers"] += 1
        self._record(name).garbage += 1
        self.allow.ban(key.encode(), self.settings.ban)
        log.warning("worker %s broke the protocol (%s); its key is refused for %.0f s", name, error,
                    self.settings.ban)

    def _record(self, name: str) -> WorkerRecord:
        record = self.workers.get(name)
        if record is None:
            record = self.workers[name] = WorkerRecord(self.settings.burst, time.monotonic())
        return record

    def _weights(self, message: dict[str, Any]) -> dict[str, Any]:
        """The version, and the weights and extras when the worker's ``have`` is not the newest version (a worker
        that sends no ``have``, running an exported policy, gets none)."""
        reply: dict[str, Any] = {"version": self.version}
        if "have" in message and integer(message, "have") != self.version and self.version >= 0:
            reply.update(blob=self.blob, extras=self.extras)
        return reply

    def _worker(self, name: str, message: dict[str, Any]) -> dict[str, Any]:
        record, op = self._record(name), message["op"]
        if op == "hello":
            policy = message.get("policy")
            if policy not in ("torch", "onnx"):
                raise Malformed("hello: 'policy' must be 'torch' or 'onnx'")
            record.policy = policy
            self.counters["hellos"] += 1
            return {"op": "welcome", "worker": name, "version": self.version}
        if op == "weights":
            return {"op": "weights", **self._weights(message)}
        imports = message.get("imports")
        if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports) or len(imports) > 8:
            raise Malformed("segment: 'imports' must be a short list of module names")
        reply = self._weights(message)
        wire = message.get("segment")
        segment = check_gradient(wire) if isinstance(wire, dict) and "gradient" in wire else \
            check_segment(wire).to_wire()
        record.imports = imports
        self.counters["received"] += 1
        if not record.take_token(self.settings.rate, self.settings.burst):
            record.rate_limited += 1
            self.counters["rate_limited"] += 1
            return {"op": "ack", "accepted": False, "reason": "rate limit", **reply}
        size = nbytes(segment)
        if size > self.settings.queue_bytes:
            self.counters["overflow"] += 1
            return {"op": "ack", "accepted": False, "reason": "too large", **reply}
        self.queue.append((name, segment, size))
        self.queued_bytes += size
        while len(self.queue) > self.settings.queue or self.queued_bytes > self.settings.queue_bytes:
            self.queued_bytes -= self.queue.popleft()[2]
            self.counters["overflow"] += 1
        record.segments += 1
        record.steps += int(segment["steps"])
        self._answer_pull(force=False)
        return {"op": "ack", "accepted": True, **reply}

    def _trainer(self, identity: bytes, message: dict[str, Any]) -> dict[str, Any] | None:
        op = message["op"]
        if op == "publish":
            version, blob = integer(message, "version"), message.get("blob")
            extras = message.get("extras", {})
            if not isinstance(blob, np.ndarray) or blob.dtype != np.float32 or blob.ndim != 1 \
                    or not isinstance(extras, dict):
                raise Malformed("publish: 'blob' must be a 1-D float32 array and 'extras' a mapping")
            self.version, self.blob, self.extras = version, blob.copy(), extras
            self.counters["published"] += 1
            return {"op": "ok"}
        if op == "stats":
            return {"op": "stats", "stats": self.statistics()}
        most = integer(message, "max")
        wait = min(MAX_WAIT, max(0.0, number(message, "wait", 0.0)))
        if most < 1:
            raise Malformed("pull: 'max' must be at least 1")
        self.pending_pull = (identity, message["id"], most, time.monotonic() + wait)
        self._answer_pull(force=False)
        return None

    def _answer_pull(self, force: bool) -> None:
        """Answer a waiting pull when segments are queued or its wait is over."""
        if self.pending_pull is None:
            return
        identity, request_id, most, deadline = self.pending_pull
        if not self.queue and not force and time.monotonic() < deadline:
            return
        segments: list[Any] = []
        while self.queue and len(segments) < most:
            name, segment, size = self.queue.popleft()
            self.queued_bytes -= size
            segments.append({"worker": name, "segment": segment})
        self.pending_pull = None
        self.counters["delivered"] += len(segments)
        self._send(identity, {"op": "segments", "id": request_id, "segments": segments,
                              "stats": self.statistics()})

    def statistics(self) -> dict[str, Any]:
        """Counters (``refused`` connections, ``garbage`` messages, ``dropped_workers``, ``ignored`` messages of
        revoked or banned keys, ``rate_limited``, ``overflow``, ``received``, ``delivered``...), the queue, and per
        worker its segments, steps, refusals and imports."""
        return {**self.counters, "refused": self.allow.refused, "queued": len(self.queue),
                "queued_bytes": self.queued_bytes, "version": self.version,
                "workers": {name: {"segments": r.segments, "steps": r.steps, "rate_limited": r.rate_limited,
                                   "garbage": r.garbage, "imports": r.imports, "policy": r.policy}
                            for name, r in self.workers.items()}}
