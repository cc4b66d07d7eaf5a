"""Time and env steps for train.py to solve CartPole-v1 (eval return >= 475) and Pendulum-v1 (>= -200) with PPO, and
CartPole-v1 with A3C.

Runs the seed's commands (`python train.py -c mdp/gym.yml mdp/gym/<task>.yml rl/<ppo|a3c>.yml`) once per seed as
subprocesses, reads each run's evaluations.csv, and prints per task the median over seeds of: training
seconds to the first evaluation at the threshold (the learner's clock, Ray start-up excluded), env steps to
it, and the whole process wall time (start-up included). Draws the learning curves to --plot.

    python bench/learning.py [--seeds 0 1 2] [--limit 600] [--plot docs/learning.png] [--changes KEY=VALUE ...]

``--changes`` adds ``-m`` edits to every run (an ablation: ``--changes sample.sync=true``).
"""

from __future__ import annotations

import argparse
import os
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

TASKS = {"CartPole-v1": ("mdp/gym/cartpole.yml", 475.0, "rl/ppo.yml"),
         "Pendulum-v1": ("mdp/gym/pendulum.yml", -200.0, "rl/ppo.yml"),
         "CartPole-v1 A3C": ("mdp/gym/cartpole.yml", 475.0, "rl/a3c.yml")}


def run(files: list[str], threshold: float, seed: int, limit: float, root: Path,
        changes: tuple[str, ...] = ("evaluator.interval=2", "evaluator.episodes=10"),
        metric: str = "fitness", checkout: Path = REPOSITORY) -> dict[str, float]:
    """``train.py -c <files> -m <changes>`` of ``checkout`` (its own package first on the path) in a subprocess until
    the evaluation's ``metric`` (``fitness``: the return; ``win``: the win rate) reaches ``threshold`` or ``limit``
    training seconds pass: seconds and env steps to the threshold (nan: not reached), the process's wall time, the
    evaluation curve, the env steps and updates per training second."""
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, str(checkout / "train.py"), "-c", *files, "-m",
         f"seed={seed}", f"root={root}", *changes, "evaluator.progress=false", "evaluator.tensorboard=false",
         f"evaluator.terminate=self.{metric} >= {threshold} or self.time > {limit}", "-D"],
        capture_output=True, text=True, cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout)})
    wall = time.monotonic() - started
    if completed.returncode != 0:
        raise RuntimeError(f"train.py failed (seed {seed}):\n{completed.stderr[-2000:]}")
    rows = read_rows(root / "evaluations.csv")
    reached = next((row for row in rows if row[metric] >= threshold), None)
    return {"seconds": reached["time"] if reached else float("nan"),
            "training": reached["time"] - reached["evaluating"] if reached else float("nan"),
            "steps": reached["cost"] if reached else float("nan"),
            "wall": wall, "curve": [(row["cost"], row[metric]) for row in rows],
            "rate": rows[-1]["cost"] / max(1e-9, rows[-1]["time"] - rows[-1]["evaluating"]) if rows else float("nan"),
            "updates": rows[-1]["iteration"] / max(1e-9, rows[-1]["time"] - rows[-1]["evaluating"]) if rows
            else float("nan")}


def plot_panels(panels: list[tuple[str, float | None, list[tuple[str, str | None, list]]]], path: Path,
                xlabel: str = "env steps", ylabel: str = "mean evaluation return") -> None:
    """Learning curves to ``path`` (png): one panel per ``(title, threshold, [(label, colour or None, [(steps,
    return)])])``, the threshold dashed (None: no threshold)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(panels), figsize=(max(6, 5 * len(panels)), 3.5), squeeze=False)
    for axis, (title, threshold, lines) in zip(axes[0], panels):
        for label, colour, curve in lines:
            axis.plot([c for c, _ in curve], [f for _, f in curve], marker=".", color=colour, label=label)
        if threshold is not None:
            axis.axhline(threshold, color="grey", linestyle="--", linewidth=1)
        axis.set(title=title, xlabel=xlabel, ylabel=ylabel)
        axis.legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--limit", type=float, default=600.0, help="training seconds before a run gives up")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("--plot", type=Path, default=None, help="write the learning curves here (png)")
    parser.add_argument("--changes", nargs="+", default=[], metavar="KEY=VALUE", help="-m edits of every run")
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} {platform.processor() or platform.machine()}, "
          f"seeds {args.seeds}" + (f", changes {' '.join(args.changes)}" if args.changes else ""))
    print(f"{'task':<16} {'seed':>4} {'train s':>8} {'env steps':>10} {'wall s':>7}")
    curves: dict[str, list] = {}
    summary = []
    for task in args.tasks:
        task_file, threshold, learner = TASKS[task]
        results = []
        for seed in args.seeds:
            with tempfile.TemporaryDirectory() as folder:
                result = run(["mdp/gym.yml", task_file, learner], threshold, seed, args.limit, Path(folder) / "run",
                             ("evaluator.interval=2", "evaluator.episodes=10", *args.changes))
            results.append(result)
            curves.setdefault(task, []).append((seed, result["curve"]))
            print(f"{task:<16} {seed:>4} {result['seconds']:>8.1f} {result['steps']:>10.0f} {result['wall']:>7.1f}",
                  flush=True)
        medians = {key: statistics.median(r[key] for r in results) for key in ("seconds", "steps", "wall")}
        solved = sum(r["seconds"] == r["seconds"] for r in results)
        summary.append(f"{task:<16} median {medians['seconds']:.1f} s training, {medians['steps']:.0f} env steps, "
                       f"{medians['wall']:.1f} s wall (solved {solved}/{len(results)}; threshold {threshold})")
    print("\n".join(summary))
    if args.plot:
        plot_panels([(task, TASKS[task][1], [(f"seed {seed}", None, curve) for seed, curve in runs])
                     for task, runs in curves.items()], args.plot)
        print(f"learning curves: {args.plot}")


if __name__ == "__main__":
    main()
