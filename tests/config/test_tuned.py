"""A task file's ``tuned.<algorithm>`` section: it wins over the algorithm file whatever the order, ``-m`` wins over
it, other algorithms' sections are ignored, and a bad section is refused in one line naming it (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lamarckian.config import ConfigError, load, load_with_sources
from lamarckian.train import main as train_main

TASK = ("mdp:\n  create: gym\n  gym: {id: Pendulum-v1}\n"
        "tuned:\n  sac: {train: {lr: 0.005, replay: {start: 7}}}\n  ppo: {train: {lr: 0.0001}}\n")
ALGORITHM = "rl: {algorithm: sac}\ntrain: {lr: 0.0003, replay: {start: 1000, batch: 32}}\n"


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    (tmp_path / "task.yml").write_text(TASK)
    (tmp_path / "sac.yml").write_text(ALGORITHM)
    return [str(tmp_path / "task.yml"), str(tmp_path / "sac.yml")]


def test_the_tasks_section_wins_over_an_algorithm_file_given_after_it(files):
    assert load(files)["train"]["lr"] == 0.005


def test_keys_the_section_does_not_set_keep_the_algorithm_files_values(files):
    assert load(files)["train"]["replay"]["batch"] == 32


def test_an_edit_wins_over_the_section(files):
    assert load(files, ["train.lr=0.002"])["train"]["lr"] == 0.002


def test_an_edit_of_a_nested_key_wins_over_the_section(files):
    assert load(files, ["train.replay.start=3"])["train"]["replay"]["start"] == 3


def test_another_algorithms_section_is_ignored(files):
    assert load(files, ["rl.algorithm=ppo"])["train"]["lr"] == 0.0001


def test_the_resolved_configuration_has_no_tuned_key(files):
    assert "tuned" not in load(files)


def test_the_origin_names_the_file_and_the_section(files):
    _, sources = load_with_sources(files)
    assert sources.of("train.lr") == f"{Path(files[0]).resolve()} (tuned.sac)"


def test_an_unknown_algorithm_is_refused_naming_it(files):
    with pytest.raises(ConfigError, match=r"tuned\.sacc \(from -m tuned\.sacc\.train\.lr=1\): no algorithm 'sacc'"):
        load(files, ["tuned.sacc.train.lr=1"])


def test_an_unknown_key_in_a_section_is_refused_naming_it(files):
    with pytest.raises(ConfigError, match=r"unknown key tuned\.sac\.train\.lrr .*did you mean tuned\.sac\.train\.lr"):
        load(files, ["tuned.sac.train.lrr=1"])


def test_a_wrong_type_in_a_section_is_refused(files):
    with pytest.raises(ConfigError, match=r"tuned\.sac\.train\.lr .*expected float"):
        load(files, ["tuned.sac.train.lr=fast"])


def test_a_section_cannot_choose_the_algorithm(files):
    with pytest.raises(ConfigError, match="cannot set rl.algorithm"):
        load(files, ["tuned.sac.rl.algorithm=ppo"])


def test_train_py_refuses_an_unknown_algorithm_in_one_line_with_exit_2(files, capsys):
    code = train_main(["-c", *files, "-m", "tuned.dqnn.train.lr=1"])
    assert (code, capsys.readouterr().err.count("\n")) == (2, 1)


def test_print_config_shows_the_value_and_its_origin(files, capsys):
    assert train_main(["-c", *files, "--print-config"]) == 0
    assert "#   train.lr = 0.005: " in capsys.readouterr().out


@pytest.mark.parametrize("task, algorithm", [("pendulum", "ppo"), ("pendulum", "sac"), ("acrobot", "dqn"),
                                             ("cartpole", "dqn"), ("cartpole", "ppo"), ("acrobot", "ppo")])
def test_every_shipped_task_loads_with_the_algorithms_that_fit_it(task, algorithm):
    config = load(["mdp/gym.yml", f"mdp/gym/{task}.yml", f"rl/{algorithm}.yml"])
    assert config["rl"]["algorithm"] == algorithm
