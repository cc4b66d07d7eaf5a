"""Does self-play on Ant Sumo (or Ant Battle) learn? A fixed-time training run of the shipped config with train.py,
then what a user sees of it:

- the final checkpoint against the initial policy in ``--games`` deterministic games (mean actions, the learner's
  seat rotating, the same spawns every time; draws count half). In Ant Battle the three other ants are all the
  initial policy and a win is a sole first place;
- evaluate.py over ``--snapshots`` snapshots of the run, evenly spaced from the initial policy to the final
  weights: Bradley-Terry Elo against training time and its Spearman correlation.

    python bench/sumo_learning.py                                   # 30 minutes of Ant Sumo on this machine
    python bench/sumo_learning.py --task battle                     # Ant Battle, 4 ants
    python bench/sumo_learning.py --minutes 10 --games 64 --snapshots 0 -m mdp.vec.physics.armature=0.01

The reference each figure is measured against is in the same run: the initial policy of the same run.
Writes summary.json (and the rating's tables and plots) under --root.
"""

from __future__ import annotations

import argparse
import csv
import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from lamarckian.config import load  # noqa: E402
from lamarckian.mdp.vec import create_vec_task  # noqa: E402
from lamarckian.model import ModelSettings, load_blob  # noqa: E402
from lamarckian.record import Checkpoints  # noqa: E402
from lamarckian.rl.ondevice.evaluation import OnDeviceEvaluation  # noqa: E402
from lamarckian.rl.ondevice.learner import vec_model  # noqa: E402

CONFIGS = {"sumo": "mdp/vec/ant_sumo.yml", "battle": "mdp/vec/ant_battle.yml"}
EVALUATION_SEED = 20261126   # spawns of the final games: none of the run's own evaluations used them


def train(files: list[str], changes: list[str], minutes: float, root: Path) -> None:
    """train.py for ``minutes`` in ``root`` (deleted first); its output goes to this process's output."""
    command = [sys.executable, "train.py", "-c", *files, "-m", f"evaluator.terminate=self.time >= {minutes * 60}",
               f"root={root}", "evaluator.progress=false", *changes, "-D"]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, cwd=REPOSITORY, check=True)


def final_games(files: list[str], changes: list[str], root: Path, games: int) -> dict[str, float]:
    """The newest checkpoint against the run's initial policy in ``games`` deterministic games; beside it, under
    ``reference/``, the initial policy itself in the learner's seats of the same games (what chance gives: 0.5 in
    Ant Sumo, about a quarter of the first places in 4-ant Ant Battle)."""
    config = load(files, changes)
    vec = config["mdp"]["vec"]
    _, state = Checkpoints(root / "checkpoints").load_newest()
    probe = create_vec_task({**vec, "num_envs": 1})
    model = vec_model(probe, ModelSettings.from_config(config))
    probe.close()
    model.load_state_dict(state["model"])
    initial = state["initial"].numpy()
    evaluation = OnDeviceEvaluation(vec, games, ("initial",), seed=EVALUATION_SEED)
    try:
        summary = evaluation.evaluate(model, [initial])
        load_blob(model, initial)
        reference = evaluation.evaluate(model, [initial])
    finally:
        evaluation.close()
    summary.update({f"reference/{key}": value for key, value in reference.items()})
    return {"iteration": int(state["iteration"]), "env_steps": int(state["cost"]), **summary}


