"""A vectorized population's PPO update equals P separate PPO updates on the same batches."""

from __future__ import annotations

import copy

import gymnasium
import numpy as np
import pytest
import torch

from lamarckian.model import ActorCritic, ModelSettings
from lamarckian.rl.algorithms.population_ppo import PopulationPPO
from lamarckian.rl.algorithms.ppo import PPO, PPOSettings
from lamarckian.rl.segment import Segment


def segment(model: ActorCritic, seed: int, steps: int = 16, lanes: int = 8) -> Segment:
    """A fixed batch: random observations, the model's own actions, random rewards and episode ends."""
    random = np.random.default_rng(seed)
    observations = random.normal(size=(steps, lanes, 3)).astype(np.float32)
    actions, log_probs, values = model.act(torch.from_numpy(observations.reshape(-1, 3)),
                                           generator=torch.Generator().manual_seed(seed))
    shape = (steps, lanes)
    return Segment(observations=observations, actions=actions.numpy().reshape(*shape, *actions.shape[1:]),
                   log_probs=log_probs.numpy().reshape(shape),
                   values=np.concatenate([values.numpy().reshape(shape), np.zeros((1, lanes), np.float32)]),
                   rewards=random.normal(size=shape).astype(np.float32), dones=random.random(shape) < 0.1,
                   truncated=np.zeros(shape, bool), final_values=np.zeros(shape, np.float32), version=0)


@pytest.mark.parametrize("action_space", [gymnasium.spaces.Discrete(3),
                                          gymnasium.spaces.Box(-1, 1, (2,), np.float32)])
def test_four_stacked_members_take_the_same_update_as_four_learners(action_space):
    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    """Members differ in every per-member setting: learning rate, clip range, loss weights, discount, GAE λ."""
    own = [{"lr": lr, "clip": clip, "entropy": entropy, "critic": critic, "discount": discount, "gae": gae}
           for lr, clip, entropy, critic, discount, gae in zip([3e-4, 1e-3, 3e-3, 1e-2], [0.1, 0.2, 0.3, 0.2],
                                                                [0.0, 0.01, 0.05, 0.0], [0.5, 1.0, 2.0, 1.0],
                                                                [0.9, 0.99, 0.95, 0.999], [0.9, 0.95, 1.0, 0.8])]
    settings = [PPOSettings.defaults(epochs=2, minibatches=4, **values) for values in own]
    seeds = [11, 12, 13, 14]
    members = []
    for seed in range(4):
        torch.manual_seed(seed)
        members.append(ActorCritic(observation_space, action_space, ModelSettings.defaults(hidden=(16, 16))))
    separate = [copy.deepcopy(m) for m in members]
    batches = [segment(m, seed) for seed, m in enumerate(members)]
    for model, member_settings, seed, data in zip(separate, settings, seeds, batches):
        PPO(model, member_settings, seed=seed).update([data], 0, 0)
    population = PopulationPPO(members, settings, seeds)
    prepared = [PPO(m, s).prepare([data], 0) for m, s, data in zip(members, settings, batches)]
    stats = population.optimize(prepared)
    worst = 0.0
    for stacked, alone in zip(members, separate):
        for (name, a), b in zip(stacked.named_parameters(), alone.parameters()):
            worst = max(worst, float((a - b).abs().max().detach()))
        assert any(not torch.equal(a, b) for a, b in zip(stacked.parameters(), members[0].parameters())) \
            or stacked is members[0]
    assert worst <= 1e-5, worst
    assert len(stats) == 4
    assert all("grad_norm" in s and np.isfinite(s["loss/policy"]) for s in stats)
    assert not torch.equal(next(members[0].parameters()), next(members[3].parameters()))


def test_members_of_different_architectures_are_refused():
    space = gymnasium.spaces.Box(-1, 1, (3,), np.float32)
    small = ActorCritic(space, gymnasium.spaces.Discrete(2), ModelSettings.defaults(hidden=(8,)))
    large = ActorCritic(space, gymnasium.spaces.Discrete(2), ModelSettings.defaults(hidden=(16,)))
    with pytest.raises(ValueError, match="one architecture"):
        PopulationPPO([small, large], [PPOSettings.defaults()] * 2, [0, 1])


@pytest.mark.parametrize("action_space", [gymnasium.spaces.Discrete(3),
                                          gymnasium.spaces.Box(-1, 1, (2,), np.float32)])
def test_one_forward_acts_for_every_member(action_space):
    """Sampled actions come with each member's own log-probabilities and values (the rollout's forward)."""
    observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    members = []
    for seed in range(3):
        torch.manual_seed(seed)
        members.append(ActorCritic(observation_space, action_space, ModelSettings.defaults(hidden=(16,))))
    for member in members:                                    # normalizers that differ between members
        member.observation_normalizer.update(torch.randn(50, 3) * (1 + len(members)))
    population = PopulationPPO(members, [PPOSettings.defaults()] * 3, [0, 1, 2])
    population.read_buffers()
    observations = torch.randn(3, 32, 3)
    actions, log_probs, values = population.act(observations, torch.Generator().manual_seed(5))
    assert log_probs.shape == values.shape == (3, 32)
    assert actions.shape[:2] == (3, 32)
    for index, member in enumerate(members):
        distribution, normalized = member(observations[index])
        expected = member.log_prob(distribution, actions[index])
        assert torch.allclose(log_probs[index], expected, atol=1e-5)
        assert torch.allclose(values[index], member.denormalize_value(normalized), atol=1e-5)


def test_members_must_share_the_settings_that_shape_the_update():
    space = gymnasium.spaces.Box(-1, 1, (3,), np.float32)
    members = [ActorCritic(space, gymnasium.spaces.Discrete(2), ModelSettings.defaults(hidden=(8,))) for _ in range(2)]
    with pytest.raises(ValueError, match="share the PPO setting 'epochs'"):
        PopulationPPO(members, [PPOSettings.defaults(epochs=2), PPOSettings.defaults(epochs=3)], [0, 1])


def test_each_member_follows_the_adaptive_schedule_by_its_own_kl():
    """A member whose update moved its policy far (large lr, KL above twice the target) slows down; one whose KL
    stayed under half the target speeds up: each by its own KL and target, as PPO alone does."""
    space = gymnasium.spaces.Box(-np.inf, np.inf, (3,), np.float32)
    members, settings = [], []
    for seed, lr in enumerate([1e-6, 5e-2]):
        torch.manual_seed(seed)
        members.append(ActorCritic(space, gymnasium.spaces.Discrete(3), ModelSettings.defaults(hidden=(16,))))
        settings.append(PPOSettings.defaults(lr=lr, lr_schedule="adaptive", kl_target=0.01, epochs=4))
    separate = [PPO(copy.deepcopy(m), s, seed=seed) for seed, (m, s) in enumerate(zip(members, settings))]
    batches = [segment(m, seed) for seed, m in enumerate(members)]
    expected = [ppo.update([data], 0, 0)["lr"] for ppo, data in zip(separate, batches)]
    population = PopulationPPO(members, settings, [0, 1])
    stats = population.optimize([PPO(m, s).prepare([data], 0) for m, s, data in zip(members, settings, batches)])
    assert [s["lr"] for s in stats] == pytest.approx(expected)
    assert stats[0]["lr"] > 1e-6
    assert stats[1]["lr"] < 5e-2
