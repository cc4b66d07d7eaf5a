"""Tournaments on a vectorized task (Ant Sumo, Ant Battle): the games are played by
:func:`lamarckian.rating.vec_games.play_vec_matches` (one match per environment, every seat in one stacked forward,
mean actions), then rated and reported like the actor fleet's tournaments."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch
from rich.console import Console
from rich.progress import Progress

from ..mdp.vec import VecTask
from ..model.network import ActorCritic
from ..model.stacked import StackedPolicies
from .runner import report
from .tournament import Entrant, Tally, schedule
from .vec_games import play_vec_matches


def run_vec_tournament(task: VecTask, template: ActorCritic, entrants: Sequence[Entrant], games: int, out: Path,
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
