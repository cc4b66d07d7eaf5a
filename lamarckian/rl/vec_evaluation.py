"""The periodic evaluation of a vectorized self-play run: deterministic games (mean actions) of the learner against
fixed opponents, on a task of its own so that the training games in progress are not disturbed.

Every evaluation replays the same spawns (the task is reseeded first), so two evaluations differ only by the
learner's weights. The learner's seat rotates through every seat; in N-player games the other seats are all
played by the opponent. A win is a sole first place, a draw a shared one; the score counts draws half.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ..mdp.vec import VecTask, create_vec_task
from ..model import ActorCritic, to_blob
from ..model.stacked import StackedPolicies
from .vec_games import outcome_counts, play_vec_matches, seat_rotations
from .window import outcome_score


class VecEvaluation:
    """``games`` deterministic games against each named opponent per call, all at once on ``len(opponents) *
    games`` environments of a task built from the ``mdp.vec`` section (played to the end).

    Args:
        settings: the ``mdp.vec`` section.
        games: games per opponent.
        opponents: the names of the opponents, in the order :meth:`evaluate` receives their weights.
        seed: the spawn seed every evaluation replays.
    """

    def __init__(self, settings: Mapping[str, Any], games: int, opponents: tuple[str, ...], seed: int = 0) -> None:
        self.games, self.opponents, self.seed = games, opponents, seed
        self.task: VecTask = create_vec_task({**settings, "num_envs": games * len(opponents), "play_to_end": True},
                                             seed=seed)

    def evaluate(self, model: ActorCritic, opponents: list[np.ndarray]) -> dict[str, float]:
        """Play; per opponent ``<name>/wins``, ``/draws``, ``/losses`` and ``/score`` (draws half), plus
        ``episodes`` (games in all)."""
        stacked = StackedPolicies(model, [to_blob(model), *opponents], self.task.device)
        others = self.task.num_agents - 1
        matches = [match for index in range(len(opponents))
                   for match in seat_rotations(0, [index + 1] * others, self.games)]
        self.task.seed(self.seed)
        results = play_vec_matches(self.task, stacked, matches, deterministic=True)
        summary: dict[str, float] = {"episodes": float(len(matches))}
        for index, name in enumerate(self.opponents):
            chunk = slice(index * self.games, (index + 1) * self.games)
            wins, draws, losses = outcome_counts(matches[chunk], results[chunk], player=0)
            games, score = outcome_score(wins, draws, losses)
            summary.update({f"{name}/wins": float(wins), f"{name}/draws": float(draws),
                            f"{name}/losses": float(losses), f"{name}/score": score / games})
        return summary

    def close(self) -> None:
        self.task.close()


def evaluation_line(summary: Mapping[str, float], opponents: tuple[str, ...]) -> str:
    """``vs initial 0.81 (24-4-4) | vs newest 0.55 (...)``: score and wins-draws-losses per opponent."""
    return " | ".join(f"vs {name} {summary[f'{name}/score']:.2f} ({summary[f'{name}/wins']:.0f}-"
                      f"{summary[f'{name}/draws']:.0f}-{summary[f'{name}/losses']:.0f})" for name in opponents)
