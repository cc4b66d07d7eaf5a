"""Run a tournament of entrants on a fleet of Actors (``play_matches``) and report it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from .. import rpc
from ..config.sections import SampleSettings
from .results import EpisodeResult
from .tournament import Entrant, Tally, multiplayer_elo, plot, schedule, write_tables

CHUNK = 16  # matches per Any call: enough to fill an actor's environments


def run_tournament(config: Mapping[str, Any], entrants: Sequence[Entrant], games: int, out: Path, actor: type, *,
                   seats: int = 2, local: bool = False) -> tuple[Tally, np.ndarray]:
    """Play every group of ``seats`` entrants ``games`` times on ``sample.actors`` instances of ``actor`` (the
    sampling actor, :class:`lamarckian.rl.fleet.actor.Actor`: ``set_population`` and ``play_matches`` over RPC);
    print, write and plot; return the tally and the (Bradley-Terry) Elo ratings. With more than two seats the table
    also shows sequential multi-player Elo from the games' ranks."""
    sample = SampleSettings.from_config(config)
    if local:
        actors = [actor(config, index) for index in range(sample.actors)]
    else:
        import ray

        remote: Any = ray.remote(num_cpus=sample.num_cpus)(actor)
        actors = [remote.remote(config, index) for index in range(sample.actors)]
    settings = rpc.RpcSettings.from_config(config)
    matches = schedule(len(entrants), games, seats)
    played: list[list[int]] = []
    outcomes: list[list[EpisodeResult]] = []
    tally = Tally(len(entrants))
    console = Console(stderr=True, width=None if Console(stderr=True).is_terminal else 160)
    with rpc.All(actors, settings=settings) as everyone:
        everyone("set_population", [e.blob for e in entrants])
        with rpc.Any(actors, settings=settings) as anyone, Progress(console=console, transient=True) as progress:
            task = progress.add_task(f"{len(entrants)} checkpoints, {len(matches)} games", total=len(matches))
            chunks = [matches[i:i + CHUNK] for i in range(0, len(matches), CHUNK)]
            for chunk, wire in zip(chunks, anyone.map([("play_matches", chunk) for chunk in chunks])):
                results = [[EpisodeResult.from_wire(seat) for seat in per_seat] for per_seat in wire]
                for match, per_seat in zip(chunk, results):
                    tally.add(match, per_seat)
                played += chunk
                outcomes += results
                progress.advance(task, len(chunk))
    return report(entrants, tally, played, outcomes, seats, out, console)


def report(entrants: Sequence[Entrant], tally: Tally, played: Sequence[Sequence[int]],
           outcomes: Sequence[Sequence[EpisodeResult]], seats: int, out: Path,
           console: Console) -> tuple[Tally, np.ndarray]:
    """Ratings of a finished tournament: write the tables and plots, print the table (with sequential
    multi-player Elo from the games' ranks when games have more than two seats); the tally and Elo ratings."""
    ratings = tally.ratings()
    write_tables(out, entrants, tally, ratings)
    plot(out, entrants, tally, ratings)
    extra = multiplayer_elo(len(entrants), played, outcomes) if seats > 2 else None
    console.print(table(entrants, tally, ratings, extra))
    console.print(f"written: {out / 'ratings.csv'}, winrate.csv, winrate.png, elo.png")
    return tally, ratings


def table(entrants: Sequence[Entrant], tally: Tally, ratings: np.ndarray, multiplayer: np.ndarray | None = None
          ) -> Table:
    """Entrants by rating, best first; with the Spearman correlation of rating and training time."""
    overall = tally.scores.sum(1) / np.maximum(1, tally.games.sum(1))
    view = Table(title="ratings (Bradley-Terry Elo over pairwise results, mean 1200)")
    columns = ["rank", "checkpoint", "iteration", "env steps", "minutes", "Elo", "score"]
    for column in columns + (["multi-player Elo"] if multiplayer is not None else []):
        view.add_column(column, justify="right")
    for rank, index in enumerate(np.argsort(-ratings), start=1):
        entrant = entrants[index]
        row = [str(rank), entrant.name, str(entrant.iteration), f"{entrant.cost:,}", f"{entrant.elapsed / 60:.1f}",
               f"{ratings[index]:.0f}", f"{overall[index]:.1%}"]
        view.add_row(*row, *([f"{multiplayer[index]:.0f}"] if multiplayer is not None else []))
    if len(entrants) >= 3:
        from scipy.stats import spearmanr

        correlation = spearmanr([e.elapsed for e in entrants], ratings).statistic
        view.caption = f"Spearman correlation of Elo with training time: {correlation:.3f}"
    return view
