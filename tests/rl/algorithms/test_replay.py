"""Replay for the off-policy learners: the sum tree samples in proportion to priority, n-step targets are what a
hand computation gives, the ring keeps the newest transitions, prioritized sampling weighs and re-prioritizes."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lamarckian.rl.algorithms.replay import ReplayBuffer, SumTree, n_step_transitions


@pytest.mark.parametrize("capacity", [1, 5, 8, 37])
def test_the_sum_tree_samples_in_proportion_to_priority(capacity):
    """Chi-square goodness of fit of 200,000 draws to p_i / Σp (a zero-priority slot is never drawn)."""
    random = np.random.default_rng(0)
    priorities = random.random(capacity) * 10
    if capacity > 2:
        priorities[1] = 0.0
    tree = SumTree(capacity)
    tree.update(np.arange(capacity), priorities)
    assert tree.total() == pytest.approx(priorities.sum())
    draws = np.concatenate([tree.sample(1000, random) for _ in range(200)])
    counts = np.bincount(draws, minlength=capacity)
    assert counts[priorities == 0].sum() == 0
    positive = priorities > 0
    expected = priorities[positive] / priorities[positive].sum() * len(draws)
    if positive.sum() > 1:
        assert stats.chisquare(counts[positive], expected).pvalue > 0.001


def test_updating_a_slot_changes_the_sums_above_it():
    tree = SumTree(6)
    tree.update(np.arange(6), np.ones(6))
    tree.update(np.array([2, 2, 5]), np.array([4.0, 7.0, 0.0]))        # the last value of a repeated slot holds
    assert tree.total() == pytest.approx(1 + 1 + 7 + 1 + 1 + 0)
    assert list(tree.find(np.array([0.5, 2.5, 9.5, 10.9]))) == [0, 2, 3, 4]
    with pytest.raises(ValueError, match="non-negative"):
        tree.update(np.array([0]), np.array([-1.0]))


def test_n_step_returns_against_a_hand_computation():
    """Lane 0: an episode terminates at step 2; lane 1: cut by a time limit at step 1; γ = 0.5, n = 3, T = 5."""
    rewards = np.array([[1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0], [5.0, 50.0]])
    dones = np.array([[0, 0], [0, 1], [1, 0], [0, 0], [0, 0]], bool)
    truncated = np.array([[0, 0], [0, 1], [0, 0], [0, 0], [0, 0]], bool)
    returns, last, bootstrap = n_step_transitions(rewards, dones, truncated, steps=3, discount=0.5)
    # lane 0, t=0: 1 + .5·2 + .25·3, terminated at step 2: no bootstrap
    assert returns[0, 0] == pytest.approx(2.75)
    assert last[0, 0] == 2
    assert bootstrap[0, 0] == 0.0
    # lane 0, t=3: 4 + .5·5, the segment ends: bootstrap γ² from after step 4
    assert returns[3, 0] == pytest.approx(6.5)
    assert last[3, 0] == 4
    assert bootstrap[3, 0] == pytest.approx(0.25)
    # lane 1, t=0: 10 + .5·20, cut by the time limit at step 1: bootstrap γ² from the final observation
    assert returns[0, 1] == pytest.approx(20.0)
    assert last[0, 1] == 1
    assert bootstrap[0, 1] == pytest.approx(0.25)
    # lane 1, t=2: a new episode: 30 + .5·40 + .25·50, a full window: γ³
    assert returns[2, 1] == pytest.approx(62.5)
    assert last[2, 1] == 4
    assert bootstrap[2, 1] == pytest.approx(0.125)


def segment(steps: int, lanes: int, start: float) -> dict[str, np.ndarray]:
    observations = (start + np.arange(steps * lanes, dtype=np.float32)).reshape(steps, lanes, 1)
    return {"observations": observations, "actions": np.zeros((steps, lanes), np.int64),
            "rewards": np.ones((steps, lanes), np.float32), "dones": np.zeros((steps, lanes), bool),
            "truncated": np.zeros((steps, lanes), bool), "next_observations": observations + 1000}


def test_the_ring_keeps_the_newest_transitions_and_round_trips():
    buffer = ReplayBuffer(capacity=10, steps=1, seed=1)
    assert buffer.add_segment(**segment(4, 2, 0)) == 8
    buffer.add_segment(**segment(4, 2, 100))                       # 16 added: the oldest 6 are gone
    assert len(buffer) == 10
    kept = sorted(buffer.arrays["observations"][:, 0].tolist())
    assert kept == [6.0, 7.0] + [100.0 + i for i in range(8)]
    batch, slots, weights = buffer.sample(5)
    assert np.array_equal(batch["next_observations"], batch["observations"] + 1000)
    assert (weights == 1).all()
    copy = ReplayBuffer(capacity=10, steps=1)
    copy.load_state_dict(buffer.state_dict())
    assert np.array_equal(copy.sample(5)[1], buffer.sample(5)[1])   # the same transitions and sampling stream


def test_prioritized_sampling_weighs_and_follows_new_priorities():
    buffer = ReplayBuffer(capacity=64, steps=1, alpha=1.0, beta=1.0, seed=2)
    buffer.add_segment(**segment(8, 8, 0))
    _, slots, weights = buffer.sample(32)
    assert np.allclose(weights, 1.0)                                # new transitions: equal priorities
    buffer.update_priorities(np.arange(64), np.where(np.arange(64) == 7, 100.0, 1.0))
    batch, slots, weights = buffer.sample(64)
    assert (slots == 7).mean() > 0.5                                # p = 100 / 163
    assert weights[slots == 7].max() < weights[slots != 7].min()
    assert weights.max() == 1.0
