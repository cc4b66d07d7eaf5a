"""The mjx backend against the mujoco backend (the same MJCF model): the same task fed the same actions agrees
within float32 tolerance over the first steps (contact onset later makes float32 and float64 part ways). JAX runs on
the CPU here; the tests marked ``gpu`` check the CUDA path (zero-copy DLPack hand-over, training on the device)."""

from __future__ import annotations

import pytest
import torch

from lamarckian.mdp.vec import AntBattle, AntSumo, BattleSettings, SumoSettings

from .vec_helpers import ants, place

E = 4


@pytest.fixture(scope="module")
def pair():
    """Ant Sumo on both backends, same seed (so the same spawns)."""
    cpu, xla = AntSumo(E, SumoSettings(backend="mujoco"), seed=5), AntSumo(E, SumoSettings(backend="mjx"), seed=5)
    yield cpu, xla
    cpu.close()
    xla.close()


@pytest.mark.slow
def test_backends_agree_over_the_first_steps(pair):
    cpu, xla = pair
    torch.testing.assert_close(xla.reset(), cpu.reset(), rtol=0, atol=1e-6)
    actions = torch.Generator().manual_seed(0)
    for _ in range(10):                      # 10 control steps = 20 physics steps of 1/120 s
        act = torch.rand(2 * E, 8, generator=actions) * 2 - 1
        (obs_cpu, reward_cpu, done_cpu, _), (obs_xla, reward_xla, done_xla, _) = cpu.step(act), xla.step(act)
        torch.testing.assert_close(obs_xla, obs_cpu, rtol=0, atol=1e-4)
        torch.testing.assert_close(reward_xla, reward_cpu, rtol=0, atol=1e-3)
        assert torch.equal(done_xla, done_cpu)
    moved = (ants(xla)[..., :3] - obs_xla.reshape(2, E, 40)[..., :3].transpose(0, 1)).abs().max()
    assert moved < 1e-6                       # the observation is the physics state, not a stale copy


def test_masked_reset_restarts_only_the_given_environments(pair):
    cpu, xla = pair
    for task in pair:
        task.reset()
        for _ in range(3):
            task.step(torch.full((2 * E, 8), 0.3))
    before = ants(xla)
    xla.reset_idx(torch.tensor([1]))
    cpu.reset_idx(torch.tensor([1]))
    after = ants(xla)
    torch.testing.assert_close(after[[0, 2, 3]], before[[0, 2, 3]], rtol=0, atol=0)
    torch.testing.assert_close(after[1], ants(cpu)[1], rtol=0, atol=1e-6)  # the same fresh spawn as the CPU copy
    assert xla.progress.tolist() == [3, 0, 3, 3]
    obs_cpu, _, _, _ = cpu.step(torch.zeros(2 * E, 8))
    obs_xla, _, _, _ = xla.step(torch.zeros(2 * E, 8))
    torch.testing.assert_close(obs_xla[[1, E + 1]], obs_cpu[[1, E + 1]], rtol=0, atol=1e-4)


@pytest.mark.slow
def test_the_shipped_joints_at_20_hz_stay_finite_and_agree():
    """Ant Sumo's config (armature 0.01, damping 0.1, 6 physics steps per control step, egocentric observations):
    MJX in float32 agrees with MuJoCo at first and stays finite through 100 control steps of random actions."""
    settings = dict(armature=0.01, damping=0.1, substeps=6, egocentric=True, observe_time=True)
    cpu = AntSumo(E, SumoSettings(backend="mujoco", **settings), seed=9)
    xla = AntSumo(E, SumoSettings(backend="mjx", **settings), seed=9)
    torch.testing.assert_close(xla.reset(), cpu.reset(), rtol=0, atol=1e-5)
    actions = torch.Generator().manual_seed(1)
    for step in range(100):                  # 5 s of game
        act = torch.rand(2 * E, 8, generator=actions) * 2 - 1
        (obs_cpu, _, _, _), (obs_xla, reward_xla, _, _) = cpu.step(act), xla.step(act)
        if step < 2:                         # 12 physics steps: before contacts part the two solvers' ways
            torch.testing.assert_close(obs_xla, obs_cpu, rtol=0, atol=1e-3)
        assert torch.isfinite(obs_xla).all()
        assert torch.isfinite(reward_xla).all()
    assert ants(xla)[..., 2].abs().max() < 3.0  # no ant launched into the air
    cpu.close()
    xla.close()


@pytest.mark.gpu
def test_state_reaches_torch_without_a_copy_on_cuda():
    task = AntSumo(64, SumoSettings(backend="mjx", device="cuda"))
    observations = task.reset()
    assert observations.is_cuda
    qpos, _ = task.physics.state()
    assert qpos.is_cuda
    assert qpos.data_ptr() == task.physics.data.qpos.unsafe_buffer_pointer()
    for _ in range(5):
        observations, reward, done, extras = task.step(torch.zeros(128, 8, device="cuda"))
    assert reward.is_cuda
    assert done.is_cuda
    assert extras["win"].is_cuda
    assert torch.isfinite(observations).all()
    task.close()


@pytest.mark.gpu
def test_ant_battle_runs_on_cuda():
    task = AntBattle(128, BattleSettings(ants=4, backend="mjx", device="cuda"))
    task.reset()
    for _ in range(30):
        observations, reward, done, extras = task.step(torch.rand(4 * 128, 8, device="cuda") * 2 - 1)
    assert observations.shape == (4 * 128, task.num_obs)
    assert torch.isfinite(observations).all()
    assert extras["ranks"].is_cuda
    task.close()


@pytest.mark.slow
def test_vec_learner_trains_on_the_mjx_backend(tmp_path):
    """The GPU path's code (MJX physics, DLPack hand-over, masked resets, on-device rollout) on CPU JAX."""
    from lamarckian.config import load
    from lamarckian.rl.loop import TrainingLoop
    from lamarckian.rl.ondevice.learner import OnDeviceLearner

    config = load(["mdp/vec/ant_sumo.yml", "rl/ppo_gpu.yml"], ["mdp.vec.backend=mjx", "mdp.vec.device=cpu",
                                                               "mdp.vec.num_envs.cpu=4", "mdp.vec.horizon=8",
                                                               "evaluator.progress=false",
                                                               "evaluator.episodes=2"])
    learner = OnDeviceLearner(config)
    learner.rollout()                            # resets every environment first
    place(learner.task, 1, 1, 3.5, 0.0)          # then the opponent of environment 1 leaves the ring
    segment, outcomes, _ = learner.rollout()
    assert segment.dones[0].tolist() == [0, 1, 0, 0]
    assert outcomes.sum() == 1
    before = [p.detach().clone() for p in learner.model.parameters()]
    TrainingLoop(learner).run(stop=lambda trainer: trainer.iteration >= 2)
    assert any(not torch.equal(a, b) for a, b in zip(before, learner.model.parameters()))
    assert torch.isfinite(learner.observations).all()
    learner.close()
