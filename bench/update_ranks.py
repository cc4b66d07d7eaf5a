"""What the actor-fleet learner's data-parallel update (``train.gpus: N``) sends each other rank, and how long an
update takes: N ranks beside the same update on one rank, the same batch, the same run.

For each N of ``--ranks``: the learner (rank 0) and N−1 Ray actors of one process each (CPU processes here, one
GPU each on a machine with GPUs) take ``--updates`` PPO updates of one synthetic batch of ``--lanes`` lanes ×
``--steps`` steps (observations of the task's shape, the network's own actions). Per update: the bytes rank 0's
link sent the other ranks, per rank (the connections run over ZeroMQ, ``rpc.local=off``, as between hosts: on one
node large frames go once into shared memory), beside the batch's own bytes; and the seconds of the update beside
the one-rank update of the whole batch. Medians over the updates after ``--warmup``.

    python bench/update_ranks.py                                  # Ant-v5, 2 and 4 ranks, 32 lanes x 256 steps
    python bench/update_ranks.py --ranks 2 --task mdp.gym.id=CartPole-v1
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from lamarckian.config import load  # noqa: E402
from lamarckian.config.sections import TrainSettings  # noqa: E402
from lamarckian.mdp import create_mdp  # noqa: E402
from lamarckian.rl.algorithms.ppo import PPO  # noqa: E402
from lamarckian.rl.algorithms.ppo_settings import PPOSettings  # noqa: E402
from lamarckian.rl.fleet.update_ranks import UpdateGroup, learner_network  # noqa: E402
from lamarckian.rl.segment import ARRAYS, Segment  # noqa: E402
from lamarckian.rpc import RpcSettings  # noqa: E402


def batch(model: torch.nn.Module, observation: tuple[int, ...], lanes: int, steps: int) -> Segment:
    """``steps × lanes`` random observations with the network's own actions, values and log-probabilities."""
    random = np.random.default_rng(0)
    observations = random.normal(size=(steps, lanes, *observation)).astype(np.float32)
    with torch.no_grad():
        actions, log_probs, values = model.act(torch.from_numpy(observations.reshape(-1, *observation)),
                                               generator=torch.Generator().manual_seed(0))
    shape = (steps, lanes)
    return Segment(observations=observations, actions=actions.numpy().reshape(*shape, *actions.shape[1:]),
                   log_probs=log_probs.numpy().reshape(shape),
                   values=np.concatenate([values.numpy().reshape(shape), np.zeros((1, lanes), np.float32)]),
                   rewards=random.normal(size=shape).astype(np.float32), dones=random.random(shape) < 0.01,
                   truncated=np.zeros(shape, bool), final_values=np.zeros(shape, np.float32), version=0,
                   steps=lanes * steps)


def timed(update, count: int) -> list[float]:
    """Seconds of each of ``count`` calls of ``update()``."""
    seconds = []
    for _ in range(count):
        started = time.perf_counter()
        update()
        seconds.append(time.perf_counter() - started)
    return seconds


def measure(ranks: int, args: argparse.Namespace) -> dict[str, float]:
    """One row: bytes per other rank and seconds per update at ``ranks`` ranks, beside one rank."""
    import ray

    changes = [args.task, f"train.gpus={ranks}", "train.device=cpu", "train.threads=1", "rpc.local=\"off\"",
               "evaluator.episodes=0"]
    config = load(["mdp/gym.yml"], changes)
    model, _, _ = learner_network(config)
    seed = int(config["seed"])
    probe = create_mdp(config["mdp"], seed=seed)
    observation = probe.describe()[0].observation.shape
    probe.close()
    data = batch(model, tuple(observation), args.lanes, args.steps)
    alone = PPO(learner_network(config)[0], PPOSettings.from_config(config), seed=seed)
    one = timed(lambda: alone.update([data], 0, data.steps), args.warmup + args.updates)[args.warmup:]
    ray.init(address="local", num_cpus=ranks, include_dashboard=False, log_to_driver=False)
    try:
        group = UpdateGroup(TrainSettings.from_config(config), RpcSettings.from_config(config),
                            PPO(model, PPOSettings.from_config(config), seed=seed), seed, threads=1, local=False)
        try:
            link = group.others.link
            sent: list[float] = []

            def update() -> None:
                before = link.bytes_sent
                group.update([data], 0, data.steps)
                sent.append((link.bytes_sent - before) / (ranks - 1))

            many = timed(update, args.warmup + args.updates)[args.warmup:]
        finally:
            group.close()
    finally:
        ray.shutdown()
    whole = sum(getattr(data, name).nbytes for name in ARRAYS)
    return {"ranks": ranks, "sent": statistics.median(sent[args.warmup:]), "batch": whole,
            "seconds": statistics.median(many), "one": statistics.median(one)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--task", default="mdp.gym.id=Ant-v5", help="a -m edit naming the task")
    parser.add_argument("--lanes", type=int, default=32)
    parser.add_argument("--steps", type=int, default=256)
    parser.add_argument("--updates", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [measure(ranks, args) for ranks in args.ranks]
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {platform.node()} torch {torch.__version__}, {args.task}, "
          f"{args.lanes} lanes x {args.steps} steps, median of {args.updates} updates")
    print("| ranks | sent per other rank (MB) | batch (MB) | sent / batch | s per update | 1 rank (s) | ratio |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['ranks']} | {row['sent'] / 1e6:.2f} | {row['batch'] / 1e6:.2f} | "
              f"{row['sent'] / row['batch']:.2f} | {row['seconds']:.2f} | {row['one']:.2f} | "
              f"{row['seconds'] / row['one']:.2f} |")


if __name__ == "__main__":
    main()
