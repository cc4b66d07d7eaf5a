"""The built-in Pong through the asyncio contract: seeding, mirroring, rules, rendering."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from lamarckian.mdp.pong import DOWN, STAY, UP, Pong, PongSettings


def tracker(observation: np.ndarray) -> int:
    """Follow the ball's height (a strong hand-written player)."""
    gap = observation[3] - observation[0]
    return STAY if abs(gap) < 0.04 else UP if gap > 0 else DOWN


def play(mdp: Pong, policies: dict[int, object], seed: int | None = None) -> list[tuple]:
    """One episode; the trajectory of (step, observations of every controlled seat, rewards)."""
    episode = mdp.reset(*policies, seed=seed)
    trajectory = []

    async def player(seat, controller, policy):
        while not controller.done:
            observation = controller.get_state()
            await controller(policy(observation))
            trajectory.append((mdp.steps, seat, observation.tobytes(), controller.get_reward()))

    async def run():
        await asyncio.gather(*(player(seat, c, policies[seat]) for seat, c in zip(policies, episode.controllers)),
                             *episode.ticks)

    asyncio.run(run())
    return trajectory


def test_same_seed_same_game():
    random = np.random.default_rng(0)
    actions = random.integers(0, 3, size=100_000)

    def scripted(seat):
        counter = iter(actions[seat::2])
        return lambda observation: int(next(counter))

    first = play(Pong(), {0: scripted(0), 1: scripted(1)}, seed=5)
    second = play(Pong(), {0: scripted(0), 1: scripted(1)}, seed=5)
    third = play(Pong(), {0: scripted(0), 1: scripted(1)}, seed=6)
    assert first == second
    assert first != third


def test_observations_are_mirrored():
    mdp = Pong(seed=1)
    mdp.start(seed=1)
    mdp.paddles[:] = 0.3, 0.7
    left, right = mdp.observe(0), mdp.observe(1)
    assert left[0] == pytest.approx(right[1])
    assert left[1] == pytest.approx(right[0])
    assert left[2] == pytest.approx(-right[2])
    assert left[4] == pytest.approx(-right[4])
    assert left[3] == pytest.approx(right[3])


def test_rewards_are_zero_sum_and_results_consistent():
    mdp = Pong(seed=3)
    trajectory = play(mdp, {0: tracker, 1: lambda o: STAY})
    assert sum(r for _, seat, _, r in trajectory if seat == 0) == -sum(r for _, seat, _, r in trajectory if seat == 1)
    assert mdp.result(0)["win"] == 1.0
    assert mdp.result(1)["win"] == 0.0
    assert mdp.result(0)["fitness"] == mdp.settings.score


def test_rule_is_beatable_and_balanced():
    wins_tracker, wins_rule = [], []
    for seed in range(20):
        mdp = Pong(seed=seed)
        play(mdp, {0: tracker})
        wins_tracker.append(mdp.result(0)["win"])
        mdp = Pong(seed=seed)
        play(mdp, {})  # both seats follow the rule
        wins_rule.append(mdp.result(0)["win"])
    assert np.mean(wins_tracker) >= 0.9
    assert 0.2 <= np.mean(wins_rule) <= 0.8


def test_time_limit_is_a_truncation():
    mdp = Pong(PongSettings.defaults(max_steps=50, ball_speed=0.005), seed=0)
    play(mdp, {0: lambda o: STAY, 1: lambda o: STAY}, seed=0)
    assert mdp.over
    assert mdp.steps == 50
    assert mdp.timed_out
    assert mdp.result(0)["win"] == 0.5


def test_bad_action_and_seats():
    mdp = Pong(seed=0)
    with pytest.raises(ValueError, match="players must be distinct"):
        mdp.reset(0, 0)
    with pytest.raises(ValueError, match="Pong action"):
        play(mdp, {0: lambda o: 7})


def test_render():
    mdp = Pong(seed=0)
    mdp.start(seed=0)
    frame = mdp.render()
    assert frame.shape == (160, 160, 3)
    assert frame.dtype == np.uint8
    assert frame.max() == 255
