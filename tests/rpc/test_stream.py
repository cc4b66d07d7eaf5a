"""A relay's bulk streams (lamarckian/rpc/stream.py): a caller on another node sends its RELAY messages on a TCP
stream of their own, read into the relay's shared blocks. Only a stream that proved the secret for a peer
authenticated on ZeroMQ is read; its messages are checked like ZeroMQ's; a peer that breaks off or sends junk costs
the relay that stream only."""

from __future__ import annotations

import socket
import struct
import time

import numpy as np
import pytest
import zmq

from lamarckian.rpc import RpcSettings
from lamarckian.rpc.auth import handshake_nonce, stream_proof
from lamarckian.rpc.connection import Connection
from lamarckian.rpc.relay import MAX_UNPROVEN_STREAMS, FanOutRelay, _description
from lamarckian.rpc.stream import StreamSender
from lamarckian.rpc.wire import Kind, Message, Trust, Wire

from .peers import Echo

SECRET = b"s" * 32
SETTINGS = RpcSettings.defaults(timeout=2.0, heartbeat=0.5)


class Caller:
    """A caller on another node, as the relay sees it: a sealed ZeroMQ link (handshake done) and a bulk stream."""

    def __init__(self, relay: FanOutRelay, targets: list[dict]) -> None:
        self.context = zmq.Context()
        self.wire = Wire(SECRET, SETTINGS)
        self.relay = relay
        self.connection = Connection(self.context, relay.endpoint(), SETTINGS, sealed=True)
        nonce = handshake_nonce()
        self.connection.socket.send_multipart(self.wire.pack(Kind.HELLO, 1, nonce, sealed=False))
        proof = self.connection.answer_challenge(SECRET, nonce, self.receive())
        self.connection.socket.send_multipart(self.wire.pack(Kind.PROOF, 2, proof, sealed=False))
        assert self.receive().kind == Kind.PONG
        self.identity = self.connection.socket.getsockopt(zmq.ROUTING_ID)
        self.targets = [_description(endpoint) for endpoint in targets]

    def receive(self, timeout: float = 5.0) -> Message:
        assert self.connection.socket.poll(int(timeout * 1000)), "no answer from the relay"
        return self.wire.unpack(self.connection.socket.recv_multipart(), self.connection.trust)

    def relay_message(self, request_id: int, method: str, *args) -> list:
        inner = self.wire.pack(Kind.CALL, request_id, [method, list(args), {}], sealed=False)
        return self.wire.pack(Kind.RELAY, request_id, {"targets": {self.relay.address: self.targets},
                                                        "frames": len(inner)}, extra=inner, sealed=True)

    def replies(self, message: Message) -> list:
        frames, values, position = message.frames, [], 0
        for size in message.value["sizes"]:
            values.append(self.wire.unpack(frames[position:position + size], Trust.CHANNEL).value)  # the node's links
            position += size
        return values

    def close(self) -> None:
        self.connection.close()
        self.context.destroy(linger=0)


@pytest.fixture
def relayed():
    targets = [Echo(tag) for tag in range(2)]
    endpoints = [target._lamarckian_rpc_start(SECRET, SETTINGS.to_mapping()) for target in targets]
    relay = FanOutRelay(secret=SECRET, settings=SETTINGS)
    caller = Caller(relay, endpoints)
    yield relay, caller
    caller.close()
    relay.stop()
    for target in targets:
        target._lamarckian_rpc_release()


def stats_after(relay: FanOutRelay, key: str) -> dict:
    deadline = time.monotonic() + 10
    while relay.stats[key] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    return dict(relay.stats)


def raw_stream(relay: FanOutRelay) -> socket.socket:
    host, _, port = relay.endpoint()["stream"].rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    return sock


