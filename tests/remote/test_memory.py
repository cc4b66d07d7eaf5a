"""A worker flooding the relay with segments far faster than the trainer takes them leaves the server's memory
bounded (the queue's limits, libzmq's read-ahead per peer), and the trainer still gets segments."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import zmq

from lamarckian.remote.client import Client
from lamarckian.remote.keys import keygen, load_pair, load_public
from lamarckian.remote.protocol import pack

from .helpers import segment

pytestmark = pytest.mark.slow
SEGMENT_BYTES = 2**20
QUEUE_MB = 8
SECONDS = 12.0


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def test_a_flood_leaves_the_servers_memory_bounded(tmp_path):
    keys = tmp_path / "keys"
    for name in ("server", "trainer", "flood"):
        keygen(keys, name)
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "flood.key").write_bytes((keys / "flood.key").read_bytes())
    server = subprocess.Popen([sys.executable, "-m", "lamarckian.remote", "server", "--bind", "tcp://127.0.0.1:*",
                               "--keys", str(allowed), "--secret", str(keys / "server.key_secret"), "--trainer",
                               str(keys / "trainer.key"), "--queue", "64", "--queue-mb", str(QUEUE_MB), "--rate",
                               "10000", "--burst", "10000", "--max-message-mb", "4"],
                              stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()
        endpoint = line.split("serving on ")[1].split(":", 2)
        endpoint = ":".join(endpoint[:2]) + ":" + endpoint[2].split()[0].rstrip(":")
        trainer = Client(endpoint, keys / "trainer.key_secret", keys / "server.key", timeout=10)
        trainer.request({"op": "stats"})
        baseline = resident_mb(server.pid)

        context = zmq.Context()                  # the flooder: no waiting for answers, a deep send queue
        flood = context.socket(zmq.DEALER)
        flood.setsockopt(zmq.LINGER, 0)
        flood.setsockopt(zmq.SNDHWM, 10_000)
        flood.curve_publickey, flood.curve_secretkey = load_pair(keys / "flood.key_secret")
        flood.curve_serverkey = load_public(keys / "server.key")
        flood.connect(endpoint)
        frames = pack({"op": "segment", "id": 1, "have": 0, "imports": [],
                       "segment": segment(observation_bytes=SEGMENT_BYTES)})
        sent = taken = pulls = 0
        peak = baseline
        started = last_pull = time.monotonic()
        while time.monotonic() - started < SECONDS:
            try:
                flood.send_multipart(frames, zmq.NOBLOCK, copy=False)
                sent += 1
            except zmq.Again:
                time.sleep(0.001)
            if time.monotonic() - last_pull >= 0.2:          # the trainer: one segment every 0.2 s
                last_pull = time.monotonic()
                answer = trainer.request({"op": "pull", "max": 1, "wait": 0.0})
                pulls += 1
                taken += len(answer["segments"])
                peak = max(peak, resident_mb(server.pid))
        stats = trainer.request({"op": "stats"})["stats"]
        flood.close(0)
        context.term()
        trainer.close()
    finally:
        server.terminate()
        server.wait(30)
    received = stats["received"]
    print(f"flood: {sent} sent, {received} received by the server, {taken} taken by the trainer in {pulls} pulls; "
          f"server RSS {baseline:.0f} MB -> peak {peak:.0f} MB; overflow {stats['overflow']}")
    assert received >= 10 * taken, (received, taken)          # the flood came at 10x the trainer's rate at least
    assert taken >= pulls * 0.8                                 # and the trainer still got its segments
    assert stats["overflow"] >= received - taken - 64           # the excess left the queue
    assert stats["queued_bytes"] <= QUEUE_MB * 2**20
    # the queue (8 MiB) plus libzmq's read-ahead (4 messages per peer) and decoding, not the flood's gigabytes
    assert peak - baseline < 100, (baseline, peak, received * SEGMENT_BYTES / 2**20)
