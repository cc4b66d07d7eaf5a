"""Benchmark of lamarckian.rpc beside a hand-written raw-ZeroMQ reference, Ray's actor calls and Ray Compiled Graphs.

Ray actors on this node. Every figure is measured in this run; each is the median of ``--repeats`` timed blocks.
The raw reference is a DEALER per actor against a ROUTER echo thread in the same actor process: no header, no
authentication; its round trips alternate the two actors like ``Any`` does. "ZeroMQ path" is lamarckian.rpc
with ``rpc.local: off`` (every link over loopback TCP, as before the node-local channel), on its own actors.
Targets (issues 18 and 34, 2-core machine):
  All    4 MB float32 to 2 actors:        <= 1.0x raw ZeroMQ's time
  All    50 MB float32 to 8 actors:       <= 0.5x ray.put + 8 actor calls taking it, <= 0.2x the ZeroMQ path
  Any    no-op round trip on one actor:   <= a Ray Compiled Graph call (on one actor); the same over 2 actors in
                                          turn (as the raw reference) is printed beside it
  Any    the same, pinned (issue 65):     <= 1.2x a raw pyzmq REQ/REP pair and <= 0.5x the Compiled Graph. The pair
                                          is a REQ here and a REP echo in a plain child process (no Ray, no framing,
                                          no authentication) over loopback TCP: the socket's floor. Pinned: this
                                          process's threads on the first core, every thread of the serving process
                                          (ours: the actor; raw: the child) on the last; warmed: one untimed block
                                          each, then timed blocks of the two alternating.
  Gather 1 MB results from 2 actors:      >= 1.0x raw ZeroMQ's throughput

``--cluster`` runs the same three patterns between the nodes of a 3-raylet ``ray.cluster_utils.Cluster`` on this
machine (one actor on each worker node, the caller on the head): links between nodes carry a tag per message, or
CurveZMQ (``rpc.curve``), whose figures are printed beside the unencrypted ones.

``--hosts`` (root; docs/cluster.md) runs them across 3 hosts with their own addresses (network namespaces on a
bridge, a Ray node in each, bench/hostlib): the caller on the head's host, 4 actors on each of the 2 other hosts;
the 50 MB broadcast beside ray.put + 8 calls, the same calls beside them on the caller's own host; then the broadcast
again with the links into the two other hosts through a token bucket (``tc tbf``, ``--links``: 1 Gbit/s and 100
Mbit/s; this kernel has no ``netem`` for a delay).

    python bench/rpc.py [--repeats 15] [--cluster | --hosts]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from typing import Any as Value
from typing import Callable

import numpy as np
import ray
import zmq

from lamarckian.rpc import All, Any, Gather, RpcSettings, all, any, gather
from lamarckian.rpc.sockets import bind_host

BROADCAST_BYTES = 4 << 20
LARGE_BROADCAST_BYTES = 50 << 20
LARGE_FANOUT = 8
CHUNK_BYTES = 1 << 20
RAW_REP = """import zmq
socket = zmq.Context().socket(zmq.REP)
print(socket.bind_to_random_port("tcp://127.0.0.1"), flush=True)
while True:
    socket.send(socket.recv())
"""


def pin(pid: int, cpus: set[int]) -> None:
    """Pin every thread of process ``pid`` to ``cpus`` (``sched_setaffinity`` of a pid moves one thread only)."""
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(task), cpus)
        except OSError:
            pass        # a thread that ended meanwhile


@gather
@all
@any
class Peer:
    """One benchmark actor: our decorated methods, plain Ray methods, and a raw ZeroMQ echo thread."""

    def __init__(self) -> None:
        self.chunk_array = np.ones(CHUNK_BYTES // 4, np.float32)
        self._context = zmq.Context()
        self._raw = self._context.socket(zmq.ROUTER)
        self._raw.bind(f"tcp://{bind_host(RpcSettings.defaults())}:*")     # where our servers bind too
        self._raw_address = self._raw.getsockopt_string(zmq.LAST_ENDPOINT)
        threading.Thread(target=self._serve_raw, daemon=True).start()

    def noop(self) -> None:
        return None

    def graph_noop(self, value: Value) -> Value:
        """A Compiled Graph's step takes the graph's input."""
        return value

    def receive(self, blob: np.ndarray) -> None:
        return None

    def chunk(self) -> np.ndarray:
        return self.chunk_array

    def raw_address(self) -> str:
        return self._raw_address

    def pin(self, cpu: int) -> None:
        """Pin every thread of this actor's process to ``cpu``."""
        pin(os.getpid(), {cpu})

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

    def round_trips(self, count: int) -> None:
        """``count`` no-op round trips, alternating the actors."""
        for index in range(count):
            sock = self.sockets[index % len(self.sockets)]
            sock.send(b"x")
            sock.recv()

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


