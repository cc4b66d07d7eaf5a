"""Population-based training three ways, in one sitting (issue 46): evolve.py, Ray Tune's PBT around our learner,
and Ray Tune's PBT around RLlib's PPO.

- ``evolve``: ``evolve.py -c <task> ec/ea/pbt.yml ec/wrap/mdp.yml``: our learners, each member's state (weights,
  optimizer, normalizers) kept in memory and sent with the member's next round;
- ``tune``: Tune's ``PopulationBasedTraining`` around the same learner (:class:`~lamarckian.ec.worker.
  PopulationLearner`, the same base configuration and searched ranges) as a function trainable that reports each
  round with a checkpoint on disk: the orchestration alone differs;
- ``rllib``: Tune's PBT around RLlib's PPO with RLlib's own tuned values for the task (its example scripts), one
  env runner per member as ours has one actor (marked where RLlib cannot play the task: the built-in Pong).

Every side searches the same keys over the same ranges (:data:`SEARCHED`), with the same exploit rule (the bottom
quantile copies a random member of the top quantile, ``quantile`` 0.25) and explore rule (each value ×0.8 or ×1.2;
no resampling), the same perturbation interval in env steps (the task's ``interval``: a member reports, and may
exploit, once a round has spent it), and the same evaluation at each report: ``episodes`` (10) deterministic
episodes. Each run is its own process; the Tune sides run in their own virtual environment (``--setup`` makes it:
Ray Tune and RLlib are not dependencies of the project).

Figures per task and side (medians of the seeds): seconds from the process's start until an evaluation reaches the
threshold; the best evaluation at fixed budgets (``--budgets``); the exploit step: the seconds that pass between
a member's report and its next round's start when it takes a donor's state (a member that goes on with its own
state beside it); the peak memory of the whole population (PSS of the process and every descendant: Ray's own
processes, learners and actors). ``--plot DIR`` draws the best evaluation so far against seconds, one plot per
task (``populations_<task>.png``).

    python bench/populations.py --setup
    python bench/populations.py [--tasks cartpole pendulum pong] [--sides evolve tune rllib] [--population 4]
                                [--seeds 0 1 2] [--plot docs/]
    python bench/populations.py --tasks exploits --seeds 0     # exploit steps: rounds for 120 s, no threshold
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from learning import plot_panels  # noqa: E402
from peers import median, median_and_spread, setup  # noqa: E402

TUNE_PYTHON = Path.home() / ".cache" / "lamarckian" / "tune" / "bin" / "python"
TUNE_PACKAGES = ("ray[tune,rllib]==2.60.0",)
EPISODES = 10
QUANTILE = 0.25
FACTORS = (1.2, 0.8)
#: key: (lo, hi, log scale)
SEARCHED = {"train.lr": (1e-4, 3e-3, True), "rl.ac.weight_loss.entropy": (1e-4, 0.02, True),
            "rl.ppo.clip": (0.1, 0.3, False)}
COLOURS = {"evolve": "tab:green", "tune": "tab:blue", "rllib": "tab:orange"}


@dataclasses.dataclass(frozen=True)
class Task:
    title: str
    files: tuple[str, ...]          # our config files before ec/ea/pbt.yml ec/wrap/mdp.yml
    objective: str                  # the evaluation mean compared with the threshold
    threshold: float
    interval: int                   # env steps a round (a member reports and may exploit after each)
    limit: float                    # seconds a run may take (from its process's start)
    rllib: dict[str, Any] | None    # RLlib's tuned PPO for the task (None: RLlib cannot play it)


TASKS = {
    "cartpole": Task("CartPole-v1 to 475", ("mdp/gym.yml", "mdp/gym/cartpole.yml"), "fitness", 475.0, 8192, 180.0,
                     # rllib/examples/algorithms/ppo/cartpole_ppo.py (Ray 2.60)
                     dict(env="CartPole-v1", env_runners=dict(num_env_runners=1, num_envs_per_env_runner=16),
                          training=dict(lr=0.0003, num_epochs=6, vf_loss_coeff=0.01),
                          model=dict(fcnet_hiddens=[32], fcnet_activation="linear", vf_share_layers=True))),
    "pendulum": Task("Pendulum-v1 to -200", ("mdp/gym.yml", "mdp/gym/pendulum.yml"), "fitness", -200.0, 16384, 300.0,
                     # rllib/examples/algorithms/ppo/pendulum_ppo.py (Ray 2.60; its MeanStdFilter on observations)
                     dict(env="Pendulum-v1", env_runners=dict(num_env_runners=1, num_envs_per_env_runner=20),
                          mean_std_filter=True,
                          training=dict(train_batch_size_per_learner=1024, minibatch_size=128, lr=0.0002, gamma=0.95,
                                        lambda_=0.5),
                          model=dict(fcnet_activation="relu"))),
    "pong": Task("built-in Pong against the rule opponent to 95 % wins", (), "win", 0.95, 20480, 300.0, None),
}
#: exploit steps under load: CartPole rounds of 4096 env steps with no threshold, for a fixed time
TASKS["exploits"] = dataclasses.replace(TASKS["cartpole"], title="CartPole-v1, 120 s of rounds (exploit steps)",
                                        threshold=math.inf, interval=4096, limit=120.0)


def evolve_arguments(task: Task, population: int, seed: int) -> tuple[list[str], list[str]]:
    """evolve.py's ``-c`` files and ``-m`` edits for the task (the Tune side around our learner loads the same)."""
    files = [*task.files, "ec/ea/pbt.yml", "ec/wrap/mdp.yml"]
    modify = [f"ec.population={population}", f"sample.eval={EPISODES}", f"ec.objectives=[{task.objective}]",
              f"ec.train.stopper=self.cost >= {task.interval}", "train.lr_schedule=constant",
              f"ec.pbt.quantile={QUANTILE}", f"ec.pbt.factors=[{','.join(map(str, FACTORS))}]",
              "ec.pbt.explore=perturb", "evaluator.progress=false", "evaluator.tensorboard=false", f"seed={seed}",
              f"ec.log=[{','.join(key for key, (_, _, log) in SEARCHED.items() if log)}]",
              *(f"{key}=[{lo},{hi}]" for key, (lo, hi, _) in SEARCHED.items())]
    return files, modify


