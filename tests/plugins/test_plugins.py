"""A user's own MDP, VecTask and algorithm, named in the config as ``module:ClassName``, train without touching the
package."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lamarckian.config import load
from lamarckian.ec import SearchSpace
from lamarckian.ec.engine import build_algorithm
from lamarckian.ec.pbt import PBT
from lamarckian.mdp import create_mdp
from lamarckian.record import read_rows
from lamarckian.rl.algorithms import algorithm_of
from lamarckian.rl.loop import TrainingLoop
from lamarckian.rl.ondevice.learner import OnDeviceLearner
from lamarckian.train import main as train_main

from .reinforce import Reinforce
from .tasks import Duel, Walk

REPOSITORY = Path(__file__).resolve().parents[2]


def test_an_mdp_from_the_users_module_trains(tmp_path):
    mdp = create_mdp(load([], ["mdp.create=tests.plugins.tasks:Walk", "mdp.kwargs={goal: 3}"])["mdp"], seed=0)
    assert isinstance(mdp, Walk)
    assert mdp.goal == 3
    code = train_main(["--debug", "-m", "mdp.create=tests.plugins.tasks:Walk", "mdp.kwargs={goal: 3, limit: 20}",
                       f"root={tmp_path}", "sample.envs=2", "train.batch=128", "evaluator.episodes=2",
                       "evaluator.progress=false", "evaluator.terminate=self.iteration >= 2"])
    assert code == 0
    assert (tmp_path / "evaluations.csv").is_file()


def test_a_vec_task_from_the_users_module_trains_and_is_evaluated(tmp_path):
    config = load(["rl/ppo_gpu.yml"], ["mdp.create=vec", "mdp.vec.task=tests.plugins.tasks:Duel",
                                       "mdp.vec.kwargs={rounds: 3}", "mdp.vec.num_envs.cpu=8", "mdp.vec.horizon=6",
                                       "evaluator.episodes=2", "evaluator.progress=false"])
    learner = OnDeviceLearner(config)
    assert isinstance(learner.task, Duel)
    assert learner.task.max_episode_length == 3
    summary = TrainingLoop(learner, tmp_path).run(stop=lambda trainer: trainer.iteration >= 3)
    assert summary["episodes"] == 4
    assert learner.recent_scores.games > 0
    learner.close()


@pytest.mark.parametrize("create, message", [("no_such_module_here:Thing", "cannot import 'no_such_module_here'"),
                                             ("tests.plugins.tasks:Missing", "has no 'Missing'")])
def test_a_wrong_class_name_is_one_line_naming_the_key(tmp_path, capsys, create, message):
    assert train_main(["-m", f"mdp.create={create}", f"root={tmp_path}/run"]) == 2
    error = capsys.readouterr().err
    assert f"mdp.create={create!r}" in error
    assert message in error
    assert len(error.strip().splitlines()) == 1


REINFORCE = ["-m", "rl.algorithm=tests.plugins.reinforce:Reinforce", "rl.kwargs={minibatches: 4}",
             "model.normalize_value=false", "train.batch=4096", "train.lr=0.0005", "evaluator.interval=5",
             "evaluator.progress=false"]


@pytest.mark.slow
def test_a_users_own_algorithm_trains_cartpole_through_the_actor_fleet(tmp_path):
    completed = subprocess.run([sys.executable, str(REPOSITORY / "train.py"), "-c", "mdp/gym.yml",
                                "mdp/gym/cartpole.yml", *REINFORCE, f"root={tmp_path / 'run'}",
                                "evaluator.terminate=self.fitness >= 475 or self.time > 300"],
                               capture_output=True, text=True, timeout=600, cwd=tmp_path)
    evaluations = [float(m) for m in re.findall(r"fitness ([-\d.e+]+) over", completed.stderr)]
    assert max(evaluations, default=0.0) >= 475, completed.stderr[-3000:]


def test_a_users_own_algorithm_is_built_with_its_keyword_arguments():
    algorithm = algorithm_of(load([], REINFORCE[1:3]))
    assert isinstance(algorithm, Reinforce)


def test_the_keyword_arguments_reach_the_algorithm():
    assert algorithm_of(load([], REINFORCE[1:3])).minibatches == 4


@pytest.mark.parametrize("changes, message", [
    (["rl.algorithm=tests.plugins.tasks:Walk"], "expected a subclass of lamarckian.rl.algorithms.base.Algorithm"),
    (["rl.algorithm=tests.plugins.reinforce:Missing"], "has no 'Missing'"),
    (["rl.algorithm=tests.plugins.reinforce:Reinforce", "rl.kwargs={epochs: 3}"], "Reinforce refuses them"),
    (["rl.kwargs={epochs: 3}"], "rl.kwargs={'epochs': 3}: the arguments of your own rl.algorithm"),
    (["rl.algorithm=impala"], "rl.algorithm=impala learns with rl.ppo.objective=vtrace"),
])
def test_a_wrong_algorithm_is_one_line_naming_the_key(changes, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        algorithm_of(load(["mdp/gym.yml"], changes)).update_rule(torch.nn.Linear(1, 1), load(["mdp/gym.yml"],
                                                                                              changes))


@pytest.mark.parametrize("binary", [False, True], ids=["multidiscrete", "multibinary"])
def test_factorised_actions_learn_a_code_far_above_a_random_guess(tmp_path, binary):
    """A random guess gets 1/6 of a base-6 code's digits right (1/2 of a binary one's); PPO gets nearly all."""
    code = train_main(["--debug", "-m", "mdp.create=tests.plugins.tasks:Lock",
                       f"mdp.kwargs={{digits: 4, base: 6, binary: {str(binary).lower()}}}", f"root={tmp_path}",
                       "seed=0", "evaluator.episodes=200", "evaluator.progress=false",
                       "evaluator.terminate=self.iteration >= 3"])
    rows = read_rows(tmp_path / "evaluations.csv")
    assert code == 0
    assert float(rows[-1]["fitness"]) >= 0.9


def test_a_dict_with_an_image_part_learns_through_its_cnn(tmp_path):
    """Which quadrant holds the square? Only the image part tells: 1/4 for a random guess."""
    code = train_main(["--debug", "-m", "mdp.create=tests.plugins.tasks:Spot", f"root={tmp_path}", "seed=0",
                       "evaluator.episodes=200", "evaluator.progress=false", "evaluator.terminate=self.iteration >= 3"])
    rows = read_rows(tmp_path / "evaluations.csv")
    assert code == 0
    assert float(rows[-1]["fitness"]) >= 0.9


@pytest.mark.slow
def test_a_users_evolution_algorithm_runs_evolve_py(tmp_path):
    completed = subprocess.run(
        [sys.executable, "evolve.py", "-c", "mdp/gym.yml", "-m", "ec.algorithm=tests.plugins.evolution:Restarts",
         "ec.kwargs={rounds: 1}", "ec.population=2", "ec.stop=self.trained >= 4", "sample.actors=1",
         "sample.num_cpus=0.25", "ec.learner_cpus=0.25", "sample.envs=4", "sample.truncation=16", "train.batch=128",
         "sample.eval=2", "evaluator.progress=false", "ec.train.stopper=self.iteration >= 1", "train.lr=[1e-4,1e-2]",
         f"root={tmp_path}"], cwd=REPOSITORY, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    ids = {json.loads(line)["id"] for line in (tmp_path / "lineage.jsonl").read_text().splitlines()}
    assert len(ids) >= 4                        # every round restarted its slot: a new individual each


def pbt_with_users_rules() -> PBT:
    config = load([], ["train.lr=[1e-4,1e-2]", "ec.population=2", "ec.pbt.ready=0",
                       "ec.pbt.exploit=tests.plugins.evolution:copy_the_best",
                       "ec.pbt.explore=tests.plugins.evolution:halve"], ranges=True)
    algorithm = build_algorithm(SearchSpace.from_config(config).base, SearchSpace.from_config(config))
    assert isinstance(algorithm, PBT)
    return algorithm


def test_a_users_pbt_rules_choose_the_donor_and_its_childs_hyper_parameters():
    pbt = pbt_with_users_rules()
    worse, better = pbt.ask(), pbt.ask()
    pbt.tell(better, {"state": {}, "summary": {"fitness": 2.0}, "cost": 1, "episodes": [2.0]})
    pbt.tell(worse, {"state": {}, "summary": {"fitness": 1.0}, "cost": 1, "episodes": [1.0]})
    child = pbt.slots[0]
    assert (child.operator, child.hparams["train.lr"]) == ("exploit+tests.plugins.evolution:halve",
                                                           max(1e-4, better.hparams["train.lr"] / 2))


def test_ec_kwargs_for_a_built_in_algorithm_are_refused_naming_its_section():
    config = load([], ["train.lr=[1e-4,1e-2]", "ec.kwargs={rounds: 1}"], ranges=True)
    with pytest.raises(ValueError, match=r"ec\.kwargs=.*its own section \(ec\.pbt\)"):
        build_algorithm(SearchSpace.from_config(config).base, SearchSpace.from_config(config))