class RawPair:
    """The raw ZeroMQ floor: a REQ here, a REP echo in a plain child process (:data:`RAW_REP`), both pinned."""

    def __init__(self, cpu: int) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", RAW_REP], stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        port = int(self.process.stdout.readline())
        pin(self.process.pid, {cpu})
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.REQ)
        self.socket.connect(f"tcp://127.0.0.1:{port}")

    def round_trips(self, count: int) -> None:
        for _ in range(count):
            self.socket.send(b"x")
            self.socket.recv()

    def close(self) -> None:
        self.socket.close(linger=0)
        self.context.term()
        self.process.kill()
        self.process.wait()


def alternating(blocks: dict[str, Callable[[], None]], repeats: int) -> dict[str, float]:
    """Median seconds of each block, timed in turn ``repeats`` times (after one untimed run of each)."""
    for block in blocks.values():
        block()
    samples: dict[str, list[float]] = {name: [] for name in blocks}
    for _ in range(repeats):
        for name, block in blocks.items():
            start = time.perf_counter()
            block()
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) for name, times in samples.items()}


def pinned_against_raw(actor: Value, options: argparse.Namespace) -> tuple[float, float]:
    """Seconds per no-op round trip of ``Any`` on ``actor`` and of the raw REQ/REP pair, pinned alike and timed
    alternately; this process is unpinned again afterwards."""
    cpus = sorted(os.sched_getaffinity(0))
    pair = RawPair(cpus[-1])
    ray.get(actor.pin.remote(cpus[-1]))
    pin(os.getpid(), {cpus[0]})
    n = options.round_trips
    try:
        with Any([actor]) as one:
            medians = alternating({"ours": lambda: [one("noop") for _ in range(n)],
                                   "raw": lambda: pair.round_trips(n)}, options.repeats)
    finally:
        pin(os.getpid(), set(cpus))
        pair.close()
    return medians["ours"] / n, medians["raw"] / n


class Patterns:
    """Our three patterns against a set of actors with one set of settings: seconds per operation."""

    def __init__(self, actors: list[Value], settings: RpcSettings, options: argparse.Namespace) -> None:
        self.everyone, self.someone = All(actors, settings=settings), Any(actors, settings=settings)
        self.gatherer = Gather(self.everyone)
        self.options = options

    def broadcast(self, blob: np.ndarray, n: int | None = None) -> float:
        n = n or self.options.broadcasts
        return timed(lambda: [self.everyone("receive", blob) for _ in range(n)], self.options.repeats) / n

    def round_trip(self) -> float:
        n = self.options.round_trips
        return timed(lambda: [self.someone("noop") for _ in range(n)], self.options.repeats) / n

    def gather_throughput(self) -> float:
        n = self.options.chunks

        def block() -> None:
            with self.gatherer.gathering("chunk"):
                for _ in range(n):
                    self.gatherer()

        return n * CHUNK_BYTES / timed(block, self.options.repeats)

    def close(self) -> None:
        self.gatherer.close()
        self.someone.close()


def compiled_graph_latency(actor: Value, options: argparse.Namespace) -> float:
    """Seconds per no-op call through a Ray Compiled Graph (``experimental_compile``) on ``actor``."""
    from ray.dag import InputNode

    with InputNode() as graph_input:
        graph = actor.graph_noop.bind(graph_input)
    compiled = graph.experimental_compile()
    try:
        n = options.round_trips
        return timed(lambda: [ray.get(compiled.execute(index)) for index in range(n)], options.repeats) / n
    finally:
        compiled.teardown()


def print_table(title: str, header: tuple[str, ...], rows: list[tuple]) -> None:
    print(f"\n{title}")
    table = [header] + rows
    widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
    for row in table:
        print(" | ".join(str(cell).ljust(width) for cell, width in zip(row, widths)))


