"""TD3: a new off-policy algorithm is its own module, its settings and one registry line; it learns Pendulum."""

from __future__ import annotations

import csv

import gymnasium
import numpy as np
import pytest
import torch

from lamarckian.config import ConfigError, load
from lamarckian.model import ModelSettings
from lamarckian.rl.algorithms.td3 import TD3, DeterministicPolicy
from lamarckian.rl.algorithms.td3_settings import TD3Settings
from lamarckian.train import main as train_main

PENDULUM = ["mdp/gym.yml", "mdp/gym/pendulum.yml", "rl/td3.yml"]


@pytest.fixture(scope="module")
def fitness(tmp_path_factory) -> list[float]:
    """The deterministic evaluations of one short run (8 k env steps, 64x64 networks), in order."""
    root = tmp_path_factory.mktemp("td3")
    code = train_main(["-c", *PENDULUM, "-m", f"root={root}", "seed=1", "model.hidden=[64, 64]",
                       "evaluator.progress=false", "evaluator.terminate=self.cost >= 8000"])
    assert code == 0
    with open(root / "evaluations.csv", newline="") as stream:
        return [float(row["fitness"]) for row in csv.DictReader(stream)]


def test_the_untrained_policy_lets_the_pendulum_hang(fitness):
    assert fitness[0] < -900


def test_td3_learns_to_swing_the_pendulum_up_within_8k_env_steps(fitness):
    assert max(fitness[-3:]) > -300


def test_the_targets_take_the_smaller_critic_of_a_smoothed_target_action():
    torch.manual_seed(0)
    observation = gymnasium.spaces.Box(-1, 1, (3,), np.float32)
    action = gymnasium.spaces.Box(-2, 2, (1,), np.float32)
    policy = DeterministicPolicy(observation, action, ModelSettings.defaults(hidden=(8,)), noise=0.1)
    update = TD3(policy, ModelSettings.defaults(hidden=(8,)), TD3Settings.defaults(target_noise=0.0), 1e-3, None)
    batch = {"next_observations": torch.randn(5, 3), "returns": torch.randn(5), "bootstraps": torch.full((5,), 0.9)}
    following = update.target_critics(batch["next_observations"], update.target_policy(batch["next_observations"]))
    expected = batch["returns"] + 0.9 * following.min(0).values
    assert torch.allclose(update.targets(batch), expected)


def test_acting_noise_stays_in_the_bounds_and_evaluation_has_none():
    policy = DeterministicPolicy(gymnasium.spaces.Box(-1, 1, (3,), np.float32),
                                 gymnasium.spaces.Box(-1, 1, (2,), np.float32), ModelSettings.defaults(hidden=(8,)),
                                 noise=5.0)
    observations = torch.randn(64, 3)
    noisy = policy.act(observations, generator=torch.Generator().manual_seed(0))[0]
    assert bool((noisy.abs() <= 1.0).all())
    assert torch.equal(policy.act(observations, deterministic=True)[0], policy(observations))


def test_a_discrete_action_space_is_refused_in_one_line(tmp_path, capsys):
    code = train_main(["-c", "mdp/gym.yml", "mdp/gym/cartpole.yml", "rl/td3.yml", "-m", f"root={tmp_path}"])
    assert "rl.algorithm=td3 needs a bounded continuous (Box) action space" in capsys.readouterr().err
    assert code == 2


def test_a_td3_setting_out_of_range_is_refused_by_load():
    with pytest.raises(ConfigError, match=r"rl.td3.noise_clip=-1.0: out of range \(from -m rl.td3.noise_clip=-1\)"):
        load(PENDULUM, ["rl.td3.noise_clip=-1"])
