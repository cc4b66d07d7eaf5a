"""A central critic (model.central_value): the game's global state reaches the critic and never the policy; the
learner can play every seat of a game (rl.shared_seats), one lane per seat."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from lamarckian.config import load
from lamarckian.mdp import create_mdp
from lamarckian.mdp.wrap import CentralState, central_observation_space
from lamarckian.model import ActorCritic, ModelSettings
from lamarckian.rl.algorithms.ppo import PPO, PPOSettings
from lamarckian.rl.fleet.actor import Actor
from lamarckian.rl.segment import Segment
from lamarckian.train import main as train_main


def test_the_policy_never_sees_the_state_the_critic_sees():
    space = gymnasium.spaces.Dict({"observation": gymnasium.spaces.Box(-1, 1, (3,), np.float32),
                                   "state": gymnasium.spaces.Box(-1, 1, (5,), np.float32)})
    torch.manual_seed(0)
    model = ActorCritic(space, gymnasium.spaces.Discrete(4),
                        ModelSettings.defaults(hidden=(16,), central_value=True, normalize_observation=False))
    observations = torch.randn(6, 8)
    changed = observations.clone()
    changed[:, 3:] = torch.randn(6, 5)
    (logits, value), (logits_changed, value_changed) = model.outputs(observations), model.outputs(changed)
    assert torch.equal(logits, logits_changed)
    assert not torch.allclose(value, value_changed)
    with pytest.raises(ValueError, match="model.central_value needs model.shared: false"):
        ModelSettings.defaults(central_value=True, shared=True)
    with pytest.raises(ValueError, match="needs observations"):
        ActorCritic(space["observation"], gymnasium.spaces.Discrete(4), ModelSettings.defaults(central_value=True))


@pytest.mark.parametrize("mdp_config, width", [
    ({"create": "pong"}, 2 * 8),                                                         # every seat's observation
    ({"create": "pettingzoo", "pettingzoo": {"module": "pettingzoo.classic.rps_v2"}}, 2 * 4),
])
def test_the_global_state_is_every_seats_observation_where_the_game_has_none(mdp_config, width):
    config = load([], [f"mdp.create={mdp_config['create']}"])
    merged = {**config["mdp"], **mdp_config, "pettingzoo": {**config["mdp"]["pettingzoo"],
                                                             **mdp_config.get("pettingzoo", {})}}
    mdp = create_mdp(merged, seed=0)
    try:
        space = central_observation_space(mdp)
        assert space["state"].shape == (width,)
        episode = mdp.reset(0, 1)
        observation = CentralState(episode.controllers[1], mdp).get_state()
        seats = [gymnasium.spaces.flatten(spec.observation, mdp.observe(seat)) for seat, spec in
                 enumerate(mdp.describe())]
        assert np.allclose(observation["state"], np.concatenate(seats))
        assert np.array_equal(observation["observation"], episode.controllers[1].get_state())
        for tick in episode.ticks:
            tick.close()
    finally:
        mdp.close()


def test_the_learner_plays_every_seat_with_a_central_critic(tmp_path):
    config = load([], ["rl.shared_seats=true", "model.central_value=true", "model.hidden=[8]", "sample.envs=2",
                       "sample.truncation=4", "mdp.pong.max_steps=12", f"root={tmp_path}"])
    actor = Actor(config, 0, own_process=False)
    try:
        segments = [Segment.from_wire(actor.sample()) for _ in range(4)]
        assert segments[0].observations.shape == (4, 4, 8 + 16)          # 2 environments × 2 seats; own + state
        lanes = segments[0].observations
        assert np.allclose(lanes[:, 0, 8:], lanes[:, 1, 8:])              # the same game's state in both seats' lanes
        assert not np.allclose(lanes[:, 0, :8], lanes[:, 1, :8])
        results = [result for segment in segments for result in segment.results]
        assert results
        assert all(result.opponent == "none" for result in results)
        stats = PPO(actor.model, PPOSettings.defaults()).update(segments, version=0, cost=0)
        assert np.isfinite(stats["loss/value"])
        assert len(actor.evaluate(2)) == 2
    finally:
        actor.close()


@pytest.mark.parametrize("files, changes, message", [
    (["mdp/gym.yml"], ["model.central_value=true"], "model.central_value: GymMDP has no global state"),
    (["mdp/pong.yml"], ["model.central_value=true", "model.shared=true"],
     "model.central_value needs model.shared: false"),
    (["mdp/gym.yml", "rl/dqn.yml"], ["model.central_value=true"], "model.central_value=true applies to rl.algorithm"),
])
def test_bad_central_value_settings_are_one_line(tmp_path, capsys, files, changes, message):
    assert train_main(["-c", *files, "-m", f"root={tmp_path}/run", *changes]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error
    assert len(error.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_game_with_a_state_of_its_own_gives_that_state():
    config = load(["mdp/pettingzoo/spread.yml"], [])
    mdp = create_mdp(config["mdp"], seed=0)
    try:
        assert central_observation_space(mdp)["state"].shape == (54,)          # MPE's state(): 3 × 18
        episode = mdp.reset(0, 1, 2)
        observation = CentralState(episode.controllers[2], mdp).get_state()
        assert np.array_equal(observation["state"], mdp.env.state())
        assert observation["observation"].shape == (18,)
        for tick in episode.ticks:
            tick.close()
    finally:
        mdp.close()
