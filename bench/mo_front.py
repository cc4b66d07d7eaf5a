"""NSGA-II over the entries of a vector reward on MO-Gymnasium's deep-sea-treasure: how many of the 10 points of
its known Pareto front (treasure, −time) the final front holds, beside the same population with the weights fixed.

For each seed, two evolve.py runs with the same population, learners and budget in env steps:

- searched: each individual trains on ``mdp.reward.weights = [w, 1]`` with ``w`` searched log-uniformly in
  [0.05, 5] (NSGA-II's SBX and mutation vary it; children start from a parent's weights), the objectives
  ``reward_0`` (treasure) and ``reward_1`` (time penalty);
- fixed: the same with ``w = 1`` for every individual (a single preference, what a scalar-reward learner sees).

A point counts when a member of the final front (its deterministic evaluation) reaches it within 0.05. Prints a
line per run and the median (min–max) per side; ``--plot`` draws every seed's front over the known one.

    python bench/mo_front.py [--seeds 100 101 102 103 104] [--steps 1500000] [--plot docs/mo_front.png]
"""

from __future__ import annotations

import argparse
import csv
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
#: deep-sea-treasure-v0's Pareto front at discount 1 (``env.unwrapped.pareto_front(1.0)``): treasure, −steps
KNOWN = [(0.7, -1.0), (8.2, -3.0), (11.5, -5.0), (14.0, -7.0), (15.1, -8.0), (16.1, -9.0), (19.6, -13.0),
         (20.3, -14.0), (22.4, -17.0), (23.7, -19.0)]
COMMON = ["-c", "mdp/gym.yml", "ec/ea/nsga_ii.yml", "-m", "mdp.gym.id=mo_gymnasium:deep-sea-treasure-v0",
          "ec.objectives=[reward_0,reward_1]", "ec.learners=2", "sample.actors=1", "evaluator.progress=false",
          "evaluator.tensorboard=false"]
SIDES = {"searched": ["mdp.reward.weights=[[0.05,5],1]", "ec.log=[mdp.reward.weights.0]"],
         "fixed": ["mdp.reward.weights=[1,1]"]}


def evolve(seed: int, steps: int, side: str, root: Path) -> list[tuple[float, float]]:
    """The final front's (reward_0, reward_1) points."""
    completed = subprocess.run([sys.executable, str(REPOSITORY / "evolve.py"), *COMMON, *SIDES[side], f"seed={seed}",
                                f"root={root}", f"ec.stop=self.cost >= {steps}"], capture_output=True, text=True,
                               cwd=REPOSITORY)
    if completed.returncode != 0:
        raise RuntimeError(f"evolve.py failed ({side}, seed {seed}):\n{completed.stderr[-3000:]}")
    with open(root / "front.csv") as file:
        return [(float(row["reward_0"]), float(row["reward_1"])) for row in csv.DictReader(file)]


def covered(front: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The known points some member of ``front`` reaches (within 0.05 in both entries)."""
    return [point for point in KNOWN
            if any(abs(point[0] - a) <= 0.05 and abs(point[1] - b) <= 0.05 for a, b in front)]


def plot(fronts: dict[str, dict[int, list[tuple[float, float]]]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(fronts), figsize=(5.5 * len(fronts), 4.5), sharey=True, squeeze=False)
    for axis, (side, per_seed) in zip(axes[0], fronts.items()):
        axis.plot(*zip(*KNOWN), "k--", marker="o", markerfacecolor="none", label="known front (10)")
        for seed, front in per_seed.items():
            axis.scatter(*zip(*front), s=40, alpha=0.7, label=f"seed {seed}: {len(covered(front))} of 10")
        axis.set_title(f"{side}: {SIDES[side][0].split('=', 1)[1]}")
        axis.set_xlabel("reward_0 (treasure)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
    axes[0][0].set_ylabel("reward_1 (time penalty)")
    figure.suptitle("deep-sea-treasure-v0: NSGA-II's final front (population 8)")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[100, 101, 102, 103, 104])
    parser.add_argument("--steps", type=int, default=1_500_000, help="env steps per run (ec.stop)")
    parser.add_argument("--sides", nargs="+", default=list(SIDES), choices=list(SIDES))
    parser.add_argument("--plot", type=Path)
    arguments = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}, {platform.processor() or platform.machine()}, "
          f"seeds {arguments.seeds}, {arguments.steps} env steps per run", flush=True)
    fronts: dict[str, dict[int, list[tuple[float, float]]]] = {side: {} for side in arguments.sides}
    for seed in arguments.seeds:
        for side in arguments.sides:          # alternating: both sides see the same machine load
            with tempfile.TemporaryDirectory() as folder:
                started = time.monotonic()
                front = evolve(seed, arguments.steps, side, Path(folder))
            fronts[side][seed] = front
            print(f"{side:8s} seed {seed}: {len(covered(front))} of 10 known points "
                  f"{sorted(p[0] for p in covered(front))} ({time.monotonic() - started:.0f} s)", flush=True)
    for side, per_seed in fronts.items():
        counts = [len(covered(front)) for front in per_seed.values()]
        print(f"{side}: median {statistics.median(counts)} of 10 (min {min(counts)}, max {max(counts)}) over "
              f"{len(counts)} seeds")
    if arguments.plot:
        plot(fronts, arguments.plot)
        print(f"plot: {arguments.plot}")


if __name__ == "__main__":
    sys.exit(main())
