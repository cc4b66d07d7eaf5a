"""The CPU physics batch stepped by worker processes (shared memory) gives exactly what one process gives."""

from __future__ import annotations

import os
import signal

import pytest
import torch

from lamarckian.mdp.vec import AntSumo, SumoSettings
from lamarckian.mdp.vec.physics import MuJoCoBatch
from lamarckian.mdp.vec.scene import scene_xml


def test_worker_processes_step_and_reset_exactly_like_one_process():
    xml = scene_xml(armature=0.01, damping=0.1)
    alone, shared = MuJoCoBatch(xml, 7, workers=1), MuJoCoBatch(xml, 7, workers=3)
    controls = torch.Generator().manual_seed(0)
    try:
        for step in range(15):
            ctrl = torch.rand(7, alone.model.nu, generator=controls) - 0.5
            alone.step(ctrl, 6)
            shared.step(ctrl, 6)
            if step == 7:                                  # restart environments 1 and 5 (one in each worker)
                qpos, qvel = alone.state()
                qpos[:, 0] += 0.3
                mask = torch.tensor([False, True, False, False, False, True, False])
                alone.set_state(mask, qpos, qvel)
                shared.set_state(mask, qpos, qvel)
        for a, b in zip(alone.state(), shared.state()):
            assert torch.equal(a, b)
    finally:
        alone.close()
        shared.close()


def test_a_task_trains_its_games_with_workers():
    one, two = AntSumo(4, SumoSettings(substeps=6), seed=3), AntSumo(4, SumoSettings(substeps=6, workers=2), seed=3)
    try:
        for task in (one, two):
            task.reset()
        actions = torch.Generator().manual_seed(1)
        for _ in range(5):
            act = torch.rand(8, 8, generator=actions) * 2 - 1
            (obs_one, reward_one, _, _), (obs_two, reward_two, _, _) = one.step(act), two.step(act)
            assert torch.equal(obs_one, obs_two)
            assert torch.equal(reward_one, reward_two)
    finally:
        one.close()
        two.close()


def test_a_dead_worker_is_an_error_not_a_hang():
    batch = MuJoCoBatch(scene_xml(), 4, workers=2)
    process = batch._workers[0][0]
    os.kill(process.pid, signal.SIGKILL)
    process.join(timeout=5)
    with pytest.raises(RuntimeError, match=f"physics worker process \\(pid {process.pid}\\) died"):
        batch.step(torch.zeros(4, batch.model.nu), 2)
    batch.close()
