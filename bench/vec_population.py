"""A vectorized population's training throughput beside one learner's, same task, same total environments, same run.

P members (each ``envs / P`` environments, one forward and one batched PPO update for all: lamarckian/rl/
vec_population.py) against one OnDeviceLearner on all ``envs`` environments. Prints agent-steps/s of both and the ratio
(issue 14: >= 0.7 on a GPU, >= 0.5 on the CPU).

    python bench/vec_population.py                         # CPU: 64 envs, 8 members
    python bench/vec_population.py --envs 16384 --json $OUT/population.json     # on a GPU (mjx)
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lamarckian.config import load  # noqa: E402
from lamarckian.mdp.vec import placement  # noqa: E402
from lamarckian.rl.ondevice.league import LeagueSettings
from lamarckian.rl.ondevice.learner import OnDeviceLearner  # noqa: E402
from lamarckian.rl.ondevice.population import OnDevicePopulationLearner  # noqa: E402


def rate(trainer, iterations: int, warmup: int) -> float:
    """Median agent-steps/s over ``iterations`` steps after ``warmup`` (compiles, caches; their time printed)."""
    started = time.perf_counter()
    for _ in range(warmup):
        trainer.step()
    print(f"  {type(trainer).__name__}: {warmup} warm-up step(s) (compiles or cache loads) in "
          f"{time.perf_counter() - started:.1f} s", flush=True)
    rates = []
    for _ in range(iterations):
        started = time.perf_counter()
        trainer.step()
        rates.append(trainer.horizon * trainer.task.num_envs * trainer.task.num_agents
                     / (time.perf_counter() - started))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, help="total environments (default: 16384 on a GPU, 64 on the CPU)")
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--horizon", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    backend, device, _ = placement({"backend": "auto", "device": "auto", "num_envs": 1})
    envs = args.envs or (16384 if device.startswith("cuda") else 64)
    changes = [f"mdp.vec.backend={backend}", f"mdp.vec.device={device}", f"mdp.vec.num_envs.cpu={envs}",
               f"mdp.vec.num_envs.cuda={envs}", f"mdp.vec.horizon={args.horizon}", "evaluator.episodes=0",
               "evaluator.progress=false"]
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], changes)
    card = torch.cuda.get_device_name() if device.startswith("cuda") else platform.processor() or "CPU"
    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} ({card}), {backend} on {device}, {envs} envs, "
          f"{args.members} members, horizon {args.horizon}, median of {args.iterations} iterations")
    single = OnDeviceLearner(config)
    single_rate = rate(single, args.iterations, args.warmup)
    single.close()
    population = OnDevicePopulationLearner(config, args.members, LeagueSettings.from_config(config))   # a league
    population_rate = rate(population, args.iterations, args.warmup)
    population.close()
    ratio = population_rate / single_rate
    print(f"one learner, {envs} envs: {single_rate:,.0f} agent-steps/s")
    print(f"population of {args.members} x {envs // args.members} envs: {population_rate:,.0f} agent-steps/s")
    print(f"ratio population / one learner: {ratio:.2f} (target >= 0.7 on a GPU, >= 0.5 on the CPU)")
    if args.json:
        args.json.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "card": card, "backend": backend,
                                         "envs": envs, "members": args.members, "single": single_rate,
                                         "population": population_rate, "ratio": ratio}, indent=1))


if __name__ == "__main__":
    main()
