"""The extension points' registries: every built-in name stands for what its key needs, under that name."""

from __future__ import annotations

import pytest

from lamarckian.ec.base import EvolutionAlgorithm
from lamarckian.mdp.base import MDP
from lamarckian.mdp.vec.base import VecTask
from lamarckian.registry import ALGORITHMS, ENVIRONMENTS, EVOLUTION, EXPLOITS, EXPLORES, VEC_TASKS
from lamarckian.rl.algorithms import Algorithm


@pytest.mark.parametrize("registry, base", [(ALGORITHMS, Algorithm), (EVOLUTION, EvolutionAlgorithm)])
def test_a_built_in_algorithm_is_registered_under_its_own_name(registry, base):
    assert {name: registry.get_class(name, base).name for name in registry.names()} == \
        {name: name for name in registry.names()}


@pytest.mark.parametrize("registry, base", [(ENVIRONMENTS, MDP), (VEC_TASKS, VecTask)])
def test_every_built_in_environment_kind_is_a_class_of_its_kind(registry, base):
    assert all(issubclass(registry.get_class(name, base), base) for name in registry.names())


@pytest.mark.parametrize("registry", [EXPLOITS, EXPLORES])
def test_every_built_in_pbt_rule_is_a_function(registry):
    assert all(callable(registry.get(name)) for name in registry.names())


def test_an_unknown_name_is_refused_naming_the_key_and_the_choices():
    with pytest.raises(ValueError, match=r"ec\.algorithm='cma': expected one of pbt, nsga_ii, tournament or "
                                         r"module:ClassName"):
        EVOLUTION.get("cma")


def test_a_users_class_of_the_wrong_kind_is_refused_naming_the_key():
    with pytest.raises(ValueError, match=r"mdp\.create='tests\.plugins\.evolution:Restarts': expected a subclass of "
                                         r"lamarckian\.mdp\.base\.MDP"):
        ENVIRONMENTS.get_class("tests.plugins.evolution:Restarts", MDP)


def test_the_algorithms_own_sections_are_checked_at_load():
    from lamarckian.config import ConfigError, load

    with pytest.raises(ConfigError, match=r"rl\.sac\.tau=0\.0: out of range \(from -m rl\.sac\.tau=0\.0\)"):
        load([], ["rl.sac.tau=0.0"])
