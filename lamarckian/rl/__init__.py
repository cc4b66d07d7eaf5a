"""Reinforcement learning: the sampling Actor, PPO, the Learner and the Evaluator.

Names are imported on first use (PEP 562), so that the vectorized path (``lamarckian.rl.vec_learner``) runs where
the RPC layer's dependencies (ZeroMQ, cryptography) or Ray are not installed, as on a bare GPU machine.
"""

from importlib import import_module
from typing import Any

_WHERE = {"Actor": "actor", "build_model": "actor", "Evaluator": "evaluator", "summarize": "evaluator",
          "Learner": "learner", "PPO": "ppo", "PPOSettings": "ppo", "vtrace_advantages": "ppo"}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_WHERE[name]}", __name__), name)
