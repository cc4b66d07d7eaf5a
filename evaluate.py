#!/usr/bin/env python
"""Rate checkpoints: ``python evaluate.py -c FILE... --checkpoints DIR [--opponents DIR] [--games N]``.

Plays a round-robin tournament among all checkpoints of DIR (and those of --opponents) on the actor fleet,
every running game's seats acting in one stacked forward, then prints a ratings table and writes
ratings.csv, winrate.csv, winrate.png and elo.png to --out (default: DIR/../evaluation).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any, Sequence

import torch

from lamarckian.config import ConfigError, load


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="evaluate.py", description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", nargs="+", action="extend", default=[], metavar="FILE")
    parser.add_argument("-m", "--modify", nargs="+", action="extend", default=[], metavar="KEY=VALUE")
    parser.add_argument("--checkpoints", type=Path, required=True, help="folder of checkpoint-*.pt files to rate")
    parser.add_argument("--opponents", type=Path, help="another folder of checkpoints to include")
    parser.add_argument("--games", type=int, default=20, help="games per pair (seats alternate)")
    parser.add_argument("--out", type=Path, help="where the tables and plots go")
    parser.add_argument("--debug", action="store_true", help="actors in this process, no Ray")
    arguments = parser.parse_args(argv)
    if arguments.games < 1:
        parser.error("--games must be at least 1")
    return arguments


def load_entrants(folders: Sequence[Path], template: torch.nn.Module) -> list[Any]:
    """One entrant per checkpoint file (oldest first per folder); ValueError with one line on bad input."""
    from lamarckian.model import to_blob
    from lamarckian.rating.tournament import Entrant
    from lamarckian.record.checkpoint import PATTERN

    entrants = []
    for folder in folders:
        if not folder.is_dir():
            raise ValueError(f"{folder}: not a directory")
        paths = sorted(p for p in folder.iterdir() if PATTERN.match(p.name))
        label = folder.resolve().parent.name if folder.name == "checkpoints" else folder.name  # the run's name
        if not paths:
            raise ValueError(f"{folder}: no checkpoint-*.pt files")
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


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    try:
        config = load(arguments.config, arguments.modify)
        from lamarckian.mdp import create_mdp
        from lamarckian.rl import build_model

        mdp = create_mdp(config["mdp"], seed=config["seed"])
        if len(mdp) < 2:
            raise ValueError(f"evaluate.py rates games; mdp.create={config['mdp']['create']!r} has one player")
        folders = [arguments.checkpoints] + ([arguments.opponents] if arguments.opponents else [])
        entrants = load_entrants(folders, build_model(mdp, config["model"]))
        if len(entrants) < len(mdp):
            raise ValueError(f"{arguments.checkpoints}: a tournament of {len(mdp)}-player games needs at least "
                             f"{len(mdp)} checkpoints, found {len(entrants)}")
    except (ConfigError, ValueError, TypeError) as error:
        print(f"evaluate.py: error: {error}", file=sys.stderr)
        return 2
    from lamarckian.rating.runner import run_tournament

    out = arguments.out or arguments.checkpoints.resolve().parent / "evaluation"
    if not arguments.debug:
        import ray

        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                   "logging_level": logging.WARNING}
        if config["ray"].get("address"):
            options["address"] = config["ray"]["address"]
        ray.init(**options)
    run_tournament(config, entrants, arguments.games, out, seats=len(mdp), local=arguments.debug)
    return 0


if __name__ == "__main__":
    sys.exit(main())
