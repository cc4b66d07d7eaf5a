"""Evolve a population of learners: ``python evolve.py [-c FILE ...] [-m key.path=value ...] [-d | -D] [--debug]``.

Without ``-c``, the files are ``ec/ea/pbt.yml ec/wrap/mdp.yml``: a small PBT (4 learners, one actor each) on the
built-in Pong on this machine. ``-c ec/ea/<name>.yml`` picks the algorithm (pbt, nsga_ii, tournament); any
learning key given ``[lo, hi]`` is searched. See docs/evolution.md.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from .cli import configure_process, prepare_run, print_config, run_arguments, run_job, start_ray
from .config import ConfigError, load_with_sources
from .config.sections import SampleSettings
from .entry import guarded

DEFAULT_FILES = ["ec/ea/pbt.yml", "ec/wrap/mdp.yml"]


def local_cpus(config: Mapping[str, Any]) -> float:
    """CPUs a local Ray must offer so that every learner and its actors can start: on a small machine the
    processes share its cores (Ray's CPU counts are reservations, not limits). ``config`` without search ranges."""
    from .ec.settings import EvolutionSettings

    ec, sample = EvolutionSettings.from_config(config), SampleSettings.from_config(config)
    needed = ec.learner_count * (ec.learner_cpus + sample.actors * sample.num_cpus)
    return max(float(os.cpu_count() or 1), needed)


def main(argv: Sequence[str] | None = None) -> int:
    args = run_arguments("evolve.py", __doc__, argv)
    try:
        config, sources = load_with_sources(args.config or DEFAULT_FILES, args.modify, ranges=True,
                                            local_mode=args.debug)
        from .ec.settings import LEARNER_MODULES, EvolutionSettings, learners_use_ray
        from .ec.space import SearchSpace

        base = SearchSpace.from_config(config).base        # search ranges resolved: the sections can be read
        if not (args.debug or args.print_config) and \
                not learners_use_ray(base, EvolutionSettings.from_config(base).vectorized_for(base)):
            from .rpc.processes import warm_up

            warm_up(LEARNER_MODULES)     # the learners' fork server imports torch while this process does
        from .ec import Evolution

        root = Path(config["root"])
        evolution = Evolution(config, root)  # checks the search space and the algorithm; writes nothing
        configure_process(evolution.config)     # the base config: search ranges resolved
    except (ConfigError, ValueError, TypeError, KeyError) as error:
        print(f"evolve.py: error: {error}", file=sys.stderr)
        return 2
    if args.print_config:
        print_config(config, sources)
        return 0

    prepare_run(root, config, args.d, args.D, checkpoints="population")
    if args.debug:
        import torch

        torch.autograd.set_detect_anomaly(True)
    resumed = evolution.resume()
    if resumed is not None:
        print(f"resuming from {resumed} ({evolution.trained} rounds, {evolution.cost} env steps)", file=sys.stderr)
    if evolution.uses_ray:
        ray_config = dict(config["ray"])
        if not ray_config.get("address") and not ray_config.get("num_cpus"):
            ray_config["num_cpus"] = local_cpus(evolution.config)
        start_ray(ray_config)
    return run_job(evolution.run, evolution.save, evolution.close, "population checkpoint")


if __name__ == "__main__":
    sys.exit(guarded(main))
