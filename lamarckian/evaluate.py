"""Rate checkpoints: ``python evaluate.py -c FILE... --checkpoints DIR [--opponents DIR] [--games N] [--video FILE]``.

Plays a round-robin tournament among all checkpoints of DIR (and those of --opponents, and with --pool the
opponent-pool snapshots of DIR's newest checkpoint) on the actor fleet, every running game's seats acting in one
stacked forward, then prints a ratings table and writes ratings.csv, winrate.csv, winrate.png and elo.png to --out
(default: DIR/../evaluation). A vectorized task (``mdp.create: vec``: Ant Sumo, Ant Battle) plays its games in this
process, one match per environment, games played to the end; more than two seats add multi-player Elo.

With ``--video FILE`` (``.mp4`` or ``.gif``) it plays and films ONE game instead: the newest checkpoint of DIR
against the newest of --opponents, or else the run's initial policy, with mean actions; Ant Sumo and Ant Battle are
drawn by MuJoCo (``MUJOCO_GL=egl`` where no display is set), other MDPs by their own ``render``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from .cli import OneLineParser, start_ray
from .config import ConfigError, load
from .record.checkpoint import checkpoint_folder


def parse_arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = OneLineParser(prog="evaluate.py", description=__doc__.splitlines()[0])
    parser.add_argument("-c", "--config", nargs="+", action="extend", default=[], metavar="FILE")
    parser.add_argument("-m", "--modify", nargs="+", action="extend", default=[], metavar="KEY=VALUE")
    parser.add_argument("--checkpoints", type=Path, required=True,
                        help="a run directory (its snapshots/, else checkpoints/) or a folder of checkpoint-*.pt files")
    parser.add_argument("--opponents", type=Path, help="another run directory or folder of checkpoints to include")
    parser.add_argument("--pool", action="store_true", help="also rate the opponent pool of the newest checkpoint")
    parser.add_argument("--games", type=int, default=20, help="games per pair (seats alternate)")
    parser.add_argument("--out", type=Path, help="where the tables and plots go")
    parser.add_argument("--debug", action="store_true", help="actors in this process, no Ray")
    parser.add_argument("--video", type=Path, help="film one game to this .mp4 or .gif instead of a tournament")
    parser.add_argument("--video-size", default="480x360", help="the video's WIDTHxHEIGHT in pixels (ring tasks)")
    parser.add_argument("--fps", type=float, default=30.0, help="video frames per second of game time")
    arguments = parser.parse_args(argv)
    if arguments.games < 1:
        parser.error("--games must be at least 1")
    try:
        width, height = (int(n) for n in arguments.video_size.lower().split("x"))
        if width < 16 or height < 16:
            raise ValueError
    except ValueError:
        parser.error(f"--video-size {arguments.video_size!r}: expected WIDTHxHEIGHT, e.g. 480x360")
    arguments.size = (width, height)
    arguments.checkpoints = checkpoint_folder(arguments.checkpoints)
    if arguments.opponents is not None:
        arguments.opponents = checkpoint_folder(arguments.opponents)
    if arguments.fps <= 0:
        parser.error("--fps must be positive")
    return arguments


def main(argv: Sequence[str] | None = None) -> int:
    arguments = parse_arguments(argv)
    folders = [arguments.checkpoints] + ([arguments.opponents] if arguments.opponents else [])
    out = arguments.out or arguments.checkpoints.resolve().parent / "evaluation"
    try:
        config = load(arguments.config, arguments.modify, local_mode=arguments.debug)
        from .rl.policies import refuse_policies

        refuse_policies(config, "evaluate.py")
        if arguments.video is not None:
            return film(config, arguments)
        if config["mdp"]["create"] == "vec":
            return evaluate_vec(config, arguments, folders, out)
        from .mdp import create_mdp
        from .rl.algorithms.build import build_model

        mdp = create_mdp(config["mdp"], seed=config["seed"], evaluation=True)
        if len(mdp) < 2:
            raise ValueError(f"evaluate.py rates games; mdp.create={config['mdp']['create']!r} has one player")
        template = build_model(mdp, config)
        if getattr(template, "state_size", 0):
            raise ValueError(f"model.recurrent={config['model']['recurrent']}: tournaments play feed-forward policies "
                             "(every seat's snapshot in one stacked forward)")
        entrants = entrants_of(arguments, folders, template)
        if len(entrants) < len(mdp):
            raise ValueError(f"{arguments.checkpoints}: a tournament of {len(mdp)}-player games needs at least "
                             f"{len(mdp)} checkpoints, found {len(entrants)}")
    except (ConfigError, ValueError, TypeError, RuntimeError) as error:
        print(f"evaluate.py: error: {error}", file=sys.stderr)
        return 2
    from .rating.runner import run_tournament
    from .rl.fleet.actor import Actor

    start_ray(config["ray"])
    run_tournament(config, entrants, arguments.games, out, Actor, seats=len(mdp), local=arguments.debug)
    return 0


def entrants_of(arguments: argparse.Namespace, folders: Sequence[Path], template) -> list:
    """The checkpoints of ``folders`` (and, with --pool, the newest checkpoint's pool snapshots) as entrants."""
    from .rating.tournament import load_entrants, pool_entrants

    return load_entrants(folders, template) + (pool_entrants(arguments.checkpoints) if arguments.pool else [])


def evaluate_vec(config, arguments: argparse.Namespace, folders: Sequence[Path], out: Path) -> int:
    """The tournament on a vectorized task, in this process (no Ray)."""
    from .mdp.vec import create_vec_task
    from .model import ModelSettings
    from .rating.vec_runner import run_vec_tournament
    from .rl.ondevice.learner import vec_model

    try:
        task = create_vec_task({**config["mdp"]["vec"], "play_to_end": True}, seed=config["seed"])
        template = vec_model(task, ModelSettings.from_config(config))
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


def film(config, arguments: argparse.Namespace) -> int:
    """``--video``: one game of the newest checkpoint against the newest opponent checkpoint (or the initial
    policy), filmed. ValueError / RuntimeError with one line for a bad path, missing checkpoints or no OpenGL."""
    from .record.video import check_video_path

    check_video_path(arguments.video)
    film_game = film_ring_match if config["mdp"]["create"] == "vec" else film_mdp_episode
    summary, player, opponent = film_game(config, arguments)
    print(f"wrote {arguments.video}: {summary['frames']} frames, a game of {summary['steps']} steps "
          f"({player.name} against {opponent.name})", file=sys.stderr)
    if summary["dropped"]:
        print(f"the GIF holds the game's first {summary['frames']} frames ({summary['dropped']} more left out); "
              "an .mp4 holds the whole game", file=sys.stderr)
    return 0


def film_ring_match(config, arguments: argparse.Namespace) -> tuple[dict, Any, Any]:
    """A vectorized ring task's game (one environment), rendered by MuJoCo; the summary, player and opponent."""
    if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
        os.environ["MUJOCO_GL"] = "egl"                   # before MuJoCo is imported: no display here
    from .mdp.vec import create_vec_task
    from .mdp.vec.render import import_mujoco_renderer
    from .mdp.vec.ring import AntRing
    from .model import ModelSettings
    from .model.network import seeded
    from .model.stacked import StackedPolicies
    from .rating.video import record_ring_match, video_pair
    from .rl.ondevice.learner import vec_model

    import_mujoco_renderer()                              # the GL back end is checked before the physics
    task = create_vec_task({**config["mdp"]["vec"], "num_envs": 1, "play_to_end": True}, seed=config["seed"])
    if not isinstance(task, AntRing):
        raise SystemExit(f"--video: mdp.vec.task={config['mdp']['vec'].get('task')!r} is not an ant ring game")
    try:
        def fresh():
            with seeded(config["seed"]):                  # the network as the run initialized it
                return vec_model(task, ModelSettings.from_config(config))

        player, opponent = video_pair(arguments.checkpoints, arguments.opponents, fresh(), fresh)
        stacked = StackedPolicies(fresh(), [player.blob, opponent.blob], task.device)
        others = task.num_agents - 1
        summary = record_ring_match(task, stacked, [0] + [1] * others, [player.name] + [opponent.name] * others,
                                    arguments.video, arguments.size, arguments.fps)
    finally:
        task.close()
    return summary, player, opponent


def film_mdp_episode(config, arguments: argparse.Namespace) -> tuple[dict, Any, Any]:
    """An MDP's episode (its frames: Pong, Coins, a gymnasium environment's rgb_array); the summary, player and
    opponent."""
    from .mdp import create_mdp
    from .model import load_blob
    from .model.network import seeded
    from .rating.video import record_mdp_episode, video_pair
    from .rl.algorithms.build import build_model

    mdp_config = dict(config["mdp"])
    if mdp_config["create"] == "gym":
        mdp_config["gym"] = {**mdp_config["gym"], "kwargs": {**mdp_config["gym"]["kwargs"], "render_mode": "rgb_array"}}
    mdp = create_mdp(mdp_config, seed=config["seed"], evaluation=True)
    try:
        def fresh():
            with seeded(config["seed"]):
                return build_model(mdp, config)

        player, opponent = video_pair(arguments.checkpoints, arguments.opponents, fresh(), fresh)
        models = []
        for blob in [player.blob] + [opponent.blob] * (len(mdp) - 1):
            model = fresh()
            load_blob(model, blob)
            models.append(model.eval())
        summary = record_mdp_episode(mdp, models, [player.name] + [opponent.name] * (len(mdp) - 1),
                                     arguments.video, arguments.fps)
    finally:
        mdp.close()
    return summary, player, opponent


if __name__ == "__main__":
    sys.exit(main())
