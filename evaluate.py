#!/usr/bin/env python
"""Rate checkpoints: ``python evaluate.py -c FILE... --checkpoints DIR [--opponents DIR] [--games N]``.

Plays a round-robin tournament among all checkpoints of DIR (and those of --opponents, and with --pool the
opponent-pool snapshots of DIR's newest checkpoint) on the actor fleet, every running game's seats acting in one
stacked forward, then prints a ratings table and writes ratings.csv, winrate.csv, winrate.png and elo.png to --out
(default: DIR/../evaluation). A vectorized task (``mdp.create: vec``: Ant Sumo, Ant Battle) plays its games in this
process, one match per environment, games played to the end; more than two seats add multi-player Elo.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence


from lamarckian.cli import OneLineParser, start_ray
from lamarckian.config import ConfigError, load


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog="evaluate.py", description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", nargs="+", action="extend", default=[], metavar="FILE")
    parser.add_argument("-m", "--modify", nargs="+", action="extend", default=[], metavar="KEY=VALUE")
    parser.add_argument("--checkpoints", type=Path, required=True, help="folder of checkpoint-*.pt files to rate")
    parser.add_argument("--opponents", type=Path, help="another folder of checkpoints to include")
    parser.add_argument("--pool", action="store_true", help="also rate the opponent pool of the newest checkpoint")
    parser.add_argument("--games", type=int, default=20, help="games per pair (seats alternate)")
    parser.add_argument("--out", type=Path, help="where the tables and plots go")
    parser.add_argument("--debug", action="store_true", help="actors in this process, no Ray")
    arguments = parser.parse_args(argv)
    if arguments.games < 1:
        parser.error("--games must be at least 1")
    return arguments


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    folders = [arguments.checkpoints] + ([arguments.opponents] if arguments.opponents else [])
    out = arguments.out or arguments.checkpoints.resolve().parent / "evaluation"
    try:
        config = load(arguments.config, arguments.modify)
        if config["mdp"]["create"] == "vec":
            return evaluate_vec(config, arguments, folders, out)
        from lamarckian.mdp import create_mdp
        from lamarckian.rl import build_model

        mdp = create_mdp(config["mdp"], seed=config["seed"])
        if len(mdp) < 2:
            raise ValueError(f"evaluate.py rates games; mdp.create={config['mdp']['create']!r} has one player")
        entrants = entrants_of(arguments, folders, build_model(mdp, config["model"]))
        if len(entrants) < len(mdp):
            raise ValueError(f"{arguments.checkpoints}: a tournament of {len(mdp)}-player games needs at least "
                             f"{len(mdp)} checkpoints, found {len(entrants)}")
    except (ConfigError, ValueError, TypeError) as error:
        print(f"evaluate.py: error: {error}", file=sys.stderr)
        return 2
    from lamarckian.rating.runner import run_tournament

    if arguments.debug:
        config["ray"]["local_mode"] = True
    start_ray(config["ray"])
    run_tournament(config, entrants, arguments.games, out, seats=len(mdp), local=arguments.debug)
    return 0


def entrants_of(arguments: argparse.Namespace, folders: Sequence[Path], template) -> list:
    """The checkpoints of ``folders`` (and, with --pool, the newest checkpoint's pool snapshots) as entrants."""
    from lamarckian.rating.tournament import load_entrants, pool_entrants

    return load_entrants(folders, template) + (pool_entrants(arguments.checkpoints) if arguments.pool else [])


def evaluate_vec(config, arguments: argparse.Namespace, folders: Sequence[Path], out: Path) -> int:
    """The tournament on a vectorized task, in this process (no Ray)."""
    from lamarckian.mdp.vec import create_vec_task
    from lamarckian.rating.vec_runner import run_vec_tournament
    from lamarckian.rl.vec_learner import vec_model

    try:
        task = create_vec_task({**config["mdp"]["vec"], "play_to_end": True}, seed=config["seed"])
        template = vec_model(task, config["model"])
        entrants = entrants_of(arguments, folders, template)
        if len(entrants) < task.num_agents:
            raise ValueError(f"{arguments.checkpoints}: a tournament of {task.num_agents}-player games needs at "
                             f"least {task.num_agents} checkpoints, found {len(entrants)}")
    except ValueError as error:
        print(f"evaluate.py: error: {error}", file=sys.stderr)
        return 2
    try:
        run_vec_tournament(task, template, entrants, arguments.games, out, seed=config["seed"])
    finally:
        task.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
