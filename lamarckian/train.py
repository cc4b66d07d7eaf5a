"""Train an agent: ``python train.py [-c FILE ...] [-m key.path=value ...] [-d | -D] [--debug]``.

With no arguments: PPO self-play on the built-in Pong on a local Ray. Every key: docs/config.md.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from .cli import configure_process, prepare_run, print_config, run_arguments, run_job, start_ray, usage_error
from .config import ConfigError, load_with_sources, refuse_ignored
from .config.loader import Sources
from .config.sections import RaySettings, RemoteSettings, TrainSettings
from .entry import guarded
from .registry import VECTORIZED
from .timeline import TIMELINE

#: settings the vectorized learner does not read (it has no actors, seats or Ray), and why
IGNORED_ON_VEC = (("sample", "rl.swap", "rl.opponent.rule", "ray", "rl.policies", "rl.policy_mapping"),
                  "a vectorized task (mdp.create: vec) trains in this process without actors: its environments are "
                  "mdp.vec.num_envs, its rollouts mdp.vec.horizon steps long, agent 0 is the learner")
IGNORED_ON_FLEET = (("mdp.vec",), "mdp.vec applies to a vectorized task only (mdp.create: vec)")


VEC_ALGORITHM = "ppo"      # the one update rule of the on-device learner (rl/ondevice/learner.py)


def refuse_vec_algorithm(config: Mapping[str, Any], sources: Sources) -> None:
    """ConfigError naming ``rl.algorithm`` and its file where a vectorized task would silently train with another
    algorithm than the one asked for."""
    algorithm = config["rl"]["algorithm"]
    if config["mdp"]["create"] == VECTORIZED and algorithm != VEC_ALGORITHM:
        raise ConfigError(f"rl.algorithm={algorithm} (from {sources.by_key.get('rl.algorithm', 'lamarckian.yml')}): "
                          f"a vectorized task (mdp.create: {VECTORIZED}) trains with {VEC_ALGORITHM} on the on-device "
                          f"learner; use rl.algorithm={VEC_ALGORITHM}, or an environment of the actor fleet")


def ignored_settings(config: Mapping[str, Any]) -> tuple[tuple[str, ...], str]:
    """The settings this run does not read and why (a vectorized task on Ray ranks reads ``ray``)."""
    if config["mdp"]["create"] != "vec":
        return IGNORED_ON_FLEET
    keys: tuple[str, ...]
    keys, why = IGNORED_ON_VEC
    if config["train"]["ranks"] > 1:
        keys = tuple(key for key in keys if key != "ray")
    return keys, why


def build_trainer(config: Mapping[str, Any], ranks: Any = None) -> Any:
    """The trainer ``config`` asks for: a :class:`OnDeviceLearner` for a vectorized task (``mdp.create: vec``, in this
    process, no Ray; data-parallel over ``ranks``), else the actor-fleet :class:`Learner`."""
    if config["mdp"]["create"] == "vec":
        from .rl.ondevice.learner import OnDeviceLearner

        return OnDeviceLearner(config, ranks)
    if ranks is not None:
        raise ValueError(f"several ranks (torchrun, WORLD_SIZE={ranks.size}) train a vectorized task "
                         f"(mdp.create: vec); mdp.create={config['mdp']['create']} trains on one learner process")
    from .remote.fleet import connect
    from .rl.fleet.factory import fleet_learner

    return fleet_learner(config, connect)


def train_on_ray_ranks(config: Mapping[str, Any], root: Path, delete_checkpoints: bool, delete_all: bool) -> int:
    """``train.ranks: N``: the vectorized learner on N Ray actors (:mod:`.rl.ondevice.ray_ranks`); this process
    waits."""
    from .mdp.vec import placement
    from .rl.ondevice.evaluation import evaluation_line
    from .rl.ondevice.learner import OPPONENTS
    from .rl.ondevice.ray_ranks import train_on_ranks

    settings = TrainSettings.from_config(config)
    if config["mdp"]["create"] != "vec":
        raise ValueError(f"train.ranks={settings.ranks}: several ranks train a vectorized task (mdp.create: vec)")
    if config["ray"]["local_mode"]:
        raise ValueError(f"train.ranks={settings.ranks} needs Ray processes (each rank is one); --debug runs in one")
    num_envs = placement(config["mdp"]["vec"])[2]
    if num_envs % settings.ranks:
        raise ValueError(f"mdp.vec.num_envs={num_envs} must be a multiple of train.ranks={settings.ranks}")
    prepare_run(root, dict(config), delete_checkpoints, delete_all)
    start_ray(config["ray"])
    print(f"training on {settings.ranks} Ray ranks ({settings.rank_gpus:g} GPUs, {settings.rank_cpus:g} CPUs each), "
          f"{num_envs // settings.ranks} environments each; run directory {root} (rank 0 writes evaluations.csv, "
          f"TensorBoard and checkpoints there)", file=sys.stderr)

    def run() -> None:
        summary = train_on_ranks(config, root, settings.ranks, settings.rank_gpus, settings.rank_cpus)
        print("done" + (f"; {evaluation_line(summary, OPPONENTS)} (deterministic)" if summary.get("episodes") else ""),
              file=sys.stderr)

    return run_job(run, None, lambda: None, "checkpoint")


def fleet_uses_ray(config: Mapping[str, Any]) -> bool | None:
    """Whether the actor fleet of this run starts Ray (:meth:`RaySettings.uses_ray`); None where the run has no
    actors of its own (a vectorized task, remote workers) or they live in this process (``--debug``)."""
    ray = RaySettings.from_config(config)
    if config["mdp"]["create"] == "vec" or RemoteSettings.from_config(config).server is not None or ray.local_mode:
        return None
    return ray.uses_ray(TrainSettings.from_config(config).gpus)


def print_footprint(config: Mapping[str, Any]) -> None:
    """``--print-config``: the memory the run will take, as a YAML comment (a run with actors of its own)."""
    if config["mdp"]["create"] == "vec" or RemoteSettings.from_config(config).server is not None:
        return
    from .rl.algorithms.build import algorithm_of
    from .rl.fleet.footprint import free_memory, of_run, size_text
    from .rl.fleet.update_ranks import learner_network

    model, seats, roles = learner_network(config)
    free = free_memory()
    print(f"# memory: {of_run(config, model, seats, roles, algorithm_of(config).off_policy).line()}"
          + (f"; {size_text(free)} free now" if free is not None else ""))


def culprit(config: Mapping[str, Any] | None) -> str:
    """The setting that chose what failed to build (for a missing package's message)."""
    if config is None:
        return "this configuration"
    mdp = config["mdp"]
    if mdp["create"] == "gym":
        return f"mdp.gym.id={mdp['gym']['id']}"
    return f"mdp.create={mdp['create']}"


def main(argv: Sequence[str] | None = None) -> int:
    args = run_arguments("train.py", __doc__, argv, profile=True)
    TIMELINE.enabled = args.profile
    TIMELINE.mark("interpreter, imports, arguments")
    config: Mapping[str, Any] | None = None
    try:
        config, sources = load_with_sources(args.config, args.modify, local_mode=args.debug)
        refuse_vec_algorithm(config, sources)
        refuse_ignored(config, sources, *ignored_settings(config))
        TIMELINE.mark("configuration read")
        if args.print_config:
            print_config(config, sources)
            print_footprint(config)
            return 0
        uses_ray = fleet_uses_ray(config)
        if uses_ray is False:            # the actors' fork server imports torch while this process builds
            from .rl.fleet import ACTOR_MODULES
            from .rpc.processes import warm_up

            warm_up(ACTOR_MODULES)
        root = Path(config["root"])
        configure_process(config)
        from .rl.distributed import Ranks
        from .rl.loop import TrainingLoop

        ranks = Ranks.from_environment()     # started by torchrun with several processes
        if ranks is None and TrainSettings.from_config(config).ranks > 1:
            return train_on_ray_ranks(config, root, args.d, args.D)
        trainer = build_trainer(config, ranks)   # builds everything that can fail on a bad value, writes nothing
        loop = TrainingLoop(trainer, root)
        TIMELINE.mark("trainer built (torch, network, checks)")
    except Exception as error:  # noqa: BLE001 - usage_error re-raises what is not a usage error
        return usage_error("train.py", error, culprit(config))
    import torch

    if trainer.main:
        prepare_run(root, config, args.d, args.D)
    if ranks is not None:
        import torch.distributed

        torch.distributed.barrier()          # the run directory is ready before any rank resumes from it
    resumed = loop.resume()
    if resumed is not None and trainer.main:
        print(f"resuming from {resumed} (iteration {trainer.iteration}, {trainer.cost} env steps)", file=sys.stderr)
    if uses_ray:
        start_ray(config["ray"])
        TIMELINE.mark("ray.init")

    def run() -> None:
        loop.run()
        TIMELINE.mark("training ends")

    with torch.autograd.set_detect_anomaly(args.debug):     # --debug: NaN sources named; off again afterwards
        code = run_job(run, None, trainer.close, "checkpoint")
    TIMELINE.mark("shutdown (actors, Ray)")
    if args.profile:
        print(TIMELINE.table(), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(guarded(main))
