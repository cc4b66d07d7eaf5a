"""The extension points, one :class:`Registry` each: a config key whose value is a built-in name or a user's own
``package.module:Name``. A built-in is registered as the ``module:Name`` it lives at, exactly as a user names theirs,
so it is imported only when a run uses it and the two routes are one. Imports nothing of the package: the config
checks (``config/``) read the names here without importing an environment or an algorithm.

==================  ===================================================  ======================================
key                 the named object                                     built by
==================  ===================================================  ======================================
``rl.algorithm``    a :class:`lamarckian.rl.algorithms.Algorithm` class  ``Class(**rl.kwargs)``
``mdp.create``      a :class:`lamarckian.mdp.MDP` class                  ``Class.from_mdp(mdp section, seed)``
``mdp.vec.task``    a :class:`lamarckian.mdp.vec.VecTask` class          see :func:`lamarckian.mdp.vec.create_vec_task`
``ec.algorithm``    a :class:`lamarckian.ec.base.EvolutionAlgorithm`     with its ``SETTINGS`` or ``**ec.kwargs``
``ec.pbt.exploit``  a function ``(pbt, slot) -> donor slot or None``     called as it is
``ec.pbt.explore``  a function ``(pbt, hparams) -> hparams``             called as it is
==================  ===================================================  ======================================
"""

from __future__ import annotations

import importlib
from typing import Any, Mapping


def is_plugin(name: object) -> bool:
    """``name`` has the ``module:Name`` form."""
    return isinstance(name, str) and ":" in name


def load_plugin(spec: str, key: str) -> Any:
    """The object ``module:Name`` names; ValueError naming ``key`` when the module or the name is missing."""
    module_name, _, attribute = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"{key}={spec!r}: cannot import {module_name!r} ({error})") from None
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ValueError(f"{key}={spec!r}: module {module_name!r} has no {attribute!r}") from None


class Registry:
    """The names one config key accepts.

    Args:
        key: the config key (``mdp.create``), named in every error.
        built_in: built-in name → ``module:Name``.
        form: how a user's own entry is written, for errors (``module:ClassName``).
        settings: built-in name → the ``module:Class`` of each typed section it reads (in torch-free modules), which
            ``load()`` builds, and so checks, for the name a run chooses (a user's own entry checks its own
            arguments when it is built).
    """

    def __init__(self, key: str, built_in: Mapping[str, str], form: str = "module:ClassName",
                 settings: Mapping[str, tuple[str, ...]] | None = None) -> None:
        self.key, self.built_in, self.form = key, dict(built_in), form
        self.settings = dict(settings or {})
        unknown = [name for name in self.settings if name not in self.built_in]
        if unknown:
            raise ValueError(f"{key}: settings for {', '.join(unknown)}, which are not built-in names")

    def names(self) -> tuple[str, ...]:
        """The built-in names, in registration order."""
        return tuple(self.built_in)

    def knows(self, name: object) -> bool:
        """``name`` is a built-in or has the form of a user's entry (which may still fail to import)."""
        return name in self.built_in or is_plugin(name)

    def get(self, name: str) -> Any:
        """The object ``name`` stands for, imported; ValueError naming the key for an unknown name or a
        ``module:Name`` that cannot be imported."""
        spec = self.built_in.get(name, name)
        if not is_plugin(spec):
            raise ValueError(f"{self.key}={name!r}: expected one of {', '.join(self.built_in)} or {self.form}")
        return load_plugin(spec, self.key)

    def sections(self, name: object) -> tuple[Any, ...]:
        """The typed section classes the built-in ``name`` reads, imported (none for a user's own entry)."""
        return tuple(load_plugin(spec, self.key) for spec in self.settings.get(str(name), ()))

    def get_class(self, name: str, base: type) -> Any:
        """:meth:`get`, which must be a subclass of ``base`` (ValueError naming the key otherwise)."""
        cls = self.get(name)
        if not (isinstance(cls, type) and issubclass(cls, base)):
            raise ValueError(f"{self.key}={name!r}: expected a subclass of {base.__module__}.{base.__qualname__}, "
                             f"got {cls!r}")
        return cls


_PPO = ("lamarckian.rl.algorithms.ppo_settings:PPOSettings",)
_REPLAY = "lamarckian.rl.algorithms.replay_settings:ReplaySettings"

ALGORITHMS = Registry("rl.algorithm", {
    "ppo": "lamarckian.rl.algorithms.builtin:PPOAlgorithm",
    "impala": "lamarckian.rl.algorithms.builtin:IMPALA",
    "a3c": "lamarckian.rl.algorithms.builtin:A3C",
    "dqn": "lamarckian.rl.algorithms.builtin:DQNAlgorithm",
    "sac": "lamarckian.rl.algorithms.builtin:SACAlgorithm",
    "td3": "lamarckian.rl.algorithms.td3:TD3Algorithm",
}, settings={
    "ppo": _PPO, "impala": _PPO, "a3c": _PPO,
    "dqn": ("lamarckian.rl.algorithms.dqn_settings:DQNSettings",
            "lamarckian.rl.algorithms.dqn_settings:EpsilonSettings", _REPLAY),
    "sac": ("lamarckian.rl.algorithms.sac_settings:SACSettings", _REPLAY),
    "td3": ("lamarckian.rl.algorithms.td3_settings:TD3Settings", _REPLAY),
})

ENVIRONMENTS = Registry("mdp.create", {
    "pong": "lamarckian.mdp.pong:Pong",
    "coins": "lamarckian.mdp.coins:Coins",
    "gym": "lamarckian.mdp.gym:GymMDP",
    "pettingzoo": "lamarckian.mdp.pettingzoo:ParallelMDP",
    "game": "lamarckian.games.mdp:GameMDP",
    "service": "lamarckian.games.service:ServiceMDP",
}, settings={
    "pong": ("lamarckian.mdp.pong:PongSettings",),
    "gym": ("lamarckian.mdp.gym_settings:GymSettings", "lamarckian.mdp.atari:AtariSettings"),
    "coins": ("lamarckian.mdp.coins:CoinsSettings",),
    "game": ("lamarckian.games.client:GameSettings",),
    "service": ("lamarckian.games.service:ServiceSettings",),
})
VECTORIZED = "vec"      # mdp.create's one name that is no MDP: a vectorized task (mdp.vec.task) trained in-process

VEC_TASKS = Registry("mdp.vec.task", {
    "ant_sumo": "lamarckian.mdp.vec.sumo:AntSumo",
    "ant_battle": "lamarckian.mdp.vec.battle:AntBattle",
})

EVOLUTION = Registry("ec.algorithm", {
    "pbt": "lamarckian.ec.pbt:PBT",
    "nsga_ii": "lamarckian.ec.nsga_ii:NSGA2",
    "tournament": "lamarckian.ec.tournament:Tournament",
})

EXPLOITS = Registry("ec.pbt.exploit", {
    "truncation": "lamarckian.ec.pbt:truncation",
    "ttest": "lamarckian.ec.pbt:ttest",
    "none": "lamarckian.ec.pbt:no_exploit",
}, form="module:function")

EXPLORES = Registry("ec.pbt.explore", {
    "perturb": "lamarckian.ec.pbt:perturb",
    "resample": "lamarckian.ec.pbt:resample",
}, form="module:function")
