"""Environments that hitched step on a thread of their own: the same episode as inline, on another thread, one call
at a time even when a caller gave up waiting."""

from __future__ import annotations

import asyncio
import threading
import time

import gymnasium
import numpy as np

from lamarckian.mdp.gym import GymMDP
from lamarckian.mdp.pong import Pong


class Recording(gymnasium.Wrapper):
    """CartPole that notes the thread of each step and, with ``slow``, takes 0.2 s a step."""

    def __init__(self, slow: bool = False) -> None:
        super().__init__(gymnasium.make("CartPole-v1"))
        self.slow, self.threads, self.finished = slow, [], 0

    def step(self, action):
        self.threads.append(threading.current_thread().name)
        if self.slow:
            time.sleep(0.2)
        outcome = self.env.step(action)
        self.finished += 1
        return outcome


gymnasium.register("LamarckianRecording-v0", entry_point=Recording)


def pong_rewards(hitched: bool) -> list[list[float]]:
    """Each seat's rewards in a seeded Pong game whose seats always move up, stepped inline or on the game's
    thread."""
    mdp = Pong(seed=3)
    if hitched:
        mdp.hitched(1.0)
    episode = mdp.reset(0, 1)
    rewards: list[list[float]] = [[], []]

    async def seat(controller, own: list[float]) -> None:
        while await controller.ready():
            await controller(np.int64(1))
            own.append(controller.get_reward())

    async def play() -> None:
        await asyncio.gather(*(seat(c, own) for c, own in zip(episode.controllers, rewards)), *episode.ticks)

    asyncio.run(play())
    mdp.close()
    return rewards


def test_a_game_that_hitched_plays_the_same_episode_on_its_thread():
    assert pong_rewards(hitched=True) == pong_rewards(hitched=False)


def recording(mdp: GymMDP) -> Recording:
    env = mdp.env
    while not isinstance(env, Recording):
        env = env.env
    return env


def test_a_gymnasium_environment_that_hitched_steps_on_a_thread_of_its_own():
    mdp = GymMDP.make("LamarckianRecording-v0", seed=0)
    mdp.hitched(1.0)
    controller = mdp.reset(0).controllers[0]
    asyncio.run(controller(np.int64(0)))
    threads = recording(mdp).threads
    mdp.close()
    assert threads[0].startswith("lamarckian-hitching-environment")


def test_a_reset_waits_for_a_step_whose_caller_gave_up():
    """An evaluation's step cap cancels a seat waiting on its thread: the next reset starts after that step ended."""
    mdp = GymMDP.make("LamarckianRecording-v0", kwargs={"slow": True}, seed=0)
    mdp.hitched(1.0)
    controller = mdp.reset(0).controllers[0]

    async def give_up() -> None:
        waiting = asyncio.ensure_future(controller(np.int64(0)))
        await asyncio.sleep(0.01)
        waiting.cancel()

    asyncio.run(give_up())
    mdp.reset(0)
    finished = recording(mdp).finished
    mdp.close()
    assert finished == 1
