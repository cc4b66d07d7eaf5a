"""Benchmark of lamarckian.rpc beside a hand-written raw-ZeroMQ reference and Ray's own actor calls.

Two local Ray actors. Every figure is measured in this run; each is the median of ``--repeats`` timed
blocks. Prints one table; targets (issue 2, on a 2-core machine):
  All    4 MB float32 broadcast to 2 actors: ours <= 1.3x raw ZeroMQ
  Any    no-op round trip: median <= 150 us and >= 8x faster than a Ray actor call
  Gather each actor returning 1 MB: throughput >= 0.7x raw ZeroMQ and >= 3x Ray

    python bench/rpc.py [--repeats 15]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import threading
import time
from typing import Callable

import numpy as np
import ray
import zmq

from lamarckian.rpc import All, Any, Gather, all, any, gather

BROADCAST_BYTES = 4 << 20
CHUNK_BYTES = 1 << 20


@gather
@all
@any
class Peer:
    """One benchmark actor: our decorated methods, plain Ray methods, and a raw ZeroMQ echo thread."""

    def __init__(self) -> None:
        self.chunk_array = np.ones(CHUNK_BYTES // 4, np.float32)
        self._context = zmq.Context()
        self._raw = self._context.socket(zmq.ROUTER)
        self._raw.bind("tcp://127.0.0.1:*")
        self._raw_address = self._raw.getsockopt_string(zmq.LAST_ENDPOINT)
        threading.Thread(target=self._serve_raw, daemon=True).start()

    def noop(self) -> None:
        return None

    def receive(self, blob: np.ndarray) -> None:
        return None

    def chunk(self) -> np.ndarray:
        return self.chunk_array

    def raw_address(self) -> str:
        return self._raw_address

    def _serve_raw(self) -> None:
        """b"c": a gather credit, answered by one chunk; anything else is echoed as an empty ack."""
        while True:
            identity, *frames = self._raw.recv_multipart(copy=False)
            if len(frames) == 1 and frames[0].bytes == b"c":
                self._raw.send_multipart([identity, self.chunk_array], copy=False)
            else:
                self._raw.send_multipart([identity, b""])


def timed(block: Callable[[], None], repeats: int) -> float:
    """Median seconds of ``block`` over ``repeats`` runs (after one warm-up)."""
    block()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        block()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


class RawClient:
    """The raw ZeroMQ reference: one DEALER per actor, no header, no authentication."""

    def __init__(self, addresses: list[str]) -> None:
        self.context = zmq.Context()
        self.sockets = []
        for address in addresses:
            sock = self.context.socket(zmq.DEALER)
            sock.connect(address)
            self.sockets.append(sock)
        self.poller = zmq.Poller()
        for sock in self.sockets:
            self.poller.register(sock, zmq.POLLIN)

    def broadcast(self, blob: np.ndarray) -> None:
        for sock in self.sockets:
            sock.send(blob, copy=False)
        for sock in self.sockets:
            sock.recv()

    def round_trip(self) -> None:
        self.sockets[0].send(b"x")
        self.sockets[0].recv()

    def gather(self, count: int) -> None:
        for sock in self.sockets:
            sock.send(b"c")
        requested, received = len(self.sockets), 0
        while received < count:
            for sock, _ in self.poller.poll():
                sock.recv(copy=False)
                received += 1
                if requested < count:
                    sock.send(b"c")
                    requested += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--round-trips", type=int, default=500, help="calls per timed Any block")
    parser.add_argument("--chunks", type=int, default=400, help="1 MB results per timed Gather block")
    parser.add_argument("--broadcasts", type=int, default=20, help="4 MB broadcasts per timed All block")
    options = parser.parse_args()

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    actors = [ray.remote(num_cpus=0)(Peer).remote() for _ in range(2)]
    raw = RawClient(ray.get([actor.raw_address.remote() for actor in actors]))
    everyone, someone = All(actors), Any(actors)
    blob = np.random.default_rng(0).random(BROADCAST_BYTES // 4, dtype=np.float32)
    rows = []

    n = options.broadcasts
    ours = timed(lambda: [everyone("receive", blob) for _ in range(n)], options.repeats) / n
    reference = timed(lambda: [raw.broadcast(blob) for _ in range(n)], options.repeats) / n

    def ray_broadcast() -> None:
        reference_in_store = ray.put(blob)
        ray.get([actor.receive.remote(reference_in_store) for actor in actors])

    by_ray = timed(lambda: [ray_broadcast() for _ in range(n)], options.repeats) / n
    rows.append(("All: 4 MB broadcast to 2 actors", f"{ours*1e3:.2f} ms", f"{reference*1e3:.2f} ms", f"{by_ray*1e3:.2f} ms",
                 f"{ours/reference:.2f}x raw (target <= 1.3)", ours / reference <= 1.3))

    n = options.round_trips
    ours = timed(lambda: [someone("noop") for _ in range(n)], options.repeats) / n
    reference = timed(lambda: [raw.round_trip() for _ in range(n)], options.repeats) / n
    by_ray = timed(lambda: [ray.get(actors[0].noop.remote()) for _ in range(n // 10)], options.repeats) / (n // 10)
    rows.append(("Any: no-op round trip", f"{ours*1e6:.0f} us", f"{reference*1e6:.0f} us", f"{by_ray*1e6:.0f} us",
                 f"{by_ray/ours:.1f}x faster than Ray (target >= 8, <= 150 us)", ours <= 150e-6 and by_ray / ours >= 8))

    n = options.chunks
    gatherer = Gather(everyone)

    def ours_gather() -> None:
        with gatherer.gathering("chunk"):
            for _ in range(n):
                gatherer()

    def ray_gather() -> None:
        in_flight = {actor.chunk.remote(): actor for actor in actors}
        for received in range(n // 4):
            (done,), _ = ray.wait(list(in_flight), num_returns=1)
            ray.get(done)
            actor = in_flight.pop(done)
            if received + len(actors) < n // 4:
                in_flight[actor.chunk.remote()] = actor
        ray.get(list(in_flight))

    ours = n * CHUNK_BYTES / timed(ours_gather, options.repeats)
    reference = n * CHUNK_BYTES / timed(lambda: raw.gather(n), options.repeats)
    by_ray = (n // 4) * CHUNK_BYTES / timed(ray_gather, options.repeats)
    rows.append(("Gather: 1 MB results from 2 actors", f"{ours/1e9:.2f} GB/s", f"{reference/1e9:.2f} GB/s", f"{by_ray/1e9:.2f} GB/s",
                 f"{ours/reference:.2f}x raw (>= 0.7), {ours/by_ray:.1f}x Ray (>= 3)", ours / reference >= 0.7 and ours / by_ray >= 3))

    print(f"lamarckian.rpc benchmark - {time.strftime('%Y-%m-%d')} - {platform.processor() or platform.machine()}, "
          f"{__import__('os').cpu_count()} cores, median of {options.repeats}")
    header = ("pattern", "lamarckian", "raw ZeroMQ", "Ray", "ratio", "target")
    table = [header] + [(*row[:5], "met" if row[5] else "MISSED") for row in rows]
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for row in table:
        print(" | ".join(str(cell).ljust(width) for cell, width in zip(row, widths)))
    gatherer.close()
    someone.close()
    ray.shutdown()


if __name__ == "__main__":
    main()
