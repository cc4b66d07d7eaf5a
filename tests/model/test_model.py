"""Networks, blobs, normalizers and observation batching."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from lamarckian.model import ActorCritic, ModelSettings, ObservationBatcher, RunningNormalizer, load_blob, to_blob


def test_blob_round_trip_includes_normalizers():
    space = gymnasium.spaces.Box(-1, 1, (5,), np.float32)
    source = ActorCritic(space, gymnasium.spaces.Discrete(3))
    source.observation_normalizer.update(torch.randn(100, 5) * 3 + 1)
    target = ActorCritic(space, gymnasium.spaces.Discrete(3))
    blob = to_blob(source)
    assert blob.dtype == np.float32
    assert blob.ndim == 1
    assert blob.flags["C_CONTIGUOUS"]
    load_blob(target, blob)
    observation = torch.randn(7, 5)
    assert torch.equal(source(observation)[0].logits, target(observation)[0].logits)
    with pytest.raises(ValueError, match="another architecture"):
        load_blob(ActorCritic(space, gymnasium.spaces.Discrete(4)), blob)


def test_running_normalizer_matches_numpy():
    data = np.random.default_rng(0).normal(3.0, 2.0, size=(1000, 4)).astype(np.float32)
    normalizer = RunningNormalizer((4,))
    for chunk in np.array_split(data, 7):
        normalizer.update(torch.from_numpy(chunk))
    assert np.allclose(normalizer.mean.numpy(), data.mean(0), atol=1e-4)
    assert np.allclose(normalizer.var.numpy(), data.var(0), rtol=1e-3)


def test_gaussian_head_and_values():
    model = ActorCritic(gymnasium.spaces.Box(-1, 1, (3,), np.float32), gymnasium.spaces.Box(-2, 2, (2,), np.float32),
                        ModelSettings.defaults(hidden=(16,)))
    observation = torch.randn(6, 3)
    action, log_prob, value = model.act(observation)
    assert action.shape == (6, 2)
    assert log_prob.shape == (6,)
    assert value.shape == (6,)
    deterministic = model.act(observation, deterministic=True)[0]
    assert torch.allclose(deterministic, model(observation)[0].mean)
    assert model.env_action(action[0].numpy()).shape == (2,)


def test_dict_and_image_batching():
    space = gymnasium.spaces.Dict({"a": gymnasium.spaces.Box(0, 1, (2, 2), np.float32),
                                   "b": gymnasium.spaces.Discrete(3)})
    batcher = ObservationBatcher(space)
    batch = batcher([{"a": np.ones((2, 2)), "b": 2}, {"a": np.zeros((2, 2)), "b": 0}])
    assert batch.shape == (2, 7)
    assert batch[0, -1] == 1
    assert batch[1, 4] == 1
    assert np.array_equal(batcher.convert({"a": np.ones((2, 2)), "b": 2}), batch[0])
    image = gymnasium.spaces.Box(0, 255, (64, 64, 3), np.uint8)
    model = ActorCritic(image, gymnasium.spaces.Discrete(4), ModelSettings.defaults(hidden=(32,)))
    frames = model.batcher([np.zeros((64, 64, 3), np.uint8)] * 2)
    assert frames.shape == (2, 3, 64, 64)
    assert model.act(torch.from_numpy(frames))[0].shape == (2,)


def test_a_tuple_observation_batches_as_the_dict_of_its_positions():
    parts = (gymnasium.spaces.Discrete(32), gymnasium.spaces.Discrete(11), gymnasium.spaces.Box(0, 1, (2,), np.float32))
    as_tuple = ObservationBatcher(gymnasium.spaces.Tuple(parts))
    as_dict = ObservationBatcher(gymnasium.spaces.Dict({str(i): space for i, space in enumerate(parts)}))
    observation = (14, 10, np.array([0.25, 0.5], np.float32))
    assert np.array_equal(as_tuple.convert(observation), as_dict.convert({"0": 14, "1": 10, "2": observation[2]}))


def test_a_tuple_observation_space_builds_a_network():
    space = gymnasium.spaces.Tuple((gymnasium.spaces.Discrete(32), gymnasium.spaces.Discrete(2)))   # Blackjack's kind
    model = ActorCritic(space, gymnasium.spaces.Discrete(2), ModelSettings.defaults(hidden=(8,)))
    assert model.batcher.shape == (34,)


@pytest.mark.parametrize("bound", ["clip", "tanh"])
def test_continuous_actions_stay_in_bounds(bound):
    space = gymnasium.spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32))
    model = ActorCritic(gymnasium.spaces.Box(-1, 1, (3,), np.float32), space,
                        ModelSettings.defaults(log_std=2.0, bound=bound))
    actions = model.act(torch.randn(500, 3))[0].numpy()
    converted = np.stack([model.env_action(a) for a in actions])
    assert np.all(converted >= space.low)
    assert np.all(converted <= space.high)
    assert converted.min(0)[0] < -1.5
    assert converted.max(0)[0] > 1.5  # the whole range is reachable
    with pytest.raises(ValueError, match="model.bound"):
        ModelSettings.defaults(bound="sigmoid")
