"""The actor fleet's learner for ``rl.algorithm``: the learner of the algorithm's kind (or its own
``learner_class``). The learners know their algorithm; no learner knows another, so none imports its subclasses."""

from __future__ import annotations

from typing import Any, Mapping

from ..algorithms.build import algorithm_of
from .a3c_learner import A3CLearner
from .learner import Learner
from .replay_learner import OffPolicyLearner
from .supervisor import RemoteConnect

LEARNERS: dict[str, type[Learner]] = {"on_policy": Learner, "gradients": A3CLearner, "replay": OffPolicyLearner}


def fleet_learner(config: Mapping[str, Any], connect_remote: RemoteConnect | None = None) -> Learner:
    """A new learner of ``rl.algorithm`` (run it with :class:`.loop.TrainingLoop`); ``connect_remote`` reaches the
    remote workers of ``rl.remote.server`` (:func:`lamarckian.remote.fleet.connect`)."""
    algorithm = algorithm_of(config)
    return (algorithm.learner_class or LEARNERS[algorithm.kind])(config, connect_remote)
