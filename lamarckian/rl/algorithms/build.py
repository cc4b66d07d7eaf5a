"""Which algorithm a run trains with (``rl.algorithm``) and the network it acts with."""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ...config.sections import RLSettings
from ...mdp import MDP
from ...model.policy_set import PolicySet
from ...registry import ALGORITHMS, is_plugin
from ..policies import roles_of
from .base import KINDS, Algorithm


def algorithm_of(config: Mapping[str, Any]) -> Algorithm:
    """The algorithm ``rl.algorithm`` names (:data:`~lamarckian.registry.ALGORITHMS`: a built-in, or your own
    ``module:ClassName`` built with ``rl.kwargs``); ValueError naming the key for an unknown name, a class that
    cannot be imported or one that is not an :class:`Algorithm` of a known kind."""
    settings = RLSettings.from_config(config)
    name, kwargs = settings.algorithm, dict(settings.kwargs)
    if kwargs and not is_plugin(name):
        raise ValueError(f"rl.kwargs={kwargs}: the arguments of your own rl.algorithm (module:ClassName); "
                         f"{name}'s settings are its own sections (rl.{name}, rl.ppo, train...)")
    cls: type[Algorithm] = ALGORITHMS.get_class(name, Algorithm)
    if cls.kind not in KINDS:
        raise ValueError(f"rl.algorithm={name!r}: kind {cls.kind!r}, expected one of {', '.join(KINDS)}")
    try:
        return cls(**kwargs)
    except TypeError as error:
        raise ValueError(f"rl.kwargs={kwargs}: {name} refuses them ({error})") from None


def build_model(mdp: MDP, config: Mapping[str, Any]) -> torch.nn.Module:
    """The acting network of ``rl.algorithm`` for seat 0 of ``mdp``; with ``rl.policies``, a
    :class:`~lamarckian.model.PolicySet` of one network per policy, each for its seats."""
    algorithm = algorithm_of(config)
    roles = roles_of(mdp, config)
    if roles is None:
        return algorithm.acting_network(mdp, config)
    if algorithm.kind != "on_policy":
        raise ValueError(f"rl.policies: a policy per role trains with an on-policy algorithm on the actor fleet (ppo, "
                         f"impala); rl.algorithm={algorithm.name} is refused")
    return PolicySet({name: algorithm.acting_network(mdp, roles.config_of(config, name), seat=roles.seats_of(name)[0])
                      for name in roles.names})
