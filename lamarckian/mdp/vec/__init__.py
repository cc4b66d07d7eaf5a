"""Vectorized tasks (Isaac Gym style): thousands of environments per call, torch tensors on the task's device.

Tasks: Ant Sumo and Ant Battle on the ``mujoco`` (CPU) or ``mjx`` (JAX, GPU) physics backends, or any task of a
real Isaac Gym installation through the ``isaacgym`` backend (its own process: ``tools/isaacgym_server.py``).
"""

from typing import Any, Mapping

import torch

from ...config import per_device
from ...registry import VEC_TASKS, is_plugin
from .base import VecTask
from .battle import AntBattle, BattleSettings
from .physics import BACKENDS, mjx_available
from .ring import REWARD_WEIGHTS, AntRing, RewardWeights, RingSettings
from .sumo import AntSumo, SumoSettings


def placement(settings: Mapping[str, Any]) -> tuple[str, str, int]:
    """``(backend, device, num_envs)`` of the ``mdp.vec`` section, ``auto`` resolved: mjx on cuda where a CUDA
    device and MJX are both there, else mujoco on the CPU; ``num_envs`` either a number or one per device type
    (``{cpu: 16, cuda: 16384}``)."""
    backend, device, num_envs = settings["backend"], str(settings["device"]), settings["num_envs"]
    gpu = torch.cuda.is_available()
    if backend == "auto":
        backend = "mjx" if gpu and mjx_available() else "mujoco"
    if device == "auto":
        device = "cuda" if backend == "mjx" and gpu else "cpu"
    num_envs = per_device(num_envs, torch.device(device).type, "mdp.vec.num_envs")
    if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
        raise ValueError(f"mdp.vec.num_envs={num_envs!r}: expected a positive integer (or one per device type)")
    return backend, device, num_envs


def reward_settings(settings: Mapping[str, Any]) -> dict[str, float]:
    """The :class:`RewardWeights` the ``mdp.vec.reward`` section sets (name → weight)."""
    reward = settings.get("reward") or {}
    return {key: float(value) for key, value in reward.items() if key in REWARD_WEIGHTS}


def task_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`RingSettings` fields set by the ``mdp.vec`` section: ``observe_time``, ``egocentric``, the spawn
    band, ``spawn_yaw``, the ``physics`` joints and the ``reward`` weights (``reward.anneal`` belongs to the
    learner)."""
    physics = settings.get("physics") or {}
    fields: dict[str, Any] = {key: float(physics[key]) for key in ("kp", "kd", "armature", "damping") if key in physics}
    fields["reward"] = RewardWeights(**reward_settings(settings))
    for flag in ("observe_time", "egocentric"):
        if flag in settings:
            fields[flag] = bool(settings[flag])
    if "substeps" in settings:
        fields["substeps"] = int(settings["substeps"])
        if fields["substeps"] < 1:
            raise ValueError(f"mdp.vec.substeps={settings['substeps']!r}: at least 1 physics step per control step")
    if "spawn_yaw" in settings:
        fields["spawn_yaw"] = float(settings["spawn_yaw"])
    if settings.get("spawn_min") is not None or settings.get("spawn_max") is not None:
        near, far = settings.get("spawn_min"), settings.get("spawn_max")
        if near is None or far is None or not 0 <= float(near) <= float(far):
            raise ValueError(f"mdp.vec.spawn_min={near!r}, spawn_max={far!r}: give both, 0 <= spawn_min <= spawn_max")
        fields["spawn_radius"] = (float(near), float(far))
    return fields


def create_vec_task(settings: Mapping[str, Any], seed: int = 0) -> VecTask:
    """The task of the ``mdp.vec`` section (``task``: :data:`~lamarckian.registry.VEC_TASKS`): ``num_envs``,
    ``backend``, ``device``, ``workers``, the rules of :func:`task_settings`, the task's own keys (Ant Battle's
    ``ants``, ``play_to_end``), ``isaacgym`` (the server's address, key and timeout); your own VecTask class is
    built as ``ClassName(num_envs, device=..., seed=..., **mdp.vec.kwargs)``."""
    if is_plugin(settings["task"]):
        device = settings["device"] if settings["device"] != "auto" else "cuda" if torch.cuda.is_available() else "cpu"
        number = per_device(settings["num_envs"], torch.device(device).type, "mdp.vec.num_envs")
        return VEC_TASKS.get_class(settings["task"], VecTask)(int(number), device=device, seed=seed,
                                                               **dict(settings.get("kwargs") or {}))
    backend, device, num_envs = placement(settings)
    if backend == "isaacgym":                  # the server runs its own task
        from .remote import RemoteVecTask

        return RemoteVecTask.connect(settings["isaacgym"], num_envs=num_envs, seed=seed)
    if backend not in BACKENDS:
        raise ValueError(f"mdp.vec.backend={backend!r}: expected auto or one of {BACKENDS + ('isaacgym',)}")
    task = VEC_TASKS.get_class(settings["task"], AntRing)
    common = {"backend": backend, "device": device, "workers": int(settings["workers"]), **task_settings(settings)}
    return task.from_vec(num_envs, common, settings, seed=seed)


__all__ = ["AntBattle", "AntRing", "AntSumo", "BattleSettings", "RewardWeights", "RingSettings", "SumoSettings",
           "VecTask", "create_vec_task", "mjx_available", "placement"]
