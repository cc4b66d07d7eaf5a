"""Reinforcement learning: the sampling Actor, the algorithms, the Learner and the Evaluator.

Names are imported on first use (PEP 562), so that the vectorized path (``lamarckian.rl.vec_learner``) runs where
the RPC layer's dependencies (ZeroMQ, cryptography) or Ray are not installed, as on a bare GPU machine.
"""

from ..lazy import lazy_exports

_WHERE = {"Actor": "actor", "Algorithm": "algorithms", "build_model": "algorithms", "Evaluator": "evaluator", "summarize": "evaluator",
          "Learner": "learner", "PPO": "ppo", "PPOSettings": "ppo", "vtrace_advantages": "ppo"}

__all__ = sorted(_WHERE)
__getattr__ = lazy_exports(__name__, _WHERE)
