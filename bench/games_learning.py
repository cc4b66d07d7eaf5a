"""Learning through a game server: train.py against a real server process with injected latency.

    python bench/games_learning.py [--latency 10] [--seeds 0] [--limit 600] [--tasks ...] [-m KEY=VALUE ...]

Each task starts ``python -m lamarckian.games serve ... --latency L`` and runs the shipped config of that task
(``-c mdp/game/<task>.yml rl/<algorithm>.yml``) until its threshold or ``--limit`` training seconds. Prints per task
the seconds of training to the threshold (the learner's clock, evaluations excluded), env steps to it, the training
env steps per second, and the process's wall time; IMPALA's figures beside PPO's on the same task.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from learning import run  # noqa: E402

TASKS = {   # name: (server arguments, config files, metric, threshold, seconds between evaluations)
    "CartPole-v1 PPO": (["--env", "CartPole-v1"], ["mdp/game/cartpole.yml", "rl/ppo.yml"], "fitness", 475.0, 5),
    "CartPole-v1 IMPALA": (["--env", "CartPole-v1"], ["mdp/game/cartpole.yml", "rl/impala.yml"], "fitness", 475.0,
                           5),
    "Pendulum-v1 PPO": (["--env", "Pendulum-v1"], ["mdp/game/pendulum.yml", "rl/ppo.yml"], "fitness", -200.0, 5),
    "Pong self-play PPO": (["--mdp", "pong"], ["mdp/game/pong.yml", "rl/ppo.yml"], "win", 0.95, 30),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=10.0, help="milliseconds")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--limit", type=float, default=600.0, help="training seconds per run, at most")
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("-m", "--modify", nargs="+", default=[], metavar="KEY=VALUE", help="for every run")
    arguments = parser.parse_args()

    from tests.games.helpers import ServerProcess

    folder = Path(tempfile.mkdtemp(prefix="bench-games-learning-"))
    results: dict[str, list[dict]] = {}
    for task in arguments.tasks:
        server_arguments, files, metric, threshold, interval = TASKS[task]
        for seed in arguments.seeds:
            server = ServerProcess(folder, [*server_arguments, "--latency", f"{arguments.latency}ms"])
            try:
                result = run(files, threshold, seed, arguments.limit, folder / f"{task}-{seed}".replace(" ", "_"),
                             (f"mdp.game.address={server.address}", f"mdp.game.secret={server.secret}",
                              f"evaluator.interval={interval}", "evaluator.episodes=10",
                              *arguments.modify), metric)
            finally:
                counters = server.stop()
            results.setdefault(task, []).append(result)
            print(f"{task} seed {seed}: {result['training']:.1f} s of training to {metric} {threshold:g} "
                  f"({result['steps']:,.0f} env steps), {result['rate']:,.0f} env steps/s while training, "
                  f"wall {result['wall']:.0f} s; server: {counters.get('steps', 0):,} steps, "
                  f"{counters.get('episodes', 0):,} episodes", flush=True)
    medians = {task: {key: statistics.median(r[key] for r in runs) for key in ("training", "steps", "rate", "wall")}
               for task, runs in results.items()}
    for task, median in medians.items():
        print(f"median {task}: {median['training']:.1f} s, {median['steps']:,.0f} steps, {median['rate']:,.0f} "
              f"steps/s, wall {median['wall']:.0f} s")
    if "CartPole-v1 PPO" in medians and "CartPole-v1 IMPALA" in medians:
        ppo, impala = medians["CartPole-v1 PPO"], medians["CartPole-v1 IMPALA"]
        print(f"IMPALA / PPO behind {arguments.latency:g} ms: env steps/s {impala['rate'] / ppo['rate']:.2f}x, "
              f"time to 475 {impala['training'] / ppo['training']:.2f}x")


if __name__ == "__main__":
    main()