def test_messages_on_a_stream_reach_every_target_in_order_and_large_frames_land_in_blocks(relayed):
    relay, caller = relayed
    stream = StreamSender(relay.endpoint()["stream"], caller.identity, SECRET, SETTINGS.timeout)
    blob = np.random.default_rng(0).random(1 << 18)                 # 2 MB: read into a block
    stream.send(caller.relay_message(10, "checksum", blob))
    stream.send(caller.relay_message(11, "add", 1, 0))
    first, second = caller.receive(), caller.receive()
    assert (first.request_id, second.request_id) == (10, 11)
    assert caller.replies(first) == pytest.approx([blob.sum()] * 2)
    assert caller.replies(second) == [1, 2]
    assert relay.stats["streamed"] == 2
    assert len(relay._pool.blocks) == 1         # the 2 MB frame was read into a block, not copied into one
    stream.close()


def test_a_stream_with_a_wrong_proof_is_closed_and_the_relay_goes_on(relayed):
    relay, caller = relayed
    sock = raw_stream(relay)
    sock.recv(32)
    sock.sendall(caller.identity + b"x" * 32)
    assert sock.recv(1) == b""                      # closed by the relay
    assert stats_after(relay, "unauthenticated")["unauthenticated"] == 1
    caller.connection.socket.send_multipart(caller.relay_message(12, "add", 2, 0))
    assert caller.replies(caller.receive()) == [2, 3]


def test_a_stream_for_a_peer_that_did_not_pass_the_zeromq_handshake_is_refused(relayed):
    relay, caller = relayed
    stranger = b"z" * 16
    stream = StreamSender(relay.endpoint()["stream"], stranger, SECRET, SETTINGS.timeout)
    assert stats_after(relay, "unauthenticated")["unauthenticated"] == 1
    assert relay.stats["streams"] == 0
    stream.close()


def test_an_altered_frame_on_a_stream_is_dropped_and_the_next_message_served(relayed):
    relay, caller = relayed
    stream = StreamSender(relay.endpoint()["stream"], caller.identity, SECRET, SETTINGS.timeout)
    frames = caller.relay_message(13, "checksum", np.ones(1 << 16))
    altered = bytearray(frames[2])
    altered[100] ^= 1
    stream.send([*frames[:2], bytes(altered), *frames[3:]])
    stream.send(caller.relay_message(14, "add", 3, 0))
    assert caller.receive().request_id == 14
    assert relay.stats["unauthenticated"] == 1


def authenticated_raw_stream(relay: FanOutRelay, caller: Caller) -> socket.socket:
    sock = raw_stream(relay)
    nonce = sock.recv(32)
    sock.sendall(caller.identity + stream_proof(SECRET, nonce, caller.identity))
    return sock


def test_a_caller_that_breaks_off_mid_message_costs_the_relay_that_stream_only(relayed):
    relay, caller = relayed
    sock = authenticated_raw_stream(relay, caller)
    sock.sendall(struct.pack(">I", 1) + struct.pack(">Q", 1 << 20) + b"\0" * 1000)
    sock.close()
    assert stats_after(relay, "malformed")["malformed"] == 1
    caller.connection.socket.send_multipart(caller.relay_message(15, "add", 4, 0))
    assert caller.replies(caller.receive()) == [4, 5]


def test_a_message_over_the_size_limit_is_refused_before_it_is_read(relayed):
    relay, caller = relayed
    sock = authenticated_raw_stream(relay, caller)
    sock.sendall(struct.pack(">I", 1) + struct.pack(">Q", SETTINGS.max_message_bytes + 1))
    assert stats_after(relay, "oversize")["oversize"] == 1
    assert sock.recv(1) == b""                      # the stream is closed


def test_connections_that_never_prove_anything_cannot_pile_up(relayed):
    relay, caller = relayed
    silent = [raw_stream(relay) for _ in range(MAX_UNPROVEN_STREAMS + 3)]
    deadline = time.monotonic() + 10
    while relay.stats["unauthenticated"] < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(relay._streams) == MAX_UNPROVEN_STREAMS
    stream = StreamSender(relay.endpoint()["stream"], caller.identity, SECRET, SETTINGS.timeout)
    stream.send(caller.relay_message(16, "add", 5, 0))
    assert caller.replies(caller.receive()) == [5, 6]
    stream.close()
    for sock in silent:
        sock.close()
