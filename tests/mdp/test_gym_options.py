"""The ``mdp.gym`` options for environments of every ecosystem: text parts of observations, wrappers from the
config, a function that registers the ids; and their errors."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from lamarckian.config import ConfigError, load
from lamarckian.errors import EnvironmentFailed
from lamarckian.mdp.gym import GymMDP
from lamarckian.mdp.text import word_counts
from lamarckian.model.observation import ObservationBatcher

from .gym_envs import Doubled, register_envs

ROOT = Path(__file__).resolve().parents[2]
REGISTER = "tests.mdp.gym_envs:register_envs"


def first_observation(mdp: GymMDP):
    return mdp.reset(0).controllers[0].get_state()


def test_a_text_part_becomes_its_word_counts():
    mdp = GymMDP.make("LamarckianNotes-v0", seed=0, register=REGISTER, text=32)
    observation = first_observation(mdp)
    assert mdp.spec.observation["note"] == gymnasium.spaces.Box(0.0, np.inf, (32,), np.float32)
    assert observation["note"].sum() == 2.0          # "go left" or "go right": two words


def test_two_texts_differ_in_their_counts():
    assert not np.array_equal(word_counts("go left", 64), word_counts("go right", 64))


def test_the_word_counts_ignore_case_and_punctuation():
    assert np.array_equal(word_counts("Go, LEFT!", 64), word_counts("go left", 64))


def test_text_zero_leaves_the_text_part_out():
    mdp = GymMDP.make("LamarckianNotes-v0", seed=0, register=REGISTER, text=0)
    assert list(mdp.spec.observation.spaces) == ["position"]


def test_a_model_takes_the_encoded_observation():
    mdp = GymMDP.make("LamarckianNotes-v0", seed=0, register=REGISTER)
    assert ObservationBatcher(mdp.spec.observation).convert(first_observation(mdp)).shape == (2 + 64,)


def test_an_observation_all_text_cannot_be_left_out():
    gymnasium.register("LamarckianAllText-v0", entry_point=lambda: AllText())
    with pytest.raises(ValueError, match="mdp.gym.text=0 leaves text parts out, but the whole observation is text"):
        GymMDP.make("LamarckianAllText-v0", text=0)


class AllText(gymnasium.Env):
    observation_space = gymnasium.spaces.Text(8)
    action_space = gymnasium.spaces.Discrete(2)


def test_wrappers_apply_in_order_with_their_arguments():
    mdp = GymMDP.make("CartPole-v1", wrappers=("gymnasium.wrappers:TimeAwareObservation",
                                               {"class": "tests.mdp.gym_envs:Doubled", "kwargs": {"factor": 3.0}}))
    assert isinstance(mdp.env, Doubled) and isinstance(mdp.env.env, gymnasium.wrappers.TimeAwareObservation)
    assert mdp.env.factor == 3.0


def test_a_wrapped_reward_reaches_the_player():
    mdp = GymMDP.make("CartPole-v1", seed=0, wrappers=({"class": "tests.mdp.gym_envs:Doubled",
                                                        "kwargs": {"factor": 3.0}},))
    controller = mdp.reset(0).controllers[0]
    asyncio.run(controller(0))
    assert controller.get_reward() == 3.0


@pytest.mark.parametrize("entry, message", [
    ("gymnasium.wrappers:NoSuchWrapper", r"mdp.gym.wrappers\[0\]='gymnasium.wrappers:NoSuchWrapper': module "
                                         r"'gymnasium.wrappers' has no 'NoSuchWrapper'"),
    ("no_such_package:Wrapper", r"mdp.gym.wrappers\[0\]='no_such_package:Wrapper': cannot import 'no_such_package'"),
    ("numpy:ndarray", r"mdp.gym.wrappers\[0\]='numpy:ndarray': expected a gymnasium.Wrapper subclass"),
    ({"class": "tests.mdp.gym_envs:Doubled", "kwargs": {"scale": 2}},
     r"mdp.gym.wrappers\[0\]='tests.mdp.gym_envs:Doubled' on CartPole-v1: TypeError"),
])
def test_a_wrapper_that_fails_is_named_with_its_key(entry, message):
    with pytest.raises(ValueError, match=message):
        GymMDP.make("CartPole-v1", wrappers=(entry,))


@pytest.mark.parametrize("edit, message", [
    ("mdp.gym.wrappers=[42]", r"mdp.gym.wrappers\[0\]=42: expected module:Class or \{class: module:Class"),
    ("mdp.gym.wrappers={class: a:B, args: 1}", "mdp.gym.wrappers"),
    ("mdp.gym.text=-1", "mdp.gym.text=-1: out of range"),
    ("mdp.gym.register=3", "mdp.gym.register=3: expected module:function or a module"),
])
def test_a_bad_option_is_refused_by_load(edit, message):
    with pytest.raises(ConfigError, match=message):
        load(["mdp/gym.yml"], [edit])


def test_the_register_function_is_called_before_make():
    assert GymMDP.make("LamarckianNotes-v0", register=REGISTER).spec.action == gymnasium.spaces.Discrete(2)


def test_a_register_module_is_imported():
    register_envs()         # the module registers on import once; here it is imported already
    assert GymMDP.make("LamarckianNotes-v0", register="tests.mdp.gym_envs").spec.action.n == 2


@pytest.mark.parametrize("spec, message", [
    ("tests.mdp.gym_envs:failing_register", r"mdp.gym.register='tests.mdp.gym_envs:failing_register' failed: "
                                            r"RuntimeError: no licence for this simulator"),
    ("tests.mdp.gym_envs:NOTES", r"mdp.gym.register='tests.mdp.gym_envs:NOTES': not a function \(tuple\)"),
    ("no_such_package_either", r"mdp.gym.register='no_such_package_either': cannot import it"),
])
def test_a_register_hook_that_fails_is_named(spec, message):
    with pytest.raises(ValueError, match=message):
        GymMDP.make("CartPole-v1", register=spec)


@pytest.mark.slow
def test_ppo_follows_a_note_given_in_words(tmp_path):
    completed = subprocess.run([sys.executable, str(ROOT / "train.py"), "-c", "mdp/gym.yml", "-m",
                                "mdp.gym.id=LamarckianNotes-v0", f"mdp.gym.register={REGISTER}", "seed=0",
                                "evaluator.terminate=self.fitness >= 0.95 or self.cost >= 100000",
                                f"root={tmp_path / 'run'}"], capture_output=True, text=True, timeout=600, cwd=ROOT,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "note is text: its words counted in 64 hashed buckets" in completed.stderr
    final = completed.stderr.strip().splitlines()[-1]
    assert float(re.search(r"the final weights: fitness (\S+)", final).group(1)) >= 0.95, final


def test_an_environment_that_fails_while_made_is_named_with_its_package_after_its_traceback(tmp_path):
    completed = subprocess.run([sys.executable, str(ROOT / "train.py"), "-c", "mdp/gym.yml", "-m",
                                "mdp.gym.id=LamarckianUnmakeable-v0", f"mdp.gym.register={REGISTER}",
                                f"root={tmp_path / 'run'}"], capture_output=True, text=True, timeout=300, cwd=ROOT,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines = completed.stderr.strip().splitlines()
    assert "RuntimeError: no licence for this simulator" in completed.stderr      # the environment's own traceback
    assert lines[-1] == ("lamarckian.errors.EnvironmentFailed: mdp.gym.id='LamarckianUnmakeable-v0': the environment "
                         "raised while it was made, in the package tests: RuntimeError: no licence for this "
                         "simulator"), lines[-1]


def test_an_environment_that_fails_at_reset_is_named_with_its_package():
    mdp = GymMDP.make("LamarckianNoReset-v0", register=REGISTER)
    with pytest.raises(EnvironmentFailed, match=r"mdp.gym.id='LamarckianNoReset-v0': the environment raised while it "
                                                r"reset, in the package tests: FileNotFoundError"):
        mdp.reset(0)


def test_a_reward_that_is_no_number_says_what_it_is():
    controller = GymMDP.make("LamarckianTwoAgents-v0", register=REGISTER).reset(0).controllers[0]
    with pytest.raises(TypeError, match=r"step\(\) returned the reward \(0.0, 1.0\), not a number: a vector reward "
                                        r"needs a reward_space"):
        asyncio.run(controller(0))
