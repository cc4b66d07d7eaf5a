"""Whole games on a vectorized task between fixed policies: every environment plays one scheduled match, every
seat of every environment acts in ONE stacked forward per step, until each match has finished once.

Used by the learner's periodic deterministic evaluation and by ``evaluate.py``'s tournaments of checkpoints.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import torch

from ..mdp.vec import VecTask
from ..model.stacked import StackedPolicies
from .results import EpisodeResult


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
                     generator: torch.Generator | None = None, progress: Callable[[int], None] | None = None,
                     deterministic: bool = True) -> list[list[EpisodeResult]]:
    """Play ``matches`` (stacked policy index per seat) ``num_envs`` at a time, with mean actions
    (``deterministic``) or sampled ones; per match, one result per seat (its ``rank``; ``fitness`` is minus the
    rank, a task's games having no score of their own). Environments left
    over in the last chunk replay its first match (results dropped). A game still running after twice the
    task's episode length raises RuntimeError (no evaluation can hang)."""
    envs, agents, device = task.num_envs, task.num_agents, task.device
    results: list[list[EpisodeResult]] = []
    for start in range(0, len(matches), envs):
        chunk = [list(m) for m in matches[start:start + envs]]
        seating = torch.tensor(chunk + [chunk[0]] * (envs - len(chunk)), device=device)          # (E, A)
        policy = seating.transpose(0, 1).reshape(-1)                                               # agent-major
        observations = task.reset()
        finished = torch.zeros(envs, dtype=torch.bool, device=device)
        ranks = torch.zeros(envs, agents, dtype=torch.long, device=device)
        steps = 0
        while not bool(finished[:len(chunk)].all()):
            actions = stacked.act(observations, policy, deterministic=deterministic, generator=generator,
                                  width=len(policy))
            observations, _, done, extras = task.step(actions.clamp(-1, 1))
            first = done.to(device) & ~finished
            ranks = torch.where(first[:, None], seat_ranks(extras, agents).to(device), ranks)
            finished |= done.to(device)
            steps += 1
            if steps > 2 * task.max_episode_length:
                raise RuntimeError(f"{type(task).__name__}: games did not end within {steps} steps")
        results += [[EpisodeResult(fitness=-float(r), rank=float(r)) for r in row]
                    for row in ranks[:len(chunk)].tolist()]
        if progress is not None:
            progress(len(chunk))
    return results


def seat_rotations(player: int, others: Sequence[int], games: int) -> list[list[int]]:
    """``games`` matches of ``player`` against the seats ``others`` (one policy index per other seat), the player's
    seat rotating through every seat in turn."""
    seats = [player, *others]
    return [seats[-(game % len(seats)):] + seats[:-(game % len(seats))] if game % len(seats) else list(seats)
            for game in range(games)]


def outcome_counts(matches: Sequence[Sequence[int]], results: Sequence[Sequence[EpisodeResult]], player: int
                   ) -> tuple[int, int, int]:
    """``player``'s wins, draws and losses over played matches: a win is a sole first place, a draw a shared
    first place, anything else a loss."""
    wins = draws = losses = 0
    for match, seats in zip(matches, results):
        rank = seats[list(match).index(player)].rank
        firsts = sum(1 for seat in seats if seat.rank == 1)
        if rank == 1 and firsts == 1:
            wins += 1
        elif rank == 1:
            draws += 1
        else:
            losses += 1
    return wins, draws, losses