@dataclasses.dataclass
class Evaluation:
    t: float             # seconds since the run's process started, when the evaluation was known
    member: str
    fitness: float
    env_steps: int       # the member's own env steps so far
    gap: float           # seconds between the member's previous report and this round's start (nan: first round)
    exploited: bool      # this round started from a donor's state


def evolve_rows(lines: list[tuple[float, dict[str, Any]]]) -> list[Evaluation]:
    """lineage.jsonl rows (stamped when they appeared) as evaluations; a round's gap is measured on the learner
    process that trained it, with the engine's own clock."""
    last: dict[int, float] = {}
    evaluations = []
    for stamp, row in lines:
        learner, start = int(row["learner"]), float(row["time"]) - float(row["round_seconds"])
        gap = start - last[learner] if learner in last else math.nan
        last[learner] = float(row["time"])
        evaluations.append(Evaluation(stamp, str(row["id"]), _number(row["fitness"]), int(row["cost"]), gap,
                                      str(row["operator"]).startswith("exploit")))
    return evaluations


def tune_rows(lines: list[tuple[float, dict[str, Any]]]) -> list[Evaluation]:
    """bench/tune_run.py's events as evaluations: a trial whose values changed since its last report was exploited
    (Tune keeps the trial, restarting it from the donor's checkpoint)."""
    last: dict[str, dict[str, Any]] = {}
    evaluations = []
    for _, event in lines:
        member, t = str(event["member"]), float(event["t"])
        previous = last.get(member)
        gap = t - float(event["round_seconds"]) - float(previous["t"]) if previous else math.nan
        exploited = previous is not None and previous["hparams"] != event["hparams"]
        last[member] = event
        evaluations.append(Evaluation(t, member, _number(event["fitness"]), int(event["env_steps"]), gap, exploited))
    return evaluations


