"""``sample.sync``: the actors make a batch's segments with that batch's weights (staleness 0), and no env step is
thrown away for it."""

from __future__ import annotations

import pytest

from lamarckian.config import load
from lamarckian.rl.fleet.learner import Learner

CARTPOLE = ["mdp/gym.yml", "mdp/gym/cartpole.yml"]
SMALL = ["sample.actors=2", "sample.envs=4", "sample.truncation=16", "train.batch=256", "model.hidden=[16]",
         "evaluator.episodes=0"]


def iterations(sync: bool, count: int = 6, *changes: str) -> list[dict[str, float]]:
    learner = Learner(load(CARTPOLE, [*SMALL, f"sample.sync={str(sync).lower()}", *changes]))
    try:
        with learner.running():
            return [learner.step() for _ in range(count)]
    finally:
        learner.close()


@pytest.fixture(scope="module")
def synchronous() -> list[dict[str, float]]:
    return iterations(True)


def test_every_segment_comes_from_its_batchs_weights(synchronous):
    assert max(stats["staleness_max"] for stats in synchronous) == 0


def test_one_segment_per_actor_and_batch_comes_from_its_batchs_weights_too():
    # 2 actors x 4 envs x 32 steps fill the batch of 256: an actor's second credit would sample ahead
    assert max(stats["staleness_max"] for stats in iterations(True, 6, "sample.truncation=32")) == 0


def test_no_segment_is_dropped(synchronous):
    assert synchronous[-1]["dropped_steps"] == 0


def test_without_sync_the_actors_sample_ahead():
    assert max(stats["staleness_max"] for stats in iterations(False)) > 0


def test_three_actors_on_a_batch_they_do_not_divide_sample_with_its_weights():
    """3 actors × 4 envs × 16 steps = 192 env steps a round against a batch of 256: the credits round down (one an
    actor) and the fourth segment is asked of the first actor whose segment arrives (before: two credits each, two
    segments sampled ahead with the old weights in every batch)."""
    stats = iterations(True, 6, "sample.actors=3")
    assert max(s["staleness_max"] for s in stats) == 0


def test_a_batch_smaller_than_a_round_takes_one_segment_from_every_actor():
    """3 actors × 4 envs × 16 steps against a batch of 128: every batch holds the three segments, none of them
    sampled ahead."""
    stats = iterations(True, 6, "sample.actors=3", "train.batch=128")
    assert max(s["staleness_max"] for s in stats) == 0


def test_a_recurrent_policy_decides_the_step_again_with_the_new_weights():
    """An LSTM's first step of every segment is decided again with the batch's weights, from the memory it had
    before the step (before: skipped for recurrent policies, so every segment began with one step of the old
    weights: staleness 1)."""
    stats = iterations(True, 6, "model.recurrent=lstm", "model.shared=true")
    assert max(s["staleness_max"] for s in stats) == 0
