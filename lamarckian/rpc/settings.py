"""RPC settings (the ``rpc:`` section of the configuration)."""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ..config.sections import Section, default_config, lookup_section

SERIALIZERS = ("msgpack",)   # nothing received from the network is unpickled: there is no pickle serializer
BULK_MACS = ("aes-gmac", "hmac-sha256")
MAC_MODES = ("auto", "always")
RELAY_MODES = ("auto", "always", "never")
LOCAL_MODES = ("auto", "off")


@dataclasses.dataclass(frozen=True)
class RpcSettings(Section):
    """How peers talk (the ``rpc`` section; a library caller may give only some keys: the rest are the defaults).

    Attributes:
        timeout: seconds; a peer that does not answer heartbeats or the start handshake within it is dead.
        heartbeat: seconds between ZMTP heartbeats on every connection (answered by libzmq's I/O thread,
            so a busy Python method never looks dead).
        max_message_bytes: a received message whose frames add up to more is dropped and counted.
        serializer: ``"msgpack"``, the only one (arrays, numbers, strings and containers; nothing is pickled).
        mac: which links carry an HMAC tag on every message after the per-connection handshake: ``"auto"``
            (links between nodes without CurveZMQ; links on one node and CurveZMQ links trust the authenticated
            connection) or ``"always"``.
        bulk_mac: how data frames of 64 KiB or more are bound into the message's HMAC-SHA256:
            ``"aes-gmac"`` (a per-message-keyed GMAC tag, ~20 GB/s) or ``"hmac-sha256"`` (the frame itself,
            ~1.5 GB/s). Small frames always go into the HMAC-SHA256 directly.
        curve: encrypt every connection with CurveZMQ (for untrusted networks).
        relay: ``"auto"`` relays a broadcast through one process per remote node holding 2+ targets;
            ``"always"`` relays every remote node; ``"never"`` sends to each actor directly.
        local: ``"auto"`` sends every message between two processes of one node over the node-local channel of
            :mod:`.local` (a Unix socket, large frames in shared memory); ``"off"`` keeps them on ZeroMQ.
        spin: seconds a node-local wait for a message polls before it sleeps in the kernel (an answer that comes
            sooner skips the wake-ups: a no-op call takes ~20 µs instead of ~80 µs on one node); 0 never polls.
        start_timeout: seconds to wait for an actor to start serving (a Ray actor may still be scheduled).
        host: address servers bind to; ``None`` picks 127.0.0.1 on a one-machine cluster, else the node's IP.
    """

    KEY = "rpc"

    timeout: float
    heartbeat: float
    max_message_bytes: int
    serializer: str
    mac: str
    bulk_mac: str
    curve: bool
    relay: str
    local: str
    spin: float
    start_timeout: float
    host: str | None

    def __post_init__(self) -> None:
        if self.local is False:     # YAML reads a bare `off` as false
            object.__setattr__(self, "local", "off")
        checks = {
            "timeout": self.timeout > 0,
            "start_timeout": self.start_timeout > 0,
            "heartbeat": 0 < self.heartbeat <= self.timeout,
            "max_message_bytes": self.max_message_bytes > 0,
            "serializer": self.serializer in SERIALIZERS,
            "mac": self.mac in MAC_MODES,
            "bulk_mac": self.bulk_mac in BULK_MACS,
            "relay": self.relay in RELAY_MODES,
            "local": self.local in LOCAL_MODES,
            "spin": 0 <= self.spin <= 0.01,
        }
        hints = {
            "timeout": "a positive number of seconds",
            "start_timeout": "a positive number of seconds",
            "heartbeat": "positive and at most rpc.timeout",
            "max_message_bytes": "a positive byte count",
            "serializer": "msgpack (there is no pickle serializer: nothing received from the network is unpickled)",
            "mac": f"one of {MAC_MODES}",
            "bulk_mac": f"one of {BULK_MACS}",
            "relay": f"one of {RELAY_MODES}",
            "local": f"one of {LOCAL_MODES}",
            "spin": "seconds between 0 and 0.01",
        }
        for key, ok in checks.items():
            if not ok:
                raise ValueError(f"rpc.{key}={getattr(self, key)!r}: must be {hints[key]}")

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None) -> "RpcSettings":
        """Build from a (partial) mapping over the defaults; an unknown key raises ``KeyError`` naming it."""
        mapping = dict(mapping or {})
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise KeyError(f"unknown rpc key(s) {unknown}; known: {sorted(known)}")
        return super().from_mapping({**lookup_section(default_config(), cls.KEY), **mapping})

    def to_mapping(self) -> dict[str, Any]:
        """Plain dict, suitable for sending to a remote process through Ray."""
        return dataclasses.asdict(self)
