"""An environment whose package is missing stops in one line naming the extra that installs it, and a Tuple
observation space (Blackjack) trains. Absence is simulated in a child process (``sys.modules[name] = None``), so the
tests hold whether or not the package is installed here."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import gymnasium
import numpy as np
import pytest

from lamarckian.train import main as train_main

REPOSITORY = Path(__file__).resolve().parents[2]


def error_without(modules: list[str], call: str) -> str:
    """The ValueError ``call`` raises in a process where ``modules`` cannot be imported."""
    code = (f"import sys\nfor name in {modules!r}: sys.modules[name] = None\n"
            f"try:\n    {call}\nexcept ValueError as error:\n    print(error)\n")
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPOSITORY,
                               timeout=120)
    return completed.stdout + completed.stderr


@pytest.mark.parametrize("module, missing, extra", [
    ("pettingzoo.butterfly.pistonball_v6", ["pymunk"], "lamarckian[pettingzoo-butterfly]"),
    ("pettingzoo.classic.chess_v6", ["chess"], "lamarckian[pettingzoo-classic]"),
    ("pettingzoo.sisl.multiwalker_v9", ["Box2D", "pymunk"], "lamarckian[pettingzoo-sisl]"),
])
def test_a_pettingzoo_family_without_its_packages_names_its_extra(module, missing, extra):
    output = error_without(missing, f"from lamarckian.mdp.pettingzoo import game_module; game_module({module!r})")
    assert f"pip install '{extra}'" in output, output


def test_a_box2d_environment_without_box2d_names_the_extra():
    output = error_without(["Box2D"], "from lamarckian.mdp.gym import GymSettings, make_env; "
                                      "make_env(GymSettings.defaults(id='LunarLander-v3'))")
    assert "pip install 'lamarckian[box2d]'" in output, output


@pytest.mark.parametrize("env_id, module, extra", [
    ("minigrid:MiniGrid-DoorKey-5x5-v0", "minigrid", "minigrid"),
    ("mo_gymnasium:deep-sea-treasure-v0", "mo_gymnasium", "mo"),
    ("gymnasium_robotics:PointMaze_UMaze-v3", "gymnasium_robotics", "robotics"),
    ("highway_env:parking-v0", "highway_env", "highway"),
])
def test_an_ecosystem_without_its_package_names_its_extra(env_id, module, extra):
    output = error_without([module], f"from lamarckian.mdp.gym import GymMDP; GymMDP.make({env_id!r})")
    assert f"needs the Python package {module!r}, which is not installed: pip install 'lamarckian[{extra}]'" \
        in output, output


def test_a_game_that_does_not_exist_is_not_blamed_on_an_extra():
    output = error_without([], "from lamarckian.mdp.pettingzoo import game_module; "
                               "game_module('pettingzoo.classic.nope_v1')")
    assert "No module named 'pettingzoo.classic.nope_v1'" in output, output


def random_blackjack_return(episodes: int) -> float:
    """The mean return of uniformly random actions over ``episodes`` seeded games (the reference)."""
    env, random = gymnasium.make("Blackjack-v1"), np.random.default_rng(0)
    total = 0.0
    for episode in range(episodes):
        env.reset(seed=episode)
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(int(random.integers(2)))
            total += float(reward)
            done = terminated or truncated
    return total / episodes


@pytest.mark.slow
def test_blackjack_a_tuple_observation_trains_past_the_random_policy(tmp_path):
    code = train_main(["--debug", "-c", "mdp/gym.yml", "-m", "mdp.gym.id=Blackjack-v1", f"root={tmp_path}",
                       "evaluator.episodes=1000", "evaluator.interval=10", "evaluator.terminate=self.time >= 30",
                       "evaluator.progress=false"])
    assert code == 0
    with open(tmp_path / "evaluations.csv", newline="") as stream:
        final = float(list(csv.DictReader(stream))[-1]["fitness"])
    assert final > random_blackjack_return(5000) + 0.15
