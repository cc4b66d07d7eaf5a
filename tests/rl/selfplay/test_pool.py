"""Opponent pools: FIFO capacity, the add rule, choosers, and PFSP frequencies that follow the weighting."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lamarckian.rl.selfplay.pool import OpponentPool, PoolSettings, pfsp_weight


def pool_with(win_rates: list[float], **settings) -> OpponentPool:
    pool = OpponentPool(PoolSettings.defaults(**{"capacity": 10, "decay": 1.0, **settings}))
    for index, rate in enumerate(win_rates):
        pool.add(np.full(3, index, np.float32), iteration=index)
        games = 100
        for game in range(games):
            pool.record(index, 1.0 if game < rate * games else 0.0)
    return pool


def test_capacity_is_fifo():
    pool = OpponentPool(PoolSettings.defaults(capacity=3))
    for iteration in range(5):
        pool.add(np.zeros(2), iteration)
    assert list(pool.snapshots) == [2, 3, 4]
    assert len(pool) == 3


def test_add_rule_waits_for_games_to_check():
    pool = OpponentPool(PoolSettings.defaults(add="self.win_rate > 0.7 or self.iterations_since_add > 500",
                                              games_to_check=10))
    pool.add(np.zeros(2), 0)
    for _ in range(9):
        pool.record(0, 1.0)
    assert not pool.should_add(1)  # only 9 games of warm-up
    pool.record(0, 1.0)
    assert pool.should_add(1)  # 10 games, all won
    pool.add(np.zeros(2), 2)
    for _ in range(10):
        pool.record(1, 0.0)
    assert not pool.should_add(100)
    assert pool.should_add(503)  # losing, but 501 iterations since the add


def test_decayed_statistics_and_draws():
    pool = OpponentPool(PoolSettings.defaults(decay=0.5))
    pool.add(np.zeros(2), 0)
    for score in (0.0, 0.5, 1.0):
        pool.record(0, score)
    snapshot = pool.snapshots[0]
    assert (snapshot.games, snapshot.wins, snapshot.draws, snapshot.losses) == (3, 1, 1, 1)
    # decayed score: ((0 * .5) + .5) * .5 + 1 = 1.25 over games (1 * .5 + 1) * .5 + 1 = 1.75
    assert snapshot.win_rate() == pytest.approx(1.25 / 1.75)


@pytest.mark.parametrize("weighting", ["linear", "squared", "variance"])
def test_pfsp_probabilities_follow_the_weighting(weighting):
    rates = [0.1, 0.3, 0.5, 0.8, 0.95]
    probabilities = pool_with(rates, chooser="pfsp", weighting=weighting).probabilities()
    weights = np.array([pfsp_weight(r, weighting) for r in rates])
    assert np.allclose(list(probabilities.values()), weights / weights.sum())


def test_sampled_frequencies_pass_a_chi_square_test():
    """Draw opponents as the actors do and compare the counts with the PFSP distribution."""
    rates = [0.1, 0.4, 0.6, 0.9]
    probabilities = pool_with(rates, chooser="pfsp", weighting="squared").probabilities()
    ids, p = list(probabilities), np.array(list(probabilities.values()))
    draws = np.random.default_rng(0).choice(ids, size=20_000, p=p)
    observed = np.array([(draws == i).sum() for i in ids])
    assert stats.chisquare(observed, p * len(draws)).pvalue > 0.01
    uniform = np.full(len(ids), len(draws) / len(ids))
    assert stats.chisquare(observed, uniform).pvalue < 1e-6  # and it is not uniform


def test_latest_heavy_and_uniform():
    latest = pool_with([0.5] * 5, chooser="latest").probabilities()
    assert latest[4] == pytest.approx(0.8)
    assert latest[0] == pytest.approx(0.05)
    uniform = pool_with([0.1, 0.9], chooser="uniform").probabilities()
    assert uniform == {0: 0.5, 1: 0.5}


def test_state_round_trip():
    pool = pool_with([0.2, 0.7])
    restored = OpponentPool(pool.settings)
    restored.load_state_dict(pool.state_dict())
    assert restored.probabilities() == pool.probabilities()
    assert np.array_equal(restored.snapshots[1].blob, pool.snapshots[1].blob)
    assert restored.snapshots[0].games == 100
    assert restored.next_id == 2
