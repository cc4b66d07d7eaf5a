"""PPO pieces against straightforward references: GAE, V-trace weights, bootstrapping, the clipped loss."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from lamarckian.model import ActorCritic, ModelSettings
from lamarckian.rl.algorithms import ppo as ppo_module
from lamarckian.rl.algorithms.ppo import PPO, PPOSettings, ppo_loss, vtrace_advantages, vtrace_policy_advantages
from lamarckian.rl.segment import Segment


def reference_gae(rewards, values, dones, discount, lam):
    """Textbook GAE, one lane, written as plainly as possible."""
    steps = len(rewards)
    advantages = np.zeros(steps)
    running = 0.0
    for t in reversed(range(steps)):
        next_value = 0.0 if dones[t] else values[t + 1]
        delta = rewards[t] + discount * next_value - values[t]
        running = delta + discount * lam * (0.0 if dones[t] else running)
        advantages[t] = running
    return advantages


def test_on_policy_vtrace_is_gae():
    random = np.random.default_rng(0)
    steps, lanes = 50, 3
    rewards = random.normal(size=(steps, lanes))
    values = random.normal(size=(steps + 1, lanes))
    dones = random.random((steps, lanes)) < 0.1
    zeros = torch.zeros(steps, lanes)
    advantages, targets = vtrace_advantages(torch.tensor(rewards), torch.tensor(values), torch.tensor(dones),
                                            zeros, zeros, torch.ones(steps, lanes), 0.97, 0.9, 1.0)
    for lane in range(lanes):
        expected = reference_gae(rewards[:, lane], values[:, lane], dones[:, lane], 0.97, 0.9)
        assert np.allclose(advantages[:, lane].numpy(), expected, atol=1e-6)
    assert torch.allclose(targets, advantages + torch.tensor(values[:-1]))


def test_truncation_bootstraps_from_the_final_value():
    rewards = torch.tensor([[1.0], [1.0]])
    values = torch.tensor([[0.0], [0.0], [5.0]])
    dones = torch.tensor([[True], [False]])
    truncated = torch.tensor([[1.0], [0.0]])
    final_values = torch.tensor([[10.0], [0.0]])
    advantages, _ = vtrace_advantages(rewards, values, dones, truncated, final_values, torch.ones(2, 1), 0.5, 1.0, 1.0)
    assert advantages[0, 0] == pytest.approx(1.0 + 0.5 * 10.0)  # cut by time: bootstrapped, not zero
    assert advantages[1, 0] == pytest.approx(1.0 + 0.5 * 5.0)


def test_stale_steps_are_weighted_and_traces_cut():
    rewards = torch.ones(3, 1)
    values = torch.zeros(4, 1)
    no = torch.zeros(3, 1)
    ratios = torch.tensor([[0.5], [2.0], [1.0]])
    advantages, _ = vtrace_advantages(rewards, values, no.bool(), no, no, ratios, 1.0, 1.0, 1.0)
    # deltas weighted by min(1, ratio): [0.5, 1, 1]; traces λ·min(1, ratio): [0.5, 1, 1]
    assert advantages[:, 0].tolist() == pytest.approx([0.5 + 0.5 * 2.0, 2.0, 1.0])


def test_clipped_surrogate_ignores_pushes_beyond_the_clip():
    model = ActorCritic(gymnasium.spaces.Box(-1, 1, (2,), np.float32), gymnasium.spaces.Discrete(2),
                        ModelSettings.defaults(hidden=(8,), normalize_observation=False))
    observation = torch.randn(4, 2)
    distribution, value = model(observation)
    actions = torch.tensor([0, 1, 0, 1])
    log_probs = model.log_prob(distribution, actions).detach()
    batch = {"observations": observation, "actions": actions, "log_probs": log_probs - 1.0,  # ratio e > 1 + clip
             "advantages": torch.ones(4), "targets": value.detach(), "old_values": value.detach()}
    settings = PPOSettings.defaults(entropy=0.0, normalize_advantage=False)
    loss, stats = ppo_loss(model, batch, settings)
    loss.backward()
    assert stats["clip_fraction"] == 1.0
    assert all(p.grad is None or torch.count_nonzero(p.grad) == 0 for p in model.policy_head.parameters())


@pytest.mark.parametrize("objective", [ppo_loss, ppo_module.vtrace_loss])
def test_the_value_weight_multiplies_the_mean_squared_error(objective):
    """``rl.ac.weight_loss.critic`` × MSE, as the key says (before: × ½ MSE): values 2 off their targets add
    ``critic`` × 4 to the loss."""
    model = ActorCritic(gymnasium.spaces.Box(-1, 1, (2,), np.float32), gymnasium.spaces.Discrete(2),
                        ModelSettings.defaults(hidden=(8,), normalize_observation=False))
    observation = torch.randn(4, 2)
    with torch.no_grad():
        distribution, value = model(observation)
    actions = torch.tensor([0, 1, 0, 1])
    batch = {"observations": observation, "actions": actions, "log_probs": model.log_prob(distribution, actions),
             "advantages": torch.ones(4), "targets": value + 2.0, "old_values": value}
    losses = [objective(model, batch, PPOSettings.defaults(critic=critic, clip_value=None))[0] for critic in (0.0, 0.5)]
    assert float(losses[1] - losses[0]) == pytest.approx(0.5 * 4.0, rel=1e-5)


def test_impala_policy_advantages_by_hand():
    rewards = torch.tensor([[1.0], [0.0], [2.0], [0.5]])
    values = torch.tensor([[0.5], [0.2], [0.1], [0.4], [0.3]])          # T + 1 rows: the last bootstraps
    targets = torch.tensor([[0.7], [0.9], [0.6], [0.8]])                 # V-trace targets v_t
    dones = torch.tensor([[False], [True], [True], [False]])
    truncated = torch.tensor([[0.0], [0.0], [1.0], [0.0]])               # step 2 was cut by a time limit
    final_values = torch.tensor([[0.0], [0.0], [1.5], [0.0]])
    advantages = vtrace_policy_advantages(rewards, values, targets, dones, truncated, final_values, 0.9)
    expected = [1.0 + 0.9 * 0.9 - 0.5,     # r_0 + γ v_1 − V(x_0)
                0.0 - 0.2,                 # terminated: nothing to bootstrap
                2.0 + 0.9 * 1.5 - 0.1,     # cut by the time limit: its last observation's value
                0.5 + 0.9 * 0.3 - 0.4]     # the segment's end: the bootstrap value
    assert advantages[:, 0].tolist() == pytest.approx(expected)


def bandit_segment(model: ActorCritic, steps: int, lanes: int) -> Segment:
    """One-step episodes ``[steps, lanes]`` of a two-armed bandit played by ``model``: action 1 pays 1, action 0
    pays 0 (the observation is always 0)."""
    observations = np.zeros((steps, lanes, 1), np.float32)
    actions, log_probs, _ = model.act(torch.from_numpy(observations.reshape(-1, 1)))
    actions = actions.numpy().reshape(steps, lanes)
    return Segment(observations=observations, actions=actions, log_probs=log_probs.numpy().reshape(steps, lanes),
                   values=np.zeros((steps + 1, lanes), np.float32), rewards=actions.astype(np.float32),
                   dones=np.ones((steps, lanes), bool), truncated=np.zeros((steps, lanes), bool),
                   final_values=np.zeros((steps, lanes), np.float32), version=0)


@pytest.mark.parametrize("objective", ["clip", "vtrace"])
def test_update_improves_a_bandit(objective):
    """Action 1 pays 1, action 0 pays 0: a few updates make action 1 likely (PPO's and IMPALA's objectives)."""
    space = gymnasium.spaces.Box(-1, 1, (1,), np.float32)
    model = ActorCritic(space, gymnasium.spaces.Discrete(2), ModelSettings.defaults(hidden=(8,)))
    ppo = PPO(model, PPOSettings.defaults(lr=0.01, epochs=4, minibatches=2, objective=objective))
    for _ in range(20):
        stats = ppo.update([bandit_segment(model, 16, 8)], version=0, cost=0)
    probability = model(torch.zeros(1, 1))[0].probs[0, 1].item()
    assert probability > 0.9
    assert stats["samples"] == 128


def test_adaptive_and_linear_learning_rates():
    with pytest.raises(ValueError, match="lr_schedule"):
        PPOSettings.defaults(lr_schedule="cosine")
    model = ActorCritic(gymnasium.spaces.Box(-1, 1, (1,), np.float32), gymnasium.spaces.Discrete(2))
    ppo = PPO(model, PPOSettings.defaults(lr=1.0, lr_schedule="linear", lr_horizon=100.0))
    segment = Segment(observations=np.zeros((2, 2, 1), np.float32), actions=np.zeros((2, 2), np.int64),
                      log_probs=np.full((2, 2), np.log(0.5), np.float32), values=np.zeros((3, 2), np.float32),
                      rewards=np.zeros((2, 2), np.float32), dones=np.zeros((2, 2), bool),
                      truncated=np.zeros((2, 2), bool), final_values=np.zeros((2, 2), np.float32), version=0)
    assert ppo.update([segment], 0, cost=75)["lr"] == pytest.approx(0.25)


def test_old_values_are_in_the_statistics_of_the_targets():
    """With a value normalizer, the value clip compares the critic's new output with its old one: both, and the
    targets, must be in the statistics after this batch was folded in (before: old values in the old ones)."""
    space = gymnasium.spaces.Box(-1, 1, (1,), np.float32)
    model = ActorCritic(space, gymnasium.spaces.Discrete(2), ModelSettings.defaults(hidden=(8,), normalize_value=True))
    segment = bandit_segment(model, 16, 8)
    segment.rewards = segment.rewards * 100.0 + 50.0                   # moves the value statistics far
    with torch.no_grad():
        before = model.denormalize_value(model(torch.zeros(1, 1))[1])   # reward units, the old statistics
    batch = PPO(model, PPOSettings.defaults()).prepare([segment], version=0)
    assert torch.allclose(model.denormalize_value(batch["old_values"][:1]), before, atol=1e-4)


def far_moved_statistics() -> ActorCritic:
    """A bandit critic with a value normalizer after one :meth:`PPO.prepare` on a batch whose returns are far from
    its statistics (rewards 50 and 150)."""
    torch.manual_seed(0)
    space = gymnasium.spaces.Box(-1, 1, (1,), np.float32)
    model = ActorCritic(space, gymnasium.spaces.Discrete(2), ModelSettings.defaults(hidden=(8,), normalize_value=True))
    segment = bandit_segment(model, 16, 8)
    segment.rewards = segment.rewards * 100.0 + 50.0
    PPO(model, PPOSettings.defaults()).prepare([segment], version=0)
    return model


def test_the_value_statistics_move_with_a_far_batch():
    model = far_moved_statistics()
    assert float(model.value_normalizer.mean) > 10.0


def test_a_batch_of_images_is_scored_in_chunks_as_it_would_be_whole(monkeypatch):
    torch.manual_seed(0)
    model = ActorCritic(gymnasium.spaces.Box(0, 255, (36, 36, 3), np.uint8), gymnasium.spaces.Discrete(3),
                        ModelSettings.defaults(hidden=(16,)))
    frames = torch.randint(0, 256, (10, 3, 36, 36), dtype=torch.uint8)
    actions = torch.randint(0, 3, (10,))
    whole = ppo_module.score(model, frames, actions, {})
    monkeypatch.setattr(ppo_module, "SCORE_BYTES", 3 * 36 * 36 * 4 * 3)      # three images a chunk
    chunked = ppo_module.score(model, frames, actions, {})
    assert torch.allclose(torch.cat(chunked), torch.cat(whole), atol=1e-6)


def drifted_segment(model: ActorCritic, steps: int, lanes: int, seed: int) -> Segment:
    """A segment ``[steps, lanes]`` acted by ``model`` on observations far from its normalizer's statistics (mean 5,
    standard deviation 3 against 0 and 1), random rewards and episode ends, as fresh data (version 0)."""
    random = np.random.default_rng(seed)
    observations = random.normal(5.0, 3.0, (steps, lanes, 3)).astype(np.float32)
    with torch.no_grad():
        actions, log_probs, values = model.act(torch.from_numpy(observations.reshape(-1, 3)))
        _, _, bootstrap = model.act(torch.from_numpy(random.normal(5.0, 3.0, (lanes, 3)).astype(np.float32)))
    return Segment(observations=observations, actions=actions.numpy().reshape(steps, lanes, 2),
                   log_probs=log_probs.numpy().reshape(steps, lanes),
                   values=np.concatenate([values.numpy().reshape(steps, lanes), bootstrap.numpy()[None]]),
                   rewards=random.normal(size=(steps, lanes)).astype(np.float32),
                   dones=random.random((steps, lanes)) < 0.1, truncated=np.zeros((steps, lanes), bool),
                   final_values=np.zeros((steps, lanes), np.float32), version=0)


def normalized_model() -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic(gymnasium.spaces.Box(-np.inf, np.inf, (3,), np.float32),
                       gymnasium.spaces.Box(-1, 1, (2,), np.float32),
                       ModelSettings.defaults(hidden=(16,), normalize_observation=True, normalize_value=False))


def test_fresh_data_scores_a_ratio_of_one_in_the_first_epoch():
    """At staleness 0 the learner's first epoch sees the actors' own probabilities: the observation normalizer folds
    the batch in after the update, not before scoring it (before: a mean KL of 1.8e-5 here). With lr 0 the weights
    do not move, so the one epoch's mean KL (π_old against π) is 0 to float precision."""
    model = normalized_model()
    ppo = PPO(model, PPOSettings.defaults(lr=0.0, epochs=1, minibatches=1))
    stats = ppo.update([drifted_segment(model, 32, 4, seed=1)], version=0, cost=0)
    assert stats["kl"] < 1e-9


def test_fresh_data_gets_plain_gae_advantages():
    """V-trace's weights are min(ρ̄, π/μ) = 1 on fresh data, so the prepared advantages are exactly GAE's over the
    values the actors reported (before the fix the normalizer's move made the ratios ≠ 1 and shrank them)."""
    model = normalized_model()
    segment = drifted_segment(model, 32, 4, seed=2)
    settings = PPOSettings.defaults()
    batch = PPO(model, settings).prepare([segment], version=0)
    lane_gae = [reference_gae(segment.rewards[:, lane], segment.values[:, lane], segment.dones[:, lane],
                              settings.discount, settings.gae) for lane in range(4)]
    expected = torch.tensor(np.stack(lane_gae, axis=1).reshape(-1), dtype=torch.float32)
    assert torch.allclose(batch["advantages"], expected, atol=1e-4)


def test_the_normalizer_learns_the_batch_after_the_update():
    """The update still folds the batch's observations into the statistics the next weights carry."""
    model = normalized_model()
    PPO(model, PPOSettings.defaults(epochs=1, minibatches=1)).update([drifted_segment(model, 32, 4, seed=3)], 0, 0)
    assert float(model.observation_normalizer.mean.mean()) > 4.0
