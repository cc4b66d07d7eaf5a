"""Vectorized tasks (Isaac Gym style): thousands of environments per call; Ant Sumo on CPU MuJoCo so far."""

from typing import Any, Mapping

from .base import VecTask
from .sumo import AntSumo, SumoSettings

TASKS = ("ant_sumo",)
BACKENDS = ("mujoco",)


def create_vec_task(settings: Mapping[str, Any], seed: int = 0) -> VecTask:
    """The task of the ``mdp.vec`` section: ``task``, ``num_envs``, ``backend``, ``threads``."""
    if settings["task"] not in TASKS:
        raise ValueError(f"mdp.vec.task={settings['task']!r}: expected one of {TASKS}")
    if settings["backend"] not in BACKENDS:
        raise ValueError(f"mdp.vec.backend={settings['backend']!r}: expected one of {BACKENDS} (mjx and isaacgym "
                         "are not built yet)")
    return AntSumo(int(settings["num_envs"]), SumoSettings(threads=int(settings["threads"])), seed=seed)


__all__ = ["AntSumo", "SumoSettings", "VecTask", "create_vec_task"]
