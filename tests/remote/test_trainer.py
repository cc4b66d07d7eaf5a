"""The trainer's side: PPO drops stale and exported-policy segments (counted) and fills its batch with segments it
can learn from, segments of another network are dropped, weights reach the server when the learner starts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lamarckian.config import load
from lamarckian.remote.fleet import connect
from lamarckian.remote.worker import FIXED_VERSION
from lamarckian.rl.fleet.factory import fleet_learner

from .helpers import relay, segment


@pytest.fixture
def server(tmp_path):
    yield from relay(tmp_path)


def remote_config(server, *files: str, changes: tuple[str, ...] = ()) -> dict:
    return load(list(files), [f"rl.remote.server={server.server.endpoint}",
                              f"rl.remote.key={server.keys / 'trainer.key_secret'}",
                              f"rl.remote.server_key={server.keys / 'server.key'}", *changes])


def cartpole_segment(version: int, fill: float) -> dict:
    wire = segment(steps=4, lanes=2, width=4, version=version, fill=fill)
    wire["actions"] = np.ones((4, 2), np.int64)
    del wire["next_observations"]
    return wire


def test_ppo_drops_stale_and_exported_policy_segments(server):
    learner = fleet_learner(remote_config(server, "mdp/gym.yml", "mdp/gym/cartpole.yml",
                                          changes=("train.batch=16", "rl.ppo.max_staleness=2")), connect)
    try:
        learner.start_actors()
        assert server.server.version == 0
        assert len(server.server.blob) > 0     # the workers' starting weights
        learner.version = 10
        alice = server.client("alice")
        for version, fill in ((FIXED_VERSION, 1.0), (7, 2.0), (9, 3.0), (10, 3.5)):
            assert alice.request({"op": "segment", "have": 0, "segment": cartpole_segment(version, fill),
                                  "imports": []})["accepted"]
        alice.request({"op": "segment", "have": 0, "imports": [],           # another network's observations
                       "segment": {**cartpole_segment(10, 4.0), "observations": np.zeros((4, 2, 5), np.float32)}})
        segments, steps, _ = learner._collect()      # a batch of 16 env steps it can learn from
        assert [float(s.observations[0, 0, 0]) for s in segments] == [3.0, 3.5]
        assert learner.stale_steps.dropped == 8                  # version 7 is 3 behind: its 8 env steps
        assert steps == 24                           # every env step received costs
        stats = learner.fleet.statistics()
        assert stats["remote/fixed_dropped"] == 1
        assert stats["remote/mismatched"] == 0
        for fill in (5.0, 6.0):
            alice.request({"op": "segment", "have": 0, "imports": [], "segment": cartpole_segment(10, fill)})
        assert [float(s.observations[0, 0, 0]) for s in learner._collect()[0]] == [5.0, 6.0]
        assert learner.fleet.statistics()["remote/mismatched"] == 1
    finally:
        learner.close()


def test_remote_workers_play_single_player_mdps_only(server):
    with pytest.raises(ValueError, match="rl.remote.server: remote workers play single-player MDPs"):
        fleet_learner(remote_config(server, "mdp/pong.yml"), connect)
    with pytest.raises(ValueError, match="rl.remote.key and rl.remote.server_key"):
        load(["mdp/gym.yml"], ["rl.remote.server=tcp://127.0.0.1:5555"])


def test_a3c_applies_a_workers_gradient_and_counts_a_wrong_sized_one(server):
    from lamarckian.rl.fleet.actor import Actor

    config = remote_config(server, "mdp/gym.yml", "mdp/gym/cartpole.yml", "rl/a3c.yml",
                           changes=("sample.envs=2", "sample.truncation=8"))
    learner = fleet_learner(config, connect)
    actor = Actor(config, 0, own_process=False)
    try:
        learner.start_actors()
        report = actor.sample()                                     # what an A3C worker sends: a gradient
        before = [p.detach().clone() for p in learner.model.parameters()]
        alice = server.client("alice")
        bad = {**report, "gradient": report["gradient"][:-1]}
        for wire in (bad, report):
            assert alice.request({"op": "segment", "have": 0, "segment": wire, "imports": []})["accepted"]
        stats = learner.step()
        assert stats["gradients"] == 1
        assert stats["malformed"] == 1
        assert any(not torch.equal(a, b) for a, b in zip(before, learner.model.parameters()))
        alice.send({"op": "segment", "have": 0, "imports": [], "segment": {**report, "gradient": "steep"}})
        assert alice.receive(0.5) is None
        assert server.server.statistics()["garbage"] == 1
    finally:
        actor.close()
        learner.close()
