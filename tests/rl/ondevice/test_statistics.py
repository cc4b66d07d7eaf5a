"""The self-play statistics of a vectorized run: an iteration's games (about 900 at 16,384 environments) arrive as
counts per opponent, and every statistic must equal what the same games give when fed one by one in random order."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lamarckian.config import load
from lamarckian.model import to_blob
from lamarckian.rl.loop import TrainingLoop
from lamarckian.rl.ondevice.learner import OnDeviceLearner
from lamarckian.rl.selfplay.pool import OpponentPool
from lamarckian.rl.selfplay.window import ScoreWindow

SMALL = ["mdp.vec.num_envs.cpu=4", "mdp.vec.horizon=8", "evaluator.progress=false"]


def shuffled_reference(games: list[tuple[int, float]], settings, shuffles: int = 3000) -> dict[str, float]:
    """The statistics of ``games`` (opponent id, score) fed one at a time into a fresh pool, averaged over random
    orders: the learner's decayed win rate against each opponent and the mean of the pool's recent window."""
    rng = np.random.default_rng(0)
    totals: dict[str, float] = {}
    for _ in range(shuffles):
        pool = OpponentPool(settings)
        for snapshot_id in sorted({g[0] for g in games}):
            pool.add(np.zeros(2), 0, snapshot_id=snapshot_id)
        pool.games_since_add = 0
        for index in rng.permutation(len(games)):
            pool.record(*games[index])
        window = [s for _, s in games]  # the last games_to_check scores of this order
        window = [window[i] for i in rng.permutation(len(games))][-settings.games_to_check:]
        for key, value in [*((f"rate/{i}", s.win_rate()) for i, s in pool.snapshots.items()),
                           ("window", float(np.mean(window)))]:
            totals[key] = totals.get(key, 0.0) + value / shuffles
    return totals


def test_an_iterations_games_count_as_an_unordered_stream(tmp_path):
    config = load(["mdp/vec/ant_sumo.yml"], [*SMALL, "rl.opponent.pool.decay=0.9", "rl.opponent.pool.games_to_check=50",
                                             "rl.opponent.pool.add=self.win_rate > 0.52", f"root={tmp_path}"])
    learner = OnDeviceLearner(config)
    learner.pool.add(to_blob(learner.model), 1)
    learner.opponents.stack()                           # stack rows: snapshot 0, snapshot 1, the initial lanes
    outcomes = np.array([[30, 0, 30], [20, 10, 10], [300, 0, 300]], np.float32)   # wins, draws, losses per row
    learner.record(outcomes, np.zeros(3, np.float32))
    games = [(0, 1.0)] * 30 + [(0, 0.0)] * 30 + [(1, 1.0)] * 20 + [(1, 0.5)] * 10 + [(1, 0.0)] * 10
    reference = shuffled_reference(games, learner.pool.settings)
    for snapshot_id in (0, 1):
        assert learner.pool.snapshots[snapshot_id].win_rate() == pytest.approx(reference[f"rate/{snapshot_id}"],
                                                                               abs=0.01)
        assert learner.pool.snapshots[snapshot_id].games == sum(1 for g in games if g[0] == snapshot_id)
    assert reference["window"] == pytest.approx(0.55, abs=0.01)  # recent window: mean of all 100 games
    assert learner.pool.should_add(2)                              # the add rule sees 0.55 > 0.52 (sorted: 0.50)
    # running scores over the last 500 games: 350 wins, 10 draws, 340 losses in one iteration, so any 500 of them
    # score 355/700 on average (sorted, the last 500 were 150 wins, the draws and the losses: 0.31)
    assert learner.training["win"] == pytest.approx(355 / 700)
    assert learner.win_rate_against_initial() == 0.5
    TrainingLoop(learner, tmp_path).save()   # windows cut inside a batch are plain numbers: weights_only loads them
    resumed = OnDeviceLearner(config)
    assert TrainingLoop(resumed, tmp_path).resume() is not None
    assert resumed.recent_scores.mean() == pytest.approx(355 / 700)
    learner.close()
    resumed.close()


def test_a_window_cut_inside_an_iteration_counts_that_iteration_in_proportion(tmp_path):
    config = load(["mdp/vec/ant_sumo.yml"], [*SMALL, "rl.opponent.pool.games_to_check=50", f"root={tmp_path}"])
    learner = OnDeviceLearner(config)
    learner.record(np.array([[40, 0, 0], [0, 0, 0]], np.float32), np.zeros(3, np.float32))
    learner.record(np.array([[0, 10, 30], [0, 0, 0]], np.float32), np.zeros(3, np.float32))
    # the last 50 games: all 40 of the second iteration (score 5) and 10 of the first (all won): 15 / 50
    assert len(learner.pool.recent) == 50
    assert learner.pool.recent.mean() == pytest.approx(0.3)
    assert learner.pool.games_since_add == 80
    TrainingLoop(learner, tmp_path).save()                 # the statistics are plain numbers: weights_only loads them
    resumed = OnDeviceLearner(config)
    assert TrainingLoop(resumed, tmp_path).resume() is not None
    assert resumed.pool.recent.mean() == pytest.approx(0.3)
    assert resumed.training == learner.training != {}
    assert resumed.recent_scores.mean() == learner.recent_scores.mean()
    assert resumed.pool.snapshots[0].win_rate() == learner.pool.snapshots[0].win_rate()
    learner.close()
    resumed.close()


def test_score_window_keeps_the_newest_games():
    window = ScoreWindow(10)
    assert math.isnan(window.mean())
    window.add_outcomes(6, 0, 0)           # 6 wins
    window.add_outcomes(0, 4, 4)           # 8 games scoring 2: the window keeps 2 of the 6 wins
    assert len(window) == 10
    assert window.mean() == pytest.approx((2 + 2) / 10)
    window.add_outcomes(0, 0, 30)          # a batch larger than the window replaces everything
    assert len(window) == 10
    assert window.mean() == 0.0
    restored = ScoreWindow(10)
    restored.load(window.state())
    assert restored.mean() == window.mean()
    assert len(restored) == 10
