"""The per-connection handshake: nothing from a peer that has not proved the run secret is executed, a recorded
handshake cannot be replayed, and each link gets the framing its place asks for."""

from __future__ import annotations

import time

import pytest
import zmq

from lamarckian.rpc import All, Any, RpcSettings
from lamarckian.rpc.auth import client_proof, handshake_nonce
from lamarckian.rpc.errors import RPCError
from lamarckian.rpc.wire import Kind, Trust, Wire

from .peers import Echo

SECRET = b"s" * 32
SETTINGS = RpcSettings.defaults(timeout=3.0, heartbeat=0.5)


class RawPeer:
    """A DEALER speaking our framing by hand, holding whatever secret the test gives it."""

    def __init__(self, context: zmq.Context, address: str, secret: bytes) -> None:
        self.socket = context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(address)
        self.wire = Wire(secret, SETTINGS)
        self.secret = secret

    def send(self, frames: list) -> None:
        self.socket.send_multipart(frames, copy=True)

    def receive(self, trust: Trust = Trust.CHANNEL):
        assert self.socket.poll(3000), "no answer"
        return self.wire.unpack(self.socket.recv_multipart(), trust)

    def hello(self, nonce: bytes) -> list:
        frames = self.wire.pack(Kind.HELLO, 1, nonce, sealed=False)
        self.send(frames)
        return frames


class Elsewhere:
    """A server known only by its endpoint, as a caller in another process sees it."""

    def __init__(self, endpoint: dict) -> None:
        self.endpoint = endpoint

    def _lamarckian_rpc_start(self, secret: bytes, settings: dict) -> dict:
        return self.endpoint


def stats_after(target: Echo, key: str, count: int) -> dict[str, int]:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        stats = target._lamarckian_rpc_stats()
        if stats.get(key, 0) >= count:
            return stats
        time.sleep(0.02)
    return target._lamarckian_rpc_stats()


@pytest.fixture
def served():
    target = Echo(tag=0)
    endpoint = target._lamarckian_rpc_start(SECRET, SETTINGS.to_mapping())
    context = zmq.Context()
    yield target, endpoint, context
    context.destroy(linger=0)
    target._lamarckian_rpc_release()


def test_a_client_without_the_secret_never_gets_a_call_executed(served):
    target, endpoint, context = served
    with pytest.raises(RPCError, match="did not prove it holds the run secret"):
        All([Elsewhere(endpoint)], settings=SETTINGS, secret=b"w" * 32)
    address = endpoint["address"]
    intruder = RawPeer(context, address, b"w" * 32)
    nonce = handshake_nonce()
    intruder.hello(nonce)
    server_nonce, _ = intruder.receive().value                         # the challenge is answered to anyone
    intruder.send(intruder.wire.pack(Kind.PROOF, 2, [client_proof(b"w" * 32, server_nonce, nonce, False), False],
                                     sealed=False))                      # a proof made with the wrong secret
    intruder.send(intruder.wire.pack(Kind.CALL, 3, ["add", [1], {}], sealed=False))   # a plain call
    intruder.send(intruder.wire.pack(Kind.CALL, 4, ["add", [1], {}], sealed=True))    # a call tagged with its key
    stats = stats_after(target, "unauthenticated", 3)
    assert stats["unauthenticated"] == 3
    assert stats.get("served", 0) == 0
    assert not intruder.socket.poll(200)                                 # and nothing came back
    with Any([target], settings=SETTINGS, secret=SECRET) as someone:     # the server still serves its own run
        assert someone("add", 1) == 2


def test_a_recorded_handshake_cannot_be_replayed(served):
    target, endpoint, context = served
    address = endpoint["address"]
    honest = RawPeer(context, address, SECRET)
    nonce = handshake_nonce()
    hello = honest.hello(nonce)
    server_nonce, _ = honest.receive().value
    proof = honest.wire.pack(Kind.PROOF, 2, [client_proof(SECRET, server_nonce, nonce, False), False], sealed=False)
    honest.send(proof)
    assert honest.receive().kind == Kind.PONG
    honest.send(honest.wire.pack(Kind.CALL, 3, ["add", [1], {}], sealed=False))
    assert honest.receive().value == 2

    replayer = RawPeer(context, address, b"w" * 32)                      # records the frames, knows no secret
    replayer.send(hello)
    assert replayer.receive().kind == Kind.CHALLENGE                    # a new server nonce ...
    replayer.send(proof)                                                 # ... which the old proof does not answer
    replayer.send(honest.wire.pack(Kind.CALL, 4, ["add", [5], {}], sealed=False))
    stats = stats_after(target, "unauthenticated", 2)
    assert stats["unauthenticated"] == 2
    assert stats["served"] == 1
    assert not replayer.socket.poll(200)


def test_a_proof_without_a_challenge_and_junk_handshakes_are_refused(served):
    target, endpoint, context = served
    peer = RawPeer(context, endpoint["address"], SECRET)
    peer.send(peer.wire.pack(Kind.PROOF, 1, [b"p" * 32, False], sealed=False))     # no hello before it
    peer.send(peer.wire.pack(Kind.HELLO, 2, b"short", sealed=False))              # not a 32-byte nonce
    peer.send(peer.wire.pack(Kind.PROOF, 3, "junk", sealed=False))
    stats = stats_after(target, "malformed", 2)
    assert stats["unauthenticated"] == 1
    assert stats["malformed"] == 2


def test_links_on_one_node_trust_the_connection_unless_mac_always(served):
    target, _, _ = served
    with All([target], settings=SETTINGS, secret=SECRET) as everyone:
        assert [c.trust for c in everyone.link.connections] == [Trust.CHANNEL]
        assert everyone("add", 2) == [3]
    other = Echo(tag=1)
    always = RpcSettings.defaults(timeout=3.0, mac="always")
    with All([other], settings=always, secret=SECRET) as everyone:
        assert [c.trust for c in everyone.link.connections] == [Trust.SEALED]
        assert everyone("add", 2) == [4]
    with pytest.raises(ValueError, match="rpc.mac"):
        RpcSettings.defaults(mac="never")
