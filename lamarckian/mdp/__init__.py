"""Environments on the asyncio MDP/Controller contract: gymnasium, PettingZoo, the built-in Pong, wrappers."""

from .base import MDP, Controller, Episode, Lockstep, PlayerSpec
from .factory import create_mdp, wrap_controller

__all__ = ["MDP", "Controller", "Episode", "Lockstep", "PlayerSpec", "create_mdp", "wrap_controller"]
