"""A user's own MDP and VecTask, named in the config as ``module:ClassName``, train without touching the package."""

from __future__ import annotations

import pytest

from lamarckian.config import load
from lamarckian.mdp import create_mdp
from lamarckian.rl.loop import TrainingLoop
from lamarckian.rl.vec_learner import VecLearner
from lamarckian.train import main as train_main

from .tasks import Duel, Walk


def test_an_mdp_from_the_users_module_trains(tmp_path):
    mdp = create_mdp(load([], ["mdp.create=tests.plugins.tasks:Walk", "mdp.kwargs={goal: 3}"])["mdp"], seed=0)
    assert isinstance(mdp, Walk) and mdp.goal == 3
    code = train_main(["--debug", "-m", "mdp.create=tests.plugins.tasks:Walk", "mdp.kwargs={goal: 3, limit: 20}",
                       f"root={tmp_path}", "sample.envs=2", "train.batch=128", "evaluator.episodes=2",
                       "evaluator.progress=false", "evaluator.terminate=self.iteration >= 2"])
    assert code == 0 and (tmp_path / "evaluations.csv").is_file()


def test_a_vec_task_from_the_users_module_trains_and_is_evaluated(tmp_path):
    config = load(["rl/ppo_gpu.yml"], ["mdp.create=vec", "mdp.vec.task=tests.plugins.tasks:Duel",
                                       "mdp.vec.kwargs={rounds: 3}", "mdp.vec.num_envs.cpu=8", "mdp.vec.horizon=6",
                                       "evaluator.episodes=2", "evaluator.progress=false"])
    learner = VecLearner(config)
    assert isinstance(learner.task, Duel) and learner.task.max_episode_length == 3
    summary = TrainingLoop(learner, tmp_path).run(stop=lambda trainer: trainer.iteration >= 3)
    assert summary["episodes"] == 4 and learner.recent_scores.games > 0
    learner.close()


@pytest.mark.parametrize("create, message", [("no_such_module_here:Thing", "cannot import 'no_such_module_here'"),
                                             ("tests.plugins.tasks:Missing", "has no 'Missing'")])
def test_a_wrong_class_name_is_one_line_naming_the_key(tmp_path, capsys, create, message):
    assert train_main(["-m", f"mdp.create={create}", f"root={tmp_path}/run"]) == 2
    error = capsys.readouterr().err
    assert f"mdp.create={create!r}" in error and message in error and len(error.strip().splitlines()) == 1
