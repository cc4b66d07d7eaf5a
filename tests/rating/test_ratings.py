"""Ratings against values computed by hand."""

from __future__ import annotations

import numpy as np
import pytest

from lamarckian.rating import Elo, SkillRating, fit_elo
from lamarckian.rating.results import EpisodeResult


def test_elo_by_hand():
    elo = Elo(k=32, scale=400, initial=1200)
    # 1400 vs 1200: expected = 1 / (1 + 10^(-200/400)) = 1 / (1 + 0.316228) = 0.759747
    assert elo.expected(1400, 1200) == pytest.approx(0.759747, abs=1e-6)
    # the underdog wins: change = 32 * (1 - 0.240253) = 24.3119
    assert elo.update(1200, 1400, 1.0) == pytest.approx((1224.3119, 1375.6881), abs=1e-4)
    assert elo.update(1500, 1500, 0.5) == (1500, 1500)
    with pytest.raises(ValueError):
        elo.update(1, 2, 1.5)


def test_multiplayer_elo_by_hand():
    elo = Elo(k=32)
    # three equal players, ranks 1, 2, 3: K per pair = 16; first: 16*(1-.5)*2 = +16, second: 16*(0-.5)+16*(1-.5) = 0
    assert elo.update_ranks([1200, 1200, 1200], [1, 2, 3]) == pytest.approx([1216, 1200, 1184])
    # a tie between the last two averages: 16*(.5-.5) + 16*(0-.5) = -8 each
    assert elo.update_ranks([1200, 1200, 1200], [1, 2.5, 2.5]) == pytest.approx([1216, 1192, 1192])
    # two players: the same as classic Elo
    assert elo.update_ranks([1200, 1400], [1, 2]) == pytest.approx(list(elo.update(1200, 1400, 1.0)))


def test_bradley_terry_fit_by_hand():
    # A beats B 3 of 4 games: strengths 3:1 exactly (no prior) → difference 400*log10(3) = 190.85
    scores = np.array([[0, 3], [1, 0]])
    games = np.array([[0, 4], [4, 0]])
    ratings = fit_elo(scores, games, prior_games=0.0)
    assert ratings[0] - ratings[1] == pytest.approx(400 * np.log10(3), abs=1e-6)
    assert ratings.mean() == pytest.approx(1200)
    # a transitive chain keeps its order, and an unbeaten player stays finite thanks to the prior
    chain = fit_elo(np.array([[0, 10, 10], [0, 0, 10], [0, 0, 0]]), np.full((3, 3), 10) - 10 * np.eye(3))
    assert chain[0] > chain[1] > chain[2]
    assert np.all(np.isfinite(chain))


def test_skill_rating_by_hand():
    """Plackett-Luce, two new players (mu 25, sigma 25/3, beta 25/6), one decisive game:
    c = sqrt(2 sigma^2 + 2 beta^2) = 13.176; p = 1/2; winner's mu += sigma^2 / c * (1 - p) = 2.6354;
    delta = (sigma / c) * sigma^2 / c^2 * p (1 - p) = 0.063246; sigma' = sigma * sqrt(1 - delta) = 8.0659."""
    skill = SkillRating()
    skill.rate(["a", "b"], [1, 2])
    assert skill.rating("a") == pytest.approx((27.6354, 8.0659), abs=1e-3)
    assert skill.rating("b") == pytest.approx((22.3646, 8.0659), abs=1e-3)


def test_skill_rating_orders_players():
    skill = SkillRating()
    for _ in range(20):
        skill.rate(["a", "b", "c"], [1, 2, 3])
    assert skill.rating("a")[0] > skill.rating("b")[0] > skill.rating("c")[0]
    assert skill.rating("a")[1] < 25 / 3  # uncertainty shrinks with games


def test_schedule_and_pairwise_tally():
    from lamarckian.rating.tournament import Tally, multiplayer_elo, schedule

    assert schedule(3, 2) == [[0, 1], [1, 0], [0, 2], [2, 0], [1, 2], [2, 1]]
    assert schedule(4, 3, seats=3)[:3] == [[0, 1, 2], [1, 2, 0], [2, 0, 1]]
    assert len(schedule(4, 3, seats=3)) == 12
    tally = Tally(3)
    game = [EpisodeResult(fitness=0.0, rank=1.0), EpisodeResult(fitness=0.0, rank=2.5),
            EpisodeResult(fitness=0.0, rank=2.5)]
    tally.add([2, 0, 1], game)
    assert tally.scores[2, 0] == 1
    assert tally.scores[0, 1] == 0.5
    assert tally.scores[0, 2] == 0
    assert tally.games.sum() == 6
    assert multiplayer_elo(3, [[2, 0, 1]], [game]) == pytest.approx([1192, 1192, 1216])
