"""Data-parallel training throughput: the vectorized learner on N ranks (torchrun) beside 1 rank, the same total
environments, the same run. Prints agent-steps/s of both and the scaling ratio (N ranks / 1 rank; N GPUs ideally
give N).

    python bench/multigpu.py                                   # CPU: 2 ranks × 1 thread against 1 × 1, 64 envs
    python bench/multigpu.py --ranks 4 --envs 16384            # a machine with 4 GPUs (mjx), one per rank
    python bench/multigpu.py --ranks 2 --envs 4096             # one GPU: 2 ranks share it (gloo)

Each side runs as its own torchrun (``python -m torch.distributed.run --standalone --nproc_per_node N``) of this
script in worker mode; rank 0 times ``--iterations`` steps after ``--warmup`` and writes the median.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from lamarckian.config import load  # noqa: E402
from lamarckian.mdp.vec import placement  # noqa: E402
from lamarckian.rl.distributed import Ranks  # noqa: E402
from lamarckian.rl.ondevice.learner import OnDeviceLearner  # noqa: E402


def worker(args: argparse.Namespace) -> None:
    """One rank: train ``warmup + iterations`` steps; rank 0 writes the median agent-steps/s of all ranks."""
    torch.set_num_threads(1)
    changes = [f"mdp.vec.num_envs.cpu={args.envs}", f"mdp.vec.num_envs.cuda={args.envs}", "mdp.vec.workers=1",
               f"mdp.vec.horizon={args.horizon}", "evaluator.episodes=0", "evaluator.progress=false"]
    learner = OnDeviceLearner(load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], changes), Ranks.from_environment())
    rates = []
    for iteration in range(args.warmup + args.iterations):
        started = time.perf_counter()
        learner.step()
        if iteration >= args.warmup:
            rates.append(args.horizon * args.envs * learner.task.num_agents / (time.perf_counter() - started))
    if learner.main:
        args.worker.write_text(json.dumps({"rate": statistics.median(rates), "device": str(learner.device)}))
    learner.close()


def measure(ranks: int, args: argparse.Namespace, folder: Path) -> dict:
    out = folder / f"ranks-{ranks}.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(ranks),
               __file__, "--worker", str(out), "--envs", str(args.envs), "--horizon", str(args.horizon),
               "--iterations", str(args.iterations), "--warmup", str(args.warmup)]
    subprocess.run(command, cwd=REPOSITORY, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"},
                   stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--envs", type=int, help="total environments (default: 4096 on a GPU, 64 on the CPU)")
    parser.add_argument("--horizon", type=int, default=32)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args)
        sys.stdout.flush()
        sys.stderr.flush()
        # The rank's result is written and it left the process group. The interpreter's teardown after that aborted
        # now and then (SIGABRT, "terminate called without an active exception", no Python frame left: a C++ thread
        # destroyed while joinable; 2 of 14 runs beside a 2-process CPU load), which torchrun reports as a failed
        # rank: the worker process skips it.
        os._exit(0)
    _, device, _ = placement({"backend": "auto", "device": "auto", "num_envs": 1})
    args.envs = args.envs or (4096 if device.startswith("cuda") else 64)
    card = (f"{torch.cuda.device_count()} × {torch.cuda.get_device_name()}" if device.startswith("cuda")
            else platform.processor() or "CPU")
    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} ({card}), {args.envs} envs in all, horizon "
          f"{args.horizon}, median of {args.iterations} iterations, 1 thread a rank")
    with tempfile.TemporaryDirectory() as folder:
        one = measure(1, args, Path(folder))
        many = measure(args.ranks, args, Path(folder))
    ratio = many["rate"] / one["rate"]
    print(f"1 rank ({one['device']}): {one['rate']:,.0f} agent-steps/s")
    print(f"{args.ranks} ranks ({many['device']} on rank 0): {many['rate']:,.0f} agent-steps/s")
    print(f"scaling {args.ranks} ranks / 1 rank: {ratio:.2f} (ideal {args.ranks})")
    if args.json:
        args.json.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "card": card, "envs": args.envs,
                                         "ranks": args.ranks, "one": one["rate"], "many": many["rate"],
                                         "ratio": ratio}, indent=1))


if __name__ == "__main__":
    main()
