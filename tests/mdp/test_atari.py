"""The standard Atari preprocessing of mdp/gym/atari.yml on real ALE games: training episodes end with a lost life
and see clipped rewards; evaluation plays whole games with the game's score, and a policy that never presses FIRE
cannot stall them."""

from __future__ import annotations

import asyncio
import csv

import numpy as np
import pytest

from lamarckian.config import load
from lamarckian.mdp import create_mdp
from lamarckian.mdp.atari import AtariSettings
from lamarckian.train import main as train_main

NOOP = 0


def atari_mdp(game: str, evaluation: bool):
    config = load(["mdp/gym/atari.yml"], [f"mdp.gym.id=ALE/{game}-v5"])
    return create_mdp(config["mdp"], seed=3, evaluation=evaluation)


async def play(mdp, choose) -> tuple[int, list[float], bool]:
    """One episode with ``choose(step)``'s actions: its decisions, rewards and whether it was truncated."""
    controller = mdp.reset(0).controllers[0]
    steps, rewards = 0, []
    while await controller.ready():
        await controller(choose(steps))
        steps += 1
        rewards.append(controller.get_reward())
    return steps, rewards, controller.truncated


def lives(mdp) -> int:
    return int(mdp.env.unwrapped.ale.lives())


def test_an_evaluation_game_of_a_policy_that_never_fires_ends_by_the_game():
    mdp = atari_mdp("Breakout", evaluation=True)
    steps, _, truncated = asyncio.run(play(mdp, lambda step: NOOP))
    assert lives(mdp) == 0
    assert not truncated
    assert steps < 2000


def test_a_training_episode_ends_with_a_lost_life_and_the_next_one_continues_the_game():
    mdp = atari_mdp("Breakout", evaluation=False)
    asyncio.run(play(mdp, lambda step: NOOP))
    after_first = lives(mdp)
    asyncio.run(play(mdp, lambda step: NOOP))
    assert after_first == 4
    assert lives(mdp) == 3


def test_training_rewards_are_clipped_and_evaluation_rewards_are_the_games():
    random = np.random.default_rng(0)
    seen = {}
    for evaluation in (False, True):
        mdp = atari_mdp("SpaceInvaders", evaluation)
        rewards = asyncio.run(play(mdp, lambda step: int(random.integers(6))))[1]
        seen[evaluation] = set(rewards)
    assert seen[False] <= {-1.0, 0.0, 1.0}
    assert max(seen[True]) > 1.0


def test_a_game_without_fire_is_refused_when_fire_is_demanded():
    config = load(["mdp/gym/atari.yml"], ["mdp.gym.id=ALE/Pong-v5", "mdp.gym.atari.fire_reset=always"])
    create_mdp(config["mdp"], seed=0)       # Pong has FIRE: accepted
    config = load(["mdp/gym/atari.yml"], ["mdp.gym.id=ALE/Freeway-v5", "mdp.gym.atari.fire_reset=always"])
    with pytest.raises(ValueError, match="fire_reset=always.*no FIRE action"):
        create_mdp(config["mdp"], seed=0)


def test_a_game_without_noop_is_refused_with_no_op_starts_naming_the_key():
    config = load(["mdp/gym/atari.yml"], ["mdp.gym.id=ALE/Backgammon-v5"])
    with pytest.raises(ValueError, match=r"mdp.gym.atari.noop_max=30: ALE/Backgammon-v5 has no NOOP action"):
        create_mdp(config["mdp"], seed=0)


def test_a_game_without_noop_is_made_without_no_op_starts():
    config = load(["mdp/gym/atari.yml"], ["mdp.gym.id=ALE/Backgammon-v5", "mdp.gym.atari.noop_max=0"])
    assert create_mdp(config["mdp"], seed=0).describe()[0].action.n == 3


def test_a_bad_atari_setting_names_its_key():
    with pytest.raises(ValueError, match="mdp.gym.atari.fire_reset='sometimes'"):
        AtariSettings.defaults(fire_reset="sometimes")


@pytest.mark.slow
def test_breakout_evaluations_of_a_short_run_end_by_the_game(tmp_path):
    code = train_main(["--debug", "-c", "mdp/gym/atari.yml", "-m", "mdp.gym.id=ALE/Breakout-v5", f"root={tmp_path}",
                       "sample.actors=1", "sample.envs=2", "sample.truncation=32", "train.batch=128",
                       "evaluator.episodes=2", "evaluator.share=0", "evaluator.progress=false",
                       "evaluator.tensorboard=false", "evaluator.terminate=self.iteration >= 2"])
    assert code == 0
    with open(tmp_path / "evaluations.csv", newline="") as stream:
        evaluations = list(csv.DictReader(stream))
    assert len(evaluations) == 2
    assert all(float(row.get("capped") or 0.0) == 0.0 for row in evaluations)
    assert all(float(row["length"]) < 27000 for row in evaluations)


def test_the_pong_image_config_keeps_its_preprocessing():
    """mdp/gym/wrap/pong/image.yml (no mdp.gym.atari changes) trains on what it trained on before atari.yml: no-op
    starts, max-and-skip, 84×84 grey, 4 frames; no episodic life, FIRE or clipping."""
    config = load(["mdp/gym/wrap/pong/image.yml"], [])
    env = create_mdp(config["mdp"], seed=0).env
    chain = []
    while hasattr(env, "env"):
        chain.append(type(env).__name__)
        env = env.env
    assert chain[:2] == ["FrameStackObservation", "AtariPreprocessing"]
