"""All / Any / Gather across real Ray actor processes: payloads, errors, SIGKILLed actors, hostile peers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

from lamarckian.rpc import ActorDiedError, All, Any, Gather, RemoteError, RpcSettings

from .peers import Echo

TIMEOUT = 3.0
SETTINGS = RpcSettings.defaults(timeout=TIMEOUT, heartbeat=0.5)


def spawn(ray, count: int, first_tag: int = 0) -> list:
    return [ray.remote(num_cpus=0)(Echo).remote(first_tag + i) for i in range(count)]


def kill_later(pid: int, delay: float) -> threading.Timer:
    timer = threading.Timer(delay, os.kill, (pid, signal.SIGKILL))
    timer.start()
    return timer


def test_all_payloads_across_processes(ray_local):
    actors = spawn(ray_local, 2, first_tag=1)
    with All(actors, settings=SETTINGS) as everyone:
        assert everyone("add", 1, y=2) == [4, 5]
        nested = {"obs": [np.arange(6, dtype=np.float32).reshape(2, 3)], "t": torch.arange(4.0), "s": (1, "a")}
        results = everyone("echo", nested, flag=True)
        assert all(torch.equal(r["args"][0]["t"], torch.arange(4.0)) and r["kwargs"] == {"flag": True} for r in results)
        np.testing.assert_array_equal(results[1]["args"][0]["obs"][0], nested["obs"][0])
        big = np.random.default_rng(1).random(100 * 2**20 // 8)  # 100 MB
        assert everyone("checksum", big) == pytest.approx([big.sum()] * 2)
        assert everyone("checksum", np.empty(0)) == [0.0, 0.0]
        assert everyone("echo") == [{"args": (), "kwargs": {}, "tag": 1}, {"args": (), "kwargs": {}, "tag": 2}]
        with pytest.raises(RemoteError, match="boom") as info:
            everyone("fail", "boom")
        assert "actor=" in info.value.actor


def test_any_and_gather_across_processes(ray_local):
    actors = spawn(ray_local, 2, first_tag=10)
    with Any(actors, settings=SETTINGS) as someone:
        assert someone("add", 1, 0) in (11, 12)
        ordered = list(someone.map([("add", i, 0) for i in range(6)]))
        assert all(value - i in (10, 11) for i, value in enumerate(ordered))
        assert len(list(someone.map([("add", i, 0) for i in range(6)], ordered=False))) == 6
    with Gather(All(actors, settings=SETTINGS)) as gather, gather.gathering("count"):
        assert streamers(gather, {10, 11}) == {10, 11}


def streamers(gather, expected: set, limit: int = 2000) -> set:
    """Tags of the actors seen streaming, reading until all of ``expected`` appeared (one actor may start later
    than another on a busy machine) or ``limit`` items."""
    tags = set()
    for _ in range(limit):
        tags.add(gather(timeout=30)[0])
        if tags >= expected:
            break
    return tags


def doomed(caller_type, ray, count: int, victim_index: int):
    """A caller over ``count`` fresh actors, the one it will lose in 0.5 s, and the start time."""
    caller = caller_type(spawn(ray, count), settings=SETTINGS)
    victim = caller.link.connections[victim_index]
    kill_later(victim.endpoint["pid"], 0.5)
    return caller, victim, time.monotonic()


@pytest.mark.slow
def test_sigkill_during_all(ray_local):
    everyone, victim, started = doomed(All, ray_local, 3, 1)
    with pytest.raises(ActorDiedError) as info:
        everyone("sleep", 5.0)
    assert time.monotonic() - started < TIMEOUT
    assert info.value.actor == victim.name
    assert info.value.index == 1
    everyone.remove(1)
    everyone.add(spawn(ray_local, 1, first_tag=7)[0])
    assert everyone("add", 0, 0) == [0, 2, 7]
    everyone.close()


def test_sigkill_during_broadcasts(ray_local):
    everyone, victim, started = doomed(All, ray_local, 3, 0)
    for _ in range(4):
        everyone.broadcast("sleep", 0.3)  # several in flight when the victim dies
    with pytest.raises(ActorDiedError) as info:
        everyone.wait()
    assert info.value.actor == victim.name
    assert time.monotonic() - started < 0.5 + TIMEOUT
    everyone.remove(0)
    everyone.add(spawn(ray_local, 1, first_tag=9)[0])
    everyone.broadcast("sleep", 0.01)
    everyone.wait()  # the older broadcasts finish without the removed actor; nothing raises twice
    assert everyone("add", 0, 0) == [1, 2, 9]
    everyone.close()


def test_sigkill_during_any_map(ray_local):
    someone, victim, started = doomed(Any, ray_local, 2, 0)
    results = []
    with pytest.raises(ActorDiedError) as info:
        for result in someone.map([("sleep", 0.2)] * 40):
            results.append(result)
    assert time.monotonic() - started < 0.5 + TIMEOUT
    assert info.value.actor == victim.name
    assert 0 < len(results) < 40
    someone.remove(victim.handle)
    assert someone("add", 1, 0) == 2  # the other actor keeps working
    someone.add(spawn(ray_local, 1, first_tag=5)[0])
    assert sorted(someone.map([("add", 0, 0)] * 4)) in ([1, 1, 5, 5], [1, 1, 1, 5], [1, 5, 5, 5])
    someone.close()


def test_as_completed_survives_a_killed_actor(ray_local):
    someone, victim, started = doomed(Any, ray_local, 2, 0)
    calls = [("sleep", 0.2)] * 12 + [("fail", "boom")]
    outcomes, replaced = [], False
    for call, outcome in someone.as_completed(calls):
        outcomes.append((call, outcome))
        if isinstance(outcome, ActorDiedError) and not replaced:
            someone.remove(outcome.actor)
            someone.add(spawn(ray_local, 1, first_tag=3)[0])  # kept busy from the next call on
            replaced = True
    died = [c for c, o in outcomes if isinstance(o, ActorDiedError)]
    failed = [o for c, o in outcomes if isinstance(o, RemoteError)]
    assert replaced
    assert len(died) >= 1
    assert time.monotonic() - started < 12 * 0.2 + TIMEOUT
    assert len(outcomes) == len(calls)  # every call answered once: a result, the remote error or the death
    assert len(failed) == 1
    assert "boom" in str(failed[0])
    slept = [o for c, o in outcomes if c[0] == "sleep" and not isinstance(o, ActorDiedError)]
    assert len(slept) == 12 - len(died)
    assert 3 in slept  # the replacement (tag 3) took calls
    someone.close()


def test_sigkill_during_gather(ray_local):
    actors = spawn(ray_local, 2, first_tag=20)
    gather = Gather(All(actors, settings=SETTINGS))
    victim = gather.link.connections[0]
    seen = []
    with pytest.raises(ActorDiedError) as info:
        with gather.gathering("slow_count"):
            kill_later(victim.endpoint["pid"], 0.3)
            deadline = time.monotonic() + 0.3 + TIMEOUT
            while time.monotonic() < deadline:
                seen.append(gather(timeout=TIMEOUT)[0])
    assert info.value.actor == victim.name
    assert 21 in seen
    gather.remove(victim.handle)
    gather.add(spawn(ray_local, 1, first_tag=30)[0])
    with gather.gathering("count"):
        assert streamers(gather, {21, 30}) == {21, 30}
    gather.close()


def test_actor_dead_before_start_is_reported(ray_local):
    actor = spawn(ray_local, 1)[0]
    ray_local.kill(actor)
    with pytest.raises(ActorDiedError):
        All([actor], settings=SETTINGS)


HOSTILE = r"""
import socket, struct, sys, zmq, os
address, = sys.argv[1:]
host, port = address.removeprefix("tcp://").rsplit(":", 1)
context = zmq.Context()
sock = context.socket(zmq.DEALER)
sock.connect(address)
header = struct.pack(">2sBBQ16s", b"LK", 1, 3, 1, b"n" * 16) + b"\x93\xa3add\x91\x01\x80"
sock.send_multipart([os.urandom(100)])                                 # random bytes: malformed
sock.send_multipart([header])                                          # truncated: no tag
sock.send_multipart([header, b"t" * 32])                               # wrong HMAC: unauthenticated
sock.send_multipart([header[:2] + b"\x09" + header[3:], b"t" * 32])    # other protocol version
sock.send_multipart([header, *[b"x" * 300_000] * 3, b"t" * 32])        # over max_message_bytes in total
sock.send_multipart([b"\x00" * 3])                                     # shorter than any header
sock.send_multipart([header, b"x" * (1 << 20), b"t" * 32])             # one frame over it: libzmq drops the peer
raw = socket.create_connection((host, int(port)))                      # not even ZMTP: garbage stream
raw.sendall(os.urandom(4096))
greeting = b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00" + b"NULL" + b"\x00" * 16 + b"\x00" + b"\x00" * 31
raw2 = socket.create_connection((host, int(port)))                     # ZMTP greeting, then an absurd length
raw2.sendall(greeting + b"\x06" + b"\x7f" * 8)                       # (libzmq's MAXMSGSIZE drops it)
sock.send_multipart([b"done"])                                         # may be lost with the dropped peer
import time; time.sleep(0.5)
"""


def test_hostile_process_is_rejected_and_counted(ray_local):
    settings = RpcSettings.defaults(timeout=TIMEOUT, heartbeat=0.5, max_message_bytes=512 * 1024)
    actor = spawn(ray_local, 1, first_tag=3)[0]
    with Any([actor], settings=settings) as someone:
        address = someone.link.connections[0].endpoint["address"]
        subprocess.run([sys.executable, "-c", HOSTILE, address], check=True, timeout=60)
        assert someone("add", 1, 1) == 5  # the next good call is answered
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the hostile connection's messages may be queued behind ours
            stats = ray_local.get(actor._lamarckian_rpc_stats.remote())
            if stats.get("oversize") and stats.get("version") and stats.get("malformed", 0) >= 3:
                break
            time.sleep(0.1)
    assert stats["malformed"] >= 3
    assert stats["unauthenticated"] == 1
    assert stats["version"] == 1
    assert stats["oversize"] == 1


def test_curve_encryption_and_decorating_a_ray_actor_class(ray_local):
    from lamarckian.rpc import all as all_pattern

    @all_pattern
    @ray_local.remote(num_cpus=0)
    class Encrypted:
        def double(self, x):
            return 2 * x

    actors = [Encrypted.remote() for _ in range(2)]
    with All(actors, settings=RpcSettings.defaults(curve=True, timeout=TIMEOUT)) as everyone:
        assert everyone.link.connections[0].endpoint["curve_public_key"]
        assert everyone("double", np.arange(3)) [1].tolist() == [0, 2, 4]
    with pytest.raises(ValueError, match="other rpc settings"):  # one server per actor, one set of settings
        All(actors, settings=RpcSettings.defaults(curve=False))
