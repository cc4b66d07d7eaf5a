"""Env steps/s of the Actor fleet on CartPole-v1 beside the raw gymnasium step rate × number of actors.

The fleet: ``--actors`` Ray actors, each running ``--envs`` environments with one batched policy forward per
round, streaming segments through Gather to this process (which counts and drops them). The reference:
a bare ``env.step(random action)`` loop in one process, measured in the same run, multiplied by the number of
actors (perfect scaling). Each figure is the median of ``--repeats`` blocks of ``--seconds``.

    python bench/sampling.py [--actors 2] [--envs 32] [--seconds 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import gymnasium
import ray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lamarckian import rpc  # noqa: E402
from lamarckian.config import load  # noqa: E402
from lamarckian.mdp import create_mdp  # noqa: E402
from lamarckian.model import to_blob  # noqa: E402
from lamarckian.rl.algorithms import build_model  # noqa: E402
from lamarckian.rl.fleet.actor import Actor  # noqa: E402


def raw_rate(seconds: float) -> float:
    """Steps/s of a bare gymnasium loop with random actions, one process."""
    env = gymnasium.make("CartPole-v1")
    env.reset(seed=0)
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in range(1000):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
        steps += 1000
    return steps / (time.perf_counter() - started)


def fleet_rate(gather: rpc.Gather, seconds: float) -> float:
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        steps += int(gather()["steps"])
    return steps / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--envs", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    config = load(["mdp/gym.yml"], [f"sample.envs={args.envs}", f"sample.actors={args.actors}"])
    ray.init(address="local", num_cpus=max(args.actors, os.cpu_count() or 1), include_dashboard=False,
             log_to_driver=False)
    probe = create_mdp(config["mdp"])
    blob = to_blob(build_model(probe, config))
    remote = ray.remote(num_cpus=1)(Actor)
    actors = [remote.remote(config, index, blob) for index in range(args.actors)]
    fleet, raw = [], []
    with rpc.Gather(rpc.All(actors), credits=2) as gather, gather.gathering("sample"):
        fleet_rate(gather, 1.0)  # warm-up
        for _ in range(args.repeats):
            fleet.append(fleet_rate(gather, args.seconds))
    for _ in range(args.repeats):  # the reference runs alone, like the fleet did
        raw.append(raw_rate(args.seconds))
    ray.shutdown()
    ours, reference = statistics.median(fleet), statistics.median(raw) * args.actors
    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()}, {os.cpu_count()} CPUs; CartPole-v1, {args.actors} actors "
          f"x {args.envs} envs, median of {args.repeats} x {args.seconds:.0f} s")
    print(f"fleet (batched policy + Gather): {ours:,.0f} env steps/s")
    print(f"raw gymnasium x {args.actors}:        {reference:,.0f} env steps/s "
          f"(one process {reference / args.actors:,.0f})")
    print(f"ratio fleet / reference:         {ours / reference:.2f}")


if __name__ == "__main__":
    main()
