"""Real game-server processes for the tests: ``python -m lamarckian.games serve`` (or a deliberately broken one),
started on loopback, stopped with SIGTERM, their counters read from the JSON line they print at the end."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Sequence

from lamarckian.games import protocol
from lamarckian.games.client import GameSettings

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """A game server process; ``address`` once it listens."""

    def __init__(self, folder: Path, arguments: Sequence[str], port: int = 0, module: str = "lamarckian.games",
                 secret: Path | None = None) -> None:
        self.secret = secret or folder / "game.secret"
        protocol.write_secret(self.secret)
        self.address_file = folder / f"address-{time.monotonic_ns()}"
        command = [sys.executable, "-m", module, "serve", *arguments, "--secret", str(self.secret),
                   "--bind", f"tcp://127.0.0.1:{port}", "--address-file", str(self.address_file)]
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not self.address_file.exists() or not self.address_file.read_text().strip():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the game server did not start: {self.process.communicate()[1][-2000:]}")
            time.sleep(0.05)
        self.address = self.address_file.read_text().strip()

    def settings(self, **changes) -> GameSettings:
        values = {"address": self.address, "launch": None, "instances": 1, "start_timeout": 60.0,
                  "logs": str(self.secret.parent / "games"), "secret": str(self.secret), "connections": 2,
                  "timeout": 5.0, "max_episodes": 100_000, "tls": None, "tls_name": None, **changes}
        return GameSettings(**values)

    def stop(self) -> dict:
        """SIGTERM, then the server's counters (empty when it had died already)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        _, errors = self.process.communicate(timeout=30)
        self.errors = errors
        lines = [line for line in errors.splitlines() if line.startswith("{")]
        return json.loads(lines[-1]) if lines else {}


def play(mdps: list, seconds: float, seats: tuple[int, ...] = (0,)) -> dict[str, int]:
    """Random players in every MDP, episode after episode, for ``seconds`` in a new event loop; episodes finished
    (not lost), lost, and steps. Every episode still running at the end is cancelled."""
    import asyncio

    counts = {"finished": 0, "lost": 0, "steps": 0}

    async def seat(controller, space) -> None:
        while await controller.ready():
            await controller(space.sample())
            counts["steps"] += 1

    async def episodes(mdp) -> None:
        spaces = [mdp.describe()[s].action for s in seats]
        while True:
            episode = mdp.reset(*seats)
            await asyncio.gather(*(seat(c, s) for c, s in zip(episode.controllers, spaces)), *episode.ticks)
            lost = any(c.get_result().get("lost") for c in episode.controllers)
            counts["lost" if lost else "finished"] += 1

    async def main() -> None:
        tasks = [asyncio.ensure_future(episodes(mdp)) for mdp in mdps]
        await asyncio.sleep(seconds)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()
    return counts


@contextlib.contextmanager
def serving(command: Sequence[str], folder: Path) -> Iterator[tuple[str, Path]]:
    """A server of another language run as ``command --secret FILE``, once it printed ``serving tcp://HOST:PORT``
    (after any banner): (that address, the secret file); ended afterwards."""
    secret = folder / "game.secret"
    protocol.write_secret(secret)
    process = subprocess.Popen([*command, "--secret", str(secret)], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    try:
        assert process.stdout is not None
        address = next((line.split()[1] for line in process.stdout if line.startswith("serving tcp://")), None)
        assert address is not None, f"{command[0]} ended before it listened"
        yield address, secret
    finally:
        process.terminate()
        process.wait(10)
