"""A Dict observation with image parts: a Nature CNN per image part beside the vector parts (stable-baselines3's
MultiInputPolicy), the images kept uint8 until the forward, the vector part normalized and masked."""

from __future__ import annotations

import gymnasium
import numpy as np
import torch
from torch import nn

from lamarckian.model import ActorCritic, ModelSettings
from lamarckian.model.network import MixedEncoder, split_mixed

SPACE = gymnasium.spaces.Dict({"camera": gymnasium.spaces.Box(0, 255, (64, 64, 3), np.uint8),
                               "speed": gymnasium.spaces.Box(-1, 1, (5,), np.float32)})


def network(space: gymnasium.Space = SPACE) -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic(space, gymnasium.spaces.Discrete(3), ModelSettings.defaults(hidden=(32,)))


def test_a_cnn_reads_the_image_part_and_the_mlp_both():
    encoder = network().actor_encoder
    assert isinstance(encoder, MixedEncoder)
    first_conv, first_linear = encoder.cnns[0][0], encoder.mlp[0]
    assert (first_conv.in_channels, first_linear.in_features) == (3, 5 + 64 * 4 * 4)


def test_rows_are_bytes_that_give_back_the_vector_and_the_frame():
    model = network()
    observation = SPACE.sample()
    row = model.batcher.convert(observation)
    vector, frames = split_mixed(model.batcher, torch.from_numpy(row[None]))
    assert (row.dtype, np.allclose(vector[0].numpy(), observation["speed"]),
            np.array_equal(frames[0][0].numpy(), observation["camera"].transpose(2, 0, 1))) == (np.uint8, True, True)


def test_the_normalizer_learns_the_vector_part_only():
    assert network().observation_normalizer.mean.shape == (5,)


def test_a_mask_beside_an_image_is_honoured():
    space = gymnasium.spaces.Dict({"camera": gymnasium.spaces.Box(0, 255, (36, 36, 1), np.uint8),
                                   "action_mask": gymnasium.spaces.MultiBinary(3)})
    model = network(space)
    row = model.batcher.convert({"camera": np.zeros((36, 36, 1), np.uint8), "action_mask": np.array([0, 0, 1])})
    actions = model.act(torch.from_numpy(np.stack([row] * 100)))[0]
    assert set(actions.tolist()) == {2}


def test_acting_and_scoring_agree():
    model = network()
    batch = torch.from_numpy(model.batcher([SPACE.sample() for _ in range(8)]))
    actions, log_probs, _ = model.act(batch)
    distribution, _ = model(batch)
    assert torch.allclose(model.log_prob(distribution, actions), log_probs, atol=1e-5)


def test_gradients_reach_the_cnn():
    model = network()
    batch = torch.from_numpy(model.batcher([SPACE.sample() for _ in range(4)]))
    distribution, value = model(batch)
    (value.sum() + distribution.logits.sum()).backward()
    conv = model.actor_encoder.cnns[0][0]
    assert isinstance(conv, nn.Conv2d) and conv.weight.grad is not None and conv.weight.grad.abs().sum() > 0
