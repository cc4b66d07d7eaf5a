"""The periodic evaluation of a vectorized self-play run: deterministic games (mean actions) of the learner against
fixed opponents, on a task of its own so that the training games in progress are not disturbed.

Every evaluation replays the same spawns (the task is reseeded first), so two evaluations differ only by the
learner's weights. The learner's seat rotates through every seat; in N-player games the other seats are all
played by the opponent. A win is a sole first place, a draw a shared one; the score counts draws half.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ...mdp.vec import VecTask, create_vec_task
from ...model import ActorCritic, to_blob
from ...model.stacked import StackedPolicies
from ...rating.vec_games import outcome_counts, play_vec_matches, seat_rotations
from ..selfplay.window import outcome_score


class OnDeviceEvaluation:
    """``games`` deterministic games of each of ``players`` learners against each named opponent per call, all at
    once on ``players * len(opponents) * games`` environments of a task built from the ``mdp.vec`` section (played
    to the end).

    Args:
        settings: the ``mdp.vec`` section.
        games: games per opponent (and learner).
        opponents: the names of the opponents, in the order :meth:`evaluate` receives their weights.
        seed: the spawn seed every evaluation replays (a learner's games get the same spawns every time).
        players: learners evaluated together by :meth:`evaluate_many` (a vectorized population's members).
    """

    def __init__(self, settings: Mapping[str, Any], games: int, opponents: tuple[str, ...], seed: int = 0,
                 players: int = 1) -> None:
        self.games, self.opponents, self.seed = games, opponents, seed
        self.task: VecTask = create_vec_task({**settings, "num_envs": players * games * len(opponents),
                                              "play_to_end": True}, seed=seed)

    def evaluate(self, model: ActorCritic, opponents: list[np.ndarray]) -> dict[str, float]:
        """Play; per opponent ``<name>/wins``, ``/draws``, ``/losses`` and ``/score`` (draws half), plus
        ``episodes`` (games in all)."""
        return self.evaluate_many([model], opponents)[0]

    def evaluate_many(self, models: Sequence[ActorCritic], opponents: list[np.ndarray]) -> list[dict[str, float]]:
        """:meth:`evaluate` for each of ``models`` (one architecture), every game of every model at once."""
        count, others = len(models), self.task.num_agents - 1
        stacked = StackedPolicies(models[0], [*map(to_blob, models), *opponents], self.task.device)
        matches = [match for player in range(count) for index in range(len(opponents))
                   for match in seat_rotations(player, [count + index] * others, self.games)]
        self.task.seed(self.seed)
        results = play_vec_matches(self.task, stacked, matches, deterministic=True)
        summaries = []
        for player in range(count):
            summary: dict[str, float] = {"episodes": float(self.games * len(opponents))}
            for index, name in enumerate(self.opponents):
                start = (player * len(opponents) + index) * self.games
                chunk = slice(start, start + self.games)
                wins, draws, losses = outcome_counts(matches[chunk], results[chunk], player=player)
                games, score = outcome_score(wins, draws, losses)
                summary.update({f"{name}/wins": float(wins), f"{name}/draws": float(draws),
                                f"{name}/losses": float(losses), f"{name}/score": score / games})
            summaries.append(summary)
        return summaries

    def close(self) -> None:
        self.task.close()


def evaluation_line(summary: Mapping[str, float], opponents: tuple[str, ...]) -> str:
    """``vs initial 0.81 (24-4-4) | vs newest 0.55 (...)``: score and wins-draws-losses per opponent."""
    return " | ".join(f"vs {name} {summary[f'{name}/score']:.2f} ({summary[f'{name}/wins']:.0f}-"
                      f"{summary[f'{name}/draws']:.0f}-{summary[f'{name}/losses']:.0f})" for name in opponents)
