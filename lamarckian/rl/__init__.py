"""Reinforcement learning, in the parts its folders name:

* :mod:`.algorithms`: PPO, IMPALA, A3C, DQN, SAC and a user's own behind one interface (``rl.algorithm``), with
  their losses, replay and the population's batched PPO;
* :mod:`.fleet`: the actor-fleet back end: the sampling :class:`~.fleet.actor.Actor`, batched inference, the
  learners (on-policy, A3C's gradients, replay) and the multi-GPU update;
* :mod:`.vec`: the vectorized back end: one process stepping thousands of environments, its evaluation, Ray ranks
  and the vectorized population;
* :mod:`.selfplay`: opponent pools and running win rates;
* here: the one run loop (:mod:`.loop`), the evaluator, the acting policies, trajectory segments, seeds,
  data-parallel ranks.

Names are imported on first use (PEP 562), so that the vectorized path (``lamarckian.rl.ondevice.learner``) runs where
the RPC layer's dependencies (ZeroMQ, cryptography) or Ray are not installed, as on a bare GPU machine.
"""

from __future__ import annotations

from ..lazy import lazy_exports

_WHERE = {"Algorithm": "algorithms", "build_model": "algorithms", "Evaluator": "evaluator", "summarize": "evaluator",
          "TrainingLoop": "loop", "Trainer": "loop", "Segment": "segment"}

__all__ = sorted(_WHERE)
__getattr__ = lazy_exports(__name__, _WHERE)
