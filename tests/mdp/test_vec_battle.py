"""Ant Battle task logic on the CPU MuJoCo backend: observation layout, shrinking ring, elimination ranks and the
rewards that follow them, the end of a game with and without agent 0."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from lamarckian.mdp.vec import AntBattle, BattleSettings

from .vec_helpers import ants, place, still

E = 3


def battle(ants_per_game: int = 4, **changes) -> AntBattle:
    task = AntBattle(E, dataclasses.replace(BattleSettings(ants=ants_per_game), **changes), seed=2)
    task.reset()
    return task


def test_observations_list_the_other_ants_in_seat_order():
    task = battle(3)
    observations = task.step(still(task))[0]
    assert observations.shape == (3 * E, 32 + 10 * 2) == (3 * E, task.num_obs)
    qpos = ants(task)
    seat1 = observations[E:2 * E]                 # agent 1: then agents 2 and 0
    torch.testing.assert_close(seat1[:, :3], qpos[:, 1, :3])
    torch.testing.assert_close(seat1[:, 32:35], qpos[:, 2, :3])
    torch.testing.assert_close(seat1[:, 42:45], qpos[:, 0, :3])
    torch.testing.assert_close(seat1[:, 39:41], qpos[:, 2, :2] - qpos[:, 1, :2])
    assert torch.all(seat1[:, 41] == 1)
    assert torch.all(seat1[:, 51] == 1)          # both others still in
    torch.testing.assert_close(seat1[:, 30], torch.full((E,), 4.0 - 0.003))        # ring after one step
    spawn = qpos[:, :, :2].norm(dim=-1)
    assert torch.all((spawn > 1.4) & (spawn < 2.6))


def test_the_ring_shrinks_until_its_minimum():
    task = battle(2)
    task.progress[:] = 500
    assert torch.allclose(task.ring_radius(), torch.full((E,), 2.5))
    task.progress[:] = 5000
    assert torch.allclose(task.ring_radius(), torch.full((E,), 1.0))
    # an ant at 3.5 m was inside the 4 m ring at the start, is out once it has shrunk below 3.5 m
    task = battle(2)
    place(task, 0, 1, 3.5, 0.0)
    _, _, done, _ = task.step(still(task))
    assert not done[0]
    task.progress[0] = 170                       # 4 - 0.003 * 171 = 3.487 < 3.5
    place(task, 0, 1, 3.5, 0.0)
    _, reward, done, extras = task.step(still(task))
    assert done[0]
    assert extras["win"][0]
    assert reward[0] > 1900
    assert reward[E] < -1900


def test_ranks_follow_the_elimination_order_and_rewards_follow_the_ranks():
    task = battle(4, play_to_end=True)
    place(task, 0, 3, 4.5, 0.0)                  # ant 3 out first: rank 4
    _, reward, done, extras = task.step(still(task))
    assert not done[0]
    assert task.alive[0].tolist() == [True, True, True, False]
    assert reward[3 * E] == pytest.approx(-2000, abs=50)                           # last place: lose_reward
    place(task, 0, 0, 4.5, 0.0)                  # then agent 0: rank 3, the game goes on (play to the end)
    _, reward, done, extras = task.step(still(task))
    assert not done[0]
    assert reward[0] == pytest.approx(2000 - 4000 * 2 / 3, abs=50)
    # and on a later step ants 1 and 2 leave together: no one is left, they share first place (a draw)
    place(task, 0, 1, 4.5, 0.0)
    place(task, 0, 2, -4.5, 0.0)
    _, reward, done, extras = task.step(still(task))
    assert done[0]
    assert extras["ranks"][0].tolist() == [3, 1, 1, 4]
    assert extras["lose"][0]
    assert not extras["win"][0]
    assert not extras["draw"][0]
    assert reward[E] == pytest.approx(-1000, abs=50)
    assert reward[2 * E] == pytest.approx(-1000, abs=50)
    assert reward[0] == 0
    assert reward[3 * E] == 0                                     # already out: nothing more
    assert task.alive[0].all()
    assert task.progress[0] == 0                           # restarted


def test_last_one_standing_wins():
    task = battle(3, play_to_end=True)
    place(task, 1, 1, 4.5, 0.0)
    place(task, 1, 2, 0.0, 4.5)
    _, reward, done, extras = task.step(still(task))
    assert done[1]
    assert extras["win"][1]
    assert extras["ranks"][1].tolist() == [1, 2, 2]
    assert reward[1] == pytest.approx(2000, abs=50)
    assert reward[E + 1] == pytest.approx(0, abs=50)
    assert reward[2 * E + 1] == pytest.approx(0, abs=50)  # rank 2 of 3
    assert not done[0]
    assert not done[2]


def test_training_games_end_when_agent_zero_is_out():
    task = battle(4)
    place(task, 2, 0, 4.5, 0.0)
    _, reward, done, extras = task.step(still(task))
    assert done.tolist() == [False, False, True]
    assert extras["lose"][2]
    assert extras["ranks"][2].tolist() == [4, 1, 1, 1]
    assert reward[2] < -1900


def test_time_limit_with_several_left_is_a_shared_first_place():
    task = battle(3, max_episode_length=2)
    task.step(still(task))
    _, reward, done, extras = task.step(still(task))
    assert done.all()
    assert extras["draw"].all()
    assert extras["time_outs"].all()
    assert not extras["win"].any()
    assert torch.all(reward < -900)


def test_hp_only_drains_for_ants_still_in():
    task = battle(3, play_to_end=True)
    place(task, 0, 2, 4.5, 0.0)
    task.step(still(task))                       # ant 2 out
    place(task, 0, 2, 0.0, 0.0, z=0.2)            # lying in the middle afterwards
    place(task, 0, 1, -1.0, 0.0, z=0.2)
    task.step(still(task))
    assert task.hp[0].tolist() == [100, 99, 100]


def test_fewer_than_two_ants_is_refused():
    with pytest.raises(ValueError, match="ants=1"):
        AntBattle(2, BattleSettings(ants=1))


def test_the_ring_shrinks_per_second_whatever_the_control_rate():
    fast = AntBattle(2, BattleSettings(ants=3))
    slow = AntBattle(2, BattleSettings(ants=3, substeps=6, egocentric=True))
    assert slow.num_obs == fast.num_obs + 5 + 6 * 2
    for task, steps in ((fast, 300), (slow, 100)):                        # 5 s of game either way
        task.reset()
        task.progress[:] = steps
        torch.testing.assert_close(task.ring_radius(), torch.full((2,), 4.0 - 0.003 * 300))
