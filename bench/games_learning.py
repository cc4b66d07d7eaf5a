"""Learning through a game server: train.py against a real server process with injected latency.

    python bench/games_learning.py [--latency 10] [--seeds 0] [--limit 600] [--tasks ...] [-m KEY=VALUE ...]
                                   [--pbt] [--service SECONDS] [--reference]

Each task starts ``python -m lamarckian.games serve ... --latency L`` and runs the shipped config of that task
(``-c mdp/game/<task>.yml rl/<algorithm>.yml``) until its threshold or ``--limit`` training seconds. Prints per task
the seconds of training to the threshold (the learner's clock, evaluations excluded), env steps to it, the training
env steps per second, and the process's wall time; IMPALA's figures beside PPO's on the same task. ``--pbt``: evolve.py
PBT with 4 learners sharing one game server; ``--service``: train.py with the policy service while a numpy-only game
client plays 32 CartPole agents (the client's returns early and late).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
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
IN_PROCESS = {   # the same task's shipped in-process config: the reference with --reference
    "CartPole-v1 PPO": ["mdp/gym.yml", "mdp/gym/cartpole.yml", "rl/ppo.yml"],
    "CartPole-v1 IMPALA": ["mdp/gym.yml", "mdp/gym/cartpole.yml", "rl/impala.yml"],
    "Pendulum-v1 PPO": ["mdp/gym.yml", "mdp/gym/pendulum.yml", "rl/ppo.yml"],
    "Pong self-play PPO": ["mdp/pong.yml", "rl/ppo.yml"],
}


PBT = ["-c", "mdp/game/cartpole.yml", "ec/ea/pbt.yml", "ec/wrap/mdp.yml", "-m", "train.lr=[1e-5,1e-1]",
       "ec.log=[train.lr]", "ec.population=4", "sample.eval=10", "sample.envs=64", "train.batch=2048",
       "ec.train.stopper=self.iteration >= 3", "evaluator.progress=false"]


def pbt(latency: float, limit: float, folder: Path) -> None:
    """evolve.py PBT (4 learners, each with its own actors) over one shared game server: seconds until a member's
    evaluation reaches 475."""
    from tests.games.helpers import ServerProcess

    server = ServerProcess(folder, ["--env", "CartPole-v1", "--latency", f"{latency}ms"])
    try:
        completed = subprocess.run([sys.executable, str(ROOT / "evolve.py"), "-D", *PBT,
                                    f"mdp.game.address={server.address}", f"mdp.game.secret={server.secret}",
                                    f"root={folder / 'pbt'}", f"ec.stop=self.best >= 475 or self.time > {limit}"],
                                   capture_output=True, text=True, cwd=ROOT)
    finally:
        counters = server.stop()
    reached = [float(seconds) for seconds, fitness in
               re.findall(r"\[\s*(\d+)s\] individual .*?fitness ([-\d.e+]+)", completed.stderr)
               if float(fitness) >= 475]
    print(f"PBT over the game server: a member at 475 after {reached[0] if reached else float('nan'):.0f} s of "
          f"evolution; {completed.stderr.strip().splitlines()[-1] if completed.stderr.strip() else ''}; server: "
          f"{counters.get('connections', 0)} connections, {counters.get('steps', 0):,} steps", flush=True)


def service(seconds: float, agents: int, folder: Path) -> None:
    """train.py with the policy service (mdp/service.yml) for ``seconds`` while the numpy-only client plays
    ``agents`` CartPole agents: the client's own episode returns, early and late."""
    from lamarckian.games import protocol
    from tests.games.helpers import free_port

    secret, address = folder / "service.secret", f"tcp://127.0.0.1:{free_port()}"
    protocol.write_secret(secret)
    client = subprocess.Popen([sys.executable, str(ROOT / "tests" / "games" / "numpy_client.py"), address,
                               str(secret), str(agents), str(seconds + 30)], stdout=subprocess.PIPE, text=True)
    subprocess.run([sys.executable, str(ROOT / "train.py"), "-D", "-c", "mdp/service.yml", "rl/ppo.yml", "-m",
                    f"mdp.service.bind={address}", f"mdp.service.secret={secret}", f"sample.envs={agents}",
                    f"root={folder / 'service'}", f"evaluator.terminate=self.time > {seconds}",
                    "evaluator.progress=false"], capture_output=True, text=True, cwd=ROOT, check=True)
    client.terminate()
    output, _ = client.communicate(timeout=60)
    returns = json.loads(output.strip().splitlines()[-1])["returns"] if output.strip() else []
    if len(returns) < 100:
        print(f"policy service: only {len(returns)} episodes reported by the client")
        return
    print(f"policy service ({agents} numpy CartPole agents, {seconds:g} s of train.py): the client's first 50 "
          f"episodes return {statistics.mean(returns[:50]):.1f}, its last 50 {statistics.mean(returns[-50:]):.1f} "
          f"({len(returns):,} episodes)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=10.0, help="milliseconds")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--limit", type=float, default=600.0, help="training seconds per run, at most")
    parser.add_argument("--tasks", nargs="*", default=list(TASKS), choices=list(TASKS))
    parser.add_argument("-m", "--modify", nargs="+", default=[], metavar="KEY=VALUE", help="for every run")
    parser.add_argument("--pbt", action="store_true", help="also: evolve.py PBT over one game server")
    parser.add_argument("--reference", action="store_true",
                        help="also run each task's in-process config (no server) after it, the same seed")
    parser.add_argument("--service", type=float, default=0.0, metavar="SECONDS",
                        help="also: train.py with the policy service for this long, the numpy client playing")
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
            if arguments.reference:
                local = run(IN_PROCESS[task], threshold, seed, arguments.limit, folder / f"{task}-{seed}-in-process"
                            .replace(" ", "_"), (f"evaluator.interval={interval}", "evaluator.episodes=10",
                                                 *arguments.modify), metric)
                print(f"  in-process reference: {local['training']:.1f} s of training ({local['steps']:,.0f} env "
                      f"steps), {local['rate']:,.0f} env steps/s, wall {local['wall']:.0f} s: through the server "
                      f"{result['training'] / local['training']:.2f}x the training time, "
                      f"{result['wall'] / local['wall']:.2f}x the wall time", flush=True)
    medians = {task: {key: statistics.median(r[key] for r in runs) for key in ("training", "steps", "rate", "wall")}
               for task, runs in results.items()}
    for task, median in medians.items():
        print(f"median {task}: {median['training']:.1f} s, {median['steps']:,.0f} steps, {median['rate']:,.0f} "
              f"steps/s, wall {median['wall']:.0f} s")
    if arguments.pbt:
        pbt(arguments.latency, arguments.limit, folder)
    if arguments.service:
        service(arguments.service, 32, folder)
    if "CartPole-v1 PPO" in medians and "CartPole-v1 IMPALA" in medians:
        ppo, impala = medians["CartPole-v1 PPO"], medians["CartPole-v1 IMPALA"]
        print(f"IMPALA / PPO behind {arguments.latency:g} ms: env steps/s {impala['rate'] / ppo['rate']:.2f}x, "
              f"time to 475 {impala['training'] / ppo['training']:.2f}x")


if __name__ == "__main__":
    main()
