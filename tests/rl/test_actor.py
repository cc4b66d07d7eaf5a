"""The sampling Actor in-process: one batched forward per round, segment layout, versions, evaluation."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from lamarckian.config import load
from lamarckian.model import to_blob
from lamarckian.rl.actor import Actor


class Exploding(gymnasium.Env):
    observation_space = gymnasium.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        if self.t == 5:
            raise RuntimeError("the environment broke")
        return np.zeros(1, np.float32), 0.0, False, False, {}


gymnasium.register("LamarckianExploding-v0", entry_point=Exploding)


def cartpole(**edits):
    return load(["mdp/gym.yml"], [f"{k}={v}" for k, v in edits.items()])


def test_every_round_is_one_batched_forward():
    actor = Actor(cartpole(**{"sample.envs": 16, "sample.truncation": 32}), 0)
    for _ in range(4):
        segment = actor.sample()
    statistics = actor.statistics()
    assert statistics["batch"] >= 12  # close to 16 environments per forward (episode ends shift a few)
    assert segment["observations"].shape == (32, 16, 4) and segment["values"].shape == (33, 16)
    assert np.all(segment["rewards"] == 1.0)
    finished = [r for r in segment["results"]]
    assert all(r["fitness"] == r["objectives"]["length"] for r in finished)
    assert segment["dones"].sum() >= len(finished) - 16  # episode ends appear in the lanes


def test_segments_carry_the_weight_version():
    config = cartpole(**{"sample.envs": 4, "sample.truncation": 8})
    actor = Actor(config, 0)
    assert actor.sample()["version"] == 0
    other = Actor(config, 1)
    assert actor.set_weights(7, to_blob(other.model)) == 7
    actor.sample()  # may still hold steps decided before the update
    assert actor.sample()["version"] == 7


def test_seeds_make_actors_reproducible_and_distinct():
    config = cartpole(**{"sample.envs": 2, "sample.truncation": 16})
    first, second, third = Actor(config, 0), Actor(config, 0), Actor(config, 1)
    a, b, c = first.sample(), second.sample(), third.sample()
    assert np.array_equal(a["observations"], b["observations"]) and np.array_equal(a["actions"], b["actions"])
    assert not np.array_equal(a["observations"], c["observations"])


def test_pong_self_play_and_rule_opponents():
    config = load([], ["sample.envs=8", "sample.truncation=16", "rl.opponent.rule=0.5"])
    actor = Actor(config, 0)
    results = []
    while len({r["opponent"] for r in results}) < 2:
        results += actor.sample()["results"]
    assert {r["opponent"] for r in results} == {"rule", "self"}
    evaluation = actor.evaluate(6, "rule")
    assert len(evaluation) == 6 and all(r["opponent"] == "rule" and r["win"] in (0.0, 0.5, 1.0) for r in evaluation)


def test_environment_failure_surfaces_from_sample():
    actor = Actor(load(["mdp/gym.yml"], ["mdp.gym.id=LamarckianExploding-v0", "sample.envs=2"]), 0)
    with pytest.raises(RuntimeError, match="the environment broke"):
        actor.sample()
    with pytest.raises(RuntimeError, match="the environment broke"):
        actor.sample()  # and keeps saying so rather than hanging
