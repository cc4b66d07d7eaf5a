"""gymnasium (discrete, box, dict) and PettingZoo adapters; frame skip and statistics wrappers."""

from __future__ import annotations

import asyncio

import gymnasium
import numpy as np
import pytest

from lamarckian.mdp import create_mdp, wrap_controller
from lamarckian.mdp.gym import GymMDP
from lamarckian.mdp.pettingzoo import ParallelMDP
from lamarckian.mdp.wrap import FrameSkip, Statistics


class DictEnv(gymnasium.Env):
    """A tiny environment with a Dict observation: reward 1 when the action matches the hidden bit."""

    observation_space = gymnasium.spaces.Dict({"position": gymnasium.spaces.Box(-1, 1, (2,), np.float32),
                                               "bit": gymnasium.spaces.Discrete(2)})
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.bit = 0, int(self.np_random.integers(2))
        return {"position": np.zeros(2, np.float32), "bit": self.bit}, {}

    def step(self, action):
        self.t += 1
        reward = float(action == self.bit)
        return {"position": np.full(2, self.t / 10, np.float32), "bit": self.bit}, reward, self.t >= 10, False, {}


gymnasium.register("LamarckianDictTest-v0", entry_point=DictEnv)


def run_episode(mdp, policy, players=(0,)):
    episode = mdp.reset(*players)
    controllers = [wrap_controller(c, {"frame_skip": 1, "idle_action": 0}) for c in episode.controllers]
    rewards = []

    async def player(controller):
        while not controller.done:
            await controller(policy(controller.get_state()))
            rewards.append(controller.get_reward())

    async def run():
        await asyncio.gather(*(player(c) for c in controllers), *episode.ticks)

    asyncio.run(run())
    return controllers, rewards


def test_cartpole_discrete_and_seeding():
    first = run_episode(GymMDP.make("CartPole-v1", seed=3), lambda o: 0)
    second = run_episode(GymMDP.make("CartPole-v1", seed=3), lambda o: 0)
    assert first[1] == second[1]
    assert len(first[1]) > 5
    result = first[0][0].get_result()
    assert result["fitness"] == sum(first[1])
    assert result["objectives"]["lazy"] == 1.0
    assert not first[0][0].truncated


def test_pendulum_box_is_truncated_and_clipped():
    controllers, rewards = run_episode(GymMDP.make("Pendulum-v1", seed=0), lambda o: np.array([100.0], np.float32))
    assert len(rewards) == 200
    assert controllers[0].truncated  # the time limit, not a terminal state
    assert all(r <= 0 for r in rewards)


def test_dict_observations():
    mdp = GymMDP.make("LamarckianDictTest-v0", seed=0)
    controllers, rewards = run_episode(mdp, lambda o: o["bit"])
    assert rewards == [1.0] * 10
    assert isinstance(mdp.describe()[0].observation, gymnasium.spaces.Dict)


def test_unknown_gym_id_is_a_value_error():
    with pytest.raises(ValueError, match="mdp.gym.id='Nope-v9'"):
        GymMDP.make("Nope-v9")


def test_pettingzoo_parallel_game():
    mdp = ParallelMDP("pettingzoo.classic.rps_v2", seed=0)
    assert len(mdp) == 2
    controllers, rewards = run_episode(mdp, lambda o: 0, players=(0, 1))
    assert controllers[0].done
    assert sum(rewards) == 0  # rock against rock: ties
    with pytest.raises(ValueError, match="must be a module under pettingzoo"):
        ParallelMDP("os")


def test_frame_skip_sums_rewards():
    mdp = GymMDP.make("CartPole-v1", seed=1)
    episode = mdp.reset(0)
    skipping = Statistics(FrameSkip(episode.controllers[0], 4), idle_action=None)

    async def run():
        steps = 0
        while not skipping.done:
            await skipping(1)
            steps += 1
            assert skipping.get_reward() <= 4.0
        return steps

    decisions = asyncio.run(run())
    result = skipping.get_result()
    assert result["objectives"]["length"] == decisions
    assert result["fitness"] == result["objectives"]["return"] > decisions  # several env steps per decision
    assert result["objectives"]["lazy"] == 0.0


def test_factory_refuses_unknown_kind():
    with pytest.raises(ValueError, match="mdp.create='chess'"):
        create_mdp({"create": "chess"})