def single_node(options: argparse.Namespace) -> None:
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)

    def start(count: int) -> list[Value]:
        return [ray.remote(num_cpus=0)(Peer).remote() for _ in range(count)]

    actors, zeromq_actors = start(2), start(2)       # an actor serves one set of rpc settings
    graph_actor = start(1)[0]                        # a Compiled Graph holds its actor's execution loop
    raw = RawClient(ray.get([actor.raw_address.remote() for actor in actors]))
    ours = Patterns(actors, RpcSettings.defaults(), options)
    over_zeromq = Patterns(zeromq_actors, RpcSettings.defaults(local="off"), options)
    if None in [connection.channel for connection in ours.everyone.link.connections]:
        raise SystemExit("rpc.local: auto did not take the node-local channel to actors of this node")
    blob = np.random.default_rng(0).random(BROADCAST_BYTES // 4, dtype=np.float32)
    rows = []

    n = options.broadcasts
    mine, zeromq_path = ours.broadcast(blob), over_zeromq.broadcast(blob)
    reference = timed(lambda: [raw.broadcast(blob) for _ in range(n)], options.repeats) / n
    by_ray = timed(lambda: [ray_broadcast(blob, actors) for _ in range(n)], options.repeats) / n
    rows.append(("All: 4 MB to 2 actors", f"{mine*1e3:.2f} ms", f"{zeromq_path*1e3:.2f} ms", f"{reference*1e3:.2f} ms",
                 f"{by_ray*1e3:.2f} ms", "", f"{mine/reference:.2f}x raw time (<= 1.0)", mine / reference <= 1.0))

    n = options.round_trips
    mine, zeromq_path = ours.round_trip(), over_zeromq.round_trip()
    reference = timed(lambda: raw.round_trips(n), options.repeats) / n
    by_ray = timed(lambda: [ray.get(actors[index % 2].noop.remote()) for index in range(n // 10)],
                   options.repeats) / (n // 10)
    with Any(actors[:1]) as one:        # like the Compiled Graph: one actor
        alone = timed(lambda: [one("noop") for _ in range(n)], options.repeats) / n
    graph = compiled_graph_latency(graph_actor, options)
    rows.append(("Any: no-op round trip, 1 actor", f"{alone*1e6:.0f} us", "", "", "", f"{graph*1e6:.0f} us",
                 f"{alone/graph:.2f}x Compiled Graph (<= 1)", alone <= graph))
    solo, floor = pinned_against_raw(start(1)[0], options)
    rows.append(("Any: no-op round trip, 1 actor, pinned", f"{solo*1e6:.1f} us", "",
                 f"{floor*1e6:.1f} us (REQ/REP pair)", "", f"{graph*1e6:.0f} us",
                 f"{solo/floor:.2f}x raw REQ/REP (<= 1.2), {solo/graph:.2f}x Compiled Graph (<= 0.5)",
                 solo <= 1.2 * floor and solo <= 0.5 * graph))
    rows.append(("Any: no-op round trip, 2 actors in turn", f"{mine*1e6:.0f} us", f"{zeromq_path*1e6:.0f} us",
                 f"{reference*1e6:.0f} us", f"{by_ray*1e6:.0f} us", f"{graph*1e6:.0f} us",
                 f"{mine/graph:.2f}x Compiled Graph, {mine/reference:.2f}x raw", None))

    n = options.chunks

    def ray_gather() -> None:
        in_flight = {actor.chunk.remote(): actor for actor in actors}
        for received in range(n // 4):
            (done,), _ = ray.wait(list(in_flight), num_returns=1)
            ray.get(done)
            actor = in_flight.pop(done)
            if received + len(actors) < n // 4:
                in_flight[actor.chunk.remote()] = actor
        ray.get(list(in_flight))

    mine, zeromq_path = ours.gather_throughput(), over_zeromq.gather_throughput()
    reference = n * CHUNK_BYTES / timed(lambda: raw.gather(n), options.repeats)
    by_ray = (n // 4) * CHUNK_BYTES / timed(ray_gather, options.repeats)
    rows.append(("Gather: 1 MB results from 2 actors", f"{mine/1e9:.2f} GB/s", f"{zeromq_path/1e9:.2f} GB/s",
                 f"{reference/1e9:.2f} GB/s", f"{by_ray/1e9:.2f} GB/s", "",
                 f"{mine/reference:.2f}x raw throughput (>= 1.0), {mine/by_ray:.1f}x Ray", mine / reference >= 1.0))
    ours.close()
    over_zeromq.close()
    # last: its 8 actors come and go, and Ray starts workers in their place for seconds after
    rows.insert(1, large_broadcast(options, start))
    print_table(f"lamarckian.rpc, one node - {time.strftime('%Y-%m-%d')} - "
                f"{platform.processor() or platform.machine()}, "
                f"{os.cpu_count()} cores, median of {options.repeats}",
                ("pattern", "lamarckian", "ZeroMQ path", "raw ZeroMQ", "Ray call", "Ray Compiled Graph", "ratio",
                 "target"),
                [(*row[:7], "-" if row[7] is None else "met" if row[7] else "MISSED") for row in rows])
    ray.shutdown()


def ray_broadcast(blob: np.ndarray, actors: list[Value]) -> None:
    """Ray's way: the object store holds one copy, every actor's call maps it."""
    reference_in_store = ray.put(blob)
    ray.get([actor.receive.remote(reference_in_store) for actor in actors])


def large_broadcast(options: argparse.Namespace, start: Callable[[int], list[Value]]) -> tuple:
    """50 MB to 8 actors of this node: ours, the ZeroMQ path and Ray's object store (a table row)."""
    blob = np.random.default_rng(1).random(LARGE_BROADCAST_BYTES // 4, dtype=np.float32)
    actors, zeromq_actors = start(LARGE_FANOUT), start(LARGE_FANOUT)
    n = max(1, options.broadcasts // 4)
    ours = Patterns(actors, RpcSettings.defaults(), options)
    over_zeromq = Patterns(zeromq_actors, RpcSettings.defaults(local="off"), options)
    mine, zeromq_path = ours.broadcast(blob, n), over_zeromq.broadcast(blob, n)
    by_ray = timed(lambda: [ray_broadcast(blob, actors) for _ in range(n)], options.repeats) / n
    ours.close()
    over_zeromq.close()
    for actor in actors + zeromq_actors:
        ray.kill(actor)
    return ("All: 50 MB to 8 actors", f"{mine*1e3:.1f} ms", f"{zeromq_path*1e3:.1f} ms", "", f"{by_ray*1e3:.1f} ms", "",
            f"{mine/by_ray:.2f}x ray.put + 8 calls (<= 0.5), {mine/zeromq_path:.2f}x ZeroMQ path (<= 0.2)",
            mine / by_ray <= 0.5 and mine / zeromq_path <= 0.2)


def cross_node(options: argparse.Namespace) -> None:
    """The three patterns from the head node to one actor on each of two worker nodes, tagged and CurveZMQ."""
    from ray.cluster_utils import Cluster
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    ray.init(address=cluster.address, log_to_driver=False)
    cluster.wait_for_nodes()
    try:
        def place() -> list[Value]:
            """One actor on each worker node (an actor serves one set of rpc settings)."""
            return [ray.remote(num_cpus=0)(Peer).options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node.node_id, soft=False)).remote()
                for node in workers]

        actors = place()
        raw = RawClient(ray.get([actor.raw_address.remote() for actor in actors]))
        blob = np.random.default_rng(0).random(BROADCAST_BYTES // 4, dtype=np.float32)
        columns = {}
        for label, settings, group in (("tag per message", RpcSettings.defaults(), actors),
                                       ("CurveZMQ", RpcSettings.defaults(curve=True), place())):
            patterns = Patterns(group, settings, options)
            columns[label] = (patterns.broadcast(blob), patterns.round_trip(), patterns.gather_throughput())
            patterns.close()
        n = options.broadcasts
        reference = (timed(lambda: [raw.broadcast(blob) for _ in range(n)], options.repeats) / n,
                     timed(lambda: raw.round_trips(options.round_trips), options.repeats) / options.round_trips,
                     options.chunks * CHUNK_BYTES / timed(lambda: raw.gather(options.chunks), options.repeats))
        tagged, curve = columns["tag per message"], columns["CurveZMQ"]
        rows = [
            ("All: 4 MB to 2 actors", *(f"{t[0]*1e3:.2f} ms" for t in (tagged, curve, reference)),
             f"{tagged[0]/reference[0]:.2f}x / {curve[0]/reference[0]:.2f}x raw time"),
            ("Any: no-op round trip", *(f"{t[1]*1e6:.0f} us" for t in (tagged, curve, reference)),
             f"{tagged[1]/reference[1]:.2f}x / {curve[1]/reference[1]:.2f}x raw time"),
            ("Gather: 1 MB results from 2 actors", *(f"{t[2]/1e9:.2f} GB/s" for t in (tagged, curve, reference)),
             f"{tagged[2]/reference[2]:.2f}x / {curve[2]/reference[2]:.2f}x raw throughput"),
        ]
        print_table(f"lamarckian.rpc between the nodes of a 3-raylet Cluster on this machine - "
                    f"{time.strftime('%Y-%m-%d')}"
                    f" - median of {options.repeats}",
                    ("pattern", "tag per message", "CurveZMQ", "raw ZeroMQ (plaintext)", "ratio tagged / curve"), rows)
    finally:
        ray.shutdown()
        cluster.shutdown()


def across_hosts(options: argparse.Namespace) -> None:
    """Make 3 hosts and their Ray nodes, run this script's ``--hosts-driver`` inside the first, print its table."""
    import sys
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from hostlib.netns import Hosts
    from hostlib.ray_nodes import RayNodes

    folder = Path(tempfile.mkdtemp(prefix="hosts-rpc-"))
    with Hosts(3) as hosts, RayNodes(hosts, folder, cpus=4) as nodes:
        nodes.start()
        for mbit in (None, *options.links):
            if mbit is not None:             # traffic into the two other hosts through a token bucket
                for host in hosts.hosts[1:]:
                    hosts.limit(host, mbit)
            link = ["--link", f"{mbit:g} Mbit/s"] if mbit is not None else []
            completed = hosts.run(hosts[0], [sys.executable, __file__, "--hosts-driver", nodes.address,
                                             "--repeats", str(options.repeats if mbit is None else 3), *link],
                                  timeout=1800, env=nodes.environment())
            print(completed.stdout, end="", flush=True)
            if completed.returncode != 0:
                raise SystemExit(f"bench/rpc.py --hosts: the driver failed:\n{completed.stderr[-3000:]}")


def hosts_driver(options: argparse.Namespace) -> None:
    """Inside the head's host: 4 actors on each of the other two hosts' nodes, and 4 on this host's own node."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    ray.init(address=options.hosts_driver, log_to_driver=False)
    own = ray.util.get_node_ip_address()
    nodes = {node["NodeManagerAddress"]: node["NodeID"] for node in ray.nodes() if node["Alive"]}

    def place(addresses: list[str], per_host: int = LARGE_FANOUT // 2) -> list[Value]:
        return [ray.remote(num_cpus=0)(Peer).options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=nodes[address], soft=False)).remote()
            for address in addresses for _ in range(per_host)]

    others = sorted(address for address in nodes if address != own)
    blob = np.random.default_rng(1).random(LARGE_BROADCAST_BYTES // 4, dtype=np.float32)
    n = max(1, options.broadcasts // 4)
    rows = []
    placements = [("2 other hosts", others)] + ([] if options.link else [("this host", [own, own])])
    for label, addresses in placements:
        actors = place(addresses)
        patterns = Patterns(actors, RpcSettings.defaults(), options)
        mine = patterns.broadcast(blob, n)
        by_ray = timed(lambda: [ray_broadcast(blob, actors) for _ in range(n)], options.repeats) / n
        rows.append((f"All: 50 MB to 8 actors on {label}", f"{mine * 1e3:.1f} ms", f"{by_ray * 1e3:.1f} ms",
                     f"{mine / by_ray:.2f}x"))
        if options.link:
            patterns.close()
            for actor in actors:
                ray.kill(actor)
            continue
        rows.append((f"Any: no-op round trip, actors on {label}", f"{patterns.round_trip() * 1e6:.0f} us", "", ""))
        rows.append((f"Gather: 1 MB results, actors on {label}", f"{patterns.gather_throughput() / 1e9:.2f} GB/s",
                     "", ""))
        patterns.close()
        for actor in actors:
            ray.kill(actor)
    link = f", links into the other hosts at {options.link} (tc tbf)" if options.link else ""
    print_table(f"lamarckian.rpc across 3 hosts (network namespaces, bench/hostlib{link}) - "
                f"{time.strftime('%Y-%m-%d')} - median of {options.repeats}",
                ("pattern", "ours", "ray.put + 8 calls", "ratio"), rows)
    ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--round-trips", type=int, default=500, help="calls per timed Any block")
    parser.add_argument("--chunks", type=int, default=400, help="1 MB results per timed Gather block")
    parser.add_argument("--broadcasts", type=int, default=20, help="4 MB broadcasts per timed All block")
    parser.add_argument("--cluster", action="store_true", help="between the nodes of a 3-raylet Cluster instead")
    parser.add_argument("--hosts", action="store_true", help="across 3 hosts of their own (root; bench/hostlib)")
    parser.add_argument("--links", type=float, nargs="*", default=[1000.0, 100.0], metavar="MBIT",
                        help="with --hosts: the broadcast again with the links into the other hosts at these rates")
    parser.add_argument("--hosts-driver", metavar="ADDRESS", help=argparse.SUPPRESS)   # --hosts's own process
    parser.add_argument("--link", help=argparse.SUPPRESS)                               # the driver's link, to say
    options = parser.parse_args()
    if options.hosts_driver:
        hosts_driver(options)
    elif options.hosts:
        across_hosts(options)
    else:
        (cross_node if options.cluster else single_node)(options)


if __name__ == "__main__":
    main()
