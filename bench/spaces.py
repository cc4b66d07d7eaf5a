"""Factorised action spaces learn: PPO on a code-guessing task with a known optimum (tests/plugins/tasks.py's
``Lock``: reward the share of digits right, 1 at best) with a MultiDiscrete action (4 digits in base 6) and a
MultiBinary one (8 bits), and on a task of the ecosystem with a MultiDiscrete action (the Network Attack
Simulator's ``TinyVA-v0``, ``pip install nasim``: MultiDiscrete([6 3 1 2 1 1]), an action type and its target host
and parameters; 1,000 steps at most), each against a uniform random policy measured on the same task in the same run.

Each seed runs ``train.py`` for a fixed budget of env steps (the Lock through ``mdp.create``, nasim through the
generic ``mdp/gym.yml`` as any gymnasium id); the figure is its last deterministic evaluation (``evaluator.episodes``
games). The random policy plays the same number of games per seed with actions drawn uniformly from the action
space.

    python bench/spaces.py [--seeds 100 101 102] [--steps 12000] [--nasim-steps 300000] [--tasks NAME ...]
"""

from __future__ import annotations

import argparse
import functools
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import gymnasium
import numpy as np

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from lamarckian.record import read_rows  # noqa: E402
from tests.plugins.tasks import Lock  # noqa: E402

LOCKS = {"MultiDiscrete([6, 6, 6, 6])": {"digits": 4, "base": 6, "binary": False},
         "MultiBinary(8)": {"digits": 8, "base": 2, "binary": True}}
NASIM = "nasim:TinyVA-v0"
EPISODES = 200


def lock_arguments(kwargs: dict) -> list[str]:
    text = "{" + ", ".join(f"{key}: {str(value).lower()}" for key, value in kwargs.items()) + "}"
    return ["-m", "mdp.create=tests.plugins.tasks:Lock", f"mdp.kwargs={text}"]


def trained(arguments: list[str], seed: int, steps: int, root: Path) -> tuple[float, int, float]:
    """The last deterministic evaluation's fitness after ``steps`` env steps of ``train.py arguments``, the env steps
    it judged, seconds."""
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, str(REPOSITORY / "train.py"), "-D", *arguments, f"seed={seed}", f"root={root}",
         f"evaluator.episodes={EPISODES}", "evaluator.progress=false", "evaluator.tensorboard=false",
         f"evaluator.terminate=self.cost >= {steps}"],
        capture_output=True, text=True, cwd=REPOSITORY)
    if completed.returncode != 0:
        raise RuntimeError(f"train.py failed (seed {seed}):\n{completed.stderr[-2000:]}")
    row = read_rows(root / "evaluations.csv")[-1]
    return float(row["fitness"]), int(row["cost"]), time.monotonic() - started


def random_lock(kwargs: dict, seed: int) -> float:
    """The mean reward of uniform random guesses over :data:`EPISODES` games."""
    mdp = Lock(**kwargs, seed=seed)
    space = mdp.describe()[0].action
    space.seed(seed)
    rewards = []
    for _ in range(EPISODES):
        controller = mdp.reset(0).controllers[0]
        guess = np.asarray(space.sample()).reshape(-1)
        rewards.append(float(np.mean(guess == controller.code)))     # type: ignore[attr-defined]
    return float(np.mean(rewards))


def random_gym(env_id: str, seed: int) -> float:
    """The mean return of uniform random actions over :data:`EPISODES` episodes of ``env_id``."""
    env = gymnasium.make(env_id)
    env.action_space.seed(seed)
    returns = []
    for episode in range(EPISODES):
        env.reset(seed=seed * EPISODES + episode)
        total, over = 0.0, False
        while not over:
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            total, over = total + float(reward), terminated or truncated
        returns.append(total)
    env.close()
    return float(np.mean(returns))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[100, 101, 102])
    parser.add_argument("--steps", type=int, default=12000, help="env steps each run of a Lock trains for")
    parser.add_argument("--tasks", nargs="*", help="only the tasks whose names contain one of these")
    parser.add_argument("--nasim-steps", type=int, default=300000, help="env steps each run of nasim trains for")
    arguments = parser.parse_args()
    tasks: dict[str, tuple[list[str], int, Callable[[int], float]]] = {
        name: (lock_arguments(kwargs), arguments.steps, functools.partial(random_lock, kwargs))
        for name, kwargs in LOCKS.items()}
    tasks[f"{NASIM} (MultiDiscrete([6 3 1 2 1 1]))"] = (["-c", "mdp/gym.yml", "-m", f"mdp.gym.id={NASIM}"],
                                                        arguments.nasim_steps, functools.partial(random_gym, NASIM))
    print(f"# {time.strftime('%Y-%m-%d')}, {platform.node()}, seeds {arguments.seeds}, {arguments.steps} env steps a "
          f"Lock run, {arguments.nasim_steps} a nasim run, {EPISODES} deterministic evaluation games")
    print("| action space | PPO, median (min–max) | env steps | random policy, median | seconds per run |")
    print("|---|---|---|---|---|")
    for name, (train_arguments, steps, random_policy) in tasks.items():
        if arguments.tasks and not any(part in name for part in arguments.tasks):
            continue
        runs, randoms = [], []
        for seed in arguments.seeds:
            with tempfile.TemporaryDirectory() as folder:
                runs.append(trained(train_arguments, seed, steps, Path(folder) / "run"))
            randoms.append(random_policy(seed))
        fitness = [run[0] for run in runs]
        print(f"| {name} | {statistics.median(fitness):.3f} ({min(fitness):.3f}–{max(fitness):.3f}) | "
              f"{statistics.median(run[1] for run in runs):.0f} | {statistics.median(randoms):.3f} | "
              f"{statistics.median(run[2] for run in runs):.0f} |", flush=True)


if __name__ == "__main__":
    main()
