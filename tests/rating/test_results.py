"""Episode results as a type: built from a controller's dict, sent as plain data, malformed reports refused."""

from __future__ import annotations

import pytest

from lamarckian.rating.results import EpisodeResult, pairwise_scores


def test_round_trip_through_the_wire_form():
    result = EpisodeResult.of({"fitness": 3, "win": 1, "objectives": {"lazy": 0.25}}, opponent="pool",
                              snapshots=[4], scores=[1.0])
    again = EpisodeResult.from_wire(result.to_wire())
    assert again == result
    assert isinstance(again.fitness, float)
    assert again.rank is None


@pytest.mark.parametrize("data", [{"win": 1.0}, {"fitness": 1.0, "owner": "x"}, [1.0], {"fitness": 1.0,
                                                                                      "opponent": "somebody"}])
def test_malformed_reports_are_refused(data):
    with pytest.raises(ValueError):
        EpisodeResult.from_wire(data)


def test_pairwise_scores_use_ranks_only_when_every_player_has_one():
    ranked = [EpisodeResult(fitness=0.0, rank=1.0), EpisodeResult(fitness=9.0, rank=2.0)]
    assert pairwise_scores(ranked[0], ranked[1:]) == [1.0]                 # the rank decides, not the fitness
    scored = [EpisodeResult(fitness=2.0), EpisodeResult(fitness=2.0), EpisodeResult(fitness=5.0)]
    assert pairwise_scores(scored[0], scored[1:]) == [0.5, 0.0]
    mixed = [EpisodeResult(fitness=2.0, rank=1.0), EpisodeResult(fitness=5.0)]
    assert pairwise_scores(mixed[0], mixed[1:]) == [0.0]                  # no rank on one side: fitness


def test_a_segment_survives_the_wire_and_a_malformed_one_is_refused():
    import numpy as np

    from lamarckian.rl.segment import Segment, stack_lanes

    lane = {"observations": np.zeros((3, 2), np.float32), "actions": np.zeros(3, np.int64),
            "log_probs": np.zeros(3, np.float32), "values": np.zeros(4, np.float32), "rewards": np.ones(3, np.float32),
            "dones": np.zeros(3, bool), "truncated": np.zeros(3, bool), "final_values": np.zeros(3, np.float32)}
    segment = stack_lanes([{**lane, "version": 5}, {**lane, "version": 4}], steps=6,
                          results=[EpisodeResult(fitness=1.0)])
    assert segment.observations.shape == (3, 2, 2)
    assert segment.values.shape == (4, 2)
    assert segment.version == 4
    again = Segment.from_wire(segment.to_wire())
    assert again.results == segment.results
    assert again.steps == 6
    assert np.array_equal(again.rewards, segment.rewards)
    wire = segment.to_wire()
    with pytest.raises(ValueError, match="without rewards"):
        Segment.from_wire({k: v for k, v in wire.items() if k != "rewards"})
    with pytest.raises(ValueError, match="not arrays"):
        Segment.from_wire({**wire, "values": [0.0] * 4})
