#!/usr/bin/env python
"""Train an agent: ``python train.py [-c FILE ...] [-m key.path=value ...] [-d | -D] [--debug]``.

With no arguments: PPO self-play on the built-in Pong on a local Ray. See README for the keys.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any, Sequence

import yaml

from lamarckian.cli import OneLineParser, start_ray
from lamarckian.config import ConfigError, load


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog="train.py", description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", nargs="+", action="extend", default=[], metavar="FILE",
                        help="config files merged in order over lamarckian.yml (paths: working directory, then config/)")
    parser.add_argument("-m", "--modify", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="edits, value parsed as YAML; an empty value deletes the key")
    parser.add_argument("-d", action="store_true", help="delete the run's checkpoints first (start afresh)")
    parser.add_argument("-D", action="store_true", help="delete the whole run directory first")
    parser.add_argument("--debug", action="store_true",
                        help="autograd anomaly detection and local mode (actors in this process, no Ray)")
    return parser.parse_args(argv)


def prepare_run(root: Path, config: dict[str, Any], delete_checkpoints: bool, delete_all: bool) -> None:
    """Apply -d/-D, create the run directory, keep the resolved config in it."""
    if delete_all and root.exists():
        shutil.rmtree(root)
    elif delete_checkpoints and (root / "checkpoints").exists():
        shutil.rmtree(root / "checkpoints")
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yml").write_text(yaml.safe_dump(config, sort_keys=False))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_arguments(argv)
    try:
        config = load(args.config, args.modify)
        if args.debug:
            config["ray"]["local_mode"] = True
        from lamarckian.rl import Learner

        root = Path(config["root"])
        learner = Learner(config, root)  # builds everything that can fail on a bad value, writes nothing
    except (ConfigError, ValueError, TypeError, KeyError) as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        return 2
    import ray
    import torch

    prepare_run(root, config, args.d, args.D)
    if args.debug:
        torch.autograd.set_detect_anomaly(True)
    resumed = learner.resume()
    if resumed is not None:
        print(f"resuming from {resumed} (iteration {learner.iteration}, {learner.cost} env steps)", file=sys.stderr)
    start_ray(config["ray"])
    try:
        learner.train()
    except KeyboardInterrupt:
        learner.save()
        print("interrupted; checkpoint saved", file=sys.stderr)
        return 130
    finally:
        learner.close()
        if ray.is_initialized():
            ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
