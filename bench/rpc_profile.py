"""Where the time of one RPC round trip goes (issue 18 §1): CPU time per call on each side, ours beside raw pyzmq,
and the functions that take it.

One Ray actor in its own process serves our no-op calls and, on a thread of its own, a raw ZeroMQ echo. For each
side and each kind, the CPU time of the thread doing the work (``time.thread_time``) over ``--calls`` calls: the
caller's thread here, the serving thread there. Then cProfile on both threads over the same calls: the functions
with the most own time per call. Medians of ``--repeats`` blocks.

    python bench/rpc_profile.py [--calls 3000] [--repeats 5] [--top 12]
    python bench/rpc_profile.py --flame docs/rpc_flame.svg [--calls 100000]

``--flame`` samples both processes with py-spy instead (``record --subprocesses --nonblocking``: the processes are
not paused to be read; idle threads left out, so the graph shows where CPU goes, not waiting): ``--calls`` no-op
``Any`` calls on an actor in a child process (lamarckian.rpc.processes: py-spy follows children, not Ray's workers),
written as an SVG flame graph.
"""

from __future__ import annotations

import argparse
import cProfile
import platform
import pstats
import statistics
import threading
import time
from pathlib import Path

import ray
import zmq

from lamarckian.rpc import Any, any


def top_functions(profile: cProfile.Profile, calls: int, count: int) -> list[tuple[str, float, float]]:
    """``(function, own µs per call, calls per call)`` of the ``count`` functions with the most own time."""
    stats = pstats.Stats(profile)
    rows = []
    for (path, line, name), (primitive, total_calls, own, _cumulative, _callers) in stats.stats.items():
        where = f"{Path(path).parent.name}/{Path(path).name}:{line}" if path != "~" else "builtin"
        rows.append((f"{name} ({where})", own / calls * 1e6, total_calls / calls))
    return sorted(rows, key=lambda row: -row[1])[:count]


@any
class Probe:
    """Our no-op method, profiling of the thread that serves it, and a raw ZeroMQ echo thread beside it."""

    def __init__(self) -> None:
        self.profile: cProfile.Profile | None = None
        self.context = zmq.Context()
        self.raw = self.context.socket(zmq.ROUTER)
        self.raw.bind("tcp://127.0.0.1:*")
        self.raw_cpu = 0.0
        threading.Thread(target=self._echo, daemon=True).start()

    def noop(self) -> None:
        return None

    def thread_cpu(self) -> float:
        """CPU seconds of the serving thread so far (this method runs on it)."""
        return time.thread_time()

    def raw_thread_cpu(self) -> float:
        return self.raw_cpu

    def raw_address(self) -> str:
        return self.raw.getsockopt_string(zmq.LAST_ENDPOINT)

    def profile_start(self) -> None:
        self.profile = cProfile.Profile()
        self.profile.enable()                       # the serving thread: every call after this one

    def profile_stop(self, calls: int, count: int) -> list[tuple[str, float, float]]:
        self.profile.disable()
        return [list(row) for row in top_functions(self.profile, calls, count)]

    def _echo(self) -> None:
        while True:
            identity, frame = self.raw.recv_multipart()
            self.raw_cpu = time.thread_time()
            self.raw.send_multipart([identity, frame])


def measure(call, calls: int, repeats: int, server_cpu) -> tuple[float, float, float]:
    """Median wall, caller-thread CPU and serving-thread CPU per call, in µs."""
    for _ in range(min(200, calls)):
        call()
    walls, mine, theirs = [], [], []
    for _ in range(repeats):
        server_before, cpu_before, wall_before = server_cpu(), time.thread_time(), time.perf_counter()
        for _ in range(calls):
            call()
        wall, cpu = time.perf_counter() - wall_before, time.thread_time() - cpu_before
        walls.append(wall / calls * 1e6)
        mine.append(cpu / calls * 1e6)
        theirs.append((server_cpu() - server_before) / calls * 1e6)
    return statistics.median(walls), statistics.median(mine), statistics.median(theirs)


def flame(path: str, calls: int) -> None:
    """Run :func:`child_calls` under ``py-spy record`` into the SVG ``path``."""
    import shutil
    import subprocess
    import sys

    if shutil.which("py-spy") is None:
        raise SystemExit("--flame needs py-spy (pip install py-spy)")
    command = ["py-spy", "record", "--subprocesses", "--nonblocking", "--rate", "250", "--format", "flamegraph",
               "--output", path, "--", sys.executable, __file__, "--child-calls", str(calls)]
    raise SystemExit(subprocess.call(command))


def child_calls(calls: int) -> None:
    """``calls`` no-op calls on a :class:`Probe` in a child process (after 1,000 untimed ones); prints µs per call."""
    from lamarckian.rpc import processes

    processes.warm_up(["lamarckian.rpc"])
    actor = processes.spawn(Probe)
    with Any([actor]) as someone:
        for _ in range(1000):
            someone("noop")
        start = time.perf_counter()
        for _ in range(calls):
            someone("noop")
        print(f"{calls} calls, {(time.perf_counter() - start) / calls * 1e6:.1f} µs per call (sampled)")
    actor.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--flame", metavar="SVG", help="a py-spy flame graph of --calls calls instead")
    parser.add_argument("--child-calls", type=int, help=argparse.SUPPRESS)     # --flame's own process
    args = parser.parse_args()
    if args.flame:
        flame(args.flame, args.calls)
    if args.child_calls:
        child_calls(args.child_calls)
        return
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    actor = ray.remote(num_cpus=0)(Probe).remote()
    someone = Any([actor])
    context = zmq.Context()
    raw = context.socket(zmq.DEALER)
    raw.connect(ray.get(actor.raw_address.remote()))

    def raw_call() -> None:
        raw.send(b"x")
        raw.recv()

    ours = measure(lambda: someone("noop"), args.calls, args.repeats, lambda: someone("thread_cpu"))
    reference = measure(raw_call, args.calls, args.repeats, lambda: ray.get(actor.raw_thread_cpu.remote()))
    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} ({platform.processor() or 'CPU'}), {args.calls} calls, "
          f"median of {args.repeats}; µs per no-op round trip")
    print("| | wall | caller thread CPU | serving thread CPU |")
    print("|---|---|---|---|")
    for name, (wall, caller, server) in (("ours (Any, one actor)", ours), ("raw pyzmq DEALER/ROUTER", reference)):
        print(f"| {name} | {wall:.0f} | {caller:.1f} | {server:.1f} |")
    print(f"ratio ours / raw: wall {ours[0] / reference[0]:.2f}, caller CPU {ours[1] / reference[1]:.2f}, "
          f"serving CPU {ours[2] / reference[2]:.2f}")

    someone("profile_start")
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(args.calls):
        someone("noop")
    profile.disable()
    server_rows = someone("profile_stop", args.calls, args.top)
    for side, rows in (("caller", top_functions(profile, args.calls, args.top)), ("server", server_rows)):
        print(f"\n{side}: own time per round trip (cProfile's clock is wall time: poll's is mostly waiting for the "
              f"other side; cProfile adds overhead of its own, compare rows, not sums)")
        print("| function | µs | calls |")
        print("|---|---|---|")
        for name, micros, count in rows:
            print(f"| {name} | {micros:.1f} | {count:.1f} |")
    someone.close()
    ray.shutdown()


if __name__ == "__main__":
    main()
