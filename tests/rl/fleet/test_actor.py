"""The sampling Actor in-process: one batched forward per round, segment layout, versions, evaluation."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from lamarckian.config import load
from lamarckian.model import to_blob
from lamarckian.rl.fleet.actor import Actor


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
    assert segment["observations"].shape == (32, 16, 4)
    assert segment["values"].shape == (33, 16)
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
    assert np.array_equal(a["observations"], b["observations"])
    assert np.array_equal(a["actions"], b["actions"])
    assert not np.array_equal(a["observations"], c["observations"])


def test_pong_pool_and_rule_opponents():
    config = load([], ["sample.envs=8", "sample.truncation=16", "rl.opponent.rule=0.3"])
    snapshots = {7: to_blob(Actor(config, 5).model), 9: to_blob(Actor(config, 6).model)}
    actor = Actor(config, 0, pools={"": ({7: 0.5, 9: 0.5}, snapshots)})
    results = []
    for _ in range(200):
        results += actor.sample()["results"]
        if len({(r["opponent"], *r["snapshots"]) for r in results}) == 3:
            break
    assert {(r["opponent"], *r["snapshots"]) for r in results} == {("rule",), ("pool", 7), ("pool", 9)}
    assert actor.statistics()["batch"] > 4  # the learner (8 envs) and all pool opponents each in one forward
    actor.set_pool({9: 1.0})  # 7 leaves
    assert actor.pools[""].ids == [9]
    assert list(actor.pools[""].blobs) == [9]
    with pytest.raises(ValueError, match="no weights"):
        actor.set_pool({11: 1.0})
    evaluation = actor.evaluate(6, "rule")
    assert len(evaluation) == 6
    assert all(r["opponent"] == "rule" and r["win"] in (0.0, 0.5, 1.0) for r in evaluation)
    assert len(actor.evaluate(4, "self")) == 4


def test_play_matches_vectorized():
    config = load([], ["sample.envs=4", "mdp.pong.score=1"])
    actor = Actor(config, 0)
    population = [to_blob(Actor(config, seed).model) for seed in range(3)]
    assert actor.set_population(population) == 3
    results = actor.play_matches([[0, 1], [1, 2], [2, 0], [0, 0], [1, 1]])
    assert len(results) == 5
    assert all(len(seats) == 2 for seats in results)
    for seats in results:
        assert seats[0]["win"] + seats[1]["win"] == 1.0  # zero-sum
    mirror = results[3]
    assert mirror[0]["fitness"] == -mirror[1]["fitness"]


def test_environment_failure_surfaces_from_sample():
    actor = Actor(load(["mdp/gym.yml"], ["mdp.gym.id=LamarckianExploding-v0", "sample.envs=2"]), 0)
    with pytest.raises(RuntimeError, match="the environment broke"):
        actor.sample()
    with pytest.raises(RuntimeError, match="the environment broke"):
        actor.sample()  # and keeps saying so rather than hanging


def test_pool_changes_between_segments_never_stall():
    """Episodes running with an old pool and new ones with the new pool are served by their own forwards."""
    import signal

    config = load([], ["sample.envs=8", "sample.truncation=16"])
    snapshots = {7: to_blob(Actor(config, 5).model), 9: to_blob(Actor(config, 6).model)}
    actor = Actor(config, 0, pools={"": ({7: 0.5, 9: 0.5}, snapshots)})
    previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("sampling stalled")))
    signal.alarm(120)
    try:
        for round_number in range(30):
            actor.sample()
            actor.set_pool({9: 1.0} if round_number % 2 else {7: 0.5, 9: 0.5}, snapshots)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)          # no test leaves a handler installed


def test_a_failing_forward_reaches_every_waiting_player():
    import asyncio

    from lamarckian.rl.fleet.inference import BatchedInference

    class Broken:
        def serve(self, items):
            raise RuntimeError("forward failed")

    async def main():
        inference = BatchedInference()
        for _ in range(3):
            inference.register()
        results = await asyncio.gather(*(inference.act(Broken(), np.zeros(2)) for _ in range(3)),
                                       return_exceptions=True)
        return results

    results = asyncio.run(main())
    assert all(isinstance(r, RuntimeError) and "forward failed" in str(r) for r in results)
