"""PBT against fixed hyper-parameters on CartPole-v1: wall-clock time until an evaluation reaches the target.

For each seed, two evolve.py runs with the same 4 learning rates drawn log-uniformly from [1e-5, 1e-1] (same
seed, same draws) and the same machine, learners and budget (the same total compute):

- PBT (`ec/ea/pbt.yml`: the bottom 20% copy the top 20% and perturb ×0.8/×1.2), timed until its best member's
  evaluation reaches the target;
- fixed (`ec.pbt.exploit=none`): the 4 members train side by side with their drawn rates; each member's time to
  the target is taken and the median of the 4 is the reference (a member that never gets there counts as
  infinitely slow).

Times are the evolution's clock from lineage.jsonl (start-up of Ray and the learners included, equal for both).
Prints per seed and the median over seeds; --plot draws best-so-far evaluation curves.

    python bench/pbt.py [--seeds 0 1 2] [--budget 150] [--plot docs/pbt.png]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
TARGET = 475.0
COMMON = ["-D", "-c", "mdp/gym.yml", "mdp/gym/cartpole.yml", "ec/ea/pbt.yml", "ec/wrap/mdp.yml", "-m",
          "train.lr=[1e-5,1e-1]", "ec.log=[train.lr]", "ec.population=4", "sample.eval=10",
          "ec.train.stopper=self.iteration >= 3", "train.batch=2048", "evaluator.progress=false",
          "evaluator.tensorboard=false"]


def evolve(seed: int, budget: float, root: Path, fixed: bool) -> list[dict]:
    stop = f"self.time >= {budget}" if fixed else f"self.best >= {TARGET} or self.time >= {budget}"
    extra = ["ec.pbt.exploit=none"] if fixed else []
    completed = subprocess.run([sys.executable, str(REPOSITORY / "evolve.py"), *COMMON, f"seed={seed}",
                                f"root={root}", f"ec.stop={stop}", *extra], capture_output=True, text=True,
                               cwd=REPOSITORY)
    if completed.returncode != 0:
        raise RuntimeError(f"evolve.py failed (seed {seed}):\n{completed.stderr[-3000:]}")
    return [json.loads(line) for line in (root / "lineage.jsonl").read_text().splitlines()]


def first_time(rows: list[dict]) -> float:
    """The clock of the first round whose evaluation reached the target (inf: never)."""
    return next((row["time"] for row in rows if (row["fitness"] or -math.inf) >= TARGET), math.inf)


def per_member(rows: list[dict]) -> dict[int, list[dict]]:
    members: dict[int, list[dict]] = {}
    for row in rows:
        members.setdefault(row["id"], []).append(row)
    return members


def best_so_far(rows: list[dict]) -> list[tuple[float, float]]:
    curve, best = [], -math.inf
    for row in rows:
        best = max(best, row["fitness"] if row["fitness"] is not None else -math.inf)
        curve.append((row["time"], best))
    return curve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--budget", type=float, default=150.0, help="seconds per evolve.py run at most")
    parser.add_argument("--plot", type=Path)
    args = parser.parse_args()
    print(f"# {time.strftime('%Y-%m-%d')} {platform.processor() or platform.machine()}, "
          f"{__import__('os').cpu_count()} CPUs; CartPole-v1 target {TARGET:.0f}; budget {args.budget:.0f}s")
    ratios, curves = [], {}
    for seed in args.seeds:
        with tempfile.TemporaryDirectory() as folder:
            pbt = evolve(seed, args.budget, Path(folder) / "pbt", fixed=False)
            fixed = evolve(seed, args.budget, Path(folder) / "fixed", fixed=True)
        pbt_time = first_time(pbt)
        members = per_member(fixed)
        fixed_times = {member: first_time(rows) for member, rows in members.items()}
        median = statistics.median(fixed_times.values())
        ratio = pbt_time / median if math.isfinite(median) else 0.0
        ratios.append(ratio)
        rates = {member: rows[0]["hparams"]["train.lr"] for member, rows in members.items()}
        print(f"seed {seed}: PBT {pbt_time:.1f}s ({len(pbt)} rounds) | fixed "
              + ", ".join(f"lr={rates[m]:.2g}: {t:.1f}s" for m, t in sorted(fixed_times.items()))
              + f" | median {median:.1f}s | PBT / median = {ratio:.2f}"
              + (" (median never reached the target: PBT wins)" if not math.isfinite(median) else ""))
        curves[seed] = (best_so_far(pbt), {f"lr={rates[m]:.2g}": best_so_far(rows) for m, rows in members.items()})
    print(f"median over {len(ratios)} seed(s): PBT time / median fixed time = {statistics.median(ratios):.2f} "
          f"(< 1: PBT faster)")
    if args.plot:
        plot(curves, args.plot)


def plot(curves: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(curves), figsize=(5.5 * len(curves), 3.8), squeeze=False)
    for axis, (seed, (pbt, fixed)) in zip(axes[0], curves.items()):
        axis.plot(*zip(*pbt), color="C3", linewidth=2, label="PBT (best member)")
        for label, curve in fixed.items():
            axis.plot(*zip(*curve), linewidth=1, alpha=0.8, label=f"fixed {label}")
        axis.axhline(TARGET, color="grey", linestyle="--", linewidth=1)
        axis.set(title=f"CartPole-v1, seed {seed}", xlabel="wall-clock seconds", ylabel="best evaluation so far")
        axis.legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
