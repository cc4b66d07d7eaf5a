"""IMPALA beside PPO on the built-in Pong, the same actors (issue 16 §1): env steps/s over the run, training seconds to
an evaluation win rate of ``--target`` against the rule opponent, and IMPALA's policy lag (weight versions behind,
mean and maximum per update) from its TensorBoard scalars.

    python bench/impala.py [--limit 900] [--target 0.9] [--seeds 0 1 2]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from lamarckian.record import read_rows  # noqa: E402

LEARNERS = {"ppo": "rl/ppo.yml", "impala": "rl/impala.yml"}


def lag(run: Path) -> list[tuple[float, float]]:
    """(mean, max) weight versions behind per update, from the run's TensorBoard scalars."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    means = [event.value for event in events.Scalars("staleness")]
    maxima = [event.value for event in events.Scalars("staleness_max")]
    return list(zip(means, maxima))


def train(learner: str, seed: int, limit: float, target: float, root: Path) -> dict:
    completed = subprocess.run(
        [sys.executable, str(REPOSITORY / "train.py"), "-c", "mdp/pong.yml", LEARNERS[learner], "-D", "-m",
         f"root={root}", f"seed={seed}", "evaluator.progress=false", "evaluator.interval=5",
         f"evaluator.terminate=self.win >= {target} or self.time >= {limit}"],
        capture_output=True, text=True, cwd=REPOSITORY)
    if completed.returncode != 0:
        raise RuntimeError(f"{learner} failed:\n{completed.stderr[-2000:]}")
    rows = read_rows(root / "evaluations.csv")
    reached = next((row for row in rows if row["win"] >= target), None)
    final = rows[-1]
    return {"seconds": reached["time"] - reached["evaluating"] if reached else float("nan"),
            "fps": final["cost"] / max(1e-9, final["time"] - final["evaluating"]), "win": final["win"],
            "lag": lag(root) if learner == "impala" else []}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=900.0, help="training seconds at most per run")
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} {platform.processor() or platform.machine()}; Pong, "
          f"win rate target {args.target} against the rule opponent, at most {args.limit:.0f} s per run")
    results: dict[str, list[dict]] = {name: [] for name in LEARNERS}
    for seed in args.seeds:
        for name in LEARNERS:
            with tempfile.TemporaryDirectory() as folder:
                result = train(name, seed, args.limit, args.target, Path(folder) / "run")
            results[name].append(result)
            print(f"{name:<7} seed {seed}: {result['fps']:8.0f} env steps/s, to {args.target:.0%}: "
                  f"{result['seconds']:6.1f} s, final win rate {result['win']:.2f}", flush=True)
    medians = {name: {key: statistics.median(r[key] if r[key] == r[key] else float("inf") for r in runs)
                      for key in ("fps", "seconds")} for name, runs in results.items()}
    lags = [pair for r in results["impala"] for pair in r["lag"]]
    print(f"IMPALA/PPO env steps/s {medians['impala']['fps'] / medians['ppo']['fps']:.2f} (target >= 1.5); time to "
          f"{args.target:.0%} {medians['impala']['seconds'] / medians['ppo']['seconds']:.2f} (target <= 1.0)")
    if lags:
        means, maxima = [m for m, _ in lags], [m for _, m in lags]
        print(f"IMPALA policy lag over {len(lags)} updates: mean {statistics.mean(means):.2f} versions (median "
              f"{statistics.median(means):.2f}), max per update median {statistics.median(maxima):.0f}, overall max "
              f"{max(maxima):.0f}")


if __name__ == "__main__":
    main()
