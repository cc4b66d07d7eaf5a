"""MiniGrid through the generic config with nothing but the id: how many seeds learn, and in how many env steps.

Each seed is one ``train.py -c mdp/gym.yml -m mdp.gym.id=minigrid:<Id>`` run (the defaults a single-agent task
gets: untuned/gym.yml; the 7 × 7 grid of object codes flattened into the MLP, the mission's words hashed), with a
deterministic evaluation of 20 episodes every ``--eval-steps`` env steps, for ``--steps`` env steps. A seed learns
when an evaluation reaches ``--threshold`` (DoorKey-5x5's best return is about 0.97: 1 − 0.9 × steps / 250).
Prints per seed the env steps of the first evaluation at the threshold and the final weights' return, then the
count, the median (min–max) and the interquartile mean with its bootstrap 95% interval (bench/tail.py's).

    python bench/minigrid_learning.py [--env MiniGrid-DoorKey-5x5-v0] [--seeds 100 101 102 103 104] [--steps 300000]
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))
sys.path.insert(0, str(REPOSITORY / "bench"))

from tail import summary  # noqa: E402

from lamarckian.record import read_rows  # noqa: E402


def run(env: str, seed: int, steps: int, eval_steps: int, root: Path) -> list[dict]:
    completed = subprocess.run([sys.executable, str(REPOSITORY / "train.py"), "-c", "mdp/gym.yml", "-m",
                                f"mdp.gym.id=minigrid:{env}", f"seed={seed}", f"root={root}",
                                f"evaluator.interval_steps={eval_steps}", "evaluator.interval=1e9",
                                "evaluator.episodes=20", "evaluator.progress=false", "evaluator.tensorboard=false",
                                f"evaluator.terminate=self.cost >= {steps}"], capture_output=True, text=True,
                               cwd=REPOSITORY)
    if completed.returncode != 0:
        raise RuntimeError(f"train.py failed (seed {seed}):\n{completed.stderr[-3000:]}")
    return read_rows(root / "evaluations.csv")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="MiniGrid-DoorKey-5x5-v0")
    parser.add_argument("--seeds", type=int, nargs="+", default=[100, 101, 102, 103, 104])
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--eval-steps", type=int, default=10_000)
    parser.add_argument("--threshold", type=float, default=0.9)
    arguments = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}, {arguments.env}, seeds {arguments.seeds}, "
          f"{arguments.steps} env steps, threshold {arguments.threshold}", flush=True)
    reached, finals = [], []
    for seed in arguments.seeds:
        with tempfile.TemporaryDirectory() as folder:
            rows = run(arguments.env, seed, arguments.steps, arguments.eval_steps, Path(folder))
        first = next((row["cost"] for row in rows if row["fitness"] >= arguments.threshold), math.inf)
        reached.append(first)
        finals.append(rows[-1]["fitness"])
        print(f"seed {seed}: {first:,.0f} env steps to {arguments.threshold}; final return {rows[-1]['fitness']:.3f} "
              f"at {rows[-1]['cost']:,.0f}", flush=True)
    figures = summary([r if math.isfinite(r) else math.nan for r in reached], arguments.steps)
    print(f"{figures['solved']} of {figures['seeds']} seeds reach {arguments.threshold} within {arguments.steps:,} env "
          f"steps; of those, median {figures['median']:,.0f} (min {figures['min']:,.0f}, max {figures['max']:,.0f}); "
          f"IQM (unsolved at the budget) {figures['iqm']:,.0f} [{figures['low']:,.0f}–{figures['high']:,.0f}]")
    print(f"final return: median {statistics.median(finals):.3f} (min {min(finals):.3f}, max {max(finals):.3f})")


if __name__ == "__main__":
    sys.exit(main())
