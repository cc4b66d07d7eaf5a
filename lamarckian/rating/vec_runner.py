"""Tournaments on a vectorized task (Ant Sumo, Ant Battle): every environment plays one scheduled match, every
seat of every environment acts in ONE stacked forward per step, until each match has finished once."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from rich.console import Console
from rich.progress import Progress

from ..mdp.vec import VecTask
from ..model.stacked import StackedPolicies
from .runner import report
from .tournament import Entrant, Tally, schedule


def seat_ranks(extras: Mapping[str, torch.Tensor], num_agents: int) -> torch.Tensor:
    """Ranks ``(E, A)`` (1 = best) of games that end now: the task's own ``ranks`` if it gives them (Ant
    Battle), else from agent 0's win/lose/draw in a two-player game."""
    if "ranks" in extras:
        return extras["ranks"].long()
    if num_agents != 2:
        raise ValueError(f"a {num_agents}-player task must report ranks in extras")
    win, lose = extras["win"].long(), extras["lose"].long()
    return torch.stack([1 + lose, 1 + win], dim=1)


@torch.no_grad()
def play_vec_matches(task: VecTask, stacked: StackedPolicies, matches: Sequence[Sequence[int]],
                     generator: torch.Generator | None = None, progress: Any = None) -> list[list[dict]]:
    """Play ``matches`` (entrant index per seat) ``num_envs`` at a time; per match, one result per seat
    (``{"rank": r}``). Environments left over in the last chunk replay its first match (results dropped)."""
    envs, agents, device = task.num_envs, task.num_agents, task.device
    results: list[list[dict]] = []
    for start in range(0, len(matches), envs):
        chunk = [list(m) for m in matches[start:start + envs]]
        seating = torch.tensor(chunk + [chunk[0]] * (envs - len(chunk)), device=device)          # (E, A)
        policy = seating.transpose(0, 1).reshape(-1)                                               # agent-major
        observations = task.reset()
        finished = torch.zeros(envs, dtype=torch.bool, device=device)
        ranks = torch.zeros(envs, agents, dtype=torch.long, device=device)
        steps = 0
        while not bool(finished[:len(chunk)].all()):
            actions = stacked.act(observations, policy, deterministic=False, generator=generator, width=len(policy))
            observations, _, done, extras = task.step(actions.clamp(-1, 1))
            first = done.to(device) & ~finished
            ranks = torch.where(first[:, None], seat_ranks(extras, agents).to(device), ranks)
            finished |= done.to(device)
            steps += 1
            if steps > 2 * task.max_episode_length:
                raise RuntimeError(f"{type(task).__name__}: games did not end within {steps} steps")
        results += [[{"rank": int(r)} for r in row] for row in ranks[:len(chunk)].tolist()]
        if progress is not None:
            progress(len(chunk))
    return results


def run_vec_tournament(task: VecTask, template: torch.nn.Module, entrants: Sequence[Entrant], games: int, out: Path,
                       seed: int = 0) -> tuple[Tally, "object"]:
    """Every group of ``task.num_agents`` entrants plays ``games`` games (seating rotated) on ``task``; print,
    write and plot the ratings (multi-player Elo beside Bradley-Terry Elo for more than two seats)."""
    matches = schedule(len(entrants), games, task.num_agents)
    stacked = StackedPolicies(template, [e.blob for e in entrants], task.device)
    generator = torch.Generator(device=task.device).manual_seed(seed)
    console = Console(stderr=True, width=None if Console(stderr=True).is_terminal else 160)
    with Progress(console=console, transient=True) as bar:
        counter = bar.add_task(f"{len(entrants)} checkpoints, {len(matches)} games on {task.num_envs} envs",
                               total=len(matches))
        outcomes = play_vec_matches(task, stacked, matches, generator, lambda n: bar.advance(counter, n))
    tally = Tally(len(entrants))
    for match, per_seat in zip(matches, outcomes):
        tally.add(match, per_seat)
    return report(entrants, tally, matches, outcomes, task.num_agents, out, console)
