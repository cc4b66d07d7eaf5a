"""Does self-play keep improving? Train Pong with PFSP self-play, then rate the checkpoints against each other.

Runs ``python train.py`` (the default job: PPO self-play on the built-in Pong, PFSP opponent pool) for
``--minutes`` with the learning rate decaying linearly over ``--lr-horizon`` env steps (about what 30 minutes
on 2 cores sample), keeping a checkpoint every ``--minutes``/``--checkpoints`` minutes; then ``python evaluate.py``
plays a round-robin among them (``--games`` per pair) and this script prints the Spearman correlation of
their Elo with training time (target: >= 0.8 over >= 8 checkpoints for a 30-minute run on 2 cores).

    python bench/selfplay.py [--minutes 30] [--checkpoints 16] [--games 10] [--run DIR] [--skip-training]
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scipy.stats import spearmanr

REPOSITORY = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--checkpoints", type=int, default=16)
    parser.add_argument("--games", type=int, default=10)
    parser.add_argument("--lr-horizon", type=float, default=2.2e7,
                        help="env steps over which the learning rate decays linearly to 0 (0: constant lr)")
    parser.add_argument("--run", type=Path, help="run directory (default: a temporary one)")
    parser.add_argument("--skip-training", action="store_true", help="only rate the checkpoints already in --run")
    args = parser.parse_args()
    run = args.run or Path(tempfile.mkdtemp(prefix="selfplay-"))
    if not args.skip_training:
        seconds = args.minutes * 60
        subprocess.run([sys.executable, str(REPOSITORY / "train.py"), "-D", "-m", f"root={run}",
                        f"evaluator.terminate=self.time >= {seconds}", "evaluator.interval=60",
                        f"evaluator.checkpoint.interval={seconds / args.checkpoints:.1f}",
                        f"evaluator.checkpoint.keep={args.checkpoints + 2}",
                        *(["train.lr_schedule=linear", f"train.lr_horizon={args.lr_horizon}"]
                          if args.lr_horizon else [])],
                       check=True, cwd=REPOSITORY)
    started = time.monotonic()
    subprocess.run([sys.executable, str(REPOSITORY / "evaluate.py"), "--checkpoints", str(run / "checkpoints"),
                    "--games", str(args.games), "--out", str(run / "evaluation")], check=True, cwd=REPOSITORY)
    with open(run / "evaluation" / "ratings.csv") as stream:
        rows = list(csv.DictReader(stream))
    minutes = [float(row["seconds"]) / 60 for row in rows]
    elo = [float(row["elo"]) for row in rows]
    correlation = spearmanr(minutes, elo).statistic
    print(f"# {time.strftime('%Y-%m-%d')}; run {run}; tournament {time.monotonic() - started:.0f} s")
    for m, e in zip(minutes, elo):
        print(f"  {m:5.1f} min  Elo {e:6.0f}")
    print(f"{len(rows)} checkpoints; Spearman correlation of Elo with training time: {correlation:.3f} "
          f"(target >= 0.8 over >= 8)")


if __name__ == "__main__":
    main()
