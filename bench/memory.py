"""Memory (issue 16 §3): CartPole-v1 with its velocities hidden (``mdp/gym/cartpole_pomdp.yml``, the agent sees the
cart position and the pole angle only). PPO with an LSTM (``rl/lstm.yml``) against the same PPO with the MLP, same
run, same seeds: the LSTM's training seconds and env steps to an evaluation of 475; the MLP trains ``--factor`` times
as long as the LSTM did on that seed (at least a minute; ``--limit`` where the LSTM did not get there) and its best
evaluation is printed.

    python bench/memory.py [--seeds 0 1 2] [--limit 600] [--factor 5] [--plot docs/memory.png]
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import tempfile
import time
from pathlib import Path

from learning import plot_panels, run

TASK, THRESHOLD = "mdp/gym/cartpole_pomdp.yml", 475.0
CHANGES = ("evaluator.interval=2", "evaluator.episodes=10")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--limit", type=float, default=600.0, help="training seconds before the LSTM gives up")
    parser.add_argument("--factor", type=float, default=5.0, help="the MLP's budget over the LSTM's time")
    parser.add_argument("--plot", type=Path, default=None, help="write the learning curves here (png)")
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} {platform.processor() or platform.machine()}, "
          f"seeds {args.seeds}, {TASK}")
    print(f"{'policy':<6} {'seed':>4} {'train s':>8} {'env steps':>10} {'best eval':>9} {'last eval':>9}")
    curves: dict[tuple[str, int], list] = {}
    lstm, mlp = [], []
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as folder:
            memory = run(["mdp/gym.yml", TASK, "rl/lstm.yml"], THRESHOLD, seed, args.limit, Path(folder) / "lstm",
                         CHANGES)
            budget = args.limit if math.isnan(memory["training"]) else max(60.0, args.factor * memory["training"])
            plain = run(["mdp/gym.yml", TASK], THRESHOLD, seed, budget, Path(folder) / "mlp", CHANGES)
        for name, result, results in (("lstm", memory, lstm), ("mlp", plain, mlp)):
            result["best"] = max(f for _, f in result["curve"])
            results.append(result)
            curves[(name, seed)] = result["curve"]
            print(f"{name:<6} {seed:>4} {result['training']:>8.1f} {result['steps']:>10.0f} {result['best']:>9.1f} "
                  f"{result['curve'][-1][1]:>9.1f}", flush=True)
    solved = sum(not math.isnan(r["training"]) for r in lstm)
    unsolved = float("inf")                              # a seed that never got there counts as the slowest
    solved_training = (unsolved if math.isnan(r['training']) else r['training'] for r in lstm)
    print(f"LSTM: median {statistics.median(solved_training):.1f}"
          f" s training, {statistics.median(unsolved if math.isnan(r['steps']) else r['steps'] for r in lstm):.0f} env "
          f"steps to {THRESHOLD:g} (solved {solved}/{len(lstm)}); "
          f"MLP with {args.factor:g}x the LSTM's time: best evaluation median "
          f"{statistics.median(r['best'] for r in mlp):.1f}, "
          f"max {max(r['best'] for r in mlp):.1f} (target: below 200)")
    if args.plot:
        plot_panels([("CartPole-v1, velocities hidden", THRESHOLD,
                      [(f"{name} seed {seed}", "C0" if name == "lstm" else "C1", curve)
                       for (name, seed), curve in curves.items()])], args.plot)
        print(f"learning curves: {args.plot}")


if __name__ == "__main__":
    main()
