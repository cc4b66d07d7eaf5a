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
    assert synchronous[-1]["dropped"] == 0


def test_without_sync_the_actors_sample_ahead():
    assert max(stats["staleness_max"] for stats in iterations(False)) > 0
