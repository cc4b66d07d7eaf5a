"""Factorised action spaces (MultiDiscrete, MultiBinary, Dict and Tuple of parts): one head per part, the parts'
log-probabilities and entropies summed, actions the environment takes, masks per choice."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from lamarckian.model import ActorCritic
from lamarckian.model.actions import flatten

SPACES = {
    "multidiscrete": gymnasium.spaces.MultiDiscrete([3, 2], start=[1, 0]),
    "multibinary": gymnasium.spaces.MultiBinary(4),
    "dict": gymnasium.spaces.Dict({"move": gymnasium.spaces.Discrete(5), "aim": gymnasium.spaces.Box(-1, 1, (2,)),
                                   "buttons": gymnasium.spaces.MultiBinary(2)}),
    "tuple": gymnasium.spaces.Tuple((gymnasium.spaces.MultiDiscrete([[2, 3], [4, 2]]),
                                     gymnasium.spaces.Box(0, 2, (1,)))),
    "single choices": gymnasium.spaces.MultiDiscrete([6, 3, 1, 2, 1, 1]),     # nasim's TinyVA-v0: parts of one choice
}
OBSERVATION = gymnasium.spaces.Box(-1, 1, (3,), np.float32)


def network(space: gymnasium.Space) -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic(OBSERVATION, space)


@pytest.mark.parametrize("name", SPACES)
def test_sampled_actions_belong_to_the_space(name):
    space = SPACES[name]
    model = network(space)
    actions = model.act(torch.rand(64, 3) * 2 - 1)[0].numpy()
    assert all(space.contains(model.env_action(row)) for row in actions)


@pytest.mark.parametrize("name", SPACES)
def test_acting_log_probabilities_are_the_distributions(name):
    model = network(SPACES[name])
    observations = torch.rand(32, 3)
    actions, log_probs, _ = model.act(observations)
    distribution, _ = model(observations)
    assert torch.allclose(model.log_prob(distribution, actions), log_probs, atol=1e-5)


def test_a_factorised_log_probability_is_the_sum_of_its_parts():
    model = network(SPACES["multidiscrete"])
    observations = torch.rand(8, 3)
    out = model.outputs(observations)[0]
    actions = model.act(observations)[0]
    first, second = torch.log_softmax(out[:, :3], -1), torch.log_softmax(out[:, 3:], -1)
    expected = first.gather(1, actions[:, :1]).squeeze(1) + second.gather(1, actions[:, 1:]).squeeze(1)
    assert torch.allclose(model.log_prob(model.distribution(out), actions), expected, atol=1e-6)


def test_a_factorised_entropy_is_the_sum_of_its_parts():
    model = network(SPACES["dict"])
    out = model.outputs(torch.rand(4, 3))[0]
    move = torch.distributions.Categorical(logits=out[:, :5]).entropy()
    buttons = sum(torch.distributions.Categorical(logits=out[:, 5 + 2 * i:7 + 2 * i]).entropy() for i in range(2))
    aim = torch.distributions.Normal(out[:, 9:], model.log_std.exp()).entropy().sum(-1)
    assert torch.allclose(model.entropy(model.distribution(out)), move + buttons + aim, atol=1e-5)


def test_deterministic_actions_take_each_parts_most_likely_choice():
    model = network(SPACES["multidiscrete"])
    observations = torch.rand(16, 3)
    out = model.outputs(observations)[0]
    expected = torch.stack([out[:, :3].argmax(-1), out[:, 3:].argmax(-1)], -1)
    assert torch.equal(model.act(observations, deterministic=True)[0], expected)


def test_the_start_of_a_multidiscrete_is_added_back():
    model = network(SPACES["multidiscrete"])
    assert model.env_action(np.array([0, 1])).tolist() == [1, 1]


def test_a_nested_multidiscrete_keeps_its_shape():
    model = network(SPACES["tuple"])
    action = model.env_action(np.array([1, 2, 3, 1, 0.5], np.float32))
    assert action[0].tolist() == [[1, 2], [3, 1]]


def test_a_mask_forbids_choices_of_every_part():
    observation = gymnasium.spaces.Dict({"obs": gymnasium.spaces.Box(-1, 1, (2,)),
                                         "action_mask": gymnasium.spaces.MultiBinary(5)})
    model = ActorCritic(observation, gymnasium.spaces.MultiDiscrete([3, 2]))
    row = model.batcher.convert({"obs": [0.1, 0.2], "action_mask": [0, 1, 0, 1, 0]})   # choice 1, then choice 0
    actions = model.act(torch.from_numpy(np.stack([row] * 256)))[0]
    assert torch.equal(actions, torch.tensor([[1, 0]] * 256))


def test_a_mask_of_the_wrong_width_is_refused():
    observation = gymnasium.spaces.Dict({"obs": gymnasium.spaces.Box(-1, 1, (2,)),
                                         "action_mask": gymnasium.spaces.MultiBinary(4)})
    with pytest.raises(ValueError, match="action_mask has 4 flags, the action space .* has 5 choices"):
        ActorCritic(observation, gymnasium.spaces.MultiDiscrete([3, 2]))


def test_an_unsupported_leaf_is_named():
    with pytest.raises(TypeError, match="Text"):
        flatten(gymnasium.spaces.Dict({"say": gymnasium.spaces.Text(5)}))


def test_a_multidiscrete_observation_is_one_hot_per_element():
    model = ActorCritic(gymnasium.spaces.MultiDiscrete([3, 2], start=[1, 0]), gymnasium.spaces.Discrete(2))
    assert model.batcher.convert(np.array([3, 0])).tolist() == [0, 0, 1, 1, 0]
