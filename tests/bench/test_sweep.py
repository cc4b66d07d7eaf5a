"""A representative slice of bench/sweep.py's environments (one of each observation and action space, one game of
each PettingZoo family installed with the requirements) trains through the generic configs, as the sweep runs them;
and the sweep tells a refusal, a traceback, a stall and an illegal move apart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY / "bench"))

import sweep  # noqa: E402

SLICE = [
    sweep.Environment("gym", "CartPole-v1", ("-c", "mdp/gym.yml", "-m", "mdp.gym.id=CartPole-v1")),  # Box → Discrete
    sweep.Environment("gym", "Pendulum-v1", ("-c", "mdp/gym.yml", "-m", "mdp.gym.id=Pendulum-v1")),  # → Box
    sweep.Environment("gym", "FrozenLake-v1", ("-c", "mdp/gym.yml", "-m", "mdp.gym.id=FrozenLake-v1")),  # Discrete →
    sweep.Environment("gym", "Blackjack-v1", ("-c", "mdp/gym.yml", "-m", "mdp.gym.id=Blackjack-v1")),  # Tuple →
    sweep.Environment("plugin", "Lock (MultiDiscrete)", ("-m", "mdp.create=tests.plugins.tasks:Lock")),
    sweep.Environment("plugin", "Lock (MultiBinary)", ("-m", "mdp.create=tests.plugins.tasks:Lock",
                                                       "mdp.kwargs={binary: true}")),
    sweep.Environment("pettingzoo", "mpe2.simple_spread_v3", ("-c", "mdp/pettingzoo.yml", "-m",
                                                              "mdp.pettingzoo.module=mpe2.simple_spread_v3")),
    sweep.Environment("pettingzoo", "pettingzoo.classic.tictactoe_v3", (   # turn-based, action masks
        "-c", "mdp/pettingzoo.yml", "-m", "mdp.pettingzoo.module=pettingzoo.classic.tictactoe_v3")),
]


@pytest.mark.slow
@pytest.mark.parametrize("environment", SLICE, ids=[e.name for e in SLICE])
def test_the_slice_trains(environment):
    outcome = sweep.run(environment, 1024, 180)
    assert outcome.kind == "trains", outcome.text


def completed(code: int, errors: str) -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess([], code, "", errors)


def test_a_usage_error_is_a_refusal_with_its_line(tmp_path):
    outcome = sweep.classify(completed(2, "train.py: error: mdp.gym.id=X needs the extra 'box2d'\n"), tmp_path)
    assert outcome == sweep.Outcome("refused", outcome.rate, "mdp.gym.id=X needs the extra 'box2d'")


def test_a_traceback_is_broken_even_when_the_run_ended(tmp_path):
    errors = "Traceback (most recent call last):\n  File \"x\", line 1\nKeyError: 'seat'\ndone: ...\n"
    assert sweep.classify(completed(0, errors), tmp_path).text == "traceback: KeyError: 'seat'"


def test_no_end_within_the_limit_is_a_stall(tmp_path):
    assert sweep.classify(None, tmp_path).kind == "broken"


def test_an_illegal_move_is_broken(tmp_path):
    errors = f"obs['action_mask'] {sweep.ILLEGAL_TEXT} can be chosen.\n" * 3
    assert sweep.classify(completed(0, errors), tmp_path).text == "illegal moves played (3 warnings)"


def test_an_environments_own_failure_while_made_is_told_apart(tmp_path):
    errors = ("Traceback (most recent call last):\n  File \"x\", line 1\nRuntimeError: no licence\n\nThe above "
              "exception was the direct cause of the following exception:\n\nTraceback (most recent call last):\n"
              "lamarckian.errors.EnvironmentFailed: mdp.gym.id='X-v0': the environment raised while it was made, in "
              "the package x: RuntimeError: no licence\n")
    assert sweep.classify(completed(1, errors), tmp_path).kind == "its own failure"


def test_the_newest_version_of_each_name_is_swept():
    assert sweep.newest_versions(["A-v0", "A-v2", "B-v1", "C"]) == ["A-v2", "B-v1", "C"]
