"""An Atari game from pixels with the shipped standard preprocessing: ``train.py -c mdp/gym/atari.yml`` for a fixed
time, then the training return (clipped, per life) and the evaluation score (whole games, the game's own score) over
env steps, beside a uniformly random policy's score measured in the same run on the same evaluation environment.

    python bench/atari.py [--game Breakout] [--minutes 20] [--plot docs/atari_breakout.png]
    python bench/atari.py --game Pong --threshold 18 --minutes 8 --changes train.device=cuda sample.actors=12 \
        --summary atari.json              # the GPU machine's PART=atari (bench/device/run.sh)

Prints the random policy's mean score, the evaluation scores at the start and the end, the mean training return of
the first and the last tenth of the run, and their ratios. ``--threshold``: the run also stops at the first
evaluation score at or above it, and the figures say when that was (env steps, seconds); ``--summary`` writes them
as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from learning import plot_panels  # noqa: E402

from lamarckian.config import load  # noqa: E402
from lamarckian.mdp import create_mdp  # noqa: E402
from lamarckian.record import read_rows  # noqa: E402


def random_score(game: str, episodes: int, seed: int = 0) -> float:
    """The mean evaluation score of uniformly random actions over ``episodes`` whole games."""
    config = load(["mdp/gym/atari.yml"], [f"mdp.gym.id=ALE/{game}-v5"])
    mdp = create_mdp(config["mdp"], seed=seed, evaluation=True)
    random = np.random.default_rng(seed)
    actions = mdp.describe()[0].action.n

    async def game_score() -> float:
        controller, total = mdp.reset(0).controllers[0], 0.0
        while await controller.ready():
            await controller(int(random.integers(actions)))
            total += controller.get_reward()
        return total

    scores = [asyncio.run(game_score()) for _ in range(episodes)]
    mdp.close()
    return statistics.mean(scores)


def scalar_series(run: Path, name: str) -> list[tuple[float, float]]:
    """``(env steps, value)`` of TensorBoard scalar ``name`` of the run at ``run`` (empty where it has none: a
    training return exists only once an episode ended)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    if name not in events.Tags().get("scalars", []):
        return []
    return [(float(event.step), float(event.value)) for event in events.Scalars(name)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default="Breakout")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--plot", type=Path, default=None, help="default: docs/atari_<game>.png")
    parser.add_argument("--root", type=Path, default=None, help="the run directory (default: a temporary one)")
    parser.add_argument("--threshold", type=float, default=None, help="also stop at this evaluation score")
    parser.add_argument("--changes", nargs="+", default=[], metavar="KEY=VALUE", help="-m edits of the run")
    parser.add_argument("--summary", type=Path, default=None, help="write the figures here (JSON)")
    arguments = parser.parse_args()
    root = arguments.root or Path(tempfile.mkdtemp(prefix="atari-"))
    reference = random_score(arguments.game, 8)
    print(f"random policy: {reference:.2f} mean score over 8 games of {arguments.game}", flush=True)
    stop = f"self.time >= {arguments.minutes * 60}" + (f" or self.fitness >= {arguments.threshold}"
                                                       if arguments.threshold is not None else "")
    completed = subprocess.run(
        [sys.executable, str(REPOSITORY / "train.py"), "-c", "mdp/gym/atari.yml", "-D", "-m",
         f"mdp.gym.id=ALE/{arguments.game}-v5", f"root={root}", "evaluator.progress=false",
         f"evaluator.terminate={stop}", *arguments.changes], cwd=REPOSITORY)
    if completed.returncode != 0:
        raise SystemExit(f"train.py failed with exit code {completed.returncode}")
    evaluations = read_rows(root / "evaluations.csv")
    training = scalar_series(root, "train/return")
    tenth = max(1, len(training) // 10)
    first, last = (statistics.mean(v for _, v in part) if part else math.nan
                   for part in (training[:tenth], training[-tenth:]))
    start, end = evaluations[0]["fitness"], evaluations[-1]["fitness"]
    print(f"{arguments.game}, {arguments.minutes:g} min, {evaluations[-1]['cost']:.0f} env steps")
    if training:
        print(f"training return (clipped, per life): first tenth {first:.2f}, last tenth {last:.2f}, "
              f"ratio {last / max(1e-9, first):.2f}")
    else:
        print(f"training return: no training episode ended in {arguments.minutes:g} min")
    print(f"evaluation score: start {start:.1f}, end {end:.1f}; random policy {reference:.2f}, "
          f"end / random {end / max(1e-9, reference):.2f}")
    reached = next((row for row in evaluations if arguments.threshold is not None
                    and row["fitness"] >= arguments.threshold), None)
    if arguments.threshold is not None:
        print(f"threshold {arguments.threshold:g}: " + (f"reached at {reached['cost']:.0f} env steps, "
                                                         f"{reached['time']:.0f} s" if reached else "not reached"))
    if arguments.summary is not None:
        arguments.summary.write_text(json.dumps({
            "game": arguments.game, "minutes": arguments.minutes, "threshold": arguments.threshold,
            "env_steps": evaluations[-1]["cost_now"], "seconds": evaluations[-1]["time"], "random": reference,
            "start": start, "end": end, "best": max(row["fitness"] for row in evaluations),
            "reached_steps": reached["cost"] if reached else None, "reached_seconds": reached["time"] if reached
            else None, "changes": arguments.changes}, indent=1))
    plot = arguments.plot or REPOSITORY / "docs" / f"atari_{arguments.game.lower()}.png"
    plot_panels([(f"{arguments.game}: training return (clipped, per life)", first, [("PPO", None, training)]),
                 (f"{arguments.game}: evaluation score (whole games)", reference,
                  [("PPO, deterministic", None, [(row["cost"], row["fitness"]) for row in evaluations])])],
                plot, ylabel="return")
    print(f"plot: {plot} (dashed: the first tenth's training return; the random policy's score)")


if __name__ == "__main__":
    main()
