"""What a chaos run cost, from its logs: time lost per fault, env steps lost to restarts, memory and open files
over time (the slope after warm-up), and the tables and plot of docs/reliability.md."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Sequence

import numpy as np


def progress(samples: Sequence[dict[str, Any]]) -> np.ndarray:
    """``(t, cost)`` rows (s since the start, env steps) from the status samples, in time order."""
    rows = [(s["t"], s["cost"]) for s in samples if s.get("cost") is not None]
    return np.asarray(sorted(rows), dtype=np.float64).reshape(-1, 2)


def cost_at(curve: np.ndarray, t: float) -> float:
    """The job's env-step count last reported at or before ``t`` (0 before the first report)."""
    index = np.searchsorted(curve[:, 0], t, side="right") - 1
    return float(curve[index, 1]) if index >= 0 else 0.0


def undisturbed_rate(samples: Sequence[dict[str, Any]], faults: Sequence[float], warm_up: float,
                     window: float = 8.0) -> float:
    """Env steps per second of the job between faults: the median over ``window``-second stretches of one
    process's reports (no restart inside) after ``warm_up`` s that hold no fault time of ``faults``; nan if none."""
    rows = [(s["t"], s["cost"], s["pid"]) for s in samples if s.get("cost") is not None and s["t"] >= warm_up]
    rates = []
    start = 0
    for end in range(len(rows)):
        while rows[start][2] != rows[end][2] or rows[end][0] - rows[start][0] > window:
            start += 1
        t0, t1 = rows[start][0], rows[end][0]
        if t1 - t0 >= window * 0.75 and not any(t0 - 2.0 <= f <= t1 for f in faults):
            rates.append((rows[end][1] - rows[start][1]) / (t1 - t0))
    return float(statistics.median(rates)) if rates else float("nan")


def steady_rate(curve: np.ndarray, warm_up: float) -> float:
    """Env steps per second from ``warm_up`` s to the last report (the run without faults: where a job reports
    too seldom for :func:`undisturbed_rate`, as a real-time task that evaluates most of the time)."""
    late = curve[curve[:, 0] >= warm_up]
    if len(late) < 2 or late[-1, 0] <= late[0, 0]:
        return float("nan")
    return float((late[-1, 1] - late[0, 1]) / (late[-1, 0] - late[0, 0]))


def time_lost(events: Sequence[dict[str, Any]], curve: np.ndarray, rate: float, end: float,
              kinds: Sequence[str]) -> dict[str, list[float]]:
    """Seconds each fault of ``kinds`` cost: from the fault to the next one (or ``end``), the env steps the job
    should have made at ``rate`` less those it made (a restart's rolled-back steps count as lost), over ``rate``;
    at least 0. Keyed by kind."""
    faults = [e for e in events if e["kind"] in kinds and e.get("hit", True)]
    lost: dict[str, list[float]] = {kind: [] for kind in kinds}
    for index, fault in enumerate(faults):
        until = faults[index + 1]["t"] if index + 1 < len(faults) else end
        made = cost_at(curve, until) - cost_at(curve, fault["t"])
        lost[fault["kind"]].append(max(0.0, (rate * (until - fault["t"]) - made) / rate))
    return lost


def memory(samples: Sequence[dict[str, Any]]) -> np.ndarray:
    """``(t, rss MiB, open fds, processes)`` rows of the memory samples."""
    rows = [(s["t"], s["rss_mb"], s["fds"], s["processes"]) for s in samples if "rss_mb" in s]
    return np.asarray(rows, dtype=np.float64).reshape(-1, 4)


def slope_per_hour(series: np.ndarray, column: int, warm_up: float) -> float:
    """The least-squares slope of ``column`` after ``warm_up`` seconds, per hour (MiB/h for memory)."""
    late = series[series[:, 0] >= warm_up]
    if len(late) < 3:
        return float("nan")
    return float(np.polyfit(late[:, 0] / 3600.0, late[:, column], 1)[0])


def by_kind(samples: Sequence[dict[str, Any]], warm_up: float) -> dict[str, dict[str, Any]]:
    """Per kind of process (``ray::PopulationLearner``, ``raylet``, ...) after ``warm_up`` seconds: how many were
    alive (min, max), and the slopes per hour of open files and resident MiB per process of that kind and of all of
    them together (a total that follows the number of processes alive is not a leak; a per-process one is)."""
    late = [s for s in samples if "by_kind" in s and s["t"] >= warm_up]
    kinds = sorted({kind for s in late for kind in s["by_kind"]})
    table = {}
    for kind in kinds:
        rows = np.asarray([(s["t"], *s["by_kind"].get(kind, (0, 0, 0))) for s in late], dtype=np.float64)
        alive = rows[rows[:, 1] > 0]
        if len(alive) < 3:
            continue
        each = np.column_stack([alive[:, 0], alive[:, 2] / alive[:, 1], alive[:, 3] / alive[:, 1]])
        table[kind] = {"processes": (int(rows[:, 1].min()), int(rows[:, 1].max())),
                       "fds_per_hour": slope_per_hour(rows[:, [0, 2]], 1, warm_up),
                       "fds_each_per_hour": slope_per_hour(each, 1, warm_up),
                       "rss_each_mb_per_hour": slope_per_hour(each, 2, warm_up)}
    return table


