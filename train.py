#!/usr/bin/env python
"""Train an agent: ``python train.py [-c FILE ...] [-m key.path=value ...] [-d | -D] [--debug]``.

With no arguments: PPO self-play on the built-in Pong on a local Ray. See README for the keys.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

from lamarckian.cli import prepare_run, run_arguments, run_job, start_ray
from lamarckian.config import ConfigError, load


def main(argv: Sequence[str] | None = None) -> int:
    args = run_arguments("train.py", __doc__, argv)
    try:
        config = load(args.config, args.modify)
        if args.debug:
            config["ray"]["local_mode"] = True
        root = Path(config["root"])
        vectorized = config["mdp"]["create"] == "vec"  # a VecTask trained in this process: no Ray
        if vectorized:
            from lamarckian.rl.vec_learner import VecLearner as Trainer
        else:
            from lamarckian.rl import Learner as Trainer
        learner = Trainer(config, root)  # builds everything that can fail on a bad value, writes nothing
    except (ConfigError, ValueError, TypeError, KeyError) as error:
        print(f"train.py: error: {error}", file=sys.stderr)
        return 2
    import torch

    prepare_run(root, config, args.d, args.D)
    if args.debug:
        torch.autograd.set_detect_anomaly(True)
    resumed = learner.resume()
    if resumed is not None:
        print(f"resuming from {resumed} (iteration {learner.iteration}, {learner.cost} env steps)", file=sys.stderr)
    if not vectorized:
        start_ray(config["ray"])
    return run_job(learner.train, learner.save, learner.close, "checkpoint")


if __name__ == "__main__":
    sys.exit(main())
