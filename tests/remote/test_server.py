"""The relay server over real CurveZMQ sockets: who gets in, what is counted, what is bounded."""

from __future__ import annotations

import pickle
import time

import numpy as np
import pytest

from lamarckian.remote.client import KeyRefused
from lamarckian.remote.keys import RESCAN_SECONDS
from lamarckian.remote.server import ServerSettings

from .helpers import relay, segment


@pytest.fixture
def server(tmp_path):
    yield from relay(tmp_path)


def wait_for(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def publish(server, version: int = 3, size: int = 10) -> None:
    trainer = server.client("trainer")
    blob = np.arange(size, dtype=np.float32)
    reply = trainer.request({"op": "publish", "version": version, "blob": blob, "extras": {"epsilon": 0.1}})
    assert reply["op"] == "ok"


def test_an_unknown_key_is_refused_and_counted(server):
    with pytest.raises(KeyRefused, match="refused the key .*mallory"):
        server.client("mallory").request({"op": "hello", "policy": "torch"})
    assert server.server.statistics()["refused"] >= 1
    assert server.server.statistics()["workers"] == {}


def test_workers_get_weights_only_when_they_changed(server):
    publish(server, version=3)
    alice = server.client("alice")
    assert alice.request({"op": "hello", "policy": "torch"})["worker"] == "alice"
    first = alice.request({"op": "weights", "have": -1})
    np.testing.assert_array_equal(first["blob"], np.arange(10, dtype=np.float32))
    assert first["version"] == 3
    assert first["extras"] == {"epsilon": 0.1}
    ack = alice.request({"op": "segment", "have": 3, "segment": segment(), "imports": []})
    assert ack["accepted"]
    assert ack["version"] == 3
    assert "blob" not in ack
    publish(server, version=4)
    ack = alice.request({"op": "segment", "have": 3, "segment": segment(), "imports": []})
    assert ack["version"] == 4
    assert "blob" in ack
    ack = alice.request({"op": "segment", "segment": segment(), "imports": []})   # an ONNX worker: no have
    assert "blob" not in ack


def test_the_trainer_pulls_checked_segments_in_order(server):
    alice = server.client("alice")
    for fill in (1.0, 2.0):
        reply = alice.request({"op": "segment", "have": -1, "segment": segment(fill=fill), "imports": ["torch"]})
        assert reply["accepted"]
    trainer = server.client("trainer")
    answer = trainer.request({"op": "pull", "max": 8, "wait": 0.0})
    assert [item["worker"] for item in answer["segments"]] == ["alice", "alice"]
    assert [float(item["segment"]["observations"][0, 0, 0]) for item in answer["segments"]] == [1.0, 2.0]
    assert answer["stats"]["workers"]["alice"]["imports"] == ["torch"]
    started = time.monotonic()
    assert trainer.request({"op": "pull", "max": 8, "wait": 0.3})["segments"] == []     # waits, then answers
    assert 0.25 <= time.monotonic() - started < 3.0


def test_garbage_drops_the_worker_and_is_counted(server):
    bob = server.client("bob")
    assert bob.request({"op": "hello", "policy": "torch"})["op"] == "welcome"
    bob.socket.send_multipart([b"\xc1garbage", b"more"])
    assert wait_for(lambda: server.server.statistics().get("garbage") == 1)
    stats = server.server.statistics()
    assert stats["dropped_workers"] == 1
    assert stats["workers"]["bob"]["garbage"] == 1
    assert bob.send({"op": "hello", "policy": "torch"}) is not None
    assert bob.receive(0.5) is None                       # banned: its messages are ignored ...
    assert wait_for(lambda: server.server.statistics().get("ignored", 0) >= 1)
    with pytest.raises(KeyRefused):                       # ... and a new connection is refused
        server.client("bob").request({"op": "hello", "policy": "torch"})
    alice = server.client("alice")                         # the others carry on
    assert alice.request({"op": "hello", "policy": "torch"})["worker"] == "alice"


@pytest.mark.parametrize("message", [
    {"op": "publish", "version": 1, "blob": np.zeros(3, np.float32)},      # a trainer's operation
    {"op": "segment", "have": 0, "imports": [], "segment": {**segment(), "values": np.zeros((2, 2), np.float32)}},
    {"op": "segment", "have": 0, "imports": [], "segment": {**segment(), "rewards": "many"}},
    {"op": "segment", "have": 0, "imports": [], "segment": {**segment(), "results": [{"fitness": "high"}]}},
    {"op": "segment", "have": "new", "imports": [], "segment": segment()},
    {"op": "hello", "policy": "pickle"},
    {"op": "launch"},
])
def test_messages_that_break_the_protocol_are_refused(server, message):
    alice = server.client("alice")
    alice.send(message)
    assert wait_for(lambda: server.server.statistics().get("garbage") == 1)
    assert server.server.statistics()["workers"]["alice"]["segments"] == 0
    assert server.server.queue == type(server.server.queue)()


def test_a_deleted_key_is_revoked_while_connected(server):
    alice = server.client("alice")
    assert alice.request({"op": "hello", "policy": "torch"})["worker"] == "alice"
    (server.allowed / "alice.key").unlink()
    time.sleep(RESCAN_SECONDS + 0.3)
    alice.send({"op": "hello", "policy": "torch"})
    assert alice.receive(1.0) is None
    assert server.server.statistics()["ignored"] >= 1


def test_the_rate_limit_and_the_queue_bound_hold(tmp_path):
    settings = ServerSettings(queue=5, rate=1.0, burst=8.0)
    for server in relay(tmp_path, settings):
        alice = server.client("alice")
        answers = [alice.request({"op": "segment", "have": -1, "segment": segment(), "imports": []}) for _ in range(12)]
        accepted = sum(answer["accepted"] for answer in answers)
        assert 8 <= accepted <= 9                           # the burst (and at most one token refilled meanwhile)
        assert {answer.get("reason") for answer in answers if not answer["accepted"]} == {"rate limit"}
        stats = server.server.statistics()
        assert stats["rate_limited"] == 12 - accepted
        assert stats["queued"] == 5
        assert stats["overflow"] == accepted - 5     # the oldest left


def test_a_revoked_worker_learns_it_when_it_reconnects(server):
    from lamarckian.remote.client import Client
    from lamarckian.remote.worker import Worker

    client = Client(server.server.endpoint, server.keys / "alice.key_secret", server.keys / "server.key", timeout=1.0)
    server.clients.append(client)
    worker = Worker(client, in_flight=1)
    worker.hello()
    (server.allowed / "alice.key").unlink()
    time.sleep(RESCAN_SECONDS + 0.3)
    client.send({"op": "segment", "have": -1, "segment": segment(), "imports": []})
    worker.in_flight = 1
    with pytest.raises(KeyRefused, match="alice"):
        for _ in range(50):                         # silence, a reconnection, then the refusal
            worker._read_answers(source=None, apply_extras=None)
            time.sleep(0.1)                         # (a worker samples meanwhile)


def test_a_pickled_payload_is_garbage_never_unpickled(server):
    import msgpack

    from lamarckian.rpc import codec

    hello = {"op": "hello", "id": 1, "policy": "torch", "extra": {"a", "set"}}    # unpickled: a valid hello
    body = msgpack.packb(msgpack.ExtType(codec.EXT_PICKLE, pickle.dumps(hello)))
    alice = server.client("alice")
    alice.socket.send_multipart([body])
    assert wait_for(lambda: server.server.statistics().get("garbage") == 1)
    assert alice.receive(0.3) is None
    assert server.server.statistics()["workers"]["alice"]["policy"] == ""


def test_a_worker_that_reads_every_answer_gets_every_answer(tmp_path):
    for server in relay(tmp_path, ServerSettings(hwm=2)):     # the fewest replies queued per peer
        alice = server.client("alice", timeout=2.0)
        answers = [alice.request({"op": "hello", "policy": "torch"})["op"] for _ in range(2000)]
        assert answers == ["welcome"] * 2000


def silent_peer(server, name: str):
    """A worker's connection that reads nothing, whose libzmq holds one answer at most (a Client's would read ahead
    up to a thousand)."""
    import zmq

    from lamarckian.remote.keys import load_pair, load_public

    socket = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.RCVHWM, 1)
    socket.curve_publickey, socket.curve_secretkey = load_pair(server.keys / f"{name}.key_secret")
    socket.curve_serverkey = load_public(server.keys / "server.key")
    socket.connect(server.server.endpoint)
    return socket


def test_a_worker_that_reads_nothing_gets_no_pile_of_answers_and_the_others_go_on(tmp_path):
    from lamarckian.remote.protocol import pack

    for server in relay(tmp_path):
        publish(server, size=2**18)                            # 1 MiB of weights in every answer below
        alice = silent_peer(server, "alice")
        try:
            for request in range(64):                          # 64 MiB of answers: far more than TCP's buffers
                alice.send_multipart(pack({"op": "weights", "have": -1, "id": request + 1}))
            assert wait_for(lambda: server.server.statistics().get("unsent", 0) >= 1, seconds=60.0)
            assert server.client("bob").request({"op": "hello", "policy": "torch"})["worker"] == "bob"
        finally:
            alice.close()
