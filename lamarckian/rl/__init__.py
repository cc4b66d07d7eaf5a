"""Reinforcement learning, in the parts its folders name:

* :mod:`.algorithms`: PPO, IMPALA, A3C, DQN, SAC and a user's own behind one interface (``rl.algorithm``), with
  their losses, replay and the population's batched PPO;
* :mod:`.fleet`: the actor-fleet back end: the sampling :class:`~.fleet.actor.Actor`, batched inference, the
  learners (on-policy, A3C's gradients, replay) and the multi-GPU update;
* :mod:`.vec`: the vectorized back end: one process stepping thousands of environments, its evaluation, Ray ranks
  and the vectorized population;
* :mod:`.selfplay`: opponent pools and running win rates;
* here: the one run loop (:mod:`.loop`), the evaluator, trajectory segments, seeds, data-parallel ranks.

Names are imported on first use (PEP 562), so that the vectorized path (``lamarckian.rl.vec.learner``) runs where
the RPC layer's dependencies (ZeroMQ, cryptography) or Ray are not installed, as on a bare GPU machine. The flat
layout's import paths (``lamarckian.rl.Learner``, ``lamarckian.rl.ppo``, ``lamarckian.rl.vec_learner``...) keep
working for one release with a DeprecationWarning naming the new one.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from typing import Any

from ..lazy import lazy_exports

_WHERE = {"Algorithm": "algorithms", "build_model": "algorithms", "Evaluator": "evaluator", "summarize": "evaluator",
          "TrainingLoop": "loop", "Trainer": "loop", "Segment": "segment"}
# names this package exported before the layout of folders: where they live now
_MOVED_NAMES = {"Actor": "fleet.actor", "Learner": "fleet.learner", "PPO": "algorithms.ppo",
                "PPOSettings": "algorithms.ppo", "vtrace_advantages": "algorithms.ppo"}
# modules of the flat layout: where they live now
_MOVED_MODULES = {
    "a3c": "algorithms.a3c", "dqn": "algorithms.dqn", "sac": "algorithms.sac", "ppo": "algorithms.ppo",
    "replay": "algorithms.replay", "optim": "algorithms.optim", "population_ppo": "algorithms.population_ppo",
    "actor": "fleet.actor", "inference": "fleet.inference", "learner": "fleet.learner",
    "gradient_learner": "fleet.a3c_learner", "offpolicy": "fleet.replay_learner", "update_ranks": "fleet.update_ranks",
    "vec_learner": "vec.learner", "vec_evaluation": "vec.evaluation", "vec_population": "vec.population",
    "ray_ranks": "vec.ray_ranks", "pool": "selfplay.pool", "window": "selfplay.window",
    "results": "...rating.results", "vec_games": "...rating.vec_games",
}

__all__ = sorted(_WHERE)
_exports = lazy_exports(__name__, _WHERE)


def __getattr__(name: str) -> Any:
    if name in _MOVED_NAMES:
        new = f"{__name__}.{_MOVED_NAMES[name]}"
        warnings.warn(f"lamarckian.rl.{name} is deprecated: import it from {new}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new), name)
    return _exports(name)


def new_module_name(old: str) -> str | None:
    """The module a flat-layout name ``lamarckian.rl.<old>`` moved to, or None."""
    where = _MOVED_MODULES.get(old.removeprefix(f"{__name__}.")) if old.startswith(f"{__name__}.") else None
    if where is None:
        return None
    return f"lamarckian.{where[3:]}" if where.startswith("...") else f"{__name__}.{where}"


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of a flat-layout module give the module where it lives now (the same object: classes pickled under
    the old name, as in an old checkpoint, load too), with a DeprecationWarning."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.machinery.ModuleSpec(fullname, self) if new_module_name(fullname) else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        new = new_module_name(spec.name)
        warnings.warn(f"{spec.name} is deprecated: import {new}", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: Any) -> None:
        """The module is the new one, already executed."""


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())
