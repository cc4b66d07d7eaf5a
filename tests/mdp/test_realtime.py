"""The real-time wrapper: actions act one period late, late actions are counted as timeouts and the episode goes on."""

from __future__ import annotations

import asyncio
import time

import gymnasium
import numpy as np
import pytest

from lamarckian.config import load
from lamarckian.mdp import create_mdp
from lamarckian.mdp.gym import GymMDP
from lamarckian.mdp.pong import Pong, PongSettings
from lamarckian.mdp.realtime import RealTimeMDP

PERIOD = 0.02


def play(mdp, steps: int, think: float = 0.0, action=None):
    """Run ``steps`` steps, the policy taking ``think`` seconds per decision; the controller."""
    async def run():
        controller = mdp.reset(0).controllers[0]
        for number in range(steps):
            if not await controller.ready():
                break
            if think:
                time.sleep(think)          # a policy computing (blocking), as a slow network would
            await controller(action(number) if action else np.zeros(1, np.float32))
        return controller

    return asyncio.run(run())


def test_the_packaged_task_is_pendulum_at_20_hz_with_the_action_in_flight():
    config = load(["mdp/realtime/pendulum.yml"], [])
    mdp = create_mdp(config["mdp"], seed=0)
    assert isinstance(mdp, RealTimeMDP)
    assert mdp.period == 0.05
    assert mdp.describe()[0].observation.shape == (4,)
    assert mdp.describe()[0].action.shape == (1,)


def test_each_action_acts_during_the_next_period():
    mdp = RealTimeMDP(GymMDP.make("Pendulum-v1", seed=3), PERIOD)
    reference = gymnasium.make("Pendulum-v1")
    first, _ = reference.reset(seed=3)
    actions = [np.array([a], np.float32) for a in (2.0, -1.0, 0.5, 1.5)]
    controller = play(mdp, len(actions), action=lambda number: actions[number])
    expected = first
    for applied in [np.zeros(1, np.float32), *actions[:-1]]:    # the first period runs the idle action
        expected = reference.step(applied)[0]
    np.testing.assert_allclose(controller.get_state(), np.concatenate([expected, actions[-1]]), rtol=1e-6)
    periods = np.asarray(mdp.periods)
    assert controller.timeouts == 0
    assert len(periods) == len(actions)
    assert np.all(periods > PERIOD * 0.5)
    assert np.median(periods) == pytest.approx(PERIOD, abs=0.01)


def test_a_slow_policy_is_counted_and_the_episode_goes_on():
    mdp = RealTimeMDP(GymMDP.make("Pendulum-v1", seed=0), PERIOD)
    controller = play(mdp, 6, think=PERIOD * 2)
    assert controller.timeouts == 6
    assert controller.steps == 6
    assert controller.get_result()["objectives"]["timeouts"] == 6.0
    assert np.median(mdp.periods) >= PERIOD * 1.5     # each late step was stretched


def test_discrete_actions_travel_one_hot():
    mdp = RealTimeMDP(GymMDP.make("CartPole-v1", seed=0), PERIOD)
    assert mdp.describe()[0].observation.shape == (6,)
    controller = play(mdp, 2, action=lambda number: 1)
    np.testing.assert_array_equal(controller.get_state()[4:], [0.0, 1.0])


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="mdp.realtime.period"):
        RealTimeMDP(GymMDP.make("Pendulum-v1"), 0.0)
    with pytest.raises(ValueError, match="single-player"):
        RealTimeMDP(Pong(PongSettings.defaults()), PERIOD)
