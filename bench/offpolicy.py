"""Our off-policy learners against stable-baselines3 on this machine (issue 17): wall time and env steps to an
evaluation threshold, 3 seeds each, medians and their ratio; HalfCheetah: the return each reaches in a time budget.

Ours: ``train.py -c mdp/gym.yml mdp/gym/<task>.yml rl/<dqn|sac>.yml`` in a subprocess (the learner's clock, Ray
start-up excluded; evaluations of 5 deterministic episodes every ``--eval-seconds``).
stable-baselines3 (``pip install stable-baselines3``, for this benchmark only) with rl-baselines3-zoo's tuned
hyper-parameters (hyperparams/dqn.yml CartPole-v1, hyperparams/sac.yml Pendulum-v1 and HalfCheetah-v3, as of
zoo 2.x), its own thread count; ours with our tuned values where a task has them (``Task.ours``, printed); its
clock starts in ``learn()`` (evaluations of 5 deterministic episodes every
``eval_steps`` env steps). The ratio compares training seconds, each side's evaluation time taken out (their
cadences differ); the times with evaluations are printed beside.

    python bench/offpolicy.py [--tasks dqn-cartpole sac-pendulum] [--seeds 0 1 2] [--limit 300]
    python bench/offpolicy.py --tasks sac-halfcheetah --seeds 0 --limit 900
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from learning import run  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Task:
    env: str
    task_file: str
    learner: str
    threshold: float | None      # None: report the return reached within the limit
    ours: tuple[str, ...]         # our settings for the task beyond the learner's file (-m edits)
    sb3: str
    hyper: dict[str, Any]         # rl-baselines3-zoo's values
    eval_steps: int               # SB3 evaluates every this many env steps


TASKS = {
    "dqn-cartpole": Task("CartPole-v1", "mdp/gym/cartpole.yml", "rl/dqn.yml", 475.0, (), "DQN", dict(
        learning_rate=2.3e-3, batch_size=64, buffer_size=100000, learning_starts=1000, gamma=0.99,
        target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16,
        exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256])), 500),
    "sac-pendulum": Task("Pendulum-v1", "mdp/gym/pendulum.yml", "rl/sac.yml", -200.0,
                         ("train.lr=0.002", "rl.sac.policy_delay=2", "train.replay.steps=3"), "SAC",
                         dict(learning_rate=1e-3), 200),
    "sac-halfcheetah": Task("HalfCheetah-v5", "mdp/gym/halfcheetah.yml", "rl/sac.yml", None, (), "SAC",
                            dict(learning_starts=10000), 10000),
}


def run_sb3(task: Task, seed: int, limit: float) -> dict[str, Any]:
    """Train SB3 until an evaluation reaches the threshold or ``limit`` seconds pass; as :func:`learning.run`."""
    import gymnasium
    import stable_baselines3
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy

    evaluation_env = gymnasium.make(task.env)
    model = getattr(stable_baselines3, task.sb3)("MlpPolicy", gymnasium.make(task.env), seed=seed, verbose=0,
                                                 **task.hyper)
    curve: list[tuple[float, float, int, float]] = []     # (seconds, of them evaluating, env steps, mean return)
    started = time.monotonic()
    evaluating = [0.0]

    class Watch(BaseCallback):
        def _on_step(self) -> bool:
            now = time.monotonic()
            if self.num_timesteps % task.eval_steps == 0:
                mean = evaluate_policy(model, evaluation_env, n_eval_episodes=5, deterministic=True)[0]
                curve.append((now - started, evaluating[0], self.num_timesteps, float(mean)))
                evaluating[0] += time.monotonic() - now
                if task.threshold is not None and mean >= task.threshold:
                    return False
            return now - started - evaluating[0] < limit

    model.learn(total_timesteps=10**9, callback=Watch())
    if task.threshold is None:          # the return reached at the end, as our run's final evaluation gives it
        mean = evaluate_policy(model, evaluation_env, n_eval_episodes=5, deterministic=True)[0]
        curve.append((time.monotonic() - started, evaluating[0], model.num_timesteps, float(mean)))
    reached = next((row for row in curve if task.threshold is not None and row[3] >= task.threshold), None)
    return {"seconds": reached[0] if reached else float("nan"),
            "training": reached[0] - reached[1] if reached else float("nan"),
            "steps": reached[2] if reached else float("nan"), "wall": time.monotonic() - started,
            "curve": [(steps, mean) for *_, steps, mean in curve], "final": curve[-1][3] if curve else float("nan"),
            "final_steps": curve[-1][2] if curve else 0,
            "best": max((c[3] for c in curve), default=float("nan"))}


def run_ours(task: Task, seed: int, limit: float, eval_seconds: float) -> dict[str, Any]:
    threshold = task.threshold if task.threshold is not None else float("inf")
    with tempfile.TemporaryDirectory() as folder:
        result = run(["mdp/gym.yml", task.task_file, task.learner], threshold, seed, limit, Path(folder) / "run",
                     (f"evaluator.interval={eval_seconds}", "evaluator.episodes=5", *task.ours))
    returns = [fitness for _, fitness in result["curve"]]
    return {**result, "final": returns[-1] if returns else float("nan"), "best": max(returns, default=float("nan")),
            "final_steps": result["curve"][-1][0] if result["curve"] else 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["dqn-cartpole", "sac-pendulum"], choices=list(TASKS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--limit", type=float, default=300.0, help="training seconds before a run gives up")
    parser.add_argument("--eval-seconds", type=float, default=1.0, help="our evaluation interval")
    args = parser.parse_args()
    import stable_baselines3
    import torch

    print(f"# {time.strftime('%Y-%m-%d')} {platform.node()} {platform.processor() or platform.machine()}, seeds "
          f"{args.seeds}; stable-baselines3 {stable_baselines3.__version__}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads for SB3)")
    print(f"{'task':<16} {'who':<6} {'seed':>4} {'train s':>8} {'+eval s':>8} {'env steps':>10} {'final':>8} "
          f"{'best':>8}   (env steps: to the threshold; without one, at the end)")
    summary = []
    for name in args.tasks:
        task = TASKS[name]
        print(f"# {name}: ours -c mdp/gym.yml {task.task_file} {task.learner} -m {' '.join(task.ours) or '(nothing)'}; "
              f"SB3 {task.sb3} {task.hyper}")
        results: dict[str, list[dict[str, Any]]] = {"ours": [], "sb3": []}
        for seed in args.seeds:
            for who in ("ours", "sb3"):
                result = (run_ours(task, seed, args.limit, args.eval_seconds) if who == "ours"
                          else run_sb3(task, seed, args.limit))
                results[who].append(result)
                steps = result["steps"] if task.threshold is not None else result["final_steps"]
                print(f"{name:<16} {who:<6} {seed:>4} {result['training']:>8.1f} {result['seconds']:>8.1f} "
                      f"{steps:>10.0f} {result['final']:>8.1f} {result['best']:>8.1f}", flush=True)
        if task.threshold is None:
            means = {who: statistics.median(r["final"] for r in runs) for who, runs in results.items()}
            summary.append(f"{name:<16} return after {args.limit:.0f} s: ours {means['ours']:.0f}, SB3 "
                           f"{means['sb3']:.0f} (median of the last evaluations)")
            continue
        medians = {who: {key: statistics.median(r[key] if r[key] == r[key] else float("inf") for r in runs)
                         for key in ("training", "seconds", "steps")} for who, runs in results.items()}
        solved = {who: sum(r["seconds"] == r["seconds"] for r in runs) for who, runs in results.items()}
        ours, sb3 = medians["ours"], medians["sb3"]
        summary.append(f"{name:<16} to {task.threshold:g}: ours {ours['training']:.1f} s training "
                       f"({ours['seconds']:.1f} s with evaluations), {ours['steps']:.0f} steps, solved "
                       f"{solved['ours']}/{len(args.seeds)}; SB3 {sb3['training']:.1f} s ({sb3['seconds']:.1f} s), "
                       f"{sb3['steps']:.0f} steps, solved {solved['sb3']}/{len(args.seeds)}; wall-time ratio ours/SB3 "
                       f"{ours['training'] / sb3['training']:.2f} ({ours['seconds'] / sb3['seconds']:.2f} with "
                       "evaluations)")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
