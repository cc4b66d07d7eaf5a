"""One match on video (``evaluate.py --video``): deterministic play (mean actions, greedy choices), a frame per
rendered step, names, HP and the result drawn over the picture.

- Ring tasks (Ant Sumo, Ant Battle): one game on environment 0 of a task, rendered by MuJoCo at ``fps`` frames per
  second of game time (the game runs at 60 control steps per second).
- MDPs that render RGB frames (the built-in Pong and Coins, gymnasium environments made with
  ``render_mode=rgb_array``): one episode, a frame per step.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..mdp import MDP
from ..mdp.vec.render import RingView, ant_colour
from ..mdp.vec.ring import AntRing
from ..model import ActorCritic
from ..model.stacked import StackedPolicies
from ..record.video import VideoWriter, overlay
from .vec_games import seat_ranks

WHITE = (235, 235, 235)
HOLD_SECONDS = 1.5    # the last picture stays this long with the result on it
MIN_SIDE = 320        # small renders (Pong, Coins) are scaled up to at least this many pixels


def result_text(ranks: Sequence[int], names: Sequence[str]) -> str:
    """``red (…) wins`` for a sole first place, ``draw`` otherwise; plus every seat's rank when more than two."""
    first = [seat for seat, rank in enumerate(ranks) if rank == 1]
    text = f"{names[first[0]]} wins" if len(first) == 1 else "draw: " + ", ".join(names[s] for s in first)
    if len(ranks) > 2:
        text += " | ranks " + " ".join(f"{names[s].split()[0]} {r}" for s, r in enumerate(ranks))
    return text


@torch.no_grad()
def record_ring_match(task: AntRing, stacked: StackedPolicies, seating: Sequence[int], names: Sequence[str],
                      path: Path, size: tuple[int, int] = (480, 360), fps: float = 30.0) -> dict[str, Any]:
    """One game of policies ``seating`` (stacked index per seat) on ``task`` (environment 0 is filmed; give a task of
    one environment). Returns ``frames``, ``steps`` and the ``ranks`` per seat."""
    agents = task.num_agents
    labels = [f"{ant_colour(seat)[0]} ({names[seat]})" for seat in range(agents)]
    policy = torch.tensor(seating, device=task.device).repeat_interleave(task.num_envs)
    control_rate = 1.0 / (task.settings.timestep * task.settings.substeps)
    every = max(1, round(control_rate / fps))
    view = RingView(task, *size)
    observations, steps, picture = task.reset(), 0, None
    try:
        with VideoWriter(path, control_rate / every) as video:
            while True:
                if steps % every == 0:
                    picture = view.frame()
                    video.write(overlay(picture, status_lines(task, labels, steps)))
                actions = stacked.act(observations, policy, deterministic=True, width=len(policy))
                observations, _, done, extras = task.step(actions.clamp(-1, 1))
                steps += 1
                if bool(done[0]):
                    ranks = seat_ranks(extras, agents)[0].tolist()
                    break
                if steps > 2 * task.max_episode_length:
                    raise RuntimeError(f"{type(task).__name__}: the game did not end within {steps} steps")
            assert picture is not None          # the first step draws one
            final = overlay(picture, [(f"after {steps / control_rate:.1f} s: {result_text(ranks, labels)}", WHITE)],
                            corner="bottom")
            for _ in range(round(HOLD_SECONDS * control_rate / every)):
                video.write(final)
            frames, dropped = video.frames, video.dropped
    finally:
        view.close()
    return {"frames": frames, "dropped": dropped, "steps": steps, "ranks": ranks}


def status_lines(task: AntRing, labels: Sequence[str], steps: int) -> list[tuple[str, tuple[int, int, int]]]:
    """One line per ant (colour, name, HP, or ``out``) and the clock."""
    hp = task.hp[0].tolist()
    alive = task.alive[0].tolist() if hasattr(task, "alive") else [True] * task.num_agents
    lines = [(f"{label}: HP {hp[seat]:.0f}" + ("" if alive[seat] else " out"), ant_colour(seat)[1])
             for seat, label in enumerate(labels)]
    seconds = task.settings.timestep * task.settings.substeps
    lines.append((f"t {steps * seconds:.1f} s of {task.max_episode_length * seconds:.0f} s | ring "
                  f"{float(task.ring_radius()[0]):.2f} m", WHITE))
    return lines


def record_mdp_episode(mdp: MDP, models: Sequence[ActorCritic], names: Sequence[str], path: Path,
                       fps: float = 30.0) -> dict[str, Any]:
    """One episode of ``mdp`` with ``models[seat]`` acting greedily in every seat; a frame after each step of seat 0.
    Returns ``frames``, ``steps`` and every seat's ``results``."""
    return asyncio.run(_episode(mdp, models, names, path, fps))


async def _episode(mdp: MDP, models: Sequence[ActorCritic], names: Sequence[str], path: Path,
                   fps: float) -> dict[str, Any]:
    episode = mdp.reset(*range(len(models)))
    steps = 0

    def picture() -> np.ndarray:
        frame = np.asarray(mdp.render(), np.uint8)
        scale = max(1, -(-MIN_SIDE // max(1, min(frame.shape[:2]))))
        return frame.repeat(scale, axis=0).repeat(scale, axis=1) if scale > 1 else frame

    with VideoWriter(path, fps) as video:
        async def play(seat: int) -> None:
            nonlocal steps
            controller, model = episode.controllers[seat], models[seat]
            while await controller.ready():
                batch = torch.from_numpy(model.batcher([controller.get_state()]))
                action = model.act(batch, deterministic=True)[0][0].numpy()
                await controller(model.env_action(action))
                if seat == 0:
                    steps += 1
                    video.write(overlay(picture(), [(" vs ".join(names) + f" | step {steps}", WHITE)]))

        await asyncio.gather(*(play(seat) for seat in range(len(models))), *episode.ticks)
        results = [controller.get_result() for controller in episode.controllers]
        last = picture()
        summary = " | ".join(f"{name}: {result['fitness']:.3g}" for name, result in zip(names, results))
        for _ in range(round(HOLD_SECONDS * fps)):
            video.write(overlay(last, [(f"after {steps} steps: {summary}", WHITE)], corner="bottom"))
        frames, dropped = video.frames, video.dropped
    return {"frames": frames, "dropped": dropped, "steps": steps, "results": results}


def video_pair(checkpoints: Path, opponents: Path | None, template: torch.nn.Module,
               fresh_model: Any) -> tuple[Any, Any]:
    """The two entrants of a video: the newest checkpoint of ``checkpoints``, and the newest of ``opponents`` if
    given, else the run's initial policy (the checkpoint's ``initial`` weights if it keeps them, else
    ``fresh_model()``: the network as the run initialized it, from its seed)."""
    from ..model import to_blob
    from .tournament import Entrant, load_entrants

    player = load_entrants([checkpoints], template)[-1]
    if opponents is not None:
        return player, load_entrants([opponents], template)[-1]
    newest = sorted(p for p in checkpoints.iterdir() if p.name.startswith("checkpoint-"))[-1]
    state = torch.load(newest, map_location="cpu", weights_only=True)
    blob = state["initial"].numpy().copy() if "initial" in state else to_blob(fresh_model())
    return player, Entrant("initial policy", blob)
