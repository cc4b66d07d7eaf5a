"""The values an MDP kind needs whatever files a run was composed of (lamarckian/config/kinds.py): a game served
by another process gets mdp/game.yml's sample section over the defaults and a task's tuned values, never over what
a -c file or -m edit set; the task's tuned section is left out in one logged line. A single-agent gymnasium task
with no tuned section for its algorithm gets untuned/gym.yml's values over the defaults only."""

from __future__ import annotations

import logging

import pytest

from lamarckian.config import load
from lamarckian.config.checked import load_with_sources
from lamarckian.config.loader import CONFIG_DIR, DEFAULTS, read_yaml

UNTUNED = CONFIG_DIR / "untuned" / "gym.yml"

HAND_COMPOSED = ["mdp/gym/cartpole.yml", "rl/ppo.yml"]


@pytest.fixture
def config_lines(caplog):
    caplog.set_level(logging.WARNING, logger="lamarckian.config")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "lamarckian.config"]


def test_a_game_composed_by_hand_samples_as_the_game_files_do():
    game_files = load(["mdp/game/cartpole.yml"])
    assert load(HAND_COMPOSED, ["mdp.create=game"])["sample"]["envs"] == game_files["sample"]["envs"]


def test_a_game_composed_by_hand_samples_ahead():
    assert load(HAND_COMPOSED, ["mdp.create=game"])["sample"]["sync"] is False


def test_an_edit_of_a_sampling_key_wins_over_the_kind():
    assert load(HAND_COMPOSED, ["mdp.create=game", "sample.envs=32"])["sample"]["envs"] == 32


def test_a_file_that_sets_a_sampling_key_wins_over_the_kind(tmp_path):
    own = tmp_path / "own.yml"
    own.write_text("sample:\n  truncation: 8\n")
    assert load([*HAND_COMPOSED, str(own)], ["mdp.create=game"])["sample"]["truncation"] == 8


def test_the_tasks_tuned_section_is_left_out_in_one_line_naming_it(config_lines):
    config = load(HAND_COMPOSED, ["mdp.create=game"])
    assert config["train"]["lr_schedule"] == "constant"
    assert len([line for line in config_lines() if "cartpole.yml's tuned.ppo section" in line]) == 1


def test_the_bundled_game_task_says_nothing(config_lines):
    load(["mdp/game/cartpole.yml", "rl/ppo.yml"])
    assert config_lines() == []


def test_a_task_run_in_process_keeps_its_tuned_section():
    assert load(HAND_COMPOSED)["sample"]["envs"] == 8


UNTUNED_TASK = ["mdp/gym.yml", "rl/ppo.yml"]
SWIMMER = ["mdp.gym.id=Swimmer-v5"]


def test_an_untuned_gymnasium_task_gets_the_sample_efficient_values():
    untuned = read_yaml(UNTUNED)["tuned"]["ppo"]["rl"]["ppo"]["epochs"]
    assert load(UNTUNED_TASK, SWIMMER)["rl"]["ppo"]["epochs"] == untuned


def test_an_untuned_gymnasium_task_samples_each_batch_with_its_weights():
    assert load(UNTUNED_TASK, SWIMMER)["sample"]["sync"] is True


def test_the_print_config_says_where_the_sample_efficient_values_came_from_and_why():
    _, sources = load_with_sources(UNTUNED_TASK, SWIMMER)
    assert "single-agent task, and no tuned.ppo section" in sources.of("rl.ppo.epochs")


def test_an_edit_wins_over_the_sample_efficient_values():
    assert load(UNTUNED_TASK, [*SWIMMER, "rl.ppo.epochs=3"])["rl"]["ppo"]["epochs"] == 3


def test_a_file_wins_over_the_sample_efficient_values(tmp_path):
    own = tmp_path / "own.yml"
    own.write_text("train:\n  batch: 512\n")
    assert load([*UNTUNED_TASK, str(own)], SWIMMER)["train"]["batch"] == 512


def test_a_task_with_its_own_tuned_section_keeps_the_defaults_it_was_tuned_on():
    """Acrobot's tuned.ppo section sets no minibatches: it was measured over the shipped 4, not the untuned 32."""
    assert load(["mdp/gym.yml", "mdp/gym/acrobot.yml", "rl/ppo.yml"])["rl"]["ppo"]["minibatches"] == 4


def test_the_default_game_keeps_the_throughput_defaults():
    assert load([])["rl"]["ppo"]["epochs"] == read_yaml(DEFAULTS)["rl"]["ppo"]["epochs"]


def test_another_algorithm_on_an_untuned_task_keeps_its_defaults():
    assert load(["mdp/gym.yml", "rl/sac.yml"], ["mdp.gym.id=Pendulum-v1"])["sample"]["sync"] is False