def rate_snapshots(files: list[str], changes: list[str], root: Path, count: int, games: int) -> dict[str, float]:
    """evaluate.py over ``count`` evenly spaced snapshots (the first and the last included); Spearman of Elo with
    training time."""
    from scipy.stats import spearmanr

    paths = Checkpoints(root / "snapshots").paths()
    if len(paths) < 3:
        raise SystemExit(f"{root / 'snapshots'}: {len(paths)} snapshots, too few to rate")
    picked = sorted({paths[round(i * (len(paths) - 1) / (count - 1))] for i in range(count)})
    folder = root / "rated"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    for path in picked:
        shutil.copy(path, folder / path.name)
    out = root / "rating"
    command = [sys.executable, "evaluate.py", "-c", *files, "-m", *changes, "mdp.vec.num_envs.cpu=64",
               "--checkpoints", str(folder), "--games", str(games), "--out", str(out)]
    print("$", " ".join(command), flush=True)
    subprocess.run(command, cwd=REPOSITORY, check=True)
    rows = list(csv.DictReader(open(out / "ratings.csv")))
    seconds, elo = [float(r["seconds"]) for r in rows], [float(r["elo"]) for r in rows]
    newest = max(range(len(rows)), key=lambda i: seconds[i])
    table = list(csv.reader(open(out / "winrate.csv")))
    final_row = next(row for row in table[1:] if row[0] == rows[newest]["name"])
    against = [float(value) for value in final_row[1:] if value]
    return {"snapshots": len(rows), "spearman": float(spearmanr(seconds, elo).statistic),
            "final_elo_above_initial": elo[newest] - elo[min(range(len(rows)), key=lambda i: seconds[i])],
            "final_worst_score_against_a_snapshot": min(against)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(CONFIGS), default="sumo")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--games", type=int, default=200, help="final deterministic games against the initial policy")
    parser.add_argument("--snapshots", type=int, default=None, help="snapshots rated by evaluate.py (0: none; "
                                                                     "default 10 for sumo, 0 for battle)")
    parser.add_argument("--pair-games", type=int, default=8, help="games per pair of snapshots")
    parser.add_argument("--root", type=Path, default=None, help="the run's folder (default "
                                                                 "/tmp/lamarckian-bench/TASK_learning)")
    parser.add_argument("--skip-training", action="store_true", help="rate the run already in --root")
    parser.add_argument("-m", "--modify", nargs="+", action="extend", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    files = [CONFIGS[args.task], "rl/ppo_gpu.yml"]
    args.root = args.root or Path(f"/tmp/lamarckian-bench/{args.task}_learning")
    snapshots = args.snapshots if args.snapshots is not None else (10 if args.task == "sumo" else 0)
    print(f"# {time.strftime('%Y-%m-%d %H:%M')} {platform.node()} ({platform.processor() or 'CPU'}), torch "
          f"{torch.__version__}; {args.task}, {args.minutes:g} minutes, changes: {' '.join(args.modify) or 'none'}",
          flush=True)
    if not args.skip_training:
        train(files, args.modify, args.minutes, args.root)
    summary: dict[str, object] = {"task": args.task, "minutes": args.minutes, "changes": args.modify}
    final = final_games(files, args.modify, args.root, args.games)
    summary["final"] = final
    first = "first place" if args.task == "battle" else "wins"
    print(f"final checkpoint (iteration {final['iteration']}, {final['env_steps']:,} env steps) against the initial "
          f"policy, {args.games} deterministic games: score {final['initial/score']:.3f} ({first} "
          f"{final['initial/wins']:.0f}, draws {final['initial/draws']:.0f}, losses {final['initial/losses']:.0f}); "
          f"the initial policy in the same seats (reference): score {final['reference/initial/score']:.3f} ({first} "
          f"{final['reference/initial/wins']:.0f}, draws {final['reference/initial/draws']:.0f}, losses "
          f"{final['reference/initial/losses']:.0f})", flush=True)
    if snapshots:
        rating = rate_snapshots(files, args.modify, args.root, snapshots, args.pair_games)
        summary["rating"] = rating
        print(f"Elo over {rating['snapshots']} snapshots: Spearman with training time {rating['spearman']:.3f}, final "
              f"snapshot {rating['final_elo_above_initial']:+.0f} Elo above the initial policy; its worst score "
              f"against an earlier snapshot {rating['final_worst_score_against_a_snapshot']:.3f}")
    (args.root / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
