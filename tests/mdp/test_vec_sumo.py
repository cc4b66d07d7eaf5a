"""Ant Sumo task logic on the CPU MuJoCo backend: layout of the tensors, ring-out, HP, draw, reset_idx."""

from __future__ import annotations

import dataclasses

import torch

from lamarckian.mdp.vec import AntSumo, SumoSettings

from .vec_helpers import ants, place, still

E = 4


def test_layout_is_agent_major_with_40_observations():
    task = AntSumo(E, seed=1)
    observations = task.reset()
    assert observations.shape == (2 * E, 40)
    assert observations.dtype == torch.float32
    qpos = ants(task)
    torch.testing.assert_close(observations[:E, :3], qpos[:, 0, :3])      # agent 0's own position
    torch.testing.assert_close(observations[E:, :3], qpos[:, 1, :3])      # then agent 1's
    torch.testing.assert_close(observations[E:, 29:32], qpos[:, 0, :3])   # its opponent: agent 0
    torch.testing.assert_close(observations[:E, 36:38], qpos[:, 1, :2] - qpos[:, 0, :2])
    assert torch.all(observations[:, 13:21].abs() <= 1.0 + 1e-6)  # scaled joint positions
    # opposite sides of the centre, inside the spawn band
    radius = qpos[:, :, :2].norm(dim=-1)
    assert torch.all((radius >= 1.0 - 1e-6) & (radius <= 1.5 + 1e-6))
    assert torch.all((qpos[:, 0, :2] * qpos[:, 1, :2]).sum(1) < 0)


def test_ants_stand_still_with_neutral_actions():
    task = AntSumo(E)
    task.reset()
    for _ in range(120):  # 2 s at 60 Hz
        _, reward, done, _ = task.step(still(task))
        assert not done.any()
    assert torch.all(ants(task)[:, :, 2] > task.settings.fallen_height)
    assert torch.all(task.hp == task.settings.hp)
    assert torch.all(task.progress == 120)


def test_ring_out_loses_and_the_environment_restarts():
    task = AntSumo(E)
    task.reset()
    task.progress[:] = 10
    place(task, 2, 0, 3.4, 0.0)  # agent 0 of environment 2 outside the 3 m ring
    _, reward, done, extras = task.step(still(task))
    assert done.tolist() == [False, False, True, False]
    assert extras["lose"][2]
    assert not extras["win"][2]
    assert not extras["draw"][2]
    assert not extras["time_outs"][2]
    assert reward[2] < -1900
    assert reward[E + 2] > 1900  # agent 0 (row 2), agent 1 (row E + 2)
    assert abs(reward[0]) < 100
    assert task.progress[2] == 0
    assert task.progress[0] == 11  # restarted: inside the ring again
    assert torch.all(ants(task)[2, :, :2].norm(dim=-1) <= 1.5 + 1e-6)


def test_hp_drains_while_fallen_and_zero_hp_loses():
    task = AntSumo(E)
    task.reset()
    place(task, 1, 1, *ants(task)[1, 1, :2].tolist(), z=0.2)  # agent 1 of environment 1 lying low
    task.hp[1, 1] = 50
    _, _, done, _ = task.step(still(task))
    assert task.hp[1, 1] == 49
    assert not done[1]
    assert task.hp[0, 1] == 100
    place(task, 1, 1, *ants(task)[1, 1, :2].tolist(), z=0.2)
    task.hp[1, 1] = 1
    _, reward, done, extras = task.step(still(task))
    assert done[1]
    assert extras["win"][1]
    assert reward[1] > 1900
    assert reward[E + 1] < -1900
    assert task.hp[1, 1] == task.settings.hp  # reset


def test_time_limit_is_a_draw():
    task = AntSumo(E, dataclasses.replace(SumoSettings(), max_episode_length=3))
    task.reset()
    for step in range(3):
        _, reward, done, extras = task.step(still(task))
    assert done.all()
    assert extras["draw"].all()
    assert extras["time_outs"].all()
    assert not extras["win"].any()
    assert not extras["lose"].any()
    assert torch.all(reward < -900)
    assert torch.all(task.progress == 0)


