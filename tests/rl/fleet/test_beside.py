"""Evaluation beside training: the evaluation actor plays while the learner goes on, a dead one is replaced and its
evaluation played again, and every evaluation row names the weights it judged."""

from __future__ import annotations

import csv
import os

import numpy as np
import pytest

from lamarckian import rpc
from lamarckian.config import load
from lamarckian.rl.fleet.beside import BesideEvaluation
from lamarckian.rl.fleet.learner import Learner
from lamarckian.train import main as train_main

PENDULUM = ["mdp/gym.yml", "mdp/gym/pendulum.yml"]
SMALL = ["sample.actors=1", "sample.envs=2", "model.hidden=[16]", "evaluator.episodes=8", "evaluator.progress=false"]


@pytest.fixture
def learner():
    trainer = Learner(load(PENDULUM, SMALL))
    yield trainer
    trainer.close()


def test_the_learner_gets_control_back_while_the_games_play(learner):
    learner.begin_evaluation()                    # 8 episodes of 200 steps: far longer than a poll
    assert learner.evaluation_result() is None


def test_the_evaluation_judges_every_episode(learner):
    learner.begin_evaluation()
    assert learner.evaluation_result(wait=True)["episodes"] == 8


def test_a_killed_evaluation_actor_is_replaced_and_the_evaluation_played_again(learner):
    learner.begin_evaluation()
    learner.fleet.beside.actor.kill()
    summary = learner.evaluation_result(wait=True)
    assert (summary["episodes"], learner.fleet.beside.replaced) == (8, 1)


@rpc.any
class FlakyEvaluator:
    """An evaluation actor whose process dies while it is built the first time (no ``flag`` file yet: it makes
    one); then it answers an evaluation with one result per episode, naming the weights' version."""

    def __init__(self, flag: str) -> None:
        if not os.path.exists(flag):
            open(flag, "w").close()
            os._exit(3)
        self.version = -1

    def set_weights(self, version: int, blob: np.ndarray) -> None:
        self.version = version

    def evaluate(self, episodes: int, opponent: str) -> list[dict[str, int]]:
        return [{"version": self.version}] * episodes


def test_an_evaluation_actor_that_dies_while_starting_is_replaced_after_a_backoff(tmp_path):
    spawned = []

    def spawn():
        spawned.append(rpc.processes.spawn(FlakyEvaluator, str(tmp_path / "flag")))
        return spawned[-1]

    beside = BesideEvaluation(spawn, lambda actor, graceful: actor.close() if graceful else actor.kill(),
                              rpc.RpcSettings.defaults())
    try:
        beside.start(7, np.zeros(3, np.float32), 2, "")
        assert (beside.wait(), len(spawned)) == ([{"version": 7}] * 2, 2)
    finally:
        beside.close()


def test_without_beside_the_fleet_plays_the_evaluation_at_once():
    trainer = Learner(load(PENDULUM, [*SMALL, "evaluator.beside=false"]))
    try:
        trainer.start_actors()
        trainer.begin_evaluation()
        assert trainer.evaluation_result()["episodes"] == 8
    finally:
        trainer.close()


@pytest.fixture(scope="module")
def evaluations(tmp_path_factory) -> list[dict[str, str]]:
    root = tmp_path_factory.mktemp("beside")
    code = train_main(["-c", "mdp/gym.yml", "mdp/gym/cartpole.yml", "-m", f"root={root}", "sample.actors=1",
                       "evaluator.progress=false", "evaluator.episodes=4", "evaluator.interval=0",
                       "evaluator.terminate=self.iteration >= 12"])
    assert code == 0
    with open(root / "evaluations.csv", newline="") as stream:
        return list(csv.DictReader(stream))


def test_no_row_judges_weights_newer_than_its_result(evaluations):
    assert all(int(row["cost"]) <= int(row["cost_now"]) for row in evaluations)


def test_training_went_on_while_some_evaluation_played(evaluations):
    assert any(int(row["cost"]) < int(row["cost_now"]) for row in evaluations)


def test_the_last_row_judges_the_final_weights(evaluations):
    assert evaluations[-1]["cost"] == evaluations[-1]["cost_now"]


def test_no_reply_is_left_waiting_after_evaluations(learner):
    for _ in range(3):
        learner.begin_evaluation()
        learner.evaluation_result(wait=True)
    assert learner.fleet.beside.caller.link.idle()
