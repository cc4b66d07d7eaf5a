"""Hitches against learning: how much one slow answer in N costs a run, beside the same run without hitches.

    python bench/stragglers.py [--tasks cartpole game] [--every 20000 2000 200] [--seconds 0.2 1.5 5]
                               [--seeds 100] [--limit 300] [--checkout DIR] [--plot docs/stragglers.png]
                               [--json FILE] [--merge FILE ...]

A grid of hitch rate (``--every``: one env step in N) × hitch length (``--seconds``), plus the control (no hitch),
run side by side in one sitting, per task:

- ``cartpole``: PPO on CartPole-v1 through the gymnasium wrapper of ``bench/hitching.py`` (every N-th step of each
  environment blocks for the hitch), to an evaluation return of 475;
- ``game``: PPO self-play on the built-in Pong served by the reference game server (``mdp.game.launch``, 2
  instances per actor, ``--spike-every N --spike SECONDS``: every N-th request of an instance answers late), to a 95 %
  win rate against the server's rule bot.

Per cell: training seconds to the threshold (the learner's clock; nan: not within ``--limit``), env steps then, and
updates per training second, each also as a ratio to the control. ``--checkout`` runs another checkout's train.py
(the code before a change) on the same grid. The plot: one panel per task and measure, the ratio to the control per
cell. ``--merge`` reads the ``--json`` files of earlier sittings (more seeds) and reports and plots them together.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from learning import run  # noqa: E402

SERVE = "python -m lamarckian.games serve --mdp pong --bind tcp://127.0.0.1:{port} --secret {secret}"
TASKS = {   # name: (config files, metric, threshold, -m edits, the edits that add a hitch (every, seconds))
    "cartpole": (["mdp/gym.yml", "mdp/gym/cartpole.yml"], "fitness", 475.0,
                 ["mdp.gym.id=bench.hitching:Hitching-v0", "evaluator.interval=2", "evaluator.episodes=10"],
                 lambda every, seconds: [f"mdp.gym.kwargs={{env: CartPole-v1, every: {every}, seconds: {seconds}}}"]),
    "game": (["mdp/game/pong.yml"], "win", 0.95, ["mdp.game.instances=2", "evaluator.interval=5"],
             lambda every, seconds: [f"mdp.game.launch={SERVE}" + (f" --spike-every {every} --spike {seconds}s"
                                                                   if every else "")]),
}


def cell(task: str, every: int, seconds: float, seed: int, limit: float, checkout: Path) -> dict[str, float]:
    """One run of ``task`` with one step in ``every`` hitching for ``seconds`` (``every`` 0: the control)."""
    files, metric, threshold, edits, hitch = TASKS[task]
    with tempfile.TemporaryDirectory(prefix="stragglers-") as folder:
        result = run(files, threshold, seed, limit, Path(folder) / "run", (*edits, *hitch(every, seconds)), metric,
                     checkout)
    return {key: value for key, value in result.items() if key != "curve"}


def ratio(value: float, control: float) -> float:
    """``value / control`` (nan where either is nan or the control is 0)."""
    if math.isnan(value) or math.isnan(control) or control == 0:
        return math.nan
    return value / control


def plot(results: dict, tasks: list[str], every: list[int], lengths: list[float], path: Path) -> None:
    """Heat maps of the ratio to the control: seconds to the threshold and updates per second, per task."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(len(tasks), 2, figsize=(10, 3.2 * len(tasks)), squeeze=False)
    for row, task in enumerate(tasks):
        control = results[task]["control"]
        for column, (measure, title) in enumerate((("seconds", "seconds to the threshold ÷ control"),
                                                   ("updates", "updates per second ÷ control"))):
            grid = [[ratio(results[task]["cells"][f"{n}x{s:g}"][measure], control[measure]) for n in every]
                    for s in lengths]
            axis = axes[row][column]
            image = axis.imshow(grid, cmap="RdYlGn_r" if measure == "seconds" else "RdYlGn", vmin=0,
                                vmax=3 if measure == "seconds" else 1.5)
            for y, values in enumerate(grid):
                for x, value in enumerate(values):
                    axis.text(x, y, "not reached" if math.isnan(value) else f"{value:.2f}", ha="center",
                              va="center", fontsize=8)
            axis.set_xticks(range(len(every)), [f"1 in {n:,}" for n in every])
            axis.set_yticks(range(len(lengths)), [f"{s:g} s" for s in lengths])
            axis.set(title=f"{task}: {title}", xlabel="hitch rate (env steps)", ylabel="hitch length")
            figure.colorbar(image, ax=axis, fraction=0.04)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)


