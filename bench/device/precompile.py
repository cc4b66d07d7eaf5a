"""Compile the vectorized task's jitted pieces (physics step, masked reset) for the batch sizes a device run will
use, ahead of the steps that need them, into JAX's persistent compilation cache (``JAX_COMPILATION_CACHE_DIR``):
a later process that builds the same task finds them there instead of compiling for 10-30 s per shape.

    python bench/device/precompile.py --envs 4096 64 256 2048 1 --json /tmp/compile.json -m mdp.vec.device=cuda

For each size, in the order given: the task of the config (``-c``, default Ant Sumo with rl/ppo_gpu.yml) with that
many environments, one reset and one step of random actions, waited for. Prints and writes the seconds each size
took (on the ``mujoco`` backend nothing is compiled: the figure is the start-up of the stepping processes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from lamarckian.config import load  # noqa: E402
from lamarckian.mdp.vec import create_vec_task, placement  # noqa: E402


def compile_size(vec: dict, envs: int) -> float:
    """Seconds to build the task of ``envs`` environments, reset it and take one step (the first call of each
    jitted piece compiles, or loads it from the persistent cache)."""
    started = time.perf_counter()
    task = create_vec_task({**vec, "num_envs": envs})
    try:
        task.reset()
        actions = torch.rand(task.num_agents * envs, task.num_actions, device=task.device) * 2 - 1
        obs, *_ = task.step(actions)
        float(obs[0, 0])                  # waits for the device
    finally:
        task.close()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", required=True, help="batch sizes, in the order needed")
    parser.add_argument("-c", "--config", nargs="+", default=["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"])
    parser.add_argument("-m", "--modify", nargs="+", action="extend", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", type=Path, help="also write {envs: seconds} here (rewritten after each size)")
    args = parser.parse_args()
    vec = load(args.config, args.modify)["mdp"]["vec"]
    backend, device, _ = placement(vec)
    print(f"precompiling {backend} on {device}: {' '.join(map(str, args.envs))} envs", flush=True)
    seconds: dict[str, float] = {}
    for envs in args.envs:
        seconds[str(envs)] = round(compile_size(vec, envs), 2)
        print(f"compiled {envs} envs ({backend} on {device}) in {seconds[str(envs)]:.1f} s", flush=True)
        if args.json:
            args.json.write_text(json.dumps({"backend": backend, "device": device, "seconds": seconds}, indent=1))


if __name__ == "__main__":
    main()
