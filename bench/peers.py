"""Our learners against the fastest peers on small tasks, from the moment each process starts (issue 32).

Each row is a task, an algorithm and an evaluation threshold; each run is a fresh process, timed from its own start
(read from /proc: the interpreter, imports, Ray or JAX start-up and every evaluation count) to the end of the first
deterministic evaluation of 10 episodes at the threshold. Medians over seeds, the spread (min–max) beside, and the
ratio of ours to the fastest peer.

- ours: what a user types, ``train.py -c mdp/gym.yml mdp/gym/<task>.yml rl/<algorithm>.yml`` with the shipped
  values (the task's tuned section for the algorithm), evaluating as often as the peers, every ``eval_steps`` env
  steps (``evaluator.interval_steps``, ``evaluator.share=0``: no sooner; evaluations run beside training, one at a
  time); the moment is
  ``--profile``'s "stop rule holds" (the evaluation that crossed the threshold finished), its env steps those of
  the weights that evaluation judged;
- stable-baselines3 2.9.2 and sbx 0.28 (SB3 in JAX) with rl-baselines3-zoo's tuned values and budget
  (``n_timesteps``: their exploration and learning-rate schedules run over it), evaluating every ``eval_steps``
  env steps (bench/peer_run.py). They are installed for this benchmark only, in their own virtual
  environment: ``python bench/peers.py --setup`` makes it (it sees this environment's packages: torch, JAX,
  gymnasium) at ``--python``'s folder.

The protocol (issue 52): both sides are judged at the same point, right after the update on the rollout that the
credited env steps include (ours: the evaluation of the weights after an iteration, its ``cost`` the env steps
trained on; the peers: their callback at the start of the next rollout, after ``train()``). Published tables use
held-out seeds (100 and up; ``--seeds`` defaults to 100-104, 5 a side); every ablation that chose a shipped value
used seeds 0-4, and a run on them is refused unless ``--tuning`` says it is one. DQN rows say which DQN: ours
as shipped is double + dueling + 3-step ("Rainbow-lite"); the ``-plain`` rows switch those off to match SB3's DQN.

Fixed-budget rows (MuJoCo PPO: ``hopper-ppo``, ``halfcheetah-ppo``) have no threshold: each system trains for the
row's env steps (300 k), evaluating every ``eval_steps``, and the final weights' return over 10 deterministic
episodes is compared (medians of the seeds; ours less SB3's); give them a ``--limit`` above the peers' time for the
budget (SB3 takes about 4 to 8 minutes here).

    python bench/peers.py --setup
    python bench/peers.py [--rows cartpole-ppo ...] [--seeds 100 101 ...] [--peers sb3 sbx] [--limit 120] [--plot docs/]
    python bench/peers.py --tuning --seeds 0 1 2 3 4 --changes KEY=VALUE ...   # an ablation: never published
    python bench/peers.py --rows hopper-ppo halfcheetah-ppo --peers sb3 sb3-defaults --limit 1200 --plot docs/
    python bench/peers.py --rows hopper-ppo halfcheetah-ppo --peers sb3 sb3-defaults --budget 1000000 --limit 7200
    python bench/peers.py --rows walker2d-defaults ant-defaults swimmer-defaults inverteddoublependulum-defaults \
        mountaincarcontinuous-defaults bipedalwalker-defaults --peers sb3 --limit 900     # defaults against defaults
    python bench/peers.py --rows walker2d-sac-defaults inverteddoublependulum-sac-defaults --peers sb3 --limit 1500
    python bench/peers.py --rows doorkey-ppo-defaults --peers sb3-defaults sb3 --limit 900    # MiniGrid, text
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import math
import platform
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from learning import plot_panels  # noqa: E402

from lamarckian.record import read_rows  # noqa: E402

PEERS_PYTHON = Path.home() / ".cache" / "lamarckian" / "peers" / "bin" / "python"
PEER_PACKAGES = ("stable-baselines3==2.9.2", "sbx-rl==0.28.0")
EPISODES = 10                       # evaluation episodes, both sides
COLOURS = {"sb3": "tab:blue", "sb3-defaults": "tab:purple", "sbx": "tab:orange",   # learning curves, one colour
           "ours": "tab:green"}                                                    # a library
SBX_UNSUPPORTED = ("use_sde", "sde_sample_freq")   # sbx's PPO has no generalized state-dependent exploration


MUJOCO_PPO = dict(normalize=True, n_envs=1, n_steps=512,          # rl-baselines3-zoo's PPO on MuJoCo, shared
                  policy_kwargs=dict(log_std_init=-2, ortho_init=False, activation_fn="relu",
                                     net_arch=dict(pi=[256, 256], vf=[256, 256])))
CARTPOLE_DQN = dict(learning_rate=2.3e-3, batch_size=64, buffer_size=100000, learning_starts=1000, gamma=0.99,
                    target_update_interval=10, train_freq=256, gradient_steps=128, exploration_fraction=0.16,
                    exploration_final_eps=0.04, policy_kwargs=dict(net_arch=[256, 256]))
ACROBOT_DQN = dict(learning_rate=6.3e-4, batch_size=128, buffer_size=50000, learning_starts=0, gamma=0.99,
                   target_update_interval=250, train_freq=4, gradient_steps=-1, exploration_fraction=0.12,
                   exploration_final_eps=0.1, policy_kwargs=dict(net_arch=[256, 256]))
PLAIN_DQN = ("rl.dqn.double=false", "rl.dqn.dueling=false", "train.replay.steps=1")   # SB3's DQN: no Rainbow parts
SB3_DEFAULTS_NORMALIZED = dict(normalize=True)      # SB3's default PPO as the zoo's MuJoCo defaults wrap it
DEFAULTS_BUDGET = 100_000                           # env steps of every PPO row of the defaults-against-defaults table
SAC_DEFAULTS_BUDGET = 50_000                        # and of every SAC row of it
HELD_OUT = 100                       # seeds from here on are published; below it they tune (every ablation: 0-4)


@dataclasses.dataclass(frozen=True)
class Row:
    title: str
    env: str
    files: tuple[str, ...]           # our config files after mdp/gym.yml
    threshold: float | None          # None: a fixed-budget row (the return of the final weights at `timesteps`)
    algorithm: str                   # the peers' class
    zoo: dict[str, Any]              # rl-baselines3-zoo's values for the peers
    eval_steps: int                  # the peers evaluate every this many env steps
    timesteps: int                   # the zoo's n_timesteps: the peers' budget, over which their schedules run
    changes: tuple[str, ...] = ()    # our -m changes after the files
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)   # the "sb3-defaults" peer's values


ROWS = {
    "cartpole-ppo": Row("CartPole-v1 PPO to 475", "CartPole-v1", ("mdp/gym/cartpole.yml", "rl/ppo.yml"), 475.0, "PPO",
                        dict(n_envs=8, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20,
                             ent_coef=0.0, learning_rate="lin_0.001", clip_range="lin_0.2"), 1000, 100_000),
    "pendulum-ppo": Row("Pendulum-v1 PPO to -200", "Pendulum-v1", ("mdp/gym/pendulum.yml", "rl/ppo.yml"), -200.0,
                        "PPO", dict(n_envs=4, n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0,
                                    learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4),
                        4096, 100_000),
    "pendulum-sac": Row("Pendulum-v1 SAC to -200", "Pendulum-v1", ("mdp/gym/pendulum.yml", "rl/sac.yml"), -200.0,
                        "SAC", dict(learning_rate=1e-3), 1000, 20_000),
    "cartpole-dqn": Row("CartPole-v1 DQN to 475 (ours: Rainbow-lite)", "CartPole-v1",
                        ("mdp/gym/cartpole.yml", "rl/dqn.yml"), 475.0, "DQN", CARTPOLE_DQN, 1000, 50_000),
    "cartpole-dqn-plain": Row("CartPole-v1 DQN to 475 (both plain)", "CartPole-v1",
                              ("mdp/gym/cartpole.yml", "rl/dqn.yml"), 475.0, "DQN", CARTPOLE_DQN, 1000, 50_000,
                              PLAIN_DQN),
    "acrobot-ppo": Row("Acrobot-v1 PPO to -100", "Acrobot-v1", ("mdp/gym/acrobot.yml", "rl/ppo.yml"), -100.0, "PPO",
                       dict(n_envs=16, n_steps=256, gae_lambda=0.94, gamma=0.99, n_epochs=4, ent_coef=0.0,
                            normalize=True), 4096, 1_000_000),
    "acrobot-dqn": Row("Acrobot-v1 DQN to -100 (ours: Rainbow-lite)", "Acrobot-v1",
                       ("mdp/gym/acrobot.yml", "rl/dqn.yml"), -100.0, "DQN", ACROBOT_DQN, 1000, 100_000),
    "acrobot-dqn-plain": Row("Acrobot-v1 DQN to -100 (both plain)", "Acrobot-v1",
                             ("mdp/gym/acrobot.yml", "rl/dqn.yml"), -100.0, "DQN", ACROBOT_DQN, 1000, 100_000,
                             PLAIN_DQN),
    "lunarlander-ppo": Row("LunarLander-v3 PPO to 200", "LunarLander-v3", ("mdp/gym/lunarlander.yml", "rl/ppo.yml"),
                           200.0, "PPO", dict(n_envs=16, n_steps=1024, batch_size=64, gae_lambda=0.98, gamma=0.999,
                                              n_epochs=4, ent_coef=0.01), 16384, 1_000_000),
    "hopper-ppo": Row("Hopper-v5 PPO, return at 300 k env steps", "Hopper-v5", ("mdp/gym/hopper.yml", "rl/ppo.yml"),
                      None, "PPO", dict(MUJOCO_PPO, batch_size=32, gamma=0.999, learning_rate=9.80828e-5,
                                        ent_coef=0.00229519, clip_range=0.2, n_epochs=5, gae_lambda=0.99,
                                        max_grad_norm=0.7, vf_coef=0.835671), 50_000, 300_000),
    "halfcheetah-ppo": Row("HalfCheetah-v5 PPO, return at 300 k env steps", "HalfCheetah-v5",
                           ("mdp/gym/halfcheetah.yml", "rl/ppo.yml"), None, "PPO",
                           dict(MUJOCO_PPO, batch_size=64, gamma=0.98, learning_rate=2.0633e-5, ent_coef=0.000401762,
                                clip_range=0.1, n_epochs=20, gae_lambda=0.92, max_grad_norm=0.8, vf_coef=0.58096),
                           50_000, 300_000, defaults=SB3_DEFAULTS_NORMALIZED),
}
ROWS["hopper-ppo"] = dataclasses.replace(ROWS["hopper-ppo"], defaults=SB3_DEFAULTS_NORMALIZED)


def untuned(env: str, normalize: bool, algorithm: str = "PPO") -> Row:
    """A defaults-against-defaults row: ours with no task file (``-m mdp.gym.id=<env>``: no tuned section, so the
    values an untuned single-agent task gets, untuned/gym.yml),
    stable-baselines3's ``PPO("MlpPolicy", env)`` (or ``SAC``) as it comes (VecNormalize where the zoo's MuJoCo
    defaults use it: PPO only), the final weights' return at :data:`DEFAULTS_BUDGET` env steps
    (:data:`SAC_DEFAULTS_BUDGET` for SAC)."""
    peer = dict(SB3_DEFAULTS_NORMALIZED) if normalize else {}
    budget = SAC_DEFAULTS_BUDGET if algorithm == "SAC" else DEFAULTS_BUDGET
    return Row(f"{env} {algorithm}, defaults, return at {budget // 1000} k env steps", env,
               (f"rl/{algorithm.lower()}.yml",), None, algorithm, peer, budget // 2, budget, (f"mdp.gym.id={env}",),
               peer)


UNTUNED = {"walker2d-defaults": untuned("Walker2d-v5", True), "ant-defaults": untuned("Ant-v5", True),
           "swimmer-defaults": untuned("Swimmer-v5", True),
           "inverteddoublependulum-defaults": untuned("InvertedDoublePendulum-v5", True),
           "mountaincarcontinuous-defaults": untuned("MountainCarContinuous-v0", False),
           "bipedalwalker-defaults": untuned("BipedalWalker-v3", False),
           "walker2d-sac-defaults": untuned("Walker2d-v5", False, "SAC"),
           "inverteddoublependulum-sac-defaults": untuned("InvertedDoublePendulum-v5", False, "SAC")}
ROWS.update(UNTUNED)
#: MiniGrid through the generic config, ours with nothing added; SB3 needs FlatObsWrapper (no text observation): the
#: zoo's values for the task with it (its current ``env_wrapper``), and SB3's defaults with it
FLAT_OBSERVATION = "minigrid.wrappers:FlatObsWrapper"
ROWS["doorkey-ppo-defaults"] = Row(
    "MiniGrid-DoorKey-5x5-v0 PPO to 0.9, ours with defaults", "minigrid:MiniGrid-DoorKey-5x5-v0", ("rl/ppo.yml",),
    0.9, "PPO", dict(env_wrapper=FLAT_OBSERVATION, normalize=True, n_envs=8, n_steps=128, batch_size=64,
                     gae_lambda=0.95, gamma=0.99, n_epochs=10, ent_coef=0.0, learning_rate=2.5e-4, clip_range=0.2),
    10_000, 300_000, ("mdp.gym.id=minigrid:MiniGrid-DoorKey-5x5-v0",), dict(env_wrapper=FLAT_OBSERVATION))


def with_budget(row: Row, steps: int) -> Row:
    """A fixed-budget row trained for ``steps`` env steps on both sides (the peers' schedules over them too)."""
    title = re.sub(r"at [\d.]+ k env steps", f"at {steps / 1000:g} k env steps", row.title)
    return dataclasses.replace(row, title=title, timesteps=steps, eval_steps=max(row.eval_steps, steps // 6))


def run_ours(row: Row, seed: int, limit: float) -> dict[str, Any]:
    """``train.py --profile`` until an evaluation reaches the threshold or ``limit`` training seconds pass: seconds
    from process start to that evaluation (nan: not reached), its env steps; a fixed-budget row trains until its
    env steps are spent and gives the final weights' return (``final``, at ``final_steps``)."""
    stop = (f"self.fitness >= {row.threshold}" if row.threshold is not None else f"self.cost >= {row.timesteps}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "run"
        completed = subprocess.run(
            [sys.executable, str(REPOSITORY / "train.py"), "-c", "mdp/gym.yml", *row.files, "--profile", "-D", "-m",
             f"seed={seed}", f"root={root}", "evaluator.interval=1e9", f"evaluator.interval_steps={row.eval_steps}",
             "evaluator.share=0", f"evaluator.episodes={EPISODES}",
             "evaluator.progress=false", "evaluator.tensorboard=false",
             f"evaluator.terminate={stop} or self.time > {limit}", *row.changes],
            capture_output=True, text=True, cwd=REPOSITORY)
        if completed.returncode != 0:
            raise RuntimeError(f"train.py failed ({row.title}, seed {seed}):\n{completed.stderr[-2000:]}")
        rows = read_rows(root / "evaluations.csv")
    end = time.monotonic() - started
    reached = next((r for r in rows if row.threshold is not None and r["fitness"] >= row.threshold), None)
    ends = re.search(r"^stop rule holds\s+([\d.]+)", completed.stderr, re.MULTILINE)   # that evaluation's end
    first_step = re.search(r"^first env step \(the earliest actor\)\s+([\d.]+)", completed.stderr, re.MULTILINE)
    return {"seconds": float(ends.group(1)) if reached and ends else math.nan,
            "steps": reached["cost"] if reached else math.nan,
            "first_step": float(first_step.group(1)) if first_step else math.nan,
            "waited": (reached or rows[-1])["evaluating"] / max(1e-9, (reached or rows[-1])["time"]),
            "final": rows[-1]["fitness"], "final_steps": rows[-1]["cost"], "end": end,
            "curve": [(r["cost"], r["fitness"]) for r in rows]}


def run_peer(python: Path, library: str, row: Row, seed: int, limit: float) -> dict[str, Any]:
    """One run of ``library`` in the peers' environment (bench/peer_run.py), as :func:`run_ours`."""
    values = row.defaults if library == "sb3-defaults" else row.zoo
    hyper = {k: v for k, v in values.items() if not (library == "sbx" and k in SBX_UNSUPPORTED)}
    job = {"library": "sb3" if library == "sb3-defaults" else library, "algorithm": row.algorithm, "env": row.env,
           "hyper": hyper, "seed": seed,
           "threshold": row.threshold, "eval_steps": row.eval_steps, "timesteps": row.timesteps, "episodes": EPISODES,
           "limit": limit}
    started = time.monotonic()
    completed = subprocess.run([str(python), str(REPOSITORY / "bench" / "peer_run.py"), json.dumps(job)],
                               capture_output=True, text=True)
    end = time.monotonic() - started
    if completed.returncode != 0:
        raise RuntimeError(f"{library} failed ({row.title}, seed {seed}):\n{completed.stderr[-2000:]}")
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    return {"seconds": result["reached"] if result["reached"] is not None else math.nan,
            "steps": result["steps"] if result["steps"] is not None else math.nan, "learn": result["learn"],
            "final": result["curve"][-1][1] if result["curve"] else math.nan,
            "final_steps": result["curve"][-1][0] if result["curve"] else math.nan, "end": end,
            "curve": [tuple(point) for point in result["curve"]]}


def median_and_spread(values: list[float]) -> str:
    """``median (min–max)``, with the runs that did not reach the threshold counted."""
    reached = [v for v in values if not math.isnan(v)]
    if not reached:
        return "not reached"
    text = f"{statistics.median(reached):.1f} s ({min(reached):.1f}–{max(reached):.1f})"
    return text + (f", {len(values) - len(reached)} of {len(values)} not reached" if len(reached) < len(values) else "")


def median(values: list[float]) -> float:
    reached = [v for v in values if not math.isnan(v)]
    return statistics.median(reached) if len(reached) * 2 > len(values) else math.nan


def pinned() -> list[str]:
    """``name==version`` of every distribution this environment has, the first of a name on ``sys.path``: the
    peers are installed under these constraints, so pip never replaces one of ours (a CUDA build of torch beside
    our CPU one: the peers' seconds would import another build) and a peer that needs another version fails
    at setup, naming it."""
    versions: dict[str, str] = {}
    for distribution in importlib.metadata.distributions():
        name = distribution.metadata["Name"]
        if name:
            versions.setdefault(name.lower(), distribution.version)
    return [f"{name}=={version}" for name, version in sorted(versions.items())]


def setup(python: Path, packages: tuple[str, ...] = PEER_PACKAGES) -> None:
    """A peers' virtual environment at ``python``'s folder that sees this environment's packages, a virtual
    environment's own included (``venv --system-site-packages`` alone sees the base interpreter's: no MuJoCo, no
    torch where those live in the benchmark's virtual environment), with ``packages`` installed under
    :func:`pinned`."""
    folder = python.parents[1]
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(folder)], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    ours = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (Path(site) / "lamarckian-benchmark.pth").write_text("".join(f"{path}\n" for path in ours))
    constraints = folder / "constraints.txt"
    constraints.write_text("".join(f"{line}\n" for line in pinned()))
    if packages:
        subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(constraints), *packages], check=True)
    print(f"peers installed in {folder} (this environment's packages pinned: {constraints})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(HELD_OUT, HELD_OUT + 5)),
                        help=f"published runs take held-out seeds ({HELD_OUT} and up)")
    parser.add_argument("--tuning", action="store_true",
                        help=f"an ablation on tuning seeds (below {HELD_OUT}): its figures are never published")
    parser.add_argument("--peers", nargs="*", default=["sb3", "sbx"], choices=["sb3", "sbx", "sb3-defaults"],
                        help="none: our runs only; sb3-defaults: SB3's default PPO (+ VecNormalize on MuJoCo) on the "
                             "fixed-budget rows")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds before a run gives up")
    parser.add_argument("--python", type=Path, default=PEERS_PYTHON, help="the peers' environment's python")
    parser.add_argument("--budget", type=int, default=None, metavar="STEPS",
                        help="the fixed-budget rows' env steps instead of theirs (1000000: the zoo's MuJoCo budget, "
                             "for a machine with more cores)")
    parser.add_argument("--changes", nargs="*", default=[], metavar="KEY=VALUE",
                        help="-m changes to our side of every row (an ablation: with --tuning)")
    parser.add_argument("--setup", action="store_true", help="make the peers' environment and stop")
    parser.add_argument("--plot", type=Path, default=None, metavar="DIR",
                        help="one learning-curve plot per row here (evaluation return against env steps)")
    args = parser.parse_args()
    if args.setup:
        setup(args.python)
        return
    tuning = [seed for seed in args.seeds if seed < HELD_OUT]
    if args.changes and not args.tuning:
        parser.error(f"--changes {' '.join(args.changes)}: an ablation; say --tuning (and give seeds 0-4)")
    if tuning and not args.tuning:
        parser.error(f"--seeds {' '.join(map(str, tuning))}: seeds below {HELD_OUT} tune the shipped values and are "
                     f"not published; use held-out seeds ({HELD_OUT} and up), or say --tuning for an ablation")
    if args.peers and not args.python.exists():
        parser.error(f"--python {args.python} does not exist: run `python bench/peers.py --setup` first")
    print(f"{time.strftime('%Y-%m-%d')} {platform.node()}, {platform.processor() or platform.machine()}, "
          f"{'TUNING ' if args.tuning else 'held-out '}seeds {args.seeds}; both judged right after the update on "
          "the credited env steps; seconds from process start to the first evaluation at the threshold, "
          "median (min–max); env steps to it in brackets", flush=True)
    tables: dict[bool, list[list[str]]] = {False: [], True: []}     # threshold rows, fixed-budget rows
    for name in args.rows:
        row = ROWS[name] if args.budget is None or ROWS[name].threshold is not None else with_budget(ROWS[name],
                                                                                                    args.budget)
        row = dataclasses.replace(row, changes=(*row.changes, *args.changes))
        results: dict[str, list[dict[str, Any]]] = {system: [] for system in [*args.peers, "ours"]}
        for seed in args.seeds:          # the systems take turns, so a slow spell of the machine hits each
            for system in results:
                result = (run_ours(row, seed, args.limit) if system == "ours"
                          else run_peer(args.python, system, row, seed, args.limit))
                results[system].append(result)
                print(f"  {row.title} seed {seed} {system}: {result['seconds']:.1f} s, {result['steps']} steps, "
                      f"final return {result['final']:.1f} at {result['final_steps']} steps", flush=True)
        line = budget_cells(row, results) if row.threshold is None else threshold_cells(row, results, args.peers)
        tables[row.threshold is None].append(line)
        print(" | ".join(line), flush=True)
        if args.plot is not None:
            path = args.plot / f"peers_{name}.png"
            plot_panels([(row.title, row.threshold, [(f"{system} seed {seed}", COLOURS[system], run["curve"])
                                                     for system, runs in results.items()
                                                     for seed, run in zip(args.seeds, runs)])], path)
            print(f"  learning curves: {path}", flush=True)
    headers = {False: ["row", *args.peers, "ours", "ours / fastest peer (s)", "ours / SB3 (env steps)",
                       "ours: first env step",
                       "ours: share of training spent waiting for evaluation"],
               True: ["row", *(f"{p}: final return" for p in args.peers), "ours: final return",
                      "ours − SB3 (medians)", "untrained: the return after the first update (medians)",
                      "seconds from process start to the end (medians)"]}
    for budget, lines in tables.items():
        if lines:
            print()
            print("| " + " | ".join(headers[budget]) + " |")
            print("|" + "---|" * len(headers[budget]))
            for line in lines:
                print("| " + " | ".join(line) + " |")


def threshold_cells(row: Row, results: dict[str, list[dict[str, Any]]], peers: list[str]) -> list[str]:
    """A threshold row's cells: each system's seconds to the threshold (env steps in brackets), ours against the
    fastest peer (seconds) and against SB3 (env steps, medians), our first env step and the share of training our
    learner waited for evaluation."""
    cells = []
    for runs in results.values():
        steps = median([r["steps"] for r in runs])
        cells.append(median_and_spread([r["seconds"] for r in runs])
                     + ("" if math.isnan(steps) else f" [{steps / 1000:.1f} k]"))
    fastest = min((median([r["seconds"] for r in results[p]]) for p in peers), default=math.nan)
    ours = median([r["seconds"] for r in results["ours"]])
    first_step = median([r["first_step"] for r in results["ours"]])
    waited = max((r["waited"] for r in results["ours"] if r["waited"] == r["waited"]), default=math.nan)
    steps = {system: median([r["steps"] for r in runs]) for system, runs in results.items()}
    against_sb3 = steps["ours"] / steps["sb3"] if "sb3" in steps and not math.isnan(steps["sb3"] + steps["ours"]) \
        else math.nan
    return [row.title, *cells, f"{ours / fastest:.2f}×" if fastest == fastest and ours == ours else "—",
            "—" if math.isnan(against_sb3) else f"{against_sb3:.2f}×", f"{first_step:.2f} s",
            f"{waited:.1%} (most of any seed)"]


def budget_cells(row: Row, results: dict[str, list[dict[str, Any]]]) -> list[str]:
    """A fixed-budget row's cells: each system's final return, median (min–max) over seeds, ours less SB3's, each
    system's return after its first update (its first evaluation: a row whose final return is about this one
    measures a policy that did not learn, such as Ant standing still), and each system's seconds from process start
    to its exit (the final evaluation included)."""
    finals = {system: [r["final"] for r in runs] for system, runs in results.items()}
    cells = [f"{statistics.median(values):.0f} ({min(values):.0f}–{max(values):.0f})" for values in finals.values()]
    difference = (f"{statistics.median(finals['ours']) - statistics.median(finals['sb3']):+.0f}" if "sb3" in finals
                  else "—")
    firsts = {system: [r["curve"][0][1] if r["curve"] else math.nan for r in runs] for system, runs in results.items()}
    untrained = ", ".join(f"{system} {statistics.median(values):.0f}" for system, values in firsts.items())
    seconds = ", ".join(f"{system} {statistics.median(r['end'] for r in runs):.0f} s"
                        for system, runs in results.items())
    return [row.title, *cells, difference, untrained, seconds]


if __name__ == "__main__":
    main()
