"""Stacked policies give what P separate forwards give."""

from __future__ import annotations

import gymnasium
import numpy as np
import torch

from lamarckian.model import ActorCritic, ModelSettings, to_blob
from lamarckian.model.stacked import StackedPolicies


def population(count: int, action_space: gymnasium.Space) -> list[ActorCritic]:
    space = gymnasium.spaces.Box(-1, 1, (6,), np.float32)
    models = []
    for seed in range(count):
        torch.manual_seed(seed)
        model = ActorCritic(space, action_space, ModelSettings.defaults(hidden=(32, 32)))
        model.observation_normalizer.update(torch.randn(50, 6) * (seed + 1))
        model.value_normalizer.update(torch.randn(50) * 5 + seed)
        models.append(model)
    return models


def test_outputs_equal_separate_forwards():
    models = population(7, gymnasium.spaces.Discrete(3))
    stacked = StackedPolicies(models[0], [to_blob(m) for m in models])
    observations = torch.randn(7, 11, 6)
    out, values = stacked.outputs(observations)
    for index, model in enumerate(models):
        expected_out, expected_value = model.outputs(observations[index])
        assert torch.allclose(out[index], expected_out, atol=1e-5)
        assert torch.allclose(values[index], model.denormalize_value(expected_value), atol=1e-5)


def test_indexed_actions_match_each_policy():
    models = population(5, gymnasium.spaces.Box(-1, 1, (2,), np.float32))
    stacked = StackedPolicies(models[0], [to_blob(m) for m in models])
    observations = torch.randn(40, 6)
    policy = torch.randint(0, 5, (40,), generator=torch.Generator().manual_seed(0))
    actions = stacked.act(observations, policy)
    for n in range(40):
        expected = models[int(policy[n])].outputs(observations[n:n + 1])[0][0]
        assert torch.allclose(actions[n], expected, atol=1e-5)


def test_cnn_policies_go_through_vmap():
    image = gymnasium.spaces.Box(0, 255, (36, 36, 3), np.uint8)
    models = []
    for seed in range(3):
        torch.manual_seed(seed)
        models.append(ActorCritic(image, gymnasium.spaces.Discrete(4), ModelSettings.defaults(hidden=(16,))))
    stacked = StackedPolicies(models[0], [to_blob(m) for m in models])
    frames = torch.randint(0, 256, (3, 2, 3, 36, 36), dtype=torch.uint8)
    out, _ = stacked.outputs(frames)
    for index, model in enumerate(models):
        assert torch.allclose(out[index], model.outputs(frames[index])[0], atol=1e-5)


def test_a_row_mask_picks_mean_actions_for_some_rows_and_samples_the_others():
    for space in (gymnasium.spaces.Box(-1, 1, (2,), np.float32), gymnasium.spaces.Discrete(3)):
        models = population(3, space)
        stacked = StackedPolicies(models[0], [to_blob(m) for m in models])
        observations = torch.randn(300, 6)
        policy = torch.arange(300) % 3
        mask = torch.arange(300) < 150
        mean = stacked.act(observations, policy, deterministic=True)
        mixed = stacked.act(observations, policy, deterministic=mask, generator=torch.Generator().manual_seed(1))
        assert torch.equal(mixed[mask], mean[mask])                   # masked rows: exactly the mean action
        differs = (mixed[~mask] != mean[~mask]).reshape(150, -1).any(-1)
        assert differs.float().mean() > 0.3                           # the others are sampled


def masked_population(count: int, action_space: gymnasium.Space, flags: int) -> list[ActorCritic]:
    space = gymnasium.spaces.Dict({"obs": gymnasium.spaces.Box(-1, 1, (3,), np.float32),
                                   "action_mask": gymnasium.spaces.MultiBinary(flags)})
    models = []
    for seed in range(count):
        torch.manual_seed(seed)
        models.append(ActorCritic(space, action_space, ModelSettings.defaults(hidden=(16,))))
    return models


def test_stacked_opponents_never_choose_a_masked_action():
    models = masked_population(3, gymnasium.spaces.Discrete(4), 4)
    stacked = StackedPolicies(models[0], [to_blob(m) for m in models])
    row = models[0].batcher.convert({"obs": [0.5, -0.5, 0.1], "action_mask": [0, 0, 1, 0]})
    observations = torch.from_numpy(np.stack([row] * 300))
    policy = torch.arange(300) % 3
    sampled = stacked.act(observations, policy, deterministic=False, generator=torch.Generator().manual_seed(0))
    greedy = stacked.act(observations, policy, deterministic=True)
    assert set(torch.cat([sampled, greedy]).tolist()) == {2}


def test_stacked_factorised_actions_respect_each_parts_mask():
    models = masked_population(2, gymnasium.spaces.MultiDiscrete([3, 2]), 5)
    stacked = StackedPolicies(models[0], [to_blob(m) for m in models])
    row = models[0].batcher.convert({"obs": [0.5, -0.5, 0.1], "action_mask": [1, 0, 0, 0, 1]})
    observations = torch.from_numpy(np.stack([row] * 200))
    actions = stacked.act(observations, torch.arange(200) % 2, deterministic=False)
    assert actions.tolist() == [[0, 1]] * 200
