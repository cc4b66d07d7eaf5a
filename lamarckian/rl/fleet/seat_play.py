"""One seat of an episode played by an acting policy through an actor's batched inference, the controllers an actor
plays (wrapped as ``mdp`` configures them), and the end of an actor's event loop."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Mapping

from ...mdp import MDP, Controller, Episode, wrap_controller
from ...mdp.wrap import CentralState
from ...model import ActorCritic
from ..acting import BatchPolicy, RecurrentPolicy
from .inference import BatchedInference


def wrap_controllers(episode: Episode, mdp: MDP, mdp_config: Mapping[str, Any], central: bool) -> list[Controller]:
    """The episode's controllers wrapped (frame skip, statistics; with ``central`` a central critic's global
    state)."""
    controllers: list[Controller] = [wrap_controller(c, mdp_config) for c in episode.controllers]
    return [CentralState(c, mdp) for c in controllers] if central else controllers


async def play_seat(controller: Controller, policy: BatchPolicy, model: ActorCritic, inference: BatchedInference,
                    tag: int = 0, max_steps: int = 0, hitch: float | None = None) -> bool:
    """Act for one seat with ``policy`` (requests tagged ``tag``: a recurrent memory, a stacked policy's index)
    until the episode ends or, with ``max_steps`` > 0, that many decisions were made; whether the cap ended it. A
    call longer than ``hitch`` seconds (``mdp.hitch``) is told to the seat (:meth:`Controller.hitched`)."""
    memory = policy if isinstance(policy, RecurrentPolicy) else None
    if memory is not None:
        memory.reset(tag)
    inference.register()
    steps = 0
    try:
        while await controller.ready():
            if max_steps and steps >= max_steps:
                return True
            observation = model.batcher.convert(controller.get_state())
            action = (await inference.act(policy, observation, tag))[0]
            began = time.monotonic()
            await controller(model.env_action(action))
            took = time.monotonic() - began
            if hitch is not None and took > hitch:
                controller.hitched(took)
            steps += 1
        return False
    finally:
        if memory is not None:
            memory.forget(tag)
        inference.unregister()


def cancel_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel every task of ``loop`` (not running) and let them finish."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
