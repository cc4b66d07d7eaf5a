"""Connect Four self-play (issue 16 §4): train ``-c mdp/pettingzoo/connect_four.yml`` for ``--minutes``, then play the
final policy (deterministic) against a uniformly random legal player and against the one-step lookahead rule
player, ``--games`` each with the seats alternating, and print its scores (win 1, draw ½) and the illegal moves
(asserted zero) — the random player's own score against the lookahead player is the reference of the same run.

    python bench/connect_four.py [--minutes 20] [--games 200] [--run DIR] [--skip-training]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY))

from lamarckian.config import load  # noqa: E402
from lamarckian.mdp import create_mdp  # noqa: E402
from lamarckian.record import Checkpoints  # noqa: E402
from lamarckian.rl import build_model  # noqa: E402


def play(config: dict, rule: str, games: int, choose: Callable[[dict], int]) -> tuple[float, int]:
    """``games`` games of ``choose`` (one seat, alternating) against the MDP's ``rule`` player: the mean score and the
    illegal moves made."""
    mdp = create_mdp({**config["mdp"], "pettingzoo": {**config["mdp"]["pettingzoo"], "rule": rule}}, seed=12345)
    scores, illegal = [], 0

    async def game(seat: int) -> None:
        nonlocal illegal
        episode = mdp.reset(seat)
        controller = episode.controllers[0]

        async def player() -> None:
            while await controller.ready():
                await controller(choose(controller.get_state()))

        await asyncio.gather(player(), *episode.ticks)
        result = controller.get_result()
        scores.append(result["win"])
        illegal += int(result["objectives"]["illegal"])

    for number in range(games):
        asyncio.run(game(number % 2))
    return float(np.mean(scores)), illegal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--games", type=int, default=200)
    parser.add_argument("--run", type=Path, help="run directory (default: a temporary one)")
    parser.add_argument("--skip-training", action="store_true", help="only evaluate the newest checkpoint of --run")
    args = parser.parse_args()
    run = args.run or Path(tempfile.mkdtemp(prefix="connect-four-"))
    if not args.skip_training:
        subprocess.run([sys.executable, str(REPOSITORY / "train.py"), "-c", "mdp/pettingzoo/connect_four.yml", "-D",
                        "-m", f"root={run}", f"evaluator.terminate=self.time >= {args.minutes * 60}"],
                       check=True, cwd=REPOSITORY)
    config = load([str(run / "config.yml")])
    path, state = Checkpoints(run / "checkpoints", 1).load_newest()
    mdp = create_mdp(config["mdp"], seed=0)
    model = build_model(mdp, config)
    model.load_state_dict(state["model"])
    model.eval()

    def policy(observation: dict) -> int:
        batch = torch.from_numpy(model.batcher([observation]))
        return int(model.act(batch, deterministic=True)[0][0])

    random = np.random.default_rng(0)

    def uniform(observation: dict) -> int:
        return int(random.choice(np.flatnonzero(observation["action_mask"])))

    started = time.monotonic()
    print(f"# {time.strftime('%Y-%m-%d')}; {path} ({state['cost']} env steps, {state['elapsed']:.0f} s of training); "
          f"{args.games} deterministic games per row, seats alternating")
    for name, rule, choose in (("policy vs random", "random", policy), ("policy vs lookahead", "lookahead", policy),
                               ("random vs lookahead (reference)", "lookahead", uniform)):
        score, illegal = play(config, rule, args.games, choose)
        print(f"{name:<32} score {score:.3f}  illegal moves {illegal}", flush=True)
        assert illegal == 0, f"{name}: {illegal} illegal moves"
    print(f"evaluated in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
