"""bench/tail.py: the interquartile mean, its bootstrap interval, and what counts as solved."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from tail import bootstrap_interval, interquartile_mean, read_runs, summary  # noqa: E402


def test_the_interquartile_mean_averages_the_middle_half():
    assert interquartile_mean(np.arange(1.0, 9.0)) == 4.5          # 3, 4, 5, 6


def test_the_interquartile_mean_ignores_one_wild_value():
    assert interquartile_mean(np.array([1.0, 2.0, 3.0, 4.0, 1e9])) == 3.0


def test_the_bootstrap_interval_holds_the_interquartile_mean():
    values = np.random.default_rng(0).normal(10.0, 2.0, 20)
    low, high = bootstrap_interval(values, resamples=2000)
    assert low <= interquartile_mean(values) <= high


def test_a_run_past_the_budget_is_not_solved():
    assert summary([1000.0, 60_000.0, math.nan], budget=50_000)["solved"] == 1


def test_a_failed_run_counts_as_the_budget_in_the_interquartile_mean():
    assert summary([math.nan] * 4, budget=50_000)["iqm"] == 50_000


def peers_log(tmp_path: Path) -> list[float]:
    """Two lines of bench/peers.py's output read back: one run reached the threshold, one did not."""
    log = tmp_path / "log.txt"
    log.write_text("  CartPole-v1 PPO to 475 seed 100 ours: 3.0 s, 7168.0 steps, final return 175.9 at 8192.0 steps\n"
                   "  CartPole-v1 PPO to 475 seed 101 ours: nan s, nan steps, final return 300.0 at 9000.0 steps\n")
    return read_runs(log)[("CartPole-v1 PPO to 475", "ours")]


def test_a_reached_threshold_is_read_as_its_env_steps(tmp_path):
    assert peers_log(tmp_path)[0] == 7168.0


def test_a_missed_threshold_is_read_as_nan(tmp_path):
    assert math.isnan(peers_log(tmp_path)[1])
