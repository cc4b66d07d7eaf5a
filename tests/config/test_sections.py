"""Typed sections against the YAML: the defaults live only in lamarckian.yml, so every section class must have
exactly its section's keys (no more, no fewer) and no default values of its own."""

from __future__ import annotations

import dataclasses
import importlib
import re

import pytest

from lamarckian.config import ConfigError, load
from lamarckian.config.sections import Section, lookup_section

MODULES = ("lamarckian.rl.selfplay.pool", "lamarckian.model.network", "lamarckian.ec.pbt", "lamarckian.ec.nsga_ii",
           "lamarckian.ec.tournament", "lamarckian.mdp.pong", "lamarckian.mdp.coins", "lamarckian.rpc.settings",
           "lamarckian.ec.settings")


def sections() -> list[type[Section]]:
    for module in MODULES:
        importlib.import_module(module)
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