def _number(value: Any) -> float:
    return math.nan if value is None else float(value)


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (Ray's GCS and raylets, its workers: learners and actors)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, stack = [], [pid]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(children.get(current, []))
    return found


def pss_bytes(pids: list[int]) -> int:
    """Proportional set size of ``pids`` together (shared pages split among their users), bytes."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
                    break
        except OSError:
            continue
    return total


def watch(command: list[str], lines_path: Path, limit: float) -> tuple[list[tuple[float, dict[str, Any]]], int]:
    """Run ``command`` (its own process group), stamping each new JSON line of ``lines_path`` with the seconds since
    the start and sampling the process tree's memory every second; killed ``limit`` + 120 s after its start.
    Returns the stamped lines and the peak PSS (bytes)."""
    started = time.time()
    process = subprocess.Popen(command, cwd=REPOSITORY, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True, start_new_session=True)
    lines: list[tuple[float, dict[str, Any]]] = []
    read, peak, sampled = 0, 0, 0.0
    stderr: list[str] = []
    drain = threading.Thread(target=lambda: stderr.extend(process.stderr or []), daemon=True)
    drain.start()
    while True:
        done = process.poll() is not None
        if lines_path.exists():
            text = lines_path.read_text()
            complete = text[read:text.rfind("\n") + 1]
            read += len(complete)
            lines.extend((time.time() - started, json.loads(line)) for line in complete.splitlines() if line)
        if done:
            break
        if time.time() - sampled >= 1.0:
            sampled = time.time()
            peak = max(peak, pss_bytes(descendants(process.pid)))
        if time.time() - started > limit + 120:
            os.killpg(process.pid, signal.SIGKILL)
        time.sleep(0.1)
    drain.join(timeout=5)
    if process.returncode != 0 and not lines:
        raise RuntimeError(f"{command[1]} failed ({process.returncode}):\n{''.join(stderr)[-3000:]}")
    return lines, peak


def run(side: str, task: Task, population: int, seed: int, python: Path) -> dict[str, Any]:
    """One run of ``side``: its evaluations and peak memory."""
    files, modify = evolve_arguments(task, population, seed)
    with tempfile.TemporaryDirectory() as folder:
        if side == "evolve":
            root = Path(folder) / "run"
            reached = f"self.best >= {task.threshold} or " if math.isfinite(task.threshold) else ""
            command = [sys.executable, str(REPOSITORY / "evolve.py"), "-D", "-c", *files, "-m", *modify,
                       f"root={root}", f"ec.stop={reached}self.time >= {task.limit}"]
            lines, peak = watch(command, root / "lineage.jsonl", task.limit)
            evaluations = evolve_rows(lines)
        else:
            events = Path(folder) / "events.jsonl"
            per_member = 1 + (task.rllib or {}).get("env_runners", {}).get("num_env_runners", 1) if side == "rllib" \
                else 1.5                                   # a learner (1 CPU) and its actor (0.5), as evolve.py
            job = {"side": "rllib" if side == "rllib" else "ours", "files": files, "modify": modify,
                   "rllib": task.rllib, "searched": {k: list(v) for k, v in SEARCHED.items()},
                   "metric": task.objective, "population": population, "interval": task.interval,
                   "quantile": QUANTILE, "factors": list(FACTORS), "episodes": EPISODES,
                   "threshold": task.threshold, "limit": task.limit, "seed": seed,
                   "cpus": max(os.cpu_count() or 1, math.ceil(population * per_member)), "events": str(events)}
            lines, peak = watch([str(python), str(REPOSITORY / "bench" / "tune_run.py"), json.dumps(job)], events,
                                task.limit)
            evaluations = tune_rows(lines)
    return {"evaluations": evaluations, "peak": peak}


def summary(task: Task, result: dict[str, Any], budgets: list[float]) -> dict[str, Any]:
    """Seconds to the threshold, the best evaluation at each budget, the exploit and continue gaps, memory."""
    evaluations: list[Evaluation] = result["evaluations"]
    first = next((e for e in evaluations if e.fitness >= task.threshold), None)
    reached = first.t if first is not None else math.nan
    steps = first.env_steps if first is not None else math.nan     # the member's env steps (inherited ones too)
    best = {budget: max((e.fitness for e in evaluations if e.t <= budget and not math.isnan(e.fitness)),
                        default=math.nan) for budget in budgets}
    exploits = [e.gap for e in evaluations if e.exploited and not math.isnan(e.gap)]
    continues = [e.gap for e in evaluations if not e.exploited and not math.isnan(e.gap)]
    curve, so_far = [], -math.inf
    for e in evaluations:
        if not math.isnan(e.fitness) and e.fitness > so_far:
            so_far = e.fitness
            curve.append((e.t, so_far))
    return {"reached": reached, "steps": steps, "best": best, "exploits": exploits, "continues": continues,
            "peak": result["peak"], "curve": curve, "rounds": len(evaluations)}


def gap_cell(values: list[float]) -> str:
    return (f"{statistics.median(values):.2f} s ({len(values)})" if values else "—")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", default=["cartpole", "pendulum", "pong"], choices=list(TASKS))
    parser.add_argument("--sides", nargs="+", default=["evolve", "tune", "rllib"], choices=["evolve", "tune", "rllib"])
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--budgets", type=float, nargs="+", default=[60.0, 180.0], help="seconds")
    parser.add_argument("--python", type=Path, default=TUNE_PYTHON, help="the Tune environment's python")
    parser.add_argument("--setup", action="store_true", help="make the Tune environment and stop")
    parser.add_argument("--plot", type=Path, default=None, metavar="DIR")
    args = parser.parse_args()
    if args.setup:
        setup(args.python, TUNE_PACKAGES)
        return
    if {"tune", "rllib"} & set(args.sides) and not args.python.exists():
        parser.error(f"--python {args.python} does not exist: run `python bench/populations.py --setup` first")
    print(f"{time.strftime('%Y-%m-%d')} {platform.node()}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs; population {args.population}, seeds {args.seeds}", flush=True)
    table = []
    for name in args.tasks:
        task = TASKS[name]
        sides = [s for s in args.sides if s != "rllib" or task.rllib is not None]
        results: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
        for seed in args.seeds:              # the sides take turns, so a slow spell of the machine hits each
            for side in sides:
                outcome = summary(task, run(side, task, args.population, seed, args.python), args.budgets)
                results[side].append(outcome)
                print(f"  {task.title} seed {seed} {side}: reached at {outcome['reached']:.1f} s "
                      f"({outcome['steps']} env steps of the member), best "
                      + ", ".join(f"{v:.3g} at {b:.0f} s" for b, v in outcome["best"].items())
                      + f"; {outcome['rounds']} rounds, exploit steps {gap_cell(outcome['exploits'])}, between "
                      f"own rounds {gap_cell(outcome['continues'])}; peak {outcome['peak'] / 2**30:.2f} GiB",
                      flush=True)
        for side in (["rllib"] if "rllib" in args.sides and task.rllib is None else []):
            table.append([task.title, side, "RLlib cannot play this task (the project's own game)"])
        for side, runs in results.items():
            reached = median([r["reached"] for r in runs])
            reference = {s: median([r["reached"] for r in results[s]]) for s in results if s != "evolve"}
            ratios = [f"{reached / value:.2f}× {s}" if side == "evolve" and value == value and reached == reached
                      else "" for s, value in reference.items()]
            steps = median([r["steps"] for r in runs])
            table.append([task.title, side, median_and_spread([r["reached"] for r in runs])
                          + ("" if math.isnan(steps) else f" [{steps / 1000:.1f} k]"),
                          *(f"{statistics.median(r['best'][b] for r in runs):.3g}" for b in args.budgets),
                          gap_cell([g for r in runs for g in r["exploits"]]),
                          gap_cell([g for r in runs for g in r["continues"]]),
                          f"{statistics.median(r['peak'] for r in runs) / 2**30:.2f} GiB",
                          " ".join(filter(None, ratios)) or "—"])
        if args.plot is not None:
            path = args.plot / f"populations_{name}.png"
            plot_panels([(task.title, task.threshold, [(f"{side} seed {seed}", COLOURS[side], run["curve"])
                                                       for side, runs in results.items()
                                                       for seed, run in zip(args.seeds, runs)])], path,
                        xlabel="seconds from process start", ylabel="best evaluation so far")
            print(f"  curves: {path}", flush=True)
    headers = ["task", "side", "seconds to the threshold", *(f"best at {b:.0f} s" for b in args.budgets),
               "exploit step (rounds)", "between own rounds", "peak memory", "evolve / other"]
    print()
    print("| " + " | ".join(headers) + " |")
    print("|" + "---|" * len(headers))
    for line in table:
        print("| " + " | ".join(line) + " |")


if __name__ == "__main__":
    main()
