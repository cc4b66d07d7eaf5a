"""The sampling an MDP kind needs whatever files a run was composed of (lamarckian/config/kinds.py): a game served
by another process gets mdp/game.yml's sample section over the defaults and a task's tuned values, never over what
a -c file or -m edit set; the task's tuned section is left out in one logged line."""

from __future__ import annotations

import logging

import pytest

from lamarckian.config import load

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
