"""One seat of a served game as a plain gymnasium environment (one blocking connection, one episode at a time):
for code that wants ``gymnasium.Env`` — ``gymnasium.vector.AsyncVectorEnv`` over a game server (bench/games.py
compares it with ``mdp.create: game``), or a quick look at a game from a notebook."""

from __future__ import annotations

import socket
from typing import Any

import gymnasium

from . import protocol
from .client import GameSettings, tls_context


class GameEnv(gymnasium.Env):
    """The first trainer seat of the game at ``settings.address`` (the server plays the others by its rule).

    Raises:
        ConnectionError: the server closed the connection; ``TimeoutError``: no answer within ``settings.timeout``;
        RuntimeError: the server answered with an ``error``.
    """

    def __init__(self, settings: GameSettings) -> None:
        host, port = protocol.parse_address(settings.address)
        self.sock = socket.create_connection((host, port), timeout=settings.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        context = tls_context(settings)
        if context is not None:
            self.sock = context.wrap_socket(self.sock, server_hostname=settings.tls_name or host)
        self.hello = protocol.client_handshake(self.sock, protocol.read_secret(settings.secret))
        self.max_frame = int(self.hello.get("max_frame", protocol.DEFAULT_MAX_FRAME))
        _, self.observation_space, self.action_space = protocol.player_specs(self.hello)[0]
        self.episode = 0

    def _ask(self, message: dict[str, Any]) -> dict[str, Any]:
        self.sock.sendall(protocol.pack(message))
        reply = protocol.receive(self.sock, self.max_frame)
        if reply.get("type") == "error":
            raise RuntimeError(f"the game server refused: {reply.get('message')}")
        return protocol.seat_states(reply, [self.observation_space], reply.get("type", "reply"))[0]

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.episode += 1
        state = self._ask({"type": "reset", "episode": self.episode, "seats": [0], "seed": seed})
        return state["observation"], {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        state = self._ask({"type": "step", "episode": self.episode,
                           "actions": [protocol.encode_action(action, self.action_space)]})
        truncated = state["truncated"]
        info = {"result": state["result"]} if state["done"] else {}
        return state["observation"], state["reward"], state["done"] and not truncated, truncated, info

    def close(self) -> None:
        self.sock.close()
