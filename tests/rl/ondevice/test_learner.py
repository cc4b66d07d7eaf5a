"""train.py on a vectorized task (Ant Sumo, CPU MuJoCo backend): one process, no Ray, PPO against a stacked pool."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lamarckian.config import load
from lamarckian.model import to_blob
from lamarckian.rl.loop import TrainingLoop
from lamarckian.rl.ondevice.learner import OnDeviceLearner

from ...mdp.vec_helpers import place

REPOSITORY = Path(__file__).resolve().parents[3]
SMALL = ["mdp.vec.num_envs.cpu=4", "mdp.vec.horizon=16", "evaluator.progress=false"]


@pytest.mark.slow
def test_vec_learner_updates_and_resumes(tmp_path):
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], [*SMALL, f"root={tmp_path}",
                                                               "rl.opponent.pool.add=self.iterations_since_add >= 2",
                                                               "rl.opponent.pool.games_to_check=0"])
    learner = OnDeviceLearner(config)
    before = [p.detach().clone() for p in learner.model.parameters()]
    TrainingLoop(learner, tmp_path).run(stop=lambda trainer: trainer.iteration >= 4)
    assert learner.cost == 4 * 16 * 4
    assert learner.iteration == 4
    assert any(not np.allclose(a.numpy(), b.detach().numpy()) for a, b in zip(before, learner.model.parameters()))
    assert len(learner.pool) >= 2
    assert learner.opponents.stacked.count == len(learner.pool) + 1  # snapshots + the initial policy
    resumed = OnDeviceLearner(config)
    assert TrainingLoop(resumed, tmp_path).resume() is not None
    assert resumed.iteration == 4
    assert len(resumed.pool) == len(learner.pool)
    for a, b in zip(resumed.model.parameters(), learner.model.parameters()):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    learner.close()
    resumed.close()


def test_rollout_shapes_and_opponents_per_environment(tmp_path):
    config = load(["mdp/vec/ant_sumo.yml"], [*SMALL, "mdp.vec.horizon=8", "mdp.vec.spawn_max=1.5"])
    learner = OnDeviceLearner(config)
    segment, outcomes, returns = learner.rollout()
    assert learner.task.num_obs == 52                       # 40 + the time left + 11 egocentric (the shipped config)
    assert segment.observations.shape == (8, 4, 52)
    assert segment.actions.shape == (8, 4, 8)
    assert segment.values.shape == (9, 4)
    assert segment.rewards.shape == (8, 4)
    assert torch.all(torch.isfinite(segment.rewards))
    assert outcomes.shape == (learner.opponents.stacked.count, 3)
    assert outcomes.sum() == 0
    assert returns[1] == 0  # no game ends in 8 steps
    assert math.isnan(learner.win_rate_against_initial())
    learner.close()


def test_initial_lanes_play_the_initial_policy_and_score_against_it():
    config = load(["mdp/vec/ant_sumo.yml"], [*SMALL, "mdp.vec.horizon=2", "mdp.vec.initial_share=0.5",
                                             "rl.opponent.pool.add=True", "rl.opponent.pool.games_to_check=0",
                                             "rl.opponent.pool.capacity=2"])
    learner = OnDeviceLearner(config)
    learner.step()                                  # a second snapshot joins the pool: the stack is 2 + initial
    assert learner.opponents.stacked.count == 3
    assert learner.opponents.opponent[:2].tolist() == [2, 2]
    assert torch.all(learner.opponents.opponent[2:] < 2)
    place(learner.task, 0, 1, 3.5, 0.0)             # the initial policy's ant leaves the ring in lane 0
    place(learner.task, 2, 0, 3.5, 0.0)             # the learner's ant leaves it in a pool lane
    segment, outcomes, returns = learner.rollout()
    assert outcomes[2].tolist() == [1, 0, 0]
    assert outcomes[:2].sum(0).tolist() == [0, 0, 1]
    assert segment.dones[0].tolist() == [1, 0, 1, 0]
    assert segment.rewards[0, 0] > 1900
    learner.record(outcomes.numpy(), returns.numpy())
    assert learner.win_rate_against_initial() == 1.0
    assert learner.training["win"] == 0.5
    # a new snapshot evicts snapshot 0: games in progress keep their opponent if it is still there (at its new
    # position), those against snapshot 0 draw another
    named = lambda: [learner.opponents.pool_ids[i] if i < len(learner.opponents.pool_ids) else "initial"  # noqa: E731
                     for i in learner.opponents.opponent.tolist()]
    learner.opponents.opponent[2:] = torch.tensor([0, 1])
    before = named()
    learner.pool.add(to_blob(learner.model), learner.iteration)
    learner.opponents.stack()
    after = named()
    assert learner.opponents.pool_ids == [1, 2]
    assert learner.opponents.stacked.count == 3
    assert after[:2] == ["initial", "initial"]
    assert after[3] == before[3] == 1
    assert after[2] in (1, 2)
    learner.close()


@pytest.mark.slow
def test_train_py_runs_the_vec_config_without_ray(tmp_path):
    code = ("import sys; [sys.modules.__setitem__(m, None) for m in ('ray', 'zmq', 'cryptography')]; "
            "sys.path.insert(0, sys.argv[1]); sys.argv[1:] = sys.argv[2:]; import train; sys.exit(train.train())")
    completed = subprocess.run([sys.executable, "-c", code, str(REPOSITORY), "-c", "mdp/vec/ant_sumo.yml",
                                "rl/ppo_gpu.yml", "-m", *SMALL, f"root={tmp_path}",
                                "evaluator.terminate=self.iteration >= 2"], capture_output=True, text=True,
                               cwd=REPOSITORY, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "holds after 2 iterations" in completed.stderr
    assert (tmp_path / "checkpoints").is_dir()


@pytest.mark.gpu
def test_vec_learner_keeps_everything_on_the_gpu(tmp_path):
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], ["mdp.vec.backend=mjx", "mdp.vec.device=cuda",
                                                               "mdp.vec.num_envs.cuda=512", "mdp.vec.horizon=16",
                                                               "evaluator.progress=false", f"root={tmp_path}"])
    learner = OnDeviceLearner(config)
    before = [p.detach().clone() for p in learner.model.parameters()]
    segment, outcomes, _ = learner.rollout()
    assert segment.observations.is_cuda
    assert outcomes.is_cuda
    assert learner.opponents.opponent.is_cuda
    assert all(t.is_cuda for t in learner.opponents.stacked.parameters.values())
    TrainingLoop(learner, tmp_path).run(stop=lambda trainer: trainer.iteration >= 3)
    assert all(p.is_cuda for p in learner.model.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, learner.model.parameters()))
    learner.close()


@pytest.mark.parametrize("change, message", [
    ("mdp.vec.task=ant_judo", "mdp.vec.task='ant_judo'"),
    ("mdp.vec.backend=physx", "mdp.vec.backend='physx'"),
    ("mdp.vec.device=cuda", "the mujoco backend runs on the CPU"),
    ("mdp.vec.num_envs.cpu=0", "mdp.vec.num_envs=0"),
    ("mdp.vec.backend=isaacgym mdp.vec.isaacgym.address=null", "needs mdp.vec.isaacgym.address"),
    ("mdp.vec.ants=1 mdp.vec.task=ant_battle", "mdp.vec.ants=1"),
    pytest.param("mdp.vec.backend=mjx mdp.vec.device=cuda", "JAX sees 0 GPU(s)",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")),
])
def test_bad_vec_settings_stop_train_py_with_one_line(tmp_path, capsys, change, message):
    from lamarckian.train import main

    assert main(["-c", "mdp/vec/ant_sumo.yml", "-m", *change.split(), f"root={tmp_path}/run"]) == 2
    error = capsys.readouterr().err
    assert message in error
    assert len(error.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_a_vectorized_task_with_an_algorithm_it_cannot_run_is_refused_in_one_line(tmp_path, capsys):
    from lamarckian.train import main

    assert main(["-c", "mdp/vec/ant_sumo.yml", "rl/sac.yml", "-m", f"root={tmp_path}/run"]) == 2
    error = capsys.readouterr().err
    assert "rl.algorithm=sac (from " in error
    assert len(error.strip().splitlines()) == 1
