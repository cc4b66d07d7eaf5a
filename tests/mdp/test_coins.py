"""The built-in N-player Coins race: pick-ups, ranks with ties, seeding."""

from __future__ import annotations

import numpy as np
import pytest

from lamarckian.mdp.coins import Coins, CoinsSettings


def test_pick_up_ranks_and_shared_win():
    game = Coins(CoinsSettings.defaults(players=3, coins=1, max_steps=5), seed=0)
    game.start(seed=0)
    game.positions[:] = [[0.5, 0.5], [0.9, 0.9], [0.1, 0.1]]
    game.coins[:] = [[0.52, 0.5]]
    rewards = game.step([0, 0, 0])
    assert rewards == [1.0, 0.0, 0.0]
    assert game.scores.tolist() == [1, 0, 0]
    assert not np.allclose(game.coins[0], [0.52, 0.5])  # a new coin appeared
    results = [game.result(p) for p in range(3)]
    assert [r["rank"] for r in results] == [1.0, 2.5, 2.5]
    assert [r["win"] for r in results] == [1.0, 0.0, 0.0]
    game.scores[:] = [2, 2, 0]
    assert [game.result(p)["win"] for p in range(3)] == [0.5, 0.5, 0.0]  # a tie for first shares the win


def test_observation_is_relative_and_seeded():
    first, second = Coins(seed=3), Coins(seed=3)
    first.start(seed=3)
    second.start(seed=3)
    assert np.array_equal(first.observe(1), second.observe(1))
    assert first.observe(0).shape == first.describe()[0].observation.shape
    with pytest.raises(ValueError, match="players >= 2"):
        Coins(CoinsSettings.defaults(players=1))
    with pytest.raises(ValueError, match="0..4"):
        first.step([9, 0, 0])
