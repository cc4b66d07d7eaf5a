"""Typed sections against the YAML: the defaults live only in lamarckian.yml, so every section class must have
exactly its section's keys (no more, no fewer) and no default values of its own."""

from __future__ import annotations

import dataclasses
import importlib
import re
import subprocess
import sys

import pytest

from lamarckian.config import ConfigError, load
from lamarckian.config.sections import Section, lookup_section
from lamarckian.registry import ALGORITHMS, ENVIRONMENTS

MODULES = ("lamarckian.rl.selfplay.pool", "lamarckian.model.network", "lamarckian.ec.pbt", "lamarckian.ec.nsga_ii",
           "lamarckian.ec.tournament", "lamarckian.mdp.pong", "lamarckian.mdp.coins", "lamarckian.rpc.settings",
           "lamarckian.ec.settings")


def sections() -> list[type[Section]]:
    for module in MODULES:
        importlib.import_module(module)
    for registry in (ALGORITHMS, ENVIRONMENTS):       # the sections the registries name, torch-free beside their owners
        for name in registry.names():
            registry.sections(name)
    found, todo = [], list(Section.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo += cls.__subclasses__()
    return sorted(found, key=lambda cls: cls.KEY)


def test_every_section_class_has_exactly_its_yaml_keys_and_no_defaults():
    classes = sections()
    assert len(classes) >= 8
    defaults = load()
    for cls in classes:
        keys = set(lookup_section(defaults, cls.KEY)) - set(cls.OTHER_KEYS)
        fields = dataclasses.fields(cls)
        assert {f.name for f in fields} == keys, cls.__name__
        assert all(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                   for f in fields), f"{cls.__name__} carries defaults of its own"
        assert cls.defaults() == cls.from_config(defaults)


def test_ppo_settings_come_from_the_yaml_only():
    from lamarckian.rl.algorithms.ppo import PPOSettings

    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(PPOSettings))
    config = load()
    settings = PPOSettings.defaults()
    assert settings.lr_horizon == config["train"]["lr_horizon"] == 1e7     # once 1e6 in ppo.py, 1e7 in the YAML
    assert PPOSettings.defaults(lr=0.5).lr == 0.5


def test_a_section_missing_a_key_or_with_a_stray_one_names_it():
    from lamarckian.mdp.pong import PongSettings

    mapping = dict(lookup_section(load(), "mdp.pong"))
    with pytest.raises(ConfigError, match="mdp.pong.score"):
        PongSettings.from_mapping({k: v for k, v in mapping.items() if k != "score"})
    with pytest.raises(ConfigError, match="mdp.pong.colour"):
        PongSettings.from_mapping({**mapping, "colour": "red"})
    assert PongSettings.from_mapping({**mapping, "paddle_half": 1}).paddle_half == 1.0   # YAML 1 is a float here


@pytest.mark.parametrize("change, culprit", [("rl.discount=1.5", "rl.discount=1.5"), ("rl.gae=-0.1", "rl.gae=-0.1"),
                                             ("rl.algorithm=''", "rl.algorithm=''")])
def test_an_rl_setting_out_of_range_names_its_key(change, culprit):
    with pytest.raises(ConfigError, match=re.escape(culprit)):
        load([], [change])


@pytest.mark.parametrize("files, change, culprit", [
    ([], "rl.ppo.clip=0", "rl.ppo.clip=0.0: out of range (from -m rl.ppo.clip=0)"),
    ([], "rl.ppo.epochs=0", "rl.ppo.epochs=0: out of range (from -m rl.ppo.epochs=0)"),
    ([], "train.lr=-1", "train.lr=-1.0: out of range (from -m train.lr=-1)"),
    (["rl/sac.yml"], "rl.sac.tau=0", "rl.sac.tau=0.0: out of range (from -m rl.sac.tau=0)"),
    ([], "rl.dqn.tau=2", "rl.dqn.tau=2.0: out of range (from -m rl.dqn.tau=2)"),      # another algorithm's, too
    (["mdp/game/pong.yml"], "mdp.game.timeout=-1", "mdp.game.timeout=-1.0: out of range (from -m mdp.game.timeout=-1)"),
])
def test_load_refuses_an_algorithm_or_environment_setting_out_of_range(files, change, culprit):
    """Before any process starts or any environment is built (the game's timeout was first refused by the learner's
    probe environment)."""
    with pytest.raises(ConfigError, match=re.escape(culprit)):
        load(files, [change])


def test_load_checks_every_algorithm_and_environment_kind_without_torch():
    script = """
import sys
from lamarckian.config import load
from lamarckian.registry import ALGORITHMS, ENVIRONMENTS
for algorithm in ALGORITHMS.names():
    for kind in ENVIRONMENTS.names():
        load([], [f"rl.algorithm={algorithm}", f"mdp.create={kind}"])
print("torch" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == ["False"], done.stderr[-3000:]
