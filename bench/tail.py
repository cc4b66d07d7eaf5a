"""Reliability of the small rows as the field reports it (issue 62; Agarwal et al., NeurIPS 2021, "Deep RL at the
Edge of the Statistical Precipice"): per row, how many seeds solve within the row's budget of env steps, the
interquartile mean of the env steps to the threshold with its 95 % percentile-bootstrap confidence interval, the
median (min–max), and a performance profile (the share of seeds solved by each number of env steps).

It reads the per-seed lines ``bench/peers.py`` prints (``<title> seed <seed> <system>: ... s, <steps> steps, ...``),
so a log of any sitting can be summarized again. A run that did not reach the threshold (``nan`` steps), or reached
it past the budget, is a failure; in the interquartile mean it counts as the budget (a lower bound on its cost).

    python bench/peers.py --seeds $(seq 100 119) --peers --rows cartpole-ppo ... > log.txt
    python bench/tail.py log.txt --plot docs/tail.png
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
from pathlib import Path

import numpy as np

#: env steps within which a row counts as solved (issue 62, item 1)
BUDGETS = {"CartPole-v1 PPO to 475": 50_000, "CartPole-v1 DQN to 475 (ours: Rainbow-lite)": 50_000,
           "Acrobot-v1 PPO to -100": 100_000, "Acrobot-v1 DQN to -100 (ours: Rainbow-lite)": 100_000,
           "Pendulum-v1 PPO to -200": 100_000, "Pendulum-v1 SAC to -200": 20_000,
           "MiniGrid-DoorKey-5x5-v0 PPO to 0.9, ours with defaults": 300_000}
LINE = re.compile(r"^\s+(?P<title>.+) seed (?P<seed>\d+) (?P<system>[\w-]+): [\d.na]+ s, (?P<steps>[\d.na]+) steps")


def interquartile_mean(values: np.ndarray) -> float:
    """The mean of the middle half of ``values`` ``(n,)``: ``int(n / 4)`` samples trimmed each side, as scipy's
    ``trim_mean(values, 0.25)``, which rliable's IQM is."""
    ordered = np.sort(np.asarray(values, dtype=float))
    cut = int(len(ordered) * 0.25)
    return float(ordered[cut:len(ordered) - cut].mean())


def bootstrap_interval(values: np.ndarray, resamples: int = 10_000, confidence: float = 0.95,
                       seed: int = 0) -> tuple[float, float]:
    """The percentile-bootstrap ``confidence`` interval of :func:`interquartile_mean` over ``values`` ``(n,)``."""
    random = np.random.default_rng(seed)
    draws = random.choice(np.asarray(values, dtype=float), size=(resamples, len(values)), replace=True)
    means = np.array([interquartile_mean(draw) for draw in draws])
    tail = (1 - confidence) / 2 * 100
    return float(np.percentile(means, tail)), float(np.percentile(means, 100 - tail))


def read_runs(path: Path) -> dict[tuple[str, str], list[float]]:
    """Env steps to the threshold (nan: not reached) per (row title, system), in the log's order."""
    runs: dict[tuple[str, str], list[float]] = {}
    for line in path.read_text().splitlines():
        match = LINE.match(line)
        if match:
            runs.setdefault((match["title"], match["system"]), []).append(float(match["steps"]))
    return runs


def summary(steps: list[float], budget: int) -> dict[str, float]:
    """Solved within ``budget`` (count), the interquartile mean of the steps capped at the budget and its 95 %
    interval, the median and the range of the solved runs."""
    capped = np.array([budget if math.isnan(s) or s > budget else s for s in steps])
    solved = [s for s in steps if not math.isnan(s) and s <= budget]
    low, high = bootstrap_interval(capped)
    return {"solved": len(solved), "seeds": len(steps), "iqm": interquartile_mean(capped), "low": low, "high": high,
            "median": statistics.median(solved) if solved else math.nan,
            "min": min(solved, default=math.nan), "max": max(solved, default=math.nan)}


def plot_profiles(runs: dict[tuple[str, str], list[float]], path: Path) -> None:
    """One panel per row: the share of seeds that reached the threshold by each number of env steps, the budget
    as a dashed line."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    titles = list(dict.fromkeys(title for title, _ in runs))
    columns = min(3, len(titles))
    rows = math.ceil(len(titles) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.5 * columns, 3.2 * rows), squeeze=False)
    for axis, title in zip(axes.flat, titles):
        budget = BUDGETS[title]
        for (row, system), steps in runs.items():
            if row != title:
                continue
            grid = np.linspace(0, budget * 1.2, 400)
            axis.plot(grid / 1000, [np.mean(np.asarray(steps) <= x) for x in grid], label=f"{system} ({len(steps)})")
        axis.axvline(budget / 1000, linestyle="--", color="grey")
        axis.set_title(title, fontsize=9)
        axis.set_xlabel("env steps (k)")
        axis.set_ylabel("share of seeds solved")
        axis.set_ylim(0, 1.02)
        axis.legend(fontsize=8)
    for axis in list(axes.flat)[len(titles):]:
        axis.set_visible(False)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("logs", type=Path, nargs="+", help="bench/peers.py output")
    parser.add_argument("--plot", type=Path, help="the performance profiles here (a .png)")
    args = parser.parse_args()
    runs: dict[tuple[str, str], list[float]] = {}
    for log in args.logs:
        if not log.exists():
            parser.error(f"{log}: no such file")
        for key, steps in read_runs(log).items():
            runs.setdefault(key, []).extend(steps)
    unknown = sorted({title for title, _ in runs if title not in BUDGETS})
    if unknown:
        parser.error(f"rows without a budget in bench/tail.py BUDGETS: {', '.join(unknown)}")
    print("| row | system | solved within the budget | env steps to the threshold: IQM [95 % CI] | "
          "median (min–max) of the solved |")
    print("|---|---|---|---|---|")
    for (title, system), steps in runs.items():
        row = summary(steps, BUDGETS[title])
        print(f"| {title} (budget {BUDGETS[title] / 1000:.0f} k) | {system} | {row['solved']} of {row['seeds']} | "
              f"{row['iqm'] / 1000:.1f} k [{row['low'] / 1000:.1f}–{row['high'] / 1000:.1f}] | "
              f"{row['median'] / 1000:.1f} k ({row['min'] / 1000:.1f}–{row['max'] / 1000:.1f}) |")
    if args.plot is not None:
        plot_profiles(runs, args.plot)
        print(f"performance profiles: {args.plot}", file=sys.stderr)


if __name__ == "__main__":
    main()
