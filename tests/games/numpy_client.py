"""A thin game client of the policy service, written from docs/games.md with numpy, msgpack and the standard library
only (no torch, no Lamarckian): ``AGENTS`` CartPole agents (the physics of gymnasium's CartPole-v1, in numpy) ask the
service for their actions and report rewards and episode ends.

    python tests/games/numpy_client.py tcp://127.0.0.1:PORT SECRET_FILE AGENTS SECONDS

Prints one JSON line: episodes finished, the returns of each in order, and the modules that were imported.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import socket
import struct
import sys
import time

import msgpack
import numpy as np


class CartPole:
    """gymnasium's CartPole-v1 dynamics (Euler, 0.02 s), terminated outside ±2.4 m or ±12°, truncated at 500."""

    def __init__(self, random: np.random.Generator) -> None:
        self.random = random
        self.reset()

    def reset(self) -> np.ndarray:
        self.state, self.steps, self.total = self.random.uniform(-0.05, 0.05, 4), 0, 0.0
        return self.state.astype(np.float32)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool]:
        x, x_dot, theta, theta_dot = self.state
        force = 10.0 if action == 1 else -10.0
        cos, sin = np.cos(theta), np.sin(theta)
        temp = (force + 0.05 * theta_dot**2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos**2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        self.state = np.array([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, theta + 0.02 * theta_dot,
                               theta_dot + 0.02 * theta_acc])
        self.steps += 1
        self.total += 1.0
        terminated = bool(abs(self.state[0]) > 2.4 or abs(self.state[2]) > 12 * 2 * np.pi / 360)
        return self.state.astype(np.float32), 1.0, terminated, self.steps >= 500 and not terminated


def send(sock: socket.socket, message: dict) -> None:
    body = msgpack.packb(message, use_bin_type=True)
    sock.sendall(struct.pack(">I", len(body)) + body)


def receive(sock: socket.socket, buffer: bytearray) -> dict:
    while True:
        if len(buffer) >= 4:
            (length,) = struct.unpack_from(">I", buffer)
            if len(buffer) >= 4 + length:
                body = bytes(buffer[4:4 + length])
                del buffer[:4 + length]
                return msgpack.unpackb(body, raw=False)
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the service closed the connection")
        buffer += chunk


def main() -> None:
    address, secret_file, agents, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    secret = open(secret_file, "rb").read().strip()
    for attempt in range(300):                                          # the actors listen once they sample
        try:
            sock = socket.create_connection((host, int(port)), timeout=30)
            break
        except ConnectionRefusedError:
            time.sleep(0.1)
    else:
        raise SystemExit(f"nothing listens at {address}")
    buffer = bytearray()
    challenge = receive(sock, buffer)                                   # the handshake (docs/games.md)
    own = os.urandom(32)
    send(sock, {"type": "auth", "version": 1, "nonce": own,
                "proof": hmac.new(secret, b"client" + challenge["nonce"] + own, hashlib.sha256).digest()})
    hello = receive(sock, buffer)
    expected = hmac.new(secret, b"server" + own + challenge["nonce"], hashlib.sha256).digest()
    if hello.get("type") != "hello" or not hmac.compare_digest(hello["proof"], expected):
        raise SystemExit(f"the service did not prove the secret: {hello!r:.200}")

    random = np.random.default_rng(0)
    games = [CartPole(random) for _ in range(agents)]
    returns: list[float] = []
    for number, game in enumerate(games):                               # every agent's first observation
        send(sock, {"type": "act", "agent": number, "observation": game.reset().tolist(), "reward": 0.0,
                    "done": False, "truncated": False})
    deadline = time.monotonic() + seconds
    sock.settimeout(0.5)
    while time.monotonic() < deadline:
        try:
            message = receive(sock, buffer)
        except TimeoutError:                                            # quiet: the trainer is updating
            continue
        except ConnectionError:                                         # the trainer is gone
            break
        number = message.get("agent")
        if message["type"] == "action":
            game = games[number]
            observation, reward, terminated, truncated = game.step(int(message["action"]))
            done = terminated or truncated
            report = {"type": "act", "agent": number, "observation": observation.tolist(), "reward": reward,
                      "done": done, "truncated": truncated}
            if done:
                report["result"] = {"fitness": game.total, "win": None, "objectives": {}}
                returns.append(game.total)
            send(sock, report)
        elif message["type"] == "ended":                                # the next episode of that agent
            send(sock, {"type": "act", "agent": number, "observation": games[number].reset().tolist(),
                        "reward": 0.0, "done": False, "truncated": False})
        elif message["type"] == "error":                                # busy: try the agent again in a moment
            time.sleep(0.05)
            send(sock, {"type": "act", "agent": number, "observation": games[number].reset().tolist(),
                        "reward": 0.0, "done": False, "truncated": False})
    sock.close()
    print(json.dumps({"episodes": len(returns), "returns": returns,
                      "torch": "torch" in sys.modules,
                      "lamarckian": any(m.startswith("lamarckian") for m in sys.modules)}))


if __name__ == "__main__":
    main()
