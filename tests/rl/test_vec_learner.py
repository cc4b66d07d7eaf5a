"""train.py on a vectorized task (Ant Sumo, CPU MuJoCo backend): one process, no Ray, PPO against a stacked pool."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np

from lamarckian.config import load
from lamarckian.rl.vec_learner import VecLearner

REPOSITORY = Path(__file__).resolve().parents[2]
SMALL = ["mdp.vec.num_envs=4", "mdp.vec.horizon=16", "evaluator.progress=false"]


def test_vec_learner_updates_and_resumes(tmp_path):
    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], [*SMALL, f"root={tmp_path}",
                                                               "rl.opponent.pool.add=self.iterations_since_add >= 2",
                                                               "rl.opponent.pool.games_to_check=0"])
    learner = VecLearner(config, tmp_path)
    before = [p.detach().clone() for p in learner.model.parameters()]
    learner.train(stop=lambda trainer: trainer.iteration >= 4)
    assert learner.cost == 4 * 16 * 4 and learner.iteration == 4
    assert any(not np.allclose(a.numpy(), b.detach().numpy()) for a, b in zip(before, learner.model.parameters()))
    assert len(learner.pool) >= 2 and learner.stacked.count == len(learner.pool)  # snapshots joined the stack
    resumed = VecLearner(config, tmp_path)
    assert resumed.resume() is not None and resumed.iteration == 4 and len(resumed.pool) == len(learner.pool)
    for a, b in zip(resumed.model.parameters(), learner.model.parameters()):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
    learner.close()
    resumed.close()


def test_rollout_shapes_and_opponents_per_environment(tmp_path):
    config = load(["mdp/vec/ant_sumo.yml"], [*SMALL, "mdp.vec.horizon=8"])
    learner = VecLearner(config, None)
    segment, results = learner.rollout()
    assert segment["observations"].shape == (8, 4, 40) and segment["actions"].shape == (8, 4, 8)
    assert segment["values"].shape == (9, 4) and segment["rewards"].shape == (8, 4)
    assert np.all(np.isfinite(segment["rewards"])) and not results  # no game ends in 8 steps
    assert math.isnan(learner.win_rate_against_initial())
    learner.close()


def test_train_py_runs_the_vec_config_without_ray(tmp_path):
    code = ("import sys; sys.modules['ray'] = None; sys.path.insert(0, sys.argv[1]); import train; "
            "sys.exit(train.main(sys.argv[2:]))")
    completed = subprocess.run([sys.executable, "-c", code, str(REPOSITORY), "-c", "mdp/vec/ant_sumo.yml",
                                "rl/ppo_gpu.yml", "-m", *SMALL, f"root={tmp_path}",
                                "evaluator.terminate=self.iteration >= 2"], capture_output=True, text=True,
                               cwd=REPOSITORY, timeout=300)
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert "done after 2 iterations" in completed.stderr and (tmp_path / "checkpoints").is_dir()
