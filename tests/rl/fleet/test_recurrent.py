"""Recurrent policies (model.recurrent): the replay of a segment is the steps the actor took, the actors' segments
carry the state before each segment, minibatches are whole sequences, and memory solves what a feed-forward policy
cannot."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from lamarckian.config import load
from lamarckian.model import ActorCritic, ModelSettings
from lamarckian.rl.algorithms.ppo import PPO, PPOSettings, episode_starts, sequence_minibatch
from lamarckian.rl.fleet.actor import Actor
from lamarckian.rl.fleet.factory import fleet_learner
from lamarckian.rl.loop import TrainingLoop
from lamarckian.rl.segment import Segment
from lamarckian.train import main as train_main

CUE = ["mdp.create=tests.rl.fleet.memory_tasks:Cue", "mdp.kwargs={delay: 4}"]


def recurrent_model(kind: str, shared: bool = True, observations: int = 3) -> ActorCritic:
    torch.manual_seed(0)
    return ActorCritic(gymnasium.spaces.Box(-1, 1, (observations,), np.float32), gymnasium.spaces.Discrete(2),
                       ModelSettings.defaults(hidden=(8,), recurrent=kind, shared=shared))


@pytest.mark.parametrize("kind, shared", [("lstm", True), ("gru", False)])
def test_unroll_replays_the_steps_taken_one_at_a_time(kind, shared):
    model = recurrent_model(kind, shared)
    steps, lanes = 7, 3
    observations = torch.randn(steps, lanes, 3)
    starts = torch.zeros(steps, lanes, dtype=torch.bool)
    starts[2, 0] = starts[4, 1] = starts[5, 0] = True
    initial = torch.randn(lanes, model.state_size)
    state, outs, values = initial, [], []
    for t in range(steps):
        state = torch.where(starts[t].unsqueeze(1), torch.zeros_like(state), state)
        out, value, state = model.step(observations[t], state)
        outs.append(out)
        values.append(value)
    replayed_out, replayed_value = model.unroll(observations, initial, starts)
    assert torch.allclose(replayed_out, torch.cat(outs), atol=1e-6)
    assert torch.allclose(replayed_value, torch.cat(values), atol=1e-6)
    assert model.state_size == (16 if kind == "lstm" else 8) * (1 if shared else 2)


def test_the_state_remembers_and_a_reset_forgets():
    model = recurrent_model("lstm")
    zero, blank = model.initial_state(1), torch.zeros(1, 3)
    after_a = model.step(torch.tensor([[1.0, 0, 0]]), zero)[2]
    after_b = model.step(torch.tensor([[-1.0, 0, 0]]), zero)[2]
    assert not torch.allclose(model.step(blank, after_a)[0], model.step(blank, after_b)[0])
    with pytest.raises(ValueError, match="recurrent"):
        model.outputs(blank)


def test_sequence_minibatches_are_whole_lanes():
    steps, lanes = 4, 5
    batch = {"advantages": torch.arange(steps * lanes, dtype=torch.float32),
             "states": torch.arange(lanes, dtype=torch.float32).unsqueeze(1),
             "starts": torch.zeros(steps, lanes, dtype=torch.bool)}
    picked = sequence_minibatch(batch, torch.tensor([3, 1]))
    assert picked["advantages"].tolist() == [3, 1, 8, 6, 13, 11, 18, 16]     # [T, m] order
    assert picked["states"].squeeze(1).tolist() == [3, 1]
    assert picked["starts"].shape == (steps, 2)
    assert episode_starts(torch.tensor([[1, 0], [0, 1], [1, 0]])).tolist() == [[False, False], [True, False],
                                                                               [False, True]]


def test_actor_segments_carry_the_state_the_actor_had(tmp_path):
    """The state in segment k+1 is what replaying segment k from its state gives (zero after an episode's end),
    and the values the actor recorded are the replay's."""
    config = load(["rl/lstm.yml"], [*CUE, "model.hidden=[8]", "sample.envs=3", "sample.truncation=3",
                                    f"root={tmp_path}"])
    actor = Actor(config, 0, own_process=False)
    try:
        segments = [Segment.from_wire(actor.sample()) for _ in range(4)]
        model = actor.model
        assert np.all(segments[0].states == 0)
        assert segments[0].states.shape == (3, model.state_size)
        for segment, following in zip(segments, segments[1:]):
            state = torch.from_numpy(segment.states)
            starts = episode_starts(torch.from_numpy(segment.dones))
            values = []
            for t in range(3):
                state = torch.where(starts[t].unsqueeze(1), torch.zeros_like(state), state)
                _, value, state = model.step(torch.from_numpy(segment.observations[t]), state)
                values.append(model.denormalize_value(value))
            state = torch.where(torch.from_numpy(segment.dones[-1]).unsqueeze(1), torch.zeros_like(state), state)
            assert np.allclose(following.states, state.detach().numpy(), atol=1e-5)
            assert np.allclose(segment.values[:3], torch.stack(values).detach().numpy(), atol=1e-5)
        ppo = PPO(model, PPOSettings.defaults(minibatches=3))
        stats = ppo.update(segments, version=0, cost=0)
        assert np.isfinite(stats["loss/policy"])
        assert stats["samples"] == 36
        results = actor.evaluate(4)                    # deterministic games, a memory per game
        assert len(results) == 4
        assert all(0.0 <= r["fitness"] <= 1.0 for r in results)
    finally:
        actor.close()


def train_cue(tmp_path, files: list[str], seconds: float) -> float:
    config = load(files, [*CUE, "ray.local_mode=true", "model.hidden=[32]", "sample.actors=1", "sample.envs=16",
                          "sample.truncation=10", "train.batch=640", "train.lr=0.003", "evaluator.progress=false",
                          "evaluator.interval=2", "evaluator.episodes=40", f"root={tmp_path}"])
    learner = fleet_learner(config)
    try:
        loop = TrainingLoop(learner, None)
        loop.run(stop=lambda trainer: trainer.evaluator.latest.get("fitness", 0) >= 0.95 or trainer.elapsed > seconds)
        return float(loop.decided["fitness"])                 # the evaluation the stop rule acted on
    finally:
        learner.close()


@pytest.mark.slow
def test_an_lstm_learns_what_a_feedforward_policy_cannot(tmp_path):
    assert train_cue(tmp_path / "lstm", ["rl/lstm.yml"], 300) >= 0.95
    assert train_cue(tmp_path / "mlp", [], 30) <= 0.75


@pytest.mark.parametrize("files, changes, message", [
    (["mdp/gym.yml"], ["model.recurrent=rnn"], "model.recurrent='rnn': expected null or one of"),
    (["mdp/gym.yml", "rl/dqn.yml"], ["model.recurrent=lstm"], "model.recurrent=lstm applies to rl.algorithm ppo"),
    (["rl/lstm.yml"], [],
     "model.recurrent=lstm trains single-player MDPs or rl.shared_seats games; this one has 2 seats"),
    (["mdp/gym.yml"], ["mdp.gym.observe=[0, 9]"], "mdp.gym.observe=[0, 9]: expected indices in [0, 4)"),
])
def test_bad_recurrent_settings_are_one_line(tmp_path, capsys, files, changes, message):
    assert train_main(["-c", *files, "-m", f"root={tmp_path}/run", *changes]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error
    assert len(error.splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_tournament_of_recurrent_policies_is_refused_in_one_line(tmp_path, capsys):
    from lamarckian.evaluate import main as evaluate_main

    assert evaluate_main(["-c", "rl/lstm.yml", "--checkpoints", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip()
    assert "model.recurrent=lstm: tournaments play feed-forward policies" in error
    assert len(error.splitlines()) == 1


def test_image_observations_go_through_the_cnn_before_the_core():
    space = gymnasium.spaces.Box(0, 255, (4, 42, 42), np.uint8)
    model = ActorCritic(space, gymnasium.spaces.Discrete(3), ModelSettings.defaults(hidden=(32,), recurrent="gru"))
    frames = torch.randint(0, 255, (5, 2, 4, 42, 42), dtype=torch.uint8)
    out, value = model.unroll(frames, model.initial_state(2), torch.zeros(5, 2, dtype=torch.bool))
    assert out.shape == (10, 3)
    assert value.shape == (10,)
    assert torch.isfinite(out).all()
