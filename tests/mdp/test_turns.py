"""Turn-based PettingZoo (AEC) games and action masks: seats act in the game's order, rewards reach the seat whose
move they answer, the lookahead rule wins and blocks, masked policies never choose an illegal move, and Connect
Four trains through train.py with zero illegal moves in its evaluation games."""

from __future__ import annotations

import asyncio

import gymnasium
import numpy as np
import pytest
import torch

from lamarckian.config import load
from lamarckian.mdp import create_mdp, wrap_controller
from lamarckian.mdp.turns import TurnMDP
from lamarckian.model import ActorCritic, ModelSettings
from lamarckian.rl.fleet.factory import fleet_learner
from lamarckian.rl.loop import TrainingLoop


def connect_four(rule: str = "random", seed: int = 0) -> TurnMDP:
    config = load(["mdp/pettingzoo/connect_four.yml"], [f"mdp.pettingzoo.rule={rule}"])
    mdp = create_mdp(config["mdp"], seed=seed)
    assert isinstance(mdp, TurnMDP)
    return mdp


def play(mdp: TurnMDP, seats: tuple[int, ...], random: np.random.Generator) -> list:
    """One game with uniformly random legal moves for ``seats``; their wrapped controllers and their rewards."""
    episode = mdp.reset(*seats)
    controllers = [wrap_controller(c, {"frame_skip": 1, "idle_action": None}) for c in episode.controllers]
    rewards: list[list[float]] = [[] for _ in seats]

    async def player(index: int) -> None:
        controller = controllers[index]
        while await controller.ready():
            legal = np.flatnonzero(controller.get_state()["action_mask"])
            await controller(int(random.choice(legal)))
            rewards[index].append(controller.get_reward())

    async def run() -> None:
        await asyncio.gather(*(player(i) for i in range(len(seats))), *episode.ticks)

    asyncio.run(run())
    return [(controller.get_result(), sum(reward)) for controller, reward in zip(controllers, rewards)]


def test_tictactoe_is_turn_based_now_and_results_add_up():
    mdp = create_mdp(load(["mdp/pettingzoo.yml"], ["mdp.pettingzoo.module=pettingzoo.classic.tictactoe_v3"])["mdp"],
                     seed=0)
    assert isinstance(mdp, TurnMDP)
    assert len(mdp) == 2
    random = np.random.default_rng(0)
    outcomes = set()
    for _ in range(30):
        (first, first_total), (second, second_total) = play(mdp, (0, 1), random)
        assert first["win"] + second["win"] == 1.0
        assert first["fitness"] == first_total
        assert second["fitness"] == second_total    # every reward reached its seat
        assert first["objectives"]["illegal"] == second["objectives"]["illegal"] == 0
        outcomes.add(first["win"])
    assert outcomes == {0.0, 0.5, 1.0}


def test_the_lookahead_rule_wins_now_and_blocks():
    mdp = connect_four("lookahead")
    mdp.env.reset(seed=0)
    for column in (0, 1, 0, 1, 0):          # player_0 stacks three in column 0, player_1 two in column 1
        mdp.env.step(column)
    assert mdp.rule(1) == 0                 # player_1 blocks the column
    mdp.env.step(1)                          # ... but plays column 1 instead: three there too
    assert mdp.rule(0) == 0                 # player_0 wins at once


def test_lookahead_beats_random_play_from_either_seat():
    mdp = connect_four("lookahead", seed=1)
    random = np.random.default_rng(1)
    wins = [play(mdp, (game % 2,), random)[0][0]["win"] for game in range(40)]
    assert np.mean(wins) < 0.2


def test_a_masked_policy_never_chooses_an_illegal_move():
    mdp = connect_four()
    spec = mdp.describe()[0]
    model = ActorCritic(spec.observation, spec.action, ModelSettings.defaults(hidden=(32,)))
    random = np.random.default_rng(0)
    observations = [{"observation": random.integers(0, 2, (6, 7, 2)).astype(np.int8),
                     "action_mask": (random.random(7) < 0.3).astype(np.int8)} for _ in range(256)]
    for observation in observations:
        observation["action_mask"][random.integers(7)] = 1
    batch = torch.from_numpy(model.batcher(observations))
    masks = np.stack([o["action_mask"] for o in observations]).astype(bool)
    for deterministic in (False, True):
        actions = model.act(batch, deterministic)[0].numpy()
        assert masks[np.arange(256), actions].all()
    distribution, _ = model(batch)
    assert torch.isfinite(distribution.entropy()).all()
    assert torch.isfinite(model.log_prob(distribution, torch.from_numpy(masks.argmax(1)))).all()


def test_masks_with_continuous_actions_are_refused():
    space = gymnasium.spaces.Dict({"action_mask": gymnasium.spaces.Box(0, 1, (2,), np.int8),
                                   "observation": gymnasium.spaces.Box(-1.0, 1.0, (3,))})
    with pytest.raises(ValueError, match="masks apply to categorical actions only"):
        ActorCritic(space, gymnasium.spaces.Box(-1.0, 1.0, (2,)))


def test_connect_four_self_play_trains_and_its_evaluation_games_are_legal(tmp_path):
    config = load(["mdp/pettingzoo/connect_four.yml"], [
        "ray.local_mode=true", "sample.actors=1", "sample.envs=4", "sample.truncation=16", "train.batch=128",
        "model.hidden=[32]", "evaluator.progress=false", "evaluator.episodes=6", f"root={tmp_path}"])
    learner = fleet_learner(config)
    try:
        summary = TrainingLoop(learner, None).run(stop=lambda trainer: trainer.iteration >= 3)
        assert summary["episodes"] == 6
        assert 0.0 <= summary["win"] <= 1.0
        assert [result.objectives["illegal"] for result in learner.evaluator.results] == [0.0] * 6
        assert list(learner.pools) == [""]          # one pool, of the one policy
        assert learner.training.get("win_rule") is not None
    finally:
        learner.close()
