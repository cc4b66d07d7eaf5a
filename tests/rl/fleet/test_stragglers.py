"""One slow part never stalls learning: while one episode waits for its answer, or one gymnasium environment hitches,
the learner goes on updating from the actor's other environments (updates counted while it waits, not timed); a
late lane is judged by its own age."""

from __future__ import annotations

import numpy as np

from lamarckian.config import load
from lamarckian.rl.fleet.learner import Learner
from lamarckian.rl.segment import Lane, stack_lanes

from . import straggling

CARTPOLE = ["mdp/gym.yml", "mdp/gym/cartpole.yml"]
SMALL = ["ray.local_mode=true", "sample.actors=1", "sample.envs=4", "sample.truncation=16", "train.batch=64",
         "model.hidden=[16]", "evaluator.episodes=0"]


def wait_seen(*changes: str) -> dict:
    """Train until the straggler's wait is over (it waits for the learner's updates, or gives up after
    :data:`straggling.GIVE_UP` seconds); what it saw."""
    straggling.reset()
    learner = Learner(load(CARTPOLE, [*SMALL, *changes]))
    try:
        with learner.running():
            while "ended" not in straggling.SEEN:
                if learner.step().get("samples"):     # an update was made
                    straggling.updated()
    finally:
        learner.close()
    return dict(straggling.SEEN)


def test_an_episode_that_waits_for_its_answer_does_not_hold_the_updates():
    seen = wait_seen("mdp.create=tests.rl.fleet.straggling:WaitingEpisodes")
    assert not seen["gave_up"]


def test_a_gymnasium_environment_that_hitches_does_not_hold_the_updates():
    seen = wait_seen("mdp.gym.id=tests.rl.fleet.straggling:LamarckianHitching-v0")
    assert not seen["gave_up"]


def test_a_synchronous_batch_does_not_wait_for_a_late_episode():
    seen = wait_seen("mdp.create=tests.rl.fleet.straggling:WaitingEpisodes", "sample.sync=true")
    assert not seen["gave_up"]


def segment_of_versions(versions: list[int], steps: int = 4):
    parts = []
    for version in versions:
        lane = Lane()
        for _ in range(steps + 1):
            lane.decide(np.zeros(2, np.float32), np.int64(0), 0.0, float(version), version)
            lane.outcome(1.0, False, False)
        parts.append(lane.take(steps))
    return stack_lanes(parts, steps * len(versions), [])


def test_a_late_lane_is_trimmed_and_the_rest_kept():
    kept = segment_of_versions([5, 2, 6]).trimmed(4)
    assert kept.versions.tolist() == [5, 6]


def test_a_trimmed_segment_keeps_its_lanes_steps():
    kept = segment_of_versions([5, 2, 6]).trimmed(4)
    assert kept.values[0].tolist() == [5.0, 6.0]


def test_a_trimmed_segment_counts_the_env_steps_kept():
    assert segment_of_versions([5, 2, 6]).trimmed(4).steps == 8


def test_a_segment_of_stale_lanes_only_is_dropped():
    assert segment_of_versions([1, 2]).trimmed(4) is None


def test_a_fresh_segment_is_kept_whole():
    segment = segment_of_versions([5, 6])
    assert segment.trimmed(4) is segment

