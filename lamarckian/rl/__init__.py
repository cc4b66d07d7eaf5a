"""Reinforcement learning: the sampling Actor, PPO, the Learner and the Evaluator."""

from .actor import Actor, build_model
from .evaluator import Evaluator, summarize
from .learner import Learner
from .ppo import PPO, PPOSettings, vtrace_advantages

__all__ = ["PPO", "Actor", "Evaluator", "Learner", "PPOSettings", "build_model", "summarize", "vtrace_advantages"]
