"""When to evaluate (``evaluator.interval`` seconds, ``evaluator.share`` of the clock, ``evaluator.interval_steps``
env steps), how many episodes
(``evaluator.steps``) and how many torch
threads the learner takes (``train.threads: 0``: the cores the local actors leave free)."""

from __future__ import annotations

import dataclasses
import os

import pytest

from lamarckian.cli import MAX_AUTO_THREADS, learner_threads
from lamarckian.config import load
from lamarckian.config.sections import EvaluatorSettings
from lamarckian.rl.evaluator import Evaluator


def evaluator(**changes) -> Evaluator:
    settings = EvaluatorSettings.from_config(load(["mdp/gym.yml"]))
    return Evaluator(dataclasses.replace(settings, **changes))


def test_an_evaluation_is_due_at_the_next_multiple_of_interval_steps():
    judge = evaluator(interval=1e9, interval_steps=1000)
    judge.started(cost=500)
    assert judge.due(cost=1000)


def test_no_evaluation_is_due_before_the_next_multiple_of_interval_steps():
    judge = evaluator(interval=1e9, interval_steps=1000)
    judge.started(cost=500)
    assert not judge.due(cost=999)


def test_the_first_evaluation_is_due_at_once():
    assert evaluator(interval=1e9, interval_steps=1000).due(cost=0)


def test_the_seconds_still_count_beside_the_steps():
    judge = evaluator(interval=0.0, interval_steps=10**9)
    judge.started(cost=0)
    assert judge.due(cost=1)


def finished(share: float) -> Evaluator:
    """An evaluator whose first evaluation (no episodes) started and finished just now."""
    judge = evaluator(interval=30.0, share=share)
    judge.started(cost=0)
    judge.conclude([[]], [0])
    return judge


def test_a_cheap_evaluation_is_due_once_it_took_its_share_of_the_time_since_it_started():
    judge = finished(share=0.2)
    assert judge.due(now=judge.last + judge.took / 0.2 + 1e-3)


def test_a_cheap_evaluation_is_not_due_before_it_took_its_share():
    judge = finished(share=0.2)
    assert not judge.due(now=judge.last + judge.took / 0.2 * 0.9)


def test_a_share_of_0_waits_for_the_interval():
    judge = finished(share=0.0)
    assert not judge.due(now=judge.last + 29.0)


def test_an_evaluation_plays_every_episode_without_a_budget_in_steps():
    assert evaluator(episodes=20, steps=0).plan(length=1000.0) == 20


def test_a_budget_in_steps_plays_as_many_episodes_as_it_holds():
    assert evaluator(episodes=20, steps=5000).plan(length=1000.0) == 5


def test_a_budget_shorter_than_one_episode_still_plays_one():
    assert evaluator(episodes=20, steps=500).plan(length=1000.0) == 1


def test_a_budget_never_adds_episodes():
    assert evaluator(episodes=20, steps=10**6).plan(length=10.0) == 20


def test_a_budget_plays_one_episode_while_no_length_is_known():
    assert evaluator(episodes=20, steps=5000).plan(length=float("nan")) == 1


def test_the_latest_evaluations_length_counts_before_the_training_episodes():
    judge = evaluator(episodes=20, steps=5000)
    judge.latest = {"episodes": 4.0, "length": 2500.0}
    assert judge.plan(length=100.0) == 2


def test_the_planned_episodes_are_split_over_the_actors():
    judge = evaluator(episodes=20, steps=5000)
    judge.plan(length=1000.0)
    assert judge.shares(2) == [3, 2]


@pytest.mark.parametrize("cores, changes, expected", [
    (2, ["sample.actors=1"], 1),                               # SAC beside one actor on 2 cores
    (2, ["sample.actors=2"], 1),                               # never below one
    (16, ["sample.actors=2"], MAX_AUTO_THREADS),
    (8, ["sample.actors=4", "ray.address=auto"], MAX_AUTO_THREADS),   # the actors are on other machines
    (8, ["sample.actors=4", "train.threads=3"], 3),            # a number is kept
])
def test_the_learner_takes_the_cores_its_actors_leave(monkeypatch, cores, changes, expected):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert learner_threads(load(["mdp/gym.yml"], changes)) == expected
