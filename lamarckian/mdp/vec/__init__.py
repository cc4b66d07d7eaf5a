"""Vectorized tasks (Isaac Gym style): thousands of environments per call; Ant Sumo on CPU MuJoCo so far."""

from .base import VecTask
from .sumo import AntSumo, SumoSettings

__all__ = ["AntSumo", "SumoSettings", "VecTask"]
