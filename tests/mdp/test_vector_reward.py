"""A vector reward (one entry per objective, MO-Gymnasium's ``reward_space``): trained on ``mdp.reward.weights``'
weighted sum, every entry's total an objective; refused without weights, and weights refused for a number reward;
NSGA-II takes the entries as its objectives."""

from __future__ import annotations

import asyncio
import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lamarckian.config import ConfigError, load
from lamarckian.ec.space import SearchSpace
from lamarckian.mdp import create_mdp
from lamarckian.mdp.gym import GymMDP

from .gym_envs import register_envs

ROOT = Path(__file__).resolve().parents[2]
REGISTER = "tests.mdp.gym_envs:register_envs"


def play(mdp: GymMDP, action: int) -> dict:
    controller = mdp.reset(0).controllers[0]
    asyncio.run(controller(action))
    return {"reward": controller.get_reward(), **controller.get_result()}


def test_the_reward_is_the_weighted_sum_of_the_entries():
    register_envs()
    assert play(GymMDP.make("LamarckianTwoGoals-v0", weights=(2.0, 1.0)), 2)["reward"] == pytest.approx(1.8)


def test_each_entry_total_is_an_objective():
    register_envs()
    objectives = play(GymMDP.make("LamarckianTwoGoals-v0", weights=(2.0, 1.0)), 0)["objectives"]
    assert objectives == {"reward_0": 1.0, "reward_1": 0.0}


def test_a_vector_reward_without_weights_is_refused_in_one_line():
    register_envs()
    with pytest.raises(ValueError, match=r"gives a vector reward of 2 entries .* set mdp.reward.weights to one "
                                         r"weight per entry, e.g. -m 'mdp.reward.weights=\[1, 1\]'"):
        GymMDP.make("LamarckianTwoGoals-v0")


def test_weights_of_the_wrong_length_are_refused():
    register_envs()
    with pytest.raises(ValueError, match=r"mdp.reward.weights=\[1.0\]: LamarckianTwoGoals-v0 gives a vector reward "
                                         r"of 2 entries"):
        GymMDP.make("LamarckianTwoGoals-v0", weights=(1.0,))


def test_weights_for_a_number_reward_are_refused():
    with pytest.raises(ValueError, match=r"mdp.reward.weights=\[1.0\]: CartPole-v1 gives a number reward"):
        GymMDP.make("CartPole-v1", weights=(1.0,))


def test_weights_for_another_kind_are_refused():
    config = load(["mdp/pong.yml"], ["mdp.reward.weights=[1, 1]"])
    with pytest.raises(ValueError, match=r"the reward of mdp.create=pong is a number, not a vector"):
        create_mdp(config["mdp"], seed=0)


def test_an_empty_weight_list_is_refused_by_load():
    with pytest.raises(ConfigError, match=r"mdp.reward.weights=\[\]: expected a list of finite numbers"):
        load(["mdp/gym.yml"], ["mdp.reward.weights=[]"])


def test_a_range_inside_a_list_is_a_searched_key():
    config = load(["mdp/gym.yml"], ["mdp.reward.weights=[[0.1,10],1]", "ec.log=[mdp.reward.weights.0]"],
                  ranges=True)
    assert [d.key for d in SearchSpace.from_config(config)] == ["mdp.reward.weights.0"]


def test_a_searched_list_entry_is_set_in_the_individual_config():
    config = load(["mdp/gym.yml"], ["mdp.reward.weights=[[0.1,10],1]"], ranges=True)
    assert SearchSpace.from_config(config).apply({"mdp.reward.weights.0": 3.0})["mdp"]["reward"]["weights"] == [3.0, 1]


def test_a_range_inside_an_integer_list_searches_integers():
    config = load(["mdp/gym.yml"], ["model.hidden=[[32,256],64]"], ranges=True)
    assert SearchSpace.from_config(config).dimensions[0].integer


@pytest.mark.slow
def test_nsga_ii_spreads_over_the_reward_entries(tmp_path):
    completed = subprocess.run(
        [sys.executable, str(ROOT / "evolve.py"), "-c", "mdp/gym.yml", "ec/ea/nsga_ii.yml", "-m",
         "mdp.gym.id=LamarckianTwoGoals-v0", f"mdp.gym.register={REGISTER}", "mdp.reward.weights=[[0.1,10],1]",
         "ec.log=[mdp.reward.weights.0]", "ec.objectives=[reward_0,reward_1]", "ec.population=6", "ec.learners=2",
         "sample.actors=1", "ec.train.stopper=self.iteration >= 3", "ec.stop=self.trained >= 12",
         "evaluator.progress=false", "ray.num_cpus=2", "seed=0", f"root={tmp_path}"],
        capture_output=True, text=True, timeout=900, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert completed.returncode == 0, completed.stderr[-3000:]
    with open(tmp_path / "front.csv") as file:
        front = list(csv.DictReader(file))
    assert {"reward_0", "reward_1", "mdp.reward.weights.0"} <= set(front[0])
    points = {(round(float(row["reward_0"]), 1), round(float(row["reward_1"]), 1)) for row in front}
    assert len(points) >= 2, points      # different weights, different choices on the front