def test_reset_idx_only_touches_the_given_environments():
    task = AntSumo(E, seed=3)
    task.reset()
    for _ in range(5):
        task.step(still(task))
    before = ants(task)
    task.hp[:] = 42
    task.reset_idx(torch.tensor([0, 3]))
    after = ants(task)
    assert task.hp[0].tolist() == [100, 100]
    assert task.hp[1].tolist() == [42, 42]
    assert task.hp[3].tolist() == [100, 100]
    torch.testing.assert_close(after[1:3], before[1:3], rtol=0, atol=0)
    assert not torch.allclose(after[0], before[0])
    assert task.progress.tolist() == [0, 5, 5, 0]


def test_a_slower_control_rate_keeps_every_constant_per_second():
    """20 Hz control (6 physics steps): a third of the steps to the time limit, three times the HP lost and the
    speed reward per step, the same physics time per second of game."""
    fast, slow = AntSumo(E, seed=4), AntSumo(E, SumoSettings(substeps=6), seed=4)
    assert (fast.max_episode_length, slow.max_episode_length) == (1000, 333)
    assert slow.step_scale == 3.0
    qpos, qvel = fast.split(*fast.physics.state())
    qpos, qvel = qpos.clone(), qvel.clone()
    qpos[1, 1, 2] = 0.2                        # agent 1 of environment 1 lying low
    qvel[:, 0, 0] = 1.0                        # agent 0 running at 1 m/s along x
    rewards = {}
    for task in (fast, slow):
        task.reset()
        task.previous_radius = qpos[..., :2].norm(dim=-1)
        rewards[task] = task._judge(qpos, qvel, torch.zeros(E, 2, 8))[0]
    assert fast.hp[1, 1] == 99
    assert slow.hp[1, 1] == 97
    torch.testing.assert_close(rewards[slow], 3 * rewards[fast])   # speed reward and costs per step, × 3


def test_egocentric_columns_and_time_left():
    task = AntSumo(E, SumoSettings(egocentric=True, observe_time=True), seed=2)
    observations = task.reset()
    assert task.num_obs == 52
    assert observations.shape == (2 * E, 52)
    qpos = ants(task)
    assert torch.all(observations[:, 40] == 1.0)                                   # the whole episode is left
    # spawned facing the centre: the centre lies straight ahead, as far as the ant's radius, and so does the opponent
    radius, gap = qpos[:, :, :2].norm(dim=-1), (qpos[:, 0, :2] - qpos[:, 1, :2]).norm(dim=-1)
    ahead = observations[:E]
    torch.testing.assert_close(ahead[:, 43], radius[:, 0], atol=1e-4, rtol=0)         # the way to the centre: x
    assert torch.all(ahead[:, 44].abs() < 1e-3)                                      # ... and no sideways part
    torch.testing.assert_close(ahead[:, 45], task.settings.ring - radius[:, 0], atol=1e-4, rtol=0)  # to the edge
    torch.testing.assert_close(ahead[:, 46], gap, atol=1e-4, rtol=0)                  # the opponent straight ahead
    torch.testing.assert_close(ahead[:, 48], gap, atol=1e-4, rtol=0)                  # its distance
    assert torch.all(ahead[:, 50:52] == 0)                                           # at rest: no closing speed
    task.step(still(task))
    assert torch.all(task.reset() [:, 40] == 1.0)
    assert torch.all(task.step(still(task))[0][:, 40] < 1.0)


def test_spawn_band_and_yaw_follow_the_settings():
    task = AntSumo(64, SumoSettings(spawn_radius=(1.0, 3.0), spawn_yaw=0.5), seed=6)
    task.reset()
    radius = ants(task)[:, :, :2].norm(dim=-1)
    assert radius.min() >= 1.0 - 1e-6
    assert radius.max() <= 3.0 + 1e-6
    assert radius.max() > 2.5
    cos, sin = task.heading(ants(task))
    facing = -(ants(task)[:, :, :2] / radius[..., None] * torch.stack([cos, sin], -1)).sum(-1)  # cos of the deviation
    assert facing.min() < 0.97
    assert facing.min() >= torch.cos(torch.tensor(0.5)) - 1e-4
