"""Central value (issue 16 §5): MPE simple_spread (``-c mdp/pettingzoo/spread.yml``: 3 agents, one shared policy playing
every seat, cooperative reward) with the critic on each agent's own observation against the critic on the game's
global state (``model.central_value=true``), same run, same seeds: training seconds and agent steps until seat 0's
deterministic evaluation return reaches ``--threshold``.

    python bench/central_value.py [--seeds 0 1 2] [--threshold -25] [--limit 600] [--plot docs/central_value.png]
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

FILES = ["mdp/pettingzoo/spread.yml"]
VARIANTS = {"own": ("model.central_value=false",), "central": ("model.central_value=true",)}
CHANGES = ("evaluator.interval=5", "evaluator.episodes=30")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threshold", type=float, default=-25.0)
    parser.add_argument("--limit", type=float, default=600.0, help="training seconds before a run gives up")
    parser.add_argument("--plot", type=Path, default=None, help="write the learning curves here (png)")
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} {platform.processor() or platform.machine()}, "
          f"seeds {args.seeds}, threshold {args.threshold}")
    print(f"{'critic':<8} {'seed':>4} {'train s':>8} {'steps':>10} {'best eval':>9}")
    results: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    curves: dict[tuple[str, int], list] = {}
    for seed in args.seeds:
        for name, changes in VARIANTS.items():
            with tempfile.TemporaryDirectory() as folder:
                result = run(FILES, args.threshold, seed, args.limit, Path(folder) / "run", (*CHANGES, *changes))
            result["best"] = max(f for _, f in result["curve"])
            results[name].append(result)
            curves[(name, seed)] = result["curve"]
            print(f"{name:<8} {seed:>4} {result['training']:>8.1f} {result['steps']:>10.0f} {result['best']:>9.2f}",
                  flush=True)
    medians = {name: statistics.median(math.inf if math.isnan(r["training"]) else r["training"] for r in runs)
               for name, runs in results.items()}
    print(f"median training seconds to {args.threshold:g}: own critic {medians['own']:.1f}, central critic "
          f"{medians['central']:.1f} -> central/own {medians['central'] / medians['own']:.2f} (below 1: faster)")
    if args.plot:
        plot_panels([("MPE simple_spread, 3 agents", args.threshold,
                      [(f"{name} critic, seed {seed}", "C0" if name == "central" else "C1", curve)
                       for (name, seed), curve in curves.items()])], args.plot, "agent steps",
                    "evaluation return (seat 0)")
        print(f"learning curves: {args.plot}")


if __name__ == "__main__":
    main()