def summarize(runs: dict[str, list[dict[str, float]]]) -> dict:
    """Medians over seeds per cell (``runs``: cell name → one figures dict per seed), the control apart."""
    medians = {name: {key: statistics.median(run[key] for run in found) for key in found[0]}
               for name, found in runs.items()}
    control = medians.pop("control")
    return {"control": control, "cells": medians, "runs": runs}


def report(task: str, summary: dict) -> None:
    control, seeds = summary["control"], len(summary["runs"]["control"])
    print(f"\n{task}: medians over {seeds} seed(s); the control {control['seconds']:.1f} s, "
          f"{control['updates']:.2f} updates/s")
    print(f"{'hitch':>12} {'s to threshold':>15} {'÷ control':>10} {'updates/s':>10} {'÷ control':>10}  per seed (s)")
    for name, figures in summary["cells"].items():
        each = " ".join(f"{run['seconds']:.1f}" for run in summary["runs"][name])
        print(f"{name:>12} {figures['seconds']:15.1f} {ratio(figures['seconds'], control['seconds']):10.2f}"
              f" {figures['updates']:10.2f} {ratio(figures['updates'], control['updates']):10.2f}  {each}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--every", type=int, nargs="+", default=[20000, 2000, 200], help="one env step in N hitches")
    parser.add_argument("--seconds", type=float, nargs="+", default=[0.2, 1.5, 5.0], help="hitch lengths")
    parser.add_argument("--seeds", type=int, nargs="+", default=[100])
    parser.add_argument("--limit", type=float, default=300.0, help="training seconds before a run gives up")
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the checkout whose train.py runs")
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None, help="write every run's figures here")
    parser.add_argument("--merge", type=Path, nargs="+", default=None,
                        help="run nothing: the --json files of earlier sittings, their runs together")
    args = parser.parse_args()
    results: dict = {}
    if args.merge:
        for path in args.merge:
            for task, earlier in json.loads(path.read_text()).items():
                runs = results.setdefault(task, {})
                for name, found in earlier["runs"].items():
                    runs.setdefault(name, []).extend(found)
        results = {task: summarize(runs) for task, runs in results.items()}
        for task, summary in results.items():
            report(task, summary)
    else:
        print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} {platform.processor() or platform.machine()}, "
              f"seeds {args.seeds}, checkout {args.checkout}")
        for task in args.tasks:
            grid = [(0, 0.0)] + [(n, s) for s in args.seconds for n in args.every]
            runs: dict[str, list[dict[str, float]]] = {}
            for seed in args.seeds:                        # the control and the cells of a seed side by side
                for every, seconds in grid:
                    name = "control" if every == 0 else f"{every}x{seconds:g}"
                    figures = cell(task, every, seconds, seed, args.limit, args.checkout)
                    runs.setdefault(name, []).append(figures)
                    print(f"{task:<8} {name:>12} seed {seed}: {figures['seconds']:7.1f} s to the threshold, "
                          f"{figures['steps']:>10,.0f} env steps, {figures['updates']:5.2f} updates/s, "
                          f"{figures['rate']:8,.0f} env steps/s", flush=True)
            results[task] = summarize(runs)
            report(task, results[task])
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    if args.plot is not None:
        plot(results, list(results), args.every, args.seconds, args.plot)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
