"""Round-robin tournaments of checkpoints: schedule, tally, ratings, tables and plots."""

from __future__ import annotations

import csv
import dataclasses
import itertools
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..model import to_blob
from ..record.checkpoint import PATTERN, checkpoint_folder, run_label
from .elo import Elo, fit_elo
from .results import EpisodeResult, pairwise_scores


@dataclasses.dataclass
class Entrant:
    """One player of the tournament: a checkpoint's weights and when it was made."""

    name: str
    blob: np.ndarray
    iteration: int = 0
    cost: int = 0
    elapsed: float = 0.0


def load_entrants(folders: Sequence[Path], template: torch.nn.Module) -> list[Entrant]:
    """One entrant per checkpoint file (oldest first per folder), named ``<run>/<iteration>``; ValueError with
    one line for a missing or empty folder or a checkpoint of another architecture."""
    entrants = []
    for folder in folders:
        if not folder.is_dir():
            raise ValueError(f"{folder}: not a directory")
        paths = sorted(p for p in folder.iterdir() if PATTERN.match(p.name))
        if not paths:
            raise ValueError(f"{folder}: no checkpoint-*.pt files")
        label = run_label(folder)
        for path in paths:
            try:
                state = torch.load(path, map_location="cpu", weights_only=True)
                template.load_state_dict(state["model"])
            except (RuntimeError, KeyError) as error:
                reason = str(error).splitlines()[0]
                raise ValueError(f"{path}: not a checkpoint of this architecture ({reason})") from None
            name = path.stem.replace("checkpoint-", "").lstrip("0") or "0"
            entrants.append(Entrant(f"{label}/{name}", to_blob(template), int(state["iteration"]),
                                    int(state["cost"]), float(state["elapsed"])))
    return entrants


def pool_entrants(folder: Path) -> list[Entrant]:
    """The opponent-pool snapshots stored in the newest checkpoint of ``folder`` (a self-play run's), named
    ``<run>/pool-<id>`` with the iteration they were frozen at; ValueError with one line if there are none."""
    folder = checkpoint_folder(folder.parent if folder.name == "snapshots" else folder, prefer="checkpoints")
    paths = sorted(p for p in folder.iterdir() if PATTERN.match(p.name)) if folder.is_dir() else []
    if not paths:
        raise ValueError(f"{folder}: no checkpoint-*.pt files")
    state = torch.load(paths[-1], map_location="cpu", weights_only=True)
    snapshots = (state.get("pool") or {}).get("snapshots") or []
    if not snapshots:
        raise ValueError(f"{paths[-1]}: holds no opponent pool")
    label = run_label(folder)
    return [Entrant(f"{label}/pool-{int(s['id'])}", s["blob"].numpy().copy(), int(s["iteration"]))
            for s in snapshots]


def schedule(count: int, games: int, seats: int = 2) -> list[list[int]]:
    """Every group of ``seats`` entrants plays ``games`` games, the seating rotating each game; a match lists
    the entrant index per seat."""
    if count < seats:
        raise ValueError(f"a tournament of {seats}-player games needs at least {seats} players, got {count}")
    matches = []
    for group in itertools.combinations(range(count), seats):
        for game in range(games):
            shift = game % seats
            matches.append(list(group[shift:] + group[:shift]))
    return matches


class Tally:
    """Scores and game counts between every pair: ``scores[i, j]`` is what ``i`` scored against ``j``."""

    def __init__(self, count: int) -> None:
        self.scores = np.zeros((count, count))
        self.games = np.zeros((count, count))

    def add(self, match: Sequence[int], results: Sequence[EpisodeResult]) -> None:
        """One finished game: every pair of seats counts as a game between their entrants, scored by rank
        (or fitness) through :func:`pairwise_scores`."""
        for seat, player in enumerate(match):
            others = [r for other, r in enumerate(results) if other != seat]
            opponents = [p for other, p in enumerate(match) if other != seat]
            for opponent, score in zip(opponents, pairwise_scores(results[seat], others)):
                self.scores[player, opponent] += score
                self.games[player, opponent] += 1

    def add_counts(self, player: int, opponent: int, wins: float, draws: float, losses: float) -> None:
        """Two-player games counted in bulk: ``player``'s wins, draws and losses against ``opponent``."""
        games = wins + draws + losses
        self.scores[player, opponent] += wins + 0.5 * draws
        self.scores[opponent, player] += losses + 0.5 * draws
        self.games[player, opponent] += games
        self.games[opponent, player] += games

    def win_rates(self) -> np.ndarray:
        """``(P, P)`` score fractions (nan where no games; the diagonal is nan)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            rates = self.scores / self.games
        np.fill_diagonal(rates, np.nan)
        return rates

    def ratings(self) -> np.ndarray:
        """Bradley-Terry Elo of each player (mean 1200)."""
        return fit_elo(self.scores, self.games)


def multiplayer_elo(count: int, matches: Sequence[Sequence[int]], results: Sequence[Sequence[EpisodeResult]],
                    elo: Elo = Elo()) -> np.ndarray:
    """Sequential multi-player Elo over the games in the given order (ranks from ``rank``, else fitness)."""
    ratings = np.full(count, elo.initial)
    for match, seats in zip(matches, results):
        ranks = [r.rank if r.rank is not None else -r.fitness for r in seats]
        ratings[list(match)] = elo.update_ranks(list(ratings[list(match)]), ranks)
    return ratings


def write_tables(folder: Path, entrants: Sequence[Entrant], tally: Tally, ratings: np.ndarray) -> None:
    """``ratings.csv`` (name, iteration, env steps, seconds, Elo, overall score) and ``winrate.csv``."""
    folder.mkdir(parents=True, exist_ok=True)
    overall = tally.scores.sum(1) / np.maximum(1, tally.games.sum(1))
    with open(folder / "ratings.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["name", "iteration", "env_steps", "seconds", "elo", "score"])
        for entrant, rating, score in zip(entrants, ratings, overall):
            writer.writerow([entrant.name, entrant.iteration, entrant.cost, f"{entrant.elapsed:.1f}",
                             f"{rating:.6f}", f"{score:.6f}"])   # full precision: the file is data
    with open(folder / "winrate.csv", "w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["row scored against column", *(e.name for e in entrants)])
        for entrant, row in zip(entrants, tally.win_rates()):
            writer.writerow([entrant.name, *("" if np.isnan(v) else f"{v:.4f}" for v in row)])


def plot(folder: Path, entrants: Sequence[Entrant], tally: Tally, ratings: np.ndarray) -> None:
    """``winrate.png`` (heat map) and ``elo.png`` (rating against training time)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [e.name for e in entrants]
    figure, axis = plt.subplots(figsize=(1.2 + 0.45 * len(names), 1 + 0.4 * len(names)))
    image = axis.imshow(tally.win_rates(), vmin=0, vmax=1, cmap="RdBu")
    axis.set_xticks(range(len(names)), names, rotation=90)
    axis.set_yticks(range(len(names)), names)
    axis.set(title="score of row against column", xlabel="opponent", ylabel="player")
    figure.colorbar(image)
    figure.tight_layout()
    figure.savefig(folder / "winrate.png", dpi=100)
    plt.close(figure)
    figure, axis = plt.subplots(figsize=(6, 3.5))
    axis.plot([e.elapsed / 60 for e in entrants], ratings, marker="o")
    axis.set(xlabel="training time of the checkpoint (min)", ylabel="Elo (Bradley-Terry fit)",
             title="rating against training time")
    figure.tight_layout()
    figure.savefig(folder / "elo.png", dpi=100)
    plt.close(figure)
