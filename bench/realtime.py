"""Real-time period jitter: how close to ``mdp.realtime.period`` the steps of the real-time wrapper land.

    python bench/realtime.py [--seconds 20] [--repeats 3]

Each repeat measures, for ``--seconds`` each, one after the other:
  * reference: a bare loop stepping Pendulum-v1 and sleeping (``time.sleep``) to the next 50 ms deadline;
  * wrapper, 1 env: the real-time wrapper (asyncio), a policy that answers at once;
  * actor, 4 envs: the sampling Actor of a remote worker (4 real-time environments, SAC's torch policy, one batched
    forward per round, segments cut as the worker cuts them).
Jitter is achieved period − 50 ms; the table gives the median and 99th percentile of |jitter| (ms) per setting,
medians over repeats, and each beside the reference's.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import gymnasium
import numpy as np

from lamarckian.config import load
from lamarckian.mdp import create_mdp
from lamarckian.rl.fleet.actor import Actor

PERIOD = 0.05


def reference(seconds: float) -> np.ndarray:
    """Achieved periods of a sleep loop stepping the bare environment."""
    env = gymnasium.make("Pendulum-v1")
    env.reset(seed=0)
    captured = time.monotonic()
    deadline, periods = captured + PERIOD, []
    while len(periods) < seconds / PERIOD:
        time.sleep(max(0.0, deadline - time.monotonic()))
        if env.step(np.zeros(1, np.float32))[3]:
            env.reset()
        now = time.monotonic()
        periods.append(now - captured)
        captured, deadline = now, deadline + PERIOD
    return np.asarray(periods)


def wrapper(config: dict, seconds: float) -> np.ndarray:
    """Achieved periods of one real-time environment whose policy answers at once."""
    mdp = create_mdp(config["mdp"], seed=0)

    async def run() -> None:
        while len(mdp.periods) < seconds / PERIOD:
            controller = mdp.reset(0).controllers[0]
            while await controller.ready():
                await controller(np.zeros(1, np.float32))

    asyncio.run(run())
    return np.asarray(mdp.periods)


def actor(config: dict, seconds: float) -> np.ndarray:
    """Achieved periods of the 4 environments of a worker's sampling Actor (SAC policy)."""
    sampler = Actor(config, 0)          # as in a worker: one torch thread
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        sampler.sample()
    periods = np.concatenate([np.asarray(mdp.periods) for mdp in sampler.mdps])
    sampler.close()
    return periods


def jitter(periods: np.ndarray) -> tuple[float, float]:
    """(median, 99th percentile) of |achieved − nominal| in ms."""
    error = np.abs(periods - PERIOD) * 1000
    return float(np.median(error)), float(np.percentile(error, 99))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=3)
    arguments = parser.parse_args()
    config = load(["mdp/realtime/pendulum.yml", "rl/sac.yml"], ["sample.envs=4"])
    runs: dict[str, list[tuple[float, float]]] = {"reference (sleep loop)": [], "wrapper, 1 env": [],
                                                  "actor, 4 envs (SAC)": []}
    for _ in range(arguments.repeats):
        runs["reference (sleep loop)"].append(jitter(reference(arguments.seconds)))
        runs["wrapper, 1 env"].append(jitter(wrapper(config, arguments.seconds)))
        runs["actor, 4 envs (SAC)"].append(jitter(actor(config, arguments.seconds)))
    base = [statistics.median(values) for values in zip(*runs["reference (sleep loop)"])]
    print(f"| setting | median |jitter| ms | p99 |jitter| ms | p99 vs reference |  (period {PERIOD * 1000:.0f} ms, "
          f"{arguments.seconds:.0f} s × {arguments.repeats} repeats, medians)")
    print("|---|---|---|---|")
    for name, values in runs.items():
        median, p99 = (statistics.median(column) for column in zip(*values))
        print(f"| {name} | {median:.3f} | {p99:.3f} | {p99 / max(base[1], 1e-9):.1f}x |")


if __name__ == "__main__":
    main()
