"""Pixel observations over the game protocol: env steps per second through a server that sends rendered frames,
against what that server can render, and the bytes of one step on the wire.

    python bench/game_pixels.py [--side 48] [--latency 10] [--episodes 64] [--seconds 20]

For each game (CartPole-v1 rendered by gymnasium's pygame renderer; the built-in Pong, rendered by numpy, its seat 1
played by the server's bot), the reference server runs with ``--pixels SIDE`` (every observation a SIDE x SIDE x 3
uint8 frame, sent as a typed array) and ``--latency``; 2 sampling actors (bench/games.py's, each in its own
process) run ``--episodes`` episodes each for ``--seconds`` (segments of 4 steps: a slow server's steps are counted
within the window). Beside it, in the same run: the same game stepped and
served without latency to 2 actors x 256 episodes (the bound of server, renderer and actors on this machine),
and the ideal ``2 · episodes / latency``. Ratio = achieved / min(ideal, bound).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

GAMES = {"CartPole-v1": ["--env", "CartPole-v1"], "Pong": ["--mdp", "pong", "--bot", "1"]}


def answer_bytes(side: int) -> int:
    """Bytes of one ``observation`` answer carrying a ``side x side x 3`` uint8 frame (a typed array), framing
    included (its size does not depend on the pixels)."""
    from lamarckian.games import protocol

    frame = np.zeros((side, side, 3), np.uint8)
    return len(protocol.pack({"type": "observation", "episode": 12345, "players": [
        {"observation": frame, "reward": 1.0, "done": False, "truncated": False}]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=48, help="pixels a side of the frames")
    parser.add_argument("--latency", type=float, default=10.0, help="milliseconds")
    parser.add_argument("--episodes", type=int, default=64, help="episodes per actor")
    parser.add_argument("--seconds", type=float, default=20.0)
    arguments = parser.parse_args()

    from games import Actors

    from tests.games.helpers import ServerProcess

    folder = Path(tempfile.mkdtemp(prefix="bench-pixels-"))
    actors = Actors()
    try:
        for name, game in GAMES.items():
            unbounded = ServerProcess(folder, [*game, "--pixels", str(arguments.side)])
            try:
                bound = actors.measure([f"mdp.game.address={unbounded.address}",
                                        f"mdp.game.secret={unbounded.secret}", "sample.envs=256",
                                        "sample.truncation=4"], arguments.seconds)
            finally:
                unbounded.stop()
            server = ServerProcess(folder, [*game, "--pixels", str(arguments.side), "--latency",
                                            f"{arguments.latency}ms"])
            try:
                rate = actors.measure([f"mdp.game.address={server.address}", f"mdp.game.secret={server.secret}",
                                       f"sample.envs={arguments.episodes}", "sample.truncation=4"], arguments.seconds)
            finally:
                server.stop()
            ideal = 2 * arguments.episodes / (arguments.latency / 1000)
            print(f"{name} at {arguments.side}x{arguments.side}x3 uint8 behind {arguments.latency:g} ms, 2 actors x "
                  f"{arguments.episodes} episodes: {rate:,.0f} round trips/s; bound without latency {bound:,.0f}/s, "
                  f"ideal {ideal:,.0f}/s, ratio {rate / min(ideal, bound):.2f}; {answer_bytes(arguments.side):,} bytes "
                  f"per answer on the wire ({arguments.side * arguments.side * 3:,} of them the frame)", flush=True)
    finally:
        actors.close()


if __name__ == "__main__":
    main()
