"""Every shipped task file with every shipped algorithm file and the recurrent-model file: the combination loads, or
it is refused in one line naming a setting of the user's choice. A key the user never set never breaks a
combination (issue 52: Pendulum's tuned gSDE broke ``pendulum.yml rl/lstm.yml``), and a recurrent run never
receives a tuned section measured with a feed-forward network."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from lamarckian.config import CONFIG_DIR, ConfigError, load, load_with_sources
from lamarckian.config.loader import read_yaml
from lamarckian.evolve import main as evolve_main
from lamarckian.train import main as train_main

ALGORITHMS = [(), *((f"rl/{name}.yml",) for name in ("ppo", "ppo_gpu", "a3c", "impala", "dqn", "sac"))]
MODELS = [(), ("rl/lstm.yml",)]
KEY = re.compile(r"\b[a-z_]+\.[a-z_]+(\.[a-z_]+)*\b")          # a dotted setting: rl.algorithm, model.recurrent, ...


def is_evolution(path: Path) -> bool:
    """An evolve.py file (it sets the ``ec`` section): composed through evolve.py."""
    return "ec" in (read_yaml(path) or {})


def task_files() -> list[tuple[str, ...]]:
    """Each shipped task file under mdp/ after its family's file (mdp/gym/hopper.yml after mdp/gym.yml); wrappers
    (mdp/**/wrap/) are not tasks."""
    tasks = []
    for path in sorted((CONFIG_DIR / "mdp").rglob("*.yml")):
        name = path.relative_to(CONFIG_DIR).as_posix()
        if "/wrap/" in name:
            continue
        family = path.parent.with_suffix(".yml")
        first = (family.relative_to(CONFIG_DIR).as_posix(),) if path.parent != CONFIG_DIR / "mdp" and \
            family.exists() else ()
        tasks.append((*first, name))
    return tasks


COMBINATIONS = [(*task, *algorithm, *model) for task, algorithm, model in itertools.product(task_files(), ALGORITHMS,
                                                                                              MODELS)]


def culprit_origin(files: tuple[str, ...], error: str, evolution: bool) -> str:
    """Where the first setting an error names was set (``-c`` file, tuned section or the defaults); "" when the
    combination does not load (the loader's own one-line refusal named it) or the line names no setting."""
    found = KEY.search(error.split(": error: ", 1)[1])
    try:
        _, sources = load_with_sources(files, ranges=evolution)
    except ConfigError:
        return ""
    return sources.of(found.group(0)) if found else ""


@pytest.mark.parametrize("files", COMBINATIONS, ids=" ".join)
def test_a_combination_of_shipped_files_loads_or_is_refused_in_one_line(files, capsys, tmp_path):
    """Loads (exit 0), or exit 2 with one error line that names a setting, and never one that only a task's tuned
    section set (a key the user never chose)."""
    evolution = is_evolution(CONFIG_DIR / files[-1 - sum(f.startswith("rl/") for f in files)])
    code = (evolve_main if evolution else train_main)(["-c", *files, "--print-config", "-m", f"root={tmp_path}/run"])
    errors = [line for line in capsys.readouterr().err.splitlines() if ": error: " in line]
    refused = code == 2 and len(errors) == 1 and KEY.search(errors[0].split(": error: ", 1)[1]) is not None and \
        "(tuned." not in culprit_origin(files, errors[0], evolution)
    assert (code, len(errors)) == (0, 0) or refused, errors


def test_the_shipped_files_make_many_combinations():
    assert len(COMBINATIONS) >= 300


def test_a_recurrent_run_leaves_the_feed_forward_tuned_section_out():
    config = load(["mdp/gym.yml", "mdp/gym/pendulum.yml", "rl/lstm.yml"])
    assert config["model"]["sde"] == 0


def test_a_feed_forward_run_keeps_it():
    assert load(["mdp/gym.yml", "mdp/gym/pendulum.yml"])["model"]["sde"] == 4


def test_a_tuned_section_for_the_recurrent_network_applies_to_it(tmp_path):
    task = tmp_path / "task.yml"
    task.write_text("mdp: {gym: {id: CartPole-v1}}\n"
                    "tuned:\n  ppo: {train: {lr: 0.01}}\n  ppo_lstm: {train: {lr: 0.002}}\n")
    assert load(["mdp/gym.yml", str(task), "rl/lstm.yml"])["train"]["lr"] == 0.002


def test_evolve_prints_its_configuration_and_starts_nothing(capsys, tmp_path):
    assert evolve_main(["-c", "mdp/pong/behavior.yml", "--print-config", "-m", f"root={tmp_path}/run"]) == 0
    assert "idle_reward" in capsys.readouterr().out
