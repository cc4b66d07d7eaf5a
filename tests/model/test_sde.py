"""Generalized state-dependent exploration (``model.sde``): acting and learning agree on the log-probabilities,
the exploration draws are held for ``sde`` steps of an environment, and what cannot explore that way is refused."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from lamarckian.model import ActorCritic, ModelSettings
from lamarckian.model.blob import to_blob
from lamarckian.model.stacked import StackedPolicies
from lamarckian.rl.acting import StateDependentPolicy, acting_policy

OBSERVATIONS = gymnasium.spaces.Box(-1, 1, (3,), np.float32)
ACTIONS = gymnasium.spaces.Box(-2, 2, (2,), np.float32)


def network(every: int = 4) -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic(OBSERVATIONS, ACTIONS, ModelSettings.defaults(hidden=(8,), sde=every, log_std=-0.5))


def test_the_acting_log_probability_is_the_learners():
    model = network()
    observation = torch.randn(5, 3)
    action, log_prob, _ = model.act_sde(observation, torch.randn(5, 8, 2))
    learned = model.log_prob(model(observation)[0], action)
    assert torch.allclose(log_prob, learned, atol=1e-5)


def test_the_standard_deviation_depends_on_the_state():
    model = network()
    deviations = model(torch.tensor([[0.0, 0.0, 0.0], [1.0, -1.0, 1.0]]))[0].stddev
    assert not torch.allclose(deviations[0], deviations[1])


def actions_of_one_environment(steps: int) -> list[np.ndarray]:
    server = StateDependentPolicy(network(every=3), torch.Generator().manual_seed(1))
    observation = np.full(3, 0.5, np.float32)
    return [server.serve([(observation, 7)])[0][0] for _ in range(steps)]


def test_an_environments_draws_are_held_for_sde_steps():
    actions = actions_of_one_environment(3)
    assert np.allclose(actions[0], actions[2])


def test_an_environments_draws_are_renewed_after_sde_steps():
    actions = actions_of_one_environment(4)
    assert not np.allclose(actions[0], actions[3])


def test_environments_explore_with_their_own_draws():
    server = StateDependentPolicy(network(), torch.Generator().manual_seed(1))
    observation = np.full(3, 0.5, np.float32)
    first, second = server.serve([(observation, 0), (observation, 1)])
    assert not np.allclose(first[0], second[0])


def test_sampling_acts_state_dependently_and_evaluation_does_not():
    model = network()
    kinds = (type(acting_policy(model)).__name__, type(acting_policy(model, deterministic=True)).__name__)
    assert kinds == ("StateDependentPolicy", "Policy")


def test_a_recurrent_network_is_refused():
    with pytest.raises(ValueError, match="model.sde=4"):
        ModelSettings.defaults(sde=4, recurrent="lstm")


def test_stacked_policies_are_refused():
    model = network()
    with pytest.raises(ValueError, match="model.sde=4: stacked policies"):
        StackedPolicies(model, [to_blob(model)])
