"""Ant Sumo task logic on the CPU MuJoCo backend: layout of the tensors, ring-out, HP, draw, reset_idx."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from lamarckian.mdp.vec import AntSumo, SumoSettings

E = 4


def place(task: AntSumo, env: int, agent: int, x: float, y: float, z: float | None = None) -> None:
    qpos, qvel = task.physics.qpos[env:env + 1], task.physics.qvel[env:env + 1] * 0
    base = agent * 15
    qpos[0, base:base + 2] = (x, y)
    if z is not None:
        qpos[0, base + 2] = z
    task.physics.set_state([env], qpos, qvel)
    task.previous_radius[env] = np.linalg.norm(qpos[0].reshape(2, 15)[:, :2], axis=1)


def test_layout_is_agent_major_with_40_observations():
    task = AntSumo(E, seed=1)
    observations = task.reset()
    assert observations.shape == (2 * E, 40) and observations.dtype == torch.float32
    qpos = task.physics.qpos.reshape(E, 2, 15)
    np.testing.assert_allclose(observations[:E, :3].numpy(), qpos[:, 0, :3], atol=1e-6)   # agent 0's own position
    np.testing.assert_allclose(observations[E:, :3].numpy(), qpos[:, 1, :3], atol=1e-6)   # then agent 1's
    np.testing.assert_allclose(observations[E:, 29:32].numpy(), qpos[:, 0, :3], atol=1e-6)  # its opponent: agent 0
    np.testing.assert_allclose(observations[:E, 36:38].numpy(), qpos[:, 1, :2] - qpos[:, 0, :2], atol=1e-5)
    assert torch.all(observations[:, 13:21].abs() <= 1.0 + 1e-6)  # scaled joint positions
    # opposite sides of the centre, inside the spawn band
    radius = np.linalg.norm(qpos[:, :, :2], axis=-1)
    assert np.all((radius >= 1.0) & (radius <= 1.5))
    assert np.all(np.sum(qpos[:, 0, :2] * qpos[:, 1, :2], axis=1) < 0)


def test_ants_stand_still_with_neutral_actions():
    task = AntSumo(E)
    task.reset()
    for _ in range(120):  # 2 s at 60 Hz
        _, reward, done, _ = task.step(torch.zeros(2 * E, 8))
        assert not done.any()
    assert np.all(task.physics.qpos.reshape(E, 2, 15)[:, :, 2] > task.settings.fallen_height)
    assert np.all(task.hp == task.settings.hp) and np.all(task.progress == 120)


def test_ring_out_loses_and_the_environment_restarts():
    task = AntSumo(E)
    task.reset()
    task.progress[:] = 10
    place(task, 2, 0, 3.4, 0.0)  # agent 0 of environment 2 outside the 3 m ring
    _, reward, done, extras = task.step(torch.zeros(2 * E, 8))
    assert done.tolist() == [False, False, True, False]
    assert extras["lose"][2] and not extras["win"][2] and not extras["draw"][2] and not extras["time_outs"][2]
    assert reward[2] < -1900 and reward[E + 2] > 1900  # agent 0 (row 2), agent 1 (row E + 2)
    assert abs(reward[0]) < 100
    assert task.progress[2] == 0 and task.progress[0] == 11  # restarted: inside the ring again
    assert np.all(np.linalg.norm(task.physics.qpos[2].reshape(2, 15)[:, :2], axis=1) <= 1.5)


def test_hp_drains_while_fallen_and_zero_hp_loses():
    task = AntSumo(E)
    task.reset()
    place(task, 1, 1, *task.physics.qpos[1, 15:17], z=0.2)  # agent 1 of environment 1 lying low
    task.hp[1, 1] = 50
    _, _, done, _ = task.step(torch.zeros(2 * E, 8))
    assert task.hp[1, 1] == 49 and not done[1] and task.hp[0, 1] == 100
    place(task, 1, 1, *task.physics.qpos[1, 15:17], z=0.2)
    task.hp[1, 1] = 1
    _, reward, done, extras = task.step(torch.zeros(2 * E, 8))
    assert done[1] and extras["win"][1] and reward[1] > 1900 and reward[E + 1] < -1900
    assert task.hp[1, 1] == task.settings.hp  # reset


def test_time_limit_is_a_draw():
    task = AntSumo(E, dataclasses.replace(SumoSettings(), max_episode_length=3))
    task.reset()
    for step in range(3):
        _, reward, done, extras = task.step(torch.zeros(2 * E, 8))
    assert done.all() and extras["draw"].all() and extras["time_outs"].all()
    assert not extras["win"].any() and not extras["lose"].any()
    assert torch.all(reward < -900) and np.all(task.progress == 0)


def test_reset_idx_only_touches_the_given_environments():
    task = AntSumo(E, seed=3)
    task.reset()
    for _ in range(5):
        task.step(torch.zeros(2 * E, 8))
    before = task.physics.qpos.copy()
    task.hp[:] = 42
    task.reset_idx(torch.tensor([0, 3]))
    after = task.physics.qpos
    assert task.hp[0].tolist() == [100, 100] and task.hp[1].tolist() == [42, 42] and task.hp[3].tolist() == [100, 100]
    np.testing.assert_array_equal(after[1:3], before[1:3])
    assert not np.allclose(after[0], before[0]) and task.progress.tolist() == [0, 5, 5, 0]
