"""A relay server on a thread with fresh keys, and segments as a worker would send them."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterator

import numpy as np

from lamarckian.remote.client import Client
from lamarckian.remote.keys import AllowList, keygen, load_pair, load_public
from lamarckian.remote.server import RemoteServer, ServerSettings

WORKERS = ("alice", "bob")


class Relay:
    """Keys in ``folder`` (server, trainer, the allowed WORKERS, an unknown ``mallory``), a server serving them."""

    def __init__(self, folder: Path, settings: ServerSettings | None = None) -> None:
        self.keys, self.allowed = folder / "keys", folder / "keys" / "allowed"
        for name in ("server", "trainer", "mallory", *WORKERS):
            keygen(self.keys, name)
        self.allowed.mkdir()
        for name in WORKERS:
            (self.allowed / f"{name}.key").write_bytes((self.keys / f"{name}.key").read_bytes())
        pair, trainer = load_pair(self.keys / "server.key_secret"), load_public(self.keys / "trainer.key")
        self.allow = AllowList(self.allowed, exclude=(pair[0], trainer))
        self.server = RemoteServer("tcp://127.0.0.1:*", self.allow, pair, trainer, settings)
        self.thread = threading.Thread(target=self.server.serve, daemon=True)
        self.thread.start()
        self.clients: list[Client] = []

    def client(self, name: str, timeout: float = 5.0) -> Client:
        client = Client(self.server.endpoint, self.keys / f"{name}.key_secret", self.keys / "server.key", timeout)
        self.clients.append(client)
        return client

    def close(self) -> None:
        for client in self.clients:
            client.close()
        self.server.stop()
        self.thread.join(5)
        self.server.close()


def relay(folder: Path, settings: ServerSettings | None = None) -> Iterator[Relay]:
    server = Relay(folder, settings)
    try:
        yield server
    finally:
        server.close()


def segment(steps: int = 4, lanes: int = 2, width: int = 3, version: int = 0, fill: float = 0.5,
            observation_bytes: int = 0) -> dict:
    """A well-formed off-policy segment (wire form); ``observation_bytes`` pads observations to about that size."""
    if observation_bytes:
        width = max(width, observation_bytes // (4 * steps * lanes))
    observations = np.full((steps, lanes, width), fill, np.float32)
    return {"observations": observations, "actions": np.zeros((steps, lanes, 1), np.float32),
            "log_probs": np.zeros((steps, lanes), np.float32), "values": np.zeros((steps + 1, lanes), np.float32),
            "rewards": np.ones((steps, lanes), np.float32), "dones": np.zeros((steps, lanes), np.bool_),
            "truncated": np.zeros((steps, lanes), np.bool_), "final_values": np.zeros((steps, lanes), np.float32),
            "version": version, "steps": steps * lanes, "results": [{"fitness": -3.0}],
            "next_observations": observations.copy()}
