"""Throughput through a game server against the ideal: does the asyncio actor hide a game's latency?

    python bench/games.py [--seconds 5] [--latencies 1 10 50] [--episodes 1 16 64 256 1024] [--plot docs/games.png]

A reference server (``python -m lamarckian.games serve --env CartPole-v1 --latency L``, a real process) serves
CartPole-v1. For each latency L and each number E of concurrent episodes per actor, 2 sampling actors
(``lamarckian.rl.fleet.actor.Actor``, each in its own process, PPO's initial policy, one batched forward per round)
run for ``--seconds``. A round trip is one answered request (a step or a reset); the ideal is ``2·E / L`` round
trips per
second until the CPU binds, and the CPU bound is measured in the same run: the same 2 actors with 1,024 episodes
each against a server without latency. Ratio = achieved / min(ideal, CPU bound).

Beside them, in the same run: gymnasium's AsyncVectorEnv with 2 and 16 processes, each environment a blocking
client of the same server (``lamarckian.games.env.GameEnv``), random actions.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def actor_worker(connection: Any, index: int) -> None:
    """A process that runs one sampling Actor per request ``(config edits, seconds)`` and answers
    ``(steps, resets, seconds)``."""
    from lamarckian.config import load
    from lamarckian.rl.fleet.actor import Actor

    while True:
        job = connection.recv()
        if job is None:
            return
        edits, seconds = job
        actor = Actor(load(["mdp/game.yml"], edits), index)
        actor.sample()                                   # connections made, episodes running
        started_episodes = sum(mdp.counters()["episodes"] for mdp in actor.sampler.mdps)
        started, steps = time.monotonic(), 0
        while time.monotonic() - started < seconds:
            steps += actor.sample().get("steps", 0)        # a progress report (a slow game) carries none
        elapsed = time.monotonic() - started
        resets = sum(mdp.counters()["episodes"] for mdp in actor.sampler.mdps) - started_episodes
        actor.close()
        connection.send((steps, resets, elapsed))


class Actors:
    """Two actor processes kept between measurements (the imports are paid once)."""

    def __init__(self, count: int = 2) -> None:
        context = multiprocessing.get_context("spawn")
        self.pipes, self.processes = [], []
        for index in range(count):
            ours, theirs = context.Pipe()
            process = context.Process(target=actor_worker, args=(theirs, index), daemon=True)
            process.start()
            self.pipes.append(ours)
            self.processes.append(process)

    def measure(self, edits: list[str], seconds: float) -> float:
        """Round trips per second of all actors together."""
        for pipe in self.pipes:
            pipe.send((edits, seconds))
        results = [pipe.recv() for pipe in self.pipes]
        return sum((steps + resets) / elapsed for steps, resets, elapsed in results)

    def close(self) -> None:
        for pipe in self.pipes:
            pipe.send(None)
        for process in self.processes:
            process.join(30)


def vector_env_rate(settings: Any, processes: int, seconds: float) -> float:
    """Round trips per second of gymnasium's AsyncVectorEnv over ``processes`` GameEnv clients."""
    import gymnasium

    from lamarckian.games.env import GameEnv

    envs = gymnasium.vector.AsyncVectorEnv([lambda: GameEnv(settings)] * processes)
    envs.reset(seed=0)
    round_trips, started = 0, time.monotonic()
    while time.monotonic() - started < seconds:
        _, _, terminated, truncated, _ = envs.step(envs.action_space.sample())
        round_trips += processes + int(np.sum(terminated | truncated))      # an autoreset is one more request
    elapsed = time.monotonic() - started
    envs.close()
    return round_trips / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--latencies", type=float, nargs="+", default=[1, 10, 50], help="milliseconds")
    parser.add_argument("--episodes", type=int, nargs="+", default=[1, 16, 64, 256, 1024])
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "games.png")
    arguments = parser.parse_args()

    from tests.games.helpers import ServerProcess

    folder = Path(tempfile.mkdtemp(prefix="bench-games-"))
    actors = Actors()
    rows = []
    try:
        unbounded = ServerProcess(folder, ["--env", "CartPole-v1"])
        cpu = actors.measure([f"mdp.game.address={unbounded.address}", f"mdp.game.secret={unbounded.secret}",
                              "sample.envs=1024"], arguments.seconds)
        unbounded.stop()
        print(f"CPU bound (2 actors x 1024 episodes, no latency): {cpu:,.0f} round trips/s", flush=True)
        for latency in arguments.latencies:
            server = ServerProcess(folder, ["--env", "CartPole-v1", "--latency", f"{latency}ms"])
            base = [f"mdp.game.address={server.address}", f"mdp.game.secret={server.secret}"]
            for episodes in arguments.episodes:
                rate = actors.measure([*base, f"sample.envs={episodes}"], arguments.seconds)
                ideal = 2 * episodes / (latency / 1000)
                rows.append(("actors", latency, episodes, rate, ideal, rate / min(ideal, cpu)))
                print(f"latency {latency:g} ms, 2 actors x {episodes} episodes: {rate:,.0f} round trips/s, ideal "
                      f"{ideal:,.0f}, ratio {rate / min(ideal, cpu):.2f}", flush=True)
            for processes in (2, 16):
                rate = vector_env_rate(server.settings(), processes, arguments.seconds)
                ideal = processes / (latency / 1000)
                rows.append(("AsyncVectorEnv", latency, processes, rate, ideal, rate / min(ideal, cpu)))
                print(f"latency {latency:g} ms, AsyncVectorEnv x {processes} processes: {rate:,.0f} round trips/s, "
                      f"ideal {ideal:,.0f}, ratio {rate / min(ideal, cpu):.2f}", flush=True)
            counters = server.stop()
            print(f"  server: mean lateness of delayed replies {counters.get('late_ms', 0):+.3f} ms", flush=True)
    finally:
        actors.close()
    plot(rows, cpu, arguments.plot)
    best = {latency: max(r[3] for r in rows if r[0] == "actors" and r[1] == latency) for latency in arguments.latencies}
    vector = {latency: max(r[3] for r in rows if r[0] != "actors" and r[1] == latency)
              for latency in arguments.latencies}
    for latency in arguments.latencies:
        print(f"latency {latency:g} ms: best actors / best AsyncVectorEnv = {best[latency] / vector[latency]:.1f}x")
    print(f"median ratio to min(ideal, CPU bound) over the actor rows: "
          f"{statistics.median(r[5] for r in rows if r[0] == 'actors'):.2f}")


def plot(rows: list[tuple], cpu: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7, 4.5))
    for color, latency in zip(("tab:blue", "tab:orange", "tab:green"), sorted({r[1] for r in rows})):
        ours = sorted((r[2], r[3], r[4]) for r in rows if r[0] == "actors" and r[1] == latency)
        axis.plot([o[0] for o in ours], [o[1] for o in ours], "o-", color=color, label=f"2 actors, {latency:g} ms")
        axis.plot([o[0] for o in ours], [min(o[2], cpu) for o in ours], ":", color=color)
        vector = sorted((r[2] / 2, r[3]) for r in rows if r[0] != "actors" and r[1] == latency)
        axis.plot([v[0] for v in vector], [v[1] for v in vector], "s--", color=color, alpha=0.6,
                  label=f"AsyncVectorEnv, {latency:g} ms")
    axis.axhline(cpu, color="grey", linewidth=0.8)
    axis.set(xscale="log", yscale="log", xlabel="concurrent episodes per actor (AsyncVectorEnv: processes / 2)",
             ylabel="round trips / s", title="CartPole behind a game server (dotted: ideal, grey: CPU bound)")
    axis.legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    print(f"plot: {path}")


if __name__ == "__main__":
    main()