def spread(values: Sequence[float]) -> str:
    """'median (max)' of seconds, or '-'."""
    if not values:
        return "-"
    return f"{statistics.median(values):.1f} ({max(values):.1f})"


def plot_memory(runs: dict[str, np.ndarray], path: Path, title: str) -> None:
    """Resident memory and open files of every run over time, one line each."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    for label, series in runs.items():
        if len(series):
            top.plot(series[:, 0] / 60.0, series[:, 1], label=label)
            bottom.plot(series[:, 0] / 60.0, series[:, 2], label=label)
    top.set_ylabel("resident memory, all processes (MiB)")
    bottom.set_ylabel("open file descriptors")
    bottom.set_xlabel("minutes")
    top.set_title(title)
    top.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def survived(events: Sequence[dict[str, Any]], curve: np.ndarray, kind: str, end: float,
             within: float = 180.0) -> tuple[int, int]:
    """Of the faults of ``kind``: how many the job went on from (it reported again within ``within`` s), and how
    many came too late to tell (the run ended first, with no report since)."""
    count = late = 0
    for fault in events:
        if fault["kind"] == kind and fault.get("hit", False):
            after = curve[(curve[:, 0] > fault["t"]) & (curve[:, 0] <= fault["t"] + within)]
            if len(after):
                count += 1
            elif end - fault["t"] < within:
                late += 1
    return count, late


def markdown(figures: dict[str, Any]) -> str:
    """One scenario's figures as the tables of docs/reliability.md."""
    lines = [f"**{figures['scenario']}**: {figures['seconds'] / 60:.1f} min, undisturbed rate "
             f"{figures['rate']:.4g} env steps/s ({figures['rate_source']})", "",
             "| fault | injected | survived | time lost per fault, s: median (max) |", "|---|---|---|---|"]
    for kind, row in figures["faults"].items():
        late = f" (+{row['too_late']} too late to tell)" if row["too_late"] else ""
        lines.append(f"| {kind} | {row['injected']} | {row['survived']}{late} | {row['time_lost']} |")
    lost = figures["steps_lost"]
    result, baseline = figures.get("result") or {}, figures.get("baseline_result") or {}
    lines += ["", "| measure | value |", "|---|---|",
              f"| env steps lost per driver restart | {', '.join(f'{v:,.0f}' for v in lost) or '-'} "
              f"(at most {figures['steps_lost_in_checkpoint_intervals']} checkpoint intervals of work"
              + ("" if figures.get("rollback_checked", True) else "; not checked: no rate measured between faults")
              + ") |",
              f"| result with faults | {_plain(result)} |",
              f"| result without faults (same time, same machine) | {_plain(baseline) if baseline else '-'} |",
              f"| resident memory slope after warm-up | {figures['rss_slope_mb_per_hour']:+.1f} MiB/h |",
              f"| open files slope after warm-up | {figures['fd_slope_per_hour']:+.1f} per hour |",
              f"| processes left at the end (zombies) | {len(figures['leftover'])} ({figures['zombies']}) |",
              f"| restarts by the harness | {_plain(figures['restarts'])} |",
              f"| exits nobody caused | {len(figures['unexpected_exits'])} |"]
    lines += [f"| check: {name} | {'held' if ok else 'FAILED'} |" for name, ok in figures["checks"].items()]
    kinds = figures.get("by_kind") or {}
    if kinds:
        lines += ["", "| process kind | alive (min-max) | open files, all of them | open files, each | "
                  "resident MiB, each |", "|---|---|---|---|---|"]
        lines += [f"| {kind} | {row['processes'][0]}-{row['processes'][1]} | {row['fds_per_hour']:+.0f}/h | "
                  f"{row['fds_each_per_hour']:+.1f}/h | {row['rss_each_mb_per_hour']:+.1f}/h |"
                  for kind, row in kinds.items()]
    return "\n".join(lines)


def _plain(values: dict[str, Any]) -> str:
    def number(value: Any) -> str:
        try:
            return f"{float(value):.4g}"
        except (TypeError, ValueError):
            return str(value)

    return ", ".join(f"{key} {number(value)}" for key, value in values.items()) or "-"
